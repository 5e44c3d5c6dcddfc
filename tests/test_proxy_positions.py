"""Claims about the proxy's cached phase positions (harness.proxy.positions): a proxy that
resumes each request from a cached replay answers exactly as a cold proxy that replays every
request's whole history, over multi-window conversations, repeated and out-of-order requests.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from benchmarks.proxy_bench import GoldForcing, run_calls, workspace_effects
from harness.bench.workload import WorkloadTask, generate_tasks
from harness.loop.state import DEFAULT_LOOP_SYSTEM
from harness.messages import Message, ToolCall
from harness.proxy import ProxyConfig, build_app, in_process_client
from harness.proxy.positions import HistoryCall, PositionCache, history_calls
from harness.testing import ScriptedEngine
from harness.toolsets.workspace import load_workspace_manifest

pytestmark = pytest.mark.anyio

SECRET = b"positions-test-secret"


def _tasks() -> list[WorkloadTask]:
    """Every mixed task (one or two windows, serial calls around them, windows closed by a
    call of the next phase), two fan-out tasks and two chain tasks (no window certifies)."""
    tasks = generate_tasks()
    mixed = [t for t in tasks if t.kind == "mixed"]
    fan_out = [t for t in tasks if t.kind == "fan_out"][::8]
    chain = [t for t in tasks if t.kind == "chain"][:2]
    return [*mixed, *fan_out, *chain]


def _proxy(tasks: Sequence[WorkloadTask], positions: int) -> tuple[Any, GoldForcing]:
    engine = GoldForcing(ScriptedEngine(), [t.task for t in tasks])
    toolset, _ = tasks[0].toolset()
    config = ProxyConfig(
        effects=workspace_effects(toolset),
        manifest=load_workspace_manifest(),
        secret=SECRET,
        positions_capacity=positions,
    )
    return build_app(engine, config), engine


def _comparable(response: httpx.Response) -> dict[str, Any]:
    """What a client sees, less what is fresh per response (the id and the clock)."""
    data = response.json()
    data.pop("id", None)
    data.pop("created", None)
    headers = {k: v for k, v in response.headers.items() if k.startswith("x-harness-")}
    return {"status": response.status_code, "body": data, "headers": headers}


async def test_cached_positions_answer_exactly_as_a_cold_proxy() -> None:
    tasks = _tasks()
    cold_app, cold_engine = _proxy(tasks, positions=0)
    warm_app, warm_engine = _proxy(tasks, positions=1024)
    sent: list[dict[str, Any]] = []
    async with in_process_client(cold_app) as cold, in_process_client(warm_app) as warm:

        async def both(request: dict[str, Any]) -> dict[str, Any]:
            a = _comparable(await cold.post("/chat/completions", json=request))
            b = _comparable(await warm.post("/chat/completions", json=request))
            assert a == b
            return b

        for wt in tasks:
            toolset, _ = wt.toolset(latency=0.0)
            messages: list[Message] = [
                {"role": "system", "content": DEFAULT_LOOP_SYSTEM},
                {"role": "user", "content": wt.task.prompt},
            ]
            for _ in range(40):
                request = {
                    "model": "m",
                    "messages": [dict(m) for m in messages],
                    "tools": toolset.specs(),
                    "harness_skill": wt.skill,
                    "harness_inputs": dict(wt.task.inputs),
                }
                sent.append(request)
                answered = await both(request)
                assert answered["status"] == 200, answered
                message = answered["body"]["choices"][0]["message"]
                messages.append({k: v for k, v in message.items() if v is not None})
                raw = message.get("tool_calls") or []
                if not raw:
                    break
                calls = [ToolCall.from_openai(c) for c in raw]
                messages.extend(await run_calls(toolset, calls))
            else:
                pytest.fail(f"{wt.id} did not finish in 40 round trips")
        # The same requests again, newest first: every history is now cached at some prefix.
        for request in reversed(sent):
            await both(request)
    # The upstream saw the same prompts, in the same order.
    assert [r.messages for r in warm_engine.inner.requests] == [  # type: ignore[attr-defined]
        r.messages
        for r in cold_engine.inner.requests  # type: ignore[attr-defined]
    ]
    warm = warm_app.state.proxy.positions
    assert warm.hits > len(tasks)  # the cache was used, not bypassed
    assert cold_app.state.proxy.positions.hits == 0


def _call(i: int, name: str = "read_doc", **arguments: Any) -> ToolCall:
    return ToolCall(f"call_{i}", name, json.dumps(arguments or {"key": str(i)}))


def test_prefix_keys_exist_only_where_no_window_is_open() -> None:
    calls = [
        HistoryCall(_call(0), "serial"),
        HistoryCall(_call(1), "member"),
        HistoryCall(_call(2), "last"),
        HistoryCall(_call(3), "serial"),
    ]
    keys = PositionCache.prefix_keys("ctx", calls)
    assert [covered for covered, _ in keys] == [0, 1, 3, 4]
    assert len({key for _, key in keys}) == 4


def test_a_prefix_key_depends_on_every_call_and_the_context() -> None:
    base = [HistoryCall(_call(0), "serial")]
    key = PositionCache.prefix_keys("ctx", base)[-1][1]
    assert PositionCache.prefix_keys("other", base)[-1][1] != key
    edited = [HistoryCall(_call(0, key="other"), "serial")]
    assert PositionCache.prefix_keys("ctx", edited)[-1][1] != key
    renamed = [HistoryCall(_call(0, "write_doc"), "serial")]
    assert PositionCache.prefix_keys("ctx", renamed)[-1][1] != key
    in_window = [HistoryCall(_call(0), "last")]
    assert PositionCache.prefix_keys("ctx", in_window)[-1][1] != key


def test_history_calls_say_each_calls_place_in_the_restored_windows() -> None:
    messages: list[Message] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [_call(0).to_openai()]},
        {"role": "tool", "tool_call_id": "call_0", "content": "x"},
        {"role": "assistant", "tool_calls": [_call(1).to_openai()]},
        {"role": "tool", "tool_call_id": "call_1", "content": "x"},
        {"role": "assistant", "tool_calls": [_call(2).to_openai()]},
        {"role": "tool", "tool_call_id": "call_2", "content": "x"},
    ]
    places = [h.place for h in history_calls(messages, [["call_1", "call_2"]])]
    assert places == ["serial", "member", "last"]


def test_a_cached_position_is_forked_never_handed_out() -> None:
    from harness.certify import make_detector
    from harness.tools import Toolset

    tracker = make_detector("schema_sound").tracker(Toolset([]), None, {})
    cache = PositionCache(4)
    cache.keep("k", tracker)  # type: ignore[arg-type]
    first = cache.resume([(0, "k")])
    second = cache.resume([(0, "k")])
    assert first is not None
    assert second is not None
    assert first[1] is not second[1]
    assert first[1] is not tracker
    assert second[1] is not tracker
    assert cache.hits == 2


def test_the_cache_keeps_at_most_its_capacity_and_zero_turns_it_off() -> None:
    from harness.certify import make_detector
    from harness.tools import Toolset

    tracker = make_detector("schema_sound").tracker(Toolset([]), None, {})
    cache = PositionCache(2)
    for key in "abc":
        cache.keep(key, tracker)  # type: ignore[arg-type]
    assert len(cache) == 2
    assert cache.resume([(0, "a")]) is None
    off = PositionCache(0)
    off.keep("a", tracker)  # type: ignore[arg-type]
    assert len(off) == 0
