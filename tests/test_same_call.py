"""Claims about "is this the same call?": one answer (harness.messages.call_key) that the
validator, the proxy's minted ids and certified speculation all use."""

from __future__ import annotations

import json

from harness.certify.validator import validate_window
from harness.messages import ToolCall, call_key, canonical_arguments, same_call
from harness.proxy.ids import CallIds
from tests.doubles import MANIFEST, Store, make_toolset


def test_a_call_is_the_same_call_whatever_the_spelling_of_its_arguments() -> None:
    raw = ToolCall("a", "read_doc", '{"key": "x", "n": 1}')
    respelled = ToolCall("b", "read_doc", '{ "n" : 1.0, "key":"x" }')
    assert same_call(raw, respelled)
    assert call_key("read_doc", raw.arguments) == call_key("read_doc", {"n": 1.0, "key": "x"})


def test_another_tool_or_another_value_is_another_call() -> None:
    call = ToolCall("a", "read_doc", '{"key": "x"}')
    assert not same_call(call, ToolCall("a", "read_docs", '{"key": "x"}'))
    assert not same_call(call, ToolCall("a", "read_doc", '{"key": "y"}'))
    assert call_key("t", {"n": 1}) != call_key("t", {"n": "1"})
    assert call_key("t", {"n": 1}) != call_key("t", {"n": True})


def test_parsed_and_raw_arguments_have_one_spelling() -> None:
    parsed = {"b": [1, 2.5, None, False], "a": {"z": "é", "y": 0.1}}
    assert canonical_arguments(parsed) == canonical_arguments(json.dumps(parsed))


def test_the_validator_finds_duplicates_by_the_same_answer() -> None:
    phase = MANIFEST.skill("report").phases[0]
    toolset = make_toolset(Store())
    calls = [
        ToolCall("a", "read_doc", '{"key": "a"}'),
        ToolCall("b", "read_doc", '{ "key":"a" }'),
    ]
    assert same_call(*calls)
    assert any("duplicate" in p for p in validate_window(toolset, calls, phase, {"keys": ["a"]}))


def test_the_proxy_verifies_a_minted_id_by_the_same_answer() -> None:
    ids = CallIds(b"k" * 32)
    call = ToolCall("up_1", "read_doc", '{"key": "a", "n": 1}')
    minted = ToolCall(ids.mint("w", 0, 1, call), call.name, call.arguments)
    respelled = ToolCall(minted.id, call.name, '{"n": 1.0, "key": "a"}')
    edited = ToolCall(minted.id, call.name, '{"n": 2, "key": "a"}')
    assert same_call(minted, respelled)
    assert ids.verify(respelled) is not None
    assert not same_call(minted, edited)
    assert ids.verify(edited) is None
