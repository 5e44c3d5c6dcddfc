"""The OpenAI chat-completions wire format as the proxy speaks it: the checked request
(:class:`ChatRequest`, which the other two APIs translate to), responses, stream chunks and
error bodies.

Requests are checked by the typed models of :mod:`harness.proxy.models` (a mistake is a
:class:`BadRequest`, a 400 in the API's error shape). Fields the proxy honours: ``model``,
``messages``, ``tools``, ``tool_choice`` (``"auto"``, ``"none"``, ``"required"``, a named
function or another object: :mod:`harness.proxy.upstream` says how each is served),
``parallel_tool_calls``, ``temperature``, ``max_tokens`` / ``max_completion_tokens``,
``seed``, ``stop``, ``stream``, ``stream_options.include_usage``, ``n`` (1), ``store``
(``false``: the proxy stores no completions), ``user`` and ``metadata`` (recorded nowhere,
harmless), and the harness's own ``harness_skill``, ``harness_inputs`` and ``harness_arm``
(what the OpenAI SDK's ``extra_body`` sends). ``max_tokens``, ``temperature``,
``parallel_tool_calls`` and ``tool_choice`` reach a server upstream only when the client sent
them (``GenerationSettings.unsent``): nothing is injected. Anything else — ``n > 1``,
``logprobs``, a ``response_format``, sampling knobs the engine does not have, an unknown
top-level field — is a 400 that names it, never silently ignored; unknown fields inside a
message or a tool are kept and forwarded as the client sent them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.engines.base import GenerationSettings, ToolChoice
from harness.errors import ConfigError
from harness.messages import Message, ToolSpec, Usage

__all__ = (
    "BadRequest",
    "ChatRequest",
    "ChunkWriter",
    "chat_request",
    "chat_response",
    "error_body",
    "stream_chunks",
    "usage_body",
)

#: Fields a server upstream gets only when the client sent them (else its defaults apply).
_FORWARDED = ("max_tokens", "temperature", "parallel_tool_calls", "tool_choice")


class BadRequest(ConfigError):
    """A request the proxy cannot serve: ``status`` (400 unless said), ``message``, ``param``.
    A client's input mistake, so a :class:`~harness.errors.ConfigError` (the app answers it
    with an error body, never a 500)."""

    def __init__(self, message: str, *, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


@dataclass(frozen=True)
class ChatRequest:
    """A checked chat-completions request."""

    model: str
    messages: list[Message]
    tools: list[ToolSpec]
    settings: GenerationSettings
    parallel_tool_calls: bool | None = None
    stream: bool = False
    include_usage: bool = False
    skill: str | None = None
    inputs: Mapping[str, Any] | None = None
    arm: str | None = None
    #: The client's ``tool_choice`` (``None``: not sent; served by
    #: :func:`~harness.proxy.upstream.choice_plan`).
    tool_choice: ToolChoice | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def chat_request(
    chat: Mapping[str, Any],
    *,
    tool_choice: ToolChoice | None,
    max_messages: int,
    messages_param: str = "messages",
    extra: Mapping[str, Any] | None = None,
) -> ChatRequest:
    """The checked request of ``chat``, a body in Chat Completions' form already validated
    by its API's model (:mod:`harness.proxy.models`; the other APIs translate theirs to this
    form): ``tool_choice`` as the engine seam types it; more messages than ``max_messages``
    are a 400 (``messages_param`` names the field in the API's terms); ``extra``: what the
    API echoes in its response."""
    messages: list[Message] = list(chat["messages"])
    if len(messages) > max_messages:
        raise BadRequest(
            f"'{messages_param}' has {len(messages):,} messages, over this server's limit of "
            f"{max_messages:,}; shorten the history or raise the server's --max-messages.",
            param=messages_param,
        )
    stop = chat.get("stop")
    stops = (stop,) if isinstance(stop, str) else tuple(stop or ())
    max_tokens = chat.get("max_completion_tokens") or chat.get("max_tokens")
    temperature = chat.get("temperature")
    sent = {key for key, value in chat.items() if value is not None}
    unsent = {key for key in _FORWARDED if key not in sent}
    if max_tokens is not None:
        unsent.discard("max_tokens")
    if tool_choice is None:
        unsent.add("tool_choice")
    settings = GenerationSettings(
        max_tokens=max_tokens or GenerationSettings.max_tokens,
        temperature=float(temperature) if temperature is not None else 0.0,
        seed=chat.get("seed"),
        stop=stops,
        unsent=frozenset(unsent),
        tool_choice=tool_choice or "auto",
    )
    options = chat.get("stream_options") or {}
    return ChatRequest(
        model=chat.get("model") or "",
        messages=messages,
        tools=list(chat.get("tools") or ()),
        settings=settings,
        parallel_tool_calls=chat.get("parallel_tool_calls"),
        stream=bool(chat.get("stream")),
        include_usage=bool(options.get("include_usage")),
        skill=chat.get("harness_skill"),
        inputs=chat.get("harness_inputs"),
        arm=chat.get("harness_arm"),
        tool_choice=tool_choice,
        extra=dict(extra or {}),
    )


def error_body(
    message: str, *, kind: str = "invalid_request_error", param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error body."""
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def usage_body(usage: Usage) -> dict[str, Any]:
    """OpenAI's ``usage`` object."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def chat_response(model: str, message: Message, finish_reason: str, usage: Usage) -> dict[str, Any]:
    """A ``chat.completion`` object with one choice."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": usage_body(usage),
    }


