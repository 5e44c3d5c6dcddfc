"""The chat vocabulary every layer speaks: messages, tool specs, tool calls and their
arguments, usage, timings and completions.

One module that the loop, the certifier, the tools, the proxy and the engines all import
(like pydantic-ai's ``messages.py``): an engine returns a :class:`Completion`; a
:class:`ToolCall` is what the model emitted, with its :class:`Arguments` parsed once, with
limits (:mod:`harness._bounded_json`). Nothing here imports an engine.

"Is this the same call?" has one answer, here: :func:`call_key` (the tool's name and the
canonical spelling of its arguments, :func:`canonical_arguments`) and :func:`same_call`. The
validator finds duplicates with it, the proxy's minted ids sign it and certified speculation
matches an emitted call to a started one by it (in the store's spelling, the tool's folds
applied).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from harness._bounded_json import JSONLimitError, loads_bounded

__all__ = (
    "Arguments",
    "CallKey",
    "Completion",
    "Message",
    "Timings",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "call_key",
    "canonical_arguments",
    "same_call",
    "token_digest",
)

#: One chat message in the OpenAI chat-completions format: ``{"role": ..., "content": ...}``,
#: assistant messages may carry ``tool_calls``, tool messages carry ``tool_call_id``.
Message = dict[str, Any]

#: One tool as the OpenAI API describes it: ``{"type": "function", "function": {name,
#: description, parameters}}``.
ToolSpec = dict[str, Any]


@dataclass(frozen=True)
class Arguments:
    """A call's arguments parsed once: the raw text the model wrote, the JSON object it
    holds (``value``; ``None`` when it is not one) and, if not, why (``problem``, a sentence
    the model can act on). An empty string is the empty object."""

    raw: str
    value: Mapping[str, Any] | None
    problem: str | None = None

    @classmethod
    def parse(cls, raw: str, tool: str) -> Arguments:
        try:
            parsed = loads_bounded(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            problem = (
                f"Arguments for '{tool}' are not valid JSON ({exc.msg} at char {exc.pos}); "
                "send a JSON object."
            )
            return cls(raw, None, problem)
        except JSONLimitError as exc:
            return cls(
                raw, None, f"Arguments for '{tool}' are refused: {exc}; send smaller values."
            )
        if not isinstance(parsed, dict):
            problem = f"Arguments for '{tool}' must be a JSON object, got {type(parsed).__name__}."
            return cls(raw, None, problem)
        return cls(raw, parsed)

    @property
    def ok(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class ToolCall:
    """One call the model emitted: an id, a tool name and the raw JSON argument string.

    ``arguments`` stays the raw string the model produced (it may be invalid JSON: that is a
    model mistake the loop reports back, not an engine failure); :attr:`args` is that string
    parsed once (the certifier, the validator and the executor all read it).
    """

    id: str
    name: str
    arguments: str

    @property
    def args(self) -> Arguments:
        """The arguments parsed once (cached on the call; not ``functools.cached_property``,
        whose lock costs as much as the parse on Python 3.11)."""
        cached = self.__dict__.get("_args")
        if cached is None:
            cached = Arguments.parse(self.arguments, self.name)
            object.__setattr__(self, "_args", cached)
        return cached

    def parsed_arguments(self) -> Any:
        """The arguments parsed with the limits of :func:`~harness._bounded_json.loads_bounded`;
        raises ``ValueError`` (``json.JSONDecodeError`` on bad JSON, ``JSONLimitError`` past a
        limit), never ``RecursionError``."""
        return loads_bounded(self.arguments)

    def to_openai(self) -> dict[str, Any]:
        """The ``tool_calls`` entry of an OpenAI assistant message."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    @classmethod
    def from_openai(cls, raw: Mapping[str, Any]) -> ToolCall:
        function = raw.get("function", {})
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        return cls(
            id=str(raw.get("id", "")), name=str(function.get("name", "")), arguments=arguments
        )


