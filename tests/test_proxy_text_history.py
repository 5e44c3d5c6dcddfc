"""Claims about windows a client writes back as text (harness.proxy.text_history), with a
client that keeps its history as smolagents' ``ToolCallingAgent`` does (``Calling tools:``
and ``Observation:`` steps, calls and results ordered by id): a window is restored to what
the serial run's client sends, byte for byte; what is not recognised is passed on with the
proxy's ids replaced, a warning header and a log line; either way the waiting run is
released at once, not after the idle timeout."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from harness.messages import Message, ToolSpec
from harness.proxy import in_process_client
from harness.testing import ScriptedEngine
from tests.test_proxy import KEYS, body, make_app

pytestmark = pytest.mark.anyio

Results = Callable[[dict[str, Any]], str]


def _text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content)
    return str(content or "")


def text_script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    """``survey_script`` for a history that holds calls as text steps or as tool calls."""
    done = 0
    for message in messages:
        if message.get("role") == "assistant":
            done += len(message.get("tool_calls") or ()) + _text(message).count("'function':")
    if done < len(KEYS):
        return {"id": f"up_{done}", "name": "read_doc", "arguments": {"key": KEYS[done]}}
    if done == len(KEYS):
        return {"id": f"up_{done}", "name": "write_report", "arguments": {"text": "all read"}}
    observed = [_text(m) for m in messages if m.get("role") == "user"][1:]
    return "done: " + " | ".join(observed)


def one_line(call: dict[str, Any]) -> str:
    arguments = json.loads(call["function"]["arguments"])
    return f"text of {arguments.get('key', arguments.get('text'))}"


def two_lines(call: dict[str, Any]) -> str:
    return one_line(call) + "\nsecond line"


def smolagents_step(message: dict[str, Any], run: Results) -> list[Message]:
    """What smolagents' ToolCallingAgent keeps of one step: its calls as text, then the
    results as one observation (both ordered by call id), each message's content one part."""
    calls = sorted(message["tool_calls"], key=lambda c: c["id"])
    dicts = [
        {
            "id": c["id"],
            "type": "function",
            "function": {
                "name": c["function"]["name"],
                "arguments": json.loads(c["function"]["arguments"]),
            },
        }
        for c in calls
    ]
    lines = [
        f"Tool call {d['id']}: calling '{d['function']['name']}' with arguments: "
        f"{d['function']['arguments']}"
        for d in dicts
    ]
    said = "\n".join(lines) + "\nCalling tools:\n" + str(dicts)
    observed = "Observation:\n" + "\n".join(run(c) for c in calls)
    return [
        {"role": "assistant", "content": [{"type": "text", "text": said}]},
        {"role": "user", "content": [{"type": "text", "text": observed}]},
    ]


def opening() -> list[Message]:
    return [
        {"role": "system", "content": [{"type": "text", "text": "You read documents."}]},
        {"role": "user", "content": [{"type": "text", "text": "New task:\nSurvey a, b, c."}]},
    ]


async def smolagents_loop(
    client: httpx.AsyncClient, run: Results = one_line, arm: str | None = None
) -> tuple[list[Message], list[httpx.Response]]:
    messages = opening()
    responses = []
    headers = {"X-Harness-Arm": arm} if arm else None
    for _ in range(20):
        response = await client.post("/chat/completions", json=body(messages), headers=headers)
        assert response.status_code == 200, response.text
        responses.append(response)
        message = response.json()["choices"][0]["message"]
        if not message.get("tool_calls"):
            messages.append({"role": "assistant", "content": message["content"]})
            return messages, responses
        messages.extend(smolagents_step(message, run))
    raise AssertionError("the loop did not finish")


def _sent(engine: ScriptedEngine) -> list[str]:
    return [json.dumps(r.messages) for r in engine.requests]


async def test_a_window_written_back_as_text_is_restored_to_the_serial_clients_text() -> None:
    flat, serial = ScriptedEngine(text_script), ScriptedEngine(text_script)
    async with in_process_client(make_app(flat)) as client:
        f_messages, f_responses = await smolagents_loop(client)
        service = client._transport.app.state.proxy  # type: ignore[attr-defined]
        assert len(service.conversations) == 0
    async with in_process_client(make_app(serial)) as client:
        s_messages, s_responses = await smolagents_loop(client, arm="S")
    assert f_messages[-1] == s_messages[-1]  # the same answer
    assert f_responses[0].headers["x-harness-window"] == str(len(KEYS))
    assert f_responses[1].headers["x-harness-restored"] == "1"
    assert "x-harness-warning" not in f_responses[1].headers
    assert len(f_responses) == 3  # the window in 2 round trips, then the report, the answer
    assert len(s_responses) == len(KEYS) + 2
    # every upstream request after the window is the serial client's, byte for byte
    assert _sent(flat)[-2:] == _sent(serial)[-2:]
    assert not any("hx." in sent for sent in _sent(flat))


async def test_a_text_window_that_cannot_be_split_passes_on_without_the_proxys_ids() -> None:
    engine = ScriptedEngine(text_script)
    async with in_process_client(make_app(engine)) as client:
        service = client._transport.app.state.proxy  # type: ignore[attr-defined]
        with capture_logs() as logs:
            messages = opening()
            first = await client.post("/chat/completions", json=body(messages))
            assert len(service.conversations) == 1  # the window's run waits for its results
            messages.extend(smolagents_step(first.json()["choices"][0]["message"], two_lines))
            second = await client.post("/chat/completions", json=body(messages))
            waiting = len(service.conversations)
    assert second.status_code == 200, second.text
    assert second.headers["x-harness-arm"] == "S"
    assert second.headers["x-harness-restored"] == "0"
    assert "written as text" in second.headers["x-harness-warning"]
    assert waiting == 0  # released at once, not after the idle timeout
    assert service.conversations.evicted == 1
    (logged,) = [e for e in logs if e["event"] == "window_not_restored"]
    assert logged["reason"] == "text"
    last = json.dumps(engine.requests[-1].messages)
    assert "hx." not in last
    assert all(f"up_{i}" in last for i in range(len(KEYS)))  # the upstream's own ids


