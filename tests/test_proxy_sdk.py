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

from harness.benchmarks.proxy_bench import GoldForcing, fan_out_tasks, sdk_loop, workspace_effects
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
        "harness.benchmarks.proxy_bench",
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
