"""The OpenAI Responses API as the proxy speaks it (``POST /v1/responses``): a pure
translation to and from the chat-completions form (:mod:`harness.proxy.wire`).

Request fields honoured: ``model``, ``input`` (a string, or a list of items: messages with
role ``user``/``system``/``developer``/``assistant`` and string or ``input_text`` /
``output_text`` content, ``function_call`` items, ``function_call_output`` items),
``instructions`` (the system message), ``tools`` (function tools, flat
``{"type": "function", "name", "description", "parameters", "strict"}``), ``tool_choice``
(``"auto"``, ``"none"``, ``"required"``, ``{"type": "function", "name"}``, ``allowed_tools``:
served as :mod:`harness.proxy.upstream` says), ``parallel_tool_calls``, ``max_output_tokens``, ``temperature``, ``top_p``
(1), ``stream``, ``metadata``, ``user``, ``store`` (``false``: the proxy keeps nothing),
``include`` (empty), ``text`` (plain text format), ``truncation`` (``"disabled"``) and the
harness's own ``harness_skill`` / ``harness_inputs`` / ``harness_arm``. Consecutive
``function_call`` items (and the assistant message just before them) are one assistant
message with several calls — a flattened window comes back that way and is restored; each
``function_call_output`` is one ``tool`` message, in the order the client sent them.

Unsupported, each a 400 that says so: ``previous_response_id`` and ``conversation`` (the
proxy stores no responses: send the whole conversation in ``input``), ``store: true``,
items or content parts other than the above (images, files, reasoning, item references),
tools other than functions, and unknown fields.

The output is a ``response`` object: a ``message`` item with ``output_text`` when the model
wrote text, one ``function_call`` item per call (``call_id`` is the id the proxy minted for a
window's call), ``usage`` and ``status`` (``incomplete`` with reason ``max_output_tokens``
when the reply was cut). Streamed, it is the Responses events (``response.created``,
``response.in_progress``, ``response.output_item.added``, ``response.content_part.added``,
``response.output_text.delta`` / ``.done``, ``response.function_call_arguments.delta`` /
``.done``, ``response.output_item.done``, ``response.completed``), each with its
``sequence_number``; an upstream failure after the stream started is an ``error`` event and
``response.failed``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import replace
from typing import Any

from harness.messages import Message
from harness.proxy.protocol import BadRequest, ChatRequest, error_body
from harness.proxy.wire import chat_chunks, parse_as_chat, sse

__all__ = ("ResponsesApi", "chat_body")

#: Fields taken over as they are into the chat request (checked there).
_SHARED = (
    "model",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "user",
    "metadata",
    "harness_skill",
    "harness_inputs",
    "harness_arm",
)
_KNOWN = frozenset(
    {
        *_SHARED,
        "tool_choice",
        "input",
        "instructions",
        "tools",
        "max_output_tokens",
        "stream",
        "store",
        "include",
        "text",
        "truncation",
        "previous_response_id",
        "conversation",
        "background",
    }
)
_MESSAGE_ROLES = ("user", "system", "developer", "assistant")
_TEXT_PARTS = ("input_text", "output_text", "text")


def _text(content: Any, where: str) -> str:
    """A message's or output's content as one string (text parts joined)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(f"{where} must be a string or a list of text parts.", param=where)
    texts = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _TEXT_PARTS or not isinstance(part.get("text"), str):
            raise BadRequest(
                f"{where}[{i}] is a {kind!r} part; this proxy passes on text only "
                f"({', '.join(_TEXT_PARTS[:2])} parts).",
                param=f"{where}[{i}]",
            )
        texts.append(part["text"])
    return "".join(texts)


