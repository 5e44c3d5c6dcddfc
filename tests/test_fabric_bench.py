"""benchmarks/fabric_bench.py measures what it says, on any engine (here the scripted demo)."""

from __future__ import annotations

import pytest

from benchmarks.fabric_bench import VARIANTS, measure, report
from harness.fabric import demo_engine


@pytest.mark.anyio
async def test_the_fabric_benchmark_attributes_the_run_to_each_mechanism():
    doc = await measure(demo_engine(overhead_ms=5, decode_ms_per_token=0.1), runs=1)
    assert set(doc["batch"]["relative"]) == {1, 2, 4, 8}
    variants = {name: runs[0] for name, runs in doc["variants"].items()}
    assert set(variants) == set(VARIANTS)
    # planner + 8 single passes + 6 x 3 samples + composer, whatever runs them
    assert {v["inferences"] for n, v in variants.items() if n != "-consensus"} == {28}
    assert variants["-consensus"]["inferences"] == 16
    assert variants["naive"]["rounds"] == 28 == variants["-batching"]["rounds"]
    assert variants["fabric"]["rounds"] <= 6
    assert variants["naive"]["speculative"] == [] == variants["-speculation"]["speculative"]
    assert variants["fabric"]["speculative"][:4] == ["T1", "T2", "T3", "T4"]
    assert "CRP-PEF-Compute-Vs-Naive" in variants["fabric"]["headers"]
    assert doc["plan"]["plan_lines"]["tokens"] < doc["plan"]["json_lines"]["tokens"]
    text = report(doc)
    assert "naive / fabric:" in text
    assert "-verification" in text
