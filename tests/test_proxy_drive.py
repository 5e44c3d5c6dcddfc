"""Claims about the one drive: a conversation through the proxy is one run of the loop.

Every workspace task, driven by an unmodified OpenAI-SDK loop through ``harness serve``'s app,
and the same task run by :func:`harness.loop.run_loop` (arm F, gold policy) on the same
scripted upstream: the upstream gets the same requests (message for message, by meaning: the
client echoes messages in its own shape) and the ledger holds the same turns, calls, windows
and run summary (times, run ids and call-id spellings aside). The proxy's turn loop *is* the
loop's (:func:`harness.loop.driver.drive`), so its stuck guard and cut-off handling are the
loop's too: tested here through the proxy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai
import pytest

from benchmarks.proxy_bench import GoldForcing, sdk_loop, workspace_effects
from harness.bench.workload import generate_tasks
from harness.loop import LoopConfig, run_loop
from harness.loop.ledger import CallRecord, Ledger, RunRecord, TurnRecord, WindowRecord
from harness.messages import Completion, Message
from harness.proxy import ProxyConfig, build_app, in_process_client
from harness.proxy.conversation import message_meaning
from harness.testing import ScriptedEngine
from harness.toolsets.workspace import fingerprint, load_workspace_manifest

pytestmark = pytest.mark.anyio


def _sdk(http: Any) -> Any:
    return openai.AsyncOpenAI(
        base_url=str(http.base_url), api_key="unused", http_client=http, max_retries=0
    )


class _Names:
    """Call ids by order of first appearance (the loop numbers calls ``call_N``; the proxy
    keeps the upstream's ids): ``c0``, ``c1``, ..."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, call_id: object) -> str:
        return self.names.setdefault(str(call_id), f"c{len(self.names)}")


def _requests(requests: Sequence[Any]) -> list[list[Any]]:
    name = _Names()
    out = []
    for request in requests:
        seen = []
        for message in request.messages:
            role, text, *rest = message_meaning(message)
            if message.get("tool_calls"):
                rest[0] = [[name(i), tool, args] for i, tool, args in rest[0]]
            if role == "tool":
                rest[-1] = name(rest[-1])
            seen.append([role, text, *rest])
        out.append(seen)
    return out


def _records(ledger: Ledger) -> list[tuple[Any, ...]]:
    """Every turn, call, window and run record, less times, run ids and id spellings."""
    name = _Names()
    out: list[tuple[Any, ...]] = []
    for r in ledger.records:
        if isinstance(r, TurnRecord):
            out.append(("turn", r.turn, r.purpose, r.n_calls, r.window_open, r.completion_tokens))
        elif isinstance(r, CallRecord):
            out.append(
                ("call", name(r.call_id), r.tool, r.arguments, r.turn, r.mode, r.window,
                 r.is_error, r.result_chars)
            )  # fmt: skip
        elif isinstance(r, WindowRecord):
            out.append(
                ("window", r.index, r.phase, r.n, tuple(name(c) for c in r.call_ids), r.tools,
                 r.arguments, r.closed_by, r.opened_turn, r.closed_turn)
            )  # fmt: skip
        elif isinstance(r, RunRecord):
            out.append(
                ("run", r.finished, r.answer, r.turns, r.calls, r.windows, r.discards,
                 r.model_errors, r.completion_tokens)
            )  # fmt: skip
    return out


async def test_every_workspace_task_gives_the_same_requests_and_records_through_the_proxy() -> None:
    tasks = generate_tasks()
    assert len(tasks) == 48
    manifest = load_workspace_manifest()
    toolset, _ = tasks[0].toolset()
    config = ProxyConfig(effects=workspace_effects(toolset), manifest=manifest)
    windows = 0
    for wt in tasks:
        proxy_upstream, proxy_ledger = ScriptedEngine(), Ledger(log=False)
        app = build_app(GoldForcing(proxy_upstream, [wt.task]), config, ledger=proxy_ledger)
        async with in_process_client(app) as http:
            flat, _ = await sdk_loop(_sdk(http), wt, latency=0.0, arm="F")
        loop_upstream, loop_ledger = ScriptedEngine(), Ledger(log=False)
        tools, state = wt.toolset(latency=0.0)
        result = await run_loop(
            loop_upstream,
            tools,
            wt.task,
            LoopConfig(arm="F", policy="gold"),
            manifest=manifest,
            ledger=loop_ledger,
        )
        assert flat.success, wt.id
        assert flat.fingerprint == fingerprint(state), wt.id  # the same store in the end
        assert flat.windows == [w.n for w in result.windows], wt.id
        assert _requests(proxy_upstream.requests) == _requests(loop_upstream.requests), wt.id
        assert _records(proxy_ledger) == _records(loop_ledger), wt.id
        windows += len(result.windows)
    assert windows > 0  # the comparison covers windows, not only serial runs


def _opening() -> list[Message]:
    return [
        {"role": "system", "content": "You read documents."},
        {"role": "user", "content": "Read a."},
    ]


_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_doc",
            "description": "Read a document.",
            "parameters": {
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
            },
        },
    }
]


