"""Claims about the speculation benchmark's plumbing (scripted engine: no timing claims)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks.spec_bench import measure, report, summarise, survey_task
from harness._jsonl import read_jsonl
from harness.testing import ScriptedEngine

pytestmark = pytest.mark.anyio


def test_a_survey_task_has_one_window_of_n_reads() -> None:
    wt = survey_task(5, 0)
    assert wt.windows == (5,)
    assert len(wt.task.inputs["keys"]) == 5
    assert survey_task(5, 1).task.inputs != wt.task.inputs  # K loops read different documents


async def test_the_benchmark_records_every_arm_of_every_cell_and_resumes(tmp_path: Path) -> None:
    args = argparse.Namespace(
        n=[3], latency=[0.0], concurrency=[2], reps=1, arms=["F+eager", "F+spec", "P"], mixed=1
    )
    await measure(ScriptedEngine(), args, tmp_path)
    rows = read_jsonl(tmp_path / "results.jsonl")[0]
    assert len(rows) == 3 * 2 + 3  # three arms x K=2 loops, plus one mixed task per arm
    assert all(r["success"] for r in rows)
    spec = [r for r in rows if r["arm"] == "F+spec" and r["group"] == "fan_out"]
    assert all(r["speculation"]["hits"] == 3 for r in spec)
    await measure(ScriptedEngine(), args, tmp_path)  # finished cells are skipped
    assert len(read_jsonl(tmp_path / "results.jsonl")[0]) == len(rows)
    summary = summarise(rows)
    (cell,) = summary["fan_out"]
    assert cell["hit_rate"] == 1.0
    assert set(cell["wall_s"]) == {"F+eager", "F+spec", "P"}
    assert "| 2 | 0.0 | 3 |" in report(summary, {})
