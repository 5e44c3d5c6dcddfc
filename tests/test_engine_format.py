"""Claims about the harness's tool-call format (harness.engines._format): what the model sees,
what it must answer, and how its answer is read back."""

from __future__ import annotations

import itertools
from dataclasses import fields, replace

import jsonschema
import pytest

from harness.engines import _format
from harness.engines.base import (
    DraftHints,
    GenerationSettings,
    ReplyShape,
    Sampling,
    WirePassThrough,
)
from harness.messages import Completion, ToolCall
from tests.engine_support import READ_DOC

ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
TOOLS = [READ_DOC, ADD]


def _turns() -> list[list[dict[str, object]]]:
    """A growing chat, one snapshot per turn, as the loop builds it."""
    chat: list[dict[str, object]] = [
        {"role": "system", "content": "You manage documents."},
        {"role": "user", "content": "Read a and b."},
    ]
    snapshots = [list(chat)]
    first = Completion(None, (ToolCall("call_1", "read_doc", '{"key": "a"}'),))
    chat += [
        first.to_message(),
        {"role": "tool", "tool_call_id": "call_1", "name": "read_doc", "content": "alpha"},
    ]
    snapshots.append(list(chat))
    second = Completion(None, (ToolCall("call_2", "read_doc", '{"key": "b"}'),))
    chat += [second.to_message(), {"role": "tool", "tool_call_id": "call_2", "content": "beta"}]
    snapshots.append(list(chat))
    chat.append(Completion("a is alpha, b is beta").to_message())
    snapshots.append(list(chat))
    return snapshots


def test_rendering_an_earlier_turn_is_a_prefix_of_rendering_every_later_turn() -> None:
    rendered = [_format.render_messages(turn, TOOLS, False) for turn in _turns()]
    for earlier, later in itertools.pairwise(rendered):
        assert later[: len(earlier)] == earlier


def test_rendering_is_deterministic_across_calls() -> None:
    turn = _turns()[-1]
    assert _format.render_messages(turn, TOOLS, True) == _format.render_messages(
        [dict(m) for m in turn], [dict(t) for t in TOOLS], True
    )


def test_tools_and_the_reply_format_join_the_system_prompt() -> None:
    rendered = _format.render_messages(_turns()[0], TOOLS, False)
    system = rendered[0]["content"]
    assert rendered[0]["role"] == "system"
    assert system.startswith("You manage documents.")
    assert '"name": "read_doc"' in system
    assert '"name": "add"' in system
    assert '{"tool_calls": [' in system
    assert '{"answer": ' in system
    assert "exactly one tool per reply" in system


def test_parallel_prompting_asks_for_every_independent_call_at_once() -> None:
    system = _format.render_messages(_turns()[0], TOOLS, True)[0]["content"]
    assert "put all of them in one tool_calls list" in system


def test_a_chat_without_system_prompt_gets_the_default_one() -> None:
    rendered = _format.render_messages([{"role": "user", "content": "hi"}], TOOLS, False)
    assert rendered[0]["content"].startswith(_format.FALLBACK_SYSTEM)


def test_without_tools_the_chat_passes_through_as_text() -> None:
    chat = [{"role": "user", "content": [{"type": "text", "text": "hi "}, {"text": "there"}]}]
    assert _format.render_messages(chat, [], False) == [{"role": "user", "content": "hi there"}]


def test_assistant_calls_render_exactly_as_the_model_emits_them() -> None:
    rendered = _format.render_messages(_turns()[-1], TOOLS, False)
    assert rendered[2] == {
        "role": "assistant",
        "content": '{"tool_calls": [{"name": "read_doc", "arguments": {"key": "a"}}]}',
    }
    assert rendered[3] == {"role": "tool", "content": "read_doc: alpha"}
    # The tool name is looked up from the call id when the tool message does not carry it.
    assert rendered[5] == {"role": "tool", "content": "read_doc: beta"}
    assert rendered[6] == {"role": "assistant", "content": '{"answer": "a is alpha, b is beta"}'}


def test_a_serialized_reply_parses_back_to_the_same_calls() -> None:
    calls = (
        ToolCall("x", "read_doc", '{"key": "ä/\\"q\\""}'),
        ToolCall("y", "add", '{"a": 1, "b": -2}'),
    )
    parsed = _format.parse_reply(_format.serialize_calls(calls))
    assert parsed.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        (c.name, c.arguments) for c in calls
    ]


def test_call_ids_are_deterministic_and_distinct_within_a_reply() -> None:
    text = '{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "add", "arguments": {"a": 3, "b": 4}}]}'
    first = _format.parse_reply(text, salt="prompt")
    again = _format.parse_reply(text, salt="prompt")
    assert [c.id for c in first.tool_calls] == [c.id for c in again.tool_calls]
    assert len({c.id for c in first.tool_calls}) == 2


