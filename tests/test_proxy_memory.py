"""Claims about the proxy's memory (harness.proxy.conversation.Conversations): the waiting
conversations are bounded by the bytes of history they hold, the oldest dropped first; one
larger than the budget is not kept; a dropped one costs a cold start, never a wrong answer;
and dropped runs are reclaimed, not left to the cycle collector's schedule."""

from __future__ import annotations

import gc
import json
import weakref
from typing import Any

import httpx
import pytest

from harness.messages import Message
from harness.proxy import in_process_client
from harness.proxy.conversation import Conversations, history_bytes
from harness.testing import ScriptedEngine
from tests.test_proxy import body, client_loop, make_app, run_tool, survey_script

pytestmark = pytest.mark.anyio

BIG = 20_000  # characters of the first result of each window


def opening(index: int) -> list[Message]:
    return [
        {"role": "system", "content": "You read documents."},
        {"role": "user", "content": f"Survey a, b and c ({index})."},
    ]


async def abandoned(client: httpx.AsyncClient, index: int) -> list[Message]:
    """A conversation taken to the report call and left waiting; its history so far."""
    messages = opening(index)
    first = await client.post("/chat/completions", json=body(messages))
    message = first.json()["choices"][0]["message"]
    messages.append(message)
    for i, call in enumerate(message["tool_calls"]):
        text = "x" * BIG if i == 0 else run_tool(call)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    second = await client.post("/chat/completions", json=body(messages))
    assert second.status_code == 200, second.text
    messages.append(second.json()["choices"][0]["message"])
    return messages


def test_history_bytes_counts_every_string_once_and_grows_with_the_text() -> None:
    small = [{"role": "user", "content": "hi"}]
    large = [{"role": "user", "content": "hi" * 1000}]
    assert history_bytes(large) - history_bytes(small) == 1998
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "x" * 500}}
    assert history_bytes([{"role": "assistant", "tool_calls": [call]}]) > 500


async def test_waiting_conversations_hold_at_most_the_byte_budget_the_oldest_dropped() -> None:
    budget = 3 * BIG
    app = make_app(ScriptedEngine(survey_script), conversations_bytes=budget)
    async with in_process_client(app) as client:
        service = app.state.proxy
        histories = [await abandoned(client, i) for i in range(6)]
        conversations = service.conversations
        assert conversations.bytes <= budget
        assert 1 <= len(conversations) < 6
        assert conversations.evicted == 6 - len(conversations)
        # a waiting run holds its transcript only, not the last request's copy of it too
        assert all(c.client_messages == () for c in conversations.waiting())
        assert all(c.size == history_bytes(c.held()) for c in conversations.waiting())
        kept = {c.task.history[1]["content"] for c in conversations.waiting()}
        assert kept == {str(opening(i)[1]["content"]) for i in range(6 - len(kept), 6)}
        # the oldest was dropped: its client's next request cold-starts, with the right answer
        oldest = histories[0]
        call = oldest[-1]["tool_calls"][0]
        oldest.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(call)})
        response = await client.post("/chat/completions", json=body(oldest))
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"].startswith("done: ")


async def test_a_conversation_larger_than_the_budget_is_not_kept_and_still_answers() -> None:
    app = make_app(ScriptedEngine(survey_script), conversations_bytes=BIG // 2)
    async with in_process_client(app) as client:
        await abandoned(client, 0)
        assert len(app.state.proxy.conversations) == 0
        messages, _ = await client_loop(client)  # a small one is kept as it goes
    assert json.dumps(messages).count("done: ") == 1


async def test_dropped_runs_are_reclaimed_once_their_bytes_add_up() -> None:
    parked: list[weakref.ReferenceType[Any]] = []

    class Recording(Conversations):
        def park(self, digest: str, conversation: Any) -> None:
            parked.append(weakref.ref(conversation))
            super().park(digest, conversation)

    # every conversation with its big result is over the budget: dropped as it parks
    conversations = Recording(capacity=1024, max_bytes=BIG // 2)
    app = make_app(ScriptedEngine(survey_script))
    app.state.proxy.conversations = conversations
    gc.disable()  # only the proxy's own collection may free a dropped run
    try:
        async with in_process_client(app) as client:
            await abandoned(client, 0)
            first = parked[0]
            assert conversations.evicted == 1
            assert conversations.collections == 0
            conversations.unreclaimed = 8 * 1024 * 1024  # as if many had been dropped
            await abandoned(client, 1)
            assert conversations.collections == 1
            reclaimed = first() is None
    finally:
        gc.enable()
    assert reclaimed
