"""Executing one tool call, with every model mistake turned into an error result.

:func:`execute_call` never raises for anything the model or a tool did wrong: unknown tool,
invalid JSON, arguments that fail the schema, a tool that raises, a tool that times out, a
result over its size cap — each becomes a :class:`ToolResult` with ``is_error=True`` and a
message the model can act on (MCP's ``isError``). Only cancellation propagates. So one call's
failure can never cancel a sibling running in the same task group, and every call id gets
exactly one result.

A sync tool runs in a worker thread that a timeout or a cancellation cannot stop: such a call
is *abandoned* and its outcome is unknown until the thread really ends. Its result carries the
:class:`~harness.tools.ToolThread` (``outcome_known`` is False until it ends) and
``on_abandon`` is told, so the caller can record the real outcome when it comes (the write
may land after the model was told the call timed out). A timeout message never invites a
retry of a call that is not idempotent.
"""

from __future__ import annotations

import difflib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

import anyio

from harness.messages import Message, ToolCall
from harness.tools._thread import ToolThread
from harness.tools.toolset import Tool, Toolset

__all__ = (
    "CallMode",
    "ErrorKind",
    "Executor",
    "OnAbandon",
    "SpeculationRecord",
    "ToolResult",
    "ToolsetExecutor",
    "WindowExecutor",
    "execute_call",
    "render_result",
)

#: How a call ran (:attr:`harness.loop.ledger.CallRecord.mode`): ``serial``, ``window``,
#: ``eager``, ``speculated``, ``parallel`` or ``client`` (the run's ledger records it).
CallMode = Literal["serial", "window", "eager", "speculated", "parallel", "client"]

#: ``outcome_unknown``: a call that started and whose outcome is not known (an interrupted run
#: resumed without re-running it, see :mod:`harness.journal`).
ErrorKind = Literal[
    "unknown_tool",
    "bad_json",
    "bad_arguments",
    "tool_raised",
    "timeout",
    "too_large",
    "outcome_unknown",
]

#: Told about a sync call whose thread outlived the call (timed out or cancelled).
OnAbandon = Callable[[ToolCall, ToolThread], None]


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call: the text the model will see and how it was produced.

    ``value`` is the tool's raw return value (``None`` on error); ``content`` is its rendering
    (JSON for structured values). ``started``/``finished`` are ``time.monotonic()`` stamps.
    ``thread``: the worker thread of an abandoned sync call, still running when this result
    was made; until it ends the call's outcome is unknown.
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    error_kind: ErrorKind | None = None
    value: Any = None
    started: float = 0.0
    finished: float = 0.0
    thread: ToolThread | None = field(default=None, compare=False, repr=False)

    @property
    def outcome_known(self) -> bool:
        """False while an abandoned sync call's thread is still running (it may yet write)."""
        return self.thread is None or self.thread.done

    @property
    def duration_s(self) -> float:
        return self.finished - self.started

    def to_message(self) -> Message:
        """The ``tool`` message that carries this result back to the model."""
        return {
            "role": "tool",
            "tool_call_id": self.call_id,
            "name": self.name,
            "content": self.content,
        }


def render_result(value: Any) -> str:
    """How a tool's return value is shown to the model: strings verbatim, everything else as
    compact, key-sorted JSON (deterministic, so S and F render identical bytes)."""
    if isinstance(value, str):
        return value
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "), default=str
    )


#: What became of a call at its deadline: an async tool is ``stopped`` (cancelled); a sync
#: tool's thread is ``running`` on (outcome unknown), ``not_started`` (it never will) or
#: ``ended`` (it finished as the deadline fired: its outcome is known).
GiveUp = Literal["stopped", "running", "not_started", "ended"]


def _give_up(call: ToolCall, thread: ToolThread | None, on_abandon: OnAbandon | None) -> GiveUp:
    if thread is None:
        return "stopped"
    if thread.abandon():
        if on_abandon is not None:
            on_abandon(call, thread)
        return "running"
    return "ended" if thread.done else "not_started"


def _timeout_message(tool: Tool, fate: GiveUp) -> str:
    """What a timeout means for the world, and what the model may safely do next."""
    head = f"Tool '{tool.name}' timed out after {tool.timeout_s:.1f} s"
    if fate == "not_started":
        return f"{head} before it started, so it did not run; calling it again is safe."
    if tool.effect.read_only:
        return f"{head}; it only reads, so calling it again is safe."
    if fate == "running":
        state = (
            " and is still running in its thread, so whether it took effect is unknown "
            "(it may still finish)"
        )
    else:
        state = " and was stopped; it may have taken effect before it stopped"
    if tool.effect.idempotent:
        advice = "It is idempotent: calling it again with the same arguments is safe."
    else:
        advice = (
            "It is not idempotent: do not call it again until you have checked whether it "
            "took effect."
        )
    return f"{head}{state}. {advice}"


