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

The request is checked by its typed model (:class:`~harness.proxy.models.ResponsesBody`).
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
from typing import Any

from harness.engines.base import ToolChoice
from harness.messages import Message
from harness.proxy.models import (
    ResponsesBody,
    ResponsesContent,
    ResponsesFunctionCall,
    ResponsesFunctionOutput,
    refuse_unknown,
    responses_tool_choice,
    validated,
)
from harness.proxy.protocol import ChatRequest, chat_request, error_body
from harness.proxy.wire import chat_chunks, sse

__all__ = ("ResponsesApi", "chat_body")

#: Fields taken over as they are into the chat request.
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


def _text(content: ResponsesContent) -> str:
    """A message's or output's content as one string (text parts joined)."""
    return content if isinstance(content, str) else "".join(p.text for p in content)


def _messages(body: ResponsesBody) -> list[Message]:
    messages: list[Message] = []
    if body.instructions:
        messages.append({"role": "system", "content": body.instructions})
    if isinstance(body.input, str):
        messages.append({"role": "user", "content": body.input})
        return messages
    for item in body.input:
        if isinstance(item, ResponsesFunctionCall):
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": item.arguments},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif isinstance(item, ResponsesFunctionOutput):
            messages.append(
                {"role": "tool", "tool_call_id": item.call_id, "content": _text(item.output)}
            )
        else:
            messages.append({"role": item.role, "content": _text(item.content)})
    return messages


def _tools(body: ResponsesBody) -> list[dict[str, Any]]:
    out = []
    for tool in body.tools or ():
        function = {
            k: getattr(tool, k)
            for k in ("name", "description", "parameters", "strict")
            if getattr(tool, k) is not None
        }
        out.append({"type": "function", "function": function})
    return out


def _translate(body: Any) -> tuple[dict[str, Any], ToolChoice | None, ResponsesBody]:
    """A Responses request body checked (:class:`~harness.proxy.models.ResponsesBody`) and
    translated: the equivalent chat-completions body and the ``tool_choice``."""
    checked = validated(ResponsesBody, body)
    refuse_unknown(checked)
    chat: dict[str, Any] = {k: body[k] for k in _SHARED if k in body}
    chat["messages"] = _messages(checked)
    tools = _tools(checked)
    if tools:
        chat["tools"] = tools
    choice = None
    if checked.tool_choice is not None:
        choice = responses_tool_choice(checked.tool_choice)
        chat["tool_choice"] = body["tool_choice"]
    if checked.max_output_tokens is not None:
        chat["max_tokens"] = checked.max_output_tokens
    if checked.stream is not None:
        chat["stream"] = checked.stream
        if checked.stream:
            chat["stream_options"] = {"include_usage": True}
    return chat, choice, checked


def chat_body(body: Any) -> dict[str, Any]:
    """A Responses request body as the equivalent chat-completions body."""
    return _translate(body)[0]


class ResponsesApi:
    """The Responses API as a :class:`~harness.proxy.wire.WireApi`."""

    name = "responses"

    def parse(self, body: Any, *, max_messages: int) -> ChatRequest:
        chat, choice, checked = _translate(body)
        echo = {
            "instructions": checked.instructions,
            "tools": body.get("tools") or [],
            "tool_choice": body.get("tool_choice") or "auto",
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "temperature": checked.temperature,
            "top_p": checked.top_p,
            "max_output_tokens": checked.max_output_tokens,
            "metadata": checked.metadata or {},
            "user": checked.user,
        }
        return chat_request(
            chat, tool_choice=choice, max_messages=max_messages, messages_param="input", extra=echo
        )

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
