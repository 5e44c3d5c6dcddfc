"""The harness's own tool-call format: how tools enter the prompt and calls come back out.

Small chat models (SmolLM2's template ignores ``tools=``) have no native tool-call syntax, so
the engine renders the tools into the system prompt and asks for one JSON object per reply::

    {"tool_calls": [{"name": "read_doc", "arguments": {"key": "a"}}]}    call tools
    {"answer": "the final answer"}                                        finish

With ``parallel_tool_calls`` the model is asked to put every independent call in one list;
without it the list holds exactly one call. Tool results go back as ``tool`` messages whose
content is ``"<tool name>: <result>"``.

Rendering is a pure function of the chat, byte-stable across turns, so a growing chat keeps
hitting the prefix cache: an assistant message is rendered exactly in the format the model
emits under constrained decoding (``json.dumps`` separators ``", "`` and ``": "``, keys in
schema order, arguments verbatim as the raw string the model produced), and each earlier
message renders the same way on every later turn.

Constrained decoding uses :func:`reply_schema` (one strict ``anyOf`` branch per tool plus the
answer branch) compiled with no free whitespace, so the output always parses; the gold policy
uses :func:`forced_text`, the exact serialized reply, as a one-choice constraint.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness.engines.base import GenerationSettings, NamedTool, ReplyShape
from harness.errors import EngineRequestError
from harness.messages import Completion, Message, Timings, ToolCall, ToolSpec, Usage

__all__ = (
    "FALLBACK_SYSTEM",
    "ParsedReply",
    "chosen_tools",
    "forced_completion",
    "forced_text",
    "message_text",
    "parse_reply",
    "render_messages",
    "reply_schema",
    "serialize_answer",
    "serialize_calls",
    "tool_functions",
)

#: The system prompt used when the chat has none and tools are given.
FALLBACK_SYSTEM = "You are a careful assistant that completes tasks by calling tools."

_FORMAT_SERIAL = (
    "Call exactly one tool per reply; its result comes back in the next message "
    "(role tool, as `name: result`)."
)
_FORMAT_PARALLEL = (
    "When several calls do not depend on each other's results, put all of them in one "
    "tool_calls list; their results come back in the same order, one tool message each "
    "(as `name: result`)."
)


def tool_functions(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The ``function`` part of each OpenAI tool spec (accepts bare function dicts too)."""
    out = []
    for spec in tools:
        function = spec.get("function", spec)
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ValueError(f"not an OpenAI tool spec (no function name): {spec!r}")
        out.append(dict(function))
    return out


def _tools_block(tools: Sequence[ToolSpec], parallel: bool) -> str:
    lines = []
    for function in tool_functions(tools):
        entry = {
            "name": function["name"],
            "description": function.get("description", ""),
            "parameters": function.get("parameters", {"type": "object", "properties": {}}),
        }
        lines.append(json.dumps(entry, ensure_ascii=False))
    return (
        "You can call these tools (one JSON line each: name, description, parameters):\n"
        + "\n".join(lines)
        + "\n\nReply with exactly one JSON object and nothing else:\n"
        + '{"tool_calls": [{"name": "<tool>", "arguments": {...}}]} to call tools, or\n'
        + '{"answer": "<text>"} to give the final answer.\n'
        + (_FORMAT_PARALLEL if parallel else _FORMAT_SERIAL)
    )


def message_text(content: Any) -> str:
    """The text of a message's ``content`` (a string, ``None`` or OpenAI content parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def serialize_calls(calls: Sequence[ToolCall]) -> str:
    """The reply text for ``calls``; arguments are inserted verbatim (raw strings)."""
    items = ", ".join(
        '{"name": '
        + json.dumps(call.name, ensure_ascii=False)
        + ', "arguments": '
        + (call.arguments.strip() or "{}")
        + "}"
        for call in calls
    )
    return '{"tool_calls": [' + items + "]}"


def forced_completion(
    text: str, forced: str, settings: GenerationSettings, usage: Usage, timings: Timings, who: str
) -> Completion:
    """The completion of a forced (gold) request: the exact calls or answer that were forced,
    once the engine's text is checked to be exactly the forced reply."""
    if text != forced:
        raise EngineRequestError(
            f"The forced (gold) reply diverged: expected {forced!r}, {who} emitted {text!r}; "
            "the structured-outputs backend did not constrain decoding."
        )
    if settings.forced:
        return Completion(None, settings.forced, usage, timings, "tool_calls")
    return Completion(settings.forced_answer or "", (), usage, timings, "stop")


