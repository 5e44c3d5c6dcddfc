"""The P+V validator's rules."""

from __future__ import annotations

import json

from harness import ToolCall
from harness.certify.validator import validate_window
from tests.doubles import MANIFEST, Store, make_toolset

PHASE = MANIFEST.skill("report").phases[0]  # fan_out read_doc, slots = input:keys
INPUTS = {"keys": ["a", "b"]}


def read(i: int, key: str) -> ToolCall:
    return ToolCall(f"call_{i}", "read_doc", json.dumps({"key": key}))


def test_a_window_that_fills_its_slots_with_valid_distinct_calls_passes() -> None:
    assert validate_window(make_toolset(Store()), [read(0, "a"), read(1, "b")], PHASE, INPUTS) == []


def test_over_filling_duplicates_unknown_tools_and_bad_arguments_are_rejected() -> None:
    ts = make_toolset(Store())
    over = validate_window(ts, [read(0, "a"), read(1, "b"), read(2, "c")], PHASE, INPUTS)
    assert any("2 slots" in p for p in over)
    assert any(
        "duplicate" in p for p in validate_window(ts, [read(0, "a"), read(1, "a")], PHASE, INPUTS)
    )
    assert any(
        "unknown tool" in p
        for p in validate_window(ts, [ToolCall("c", "reed", "{}")], PHASE, INPUTS)
    )
    assert validate_window(ts, [ToolCall("c", "read_doc", '{"key": 1}')], PHASE, INPUTS)


def test_a_message_may_hold_fewer_calls_than_the_slots() -> None:
    """A phase's calls can be split across messages by a write conflict (D1)."""
    assert validate_window(make_toolset(Store()), [read(0, "a")], PHASE, INPUTS) == []


def test_a_call_needing_a_result_of_its_own_window_fails_D2() -> None:
    chain = MANIFEST.skill("chain").phases[0]
    problems = validate_window(make_toolset(Store()), [read(0, "a"), read(1, "b")], chain, {})
    assert any("(D2)" in p for p in problems)
