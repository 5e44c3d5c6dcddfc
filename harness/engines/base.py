"""The engine seam: one small protocol every model backend implements.

Shaped like ``httpx.BaseTransport``: the loop hands an engine the chat so far (OpenAI chat
format) and the tools it may call, and gets back one :class:`Completion` — the assistant
message (text and/or tool calls), token usage (prompt, cached prompt, generated) and
timings. Engines are async context managers; ``aclose()`` releases them.

Implementations: :class:`harness.testing.ScriptedEngine` (a test double that replays a
function), ``harness.engines.vllm.VLLMEngine`` (in-process vLLM, the default) and
``harness.engines.openai_http.OpenAIHTTPEngine`` (any OpenAI-compatible server).

Rendering tools into the prompt and parsing tool calls out of generated text is the engine's
job (the loop only sees structured :class:`ToolCall` values).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Protocol, Self, runtime_checkable

# The chat vocabulary lives in harness.messages; its names stay importable from here.
from harness.messages import (
    Arguments,
    Completion,
    Message,
    Timings,
    ToolCall,
    ToolSpec,
    Usage,
    token_digest,
)

__all__ = (
    "Arguments",
    "CacheResettingEngine",
    "ClosingContext",
    "Completion",
    "DraftHints",
    "DraftingEngine",
    "Engine",
    "GenerationSettings",
    "HealthCheckingEngine",
    "Message",
    "NamedTool",
    "OtherToolChoice",
    "ReplyShape",
    "Sampling",
    "StreamingEngine",
    "Timings",
    "ToolCall",
    "ToolChoice",
    "ToolChoiceEngine",
    "ToolSpec",
    "Usage",
    "WirePassThrough",
    "drafts_calls",
    "engine_name",
    "guarded_generate",
    "reset_prefix_cache",
    "takes_tool_choice",
    "token_digest",
)


@dataclass(frozen=True)
class NamedTool:
    """A ``tool_choice`` forcing one tool: the reply is a call to ``name``."""

    name: str


@dataclass(frozen=True)
class OtherToolChoice:
    """A ``tool_choice`` object the harness does not interpret (``allowed_tools``, ...), in
    Chat Completions' spelling: a server engine sends it as it is; an in-process engine
    cannot honour it (:class:`~harness.errors.EngineRequestError`)."""

    value: Mapping[str, Any]


#: What the model must do with its tools this turn, as OpenAI's ``tool_choice`` says it:
#: ``"auto"`` (a call or an answer), ``"none"`` (an answer), ``"required"`` (one or more
#: calls), a :class:`NamedTool` (a call to that tool) or an :class:`OtherToolChoice`.
ToolChoice = Literal["auto", "none", "required"] | NamedTool | OtherToolChoice


@dataclass(frozen=True)
class Sampling:
    """How a reply's tokens are drawn: at most ``max_tokens``, at ``temperature`` (0: greedy),
    with ``seed``, ending early at any of ``stop``."""

    max_tokens: int = 256
    temperature: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReplyShape:
    """What a reply may be (the reply grammar of an engine that constrains decoding).

    ``parallel_tool_calls``: the model may (and is asked to) emit several independent calls in
    one message (arm P); otherwise at most one call per turn (arms S and F).
    ``max_parallel_calls``: with parallel calls, the most one message may carry (engines that
    constrain decoding enforce it, so a small model cannot list calls until ``max_tokens``).
    ``forced``: the exact calls the engine must emit this turn (the *gold* policy; an empty
    tuple forces a final answer ``forced_answer``). Engines that can constrain decoding
    (vLLM's structured outputs) still prefill and decode every token of it; the scripted
    engine just returns it.
    ``constrain``: constrain decoding to valid call syntax (a tool from the list with
    schema-valid arguments, or a final answer) without choosing the values.
    ``grammar_tools``: when set, the tools the reply grammar allows (narrower schemas of the
    same tools, e.g. the open slots of :mod:`harness.loop.levers`); the prompt still
    shows ``tools``, so the prompt prefix does not change when the grammar does.
    ``tool_choice``: what the reply must be (:data:`ToolChoice`); an engine that constrains
    decoding forces it with the reply grammar (``"required"``: calls only, a
    :class:`NamedTool`: calls to that tool, ``"none"``: an answer), a server engine sends
    it; engines that can do neither ignore it (the loop itself always uses ``"auto"``).
    """

    parallel_tool_calls: bool = False
    max_parallel_calls: int | None = None
    forced: tuple[ToolCall, ...] | None = None
    forced_answer: str | None = None
    constrain: bool = True
    grammar_tools: tuple[ToolSpec, ...] | None = None
    tool_choice: ToolChoice = "auto"


@dataclass(frozen=True)
class DraftHints:
    """``draft_calls``: calls this turn may well emit, predicted from the manifest and what
    the transcript shows (never from the gold calls): an engine with drafted decoding
    (:mod:`harness.engines.window_drafts`) lets the model verify their text in one pass; the
    tokens generated are the same. Other engines ignore them."""

    draft_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class WirePassThrough:
    """What only a server engine reads. ``model``: the model name it asks for (``None``: the
    engine's own). ``unsent``: request fields it leaves out, so the server's defaults apply —
    ``max_tokens``, ``temperature``, ``parallel_tool_calls``, ``tool_choice`` (the proxy
    forwards only what its client sent); an in-process engine uses the values set."""

    model: str | None = None
    unsent: frozenset[str] = frozenset()


@dataclass(frozen=True)
class GenerationSettings(WirePassThrough, DraftHints, ReplyShape, Sampling):
    """Per-request settings: one flat object of four concerns, each its own type so a part
    that reads one concern can say so (:class:`Sampling`, :class:`ReplyShape`,
    :class:`DraftHints`, :class:`WirePassThrough`; ``isinstance(settings, Sampling)`` holds).
    Built by keyword as ever (``GenerationSettings(max_tokens=64, tool_choice="required")``);
    the fields' positional order is by concern, sampling first."""


@runtime_checkable
class Engine(Protocol):
    """What the loop needs from a model backend.

    ``generate`` must be safe to call concurrently from many loops: the engine batches what
    arrives together (continuous batching) and never serialises it.
    Failures raise :class:`harness.errors.EngineRequestError` (this request) or
    :class:`harness.errors.EngineDeadError` (the engine: every request fails fast after).
    Cancelling the awaiting task aborts the request.
    """

    name: str

    async def generate(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> Completion: ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


async def guarded_generate(
    engine: Engine,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    settings: GenerationSettings,
    *,
    run_id: str | None = None,
    turn: int | None = None,
) -> Completion:
    """``engine.generate(...)`` at the engine boundary: whatever an engine raises comes out as
    a :class:`~harness.errors.HarnessError` (its own typed errors unchanged, anything else
    wrapped in :class:`~harness.errors.EngineError` with the original as ``__cause__``), and a
    reply that is not a :class:`Completion` is an error too. Cancellation passes through."""
    from harness.errors import EngineError, HarnessError

    name = engine_name(engine)
    try:
        completion = await engine.generate(messages, tools, settings)
    except HarnessError:
        raise
    except Exception as exc:
        raise EngineError(
            f"Engine {name!r} raised {type(exc).__name__}: {exc} (an engine must raise "
            "EngineRequestError or EngineDeadError); the run stopped. Check the engine, or "
            "report it to its author with this message.",
            run_id=run_id,
            turn=turn,
        ) from exc
    if not isinstance(completion, Completion):
        raise EngineError(
            f"Engine {name!r} returned {type(completion).__name__}, not a Completion; the run "
            "stopped. Fix the engine's generate().",
            run_id=run_id,
            turn=turn,
        )
    return completion


def engine_name(engine: object) -> str:
    """What errors and reports call ``engine``: its ``name``, else its class's name (an engine
    written against an older protocol may lack one)."""
    name = getattr(engine, "name", None)
    return name if isinstance(name, str) else type(engine).__name__


@runtime_checkable
class StreamingEngine(Protocol):
    """The streaming extension of :class:`Engine`: ``stream`` takes what ``generate`` takes and
    yields the reply's text as it is decoded (``str`` deltas, in order; for a reply without
    tools they concatenate to its content, with tools they are the engine's raw reply text)
    and, last, the whole :class:`Completion` (usage, timings, finish reason, parsed tool
    calls), what ``generate`` would have returned. Failures are raised
    like ``generate``'s; closing the iterator early (``aclosing``) or cancelling the consumer
    aborts the request. The in-process vLLM engine, the HTTP engine (server-sent events) and
    the scripted engine implement it; detect it with ``isinstance(engine, StreamingEngine)``.
    """

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> AsyncGenerator[str | Completion, None]: ...


@runtime_checkable
class HealthCheckingEngine(Protocol):
    """An :class:`Engine` that can say whether it can serve: ``check_health`` returns when it
    can and raises :class:`~harness.errors.EngineError` (saying what is wrong) when it cannot.
    The HTTP engine asks its servers (``GET /models``); the in-process vLLM engine checks its
    engine core. ``harness serve``'s ``/health`` reports it."""

    async def check_health(self) -> None: ...


@runtime_checkable
class DraftingEngine(Protocol):
    """An :class:`Engine` with drafted decoding (an optional capability, as
    :class:`StreamingEngine` is): ``drafts_calls`` says whether it drafts the calls a turn may
    emit (``GenerationSettings.draft_calls``) right now; the in-process vLLM engine does with
    ``drafting="window"``. Read it with :func:`drafts_calls`."""

    @property
    def drafts_calls(self) -> bool: ...


def drafts_calls(engine: object) -> bool:
    """Whether ``engine`` drafts the calls a turn may emit: a :class:`DraftingEngine` whose
    ``drafts_calls`` is true (any other engine decodes without drafts)."""
    return isinstance(engine, DraftingEngine) and bool(engine.drafts_calls)


@runtime_checkable
class CacheResettingEngine(Protocol):
    """An :class:`Engine` whose prefix cache can be emptied (for measurements: every arm starts
    from the same cache); the in-process vLLM engine is one. Use :func:`reset_prefix_cache`."""

    async def reset_prefix_cache(self) -> bool: ...


async def reset_prefix_cache(engine: object) -> bool:
    """Empty ``engine``'s prefix cache if it is a :class:`CacheResettingEngine`; whether a
    cache was reset (an engine without one, e.g. a server upstream, is left as it is)."""
    if isinstance(engine, CacheResettingEngine):
        return await engine.reset_prefix_cache()
    return False


@runtime_checkable
class ToolChoiceEngine(Protocol):
    """An :class:`Engine` that gives its model ``GenerationSettings.tool_choice`` (an optional
    capability): ``takes_tool_choice`` says whether it does right now — the in-process vLLM
    engine forces it with its reply grammar, the HTTP engine sends it with
    ``tool_format="openai"``. Read it with :func:`takes_tool_choice`."""

    @property
    def takes_tool_choice(self) -> bool: ...


def takes_tool_choice(engine: object) -> bool:
    """Whether ``engine`` gives its model the request's ``tool_choice``: a
    :class:`ToolChoiceEngine` whose ``takes_tool_choice`` is true (any other engine ignores
    it)."""
    return isinstance(engine, ToolChoiceEngine) and engine.takes_tool_choice is True


class ClosingContext:
    """The async-context-manager half of an engine (as ``httpx.BaseTransport`` has it):
    ``async with engine:`` returns the engine and closes it on exit. Subclasses implement
    :meth:`aclose`."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        raise NotImplementedError
