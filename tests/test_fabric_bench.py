"""benchmarks/fabric_bench.py measures what it says, on any engine (here the scripted demo)."""

from __future__ import annotations

import pytest

from benchmarks.fabric_bench import GRAPH_VARIANTS, PLAN_VARIANTS, measure, report
from harness.testing import fabric_demo_engine as demo_engine


@pytest.mark.anyio
async def test_the_fabric_benchmark_attributes_the_run_to_each_mechanism():
    doc = await measure(demo_engine(overhead_ms=5, decode_ms_per_token=0.1), runs=1)
    assert set(doc["batch"]["relative"]) == {1, 2, 4, 8}
    graph = {name: runs[0] for name, runs in doc["graph"]["variants"].items()}
    assert set(graph) == set(GRAPH_VARIANTS)
    # 8 single passes + 6 x 3 samples, whatever runs them
    assert {v["inferences"] for n, v in graph.items() if n != "-consensus"} == {26}
    assert graph["-consensus"]["inferences"] == 14
    assert graph["naive"]["rounds"] == 26 == graph["-batching"]["rounds"]
    assert graph["-layering"]["rounds"] == 14
    assert graph["fabric"]["rounds"] == 4
    plans = {name: runs[0] for name, runs in doc["plan_and_execute"]["variants"].items()}
    assert set(plans) == set(PLAN_VARIANTS)
    assert plans["naive"]["speculative"] == [] == plans["-speculation"]["speculative"]
    assert plans["fabric"]["speculative"][:4] == ["T1", "T2", "T3", "T4"]
    assert plans["naive"]["rounds"] == 28
    assert "CRP-PEF-Compute-Vs-Naive" in plans["fabric"]["headers"]
    assert doc["plan"]["plan_lines"]["tokens"] < doc["plan"]["json_lines"]["tokens"]
    text = report(doc)
    assert "naive / fabric: DAG" in text
    assert "-verification" in text
