"""Claims about real agent clients, unmodified, through the proxy: pydantic-ai's ``Agent``
(``OpenAIChatModel``) and LangChain's ``ChatOpenAI`` with bound tools on the Chat Completions
API, the OpenAI Agents SDK on the Responses API and the ``anthropic`` client on the Messages
API, on workspace fan-out tasks at N = 4 and 8. Through the proxy each window costs the client two
round trips instead of N + 1, the upstream generates exactly what the serial run (the same
client, ``X-Harness-Arm: S``) made it generate, never sees an assistant message with more than
one call, and the final store is the serial run's. Both frameworks send the calls' arguments
back re-serialised, so each window is restored by meaning, not by bytes.

Each framework is an optional extra (``pip install agent-harness[clients]``): its tests skip
when it is absent. Unit tests: the scripted engine, the in-process app."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.proxy_bench import (
    GoldForcing,
    Observed,
    SdkRun,
    fan_out_tasks,
    langchain_loop,
    pydantic_ai_loop,
    workspace_effects,
)
from harness.engines.base import Engine, GenerationSettings
from harness.messages import Completion, Message, ToolSpec
from harness.proxy import ProxyConfig, build_app, in_process_client
from harness.testing import ScriptedEngine
from harness.toolsets.workspace import load_workspace_manifest

pytestmark = pytest.mark.anyio

#: The module each framework client imports.
MODULES = {"pydantic-ai": "pydantic_ai", "langchain": "langchain_openai"}
Loop = Callable[..., Awaitable[tuple[SdkRun, Observed]]]


class CompactArguments:
    """An upstream that spells every call's arguments without spaces (``{"key":"d0"}``, as
    many models do) over ``inner``: LangChain, which sends arguments back as ``json.dumps``
    spells them (``{"key": "d0"}``), then changes the bytes of every call."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.name = f"compact:{inner.name}"

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> Completion:
        completion = await self.inner.generate(messages, tools, settings)
        calls = tuple(
            replace(c, arguments=json.dumps(json.loads(c.arguments), separators=(",", ":")))
            for c in completion.tool_calls
        )
        return replace(completion, tool_calls=calls)


async def _compare(
    loop: Loop, sizes: list[int], *, compact: bool = False, through_app: bool = False
) -> list[tuple[Observed, Observed]]:
    """Each task run by ``loop`` serially (arm S, pass-through) and flattened (arm F) through
    one in-process proxy; every claim of the module docstring checked. The runs' observations
    (serial, flat) per task."""
    tasks = fan_out_tasks(sizes)
    upstream: Any = ScriptedEngine()
    if compact:
        upstream = CompactArguments(upstream)
    gold = GoldForcing(upstream, [t.task for t in tasks])
    toolset, _ = tasks[0].toolset()
    config = ProxyConfig(effects=workspace_effects(toolset), manifest=load_workspace_manifest())
    out = []
    app = build_app(gold, config)
    async with in_process_client(app) as http:
        target: Any = app if through_app else http  # the anthropic client brings its own HTTP
        for wt in tasks:
            (n,) = wt.windows
            before = gold.generations
            serial, s_seen = await loop(target, wt, latency=0.0, arm="S")
            serial_generations = gold.generations - before
            before = gold.generations
            flat, f_seen = await loop(target, wt, latency=0.0, arm="F")
            flat_generations = gold.generations - before
            assert serial.success, wt.id
            assert flat.success, wt.id
            assert flat.fingerprint == serial.fingerprint == wt.gold.final_fingerprint, wt.id
            assert serial.round_trips == n + 1, wt.id  # requests that reached the app
            assert flat.round_trips == 2, wt.id
            assert flat.windows == [n], wt.id
            assert serial_generations == n + 1, wt.id
            assert flat_generations == serial_generations, wt.id
            assert flat.generations == flat_generations, wt.id  # the proxy's own count agrees
            assert f_seen.restored == 1, wt.id  # the window went back in serial form
            assert not f_seen.warnings, (wt.id, f_seen.warnings)
            out.append((s_seen, f_seen))
    assert not gold.parallel_shown
    return out


def _canonical(arguments: str) -> str:
    return json.dumps(json.loads(arguments), sort_keys=True)


def _resent_differently(seen: Observed) -> int:
    """How many calls the client sent back with other bytes but the same meaning (and a
    check that none changed meaning)."""
    differ = 0
    for call_id, sent in seen.sent.items():
        received = seen.received[call_id]
        assert _canonical(sent) == _canonical(received), call_id
        differ += sent != received
    return differ


