"""Claims about an unmodified OpenAI-SDK agent loop through the proxy, on workspace fan-out
tasks: the same final store as the serial loop, two round trips per window instead of n + 1,
and no parallel message ever shown to the model. The unit tests run on the scripted engine;
the ``engine`` tests on the embedded engine, in process and against a served process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest

from benchmarks.proxy_bench import (
    GoldForcing,
    crowd,
    fan_out_tasks,
    sdk_loop,
    workspace_effects,
)
from harness.bench.workload import generate_tasks
from harness.proxy import ProxyConfig, build_app, in_process_client
from harness.testing import ScriptedEngine
from harness.toolsets.workspace import load_workspace_manifest

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[1]


def _sdk(http: Any) -> Any:
    return openai.AsyncOpenAI(
        base_url=str(http.base_url), api_key="unused", http_client=http, max_retries=0
    )


async def _compare(engine: Any, sizes: list[int], *, latency: float) -> None:
    tasks = fan_out_tasks(sizes)
    gold = GoldForcing(engine, [t.task for t in tasks])
    toolset, _ = tasks[0].toolset()
    config = ProxyConfig(effects=workspace_effects(toolset), manifest=load_workspace_manifest())
    async with in_process_client(build_app(gold, config)) as http:
        client = _sdk(http)
        for wt in tasks:
            (n,) = wt.windows
            serial, _ = await sdk_loop(client, wt, latency=latency, arm="S")
            flat, _ = await sdk_loop(client, wt, latency=latency, arm="F")
            assert serial.success, wt.id
            assert flat.success, wt.id
            assert flat.fingerprint == serial.fingerprint == wt.gold.final_fingerprint
            assert serial.round_trips == n + 1
            assert flat.round_trips == 2
            assert flat.windows == [n]
    assert not gold.parallel_shown


async def test_an_sdk_loop_gets_the_serial_result_in_two_round_trips_per_window() -> None:
    await _compare(ScriptedEngine(), [2, 6], latency=0.0)


async def test_sixteen_concurrent_sdk_loops_through_one_proxy_each_end_with_the_serial_store() -> (
    None
):
    tasks = [t for t in generate_tasks() if t.kind in ("fan_out", "mixed")][::2]  # 16 tasks
    engine = ScriptedEngine(decode_ms_per_token=0.5)  # a generation takes time: loops overlap
    gold = GoldForcing(engine, [t.task for t in tasks])
    toolset, _ = tasks[0].toolset()
    config = ProxyConfig(effects=workspace_effects(toolset), manifest=load_workspace_manifest())
    async with in_process_client(build_app(gold, config)) as http:
        client = _sdk(http)
        serial = [(await sdk_loop(client, wt, latency=0.0, arm="S"))[0] for wt in tasks]
        flat = await crowd(client, tasks, 16, latency=0.01)
    assert len(flat) == 16
    for wt, s, f in zip(tasks, serial, flat, strict=True):
        assert s.success, wt.id
        assert f.success, wt.id
        assert f.fingerprint == s.fingerprint == wt.gold.final_fingerprint, wt.id
        assert f.windows == list(wt.windows), wt.id  # every window came back whole
    assert engine.max_in_flight > 8  # the loops really ran at once
    assert not gold.parallel_shown


@pytest.mark.engine
@pytest.mark.timeout(900)
async def test_on_the_embedded_engine_an_sdk_loop_through_the_in_process_proxy_matches_S(
    real_engine: Any,
) -> None:
    await _compare(real_engine, [2, 6], latency=0.05)


@pytest.mark.engine
@pytest.mark.timeout(900)
async def test_on_the_embedded_engine_an_sdk_loop_through_a_served_proxy_matches_S() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "benchmarks.proxy_bench",
        "--serve",
        "--sizes",
        "2",
        "6",
    ]
    process = await anyio.open_process(command, stdout=subprocess.PIPE, stderr=None, env=env)
    try:
        assert process.stdout is not None
        line = b""
        with anyio.fail_after(600):
            while not line.endswith(b"\n"):
                line += await process.stdout.receive(1)
        url = json.loads(line)["url"]
        assert url.startswith("http://127.0.0.1:")
        client = openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0, timeout=600)
        for wt in fan_out_tasks([2, 6]):
            (n,) = wt.windows
            serial, _ = await sdk_loop(client, wt, latency=0.05, arm="S")
            flat, _ = await sdk_loop(client, wt, latency=0.05, arm="F")
            assert flat.fingerprint == serial.fingerprint == wt.gold.final_fingerprint
            assert (serial.round_trips, flat.round_trips) == (n + 1, 2)
            assert flat.success
        await client.close()
    finally:
        process.send_signal(signal.SIGINT)
        with anyio.move_on_after(120):
            await process.wait()
        if process.returncode is None:
            process.kill()
        await process.aclose()  # close its pipes too: an unclosed transport fails the session


def _seen(requests: list[Any]) -> list[list[tuple[Any, ...]]]:
    """What each upstream generation saw, by role, text and calls (ids renamed in order of
    appearance: the loop numbers its calls, the proxy keeps the upstream's ids)."""
    names: dict[str, str] = {}

    def name(call_id: Any) -> str:
        return names.setdefault(str(call_id), f"c{len(names)}")

    out = []
    for request in requests:
        seen = []
        for m in request.messages:
            calls = tuple(
                (name(c["id"]), c["function"]["name"], c["function"]["arguments"])
                for c in m.get("tool_calls") or ()
            )
            tool = name(m["tool_call_id"]) if m["role"] == "tool" else None
            text = m.get("content") if m["role"] != "assistant" else None
            seen.append((m["role"], text, calls, tool))
        out.append(seen)
    return out


async def test_every_upstream_generation_sees_what_arm_f_of_the_loop_shows_it() -> None:
    from benchmarks.proxy_bench import loop_run

    tasks = [t for t in generate_tasks() if t.kind == "mixed"]
    manifest = load_workspace_manifest()
    toolset, _ = tasks[0].toolset()
    config = ProxyConfig(effects=workspace_effects(toolset), manifest=manifest)
    for wt in tasks:
        through_proxy = ScriptedEngine()
        async with in_process_client(
            build_app(GoldForcing(through_proxy, [wt.task]), config)
        ) as http:
            flat, _ = await sdk_loop(_sdk(http), wt, latency=0.0, arm="F")
        in_loop = ScriptedEngine()
        loop = await loop_run(GoldForcing(in_loop, [wt.task]), wt, manifest, "F", 0.0)
        assert flat.windows == loop.windows, wt.id
        assert flat.fingerprint == loop.fingerprint, wt.id
        assert _seen(through_proxy.requests) == _seen(in_loop.requests), wt.id
