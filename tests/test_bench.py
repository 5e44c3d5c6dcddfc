"""Claims about the benchmark: verdict logic, the regime estimator, resumption, the report."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from harness import costmodel
from harness.bench.analysis import (
    WindowMeasure,
    estimate_regime,
    measure_windows,
    span,
    verdict_null,
    verdict_r1,
    verdict_r2,
    verdict_r3,
    verdict_r4,
)
from harness.bench.runner import BenchPlan, plan_jobs, run_bench
from harness.costmodel import Regime
from harness.loop.arm_label import ArmLabel
from harness.runs.resume import load_results
from harness.testing import ScriptedEngine

NOMINAL = Regime()


def windows_with_dividend(fraction: float, n: int = 6, count: int = 4) -> list[WindowMeasure]:
    predicted = costmodel.wall_dividend_flattened(NOMINAL, n)
    out = []
    for i in range(count):
        w = WindowMeasure(f"t{i}", n, tuple(f"call_{k}" for k in range(n)))
        w.wall = {ArmLabel.S: 20.0, ArmLabel.F: 20.0 - fraction * predicted}
        out.append(w)
    return out


def test_R1_is_violated_when_the_measured_dividend_is_under_half_the_closed_form() -> None:
    verdict = verdict_r1(windows_with_dividend(0.3), NOMINAL)
    assert verdict.held is False
    assert verdict.figures["ratio"] == pytest.approx(0.3)
    assert "E[max L]" in verdict.summary


def test_R1_is_reported_but_not_judged_when_several_loops_shared_the_engine() -> None:
    """The closed form prices one loop alone; at K = 8 the ratio is a figure, not a verdict."""
    verdict = verdict_r1(windows_with_dividend(0.3), NOMINAL, loops=8)
    assert verdict.held is None
    assert verdict.figures["ratio"] == pytest.approx(0.3)
    assert verdict.figures["loops"] == 8
    assert "8 loops shared the engine" in verdict.summary
    assert "r1_dividend" in verdict.summary
    assert verdict_r1(windows_with_dividend(0.3), NOMINAL, loops=1).held is False


def test_R1_holds_at_or_above_half_and_ignores_windows_under_six() -> None:
    assert verdict_r1(windows_with_dividend(0.55), NOMINAL).held is True
    assert verdict_r1(windows_with_dividend(0.1, n=4), NOMINAL).held is None


def job(task: str, arm: str, *, kind: str = "fan_out", policy: str = "gold", success: bool = True,
        billed: int = 1000, wall: float = 10.0, windows: list[Any] | None = None,
        detector: str = "schema_sound", eager: bool = False) -> dict[str, Any]:  # fmt: skip
    return {
        "job_id": f"{task}|{arm}|{policy}|{detector}|{eager}", "task_id": task, "kind": kind, "arm": arm,
        "policy": policy, "detector": detector, "eager": eager, "success": success,
        "summary": {"billed_tokens": billed, "wall_s": wall}, "turns": [], "calls": [],
        "windows": windows or [],
    }  # fmt: skip


def test_R2_is_violated_when_F_bills_more_tokens_than_S() -> None:
    jobs = [
        job("a", "S", billed=1000),
        job("a", "F", billed=1200),
        job("b", "S", billed=900),
        job("b", "F", billed=950),
    ]
    verdict = verdict_r2(jobs)
    assert verdict.held is False
    assert verdict.figures["mean_tokens"] == pytest.approx(-125.0)
    assert verdict_r2([job("a", "S", billed=1000), job("a", "F", billed=800)]).held is True


def test_R3_is_violated_when_F_loses_more_than_the_budget_and_reports_false_fills() -> None:
    jobs = []
    for i in range(20):
        jobs.append(job(f"t{i}", "S", policy="model", success=True))
        jobs.append(job(f"t{i}", "F", policy="model", success=i != 0))
    jobs.append(
        job(
            "h",
            "F",
            detector="phase_heuristic",
            windows=[
                {"call_ids": ["a", "b"], "false_fill": True},
                {"call_ids": ["c"], "false_fill": False},  # one call: not a certified window
            ],
        )
    )
    verdict = verdict_r3(jobs, budget_pp=1.0)
    assert verdict.held is False
    assert verdict.figures["model"]["delta_pp"] == pytest.approx(-5.0)
    assert verdict.figures["false_fill_phase_heuristic"] == [1, 1]


def test_R3_holds_when_accuracy_is_equal() -> None:
    jobs = [job(f"t{i}", arm, success=i % 2 == 0) for i in range(10) for arm in ("S", "F")]
    assert verdict_r3(jobs).held is True


def test_R4_checks_the_gap_against_the_declared_band() -> None:
    assert verdict_r4((30, 32), (29, 32)).held is True  # 3.1pp
    outside = verdict_r4((20, 32), (5, 32))
    assert outside.held is False
    assert outside.figures["gap_pp"] == pytest.approx(100 * (20 - 5) / 32)
    assert verdict_r4((0, 0), (0, 0)).held is None


def test_the_null_arm_fails_if_a_chain_task_certifies_a_window() -> None:
    jobs = [job("c", "S", kind="chain", wall=10), job("c", "F", kind="chain", wall=10,
            windows=[{"call_ids": ["call_0", "call_1"]}])]  # fmt: skip
    assert verdict_null(jobs).held is False
    clean = [
        job(f"c{i}", arm, kind="chain", wall=10 + 0.01 * i) for i in range(4) for arm in ("S", "F")
    ]
    assert verdict_null(clean).held is True


def test_a_window_span_runs_from_the_first_call_turn_to_the_end_of_the_absorb_turn() -> None:
    turns = [{"turn": t, "started": 10.0 * t, "wall_s": 1.0, "purpose": "call"} for t in range(5)]
    calls = [{"call_id": "call_1", "turn": 1}, {"call_id": "call_2", "turn": 2}]
    assert span({"turns": turns, "calls": calls}, ["call_1", "call_2"]) == pytest.approx(
        30.0 + 1.0 - 10.0
    )
    assert span({"turns": turns, "calls": calls}, ["call_9"]) is None


def _plan(tmp_path: Path, **kw: Any) -> BenchPlan:
    base: dict[str, Any] = {
        "out": tmp_path, "task_ids": ("fan_out-06", "fan_out-12"), "arms": ("S", "F"), "policies": ("gold",),
        "heuristic": False, "bfcl_simple": 0, "bfcl_parallel": 0, "latency_s": 0.05, "concurrency": 1,
    }  # fmt: skip
    base.update(kw)
    return BenchPlan(**base)


class VirtualClock:
    """Injected time for a run: the clock the loop, the tool calls and the scripted engine
    read moves only when simulated work sleeps, by exactly what it asked for. What the run
    measures is then what the test injected, however busy the machine is (a real sleep of
    0.05 s measured 0.078 s under load). Only for runs that do one thing at a time (the
    sleeps of concurrent work would add up instead of overlapping)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)
        await anyio.lowlevel.checkpoint()


