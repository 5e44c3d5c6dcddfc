"""Claims about ``GenerationSettings.tool_choice`` on the engine seam: the reply grammar the
in-process engine forces for each choice (``"required"``: calls only, a named tool: calls
to it, ``"none"``: an answer), the wire form the HTTP engine sends, and — on the real
engine (marked ``engine``) — replies that obey each choice where the model, left free,
does something else."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from harness.engines import _format
from harness.engines.base import (
    GenerationSettings,
    NamedTool,
    OtherToolChoice,
    ToolChoice,
    ToolChoiceEngine,
    takes_tool_choice,
)
from harness.engines.openai_http import OpenAIHTTPEngine
from harness.errors import EngineRequestError
from harness.messages import Message, ToolSpec
from tests.engine_support import READ_DOC

LIST_DOCS: ToolSpec = {
    "type": "function",
    "function": {
        "name": "list_docs",
        "description": "List the documents' keys.",
        "parameters": {"type": "object", "properties": {}},
    },
}
TOOLS = [READ_DOC, LIST_DOCS]


def _names(tools: tuple[ToolSpec, ...]) -> list[str]:
    return [t["function"]["name"] for t in tools]


@pytest.mark.parametrize(
    ("choice", "names", "required"),
    [
        ("auto", ["read_doc", "list_docs"], False),
        ("required", ["read_doc", "list_docs"], True),
        ("none", [], False),
        (NamedTool("list_docs"), ["list_docs"], True),
    ],
)
def test_each_choice_gives_the_grammar_its_tools_and_whether_a_call_is_required(
    choice: ToolChoice, names: list[str], required: bool
) -> None:
    chosen = _format.chosen_tools(GenerationSettings(tool_choice=choice), TOOLS)
    assert chosen is not None
    assert _names(chosen[0]) == names
    assert chosen[1] is required


def test_a_choice_is_forced_even_when_decoding_is_otherwise_free() -> None:
    free = GenerationSettings(constrain=False)
    assert _format.chosen_tools(free, TOOLS) is None
    chosen = _format.chosen_tools(
        GenerationSettings(constrain=False, tool_choice="required"), TOOLS
    )
    assert chosen is not None
    assert chosen[1] is True
    assert _format.chosen_tools(GenerationSettings(tool_choice="required"), []) is None


def test_a_named_tool_is_looked_for_among_the_grammars_tools() -> None:
    narrowed = GenerationSettings(tool_choice=NamedTool("read_doc"), grammar_tools=(LIST_DOCS,))
    with pytest.raises(EngineRequestError, match="'read_doc', which is not among"):
        _format.chosen_tools(narrowed, TOOLS)


def test_an_object_the_harness_does_not_interpret_cannot_be_forced() -> None:
    other = OtherToolChoice({"type": "allowed_tools", "allowed_tools": {"mode": "auto"}})
    with pytest.raises(EngineRequestError, match="cannot be honoured"):
        _format.chosen_tools(GenerationSettings(tool_choice=other), TOOLS)


def test_a_required_reply_schema_has_no_answer_branch() -> None:
    free = _format.reply_schema(TOOLS, parallel=False)
    required = _format.reply_schema(TOOLS, parallel=False, required=True)
    assert [sorted(b["properties"]) for b in free["anyOf"]] == [["tool_calls"], ["answer"]]
    assert required == free["anyOf"][0]
    assert required["properties"]["tool_calls"]["minItems"] == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        (NamedTool("read_doc"), {"type": "function", "function": {"name": "read_doc"}}),
        (
            OtherToolChoice({"type": "allowed_tools", "allowed_tools": {"mode": "required"}}),
            {"type": "allowed_tools", "allowed_tools": {"mode": "required"}},
        ),
    ],
)
async def test_the_http_engine_sends_the_choice_in_chat_completions_spelling(
    choice: ToolChoice, sent: Any
) -> None:
    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        message = {"role": "assistant", "content": "done"}
        choices = [{"index": 0, "message": message, "finish_reason": "stop"}]
        return httpx.Response(200, json={"choices": choices, "usage": {}})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    async with OpenAIHTTPEngine("http://up/v1", "m", client=client, max_retries=0) as engine:
        assert engine.takes_tool_choice
        chat: list[Message] = [{"role": "user", "content": "hi"}]
        await engine.generate(chat, TOOLS, GenerationSettings(tool_choice=choice))
        unsent = GenerationSettings(tool_choice=choice, unsent=frozenset({"tool_choice"}))
        await engine.generate(chat, TOOLS, unsent)
    assert bodies[0]["tool_choice"] == sent
    assert "tool_choice" not in bodies[1]


def test_the_harness_format_takes_no_tool_choice() -> None:
    engine = OpenAIHTTPEngine("http://up/v1", "m", tool_format="harness")
    assert not engine.takes_tool_choice


def test_taking_tool_choice_is_a_capability_read_through_its_protocol() -> None:
    openai = OpenAIHTTPEngine("http://up/v1", "m")
    harness_format = OpenAIHTTPEngine("http://up/v1", "m", tool_format="harness")
    assert isinstance(openai, ToolChoiceEngine)
    assert takes_tool_choice(openai)
    assert not takes_tool_choice(harness_format)
    assert not takes_tool_choice(object())  # an engine without the capability ignores it


# -- the real engine -------------------------------------------------------------------------

#: SmolLM2 answers this one without a call ("Paris") and calls read_doc for the next.
ANSWER_ONLY: list[Message] = [
    {"role": "assistant", "content": "I have read everything."},
    {
        "role": "user",
        "content": "Thanks, now give me your final answer: what is the capital of France?",
    },
]
NEEDS_A_DOC: list[Message] = [
    {"role": "user", "content": "What does the document with key 'alpha' say?"}
]


@pytest.mark.anyio
@pytest.mark.engine
@pytest.mark.timeout(600)
async def test_the_embedded_engine_obeys_each_tool_choice(real_engine: Any) -> None:
    settings = GenerationSettings(max_tokens=48, temperature=0.0)
    free = await real_engine.generate(ANSWER_ONLY, TOOLS, settings)
    required = await real_engine.generate(
        ANSWER_ONLY, TOOLS, GenerationSettings(max_tokens=48, tool_choice="required")
    )
    named = await real_engine.generate(
        NEEDS_A_DOC, TOOLS, GenerationSettings(max_tokens=48, tool_choice=NamedTool("list_docs"))
    )
    unnamed = await real_engine.generate(NEEDS_A_DOC, TOOLS, settings)
    none = await real_engine.generate(
        NEEDS_A_DOC, TOOLS, GenerationSettings(max_tokens=48, tool_choice="none")
    )
    unconstrained = await real_engine.generate(
        ANSWER_ONLY,
        TOOLS,
        GenerationSettings(max_tokens=48, constrain=False, tool_choice="required"),
    )
    assert real_engine.takes_tool_choice
    # required: a call where the free model answers
    assert not free.tool_calls, free
    assert len(required.tool_calls) == 1
    assert len(unconstrained.tool_calls) == 1  # forced even with constrain off
    # a named tool: that tool, where the free model calls another
    assert [c.name for c in unnamed.tool_calls] == ["read_doc"], unnamed
    assert [c.name for c in named.tool_calls] == ["list_docs"]
    # none: an answer where the free model calls a tool
    assert not none.tool_calls
    assert none.content
