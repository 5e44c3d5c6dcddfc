"""Each of the fabric's mechanisms switches off alone, the naive baseline is naive, and dispatch
scales: linear in nodes + edges, with a cap on requests in flight."""

from __future__ import annotations

import time

import pytest

from harness.errors import ConfigError
from harness.fabric import (
    EXAMPLE_TASK,
    Fabric,
    FabricConfig,
    Mechanisms,
    RepairPolicy,
    TaskGraph,
    example_graph,
    example_plan,
    llm_node,
    matches,
    plan_and_execute,
)
from harness.testing import ScriptedEngine
from tests.fabric_doubles import InstantEngine, echo, node_of, step

pytestmark = pytest.mark.anyio


def overlapping(engine: ScriptedEngine, a: str, b: str) -> bool:
    """Whether any request of node ``a`` was in flight together with one of node ``b``."""
    ra = [r for r in engine.requests if node_of(r.messages) == a]
    rb = [r for r in engine.requests if node_of(r.messages) == b]
    return any(x.started < y.finished and y.started < x.finished for x in ra for y in rb)


async def test_the_naive_baseline_never_speculates_and_sends_one_request_at_a_time():
    engine = ScriptedEngine(script=echo, decode_ms_per_token=0.5)
    config = FabricConfig(mechanisms=Mechanisms.naive())
    outcome = await plan_and_execute(engine, EXAMPLE_TASK, config=config, plan=example_plan())
    assert outcome.ok
    assert outcome.speculative == ()
    assert engine.max_in_flight == 1
    assert all(len(batch) == 1 for batch in engine.batches)
    figures = outcome.figures
    assert figures.inferences == figures.rounds == 28
    assert figures.batch_efficiency == 1.0


async def test_the_full_fabric_speculates_on_the_same_plan():
    engine = ScriptedEngine(script=echo, decode_ms_per_token=0.5)
    outcome = await plan_and_execute(engine, EXAMPLE_TASK, plan=example_plan())
    assert outcome.speculative[:4] == ("T1", "T2", "T3", "T4")
    assert engine.max_in_flight > 3
    assert outcome.figures.rounds <= 6


async def test_without_layering_nodes_run_one_at_a_time_but_consensus_stays_batched():
    engine = ScriptedEngine(script=echo, overhead_ms=1.0)
    config = FabricConfig(mechanisms=Mechanisms.without("layering"))
    result = await Fabric(engine, config=config).run(example_graph())
    assert result.ok
    assert not overlapping(engine, "T1", "T2")
    assert all(len(wave.nodes) == 1 for wave in result.waves)
    assert sorted(len(b) for b in engine.batches) == [1] * 8 + [3] * 6
    assert result.figures.rounds == 14


async def test_without_batching_one_request_runs_at_a_time_but_nodes_are_still_dispatched_together():
    engine = ScriptedEngine(script=echo, overhead_ms=1.0)
    config = FabricConfig(mechanisms=Mechanisms.without("batching"))
    result = await Fabric(engine, config=config).run(example_graph())
    assert result.ok
    assert engine.max_in_flight == 1
    assert result.waves[0].nodes == ("T1", "T2", "T3", "T4")
    assert result.figures.rounds == result.figures.inferences == 26


async def test_without_speculation_the_plan_is_parsed_whole():
    engine = ScriptedEngine(script=echo, decode_ms_per_token=0.5)
    config = FabricConfig(mechanisms=Mechanisms.without("speculation"))
    outcome = await plan_and_execute(engine, EXAMPLE_TASK, config=config, plan=example_plan())
    assert outcome.speculative == ()
    assert outcome.figures.rounds == 6 == outcome.figures.budget_rounds
    assert max(len(b) for b in engine.batches) > 3  # still layered and batched


async def test_without_consensus_every_node_runs_once_and_critical_checks_still_run():
    engine = ScriptedEngine(script=lambda m, t: "   " if node_of(m) == "C" else "ok")
    config = FabricConfig(
        mechanisms=Mechanisms.without("consensus"), repair=RepairPolicy(max_repairs=0)
    )
    nodes = [step("M", criticality="moderate", high_stakes=True), step("C", criticality="critical")]
    result = await Fabric(engine, config=config).run(nodes)
    assert len(engine.requests) == 2
    assert result.nodes["M"].ok
    assert result.nodes["C"].status == "failed"
    assert [v.verifier for v in result.nodes["C"].verdicts] == ["non_empty"]


async def test_without_verification_no_verifier_runs_and_nothing_is_repaired():
    engine = ScriptedEngine(script=echo)
    config = FabricConfig(mechanisms=Mechanisms.without("verification"))
    result = await Fabric(engine, config=config).run([step("A", verifiers=[matches("never")])])
    assert result.ok
    assert result.nodes["A"].verdicts == ()
    assert len(engine.requests) == 1


async def test_run_wide_verifiers_check_every_llm_node():
    engine = ScriptedEngine(script=echo)
    config = FabricConfig(verifiers=(matches("out"),))
    result = await Fabric(engine, config=config).run([step("A"), step("B")])
    assert [v.verifier for v in result.nodes["B"].verdicts] == ["matches('out')"]


def test_mechanisms_name_what_is_off_and_refuse_unknown_names():
    assert Mechanisms.naive().off == ("layering", "batching", "speculation")
    assert Mechanisms.naive().is_naive
    assert Mechanisms.without("consensus").off == ("consensus",)
    with pytest.raises(ConfigError, match=r"Unknown mechanism.*'batchin'"):
        Mechanisms.without("batchin")


# --------------------------------------------------------------------------------------------
# Scale: linear dispatch, a cap on requests in flight


async def test_dispatch_looks_at_each_node_once_per_incoming_edge_on_a_4000_deep_chain():
    nodes = [llm_node("n0", "go")] + [
        llm_node(f"n{i}", "go", [f"n{i - 1}"]) for i in range(1, 4000)
    ]
    engine = InstantEngine()
    started = time.perf_counter()
    async with Fabric(engine).open() as run:
        for node in nodes:
            run.add(node)
    elapsed = time.perf_counter() - started
    assert run.result is not None
    assert run.result.ok
    assert run.result.figures.rounds == 4000
    edges = len(nodes) - 1
    assert run._visits <= len(nodes) + edges  # O(nodes + edges), not O(nodes^2)
    print(f"4000-deep chain: {elapsed:.2f} s")  # for the record; no timing assertion


async def test_requests_in_flight_never_exceed_the_cap():
    engine = InstantEngine()
    config = FabricConfig(max_in_flight=4)
    wide = [llm_node(f"n{i}", "go", criticality="moderate", high_stakes=True) for i in range(50)]
    result = await Fabric(engine, config=config).run(TaskGraph(wide))
    assert result.ok
    assert engine.requests == 150
    assert engine.max_in_flight == 4


async def test_the_default_cap_holds_a_ten_thousand_wide_layer():
    engine = InstantEngine()
    result = await Fabric(engine).run([llm_node(f"n{i}", "go") for i in range(10_000)])
    assert result.ok
    assert engine.max_in_flight == FabricConfig().max_in_flight == 64


def test_a_cap_below_one_is_a_config_error():
    with pytest.raises(ConfigError, match="max_in_flight is 0"):
        FabricConfig(max_in_flight=0)