class _TimeWith:
    """The ``time`` module with ``monotonic`` read from a :class:`VirtualClock`."""

    def __init__(self, clock: VirtualClock) -> None:
        self.monotonic = clock.monotonic

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def virtual_clock(monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    clock = VirtualClock()
    for module in (
        "harness.tools.execute",
        "harness.loop.state",
        "harness.loop.driver",
        "harness.testing",
        "harness.bench.runner",
    ):
        monkeypatch.setattr(f"{module}.time", _TimeWith(clock))
    monkeypatch.setattr(anyio, "sleep", clock.sleep)  # the scripted engine's and the tools'
    return clock


def test_the_regime_estimator_recovers_injected_timings(
    tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    engine = ScriptedEngine(prefill_ms_per_token=2.0, decode_ms_per_token=10.0, overhead_ms=30.0)
    summary = anyio.run(run_bench, engine, _plan(tmp_path))
    assert virtual_clock.now > 1000.0  # the run's time was the injected clock's
    regime = Regime.from_json(summary["regime"])
    assert regime.prefill_ms_per_token == pytest.approx(2.0, rel=1e-6)
    assert regime.decode_ms_per_token == pytest.approx(10.0, rel=1e-6)
    assert regime.overhead_s == pytest.approx(0.030, abs=1e-6)
    assert regime.tool_latency_s == pytest.approx(0.05, abs=1e-6)
    # regime.json is the regime the report's frontier is priced at, each value labelled.
    on_disk = json.loads((tmp_path / "regime.json").read_text())
    source = on_disk.pop("source")
    assert on_disk == summary["facts"]["frontier_measured"]["regime"]
    assert source["prefill_ms_per_token"] == "measured"
    assert source["watts"] == "declared"
    assert Regime.from_json({**on_disk, "source": source}) == Regime.from_json(on_disk)
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# Benchmark report")
    assert "Frontier at the measured regime" in report  # every measurable parameter measured


def test_a_restarted_bench_skips_finished_jobs_and_reruns_a_torn_one(tmp_path: Path) -> None:
    plan = _plan(tmp_path, latency_s=0.0)
    anyio.run(run_bench, ScriptedEngine(), plan)
    path = tmp_path / "results.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == len(plan_jobs(plan)) == 4
    engine = ScriptedEngine()
    anyio.run(run_bench, engine, plan)
    assert engine.requests == []  # nothing re-ran
    path.write_text(
        "\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2]
    )  # a crash mid-write
    engine = ScriptedEngine()
    anyio.run(run_bench, engine, plan)
    assert engine.requests
    assert {j["job_id"] for j in load_results(path)} == {p.id for p in plan_jobs(plan)}


def test_measured_windows_pair_the_arms_of_one_task(tmp_path: Path) -> None:
    summary = anyio.run(
        run_bench, ScriptedEngine(), _plan(tmp_path, arms=("S", "F", "F+eager", "P"))
    )
    windows = measure_windows(load_results(tmp_path / "results.jsonl"))
    assert sorted(w.n for w in windows) == [6, 9]
    assert all(
        set(w.wall) == {ArmLabel.S, ArmLabel.F, ArmLabel.F_EAGER, ArmLabel.P} for w in windows
    )
    assert {row["n"] for row in summary["per_n"]} == {6, 9}


def test_the_regime_estimate_keeps_nominal_values_it_cannot_measure() -> None:
    regime = estimate_regime([], base=Regime(gap_pp=3.3))
    assert regime == Regime(gap_pp=3.3)


def test_a_bfcl_run_scores_distinct_calls_even_when_the_model_repeats_itself() -> None:
    pytest.importorskip("bfcl_eval", reason="the BFCL data: pip install --no-deps bfcl-eval")
    from harness.bench.bfcl import load_entries
    from harness.bench.runner import _spec, run_bfcl_job

    entry = load_entries("simple")[0]
    gold = entry.gold_calls()[0]

    def repeat(messages: Any, tools: Any) -> Any:
        return {"name": gold.name, "arguments": dict(gold.arguments)}

    job = anyio.run(
        run_bfcl_job, ScriptedEngine(repeat), entry, _spec(_plan(Path(".")), "S", "model")
    )
    assert job["success"] is True
    assert "stuck" in (job["error"] or "")

    def wrong(messages: Any, tools: Any) -> Any:
        return {"name": gold.name, "arguments": {}}

    job = anyio.run(
        run_bfcl_job, ScriptedEngine(wrong), entry, _spec(_plan(Path(".")), "S", "model")
    )
    assert job["success"] is False
