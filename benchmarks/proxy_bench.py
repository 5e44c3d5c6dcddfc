"""The proxy benchmark: an unmodified OpenAI-SDK agent loop through the flattening proxy.

On the embedded engine, for workspace fan-out tasks of window size n = 2, 6, 10 with tool
latency L (default 0.5 s), it runs the same task four ways and reports wall time, client
round trips, upstream generations, billed tokens, the final store fingerprint and success:

* ``proxy S``: the SDK loop through the proxy in pass-through (``X-Harness-Arm: S``);
* ``proxy F``: the SDK loop through the proxy, flattening (the default);
* ``loop S`` and ``loop F``: :func:`harness.loop.run_loop`, arms S and F, on the same task
  (the in-process reference the proxy should approach).

The SDK loop is what agent frameworks do: ``chat.completions.create``, run every returned
call concurrently in an anyio task group, append the results, repeat. The calls are the
task's gold calls, forced through the engine's constrained decoding in every run (the gold
policy of ``harness bench``: every token still prefilled and decoded, so S and F generate the
same calls and the dividend is measured at fixed accuracy; :class:`GoldForcing`). It also
reports the proxy's own overhead per request (time in the proxy minus upstream generation:
median and p95).

``--client pydantic-ai``, ``langchain``, ``agents`` or ``anthropic`` puts that client where the
SDK loop is (pydantic-ai's ``Agent`` on an ``OpenAIChatModel``; LangChain's ``ChatOpenAI``
with bound tools in a hand-written loop; the OpenAI Agents SDK's ``Agent`` on its default
Responses model; the ``anthropic`` client's tool loop on the Messages API; all need the
``clients`` extra): ``proxy S`` is then the
framework as if pointed at the upstream (the proxy passes every request through) and ``proxy
F`` the same framework, unmodified, through the flattening proxy; round trips are the
requests that reached the proxy. Run::

    python -m benchmarks.proxy_bench                 # real engine; writes results
    python -m benchmarks.proxy_bench --engine scripted --latency 0.05   # no model
    python -m benchmarks.proxy_bench --engine scripted --client pydantic-ai

Results go to ``benchmarks/results/proxy/`` (``--out``). Needs the ``serve`` extra and the
``openai`` SDK.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from harness.bench.workload import WorkloadTask, generate_tasks
from harness.engines.base import Engine, GenerationSettings, reset_prefix_cache
from harness.loop import LoopConfig, run_loop
from harness.loop.config import Arm
from harness.loop.policy import GoldPolicy, with_room_for_forced
from harness.loop.task import Task
from harness.loop.transcript import Transcript
from harness.messages import Completion, Message, ToolCall, ToolSpec
from harness.proxy import ProxyConfig, ProxyService, build_app, in_process_client
from harness.proxy.overhead import KINDS
from harness.skills.manifest import Manifest
from harness.tools.execute import execute_call
from harness.toolsets.workspace import fingerprint, load_workspace_manifest

__all__ = (
    "CLIENTS",
    "GoldForcing",
    "Observed",
    "SdkRun",
    "client_headers",
    "client_run",
    "crowd",
    "crowd_run",
    "fan_out_tasks",
    "langchain_loop",
    "main",
    "observe",
    "pydantic_ai_loop",
    "run_calls",
    "sdk_loop",
    "workspace_effects",
)

ARM_PAIR: tuple[Arm, Arm] = ("S", "F")
RESULTS = Path(__file__).resolve().parent / "results" / "proxy"


class GoldForcing:
    """An engine wrapper that forces each conversation's gold calls (the gold policy, as
    :class:`~harness.loop.policy.GoldPolicy` steers the loop: the next gold call counted by the
    tool messages so far, withheld ones included), keyed by the conversation's user prompt.
    It counts the generations it forwards."""

    def __init__(self, inner: Engine, tasks: Sequence[Task]) -> None:
        self.inner = inner
        self.name = f"gold:{inner.name}"
        self._tasks = {t.prompt: t for t in tasks}
        self._policy = GoldPolicy()
        self.generations = 0
        #: Whether any prompt ever held an assistant message with more than one call.
        self.parallel_shown = False

    def _task(self, messages: Sequence[Message]) -> Task | None:
        for message in messages:
            if message.get("role") == "user":
                return self._tasks.get(str(message.get("content")))
        return None

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> Completion:
        task = self._task(messages)
        if any(len(m.get("tool_calls") or ()) > 1 for m in messages):
            self.parallel_shown = True
        if task is not None:
            transcript = Transcript("", "")
            transcript.messages = list(messages)
            settings = with_room_for_forced(
                self._policy.steer(task, transcript, settings, step=None)
            )
        self.generations += 1
        return await self.inner.generate(messages, tools, settings)

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> GoldForcing:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


def workspace_effects(toolset: Mapping[str, Any]) -> dict[str, Any]:
    """The workspace tools' effects by name (what an effects file would declare)."""
    return {name: tool.effect for name, tool in toolset.items()}


