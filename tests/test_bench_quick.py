"""Claims about ``harness bench --quick`` and how a bench tells model failures from harness ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness._commands.cli import main
from harness.bench.outcomes import outcome, outcome_counts, outcome_line
from harness.bench.runner import (
    QUICK_ARMS,
    QUICK_GOLD_TASKS,
    QUICK_MODEL_TASKS,
    BenchPlan,
    plan_jobs,
    quick_description,
    run_bench,
)
from harness.bench.segments import load_segments
from harness.testing import ScriptedEngine


def test_the_quick_plan_compares_S_F_and_P_on_two_n6_fan_out_tasks_and_two_feasible_ones() -> None:
    jobs = plan_jobs(BenchPlan(out=Path("q"), quick=True))
    gold = [j for j in jobs if j.spec.policy == "gold"]
    model = [j for j in jobs if j.spec.policy == "model"]
    assert {j.workload.id for j in gold if j.workload} == set(QUICK_GOLD_TASKS)
    assert all(j.workload is not None and j.workload.windows == (6,) for j in gold)
    assert sorted(j.spec.label for j in gold) == sorted(QUICK_ARMS * 2)
    # The model decides on tasks it can do: the easy family, with the levers, in every arm.
    assert {j.workload.id for j in model if j.workload} == set(QUICK_MODEL_TASKS)
    assert {j.workload.kind for j in model if j.workload} == {"easy_fan_out"}
    assert sorted(j.spec.label for j in model) == sorted(QUICK_ARMS * 2)
    assert all(j.spec.skill_tools and j.spec.open_slots for j in model)
    assert not any(j.spec.skill_tools or j.spec.open_slots for j in gold)
    assert not any(j.bfcl for j in jobs)
    assert len(jobs) == 12


def test_the_quick_plan_says_what_it_compares_and_what_it_skips() -> None:
    text = quick_description(BenchPlan(out=Path("q"), quick=True))
    assert "S vs F vs P" in text
    assert "gold policy" in text
    assert "model policy" in text
    assert "BFCL" in text
    assert "share one engine" in text
    ray = quick_description(BenchPlan(out=Path("q"), quick=True), distributed=True)
    assert "each Ray worker's engine" in ray


def test_the_quick_plan_on_the_scripted_engine_announces_only_the_jobs_it_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness._commands.cli import main

    assert main(["bench", "--quick", "--engine", "scripted", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert header.startswith("Quick comparison: arms S vs F vs P on the n = 6 fan-out tasks")
    assert "easy_fan_out-04" not in header  # the model-policy jobs do not run here
    assert "under the model policy" not in header
    assert "Skipped here: the model-policy jobs (the scripted engine replays" in header
    assert "6 jobs: 6 solved" in out


def _job(
    policy: str,
    success: bool,
    error: str | None = None,
    detector: str = "schema_sound",
    kind: str = "fan_out",
) -> dict[str, Any]:
    return {
        "policy": policy, "success": success, "error": error, "detector": detector, "kind": kind
    }  # fmt: skip


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (_job("gold", True), "solved"),
        (_job("model", True), "solved"),
        (_job("model", False), "model_failed"),
        (_job("model", False, "UsageLimitExceeded: stuck"), "model_failed"),
        # A chat that outgrew the context under the model policy: the model never finished.
        (_job("model", False, "ContextWindowExceeded: 8228 tokens"), "model_failed"),
        (_job("gold", False, "ContextWindowExceeded: 8228 tokens"), "harness_failed"),
        (_job("model", False, "EngineRequestError: HTTP 503"), "harness_failed"),
        (_job("model", False, "ReplayDivergence: unexpected"), "harness_failed"),
        (_job("gold", False), "harness_failed"),
        (_job("gold", False, "UsageLimitExceeded: stuck"), "harness_failed"),
        (_job("gold", True, "EngineDeadError: gone"), "harness_failed"),
        (_job("oracle", False), "harness_failed"),
        # The phase-heuristic control's misses under a forced policy are its false fills' cost:
        (_job("oracle", False, detector="phase_heuristic"), "control_failed"),
        (_job("oracle", False, "UsageLimitExceeded: stuck", "phase_heuristic"), "control_failed"),
        (_job("gold", False, detector="phase_heuristic"), "control_failed"),
        (_job("oracle", False, "EngineDeadError: gone", "phase_heuristic"), "harness_failed"),
        (_job("model", False, detector="phase_heuristic"), "model_failed"),
        # BFCL scores the calls made: a correct entry that then hit the stuck guard is solved
        # (R4 counts it), a workload task that hit a budget is not.
        (_job("model", True, "UsageLimitExceeded: stuck", kind="bfcl_simple"), "solved"),
        (_job("model", False, "UsageLimitExceeded: stuck", kind="bfcl_simple"), "model_failed"),
        (_job("model", True, "EngineDeadError: gone", kind="bfcl_simple"), "harness_failed"),
        (_job("model", True, "UsageLimitExceeded: stuck"), "model_failed"),
    ],
)
def test_a_miss_is_the_model_s_only_when_the_model_chose_and_no_engine_failed(
    job: dict[str, Any], expected: str
) -> None:
    assert outcome(job) == expected


def test_outcomes_are_counted_per_policy_with_zeros() -> None:
    counts = outcome_counts([_job("gold", True), _job("model", False), _job("model", True)])
    assert counts == {
        "gold": {"solved": 1, "model_failed": 0, "control_failed": 0, "harness_failed": 0},
        "model": {"solved": 1, "model_failed": 1, "control_failed": 0, "harness_failed": 0},
    }


def test_the_controls_misses_are_named_in_the_summary_line_and_do_not_fail_the_command() -> None:
    from harness._commands.bench import _exit_status

    jobs = [_job("oracle", True), _job("oracle", False, detector="phase_heuristic")]
    line = outcome_line(jobs)
    assert "1 the phase-heuristic control missed" in line
    assert line.endswith("0 harness failure(s)")
    assert _exit_status(jobs, Path("out")) == 0
    stuck = [_job("oracle", False, "UsageLimitExceeded: stuck", "phase_heuristic")]
    assert _exit_status(stuck, Path("out")) == 0


def _stuck(messages: Any, tools: Any) -> Any:
    """A model that repeats one call until the stuck-loop guard stops it."""
    return {"name": "list_docs", "arguments": {}}


def test_a_bench_whose_only_misses_are_the_model_s_exits_0_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def engine(args: Any) -> Any:
        return ScriptedEngine(_stuck)

    monkeypatch.setattr("harness._commands.bench.open_engine", engine)
    argv = ["bench", "--out", str(tmp_path), "--tasks", "fan_out-00", "--arms", "S",
            "--policy", "model", "--bfcl", "0", "0", "--latency", "0", "--no-heuristic"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "1 the model could not solve" in out
    assert "0 harness failure(s)" in out


def test_a_bench_records_every_segment_and_reports_their_total_and_the_full_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["bench", "--engine", "scripted", "--out", str(tmp_path), "--tasks", "fan_out-00",
            "chain-00", "--arms", "S", "--policy", "gold", "--bfcl", "0", "0", "--latency", "0",
            "--no-heuristic"]  # fmt: skip
    monkeypatch.setattr("sys.argv", ["harness", *argv])
    assert main(argv) == 0
    (tmp_path / "results.jsonl").write_text(
        (tmp_path / "results.jsonl").read_text().splitlines()[0] + "\n"
    )  # one job lost: the next invocation is a second segment
    assert main(argv) == 0
    segments = load_segments(tmp_path)
    assert [s["jobs_run"] for s in segments] == [2, 1]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["meta"]["bench_wall_s"] == pytest.approx(sum(s["wall_s"] for s in segments))
    report = (tmp_path / "report.md").read_text()
    assert "Command: `harness bench --engine scripted" in report
    assert "2 segment(s)" in report


def test_an_interrupted_segment_still_counts_in_the_wall_time(tmp_path: Path) -> None:
    plan = BenchPlan(
        out=tmp_path, task_ids=("chain-00", "fan_out-06"), arms=("S",), policies=("gold",),
        heuristic=False, bfcl_simple=0, bfcl_parallel=0, latency_s=0.4, concurrency=1,
    )  # fmt: skip

    async def interrupted() -> None:
        with anyio.move_on_after(3.0):  # chain-00 finishes, fan_out-06 (6 x 0.4 s calls) not
            await run_bench(ScriptedEngine(), plan)

    anyio.run(interrupted)
    (first,) = load_segments(tmp_path)
    assert first["jobs_run"] == 1
    assert first["wall_s"] >= 1.5  # the part of 3 s after the plan was loaded


def test_dtype_reaches_the_embedded_engine_and_quick_says_what_it_runs_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--dtype`` is a VLLMSettings override; the quick description is printed before the
    engine's minute of start-up, not after it."""
    import contextlib

    seen: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def fake_default_engine(model: Any, **overrides: Any) -> Any:
        seen.update(overrides, said=capsys.readouterr().out)
        raise RuntimeError("stop here")  # the engine never starts in a unit test
        yield  # pragma: no cover

    monkeypatch.setattr("harness.engines.vllm.open_default_engine", fake_default_engine)
    argv = ["bench", "--quick", "--out", str(tmp_path), "--dtype", "float32"]
    with pytest.raises(RuntimeError, match="stop here"):
        main(argv)
    assert seen["dtype"] == "float32"
    assert "Quick comparison" in seen["said"]