async def test_the_proxy_has_the_loops_stuck_guard() -> None:
    # A model that asks for the same call forever: the loop stops it at max_identical_calls
    # (UsageLimitExceeded), and so does the proxy, with a 500 that names the budget.
    def same_call(messages: Sequence[Message], tools: Any) -> Any:
        return {"name": "read_doc", "arguments": {"key": "a"}}

    engine = ScriptedEngine(same_call)
    async with in_process_client(build_app(engine, ProxyConfig())) as http:
        messages = _opening()
        statuses = []
        for _ in range(6):
            response = await http.post(
                "/chat/completions", json={"model": "m", "messages": messages, "tools": _TOOLS}
            )
            statuses.append(response.status_code)
            if response.status_code != 200:
                break
            message = response.json()["choices"][0]["message"]
            messages.append(message)
            for call in message["tool_calls"]:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": "A"})
    assert statuses[-1] == 500, statuses
    assert "UsageLimitExceeded" in response.text
    assert "same call" in response.text or "identical" in response.text, response.text


async def test_the_proxy_passes_a_cut_off_reply_on_as_the_serial_run_does() -> None:
    # A reply cut at max_tokens with no call, at a request's first generation (no window is
    # open): the client gets it as a direct run (or X-Harness-Arm: S) gives it, finish_reason
    # "length", in one generation — the loop does not count it a mistake and generate again,
    # which the client never asked for (an upstream that always rambles was a 500 after four).
    # The client's next request continues from its history.
    replies = iter(
        [
            Completion("partial", finish_reason="length"),
            {"name": "read_doc", "arguments": {"key": "a"}},
            "done",
        ]
    )

    def script(messages: Sequence[Message], tools: Any) -> Any:
        return next(replies)

    engine = ScriptedEngine(script)
    async with in_process_client(build_app(engine, ProxyConfig())) as http:
        messages = _opening()
        first = await http.post(
            "/chat/completions", json={"model": "m", "messages": messages, "tools": _TOOLS}
        )
        assert first.status_code == 200, first.text
        assert first.headers["x-harness-generations"] == "1"
        choice = first.json()["choices"][0]
        assert choice["finish_reason"] == "length"
        assert choice["message"]["content"] == "partial"
        messages += [choice["message"], {"role": "user", "content": "Go on."}]
        second = await http.post(
            "/chat/completions", json={"model": "m", "messages": messages, "tools": _TOOLS}
        )
        assert second.status_code == 200, second.text
        message = second.json()["choices"][0]["message"]
        assert message["tool_calls"][0]["function"]["name"] == "read_doc"
        messages.append(message)
        call_id = message["tool_calls"][0]["id"]
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "A"})
        third = await http.post(
            "/chat/completions", json={"model": "m", "messages": messages, "tools": _TOOLS}
        )
        assert third.status_code == 200, third.text
        assert third.json()["choices"][0]["message"]["content"] == "done"
    # every generation saw the client's history as the client holds it: no note of the loop's
    assert len(engine.requests) == 3
    assert not any("cut off" in str(m.get("content")) for r in engine.requests for m in r.messages)


async def test_the_upstream_gets_its_own_argument_strings_back_for_a_serial_call() -> None:
    # A client that re-serialises a call's arguments (compact JSON, as pydantic-ai and the
    # Anthropic client do): the conversation continues (same meaning), and the upstream sees
    # the client's messages with its own argument bytes, as it wrote them.
    replies = iter([{"name": "read_doc", "arguments": {"key": "a"}}, "done"])

    def script(messages: Sequence[Message], tools: Any) -> Any:
        return next(replies)

    engine = ScriptedEngine(script)
    async with in_process_client(build_app(engine, ProxyConfig())) as http:
        messages = _opening()
        first = await http.post(
            "/chat/completions", json={"model": "m", "messages": messages, "tools": _TOOLS}
        )
        message = first.json()["choices"][0]["message"]
        written = message["tool_calls"][0]["function"]["arguments"]
        assert written == '{"key": "a"}'
        message["tool_calls"][0]["function"]["arguments"] = '{"key":"a"}'  # re-serialised
        message["refusal"] = None  # and the client's own shape
        messages.append(message)
        call_id = message["tool_calls"][0]["id"]
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "A"})
        second = await http.post(
            "/chat/completions", json={"model": "m", "messages": messages, "tools": _TOOLS}
        )
        assert second.json()["choices"][0]["message"]["content"] == "done"
    sent = engine.requests[-1].messages
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == written  # the upstream's bytes
    assert sent[2].get("refusal", "absent") is None  # the rest as the client wrote it