def fan_out_tasks(sizes: Sequence[int]) -> list[WorkloadTask]:
    """One fan-out workload task per window size in ``sizes`` (one window of that size)."""
    tasks = [t for t in generate_tasks() if t.kind == "fan_out"]
    out = []
    for n in sizes:
        match = [t for t in tasks if t.windows == (n,)]
        if not match:
            raise SystemExit(f"no fan-out task with one window of {n} calls in the workload")
        out.append(match[0])
    return out


@dataclass
class SdkRun:
    """One run's figures."""

    mode: str
    task: str
    n: int
    wall_s: float
    round_trips: int
    generations: int
    billed_tokens: int
    fingerprint: str
    success: bool
    windows: list[int] = field(default_factory=list)
    parallel_shown: bool = False


async def sdk_loop(
    client: Any,
    wt: WorkloadTask,
    *,
    latency: float,
    arm: str = "F",
    model: str = "harness",
    max_round_trips: int = 60,
) -> tuple[SdkRun, list[Message]]:
    """The OpenAI-SDK agent loop on ``wt`` through ``client`` (an ``openai.AsyncOpenAI``):
    parallel tool calls run concurrently in an anyio task group, as frameworks do."""
    toolset, state = wt.toolset(latency=latency)
    task = wt.task
    messages: list[Message] = [
        {"role": "system", "content": task.system or _default_system()},
        {"role": "user", "content": task.prompt},
    ]
    tools = toolset.specs()
    run = SdkRun(f"proxy {arm}", wt.id, max(wt.windows or (0,)), 0.0, 0, 0, 0, "", False)
    made: list[ToolCall] = []
    answer: str | None = None
    started = time.monotonic()
    for _ in range(max_round_trips):
        raw = await client.chat.completions.with_raw_response.create(
            model=model,
            messages=messages,
            tools=tools,
            extra_headers={"X-Harness-Arm": arm},
            extra_body={"harness_skill": wt.skill, "harness_inputs": dict(task.inputs)},
        )
        response = raw.parse()
        run.round_trips += 1
        run.generations += int(raw.headers.get("x-harness-generations", "0"))
        window = int(raw.headers.get("x-harness-window", "0"))
        if window:
            run.windows.append(window)
        run.billed_tokens += response.usage.total_tokens if response.usage else 0
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        calls = message.tool_calls or []
        if not calls:
            answer = message.content
            break
        made.extend(ToolCall(c.id, c.function.name, c.function.arguments) for c in calls)
        messages.extend(await run_calls(toolset, made[-len(calls) :]))
    run.wall_s = time.monotonic() - started
    run.fingerprint = fingerprint(state)
    run.success = wt.score(made, state, answer)
    return run, messages


async def run_calls(toolset: Any, calls: Sequence[ToolCall]) -> list[Message]:
    """Run ``calls`` concurrently (an anyio task group, as agent frameworks run parallel tool
    calls) and return their tool messages in call order."""
    results: dict[str, str] = {}

    async def one(call: ToolCall) -> None:
        results[call.id] = (await execute_call(toolset, call)).content

    async with anyio.create_task_group() as group:
        for call in calls:
            group.start_soon(one, call)
    return [{"role": "tool", "tool_call_id": c.id, "content": results[c.id]} for c in calls]


#: The agent clients ``--client`` drives: the OpenAI SDK's own loop (:func:`sdk_loop`),
#: pydantic-ai's ``Agent`` (:func:`pydantic_ai_loop`) and LangChain's ``ChatOpenAI`` with bound
#: tools (:func:`langchain_loop`) over Chat Completions; the OpenAI Agents SDK on the Responses
#: API (:func:`agents_loop`); the ``anthropic`` client on the Messages API
#: (:func:`anthropic_loop`).
CLIENTS = ("sdk", "pydantic-ai", "langchain", "agents", "anthropic")


