"""The Anthropic Messages API as the proxy speaks it (``POST /v1/messages``): a pure
translation to and from the chat-completions form (:mod:`harness.proxy.wire`).

Request fields honoured: ``model``, ``max_tokens`` (required, as in that API), ``system`` (a
string or text blocks), ``messages`` (``user`` / ``assistant``, content a string or blocks:
``text``, ``tool_use``, ``tool_result`` with string or text-block content and ``is_error``),
``tools`` (``name``, ``description``, ``input_schema``), ``tool_choice`` (``auto``, ``any``
as Chat Completions' ``required``, ``tool`` as a named function, ``none``: served as
:mod:`harness.proxy.upstream` says; with ``disable_parallel_tool_use`` — the Messages API's
``parallel_tool_calls: false``),
``temperature``, ``top_p`` (1), ``stop_sequences``, ``stream``, ``metadata`` and the
harness's own ``harness_skill`` / ``harness_inputs`` / ``harness_arm``. ``cache_control`` on
a block is accepted and has no effect. An assistant turn's ``tool_use`` blocks are one
assistant message with several calls (their ``input`` as the call's JSON arguments; a
flattened window is recognised by the value of its arguments, so the re-serialisation does
not matter); each ``tool_result`` block is one ``tool`` message, in the order the client
sent them (an ``is_error`` result's text is prefixed with ``Error: ``), and the user turn's
text blocks follow them as one user message.

The request is checked by its typed model (:class:`~harness.proxy.models.MessagesBody`).
Unsupported, each a 400 in Anthropic's error body
(``{"type": "error", "error": {"type": "invalid_request_error", "message": ...}}``):
images, documents, thinking blocks, server tools, another ``tool_choice``, ``top_k``,
unknown fields.

The output is a ``message``: a ``text`` block when the model wrote text, one ``tool_use``
block per call (``id`` is the id the proxy minted for a window's call, ``input`` the parsed
arguments), ``stop_reason`` (``end_turn``, ``tool_use``, ``max_tokens``) and ``usage``
(``input_tokens`` not read from the prefix cache, ``cache_read_input_tokens``,
``output_tokens``). Streamed, it is ``message_start``, ``content_block_start`` /
``content_block_delta`` (``text_delta``, ``input_json_delta``) / ``content_block_stop`` per
block, ``message_delta`` and ``message_stop``; an upstream failure after the stream started
is an ``error`` event.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from harness.engines.base import ToolChoice
from harness.errors import EngineRequestError
from harness.messages import Message
from harness.proxy.models import (
    AnthropicText,
    AnthropicToolUse,
    AnthropicUserMessage,
    MessagesBody,
    UserBlock,
    messages_tool_choice,
    refuse_unknown,
    validated,
)
from harness.proxy.protocol import ChatRequest, chat_request
from harness.proxy.wire import chat_chunks, sse

__all__ = ("MessagesApi", "chat_body")

_SHARED = (
    "model",
    "temperature",
    "top_p",
    "metadata",
    "harness_skill",
    "harness_inputs",
    "harness_arm",
)
#: The proxy's error types (OpenAI's) as Anthropic's.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
}
_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _text(content: str | list[AnthropicText]) -> str:
    return content if isinstance(content, str) else "".join(b.text for b in content)


def _system(body: MessagesBody) -> list[Message]:
    system = body.system
    if system is None:
        return []
    text = system if isinstance(system, str) else "\n\n".join(b.text for b in system)
    return [{"role": "system", "content": text}] if text else []


def _user(content: str | list[UserBlock]) -> list[Message]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[Message] = []
    texts: list[str] = []
    for block in content:
        if isinstance(block, AnthropicText):
            texts.append(block.text)
            continue
        text = _text(block.content)
        if block.is_error:
            text = f"Error: {text}"
        out.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": text})
    if texts:
        out.append({"role": "user", "content": "".join(texts)})
    return out


def _assistant(content: str | list[AnthropicText | AnthropicToolUse]) -> Message:
    if isinstance(content, str):
        return {"role": "assistant", "content": content or None}
    texts: list[str] = []
    calls = []
    for block in content:
        if isinstance(block, AnthropicText):
            texts.append(block.text)
            continue
        calls.append(
            {
                "id": block.id,
                "type": "function",
                "function": {"name": block.name, "arguments": json.dumps(block.input)},
            }
        )
    message: Message = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _messages(body: MessagesBody) -> list[Message]:
    messages = _system(body)
    for message in body.messages:
        if isinstance(message, AnthropicUserMessage):
            messages.extend(_user(message.content))
        else:
            messages.append(_assistant(message.content))
    return messages


def _tools(body: MessagesBody) -> list[dict[str, Any]]:
    out = []
    for tool in body.tools or ():
        function: dict[str, Any] = {"name": tool.name}
        if tool.description is not None:
            function["description"] = tool.description
        function["parameters"] = tool.input_schema or {"type": "object"}
        out.append({"type": "function", "function": function})
    return out


def _translate(body: Any) -> tuple[dict[str, Any], ToolChoice | None]:
    """A Messages request body checked (:class:`~harness.proxy.models.MessagesBody`) and
    translated: the equivalent chat-completions body and the ``tool_choice``."""
    checked = validated(MessagesBody, body)
    refuse_unknown(checked)
    chat: dict[str, Any] = {k: body[k] for k in _SHARED if k in body}
    chat["messages"] = _messages(checked)
    tools = _tools(checked)
    if tools:
        chat["tools"] = tools
    chat["max_tokens"] = checked.max_tokens
    choice = None
    if checked.tool_choice is not None:
        choice = messages_tool_choice(checked.tool_choice)
        chat["tool_choice"] = body["tool_choice"]
        if (
            not isinstance(checked.tool_choice, str)
            and checked.tool_choice.disable_parallel_tool_use
        ):
            chat["parallel_tool_calls"] = False
    if checked.stop_sequences is not None:
        chat["stop"] = checked.stop_sequences
    if checked.stream is not None:
        chat["stream"] = checked.stream
        if checked.stream:
            chat["stream_options"] = {"include_usage": True}
    return chat, choice


def chat_body(body: Any) -> dict[str, Any]:
    """A Messages request body as the equivalent chat-completions body."""
    return _translate(body)[0]


class MessagesApi:
    """The Messages API as a :class:`~harness.proxy.wire.WireApi`."""

    name = "messages"

    def parse(self, body: Any, *, max_messages: int) -> ChatRequest:
        chat, choice = _translate(body)
        return chat_request(
            chat,
            tool_choice=choice,
            max_messages=max_messages,
            extra={"model": body.get("model", "")},
        )

    def error(self, message: str, *, status: int, kind: str, param: str | None) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message},
        }

    def response(self, request: ChatRequest, chat: Mapping[str, Any]) -> dict[str, Any]:
        choice = chat["choices"][0]
        message = choice["message"]
        content: list[dict[str, Any]] = []
        if message.get("content"):
            content.append({"type": "text", "text": message["content"]})
        content.extend(_tool_use(call) for call in message.get("tool_calls") or ())
        return {
            "id": f"msg_{uuid.uuid4().hex}",
            "type": "message",
            "role": "assistant",
            "model": chat.get("model") or request.model,
            "content": content,
            "stop_reason": _STOP_REASONS.get(choice.get("finish_reason") or "stop", "end_turn"),
            "stop_sequence": None,
            "usage": _usage(chat.get("usage")),
        }

    def events(self, request: ChatRequest, chat: Mapping[str, Any]) -> Iterator[str]:
        final = self.response(request, chat)
        usage = final["usage"]
        start = {**final, "content": [], "stop_reason": None, "usage": {**usage}}
        start["usage"]["output_tokens"] = 0
        yield sse("message_start", {"type": "message_start", "message": start})
        for index, block in enumerate(final["content"]):
            if block["type"] == "text":
                yield from _text_block(index, block["text"])
            else:
                opened = {**block, "input": {}}
                yield _block_start(index, opened)
                partial = json.dumps(block["input"])
                yield _block_delta(index, {"type": "input_json_delta", "partial_json": partial})
                yield _block_stop(index)
        yield from _end(final["stop_reason"], usage)

    async def translate(
        self, request: ChatRequest, chunks: AsyncIterator[str]
    ) -> AsyncIterator[str]:
        started = opened = False
        finish, usage = "stop", None
        async for chunk in chat_chunks(chunks):
            if not started:
                started = True
                message: dict[str, Any] = {
                    "id": f"msg_{uuid.uuid4().hex}",
                    "type": "message",
                    "role": "assistant",
                    "model": chunk.model or request.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                }
                yield sse("message_start", {"type": "message_start", "message": message})
            if chunk.error is not None:
                error = {"type": "api_error", "message": str(chunk.error.get("message", ""))}
                yield sse("error", {"type": "error", "error": error})
                return
            if chunk.content:
                if not opened:
                    opened = True
                    yield _block_start(0, {"type": "text", "text": ""})
                yield _block_delta(0, {"type": "text_delta", "text": chunk.content})
            finish = chunk.finish_reason or finish
            usage = chunk.usage or usage
            if chunk.done:
                break
        if not started:
            return
        if opened:
            yield _block_stop(0)
        for event in _end(_STOP_REASONS.get(finish, "end_turn"), _usage(usage)):
            yield event


def _tool_use(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call["function"]
    try:
        arguments = json.loads(function["arguments"] or "{}")
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        raise EngineRequestError(
            f"its call to {function['name']!r} has arguments that are not a JSON object "
            f"({function['arguments'][:200]!r}), which the Messages API cannot carry"
        )
    return {"type": "tool_use", "id": call["id"], "name": function["name"], "input": arguments}


def _usage(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "input_tokens": usage["prompt_tokens"] - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": usage["completion_tokens"],
    }


def _block_start(index: int, block: Mapping[str, Any]) -> str:
    data = {"type": "content_block_start", "index": index, "content_block": dict(block)}
    return sse("content_block_start", data)


def _block_delta(index: int, delta: Mapping[str, Any]) -> str:
    data = {"type": "content_block_delta", "index": index, "delta": dict(delta)}
    return sse("content_block_delta", data)


def _block_stop(index: int) -> str:
    return sse("content_block_stop", {"type": "content_block_stop", "index": index})


def _text_block(index: int, text: str) -> Iterator[str]:
    yield _block_start(index, {"type": "text", "text": ""})
    yield _block_delta(index, {"type": "text_delta", "text": text})
    yield _block_stop(index)


def _end(stop_reason: str, usage: Mapping[str, Any]) -> Iterator[str]:
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    yield sse("message_delta", {"type": "message_delta", "delta": delta, "usage": dict(usage)})
    yield sse("message_stop", {"type": "message_stop"})
