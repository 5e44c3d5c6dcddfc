"""The workspace store on disk: writes survive the process, keyed writes apply once per key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.messages import ToolCall
from harness.tools.execute import execute_call
from harness.toolsets.workspace import make_toolset, new_state
from harness.toolsets.workspace.durable import DurableStore, durable_toolset

pytestmark = pytest.mark.anyio


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall("call_1", name, json.dumps(arguments))


async def test_the_durable_tools_answer_exactly_as_the_in_memory_ones(tmp_path: Path):
    state = new_state(3)
    key = state.keys()[0]
    store = DurableStore.create(tmp_path / "s.sqlite3", state.copy())
    durable, memory = durable_toolset(store, keyed=False), make_toolset(state)
    for call in (
        _call("append_note", key=key, text="hello"),
        _call("set_status", key=key, status="approved"),
        _call("add_tag", key=key, tag="ops"),
        _call("read_doc", key=key),
        _call("list_docs"),
    ):
        assert (await execute_call(durable, call)).content == (
            await execute_call(memory, call)
        ).content
    assert store.fingerprint() == state.fingerprint()
    assert durable["append_note"].effect == memory["append_note"].effect


async def test_writes_survive_closing_and_reopening_the_store(tmp_path: Path):
    state = new_state(0)
    key = state.keys()[0]
    path = tmp_path / "s.sqlite3"
    store = DurableStore.create(path, state)
    await execute_call(durable_toolset(store), _call("append_note", key=key, text="kept"))
    store.close()
    again = DurableStore(path)
    assert again.state().get(key).notes == ("kept",)
    assert [(tool, effective) for _, tool, effective in again.applications()] == [
        ("append_note", True)
    ]


async def test_a_keyed_write_applies_once_per_key_and_repeats_its_first_answer(tmp_path: Path):
    state = new_state(0)
    key = state.keys()[0]
    store = DurableStore.create(tmp_path / "s.sqlite3", state)
    toolset = durable_toolset(store, keyed=True)
    assert toolset["append_note"].effect.accepts_idempotency_key
    assert not toolset["read_doc"].effect.accepts_idempotency_key
    call = _call("append_note", key=key, text="pay")
    first = await execute_call(toolset, call, idempotency_key="run/call_1")
    again = await execute_call(toolset, call, idempotency_key="run/call_1")
    other = await execute_call(toolset, call, idempotency_key="run/call_2")
    assert first.content == again.content
    assert store.state().get(key).notes == ("pay", "pay")  # once for call_1, once for call_2
    assert [e for _, _, e in store.applications()] == [True, False, True]
    assert other.content != first.content


async def test_the_hook_sees_each_write_before_and_after(tmp_path: Path):
    seen: list[str] = []
    state = new_state(0)
    store = DurableStore.create(tmp_path / "s.sqlite3", state)
    toolset = durable_toolset(store, hook=seen.append)
    await execute_call(toolset, _call("read_doc", key=state.keys()[0]))
    await execute_call(toolset, _call("set_owner", key=state.keys()[0], owner="ana"))
    assert seen == ["before_write", "after_write"]
