"""`harness run --journal/--resume` from the command line: your own toolset and batches
journaled and resumed, and every journal that is missing, foreign, damaged or cannot be written
refused in one line (exit 2), nothing run."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness._commands.cli import main

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "docs" / "examples"
LEDGER_TOOLS = f"{EXAMPLES / 'ledger_tools.py'}:make_toolset"
LEDGER_TASKS = EXAMPLES / "ledger_tasks.jsonl"


def _ledger_batch(run_dir: Path, *extra: str) -> list[str]:
    return [
        "run", "--toolset", LEDGER_TOOLS, "--tasks", str(LEDGER_TASKS), "--engine", "scripted",
        "--policy", "gold", "--arm", "S", "--journal", str(run_dir), *extra,
    ]  # fmt: skip


def _one_line_error(err: str, says: str) -> None:
    assert err.startswith("error: "), err
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    assert says in err, err


def test_a_journaled_batch_of_your_own_tasks_killed_mid_write_resumes_without_repeating_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, run_dir = tmp_path / "ledger.txt", tmp_path / "run"
    env = {**os.environ, "LEDGER_FILE": str(ledger), "LEDGER_DELAY": "0.4", "PYTHONPATH": str(REPO)}
    argv = [
        sys.executable,
        "-m",
        "harness._commands.cli",
        *_ledger_batch(run_dir, "--concurrency", "1"),
    ]
    child = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_lines(ledger)) < 2:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)  # in the middle of the third write, or between writes
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    before = _lines(ledger)
    os.environ["LEDGER_FILE"] = str(ledger)
    try:
        assert main(["run", "--resume", str(run_dir), "--engine", "scripted"]) == 0
    finally:
        del os.environ["LEDGER_FILE"]
    out = capsys.readouterr().out
    after = _lines(ledger)
    assert after[: len(before)] == before
    assert len(after) == len(set(after))  # no entry written twice
    planned = {f"{m}: paid {p}" for m in ("jan", "feb") for p in ("ana", "bo", "cy")}
    lost = planned - set(after)
    assert "resumed (attempt 2)" in out
    if lost:  # a write in flight when killed is not run again: it is named, never repeated
        assert "outcome_unknown (not run again; check them): call_" in out
    assert len(lost) <= 1


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_journaled_batch_records_its_options_so_resume_needs_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_FILE", str(tmp_path / "ledger.txt"))
    run_dir = tmp_path / "run"
    assert main(_ledger_batch(run_dir)) == 0
    recorded = json.loads((run_dir / "run.json").read_text())
    assert recorded["kind"] == "user"
    assert recorded["tasks"] == str(LEDGER_TASKS)
    assert (run_dir / "results.jsonl").exists()
    assert len(list((run_dir / "jobs").glob("*/journal/journal.jsonl"))) == 2
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir), "--engine", "scripted"]) == 0
    assert "0 run now, 2 kept from before" in capsys.readouterr().out
    assert len(_lines(tmp_path / "ledger.txt")) == 6
    assert main(_ledger_batch(run_dir)) == 2  # a second --journal into it is refused
    _one_line_error(capsys.readouterr().err, "holds a journaled run already")


def _workload_run(run_dir: Path) -> None:
    argv = ["run", "--task", "mixed-04", "--engine", "scripted", "--arm", "S", "F",
            "--latency", "0", "--journal", str(run_dir)]  # fmt: skip
    assert main(argv) == 0


def _resume(run_dir: Path, *extra: str) -> int:
    return main(["run", "--resume", str(run_dir), "--engine", "scripted", *extra])


def test_resume_of_a_directory_that_holds_no_run_is_refused_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _resume(tmp_path / "never-created") == 2
    _one_line_error(capsys.readouterr().err, "is not a journaled `harness run`")
    assert not (tmp_path / "never-created").exists()


def test_resume_of_a_run_whose_journal_was_deleted_is_refused_not_started_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    _workload_run(run_dir)
    shutil.rmtree(run_dir / "F" / "journal")
    capsys.readouterr()
    assert _resume(run_dir) == 2
    _one_line_error(capsys.readouterr().err, "but no journal")
    shutil.rmtree(run_dir / "S")
    assert _resume(run_dir) == 2
    _one_line_error(capsys.readouterr().err, "Arm S's folder")


def test_resume_of_a_journal_of_another_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    _workload_run(run_dir)
    shutil.rmtree(run_dir / "S" / "journal")
    shutil.copytree(run_dir / "F" / "journal", run_dir / "S" / "journal")
    capsys.readouterr()
    assert _resume(run_dir) == 2
    _one_line_error(capsys.readouterr().err, "holds the journal of run 'mixed-04|F|gold'")


def test_resume_of_a_journal_damaged_before_its_tail_is_refused_unless_told_to_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    _workload_run(run_dir)
    journal = run_dir / "S" / "journal" / "journal.jsonl"
    lines = journal.read_text().splitlines()
    lines[4] = lines[4][:20]
    journal.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert _resume(run_dir) == 2
    _one_line_error(capsys.readouterr().err, "is damaged at line 5 (1 unreadable entry")
    assert _resume(run_dir, "--resume-damaged") == 0
    assert main(["run", "--task", "mixed-04", "--engine", "scripted", "--resume-damaged"]) == 2
    _one_line_error(capsys.readouterr().err, "--resume-damaged goes with --resume DIR")


@contextlib.contextmanager
def _tmpfs(path: Path, options: str) -> Iterator[Path]:
    """A small tmpfs mounted at ``path`` (skips the test where mounting is not allowed)."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _cli(
    argv: list[str], cwd: Path, *, fsize: int | None = None
) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "LEDGER_FILE": str(cwd / "ledger.txt"), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "harness._commands.cli", *argv], cwd=cwd, env=env, capture_output=True,
        text=True, preexec_fn=limit, timeout=120,
    )  # fmt: skip


