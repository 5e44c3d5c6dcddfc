"""benchmarks/fabric_bench.py measures what it says, on any engine (here the scripted demo)."""

from __future__ import annotations

import pytest

from harness.benchmarks.fabric_bench import measure, report
from harness.fabric import demo_engine


@pytest.mark.anyio
async def test_the_fabric_benchmark_measures_every_figure_on_a_scripted_engine():
    doc = await measure(demo_engine(overhead_ms=5, decode_ms_per_token=0.1), runs=1)
    graph = doc["graph"]
    assert graph["naive"]["rounds"] == 14
    assert graph["fabric"]["rounds"] == 4
    assert set(doc["batch_relative"]) == {1, 2, 4, 8}
    assert doc["plan_and_execute"]["figures"]["inferences"] == 28
    text = report(doc)
    assert "wall ratio naive/fabric" in text
    assert "CRP-PEF-Layers: 4/14" in text