async def execute_call(
    toolset: Toolset,
    call: ToolCall,
    *,
    idempotency_key: str | None = None,
    on_abandon: OnAbandon | None = None,
) -> ToolResult:
    """Run one call against ``toolset``; see the module docstring for the error contract.

    ``idempotency_key`` goes to a tool that accepts one. ``on_abandon(call, thread)`` is
    called when a sync tool's thread outlives the call (a timeout or a cancellation)."""
    started = time.monotonic()

    def error(kind: ErrorKind, message: str) -> ToolResult:
        return ToolResult(
            call.id, call.name, f"Error: {message}", True, kind, None, started, time.monotonic()
        )

    if call.name not in toolset:
        close = difflib.get_close_matches(call.name, list(toolset), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return error(
            "unknown_tool",
            f"Unknown tool '{call.name}'.{hint} Available: {', '.join(toolset)}.",
        )
    tool = toolset[call.name]
    arguments = call.args.value
    if arguments is None:
        return error("bad_json", call.args.problem or "bad arguments")
    key = (call.id, call.arguments)  # the certifier may have checked it already: reuse that
    problems = [] if tool.check(arguments, call=key).valid else tool.validation_errors(arguments)
    if problems:
        return error(
            "bad_arguments",
            f"Arguments for '{call.name}' do not match its schema: " + "; ".join(problems[:5]),
        )
    thread = ToolThread() if tool.runs_in_thread else None
    try:
        # move_on_after, not fail_after: a TimeoutError the tool raises itself is the tool's
        # failure, not our deadline (and must not be formatted as one when timeout_s is None).
        with anyio.move_on_after(tool.timeout_s) as deadline:
            value = await tool.invoke(
                arguments,
                idempotency_key=idempotency_key,
                thread=thread,
                call=key,
            )
    except anyio.get_cancelled_exc_class():
        _give_up(call, thread, on_abandon)
        raise
    except Exception as exc:  # a tool's failure is data for the model, never a crash
        return error("tool_raised", f"Tool '{call.name}' raised {type(exc).__name__}: {exc}")
    if deadline.cancelled_caught:
        fate = _give_up(call, thread, on_abandon)
        if fate != "ended" or thread is None:
            timed_out = error("timeout", _timeout_message(tool, fate))
            return replace(timed_out, thread=thread) if fate == "running" else timed_out
        if thread.error is not None:  # it finished as the deadline fired: that is its outcome
            failure = thread.error
            return error(
                "tool_raised", f"Tool '{call.name}' raised {type(failure).__name__}: {failure}"
            )
        value = thread.value
    try:
        content = render_result(value)
    except Exception as exc:  # e.g. tuple keys or a cycle: the tool's mistake, not a crash
        return error(
            "tool_raised",
            f"Tool '{call.name}' returned a value that cannot be rendered as JSON "
            f"({type(exc).__name__}: {exc}); return JSON-compatible data.",
        )
    if tool.result_cap is not None and len(content) > tool.result_cap:
        return error(
            "too_large",
            f"Result of '{call.name}' is {len(content):,} characters, over its cap of "
            f"{tool.result_cap:,}; ask for less or raise the tool's result_cap.",
        )
    return ToolResult(call.id, call.name, content, False, None, value, started, time.monotonic())


class Executor(Protocol):
    """The call-execution seam: every call of every arm runs through one ``execute``.

    :class:`ToolsetExecutor` runs calls in process; a wrapper can record each call's intent
    before it starts and its outcome after (a journal), and an external executor can hand the
    call to a client and await its result (the proxy). Like :func:`execute_call`, it turns
    every model or tool mistake into an error result and raises only on cancellation.
    """

    async def execute(self, call: ToolCall) -> ToolResult: ...


@runtime_checkable
class WindowExecutor(Protocol):
    """An executor that runs a revealed window's calls as one unit (an optional capability, as
    :class:`~harness.engines.base.StreamingEngine` is for engines): a
    :class:`~harness.certify.window.Window` without eager dispatch hands all its calls to
    ``execute_window`` at once instead of ``execute`` one by one. The proxy's executor is one:
    a window goes to the client as one message (:mod:`harness.proxy.conversation`).
    Results come back in the order of ``calls``."""

    async def execute(self, call: ToolCall) -> ToolResult: ...

    async def execute_window(self, calls: Sequence[ToolCall]) -> list[ToolResult]: ...


@runtime_checkable
class SpeculationRecord(Protocol):
    """An optional capability of an :class:`Executor` that keeps a record of its calls (the
    journal's :class:`~harness.journal.execution.JournaledCalls`): what arm F+spec
    (:mod:`harness.certify.speculation`) asks of it. Without it a speculation runs through
    :meth:`Executor.execute` and a hit adopts its result unrecorded."""

    async def speculate(self, call: ToolCall) -> ToolResult:
        """Run the speculative ``call`` (not emitted by the model), recorded as speculative;
        a resumed run gets the outcome an earlier attempt recorded for it, never counted as
        a replay."""
        ...

    def decided(self, call: ToolCall) -> bool:
        """Whether the record already decides the emitted ``call``'s outcome (a resumed run):
        then it runs through ``execute``, never adopting a speculation."""
        ...

    def adopted(self, call: ToolCall, speculative: ToolCall, result: ToolResult) -> None:
        """Record that the emitted ``call`` took over ``speculative``'s execution, with
        ``result`` (already addressed to ``call``)."""
        ...


class ToolsetExecutor:
    """Runs calls against a :class:`~harness.tools.Toolset` in this process; ``on_abandon``
    as for :func:`execute_call`."""

    def __init__(self, toolset: Toolset, *, on_abandon: OnAbandon | None = None) -> None:
        self.toolset = toolset
        self.on_abandon = on_abandon

    async def execute(self, call: ToolCall) -> ToolResult:
        return await execute_call(self.toolset, call, on_abandon=self.on_abandon)
