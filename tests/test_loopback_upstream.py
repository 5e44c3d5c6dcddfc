"""Claims about routing measured on real loopback upstreams (scripted OpenAI-compatible
servers, each its own process on 127.0.0.1, with a prefix cache that reports
``cached_tokens``): affine routing keeps the hits round-robin loses, and a killed upstream's
loops move to the survivors."""

from __future__ import annotations

import signal
from dataclasses import replace

import anyio
import httpx
import pytest

from benchmarks.loopback_upstream import PrefixCache, prompt_tokens
from benchmarks.scale_validate import measure, segment_message, start_upstreams
from harness.costmodel.routing import LoopShape, ReplicaProfile, task_turns
from harness.engines.base import GenerationSettings
from harness.engines.openai_http import OpenAIHTTPEngine

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

pytestmark = pytest.mark.anyio

FAST = ReplicaProfile(
    prefill_ms_per_token=0.0, decode_ms_per_token=0.0, overhead_ms=0.0, cache_tokens=10**7
)
SHAPE = LoopShape(system_tokens=64, task_tokens=32, windows=1, calls_per_window=3,
                  tool_latency_s=0.0)  # fmt: skip


def test_the_prefix_cache_hits_whole_blocks_and_evicts_conversations_from_their_tails() -> None:
    cache = PrefixCache(capacity_tokens=64, block_tokens=16)
    a = [f"a{i}" for i in range(40)]
    assert cache.serve(a) == 0
    assert cache.serve(a) == 32  # two whole blocks; the third is partial
    assert cache.serve([*a, *(f"x{i}" for i in range(10))]) == 32
    b = [f"b{i}" for i in range(48)]
    cache.serve(b)  # 3 blocks + a's 3 = 6 > 4: a loses its tail first
    assert cache.serve(a) == 16
    assert prompt_tokens([{"role": "user", "content": "two words"}]) == ["<user>", "two", "words"]


async def test_affine_routing_keeps_the_cache_hits_round_robin_loses_on_real_upstreams() -> None:
    rates = {}
    for policy in ("affine", "round_robin"):
        with start_upstreams(3, FAST) as upstreams:
            measured = await measure(
                upstreams.urls,
                # 8 loops on 3 upstreams, staggered: with a multiple of 3 in lockstep,
                # round-robin would hand each loop the same upstream every turn by accident.
                loops=8,
                policy=policy,  # type: ignore[arg-type]
                arm="S",
                tasks=2,
                shape=SHAPE,
                stagger_s=0.05,
            )
        # What the client was told, turn by turn, is what the upstreams counted (the same
        # turns: ``hit_rate`` is the steady-state window only, so it is not comparable).
        assert measured.upstream_hit_rate == pytest.approx(measured.all_turns_hit_rate, abs=1e-9)
        assert sum(measured.served) == 8 * 2 * len(task_turns(SHAPE, "S"))
        rates[policy] = measured.all_turns_hit_rate
    assert rates["affine"] > rates["round_robin"] + 0.1, rates


async def test_a_killed_upstreams_loops_move_to_the_survivor_and_finish() -> None:
    profile = replace(FAST, decode_ms_per_token=2.0)
    with start_upstreams(2, profile) as upstreams:
        urls = upstreams.urls
        async with httpx.AsyncClient() as probe:
            alive = [(await probe.get(f"{u}/stats")).status_code for u in urls]
        assert alive == [200, 200]
        async with OpenAIHTTPEngine(urls, "loopback", backoff_s=30.0) as engine:
            assert engine.router is not None
            chats = {
                loop: [segment_message(s, loop) for s in task_turns(SHAPE, "S")[0].prompt]
                for loop in range(8)
            }
            for chat in chats.values():
                await engine.generate(chat, [], GenerationSettings(max_tokens=4))
            first = [r.served for r in engine.router.replicas]
            assert all(first), f"both upstreams should hold loops: {first}"
            victim = upstreams.processes[0]
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=10)
            with anyio.fail_after(20):
                for chat in chats.values():
                    await engine.generate(chat, [], GenerationSettings(max_tokens=4))
            after = [r.served for r in engine.router.replicas]
            assert after[0] == first[0]  # nothing more went to the dead one
            assert after[1] == first[1] + 8
            assert engine.router.replicas[0].failures >= 1
            assert engine.router.moves == first[0]


async def test_one_upstream_is_measured_without_a_router_as_the_single_engine_baseline() -> None:
    with start_upstreams(1, FAST) as upstreams:
        measured = await measure(
            upstreams.urls, loops=3, policy="affine", arm="S", tasks=1, shape=SHAPE, stagger_s=0.0
        )
    assert measured.moves == 0
    assert measured.served == [3 * len(task_turns(SHAPE, "S"))]
    assert measured.upstream_hit_rate == pytest.approx(measured.all_turns_hit_rate, abs=1e-9)
