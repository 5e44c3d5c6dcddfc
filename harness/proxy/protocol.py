"""The OpenAI chat-completions wire format as the proxy speaks it: requests in, responses,
stream chunks and error bodies out.

:func:`parse_request` checks a request body and says exactly what is wrong (an
:class:`BadRequest`, a 400 with OpenAI's error body). Fields the proxy honours: ``model``,
``messages``, ``tools``, ``tool_choice`` (``"auto"``, ``"none"``, ``"required"``, a named
function or another object: :mod:`harness.proxy.upstream` says how each is served),
``parallel_tool_calls``,
``temperature``, ``max_tokens`` / ``max_completion_tokens``, ``seed``, ``stop``, ``stream``,
``stream_options.include_usage``, ``n`` (1), ``store`` (``false``: the proxy stores no
completions), ``user`` and ``metadata`` (recorded nowhere, harmless), and the harness's own ``harness_skill``, ``harness_inputs`` and ``harness_arm``
(what the OpenAI SDK's ``extra_body`` sends). ``max_tokens``, ``temperature``,
``parallel_tool_calls`` and ``tool_choice`` reach a server upstream only when the client sent
them (``GenerationSettings.unsent``): nothing is injected. Anything else — ``n > 1``, ``logprobs``, a
``response_format``, sampling knobs the engine does not have, an unknown field — is a 400
that names it, never silently ignored.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.engines.base import GenerationSettings
from harness.errors import ConfigError
from harness.messages import Message, ToolSpec, Usage
from harness.proxy.upstream import ProxySettings

__all__ = (
    "BadRequest",
    "ChatRequest",
    "ChunkWriter",
    "chat_response",
    "error_body",
    "parse_request",
    "stream_chunks",
    "usage_body",
)

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
#: Fields accepted only at their neutral value (the engine has no such knob).
_NEUTRAL: dict[str, Any] = {
    "top_p": 1,
    "presence_penalty": 0,
    "frequency_penalty": 0,
    "logprobs": False,
    "store": False,  # the proxy stores no completions
}
_KNOWN = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "seed",
        "stop",
        "stream",
        "stream_options",
        "n",
        "user",
        "metadata",
        "harness_skill",
        "harness_inputs",
        "harness_arm",
        *_NEUTRAL,
    }
)


_INT32 = 2**31 - 1
_INT64 = 2**63
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
    settings: ProxySettings
    parallel_tool_calls: bool | None = None
    stream: bool = False
    include_usage: bool = False
    skill: str | None = None
    inputs: Mapping[str, Any] | None = None
    arm: str | None = None
    #: The client's ``tool_choice`` (served by :func:`~harness.proxy.upstream.choice_plan`).
    tool_choice: str | dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _number(body: Mapping[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise BadRequest(
            f"'{key}' must be a number from {low} to {high}, got {_short(value)}.", param=key
        )
    return float(value)


def _count(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _INT32:
        raise BadRequest(
            f"'{key}' must be a positive integer up to {_INT32:,}, got {_short(value)}.",
            param=key,
        )
    return value


def _messages(body: Mapping[str, Any], max_messages: int) -> list[Message]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list of messages.", param="messages")
    if len(messages) > max_messages:
        raise BadRequest(
            f"'messages' has {len(messages)} messages, over this server's limit of "
            f"{max_messages}; shorten the history or raise the server's --max-messages.",
            param="messages",
        )
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise BadRequest(
                f"messages[{i}] must be an object with 'role' one of {sorted(_ROLES)}.",
                param=f"messages[{i}]",
            )
        calls = message.get("tool_calls")
        if calls is not None and (
            not isinstance(calls, list)
            or not all(isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls)
        ):
            raise BadRequest(
                f"messages[{i}].tool_calls must be a list of {{id, type, function}} objects.",
                param=f"messages[{i}].tool_calls",
            )
        if message["role"] == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise BadRequest(
                f"messages[{i}] (role tool) needs a string 'tool_call_id'.",
                param=f"messages[{i}].tool_call_id",
            )
    return messages


def _tools(body: Mapping[str, Any]) -> list[ToolSpec]:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of function specs.", param="tools")
    for i, spec in enumerate(tools):
        function = spec.get("function") if isinstance(spec, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise BadRequest(
                f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ...}}}}.",
                param=f"tools[{i}]",
            )
    return tools


def _settings(body: Mapping[str, Any]) -> ProxySettings:
    stop = body.get("stop")
    stops: tuple[str, ...] = ()
    if isinstance(stop, str):
        stops = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = tuple(stop)
    elif stop is not None:
        raise BadRequest("'stop' must be a string or a list of strings.", param="stop")
    for key in ("stream", "parallel_tool_calls"):
        if key in body and body[key] is not None and not isinstance(body[key], bool):
            raise BadRequest(f"'{key}' must be true or false.", param=key)
    options = body.get("stream_options") or {}
    if not isinstance(options, dict) or set(options) - {"include_usage"}:
        raise BadRequest("'stream_options' may only hold 'include_usage'.", param="stream_options")
    seed = body.get("seed")
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not -_INT64 <= seed < _INT64
    ):
        raise BadRequest(f"'seed' must be a 64-bit integer, got {_short(seed)}.", param="seed")
    max_tokens = _count(body, "max_completion_tokens") or _count(body, "max_tokens")
    temperature = _number(body, "temperature", 0, 2)
    sent = {key for key, value in body.items() if value is not None}
    unsent = {key for key in _FORWARDED if key not in sent}
    if max_tokens is not None:
        unsent.discard("max_tokens")
    return ProxySettings(
        max_tokens=max_tokens or GenerationSettings.max_tokens,
        temperature=temperature if temperature is not None else 0.0,
        seed=seed,
        stop=stops,
        unsent=frozenset(unsent),
    )


def parse_request(body: Any, *, max_messages: int) -> ChatRequest:
    """Check a decoded request body (see the module docstring)."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    unknown = sorted(set(body) - _KNOWN)
    if unknown:
        raise BadRequest(
            f"Unsupported field(s) {unknown}: this proxy does not pass them on and will not "
            "ignore them silently; remove them.",
            param=unknown[0],
        )
    for key, neutral in _NEUTRAL.items():
        if key in body and body[key] is not None and body[key] != neutral:
            raise BadRequest(
                f"'{key}'={body[key]!r} is not supported by this proxy's engine; omit it or "
                f"send {neutral!r}.",
                param=key,
            )
    n = body.get("n")
    if n is not None and n != 1:
        raise BadRequest(
            f"'n'={n!r}: this proxy returns one choice per request; send n=1 or omit it.",
            param="n",
        )
    choice = _tool_choice(body.get("tool_choice"))
    model = body.get("model", "")
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string.", param="model")
    messages = _messages(body, max_messages)
    tools = _tools(body)
    settings = _settings(body)
    skill = body.get("harness_skill")
    if skill is not None and not isinstance(skill, str):
        raise BadRequest("'harness_skill' must be a skill name (a string).", param="harness_skill")
    inputs = body.get("harness_inputs")
    if inputs is not None and not isinstance(inputs, dict):
        raise BadRequest("'harness_inputs' must be a JSON object.", param="harness_inputs")
    arm = body.get("harness_arm")
    if arm is not None and arm not in ("S", "F"):
        raise BadRequest("'harness_arm' must be 'S' (pass-through) or 'F'.", param="harness_arm")
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools,
        settings=settings,
        parallel_tool_calls=body.get("parallel_tool_calls"),
        stream=bool(body.get("stream")),
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        skill=skill,
        inputs=inputs,
        arm=arm,
        tool_choice=choice,
    )


def _tool_choice(choice: Any) -> str | dict[str, Any] | None:
    """The client's ``tool_choice`` checked for its shape (what it asks is served by
    :func:`~harness.proxy.upstream.choice_plan`): ``"auto"``, ``"none"``, ``"required"``, a
    named function, or another object with a ``type`` (passed on as sent)."""
    if choice is None or choice in ("auto", "none", "required"):
        return choice  # type: ignore[no-any-return]
    if not isinstance(choice, dict) or not isinstance(choice.get("type"), str):
        raise BadRequest(
            f"'tool_choice' must be 'auto', 'none', 'required' or an object such as "
            f"{{'type': 'function', 'function': {{'name': ...}}}}; got {_short(choice)}.",
            param="tool_choice",
        )
    if choice["type"] == "function":
        function = choice.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise BadRequest(
                "'tool_choice' of type 'function' needs {'function': {'name': ...}}.",
                param="tool_choice",
            )
    return choice


def _short(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)[:80]


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
