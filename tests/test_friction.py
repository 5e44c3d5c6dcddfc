"""What a new user hit, fixed: one-line usage errors (exit 2), "starting the engine…" before the
embedded engine's silent start, and no progress bar drawn into a log."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from harness._commands.cli import main
from harness._progress import Progress
from harness.testing import ScriptedEngine


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--task", "fan_out-00", "--arm", "X"], "argument --arm: invalid choice: 'X'"),
        (["run", "--task", "fan_out-00", "--policy", "nope"], "argument --policy: invalid choice"),
        (["bench", "--engine", "nope"], "argument --engine: invalid choice: 'nope'"),
        (["engine", "bogus"], "argument ACTION: invalid choice: 'bogus'"),
        (["frontier", "--n", "x"], "argument --n"),
    ],
)
def test_a_bad_choice_is_one_line_and_exit_2_not_the_usage_block(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert says in err
    assert err.count("\n") == 1, err  # one line
    assert "usage:" not in err
    assert f"(see `harness {argv[0]} --help`)" in err


def test_a_target_template_naming_a_missing_argument_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "bad_template.py"
    module.write_text(
        "from harness import Toolset, tool\n\n\n"
        "@tool(read_only=True, read_targets='note:{nope}')\n"
        "async def read_note(key: str) -> str:\n"
        '    """Read one note."""\n'
        "    return key\n\n\n"
        "toolset = Toolset([read_note])\n"
    )
    argv = ["run", "--toolset", f"{module}:toolset", "--prompt", "hi", "--engine", "scripted"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "read_targets template 'note:{nope}' uses ['nope'], which are not arguments" in err


@pytest.fixture
def fake_default_engine(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``open_default_engine`` replaced by the scripted engine; records when it was opened."""
    from harness.engines import vllm

    opened: list[str] = []

    @asynccontextmanager
    async def fake(*args: Any, **kwargs: Any) -> AsyncIterator[ScriptedEngine]:
        opened.append("opened")
        async with ScriptedEngine() as engine:
            yield engine

    monkeypatch.setattr(vllm, "open_default_engine", fake)
    return opened


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--task", "fan_out-00", "--arm", "S"],
        ["bench", "--tasks", "fan_out-00", "--arms", "S", "--policy", "gold", "--bfcl", "0", "0",
         "--no-heuristic"],
    ],
)  # fmt: skip
def test_the_embedded_engine_start_is_announced_on_stderr(
    argv: list[str],
    fake_default_engine: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if argv[0] == "bench":
        argv = [*argv, "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert fake_default_engine == ["opened"]
    assert captured.err.startswith("starting the engine…"), captured.err
    assert "starting the engine" not in captured.out


def test_no_announcement_for_an_engine_that_does_not_start(
    fake_default_engine: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--task", "fan_out-00", "--arm", "S", "--engine", "scripted"]) == 0
    assert "starting the engine" not in capsys.readouterr().err
    assert fake_default_engine == []


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_progress_bar_is_drawn_off_a_terminal() -> None:
    log = io.StringIO()
    bar = Progress(20, "jobs", stream=log, every=10)
    for i in range(20):
        bar.advance(f"job {i}", failed=i == 3)
    lines = log.getvalue().splitlines()
    assert len(lines) == 2  # every 10 items, no redraws
    assert lines[0].startswith("10/20 jobs  1 failed")
    assert not any("#" in line or "[" in line or "\r" in line for line in lines)


def test_a_terminal_gets_the_bar_redrawn_in_place() -> None:
    tty = _Terminal()
    bar = Progress(2, "jobs", stream=tty)
    bar.advance("a")
    bar.advance("b")
    text = tty.getvalue()
    assert text.count("\r") == 2
    assert "[" + "#" * 24 + "]" in text


def test_certify_help_lists_every_claim_the_kit_checks(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.certkit._report import CLAIMS

    with pytest.raises(SystemExit):
        main(["certify", "--help"])
    text = capsys.readouterr().out
    listed = text.split("Claims checked:", 1)[1].split("A false claim", 1)[0]
    names = {
        line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line[2] != " "
    }
    assert names == set(CLAIMS)


def test_the_help_summaries_say_your_own_tasks_are_accepted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "run a workload task or your own (one, or a batch)" in text
    assert "one workload task" not in text
    assert "the 48 seeded workload tasks and their gold labels" not in text


def test_serve_announces_its_embedded_engine_before_it_starts(
    fake_default_engine: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    import anyio

    from harness._commands.serve import _engine

    async def open_once() -> None:
        args = argparse.Namespace(upstream=None, drafting="none", model=None)
        async with _engine(args, None):
            assert capsys.readouterr().err.startswith("starting the engine…")

    anyio.run(open_once)
    assert fake_default_engine == ["opened"]
