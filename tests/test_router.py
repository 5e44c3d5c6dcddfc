"""Claims about prefix-affine routing over several replicas: loops stick, unreachable replicas
lose their loops at once, load spills over within its bound, round-robin is the control.
The HTTP tests use httpx.MockTransport, never a socket."""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from typing import Any

import anyio
import httpx
import pytest

from harness._commands._engine_args import EngineOptions, add_engine_arguments, open_engine
from harness.engines.base import GenerationSettings
from harness.engines.openai_http import OpenAIHTTPEngine
from harness.engines.router import Router, conversation_key, split_base_urls
from harness.errors import ConfigError, EngineDeadError, EngineRequestError
from harness.messages import Message

pytestmark = pytest.mark.anyio

URLS = ["http://a.test/v1", "http://b.test/v1", "http://c.test/v1"]
OK = {
    "id": "x",
    "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}


def _chat(loop: int, turns: int = 0) -> list[Message]:
    chat: list[Message] = [
        {"role": "system", "content": "You are a loop."},
        {"role": "user", "content": f"task {loop}"},
    ]
    for t in range(turns):
        chat += [{"role": "assistant", "content": f"call {t}"}, {"role": "tool", "content": "r"}]
    return chat


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _engine(hosts: list[str], down: set[str] | None = None, **kwargs: Any) -> OpenAIHTTPEngine:
    down = down if down is not None else set()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host in down:
            raise httpx.ConnectError("refused", request=request)
        hosts.append(request.url.host)
        return httpx.Response(200, json=OK)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    kwargs.setdefault("backoff_s", 30.0)  # a retry on the same replica would time the test out
    return OpenAIHTTPEngine(URLS, "m", client=client, **kwargs)


async def test_every_turn_of_a_loop_goes_to_the_same_replica() -> None:
    hosts: list[str] = []
    by_loop: dict[int, set[str]] = defaultdict(set)
    async with _engine(hosts) as engine:
        for turn in range(4):
            for loop in range(30):
                await engine.generate(_chat(loop, turn), [], GenerationSettings())
                by_loop[loop].add(hosts[-1])
    assert all(len(replicas) == 1 for replicas in by_loop.values())
    assert {next(iter(r)) for r in by_loop.values()} == {"a.test", "b.test", "c.test"}


async def test_round_robin_spreads_a_loops_turns_over_every_replica() -> None:
    hosts: list[str] = []
    async with _engine(hosts, routing="round_robin") as engine:
        for turn in range(6):
            await engine.generate(_chat(0, turn), [], GenerationSettings())
    assert set(hosts) == {"a.test", "b.test", "c.test"}


def test_the_conversation_key_is_the_same_for_every_turn_and_differs_between_loops() -> None:
    assert conversation_key(_chat(1, 0)) == conversation_key(_chat(1, 5))
    assert conversation_key(_chat(1)) != conversation_key(_chat(2))


async def test_an_unreachable_replica_loses_its_loops_at_once_and_they_stay_moved() -> None:
    hosts: list[str] = []
    down: set[str] = set()
    clock = Clock()
    router = Router(URLS, clock=clock, retry_after_s=5.0)
    async with _engine(hosts, down, routing=router) as engine:
        homes = {}
        for loop in range(12):
            await engine.generate(_chat(loop), [], GenerationSettings())
            homes[loop] = hosts[-1]
        lost = [loop for loop, host in homes.items() if host == "a.test"]
        assert lost, "some loop should live on a.test"
        down.add("a.test")
        moved_to = {}
        with anyio.fail_after(5):  # no backoff on the dead replica (backoff_s is 30 s)
            for loop in lost:
                await engine.generate(_chat(loop, 1), [], GenerationSettings())
                moved_to[loop] = hosts[-1]
        assert set(moved_to.values()) <= {"b.test", "c.test"}
        assert router.replicas[0].failures == 1  # marked down once, then skipped
        # The replica comes back; its old loops stay where their prefix now is.
        down.clear()
        clock.now = 10.0
        for loop in lost:
            await engine.generate(_chat(loop, 2), [], GenerationSettings())
            assert hosts[-1] == moved_to[loop]
    assert router.moves == len(lost)


async def test_a_failed_replica_is_probed_by_the_next_request_after_its_pause() -> None:
    clock = Clock()
    router = Router(URLS[:2], clock=clock, retry_after_s=5.0)
    a = router.replicas[0]
    router.mark_down(a)
    assert all(router.choose(str(k)).index == 1 for k in range(20))
    clock.now = 5.0
    assert a.healthy(clock.now)
    router.mark_down(a)  # the probe failed: the pause doubles
    assert a.down_until == pytest.approx(15.0)


async def test_when_every_replica_is_down_the_error_names_each_url() -> None:
    async with _engine([], down={"a.test", "b.test", "c.test"}) as engine:
        with pytest.raises(EngineDeadError) as info:
            await engine.generate(_chat(0), [], GenerationSettings())
    for url in URLS:
        assert url in str(info.value)
    assert "All 3 replica(s) are down" in str(info.value)


async def test_a_request_the_replica_answered_with_an_error_is_not_moved() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.host)
        return httpx.Response(400, json={"error": {"message": "bad"}})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    async with OpenAIHTTPEngine(URLS, "m", client=client) as engine:
        with pytest.raises(EngineRequestError, match="HTTP 400"):
            await engine.generate(_chat(0), [], GenerationSettings())
    assert len(calls) == 1
    assert engine.router is not None
    assert all(r.healthy(0.0) for r in engine.router.replicas)