#: A call's identity: the tool's name and the canonical spelling of its arguments.
CallKey = tuple[str, str]


def canonical_arguments(arguments: str | Mapping[str, Any]) -> str:
    """One spelling per arguments value: sorted keys, no whitespace, and every number by its
    value (``1``, ``1.0`` and ``1e0`` are one number; a string ``"1"`` is not the number 1,
    nor ``true`` the number 1).

    ``arguments`` is the raw JSON text a model wrote (text that is not JSON is its own
    canonical form, compared byte for byte) or an already parsed object. Raises
    ``TypeError`` for a parsed value that is not JSON (a date, a set, ...)."""
    if not isinstance(arguments, str):
        return _canonical(arguments)
    try:
        value = json.loads(arguments, parse_float=Decimal, parse_int=Decimal)
        return _canonical(value)
    except (ValueError, RecursionError):
        return arguments


def _canonical(value: Any) -> str:
    if isinstance(value, Mapping):
        items = sorted((str(k), _canonical(v)) for k, v in value.items())
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{v}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        value = Decimal(repr(value))  # the shortest spelling that reads back as this float
    elif isinstance(value, int):
        value = Decimal(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        return "0" if value.is_zero() else format(value.normalize(), "E")
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def call_key(
    name: str,
    arguments: str | Mapping[str, Any],
    spelling: Callable[[Any], str] = canonical_arguments,
) -> CallKey:
    """The identity of a call of tool ``name`` with ``arguments`` (raw JSON text or a parsed
    object): two calls are the same call when their keys are equal.

    ``spelling`` writes the arguments one way per value: by default their JSON value
    (:func:`canonical_arguments`: what the proxy signs and the validator finds duplicates
    by). A caller that knows the tool's store passes the store's spelling instead (certified
    speculation passes :func:`~harness.tools.effects.canonical_text` over the folded
    arguments: ``1`` and ``true`` name one value there)."""
    return name, spelling(arguments)


def same_call(a: ToolCall, b: ToolCall) -> bool:
    """The same tool with the same arguments by value (ids aside)."""
    return call_key(a.name, a.arguments) == call_key(b.name, b.arguments)


@dataclass(frozen=True)
class Usage:
    """Token counts of one generation. ``cached_tokens`` is the part of ``prompt_tokens``
    served from the prefix cache (not prefilled again)."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0

    @property
    def billed_tokens(self) -> int:
        """All input plus all output tokens, as the paper bills a turn."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.cached_tokens + other.cached_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True)
class Timings:
    """Where one generation's time went, in seconds. ``total_s`` is the engine-side wall time
    of the request (arrival to last token); the parts may not add up to it exactly
    (scheduling gaps). Unknown parts are 0."""

    total_s: float = 0.0
    queue_s: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0


def token_digest(token_ids: Sequence[int]) -> str:
    """A short digest of generated token ids (16 hex digits of SHA-256 over their decimal
    spelling): equal ids, equal digest."""
    return hashlib.sha256(",".join(map(str, token_ids)).encode("ascii")).hexdigest()[:16]


@dataclass(frozen=True)
class Completion:
    """One assistant turn: text and/or tool calls, usage and timings.

    ``finish_reason`` is ``"tool_calls"`` when calls were emitted, ``"stop"`` for a final
    answer, ``"length"`` when the output hit ``max_tokens`` (a model that never stops).
    ``token_digest`` identifies the exact generated token ids (:func:`token_digest`; empty
    when the engine does not see them, e.g. over HTTP): two generations with the same
    digest emitted the same tokens, which is how drafted decoding is shown lossless.
    """

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    timings: Timings = field(default_factory=Timings)
    finish_reason: Literal["stop", "tool_calls", "length"] = "stop"
    token_digest: str = ""

    def to_message(self) -> Message:
        """The assistant message to append to the chat."""
        message: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message