class ChunkWriter:
    """Server-sent events of one streamed ``chat.completion.chunk`` response (OpenAI's
    format): ``delta`` chunks, the closing chunk with the finish reason, the usage chunk when
    asked (``include_usage``), then ``[DONE]``."""

    def __init__(self, response_id: str, created: int, model: str, *, include_usage: bool) -> None:
        self.base = {
            "id": response_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }
        self.include_usage = include_usage

    def delta(self, delta: Mapping[str, Any], finish: str | None = None) -> str:
        body: dict[str, Any] = {
            **self.base,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if self.include_usage:
            body["usage"] = None
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    def end(self, finish_reason: str, usage: Mapping[str, Any]) -> Iterator[str]:
        """The closing chunk, the usage chunk when asked, ``[DONE]``."""
        yield self.delta({}, finish_reason)
        if self.include_usage:
            body = {**self.base, "choices": [], "usage": dict(usage)}
            yield f"data: {json.dumps(body, ensure_ascii=False)}\n\n"
        yield "data: [DONE]\n\n"

    @staticmethod
    def error(message: str, kind: str) -> str:
        """An error after the stream started (the status is sent): OpenAI's error body as an
        event, which the SDK raises as an ``APIError``."""
        return f"data: {json.dumps(error_body(message, kind=kind), ensure_ascii=False)}\n\n"


def stream_chunks(response: Mapping[str, Any], *, include_usage: bool) -> Iterator[str]:
    """``response`` as server-sent events in OpenAI's chunk format: the role, the content,
    each tool call as its own delta (index, id, name, then its arguments), the finish reason,
    the usage if asked, then ``[DONE]``. A window streams as one message's tool-call deltas."""
    writer = ChunkWriter(
        response["id"], response["created"], response["model"], include_usage=include_usage
    )
    choice = response["choices"][0]
    message = choice["message"]
    yield writer.delta({"role": "assistant", "content": ""})
    if message.get("content"):
        yield writer.delta({"content": message["content"]})
    calls: Sequence[Mapping[str, Any]] = message.get("tool_calls") or ()
    for index, call in enumerate(calls):
        function = call["function"]
        yield writer.delta(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": function["name"], "arguments": ""},
                    }
                ]
            }
        )
        yield writer.delta(
            {"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]}
        )
    yield from writer.end(choice["finish_reason"], response["usage"])
