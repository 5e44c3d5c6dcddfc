"""Claims about the scale model: the closed forms across replicas and the seeded simulation
that checks them (determinism, affine vs round-robin, the bounds)."""

from __future__ import annotations

import pytest

from benchmarks.scale_sim import SimConfig, main, simulate
from harness.costmodel.routing import (
    LoopShape,
    ReplicaProfile,
    f_dividend_at_capacity,
    fleet_throughput_bound,
    hit_fraction,
    task_turns,
)
from harness.errors import ConfigError

SHAPE = LoopShape(windows=1, calls_per_window=4)
UNBOUNDED = ReplicaProfile(cache_tokens=10_000_000)


def test_the_same_seed_gives_the_same_table(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--replicas", "1,4", "--loops-per-replica", "20", "--tasks", "1", "--seed", "7"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    assert capsys.readouterr().out == first
    assert first.count("\n") == 2 + 2 * 2 * 2  # header + replicas × arms × policies
    config = SimConfig(loops=30, replicas=3, seed=1, shape=SHAPE)
    assert simulate(config) == simulate(config)
    assert simulate(config) != simulate(SimConfig(loops=30, replicas=3, seed=2, shape=SHAPE))


def test_f_and_s_make_the_same_turns_and_f_withholds_results_until_the_absorb() -> None:
    s, f = task_turns(SHAPE, "S"), task_turns(SHAPE, "F")
    assert len(s) == len(f) == 5
    assert [t.output_tokens for t in s] == [t.output_tokens for t in f]
    assert [seg.key for seg in f[3].prompt].count("marker") == 3
    assert [seg.key for seg in f[4].prompt] == [seg.key for seg in s[4].prompt]
    assert sum(t.wait_after_s for t in s) == pytest.approx(4 * SHAPE.tool_latency_s)
    assert sum(t.wait_after_s for t in f) == pytest.approx(SHAPE.tool_latency_s)


def test_round_robin_over_one_replica_is_affine_and_loses_hits_as_replicas_grow() -> None:
    one = hit_fraction(SHAPE, "S", UNBOUNDED, replicas=1, policy="round_robin")
    assert one == pytest.approx(hit_fraction(SHAPE, "S", UNBOUNDED, replicas=1, policy="affine"))
    rates = [
        hit_fraction(SHAPE, "S", UNBOUNDED, replicas=r, policy="round_robin") for r in (2, 4, 16)
    ]
    assert one > rates[0] > rates[1] > rates[2]
    assert hit_fraction(SHAPE, "S", UNBOUNDED, replicas=16, policy="affine") == pytest.approx(one)


def test_the_simulation_agrees_with_the_closed_form_hit_fraction_on_an_unbounded_cache() -> None:
    for policy in ("affine", "round_robin"):
        result = simulate(
            SimConfig(loops=64, replicas=4, policy=policy, tasks=3, shape=SHAPE, profile=UNBOUNDED)
        )
        closed = hit_fraction(SHAPE, "S", UNBOUNDED, replicas=4, policy=policy)
        assert result.hit_rate == pytest.approx(closed, abs=0.04), policy


def test_affine_routing_keeps_the_hit_rate_round_robin_loses_and_throughput_follows() -> None:
    affine = simulate(SimConfig(loops=200, replicas=8, policy="affine", shape=SHAPE))
    rr = simulate(SimConfig(loops=200, replicas=8, policy="round_robin", shape=SHAPE))
    # The shared system prompt hits everywhere; what round-robin loses is each loop's own
    # history, which the prefill lane then pays for.
    assert affine.hit_rate > rr.hit_rate + 0.04
    assert affine.turns_per_s > 1.3 * rr.turns_per_s
    assert affine.busiest_over_mean < 1.5


def test_simulated_throughput_never_exceeds_the_closed_form_bound() -> None:
    for loops, replicas in ((5, 2), (100, 2), (300, 8)):
        result = simulate(SimConfig(loops=loops, replicas=replicas, shape=SHAPE))
        assert result.turns_per_s <= result.bound_turns_per_s * 1.02
    bound = fleet_throughput_bound(SHAPE, "S", UNBOUNDED, loops=10_000, replicas=4, hit=0.9)
    assert bound.turns_per_s == bound.replicas_bound
    assert bound.saturation_loops < 10_000


def test_at_capacity_f_pays_for_the_window_its_absorb_turn_rewrites() -> None:
    s = hit_fraction(SHAPE, "S", UNBOUNDED, replicas=1, policy="affine")
    f = hit_fraction(SHAPE, "F", UNBOUNDED, replicas=1, policy="affine")
    assert f_dividend_at_capacity(SHAPE, UNBOUNDED, hit_s=s, hit_f=f) < 1.0
    assert f_dividend_at_capacity(SHAPE, UNBOUNDED, hit_s=0.0, hit_f=0.0) > 1.0


def test_bad_scale_inputs_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="replicas"):
        SimConfig(loops=1, replicas=0)
    with pytest.raises(ConfigError, match="policy"):
        SimConfig(loops=1, replicas=1, policy="random")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="arms S and F"):
        task_turns(SHAPE, "P")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_batch"):
        ReplicaProfile(max_batch=0)
    assert main(["--replicas", "0", "--loops", "1"]) == 2
