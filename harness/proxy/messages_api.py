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
from dataclasses import replace
from typing import Any

from harness.messages import Message
from harness.proxy.protocol import BadRequest, ChatRequest
from harness.proxy.wire import chat_chunks, parse_as_chat, sse

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
_KNOWN = frozenset(
    {
        *_SHARED,
        "max_tokens",
        "system",
        "messages",
        "tools",
        "tool_choice",
        "stop_sequences",
        "stream",
    }
)
#: The proxy's error types (OpenAI's) as Anthropic's.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
}
_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise BadRequest(f"{where}.content must be a string or a list of blocks.", param=where)
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise BadRequest(
                f"{where}.content[{i}] must be a block with a 'type'.",
                param=f"{where}.content[{i}]",
            )
    return content


def _text(blocks: list[dict[str, Any]], where: str) -> str:
    texts = []
    for i, block in enumerate(blocks):
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise BadRequest(
                f"{where}[{i}] is a {block.get('type')!r} block; this proxy passes on text "
                "blocks only here.",
                param=f"{where}[{i}]",
            )
        texts.append(block["text"])
    return "".join(texts)


def _system(body: Mapping[str, Any]) -> list[Message]:
    system = body.get("system")
    if system is None:
        return []
    if isinstance(system, str):
        text = system
    elif isinstance(system, list):
        text = "\n\n".join(_text([b], "system") for b in _blocks(system, "system"))
    else:
        raise BadRequest("'system' must be a string or a list of text blocks.", param="system")
    return [{"role": "system", "content": text}] if text else []


def _user(blocks: list[dict[str, Any]], where: str) -> list[Message]:
    out: list[Message] = []
    texts: list[str] = []
    for i, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise BadRequest(
                    f"{where}.content[{i}] (tool_result) needs a string 'tool_use_id'.",
                    param=f"{where}.content[{i}].tool_use_id",
                )
            result = block.get("content", "")
            text = _text(_blocks(result, f"{where}.content[{i}]"), f"{where}.content[{i}]")
            if block.get("is_error"):
                text = f"Error: {text}"
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        else:
            raise BadRequest(
                f"{where}.content[{i}] is a {kind!r} block; this proxy takes text and "
                "tool_result blocks from the user.",
                param=f"{where}.content[{i}]",
            )
    if texts:
        out.append({"role": "user", "content": "".join(texts)})
    return out


def _assistant(blocks: list[dict[str, Any]], where: str) -> Message:
    texts: list[str] = []
    calls = []
    for i, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise BadRequest(
                    f"{where}.content[{i}] (tool_use) needs a string 'id' and 'name'.",
                    param=f"{where}.content[{i}]",
                )
            arguments = block.get("input", {})
            if not isinstance(arguments, dict):
                raise BadRequest(
                    f"{where}.content[{i}].input must be an object.",
                    param=f"{where}.content[{i}].input",
                )
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": json.dumps(arguments)},
                }
            )
        else:
            raise BadRequest(
                f"{where}.content[{i}] is a {kind!r} block; this proxy takes text and tool_use "
                "blocks from the assistant.",
                param=f"{where}.content[{i}]",
            )
    message: Message = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _messages(body: Mapping[str, Any]) -> list[Message]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise BadRequest("'messages' must be a non-empty list of messages.", param="messages")
    messages = _system(body)
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise BadRequest(f"{where}.role must be 'user' or 'assistant'.", param=where)
        blocks = _blocks(message.get("content"), where)
        if role == "user":
            messages.extend(_user(blocks, where))
        else:
            messages.append(_assistant(blocks, where))
    return messages


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of tools.", param="tools")
    out = []
    for i, tool in enumerate(tools):
        if (
            not isinstance(tool, dict)
            or tool.get("type") not in (None, "custom")
            or not isinstance(tool.get("name"), str)
        ):
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise BadRequest(
                f"tools[{i}] must be a client tool {{'name', 'description', 'input_schema'}}"
                f"{f', not a {kind!r} tool' if kind else ''}; this proxy runs no server tools.",
                param=f"tools[{i}]",
            )
        function: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        function["parameters"] = tool.get("input_schema") or {"type": "object"}
        out.append({"type": "function", "function": function})
    return out


#: Anthropic's ``tool_choice`` types as Chat Completions' values (``tool``: a named function).
_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


def _tool_choice(choice: Any) -> Any:
    """Anthropic's ``tool_choice`` (``{"type": "auto" | "any" | "none" | "tool", "name"}``;
    the bare strings too) in Chat Completions' spelling."""
    kind = choice.get("type") if isinstance(choice, dict) else choice
    if isinstance(kind, str) and kind in _CHOICES:
        return _CHOICES[kind]
    if kind == "tool" and isinstance(choice, dict) and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise BadRequest(
        "tool_choice must be {'type': 'auto'}, {'type': 'any'}, {'type': 'none'} or "
        "{'type': 'tool', 'name': ...} (each with disable_parallel_tool_use if you want one "
        f"call per turn); got {json.dumps(choice, default=str)[:80]}.",
        param="tool_choice",
    )


def chat_body(body: Any) -> dict[str, Any]:
    """A Messages request body as the equivalent chat-completions body."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    unknown = sorted(set(body) - _KNOWN)
    if unknown:
        raise BadRequest(
            f"Unsupported field(s) {unknown}: this proxy does not pass them on and will not "
            "ignore them silently; remove them.",
            param=unknown[0],
        )
    if body.get("max_tokens") is None:
        raise BadRequest("'max_tokens' is required.", param="max_tokens")
    chat: dict[str, Any] = {k: body[k] for k in _SHARED if k in body}
    chat["messages"] = _messages(body)
    tools = _tools(body)
    if tools:
        chat["tools"] = tools
    chat["max_tokens"] = body["max_tokens"]
    choice = body.get("tool_choice")
    if choice is not None:
        chat["tool_choice"] = _tool_choice(choice)
        if isinstance(choice, dict) and choice.get("disable_parallel_tool_use"):
            chat["parallel_tool_calls"] = False
    stop = body.get("stop_sequences")
    if stop is not None:
        chat["stop"] = stop
    if body.get("stream") is not None:
        chat["stream"] = body["stream"]
        if body["stream"] is True:
            chat["stream_options"] = {"include_usage": True}
    return chat


def _param(param: str | None) -> str | None:
    return {"stop": "stop_sequences", "parallel_tool_calls": "tool_choice"}.get(param or "", param)


class MessagesApi:
    """The Messages API as a :class:`~harness.proxy.wire.WireApi`."""

    name = "messages"

    def parse(self, body: Any, *, max_messages: int) -> ChatRequest:
        parsed = parse_as_chat(
            chat_body(body),
            max_messages=max_messages,
            field=("'stop'", "'stop_sequences'"),
            param=_param,
        )
        return replace(parsed, extra={"model": body.get("model", "")})

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
        raise BadRequest(
            f"The upstream's call to {function['name']!r} has arguments that are not a JSON "
            f"object ({function['arguments'][:200]!r}); the Messages API cannot carry them.",
            status=502,
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