@pytest.mark.parametrize(
    ("text", "content", "finish"),
    [
        ('{"answer": "done"}', "done", "stop"),
        ("Sure! The answer is 4.", "Sure! The answer is 4.", "stop"),
        ('{"tool_calls": []}', '{"tool_calls": []}', "stop"),
        ('{"tool_calls": [{"name": "add", "argu', '{"tool_calls": [{"name": "add", "argu', "stop"),
    ],
)
def test_prose_and_broken_json_become_a_final_answer_for_the_loop_to_judge(
    text: str, content: str, finish: str
) -> None:
    parsed = _format.parse_reply(text)
    assert parsed.content == content
    assert parsed.tool_calls == ()
    assert parsed.finish_reason == finish


def test_a_truncated_reply_reports_length() -> None:
    assert _format.parse_reply('{"answer": "lo', truncated=True).finish_reason == "length"


def test_json_around_prose_is_still_found() -> None:
    parsed = _format.parse_reply(
        'Here: {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]} ok'
    )
    assert parsed.tool_calls[0].parsed_arguments() == {"a": 1, "b": 2}


def test_string_arguments_are_kept_raw_for_the_loop_to_report() -> None:
    parsed = _format.parse_reply('{"tool_calls": [{"name": "add", "arguments": "not json"}]}')
    assert parsed.tool_calls[0].arguments == "not json"


def test_the_reply_schema_accepts_valid_replies_and_nothing_else() -> None:
    schema = _format.reply_schema(TOOLS, parallel=False)
    valid = [
        {"tool_calls": [{"name": "read_doc", "arguments": {"key": "a"}}]},
        {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
        {"answer": "done"},
    ]
    invalid = [
        {"tool_calls": [{"name": "read_doc", "arguments": {"key": "a", "extra": 1}}]},
        {"tool_calls": [{"name": "delete_all", "arguments": {}}]},
        {"tool_calls": [{"name": "add", "arguments": {"a": "1", "b": 2}}]},
        {"tool_calls": []},
        {"tool_calls": [{"name": "read_doc", "arguments": {"key": "a"}}] * 2},
        {"answer": "done", "tool_calls": []},
    ]
    for reply in valid:
        jsonschema.validate(reply, schema)
    for reply in invalid:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(reply, schema)


def test_the_parallel_reply_schema_allows_several_calls() -> None:
    schema = _format.reply_schema(TOOLS, parallel=True)
    jsonschema.validate(
        {
            "tool_calls": [
                {"name": "read_doc", "arguments": {"key": "a"}},
                {"name": "add", "arguments": {"a": 1, "b": 2}},
            ]
        },
        schema,
    )


def test_nested_objects_in_a_tool_schema_forbid_extra_properties() -> None:
    nested = {
        "type": "function",
        "function": {
            "name": "put",
            "parameters": {
                "type": "object",
                "properties": {
                    "doc": {"type": "object", "properties": {"title": {"type": "string"}}},
                    # A property literally named "properties" is a name, not a keyword.
                    "properties": {"type": "string"},
                },
            },
        },
    }
    schema = _format.reply_schema([nested], parallel=False)
    reply = {"tool_calls": [{"name": "put", "arguments": {"doc": {"title": "t", "x": 1}}}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply, schema)
    jsonschema.validate({"tool_calls": [{"name": "put", "arguments": {"properties": "p"}}]}, schema)


def test_forced_text_is_the_exact_serialized_gold_reply() -> None:
    calls = (ToolCall("g", "read_doc", '{"key": "a"}'),)
    assert _format.forced_text(GenerationSettings(forced=calls), TOOLS) == (
        '{"tool_calls": [{"name": "read_doc", "arguments": {"key": "a"}}]}'
    )
    answer = GenerationSettings(forced=(), forced_answer="fin")
    assert _format.forced_text(answer, TOOLS) == '{"answer": "fin"}'
    assert _format.forced_text(answer, []) == "fin"
    assert _format.forced_text(GenerationSettings(), TOOLS) is None


def test_a_tool_spec_without_a_function_name_is_refused() -> None:
    with pytest.raises(ValueError, match="no function name"):
        _format.tool_functions([{"type": "function", "function": {}}])


def test_a_parallel_reply_schema_caps_the_number_of_calls() -> None:
    capped = _format.reply_schema([READ_DOC], True, 3)
    calls = capped["anyOf"][0]["properties"]["tool_calls"]
    assert calls["maxItems"] == 3
    one = {"name": "read_doc", "arguments": {"key": "a"}}
    jsonschema.validate({"tool_calls": [one] * 3}, capped)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tool_calls": [one] * 4}, capped)
    assert (
        "maxItems"
        not in _format.reply_schema([READ_DOC], True)["anyOf"][0]["properties"]["tool_calls"]
    )


def test_generation_settings_are_four_concerns_built_by_keyword_as_ever() -> None:
    settings = GenerationSettings(max_tokens=64, tool_choice="required", model="m", stop=("x",))
    concerns = (Sampling, ReplyShape, DraftHints, WirePassThrough)
    assert all(isinstance(settings, concern) for concern in concerns)
    names = [f.name for concern in concerns for f in fields(concern)]
    assert sorted(names) == sorted(f.name for f in fields(GenerationSettings))
    assert len(names) == len(set(names))  # each field belongs to one concern
    assert replace(settings, temperature=0.5).tool_choice == "required"
    assert _format.forced_text(ReplyShape(forced=()), []) == ""