def test_load_spills_over_to_the_next_replica_within_the_bound() -> None:
    router = Router(URLS, load_factor=1.25)
    home = router.home("hot")
    chosen = []
    for _ in range(30):  # one hot key, every request still in flight
        total = sum(r.in_flight for r in router.replicas)
        bound = math.ceil(1.25 * (total + 1) / 3)
        replica = router.acquire("hot")
        assert replica.in_flight <= bound
        chosen.append(replica.index)
    assert chosen[0] == home.index
    assert len(set(chosen)) == 3
    assert max(r.in_flight for r in router.replicas) <= math.ceil(1.25 * 30 / 3)
    for replica in router.replicas:
        while replica.in_flight:
            router.release("hot", replica)
            last = replica.index
    assert router.acquire("hot").index == last  # it remembers where the key was last served


def test_base_urls_may_be_repeated_or_comma_separated_but_not_duplicated() -> None:
    assert split_base_urls(["http://a/v1, http://b/v1/", "http://c/v1"]) == [
        "http://a/v1",
        "http://b/v1",
        "http://c/v1",
    ]
    with pytest.raises(ConfigError, match="given twice"):
        split_base_urls("http://a/v1,http://a/v1")
    with pytest.raises(ConfigError, match="No base URL"):
        split_base_urls(" , ")


def test_bad_routing_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="round_robin"):
        Router(URLS, policy="random")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="load_factor"):
        Router(URLS, load_factor=1.0)
    with pytest.raises(ConfigError, match="routing must be"):
        OpenAIHTTPEngine(URLS, "m", routing="random")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="pass the router's base URLs"):
        OpenAIHTTPEngine(URLS[:2], "m", routing=Router(URLS))


async def test_the_cli_takes_several_base_urls_and_a_routing_policy() -> None:
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    args = parser.parse_args(
        [
            "--engine",
            "http",
            "--base-url",
            "http://a.test/v1,http://b.test/v1",
            "--base-url",
            "http://c.test/v1",
            "--routing",
            "round_robin",
        ]
    )
    async with open_engine(EngineOptions.from_args(args)) as engine:
        assert isinstance(engine, OpenAIHTTPEngine)
        assert engine.router is not None
        assert [r.url for r in engine.router.replicas] == URLS
        assert engine.router.policy == "round_robin"
    one = parser.parse_args(["--engine", "http", "--base-url", URLS[0]])
    async with open_engine(EngineOptions.from_args(one)) as engine:
        assert isinstance(engine, OpenAIHTTPEngine)
        assert engine.router is None