def test_a_journal_that_outgrows_the_file_size_limit_stops_the_run_with_one_line(
    tmp_path: Path,
) -> None:
    done = _cli(_ledger_batch(tmp_path / "run", "--concurrency", "1"), tmp_path, fsize=2500)
    assert done.returncode == 2, done.stderr
    _one_line_error(done.stderr, "Cannot write to the journal in")
    assert "File too large (EFBIG)" in done.stderr
    assert "resume with `--resume`" in done.stderr
    journals = (tmp_path / "run" / "jobs").glob("*/journal/journal.jsonl")
    lines = [line for path in journals for line in path.read_text().splitlines()]
    entries = [json.loads(line) for line in lines if line.endswith("}")]
    intents = {e["call_id"] for e in entries if e["kind"] == "intent"}
    outcomes = {e["call_id"] for e in entries if e["kind"] == "outcome"}
    assert len(intents - outcomes) <= 1  # no call ran after the one whose record failed
    assert len(_lines(tmp_path / "ledger.txt")) <= len(intents)


def test_a_journal_on_a_full_disk_stops_the_run_with_one_line(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "small", "size=20k") as small:
        done = _cli(_ledger_batch(small / "run", "--concurrency", "1"), tmp_path)
    assert done.returncode == 2, done.stderr
    _one_line_error(done.stderr, "No space left on device (ENOSPC)")


def test_a_journal_in_a_read_only_directory_is_refused_with_one_line(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "ro", "ro,size=64k") as read_only:
        done = _cli(_ledger_batch(read_only / "run"), tmp_path)
        workload = _cli(["run", "--task", "mixed-04", "--engine", "scripted", "--arm", "S",
                         "--journal", str(read_only / "w")], tmp_path)  # fmt: skip
    for result in (done, workload):
        assert result.returncode == 2, result.stderr
        _one_line_error(result.stderr, "Read-only file system (EROFS)")
    assert not (tmp_path / "ledger.txt").exists()  # nothing ran


def test_one_task_of_your_own_journaled_and_resumed_replays_every_arm_and_writes_nothing_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness._commands import run_user
    from harness.testing import ScriptedEngine

    def model(messages: Any, tools: Any) -> Any:  # a model: one entry, then an answer
        return "Recorded." if messages[-1]["role"] == "tool" else {
            "name": "record", "arguments": {"entry": "mar: paid ana"},
        }  # fmt: skip

    @contextlib.asynccontextmanager
    async def engine(args: Any) -> Any:
        async with ScriptedEngine(model) as scripted:
            yield scripted

    monkeypatch.setattr(run_user, "open_engine", engine)
    monkeypatch.setenv("LEDGER_FILE", str(tmp_path / "ledger.txt"))
    run_dir = tmp_path / "run"
    argv = ["run", "--toolset", LEDGER_TOOLS, "--prompt", "Record the march payroll of ana.",
            "--engine", "http", "--base-url", "http://unused", "--journal", str(run_dir)]  # fmt: skip
    assert main(argv) == 0
    assert sorted(p.name for p in run_dir.iterdir()) == ["F", "S", "run.json"]
    assert _lines(tmp_path / "ledger.txt") == ["mar: paid ana"] * 2  # one per arm
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir), "--engine", "http", "--base-url", "x"]) == 0
    out = capsys.readouterr().out
    assert out.count("resumed (attempt 2): 2 turn(s) and 1 call(s) replayed") == 2
    assert _lines(tmp_path / "ledger.txt") == ["mar: paid ana"] * 2  # nothing ran again
