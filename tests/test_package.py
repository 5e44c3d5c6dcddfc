"""Claims about the package as installed: a light import, a silent library, one import package
with its data, and a CLI that loads only the command it runs."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import harness
from harness._commands.cli import COMMANDS, build_parser, main

#: Modules that mean an engine, the fabric, the kit, a test double or the workload was loaded.
HEAVY = (
    "harness.engines.vllm",
    "harness.engines.openai_http",
    "harness.fabric",
    "harness.certkit",
    "harness.testing",
    "harness.bench",
    "harness.toolsets",
    "harness.loop",
    "httpx",
    "vllm",
    "pydantic",
)


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (the installed package, not this process's imports)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _loaded(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout.splitlines()[-1]))


def test_import_harness_prints_nothing_and_loads_only_the_errors(tmp_path: Path) -> None:
    done = _python(
        """
        import sys
        before = set(sys.modules)
        import harness
        harness.run_loop, harness.LoopConfig
        """,
        tmp_path,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    loaded = _loaded(
        _python(
            """
            import json, sys
            import harness
            print(json.dumps(sorted(sys.modules)))
            """,
            tmp_path,
        )
    )
    assert [name for name in loaded if name.startswith("harness")] == ["harness", "harness.errors"]
    assert not [name for name in loaded if name.startswith(HEAVY)]


@pytest.mark.parametrize(("level", "expected"), [("ERROR", "40 True"), ("", "0 False")])
def test_a_quiet_engine_drops_vllms_import_time_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: str, expected: str
) -> None:
    """With the quiet engine's VLLM_LOGGING_LEVEL=ERROR a warning vLLM logs while importing
    (before it configures its logging) is dropped, not printed by Python's last-resort
    handler."""
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", level)
    done = _python(
        """
        import logging
        import harness
        logger = logging.getLogger("vllm.triton_utils.importing")
        logger.warning("Triton is installed, but doesn't include CPU backend.")
        print(logging.getLogger("vllm").level, logger.isEnabledFor(logging.ERROR) and not logger.isEnabledFor(logging.WARNING))
        """,
        tmp_path,
    )
    assert done.stdout.strip() == expected
    assert ("Triton" in done.stderr) is (level == "")


def test_a_name_of_the_package_loads_its_module_on_first_use_only(tmp_path: Path) -> None:
    loaded = _loaded(
        _python(
            """
            import json, sys
            import harness
            harness.tool, harness.Manifest, harness.OpenAIHTTPEngine
            print(json.dumps(sorted(sys.modules)))
            """,
            tmp_path,
        )
    )
    assert {"harness.tools", "harness.skills.manifest", "harness.engines.openai_http"} <= set(
        loaded
    )
    assert "harness.engines.vllm" not in loaded
    assert "harness.fabric" not in loaded


def test_an_unknown_name_is_an_attribute_error_that_names_it() -> None:
    with pytest.raises(AttributeError, match="'Fabric'"):
        _ = harness.Fabric  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        from harness import window_costs  # type: ignore[attr-defined]  # noqa: F401


def test_the_root_exports_the_loop_and_leaves_the_cost_model_in_its_module() -> None:
    assert {"run_loop", "LoopConfig", "LoopResult", "tool", "Toolset", "Manifest", "Task"} <= set(
        harness.__all__
    )
    assert {"open_default_engine", "OpenAIHTTPEngine", "HarnessError"} <= set(harness.__all__)
    costmodel = importlib.import_module("harness.costmodel")
    assert not set(costmodel.__all__) & set(harness.__all__)


def test_dir_lists_the_lazy_names() -> None:
    assert set(harness.__all__) <= set(dir(harness))


def test_the_version_is_the_distributions() -> None:
    assert importlib.metadata.version("agent-harness") == harness.__version__


def test_the_library_is_silent_until_the_application_configures_logging(tmp_path: Path) -> None:
    script = """
        import logging, sys
        import anyio
        from harness import Task, Toolset, tool
        from harness.loop import LoopConfig, run_loop
        from harness.testing import ScriptedEngine

        @tool(read_only=True)
        async def read_doc(key: str) -> str:
            return key.upper()

        def model(messages, tools):
            return {"name": "read_doc", "arguments": {"key": "a"}} if len(messages) < 3 else "done"

        if sys.argv[-1] == "configured":
            logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(name)s %(message)s")

        async def main():
            task = Task(id="t", prompt="read a")
            result = await run_loop(ScriptedEngine(model), Toolset([read_doc]), task, LoopConfig(arm="S"))
            print("answer", result.answer)

        anyio.run(main)
    """
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    quiet = subprocess.run(
        [sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "answer done\n", "")
    loud = subprocess.run(
        [sys.executable, str(path), "configured"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert loud.stdout == "answer done\n"
    events = [line.split()[:2] for line in loud.stderr.splitlines()]
    assert ["harness.ledger", "turn"] in events
    assert ["harness.ledger", "call"] in events
    assert ["harness.ledger", "run"] in events


def test_help_and_version_load_no_command_module(tmp_path: Path) -> None:
    loaded = _loaded(
        _python(
            """
            import contextlib, io, json, sys
            from harness._commands.cli import main
            for argv in (["--help"], ["--version"]):
                with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
                    main(argv)
            print(json.dumps(sorted(sys.modules)))
            """,
            tmp_path,
        )
    )
    assert [name for name in loaded if name.startswith("harness")] == [
        "harness",
        "harness._commands",
        "harness._commands.cli",
        "harness.errors",
    ]


def test_help_lists_every_command_with_the_summary_its_module_registers() -> None:
    listing = build_parser(["--help"]).format_help()
    for name, summary in COMMANDS.items():
        assert name in listing
        full = build_parser([name])
        action = next(a for a in full._subparsers._group_actions if a.dest == "command")  # type: ignore[union-attr]
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        assert helps[name] == summary, f"harness._commands.{name} registers another summary"


def test_the_whole_parser_builds_every_command_for_references() -> None:
    whole = build_parser()
    action = next(a for a in whole._subparsers._group_actions if a.dest == "command")  # type: ignore[union-attr]
    for name, parser in action.choices.items():
        assert parser.description, f"{name} is a stub in the whole parser"
    args = whole.parse_args(["run", "--task", "fan_out-06", "--engine", "scripted", "-v"])
    assert (args.task, args.verbose) == ("fan_out-06", True)


def test_python_m_harness_is_the_harness_command(tmp_path: Path) -> None:
    here = str(Path(harness.__file__ or "").parents[1])  # this process's package, not another
    result = subprocess.run(
        [sys.executable, "-m", "harness", "--version"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": here},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"harness {harness.__version__}"


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"harness {harness.__version__}\n"


RUN = ["run", "--task", "fan_out-02", "--engine", "scripted", "--arm", "F", "--latency", "0"]


@pytest.mark.parametrize(
    "argv", [RUN, ["-v", *RUN], [*RUN, "-v"]], ids=["quiet", "v-first", "v-after"]
)
def test_v_before_or_after_the_subcommand_logs_every_event_to_stderr(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "fan_out-02" in captured.out
    turns = [line for line in captured.err.splitlines() if "] turn " in line]
    if "-v" in argv:
        assert turns, captured.err
        assert "[harness.ledger]" in turns[0]
    else:
        assert captured.err == ""


def test_log_json_writes_one_json_object_per_event(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--log-json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    kinds = {event["event"] for event in events}
    assert {"turn", "call", "window", "run"} <= kinds
    assert all(event["logger"] == "harness.ledger" for event in events)
    assert all({"level", "timestamp"} <= event.keys() for event in events)


def test_the_workspace_manifest_ships_as_package_data() -> None:
    from harness.toolsets.workspace import MANIFEST_PATH, load_workspace_manifest

    assert MANIFEST_PATH.is_file()
    assert "harness" in MANIFEST_PATH.parts
    assert load_workspace_manifest().skills


def test_the_distribution_installs_one_import_package() -> None:
    dist = importlib.metadata.distribution("agent-harness")
    installed = Path(str(dist.locate_file("harness/__init__.py")))
    wheel = dist.read_text("RECORD") is not None and installed.is_file()  # not an egg-info
    if not wheel or not installed.samefile(harness.__file__ or ""):
        pytest.skip("harness is imported from a checkout; `make test-minimal` checks the wheel")
    assert (dist.read_text("top_level.txt") or "").split() == ["harness"]
    tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
    assert tops == {"harness", f"agent_harness-{harness.__version__}.dist-info"}
    names = {str(f) for f in dist.files or ()}
    assert "harness/toolsets/workspace/workspace.toml" in names
    assert "harness/bench/runner.py" in names  # what `harness bench` runs
    assert "harness/bench/jobs.py" in names  # what `harness run` runs
    assert not [n for n in names if n.startswith("harness/benchmarks") or "/results/" in n]


def test_no_help_example_is_two_lines_joined_by_a_lost_backslash() -> None:
    """An example continued with ``\\`` in a help text must print the backslash: a bare one in
    the Python source joins the two lines into one unreadable line."""
    whole = build_parser()
    action = next(a for a in whole._subparsers._group_actions if a.dest == "command")  # type: ignore[union-attr]
    for name, parser in action.choices.items():
        for line in parser.format_help().splitlines():
            if line.lstrip().startswith("harness "):
                assert "      --" not in line, f"harness {name} --help: {line!r}"
