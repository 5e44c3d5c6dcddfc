"""Exit statuses tell the truth, and bench resume never mixes plans, writers or stale errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness._commands._exit import EXIT_INTERRUPTED, EXIT_JOB_FAILED, EXIT_TERMINATED
from harness._commands.cli import main
from harness._lockfile import lock_directory
from harness.bench.runner import BenchPlan, plan_jobs, run_bench
from harness.errors import ConfigError, EngineRequestError, UsageLimitExceeded
from harness.runs.resume import load_results
from harness.testing import ScriptedEngine

REPO = Path(__file__).resolve().parents[1]


class FailingEngine(ScriptedEngine):
    """A test double: every request whose prompt mentions ``marker`` raises ``error``."""

    def __init__(self, marker: str, error: Exception) -> None:
        super().__init__()
        self.marker = marker
        self.error = error

    async def generate(self, messages: Any, tools: Any, settings: Any) -> Any:
        if any(self.marker in str(m.get("content")) for m in messages):
            raise self.error
        return await super().generate(messages, tools, settings)


def _plan(tmp_path: Path, **kw: Any) -> BenchPlan:
    base: dict[str, Any] = {
        "out": tmp_path, "task_ids": ("fan_out-02", "chain-00"), "arms": ("S",), "policies": ("gold",),
        "heuristic": False, "bfcl_simple": 0, "bfcl_parallel": 0, "latency_s": 0.0, "concurrency": 2,
    }  # fmt: skip
    base.update(kw)
    return BenchPlan(**base)


def _prompt_of(task_id: str) -> str:
    from harness.bench.workload import generate_tasks, task_by_id

    return task_by_id(generate_tasks(0), task_id).task.prompt[:40]


# -- harness run ---------------------------------------------------------------------------------


def test_harness_run_exits_1_and_names_the_error_kinds_when_an_arm_errored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(args: Any) -> Any:
        return FailingEngine(_prompt_of("fan_out-02"), EngineRequestError("server said 500"))

    monkeypatch.setattr("harness._commands.run.open_engine", failing)
    argv = [
        "run",
        "--task",
        "fan_out-02",
        "--engine",
        "scripted",
        "--latency",
        "0",
        "--arm",
        "S",
        "F",
    ]
    assert main(argv) == EXIT_JOB_FAILED
    err = capsys.readouterr().err
    assert "2 of 2 job(s) errored: EngineRequestError ×2" in err
    assert "server said 500" in err


def test_harness_run_writes_each_arm_to_the_trace_as_it_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.bench.jobs

    real = harness.bench.jobs.run_job
    calls = 0

    async def interrupted_second_arm(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt
        return await real(*args, **kwargs)

    monkeypatch.setattr(harness.bench.jobs, "run_job", interrupted_second_arm)
    trace = tmp_path / "trace.jsonl"
    argv = ["run", "--task", "fan_out-02", "--engine", "scripted", "--latency", "0",
            "--arm", "S", "F", "--trace", str(trace)]  # fmt: skip
    assert main(argv) == EXIT_INTERRUPTED
    assert [json.loads(line)["label"] for line in trace.read_text().splitlines()] == ["S"]


# -- harness bench -------------------------------------------------------------------------------


def test_a_different_plan_into_the_same_out_is_refused_with_what_changed(tmp_path: Path) -> None:
    anyio.run(run_bench, ScriptedEngine(), _plan(tmp_path, seed=0))
    with pytest.raises(ConfigError, match=r"another plan \(changed: seed 0 -> 1\).*another --out"):
        anyio.run(run_bench, ScriptedEngine(), _plan(tmp_path, seed=1))
    with pytest.raises(ConfigError, match=r"latency_s 0.0 -> 0.2"):
        anyio.run(run_bench, ScriptedEngine(), _plan(tmp_path, latency_s=0.2))
    with pytest.raises(ConfigError, match=r"model None -> 'other'"):
        anyio.run(run_bench, ScriptedEngine(), _plan(tmp_path, model="other"))
    engine = ScriptedEngine()  # the same plan, with another report gap: resumes, runs nothing
    anyio.run(run_bench, engine, _plan(tmp_path, declared_gap_pp=3.3))
    assert engine.requests == []


def test_results_without_a_plan_are_not_trusted(tmp_path: Path) -> None:
    anyio.run(run_bench, ScriptedEngine(), _plan(tmp_path))
    (tmp_path / "plan.json").unlink()
    with pytest.raises(ConfigError, match=r"no plan\.json"):
        anyio.run(run_bench, ScriptedEngine(), _plan(tmp_path))


def test_a_second_writer_to_the_same_out_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = lock_directory(tmp_path, lambda holder: ConfigError(holder))
    try:
        argv = ["bench", "--engine", "scripted", "--out", str(tmp_path), "--tasks", "chain-00",
                "--arms", "S", "--policy", "gold", "--bfcl", "0", "0", "--latency", "0"]  # fmt: skip
        assert main(argv) == 2
        assert f"is being written by pid {os.getpid()}" in capsys.readouterr().err
    finally:
        held.close()
    assert not (tmp_path / "results.jsonl").exists()


def test_engine_errors_are_run_again_on_resume_and_other_errors_only_when_asked(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path)
    outage = FailingEngine(_prompt_of("fan_out-02"), EngineRequestError("connection refused"))
    summary = anyio.run(run_bench, outage, plan)
    assert summary["errors"] == {"EngineRequestError": 1}
    assert summary["jobs"] == 2
    # the resume runs the engine's failure again (an outage is not a result)...
    stuck = FailingEngine(_prompt_of("fan_out-02"), UsageLimitExceeded("stuck"))
    summary = anyio.run(run_bench, stuck, plan)
    assert summary["errors"] == {"UsageLimitExceeded": 1}
    # ...but keeps a budget error as a result
    engine = ScriptedEngine()
    summary = anyio.run(run_bench, engine, plan)
    assert engine.requests == []
    assert summary["errors"] == {"UsageLimitExceeded": 1}
    # unless asked to retry it
    summary = anyio.run(lambda: run_bench(ScriptedEngine(), plan, retry_failed=True))
    assert summary["errors"] == {}
    jobs = load_results(tmp_path / "results.jsonl")
    assert len(jobs) == len(plan_jobs(plan)) == 2  # each job once, its last run
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 2 + 1 + 1


def test_harness_bench_exits_1_and_prints_the_error_kinds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(args: Any) -> Any:
        return FailingEngine(_prompt_of("chain-00"), EngineRequestError("HTTP 503"))

    monkeypatch.setattr("harness._commands.bench.open_engine", failing)
    argv = ["bench", "--engine", "scripted", "--out", str(tmp_path), "--tasks", "chain-00", "fan_out-02",
            "--arms", "S", "--policy", "gold", "--bfcl", "0", "0", "--latency", "0", "--no-heuristic"]  # fmt: skip
    assert main(argv) == EXIT_JOB_FAILED
    assert "1 of 2 job(s) errored: EngineRequestError ×1" in capsys.readouterr().err
    assert main(["bench", "--report-only", str(tmp_path)]) == EXIT_JOB_FAILED


def test_sigterm_stops_a_bench_with_status_143_and_keeps_finished_jobs(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "harness._commands.cli", "bench", "--engine", "scripted", "--out", str(tmp_path),
            "--tasks", "fan_out-02", "chain-00", "fan_out-06", "--arms", "S", "--policy", "gold",
            "--bfcl", "0", "0", "--latency", "0.3", "--concurrency", "1", "--no-heuristic"]  # fmt: skip
    child = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = tmp_path / "results.jsonl"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not (results.exists() and results.read_text()):
        time.sleep(0.05)  # wait for the first finished job
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == EXIT_TERMINATED, err.decode()
    assert b"Stopped by SIGTERM" in err
    assert b"rerun the same command to resume" in err
    jobs = load_results(results)
    assert jobs
    assert len(jobs) < 3
    assert all(line.endswith("}") for line in results.read_text().splitlines())


def test_a_journaled_harness_run_stopped_by_sigterm_resumes_and_repeats_no_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "harness._commands.cli", "run", "--task", "mixed-04", "--engine", "scripted",
            "--arm", "S", "F", "--latency", "0.4", "--journal", str(run_dir)]  # fmt: skip
    child = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    journal = run_dir / "S" / "journal" / "journal.jsonl"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and _outcomes(journal) < 2:
        time.sleep(0.05)  # two calls of arm S done
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == EXIT_TERMINATED, err.decode()
    assert f"harness run --resume {run_dir}".encode() in err
    ends = [json.loads(line) for line in journal.read_text().splitlines() if '"end"' in line]
    assert ends[-1]["finished"] is False  # flushed: the stop is on disk
    assert main(["run", "--resume", str(run_dir), "--engine", "scripted", "--json"]) == 0
    jobs = json.loads(capsys.readouterr().out)
    assert [j["label"] for j in jobs] == ["S", "F"]
    assert all(j["success"] for j in jobs)  # the final store is the task's expected one
    replayed = jobs[0]["summary"]["extra"]["journal"]
    assert len(replayed["replayed"]) >= 2


def _outcomes(journal: Path) -> int:
    return journal.read_text().count('"kind": "outcome"') if journal.exists() else 0


def test_resume_options_that_cannot_work_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--resume", str(tmp_path), "--engine", "scripted"]) == 2
    assert "is not a journaled `harness run`" in capsys.readouterr().err
    argv = ["run", "--task", "chain-00", "--resume", str(tmp_path), "--engine", "scripted"]
    assert main(argv) == 2
    assert "drop --task" in capsys.readouterr().err
    assert main(["run", "--engine", "scripted"]) == 2
    assert "needs --task ID" in capsys.readouterr().err


def test_a_reader_that_stops_early_ends_the_command_quietly_with_sigpipe_s_status() -> None:
    """``harness tasks list --json | head -c 10``: no traceback, the status a command killed by
    SIGPIPE has (128 + 13), as with any Unix filter. The pipe is made one page small, so the
    listing (~6 kB) cannot fit in it before the reader goes away."""
    fcntl = pytest.importorskip("fcntl")
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, 1031, 4096)  # F_SETPIPE_SZ (Linux)
    process = subprocess.Popen(
        [sys.executable, "-m", "harness._commands.cli", "tasks", "list", "--json"], stdout=write_end,
        stderr=subprocess.PIPE, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    os.close(write_end)
    assert os.read(read_end, 10)
    os.close(read_end)
    _, stderr = process.communicate(timeout=60)
    error = stderr.decode()
    assert process.returncode == 128 + signal.SIGPIPE, error
    assert "Traceback" not in error