def serialize_answer(text: str) -> str:
    """The reply text for a final answer."""
    return '{"answer": ' + json.dumps(text, ensure_ascii=False) + "}"


def render_messages(
    messages: Sequence[Message], tools: Sequence[ToolSpec], parallel: bool
) -> list[dict[str, str]]:
    """Plain ``{"role", "content"}`` messages for the model's chat template.

    Without tools the chat passes through (contents flattened to text). With tools, the
    tools block joins the system prompt (a default one is added if the chat has none),
    assistant messages render in the reply format and tool messages as ``name: result``.
    """
    if not tools:
        return [
            {"role": str(m.get("role", "user")), "content": message_text(m.get("content"))}
            for m in messages
        ]
    block = _tools_block(tools, parallel)
    rendered: list[dict[str, str]] = []
    names: dict[str, str] = {}
    rest = list(messages)
    if rest and rest[0].get("role") == "system":
        system = message_text(rest.pop(0).get("content"))
        rendered.append({"role": "system", "content": f"{system}\n\n{block}" if system else block})
    else:
        rendered.append({"role": "system", "content": f"{FALLBACK_SYSTEM}\n\n{block}"})
    for message in rest:
        role = str(message.get("role", "user"))
        if role == "assistant":
            rendered.append({"role": "assistant", "content": _assistant_text(message, names)})
        elif role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            name = str(message.get("name") or names.get(call_id, "tool"))
            text = message_text(message.get("content"))
            rendered.append({"role": "tool", "content": f"{name}: {text}"})
        else:
            rendered.append({"role": role, "content": message_text(message.get("content"))})
    return rendered


def _assistant_text(message: Message, names: dict[str, str]) -> str:
    raw_calls = message.get("tool_calls") or []
    if raw_calls:
        calls = [ToolCall.from_openai(raw) for raw in raw_calls]
        for call in calls:
            names[call.id] = call.name
        return serialize_calls(calls)
    return serialize_answer(message_text(message.get("content")))