async def test_a_text_step_whose_calls_were_edited_is_not_restored() -> None:
    engine = ScriptedEngine(text_script)
    async with in_process_client(make_app(engine)) as client:
        messages = opening()
        first = await client.post("/chat/completions", json=body(messages))
        step = smolagents_step(first.json()["choices"][0]["message"], one_line)
        edited = _text(step[0]).replace("'key': 'b'", "'key': 'z'")
        step[0] = {"role": "assistant", "content": edited}
        messages.extend(step)
        second = await client.post("/chat/completions", json=body(messages))
    assert second.headers["x-harness-restored"] == "0"
    assert "written as text" in second.headers["x-harness-warning"]
    assert "hx." not in json.dumps(engine.requests[-1].messages)


# -- a ReAct transcript: Action: / Action Input: / Observation:, no ids --------------------------


def react_script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    """``text_script`` for a history that holds calls as ReAct actions or as tool calls."""
    done = 0
    for message in messages:
        if message.get("role") == "assistant":
            done += len(message.get("tool_calls") or ()) + _text(message).count("Action:")
    if done < len(KEYS):
        return {"id": f"up_{done}", "name": "read_doc", "arguments": {"key": KEYS[done]}}
    observed = [_text(m) for m in messages if m.get("role") == "user"][1:]
    return "done: " + " | ".join(observed)


def react_step(message: dict[str, Any], joined: bool = False) -> list[Message]:
    """A ReAct client's step: each call as ``Action:`` / ``Action Input:`` in the order
    given, then one ``Observation:`` per call (``joined``: all results on one line)."""
    calls = message["tool_calls"]
    said = "\n".join(
        f"Action: {c['function']['name']}\nAction Input: "
        f"{json.dumps(json.loads(c['function']['arguments']))}"
        for c in calls
    )
    if joined:
        observed = "Observation: " + " ".join(one_line(c) for c in calls)
    else:
        observed = "\n".join(f"Observation: {one_line(c)}" for c in calls)
    return [
        {"role": "assistant", "content": said},
        {"role": "user", "content": observed},
    ]


async def react_loop(
    client: httpx.AsyncClient, arm: str | None = None, joined: bool = False
) -> tuple[list[Message], list[httpx.Response]]:
    messages: list[Message] = [
        {"role": "system", "content": "You read documents."},
        {"role": "user", "content": "Survey a, b and c."},
    ]
    responses = []
    headers = {"X-Harness-Arm": arm} if arm else None
    for _ in range(20):
        response = await client.post("/chat/completions", json=body(messages), headers=headers)
        assert response.status_code == 200, response.text
        responses.append(response)
        message = response.json()["choices"][0]["message"]
        if not message.get("tool_calls"):
            messages.append({"role": "assistant", "content": message["content"]})
            return messages, responses
        messages.extend(react_step(message, joined))
    raise AssertionError("the loop did not finish")


async def test_a_react_transcript_of_a_window_is_found_by_its_calls_and_restored() -> None:
    flat, serial = ScriptedEngine(react_script), ScriptedEngine(react_script)
    async with in_process_client(make_app(flat)) as client:
        f_messages, f_responses = await react_loop(client)
        waiting = len(client._transport.app.state.proxy.conversations)  # type: ignore[attr-defined]
    async with in_process_client(make_app(serial)) as client:
        s_messages, s_responses = await react_loop(client, arm="S")
    assert f_responses[0].headers["x-harness-window"] == str(len(KEYS))
    assert f_responses[1].headers["x-harness-restored"] == "1"
    assert "x-harness-warning" not in f_responses[1].headers
    assert waiting == 0  # the window's run was released
    assert f_messages[-1] == s_messages[-1]
    assert len(f_responses) == 2
    assert len(s_responses) == len(KEYS) + 1
    assert _sent(flat)[-1] == _sent(serial)[-1]  # the absorb request is the serial client's


async def test_a_react_window_whose_observations_cannot_be_split_is_reported_and_released() -> None:
    engine = ScriptedEngine(react_script)
    async with in_process_client(make_app(engine)) as client:
        service = client._transport.app.state.proxy  # type: ignore[attr-defined]
        _, responses = await react_loop(client, joined=True)
    assert responses[1].headers["x-harness-restored"] == "0"
    assert "not one 'Observation:' per action" in responses[1].headers["x-harness-warning"]
    assert len(service.conversations) == 0
    assert service.conversations.evicted >= 1


def test_two_conversations_windows_of_one_set_in_other_orders_are_told_apart() -> None:
    # A client writes a window back in the order it received it: that order finds its own
    # conversation's window; an order neither emitted is ambiguous and restored by nobody.
    from harness.proxy.store import Pending, WindowStore

    def pending(keys: str) -> Pending:
        args = tuple(f'{{"key": "{k}"}}' for k in keys)
        return Pending(arguments=args, names=("read_doc",) * len(keys))

    store = WindowStore()
    store.put("w_asc", pending("abc"))
    store.put("w_desc", pending("cba"))
    calls = lambda keys: [("read_doc", f'{{"key": "{k}"}}') for k in keys]  # noqa: E731
    assert store.find(calls("abc")) == "w_asc"
    assert store.find(calls("cba")) == "w_desc"
    assert store.find(calls("bac")) is None
    alone = WindowStore()
    alone.put("w", pending("abc"))
    assert alone.find(calls("bca")) == "w"  # one window of the set: found in any order
