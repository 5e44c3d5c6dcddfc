"""OpenAI chat messages <-> harness messages: the one place that converts between them.

The harness's chat (:data:`~harness.engines.base.Message`) is the OpenAI chat-completions
format already, with two habits of its own: a tool message carries the ``name`` of the tool
it answers (chat templates render it), and an assistant message's ``tool_calls`` hold the
arguments as the raw string the model wrote. What a user's own loop (or an HTTP client) hands
over may differ: ``developer`` instead of ``system``, content as a list of text parts, SDK
objects instead of dicts, arguments as an object, tool messages without ``name``.

* :func:`messages_from_openai` checks and normalises an OpenAI-format history into harness
  messages (``Task.from_messages`` and a continued ``run_loop`` use it). Every problem is a
  :class:`~harness.errors.ConfigError` naming the message index and the fix.
* :func:`messages_to_openai` gives harness messages back as plain OpenAI-format dicts, fit
  to send to any OpenAI-compatible server or to append to the user's own history
  (``LoopResult.openai_messages()``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.errors import ConfigError
from harness.messages import Message, ToolCall

__all__ = ("ROLES", "call_ids", "message_from_openai", "messages_from_openai", "messages_to_openai")

#: The roles a history may hold (``developer`` is read as ``system``).
ROLES = ("system", "developer", "user", "assistant", "tool")


def _as_dict(message: Any, index: int) -> Mapping[str, Any]:
    if isinstance(message, Mapping):
        return message
    dump = getattr(message, "model_dump", None)  # an openai / pydantic SDK object
    if callable(dump):
        dumped = dump(exclude_none=True)
        if isinstance(dumped, Mapping):
            return dumped
    raise ConfigError(
        f"Message {index} is a {type(message).__name__}, not a chat message; pass dicts like "
        "{'role': 'user', 'content': '...'} (or the openai SDK's message objects)."
    )


def _text(content: Any, index: int, role: str) -> str | None:
    """Content as text: a string, None, or a list of text parts joined."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind != "text" or not isinstance(part.get("text"), str):
                raise ConfigError(
                    f"Message {index} ({role}) has a content part of type {kind!r}; only text "
                    "parts ({'type': 'text', 'text': ...}) are supported. Send the text alone."
                )
            texts.append(part["text"])
        return "".join(texts)
    raise ConfigError(
        f"Message {index} ({role}) has content of type {type(content).__name__}; send a string, "
        "null, or a list of text parts."
    )


def _tool_calls(raw: Any, index: int) -> list[ToolCall]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            f"Message {index} (assistant) has tool_calls that are not a non-empty list; drop the "
            "field or list the calls."
        )
    calls: list[ToolCall] = []
    for j, entry in enumerate(raw):
        entry = _as_dict(entry, index)
        function = entry.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ConfigError(
                f"Message {index} (assistant), tool call {j} has no function name; each call "
                "is {'id': ..., 'type': 'function', 'function': {'name': ..., 'arguments': ...}}."
            )
        call_id = entry.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ConfigError(
                f"Message {index} (assistant), tool call {j} ({function['name']!r}) has no id; "
                "every call needs the id its tool message answers with tool_call_id."
            )
        calls.append(ToolCall.from_openai(entry))
    return calls


def message_from_openai(message: Any, index: int = 0) -> Message:
    """One OpenAI-format message as a harness message (no cross-message checks)."""
    raw = _as_dict(message, index)
    role = raw.get("role")
    if role not in ROLES:
        raise ConfigError(
            f"Message {index} has role {role!r}; a history holds only {', '.join(ROLES)}."
        )
    content = _text(raw.get("content"), index, str(role))
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ConfigError(
                f"Message {index} (tool) has no tool_call_id; name the call it answers."
            )
        out: Message = {"role": "tool", "tool_call_id": call_id, "content": content or ""}
        if isinstance(raw.get("name"), str):
            out["name"] = raw["name"]
        return out
    if role == "assistant":
        out = {"role": "assistant", "content": content}
        if raw.get("tool_calls"):
            out["tool_calls"] = [c.to_openai() for c in _tool_calls(raw["tool_calls"], index)]
        return out
    return {"role": "system" if role == "developer" else role, "content": content or ""}


def messages_from_openai(messages: Iterable[Any]) -> list[Message]:
    """An OpenAI-format history as harness messages, checked as a whole.

    Every tool message must answer a call of an earlier assistant message, once, and every
    call must be answered before the next assistant or user message (and by the end: a
    history whose last calls have no results cannot be continued — run them and append their
    tool messages first). Call ids must be unique. Tool messages get the ``name`` of their
    call.
    """
    out: list[Message] = []
    names: dict[str, str] = {}  # every call id so far -> its tool
    open_calls: dict[str, int] = {}  # calls not answered yet -> the message that made them
    for index, message in enumerate(messages):
        converted = message_from_openai(message, index)
        role = converted["role"]
        if role == "tool":
            call_id = converted["tool_call_id"]
            if call_id not in open_calls:
                seen = "was answered already" if call_id in names else "matches no earlier call"
                raise ConfigError(
                    f"Message {index} (tool) answers tool_call_id {call_id!r}, which {seen}; "
                    "each tool message answers one call of an earlier assistant message."
                )
            del open_calls[call_id]
            converted.setdefault("name", names[call_id])
        else:
            _check_answered(open_calls, index)
            for entry in converted.get("tool_calls", ()):
                call_id = entry["id"]
                if call_id in names:
                    raise ConfigError(
                        f"Message {index} (assistant) repeats tool call id {call_id!r}; "
                        "call ids must be unique in a history."
                    )
                names[call_id] = entry["function"]["name"]
                open_calls[call_id] = index
        out.append(converted)
    _check_answered(open_calls, len(out))
    return out


def _check_answered(open_calls: dict[str, int], index: int) -> None:
    if open_calls:
        where = sorted(set(open_calls.values()))
        raise ConfigError(
            f"Tool call(s) {', '.join(repr(c) for c in open_calls)} of message {where[0]} have "
            f"no tool message before message {index}; append each call's result as "
            "{'role': 'tool', 'tool_call_id': ..., 'content': ...} right after it."
        )


def messages_to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Harness messages as plain OpenAI-format dicts (new dicts; ``name`` left off tool
    messages, arguments kept as the raw string the model wrote)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": message["tool_call_id"],
                    "content": str(message.get("content") or ""),
                }
            )
        elif role == "assistant":
            converted: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
            if message.get("tool_calls"):
                converted["tool_calls"] = [
                    ToolCall.from_openai(c).to_openai() for c in message["tool_calls"]
                ]
            out.append(converted)
        else:
            out.append({"role": role, "content": message.get("content")})
    return out


def call_ids(messages: Iterable[Message]) -> set[str]:
    """Every tool call id the messages hold (so new calls can be given ids that are not)."""
    return {
        str(c.get("id"))
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or ()
    }