def _strict(schema: Any) -> Any:
    """A copy of ``schema`` where every object with properties forbids extra properties."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        if isinstance(out.get(key), dict):
            out[key] = {name: _strict(sub) for name, sub in out[key].items()}
    for key in ("items", "additionalProperties", "not", "if", "then", "else", "contains"):
        if isinstance(out.get(key), dict):
            out[key] = _strict(out[key])
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(out.get(key), list):
            out[key] = [_strict(sub) for sub in out[key]]
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def reply_schema(
    tools: Sequence[ToolSpec],
    parallel: bool,
    max_calls: int | None = None,
    *,
    required: bool = False,
) -> dict[str, Any]:
    """A strict JSON schema every valid reply satisfies: one branch per tool, one answer.
    ``max_calls`` caps a parallel reply's list (a small model otherwise lists calls until it
    runs out of tokens). With no tools (every tool closed: :mod:`harness.loop.levers`)
    only the answer branch remains; with ``required`` (and tools) only the calls."""
    branches = []
    for function in tool_functions(tools):
        parameters = copy.deepcopy(function.get("parameters") or {})
        if not parameters or parameters == {"type": "object"}:
            parameters = {"type": "object", "properties": {}}
        branches.append(
            {
                "type": "object",
                "properties": {
                    "name": {"const": function["name"]},
                    "arguments": _strict(parameters),
                },
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    answer = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    if not branches:
        return answer
    calls: dict[str, Any] = {"type": "array", "items": {"anyOf": branches}, "minItems": 1}
    if not parallel:
        calls["maxItems"] = 1
    elif max_calls is not None:
        calls["maxItems"] = max(1, max_calls)
    call_reply = {
        "type": "object",
        "properties": {"tool_calls": calls},
        "required": ["tool_calls"],
        "additionalProperties": False,
    }
    return call_reply if required else {"anyOf": [call_reply, answer]}


def chosen_tools(
    settings: ReplyShape, tools: Sequence[ToolSpec]
) -> tuple[tuple[ToolSpec, ...], bool] | None:
    """The tools a reply's grammar offers under ``settings.tool_choice`` (and
    ``grammar_tools``) and whether the reply must call one; ``None`` when decoding is free
    (no tools, or ``constrain`` off with ``tool_choice`` ``"auto"``). Raises
    :class:`~harness.errors.EngineRequestError` for a choice no grammar can say: a named tool
    the request does not offer, or an object the harness does not interpret."""
    choice = settings.tool_choice
    if not tools or (choice == "auto" and not settings.constrain):
        return None
    offered = tuple(tools if settings.grammar_tools is None else settings.grammar_tools)
    if choice == "auto":
        return offered, False
    if choice == "none":
        return (), False
    if choice == "required":
        return offered, True
    if isinstance(choice, NamedTool):
        named = tuple(t for t in offered if t.get("function", t).get("name") == choice.name)
        if not named:
            raise EngineRequestError(
                f"tool_choice names the tool {choice.name[:100]!r}, which is not among this "
                "request's tools; name one of them, or send 'required'."
            )
        return named, True
    raise EngineRequestError(
        f"tool_choice {json.dumps(choice.value, default=str)[:120]} cannot be honoured by "
        "this engine: it forces 'auto', 'none', 'required' or a named tool."
    )


def forced_text(settings: ReplyShape, tools: Sequence[ToolSpec]) -> str | None:
    """The exact reply the gold policy forces this turn, or ``None`` if nothing is forced."""
    if settings.forced is None:
        return None
    if settings.forced:
        return serialize_calls(settings.forced)
    answer = settings.forced_answer or ""
    return serialize_answer(answer) if tools else answer


@dataclass(frozen=True)
class ParsedReply:
    """What a generated reply says: tool calls, or a final answer (``content``)."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: Literal["stop", "tool_calls", "length"]


def _call_id(text: str, index: int) -> str:
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"call_{digest}_{index}"


def _json_object(text: str) -> Any:
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        try:
            return json.loads(stripped[start : end + 1])
        except ValueError:
            return None
    return None


def parse_reply(
    text: str, *, truncated: bool = False, has_tools: bool = True, salt: str = ""
) -> ParsedReply:
    """Parse generated ``text``; prose or broken JSON becomes a final answer (the loop
    judges it). Call ids are derived from ``salt`` (e.g. the prompt) and the text, so they
    are deterministic. ``truncated``: the output hit ``max_tokens``."""
    length: Literal["length"] = "length"
    if not has_tools:
        return ParsedReply(text, (), length if truncated else "stop")
    obj = _json_object(text)
    if isinstance(obj, dict) and isinstance(obj.get("tool_calls"), list) and obj["tool_calls"]:
        calls = []
        for index, item in enumerate(obj["tool_calls"]):
            if not isinstance(item, dict):
                continue
            arguments = item.get("arguments", {})
            raw = (
                arguments
                if isinstance(arguments, str)
                else json.dumps(arguments, ensure_ascii=False)
            )
            calls.append(
                ToolCall(
                    id=_call_id(salt + text, index), name=str(item.get("name", "")), arguments=raw
                )
            )
        if calls:
            return ParsedReply(None, tuple(calls), "tool_calls")
    if isinstance(obj, dict) and isinstance(obj.get("answer"), str):
        return ParsedReply(obj["answer"], (), length if truncated else "stop")
    return ParsedReply(text, (), length if truncated else "stop")