def _string(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise BadRequest(f"{where}.{key} must be a string.", param=f"{where}.{key}")
    return value


def _messages(body: Mapping[str, Any]) -> list[Message]:
    messages: list[Message] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise BadRequest("'instructions' must be a string.", param="instructions")
        if instructions:
            messages.append({"role": "system", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
        return messages
    if not isinstance(items, list) or not items:
        raise BadRequest("'input' must be a string or a non-empty list of items.", param="input")
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise BadRequest(f"{where} must be an object.", param=where)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in _MESSAGE_ROLES:
                raise BadRequest(
                    f"{where}.role must be one of {list(_MESSAGE_ROLES)}, got {role!r}.",
                    param=f"{where}.role",
                )
            messages.append({"role": role, "content": _text(item.get("content"), where)})
        elif kind == "function_call":
            call = {
                "id": _string(item, "call_id", where),
                "type": "function",
                "function": {
                    "name": _string(item, "name", where),
                    "arguments": _string(item, "arguments", where),
                },
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": _string(item, "call_id", where),
                    "content": _text(item.get("output"), f"{where}.output"),
                }
            )
        else:
            raise BadRequest(
                f"{where} is a {kind!r} item; this proxy takes messages, function_call and "
                "function_call_output items (it stores nothing to refer to).",
                param=where,
            )
    return messages


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of function tools.", param="tools")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise BadRequest(
                f"tools[{i}] is a {kind!r} tool; this proxy serves function tools only "
                "({'type': 'function', 'name': ..., 'parameters': ...}).",
                param=f"tools[{i}]",
            )
        if not isinstance(tool.get("name"), str):
            raise BadRequest(f"tools[{i}] needs a string 'name'.", param=f"tools[{i}].name")
        function = {
            k: tool[k]
            for k in ("name", "description", "parameters", "strict")
            if tool.get(k) is not None
        }
        out.append({"type": "function", "function": function})
    return out


def _unsupported(body: Mapping[str, Any]) -> None:
    unknown = sorted(set(body) - _KNOWN)
    if unknown:
        raise BadRequest(
            f"Unsupported field(s) {unknown}: this proxy does not pass them on and will not "
            "ignore them silently; remove them.",
            param=unknown[0],
        )
    for key in ("previous_response_id", "conversation"):
        if body.get(key) is not None:
            raise BadRequest(
                f"'{key}' is not supported: this proxy stores no responses or conversations; "
                "send the whole conversation in 'input' (and store: false).",
                param=key,
            )
    if body.get("store"):
        raise BadRequest(
            "'store': true is not supported: this proxy stores no responses; send store: false "
            "or omit it.",
            param="store",
        )
    if body.get("background"):
        raise BadRequest("'background': true is not supported; omit it.", param="background")
    if body.get("include"):
        raise BadRequest("'include' is not supported; omit it.", param="include")
    text = body.get("text")
    if text is not None and text not in ({}, {"format": {"type": "text"}}):
        raise BadRequest(
            "'text' may only ask for the plain text format ({'format': {'type': 'text'}}); "
            "structured output is not supported by this proxy.",
            param="text",
        )
    if body.get("truncation") not in (None, "disabled"):
        raise BadRequest("'truncation' may only be 'disabled'.", param="truncation")


def _function(tool: Any) -> Any:
    """A Responses function reference ``{"type": "function", "name"}`` in Chat Completions'
    spelling (anything else as it is)."""
    if isinstance(tool, dict) and tool.get("type") == "function" and "function" not in tool:
        return {"type": "function", "function": {"name": tool.get("name")}}
    return tool


def _tool_choice(choice: Any) -> Any:
    """The Responses ``tool_choice`` in Chat Completions' spelling: the strings as they are,
    ``{"type": "function", "name"}`` as a named function, ``allowed_tools`` with its tools
    named the chat way; any other object as sent (checked in the chat request)."""
    if not isinstance(choice, dict):
        return choice
    if choice.get("type") == "function":
        return _function(choice)
    if choice.get("type") == "allowed_tools":
        rest = {k: v for k, v in choice.items() if k != "type"}
        if isinstance(rest.get("tools"), list):
            rest["tools"] = [_function(t) for t in rest["tools"]]
        return {"type": "allowed_tools", "allowed_tools": rest}
    return choice


def chat_body(body: Any) -> dict[str, Any]:
    """A Responses request body as the equivalent chat-completions body."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    _unsupported(body)
    chat: dict[str, Any] = {k: body[k] for k in _SHARED if k in body}
    chat["messages"] = _messages(body)
    tools = _tools(body)
    if tools:
        chat["tools"] = tools
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("stream") is not None:
        chat["stream"] = body["stream"]
        if body["stream"] is True:
            chat["stream_options"] = {"include_usage": True}
    return chat


def _param(param: str | None) -> str | None:
    """A chat parameter's name in this API's terms."""
    if param == "max_tokens":
        return "max_output_tokens"
    if param is not None and param.startswith("messages"):
        return "input"
    return param


class ResponsesApi:
    """The Responses API as a :class:`~harness.proxy.wire.WireApi`."""

    name = "responses"

    def parse(self, body: Any, *, max_messages: int) -> ChatRequest:
        parsed = parse_as_chat(
            chat_body(body),
            max_messages=max_messages,
            field=("'max_tokens'", "'max_output_tokens'"),
            param=_param,
        )
        echo = {
            "instructions": body.get("instructions"),
            "tools": body.get("tools") or [],
            "tool_choice": body.get("tool_choice") or "auto",
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "temperature": body.get("temperature"),
            "top_p": body.get("top_p"),
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": body.get("metadata") or {},
            "user": body.get("user"),
        }
        return replace(parsed, extra=echo)

    def error(self, message: str, *, status: int, kind: str, param: str | None) -> dict[str, Any]:
        return error_body(message, kind=kind, param=param)

    def response(self, request: ChatRequest, chat: Mapping[str, Any]) -> dict[str, Any]:
        choice = chat["choices"][0]
        message = choice["message"]
        output: list[dict[str, Any]] = []
        if message.get("content"):
            output.append(_message_item(f"msg_{uuid.uuid4().hex}", message["content"]))
        output.extend(
            _call_item(f"fc_{uuid.uuid4().hex}", call, "completed")
            for call in message.get("tool_calls") or ()
        )
        status, incomplete = "completed", None
        if choice.get("finish_reason") == "length":
            status, incomplete = "incomplete", {"reason": "max_output_tokens"}
        return _response(
            request,
            f"resp_{uuid.uuid4().hex}",
            chat.get("created", int(time.time())),
            chat.get("model", request.model),
            status,
            output,
            _usage(chat.get("usage")),
            incomplete,
        )

    def events(self, request: ChatRequest, chat: Mapping[str, Any]) -> Iterator[str]:
        final = self.response(request, chat)
        writer = _Events(request, final["id"], final["created_at"], final["model"])
        yield from writer.start()
        for item in final["output"]:
            if item["type"] == "message":
                yield from writer.text_start(item["id"])
                yield writer.text_delta(item["content"][0]["text"])
                yield from writer.text_end()
            else:
                yield from writer.call(item)
        yield writer.end(final)

    async def translate(
        self, request: ChatRequest, chunks: AsyncIterator[str]
    ) -> AsyncIterator[str]:
        writer: _Events | None = None
        finish, usage = "stop", None
        async for chunk in chat_chunks(chunks):
            if writer is None:
                writer = _Events(
                    request,
                    f"resp_{uuid.uuid4().hex}",
                    chunk.created or int(time.time()),
                    chunk.model or request.model,
                )
                for event in writer.start():
                    yield event
            if chunk.error is not None:
                yield writer.failed(chunk.error)
                return
            if chunk.content:
                if writer.text_id is None:
                    for event in writer.text_start(f"msg_{uuid.uuid4().hex}"):
                        yield event
                yield writer.text_delta(chunk.content)
            finish = chunk.finish_reason or finish
            usage = chunk.usage or usage
            if chunk.done:
                break
        if writer is None:
            return
        output = []
        if writer.text_id is not None:
            output.append(_message_item(writer.text_id, writer.text))
            for event in writer.text_end():
                yield event
        status, incomplete = "completed", None
        if finish == "length":
            status, incomplete = "incomplete", {"reason": "max_output_tokens"}
        final = _response(
            request,
            writer.response_id,
            writer.created,
            writer.model,
            status,
            output,
            _usage(usage),
            incomplete,
        )
        yield writer.end(final)


def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def _call_item(item_id: str, call: Mapping[str, Any], status: str) -> dict[str, Any]:
    function = call["function"]
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call["id"],
        "name": function["name"],
        "arguments": function["arguments"],
        "status": status,
    }


def _usage(usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "input_tokens": usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
    }


def _response(
    request: ChatRequest,
    response_id: str,
    created: float,
    model: str,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    incomplete: dict[str, Any] | None = None,
) -> dict[str, Any]:
    echo = request.extra
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": echo.get("instructions"),
        "max_output_tokens": echo.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": echo.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "store": False,
        "temperature": echo.get("temperature"),
        "text": {"format": {"type": "text"}},
        "tool_choice": echo.get("tool_choice", "auto"),
        "tools": echo.get("tools", []),
        "top_p": echo.get("top_p"),
        "truncation": "disabled",
        "usage": usage,
        "user": echo.get("user"),
        "metadata": echo.get("metadata", {}),
    }


class _Events:
    """The Responses server-sent events of one response, numbered."""

    def __init__(self, request: ChatRequest, response_id: str, created: float, model: str):
        self.request = request
        self.response_id = response_id
        self.created = created
        self.model = model
        self.sequence = 0
        self.index = 0  # the output index of the next item
        self.text_id: str | None = None
        self.text = ""

    def event(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse(kind, data)

    def start(self) -> Iterator[str]:
        skeleton = _response(
            self.request, self.response_id, self.created, self.model, "in_progress", [], None
        )
        yield self.event("response.created", response=skeleton)
        yield self.event("response.in_progress", response=skeleton)

    def text_start(self, item_id: str) -> Iterator[str]:
        self.text_id, self.text = item_id, ""
        item = _message_item(item_id, "", "in_progress")
        item["content"] = []
        yield self.event("response.output_item.added", output_index=self.index, item=item)
        yield self.event(
            "response.content_part.added",
            item_id=item_id,
            output_index=self.index,
            content_index=0,
            part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
        )

    def text_delta(self, delta: str) -> str:
        assert self.text_id is not None
        self.text += delta
        return self.event(
            "response.output_text.delta",
            item_id=self.text_id,
            output_index=self.index,
            content_index=0,
            delta=delta,
            logprobs=[],
        )

    def text_end(self) -> Iterator[str]:
        assert self.text_id is not None
        item = _message_item(self.text_id, self.text)
        where = {"item_id": self.text_id, "output_index": self.index, "content_index": 0}
        yield self.event("response.output_text.done", **where, text=self.text, logprobs=[])
        yield self.event("response.content_part.done", **where, part=item["content"][0])
        yield self.event("response.output_item.done", output_index=self.index, item=item)
        self.index += 1

    def call(self, item: Mapping[str, Any]) -> Iterator[str]:
        added = {**item, "arguments": "", "status": "in_progress"}
        where = {"item_id": item["id"], "output_index": self.index}
        yield self.event("response.output_item.added", output_index=self.index, item=added)
        yield self.event("response.function_call_arguments.delta", **where, delta=item["arguments"])
        yield self.event(
            "response.function_call_arguments.done",
            **where,
            name=item["name"],
            arguments=item["arguments"],
        )
        yield self.event("response.output_item.done", output_index=self.index, item=dict(item))
        self.index += 1

    def end(self, final: Mapping[str, Any]) -> str:
        kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
        return self.event(kind, response=final)

    def failed(self, error: Mapping[str, Any]) -> str:
        """An ``error`` event then ``response.failed`` (after the status was sent)."""
        message = str(error.get("message", "the upstream failed"))
        code = str(error.get("type") or "server_error")
        failed = _response(
            self.request, self.response_id, self.created, self.model, "failed", [], None
        )
        failed["error"] = {"code": "server_error", "message": message}
        return self.event("error", code=code, message=message, param=None) + self.event(
            "response.failed", response=failed
        )