@dataclass
class Observed:
    """What reached the app during one client run: Chat Completions requests (client round
    trips), upstream generations and window sizes (from the X-Harness headers) and billed
    tokens (from each response's ``usage``)."""

    requests: int = 0
    generations: int = 0
    windows: list[int] = field(default_factory=list)
    billed_tokens: int = 0
    #: Windows the proxy put back in serial form (``X-Harness-Restored``), summed.
    restored: int = 0
    warnings: list[str] = field(default_factory=list)
    #: Each call's arguments as the responses gave them, and as the client sent them back
    #: in its history (by call id): a client that re-serialises shows different bytes.
    received: dict[str, str] = field(default_factory=dict)
    sent: dict[str, str] = field(default_factory=dict)


#: The wire APIs :func:`observe` counts: a request to any of them is one client round trip.
_API_PATHS = ("/chat/completions", "/responses", "/messages")


def _api(path: str) -> bool:
    return path.endswith(_API_PATHS)


def _sent_calls(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(call id, arguments) of every call a request's history holds, in any of the APIs."""
    for message in body.get("messages") or ():
        for call in message.get("tool_calls") or ():
            yield str(call["id"]), str(call["function"]["arguments"])
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                yield str(block["id"]), json.dumps(block.get("input"))
    items = body.get("input")
    for item in items if isinstance(items, list) else ():
        if isinstance(item, Mapping) and item.get("type") == "function_call":
            yield str(item["call_id"]), str(item["arguments"])


def _received_calls(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(call id, arguments) of every call a response carries, in any of the APIs."""
    for choice in body.get("choices") or ():
        for call in (choice.get("message") or {}).get("tool_calls") or ():
            yield str(call["id"]), str(call["function"]["arguments"])
    for item in body.get("output") or ():
        if isinstance(item, Mapping) and item.get("type") == "function_call":
            yield str(item["call_id"]), str(item["arguments"])
    content = body.get("content")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, Mapping) and block.get("type") == "tool_use":
            yield str(block["id"]), json.dumps(block.get("input"))


def _billed(body: Mapping[str, Any]) -> int:
    usage = body.get("usage") or {}
    if "total_tokens" in usage:
        return int(usage.get("total_tokens") or 0)
    return (
        int(usage.get("input_tokens") or 0)
        + int(usage.get("output_tokens") or 0)
        + int(usage.get("cache_read_input_tokens") or 0)
    )


@contextmanager
def observe(http: Any) -> Iterator[Observed]:
    """Tally the API responses ``http`` (an ``httpx`` or ``httpx2`` client) receives while the
    block runs — Chat Completions, Responses or Messages (an httpx response hook: every
    request that reached the app, whatever client sent it)."""
    seen = Observed()

    async def sent(request: Any) -> None:
        if not _api(request.url.path):
            return
        seen.sent.update(_sent_calls(json.loads(request.content)))

    async def hook(response: Any) -> None:
        if not _api(response.request.url.path):
            return
        seen.requests += 1
        seen.restored += int(response.headers.get("x-harness-restored", "0"))
        seen.generations += int(response.headers.get("x-harness-generations", "0"))
        window = int(response.headers.get("x-harness-window", "0"))
        if window:
            seen.windows.append(window)
        if "x-harness-warning" in response.headers:
            seen.warnings.append(response.headers["x-harness-warning"])
        await response.aread()
        try:
            body = json.loads(response.content)
        except ValueError:
            return
        seen.billed_tokens += _billed(body)
        seen.received.update(_received_calls(body))

    http.event_hooks["request"].append(sent)
    http.event_hooks["response"].append(hook)
    try:
        yield seen
    finally:
        http.event_hooks["request"].remove(sent)
        http.event_hooks["response"].remove(hook)


def client_headers(wt: WorkloadTask, arm: str) -> dict[str, str]:
    """The two headers a framework is configured with (its own ``extra_headers`` /
    ``default_headers``, no code of it changed): the arm, and the task's skill (the workspace
    manifest has many; the inputs the proxy reads from the conversation itself)."""
    return {"X-Harness-Arm": arm, "X-Harness-Skill": wt.skill}


def _observed_run(
    mode: str, wt: WorkloadTask, seen: Observed, wall: float, state: Any, ok: bool
) -> SdkRun:
    return SdkRun(
        mode,
        wt.id,
        max(wt.windows or (0,)),
        wall,
        seen.requests,
        seen.generations,
        seen.billed_tokens,
        fingerprint(state),
        ok,
        list(seen.windows),
    )


async def pydantic_ai_loop(
    http: httpx.AsyncClient,
    wt: WorkloadTask,
    *,
    latency: float,
    arm: str = "F",
    model: str = "harness",
) -> tuple[SdkRun, Observed]:
    """pydantic-ai's ``Agent`` on ``wt``, its ``OpenAIChatModel`` pointed at ``http`` (the
    proxy, or any OpenAI-compatible server): the workspace tools as function tools
    (``Tool.from_schema``, each calling the toolset), which the agent runs concurrently when
    a response carries several calls. pydantic-ai re-serialises the arguments it sends back
    (``{"key":"d0"}`` for ``{"key": "d0"}``)."""
    import openai
    from pydantic_ai import Agent, Tool
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    toolset, state = wt.toolset(latency=latency)
    made: list[ToolCall] = []

    def tool(spec: ToolSpec) -> Tool[None]:
        function = spec["function"]
        name = str(function["name"])

        async def call(**arguments: Any) -> str:
            c = ToolCall(f"call_{len(made)}", name, json.dumps(arguments))
            made.append(c)
            return (await execute_call(toolset, c)).content

        return Tool.from_schema(
            call, name, function.get("description"), dict(function.get("parameters") or {})
        )

    # (the OpenAI SDK client over ``http``: pydantic-ai's own ``http_client=`` wants httpx2's
    # client and deprecates httpx's; this is the same provider, built the other documented way)
    sdk = openai.AsyncOpenAI(
        base_url=str(http.base_url),
        api_key="unused",
        http_client=http,  # type: ignore[arg-type]
        max_retries=0,
    )
    provider = OpenAIProvider(openai_client=sdk)
    agent = Agent(
        OpenAIChatModel(model, provider=provider),
        instructions=wt.task.system or _default_system(),
        tools=[tool(spec) for spec in toolset.specs()],
    )
    started = time.monotonic()
    with observe(http) as seen:
        result = await agent.run(
            wt.task.prompt, model_settings={"extra_headers": client_headers(wt, arm)}
        )
    wall = time.monotonic() - started
    ok = wt.score(made, state, str(result.output))
    return _observed_run(f"proxy {arm}", wt, seen, wall, state, ok), seen


async def langchain_loop(
    http: httpx.AsyncClient,
    wt: WorkloadTask,
    *,
    latency: float,
    arm: str = "F",
    model: str = "harness",
    max_round_trips: int = 60,
) -> tuple[SdkRun, Observed]:
    """LangChain's ``ChatOpenAI`` with the workspace tools bound (``bind_tools``), in the
    hand-written tool loop of its docs: invoke, run every tool call (concurrently), append a
    ``ToolMessage`` per call, repeat until an answer. LangChain parses the arguments and
    sends them back re-serialised."""
    from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    toolset, state = wt.toolset(latency=latency)
    chat = ChatOpenAI(
        model=model,
        base_url=str(http.base_url),
        api_key="unused",  # type: ignore[arg-type]
        http_async_client=http,
        max_retries=0,
        default_headers=client_headers(wt, arm),
    ).bind_tools(list(toolset.specs()))
    messages: list[BaseMessage] = [
        SystemMessage(wt.task.system or _default_system()),
        HumanMessage(wt.task.prompt),
    ]
    made: list[ToolCall] = []
    answer: str | None = None
    started = time.monotonic()
    with observe(http) as seen:
        for _ in range(max_round_trips):
            reply = await chat.ainvoke(messages)
            messages.append(reply)
            calls = [
                ToolCall(str(c["id"]), c["name"], json.dumps(c["args"]))
                for c in getattr(reply, "tool_calls", [])
            ]
            if not calls:
                answer = str(reply.content)
                break
            made.extend(calls)
            results = await run_calls(toolset, calls)
            messages.extend(
                ToolMessage(str(r["content"]), tool_call_id=str(r["tool_call_id"])) for r in results
            )
    wall = time.monotonic() - started
    ok = wt.score(made, state, answer)
    return _observed_run(f"proxy {arm}", wt, seen, wall, state, ok), seen


async def agents_loop(
    http: httpx.AsyncClient,
    wt: WorkloadTask,
    *,
    latency: float,
    arm: str = "F",
    model: str = "harness",
) -> tuple[SdkRun, Observed]:
    """The OpenAI Agents SDK on ``wt``: an ``Agent`` with the workspace tools as function tools
    (``FunctionTool``, each calling the toolset), on the SDK's default model — the Responses API
    (``/v1/responses``) — through an OpenAI client on ``http``; the agent runs a response's
    calls together. Tracing is off (it would export to OpenAI)."""
    import agents
    import openai

    toolset, state = wt.toolset(latency=latency)
    made: list[ToolCall] = []

    def tool(spec: ToolSpec) -> Any:
        function = spec["function"]
        name = str(function["name"])

        async def invoke(context: Any, arguments: str) -> str:
            c = ToolCall(f"call_{len(made)}", name, arguments)
            made.append(c)
            return (await execute_call(toolset, c)).content

        return agents.FunctionTool(
            name=name,
            description=str(function.get("description") or ""),
            params_json_schema=dict(function.get("parameters") or {}),
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    sdk = openai.AsyncOpenAI(
        base_url=str(http.base_url),
        api_key="unused",
        http_client=http,  # type: ignore[arg-type]
        max_retries=0,
        default_headers=client_headers(wt, arm),
    )
    agent = agents.Agent(
        name="workspace",
        instructions=wt.task.system or _default_system(),
        tools=[tool(spec) for spec in toolset.specs()],
        model=model,
    )
    provider = agents.OpenAIProvider(openai_client=sdk)
    config = agents.RunConfig(model_provider=provider, tracing_disabled=True)
    started = time.monotonic()
    with observe(http) as seen:
        result = await agents.Runner.run(agent, wt.task.prompt, run_config=config, max_turns=60)
    wall = time.monotonic() - started
    ok = wt.score(made, state, str(result.final_output))
    return _observed_run(f"proxy {arm}", wt, seen, wall, state, ok), seen


async def anthropic_loop(
    app: Any,
    wt: WorkloadTask,
    *,
    latency: float,
    arm: str = "F",
    model: str = "harness",
    max_round_trips: int = 60,
) -> tuple[SdkRun, Observed]:
    """The ``anthropic`` client's tool loop on ``wt`` through the app's Messages API
    (``/v1/messages``): send, run every ``tool_use`` block (concurrently), send the
    ``tool_result`` blocks back in one user message, repeat until an answer. The client
    (over its own HTTP library, httpx2, in process) sends each call's ``input`` back as an
    object: the proxy sees it re-serialised."""
    import anthropic
    import httpx2

    toolset, state = wt.toolset(latency=latency)
    tools = [
        {
            "name": spec["function"]["name"],
            "description": spec["function"].get("description") or "",
            "input_schema": spec["function"].get("parameters") or {"type": "object"},
        }
        for spec in toolset.specs()
    ]
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://harness.in-process"
    )
    client = anthropic.AsyncAnthropic(
        base_url=str(http.base_url),
        api_key="unused",
        http_client=http,
        max_retries=0,
        default_headers=client_headers(wt, arm),
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": wt.task.prompt}]
    made: list[ToolCall] = []
    answer: str | None = None
    started = time.monotonic()
    async with http:
        with observe(http) as seen:
            for _ in range(max_round_trips):
                reply = await client.messages.create(
                    model=model,
                    max_tokens=1024,
                    system=wt.task.system or _default_system(),
                    messages=messages,  # type: ignore[arg-type]
                    tools=tools,  # type: ignore[arg-type]
                )
                messages.append(
                    {"role": "assistant", "content": [b.model_dump() for b in reply.content]}
                )
                calls = [
                    ToolCall(b.id, b.name, json.dumps(b.input))
                    for b in reply.content
                    if b.type == "tool_use"
                ]
                if not calls:
                    answer = "".join(b.text for b in reply.content if b.type == "text")
                    break
                made.extend(calls)
                results = await run_calls(toolset, calls)
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": r["tool_call_id"],
                                "content": str(r["content"]),
                            }
                            for r in results
                        ],
                    }
                )
    wall = time.monotonic() - started
    ok = wt.score(made, state, answer)
    return _observed_run(f"proxy {arm}", wt, seen, wall, state, ok), seen


async def client_run(
    name: str,
    client: Any,
    http: httpx.AsyncClient,
    wt: WorkloadTask,
    *,
    latency: float,
    arm: str,
    app: Any = None,
) -> SdkRun:
    """One run of the client ``name`` (one of :data:`CLIENTS`) on ``wt``: the SDK loop over
    ``client`` (an ``openai.AsyncOpenAI`` on ``http``), the anthropic client on ``app``'s
    Messages API, the others straight on ``http``."""
    if name == "sdk":
        run, _ = await sdk_loop(client, wt, latency=latency, arm=arm)
        return run
    if name == "anthropic":
        run, _ = await anthropic_loop(app, wt, latency=latency, arm=arm)
        return run
    loops = {"pydantic-ai": pydantic_ai_loop, "langchain": langchain_loop, "agents": agents_loop}
    if name not in loops:
        raise SystemExit(f"unknown client {name!r}; choose one of: {', '.join(CLIENTS)}")
    run, _ = await loops[name](http, wt, latency=latency, arm=arm)
    return run


def _default_system() -> str:
    from harness.loop.state import DEFAULT_LOOP_SYSTEM

    return DEFAULT_LOOP_SYSTEM


async def loop_run(
    engine: Engine, wt: WorkloadTask, manifest: Manifest, arm: Arm, latency: float
) -> SdkRun:
    """Arm ``arm`` of :func:`run_loop` on ``wt`` (gold policy), as the reference."""
    toolset, state = wt.toolset(latency=latency)
    started = time.monotonic()
    result = await run_loop(
        engine,
        toolset,
        wt.task,
        LoopConfig(arm=arm, policy="gold"),
        manifest=manifest,
    )
    wall = time.monotonic() - started
    return SdkRun(
        f"loop {arm}",
        wt.id,
        max(wt.windows or (0,)),
        wall,
        0,
        result.summary.turns,
        result.summary.billed_tokens,
        fingerprint(state),
        wt.score(result.calls, state, result.answer),
        [w.n for w in result.windows],
    )


@asynccontextmanager
async def _engine(kind: str, model: str | None) -> AsyncIterator[Engine]:
    if kind == "scripted":
        from harness.testing import ScriptedEngine

        async with ScriptedEngine(decode_ms_per_token=2.0, prefill_ms_per_token=0.05) as scripted:
            yield scripted
        return
    from harness.engines.vllm import open_default_engine

    async with open_default_engine(model) as engine:
        yield engine


def calibration_us() -> float:
    """This machine's speed right now: the best of five timings of ``sum(range(1000))`` in
    microseconds (about 8-10 on an idle desktop core), to read the overheads against."""
    import timeit

    return min(timeit.repeat("sum(range(1000))", number=200, repeat=5)) / 200 * 1e6


def _header(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "calibration_us": calibration_us(),
        "engine": args.engine,
        "client": args.client,
        "latency_s": args.latency,
        "sizes": args.sizes,
        "repeats": args.repeats,
        "clients": args.clients,
        "python": platform.python_version(),
        "load": _load(),
    }


async def crowd(
    client: Any, tasks: Sequence[WorkloadTask], k: int, *, latency: float, arm: str = "F"
) -> list[SdkRun]:
    """``k`` SDK loops at once through ``client`` (one proxy), client ``i`` on
    ``tasks[i % len(tasks)]`` with its own store; their runs in client order."""
    runs: dict[int, SdkRun] = {}

    async def one(i: int) -> None:
        runs[i], _ = await sdk_loop(client, tasks[i % len(tasks)], latency=latency, arm=arm)

    async with anyio.create_task_group() as group:
        for i in range(k):
            group.start_soon(one, i)
    return [runs[i] for i in range(k)]


async def crowd_run(
    client: Any, tasks: Sequence[WorkloadTask], k: int, *, latency: float
) -> dict[str, Any]:
    """``--clients K``: each task once through the proxy in pass-through (S, the reference),
    then ``K`` flattening clients at once; each client is correct when its final store is
    its task's S store and the task succeeded."""
    reference = {}
    for wt in tasks:
        run, _ = await sdk_loop(client, wt, latency=latency, arm="S")
        reference[wt.id] = run.fingerprint
        _say(run)
    started = time.monotonic()
    runs = await crowd(client, tasks, k, latency=latency)
    wall = time.monotonic() - started
    correct = [r.success and r.fingerprint == reference[r.task] for r in runs]
    for run in runs:
        _say(run)
    return {
        "crowd": {
            "clients": k,
            "wall_s": wall,
            "correct": sum(correct),
            "round_trips": sum(r.round_trips for r in runs),
            "windows": [r.windows for r in runs],
            "runs": [asdict(r) for r in runs],
            "reference_fingerprints": reference,
        }
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    import openai

    tasks = fan_out_tasks(args.sizes)
    manifest = load_workspace_manifest()
    runs: list[SdkRun] = []
    async with _engine(args.engine, args.model) as inner:
        engine = GoldForcing(inner, [t.task for t in tasks])
        toolset, _ = tasks[0].toolset()
        config = ProxyConfig(effects=workspace_effects(toolset), manifest=manifest)
        app = build_app(engine, config)
        service: ProxyService = app.state.proxy
        http = in_process_client(app)
        # (this openai build annotates http_client with its httpx fork, httpx2; an httpx
        # client works the same)
        client = openai.AsyncOpenAI(
            base_url=str(http.base_url),
            api_key="unused",
            http_client=http,  # type: ignore[arg-type]
            max_retries=0,
        )
        async with http:
            await sdk_loop(client, tasks[0], latency=0.0)  # warm the engine and the cache
            service.overheads.clear()
            if args.clients:
                crowd = await crowd_run(client, tasks, args.clients, latency=args.latency)
                return {**_header(args), **crowd, "proxy_overhead": service.overheads.summary()}
            # Every run starts from an empty prefix cache: otherwise the second run of a task
            # finds the first one's prompts cached (a dividend that is the cache's).
            for _ in range(args.repeats):
                for wt in tasks:
                    for arm in ("S", "F"):
                        await reset_prefix_cache(engine.inner)
                        before = engine.generations
                        run = await client_run(
                            args.client, client, http, wt, latency=args.latency, arm=arm, app=app
                        )
                        run.generations = engine.generations - before
                        runs.append(run)
                        _say(run)
                    for loop_arm in ARM_PAIR:
                        await reset_prefix_cache(engine.inner)
                        run = await loop_run(engine, wt, manifest, loop_arm, args.latency)
                        runs.append(run)
                        _say(run)
    return {
        **_header(args),
        "runs": [asdict(r) for r in runs],
        "summary": _summary(runs),
        "proxy_overhead": service.overheads.summary(),
    }


def _say(run: SdkRun) -> None:
    print(
        f"  n={run.n:<3} {run.mode:<8} wall {run.wall_s:6.2f} s  round trips {run.round_trips:3d}  "
        f"generations {run.generations:3d}  billed {run.billed_tokens:6d}  windows {run.windows}  "
        f"ok={run.success}",
        file=sys.stderr,
        flush=True,
    )


def _summary(runs: Sequence[SdkRun]) -> list[dict[str, Any]]:
    out = []
    for n in sorted({r.n for r in runs}):
        for mode in ("proxy S", "proxy F", "loop S", "loop F"):
            group = [r for r in runs if r.n == n and r.mode == mode]
            if not group:
                continue
            out.append(
                {
                    "n": n,
                    "mode": mode,
                    "wall_s": statistics.median(r.wall_s for r in group),
                    "round_trips": statistics.median(r.round_trips for r in group),
                    "generations": statistics.median(r.generations for r in group),
                    "billed_tokens": statistics.median(r.billed_tokens for r in group),
                    "success": sum(r.success for r in group),
                    "runs": len(group),
                    "fingerprints": sorted({r.fingerprint[:12] for r in group}),
                }
            )
    return out


def _load() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def render_overheads(
    summary: Mapping[str, Mapping[str, float]], calibration: float | None = None
) -> list[str]:
    """The proxy's own time per request, by kind (:mod:`harness.proxy.overhead`), and how
    fast the machine was (:func:`calibration_us`)."""
    lines = ["proxy overhead per request (its own time, the upstream's taken out; wall, and CPU):"]
    if calibration is not None:
        lines.append(f"  (machine speed: sum(range(1000)) in {calibration:.1f} µs, ~9 µs idle)")
    for kind in (*KINDS, "all"):
        if kind in summary:
            v = summary[kind]
            lines.append(
                f"  {kind:<12} wall median {v['median_ms']:6.2f} ms  p95 {v['p95_ms']:6.2f} ms"
                f"   CPU median {v['cpu_median_ms']:6.2f} ms  p95 {v['cpu_p95_ms']:6.2f} ms"
                f"  ({v['requests']:.0f} requests)"
            )
    return lines


def render(result: Mapping[str, Any]) -> str:
    if "crowd" in result:
        c = result["crowd"]
        lines = [
            f"engine {result['engine']}, L = {result['latency_s']} s, load {result['load']}",
            f"{c['clients']} concurrent SDK clients through one proxy (arm F): "
            f"{c['correct']}/{c['clients']} correct (final store = S's, task succeeded), "
            f"wall {c['wall_s']:.2f} s, {c['round_trips']} round trips",
        ]
        lines.extend(render_overheads(result["proxy_overhead"], result.get("calibration_us")))
        return "\n".join(lines)
    lines = [
        f"client {result.get('client', 'sdk')}, engine {result['engine']}, "
        f"L = {result['latency_s']} s, repeats {result['repeats']}, load {result['load']}",
        f"{'n':>3} {'mode':<8} {'wall s':>7} {'trips':>5} {'gens':>5} {'billed':>7} {'ok':>4}  fingerprint",
    ]
    lines.extend(
        f"{row['n']:>3} {row['mode']:<8} {row['wall_s']:7.2f} {row['round_trips']:5.0f} "
        f"{row['generations']:5.0f} {row['billed_tokens']:7.0f} {row['success']:>2}/{row['runs']}  "
        f"{','.join(row['fingerprints'])}"
        for row in result["summary"]
    )
    lines.extend(render_overheads(result["proxy_overhead"], result.get("calibration_us")))
    return "\n".join(lines)


async def serve_gold(args: argparse.Namespace) -> None:
    """Serve the proxy on loopback (``--serve``) over the gold-forced embedded engine, with the
    workspace's effects and manifest, for tests that need a real served process."""
    from harness.proxy.serve import serve

    tasks = fan_out_tasks(args.sizes)
    async with _engine(args.engine, args.model) as inner:
        engine = GoldForcing(inner, [t.task for t in tasks])
        toolset, _ = tasks[0].toolset()
        config = ProxyConfig(effects=workspace_effects(toolset), manifest=load_workspace_manifest())

        def listening(url: str) -> None:
            print(json.dumps({"url": url}), flush=True)

        await serve(build_app(engine, config), "127.0.0.1", args.port, on_listen=listening)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.proxy_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--engine", choices=("vllm", "scripted"), default="vllm")
    parser.add_argument(
        "--client",
        choices=CLIENTS,
        default="sdk",
        help="the agent framework run through the proxy (F) and in pass-through (S: the same "
        "client as if pointed at the upstream): the OpenAI SDK's loop, pydantic-ai's Agent or "
        "LangChain's ChatOpenAI with bound tools (those two need the clients extra)",
    )
    parser.add_argument("--model", default=None, help="a local Hugging Face model folder")
    parser.add_argument("--latency", type=float, default=0.5, help="tool latency L in seconds")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 6, 10])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--clients",
        type=int,
        default=0,
        help="instead: K concurrent SDK clients (arm F) through one proxy, each on a task "
        "of --sizes with its own store, each checked against the task's S store",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="results JSON (default: benchmarks/results/proxy/<engine>-<time>.json)",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help='serve the gold-forced proxy on 127.0.0.1:--port instead (prints {"url": ...})',
    )
    parser.add_argument("--port", type=int, default=0, help="with --serve (default: a free one)")
    args = parser.parse_args(argv)
    if args.clients and args.client != "sdk":
        parser.error("--clients runs concurrent SDK loops; it takes no --client")
    if args.serve:
        anyio.run(serve_gold, args)
        return 0
    result = anyio.run(bench, args)
    text = render(result)
    print(text)
    out = (
        Path(args.out)
        if args.out
        else RESULTS / f"{args.engine}{'' if args.client == 'sdk' else '-' + args.client}-"
        f"{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