@pytest.mark.parametrize("n", [4, 8])
async def test_pydantic_ai_agent_gets_the_serial_store_in_two_round_trips_per_window(
    n: int,
) -> None:
    pytest.importorskip(MODULES["pydantic-ai"], reason="needs pydantic-ai (the clients extra)")
    ((serial, flat),) = await _compare(pydantic_ai_loop, [n])
    # pydantic-ai really re-serialised every window call: restoration held by meaning
    assert _resent_differently(flat) == n
    assert _resent_differently(serial) == n


@pytest.mark.parametrize("n", [4, 8])
async def test_langchain_chat_openai_with_bound_tools_gets_the_serial_store_in_two_round_trips(
    n: int,
) -> None:
    pytest.importorskip(MODULES["langchain"], reason="needs langchain-openai (the clients extra)")
    ((serial, flat),) = await _compare(langchain_loop, [n], compact=True)
    # LangChain sent every window call back in json.dumps's spelling: restored by meaning
    assert _resent_differently(flat) == n
    assert _resent_differently(serial) == n


@pytest.mark.parametrize("client", ["sdk", "pydantic-ai", "langchain"])
def test_proxy_bench_runs_the_chosen_client_through_the_proxy_and_in_pass_through(
    client: str, tmp_path: Path
) -> None:
    if client != "sdk":
        pytest.importorskip(MODULES[client], reason=f"needs {client} (the clients extra)")
    from benchmarks.proxy_bench import main

    out = tmp_path / "result.json"
    argv = ["--engine", "scripted", "--client", client, "--sizes", "4", "--latency", "0"]
    assert main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["client"] == client
    rows = {row["mode"]: row for row in result["summary"]}
    assert rows["proxy S"]["round_trips"] == 5  # the client as against the upstream: n + 1
    assert rows["proxy F"]["round_trips"] == 2
    assert rows["proxy S"]["generations"] == rows["proxy F"]["generations"] == 5
    assert rows["proxy S"]["fingerprints"] == rows["proxy F"]["fingerprints"]
    assert rows["proxy S"]["success"] == rows["proxy F"]["success"] == 1
    assert rows["proxy F"]["billed_tokens"] > 0


def test_proxy_bench_refuses_a_crowd_of_a_framework_client() -> None:
    from benchmarks.proxy_bench import main

    with pytest.raises(SystemExit) as exit_:
        main(["--engine", "scripted", "--client", "langchain", "--clients", "4"])
    assert exit_.value.code == 2


# -- the Responses API (the OpenAI Agents SDK) and the Messages API (anthropic) ----------------

MODULES.update({"agents": "agents", "anthropic": "anthropic"})


@pytest.mark.parametrize("n", [4, 8])
async def test_an_agents_sdk_agent_on_the_responses_api_gets_the_serial_store_in_two_round_trips(
    n: int,
) -> None:
    pytest.importorskip(MODULES["agents"], reason="needs openai-agents (the clients extra)")
    from benchmarks.proxy_bench import agents_loop

    ((_serial, flat),) = await _compare(agents_loop, [n])
    assert len(flat.received) == n  # the window's calls, as one response's function calls


@pytest.mark.parametrize("n", [4, 8])
async def test_the_anthropic_client_on_the_messages_api_gets_the_serial_store_in_two_round_trips(
    n: int,
) -> None:
    pytest.importorskip(MODULES["anthropic"], reason="needs anthropic (the clients extra)")
    pytest.importorskip("httpx2", reason="the anthropic client's HTTP library")
    from benchmarks.proxy_bench import anthropic_loop

    ((_serial, flat),) = await _compare(anthropic_loop, [n], through_app=True)
    # every tool_use came back in the history (as objects: the Messages API has no argument
    # string; the proxy restores the window by the value of each input)
    assert _resent_differently(flat) == 0
    assert len(flat.sent) == n


@pytest.mark.parametrize("client", ["agents", "anthropic"])
def test_proxy_bench_runs_the_responses_and_messages_clients(client: str, tmp_path: Path) -> None:
    pytest.importorskip(MODULES[client], reason=f"needs {client} (the clients extra)")
    from benchmarks.proxy_bench import main

    out = tmp_path / "result.json"
    argv = ["--engine", "scripted", "--client", client, "--sizes", "4", "--latency", "0"]
    assert main([*argv, "--out", str(out)]) == 0
    rows = {row["mode"]: row for row in json.loads(out.read_text(encoding="utf-8"))["summary"]}
    assert rows["proxy S"]["round_trips"] == 5
    assert rows["proxy F"]["round_trips"] == 2
    assert rows["proxy S"]["generations"] == rows["proxy F"]["generations"] == 5
    assert rows["proxy S"]["fingerprints"] == rows["proxy F"]["fingerprints"]
