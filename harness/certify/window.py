"""The window: the one owner of a block of certified calls, from the first admission to the
absorb turn.

A :class:`Window` holds its phase, its calls in emitted order, their execution and, once it
closes, its :class:`~harness.certify.Certificate`. Its results are *withheld* while it is
open (the run shows :attr:`Window.marker` in each call's tool message). With eager dispatch a
call starts the moment it is admitted (its latency hides behind the window's remaining
generation turns); otherwise every call starts together when the window closes.
:meth:`Window.results` waits for them all and returns the results in emitted order, so the
absorb turn sees every call and result verbatim, exactly where the serial arm put them.

:class:`Windows` drives windows online with a detector's tracker: for each emitted call it asks
the tracker for an :class:`~harness.certify.Admission` about the open window, then applies it
— closes the open window (*closed*), opens one and adds the call (*join*), closes it again at
the slot count or size cap (*completed*) — and reports that as a :class:`Step`. It touches
nothing in the world: the caller reveals closed windows, then dispatches the joined call. With
no executor a window is a draft (membership only): the P arm advances its phase position and
the certification kit replays runs that way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

import anyio
from anyio.abc import TaskGroup

from harness._concurrency import gather
from harness.certify.detector import WindowTracker
from harness.certify.provenance import TurnView
from harness.certify.speculation import SpecStats
from harness.certify.verdict import DEFAULT_MARKER, Admission, Certificate
from harness.errors import ConfigError
from harness.messages import ToolCall
from harness.tools.execute import CallMode, Executor, ToolResult, WindowExecutor

__all__ = ("Reach", "Step", "Window", "Windows")

#: How many of a window's calls the serial arm is sure to reach, given the results of the
#: first ``len(results)`` (:meth:`harness.loop.budgets.Budgets.reach`: its mistake and
#: tool-failure budgets); no call past it runs.
Reach = Callable[[Sequence[ToolCall], Sequence[ToolResult]], int]


class Window:
    """The calls of one window, their execution and (once closed) their certificate.

    ``executor``: how its calls run (``None``: a draft that only tracks membership).
    ``eager``: the task group eager dispatch starts calls in (``None``: all run at close).
    ``reach``: how many of its calls the serial arm is sure to reach given the results so far
    (``None``: all of them). A call past it does not start when admitted; at the close the
    calls run concurrently in runs of that many, each after the results before it are known,
    and a call the serial arm would not have reached (it stops at a budget) never runs.
    """

    def __init__(
        self,
        phase: str | None,
        *,
        opened_turn: int = 0,
        executor: Executor | None = None,
        eager: TaskGroup | None = None,
        marker: str = DEFAULT_MARKER,
        reach: Reach | None = None,
        harmless: Callable[[ToolCall], bool] | None = None,
    ) -> None:
        self.phase = phase
        self.opened_turn = opened_turn
        self.marker = marker
        self.calls: list[ToolCall] = []
        self.certificate: Certificate | None = None
        self._executor = executor
        self._eager = eager
        self._results: dict[str, ToolResult] = {}
        self._done: dict[str, anyio.Event] = {}
        self._modes: dict[str, CallMode] = {}
        self._reach = reach
        # A call that may run past ``reach`` all the same (a read-only tool: running it
        # changes nothing, and its result is dropped when the run stops before it).
        self._harmless = harmless or (lambda _call: False)
        #: What speculation did for this window (arm F+spec), set before it is revealed.
        self.speculation: SpecStats | None = None

    @property
    def closed(self) -> bool:
        return self.certificate is not None

    @property
    def mode(self) -> CallMode:
        """How its calls run, as the ledger names it: ``eager`` or ``window`` (at close)."""
        return "eager" if self._eager is not None else "window"

    def add(self, call: ToolCall) -> None:
        """``call`` joins the window (membership only; see :meth:`dispatch`)."""
        if self.certificate is not None:  # closed
            raise ConfigError(f"Window of phase {self.phase!r} is closed; {call.id} cannot join.")
        self.calls.append(call)

    def mode_of(self, call_id: str) -> CallMode:
        """How one call ran: :attr:`mode`, or ``speculated`` (it took over a speculation)."""
        return self._modes.get(call_id, self.mode)

    def dispatch(
        self, call: ToolCall, source: Callable[[], Awaitable[ToolResult]] | None = None
    ) -> None:
        """With eager dispatch, start ``call`` now (its result stays withheld). ``source``:
        where its result comes from instead of the executor (a speculation it matched)."""
        if self._eager is None:
            if source is not None:
                raise ConfigError("A speculated call needs eager dispatch (a task group).")
            return
        # A speculated call already runs (a read-only prefetch) and is adopted at once; any
        # other call past what the serial arm is sure to reach waits for the close.
        if (
            source is None
            and not self._harmless(call)
            and self._index(call) >= self._allowed(self._finished_prefix())
        ):
            return
        self._done[call.id] = anyio.Event()
        if source is not None:
            self._modes[call.id] = "speculated"
        self._eager.start_soon(self._run, call, source)

    def close(self, certificate: Certificate) -> None:
        self.certificate = certificate

    def finished_texts(self) -> tuple[str, ...]:
        """The result texts of the calls that have already finished (eager dispatch), still
        withheld: a later call that quotes one is refused (D2)."""
        return tuple(r.content for r in self._results.values())

    async def _run(
        self, call: ToolCall, source: Callable[[], Awaitable[ToolResult]] | None = None
    ) -> None:
        try:
            run = source or partial(self._require_executor().execute, call)
            self._results[call.id] = await run()
        finally:
            self._done[call.id].set()

    def _require_executor(self) -> Executor:
        if self._executor is None:
            raise ConfigError("A draft window (no executor) cannot run its calls.")
        return self._executor

    def _index(self, call: ToolCall) -> int:
        return next(i for i, c in enumerate(self.calls) if c.id == call.id)

    def _finished_prefix(self) -> list[ToolResult]:
        """The results of the first calls, up to the first one not finished yet."""
        prefix: list[ToolResult] = []
        for call in self.calls:
            if call.id not in self._results:
                break
            prefix.append(self._results[call.id])
        return prefix

    def _allowed(self, known: Sequence[ToolResult]) -> int:
        if self._reach is None:
            return len(self.calls)
        return min(len(self.calls), self._reach(self.calls, known))

    async def results(self) -> list[ToolResult]:
        """Run (or finish running) the calls; results in emitted order. With ``reach``, the
        calls run in runs the results before them allow, and the results stop before the first
        call the serial arm would not reach (fewer results than calls: the run stops there)."""
        executor = self._require_executor()
        out: list[ToolResult] = []
        while len(out) < len(self.calls):
            allowed = self._allowed(out)
            if allowed <= len(out):
                break
            run = self.calls[len(out) : allowed]
            # Read-only calls past the reach run now too (one concurrent run, as without a
            # budget): they change nothing, and a result the run never reaches is dropped.
            later = [c for c in self.calls[allowed:] if self._harmless(c)]
            pending = [
                c for c in (*run, *later) if c.id not in self._done and c.id not in self._results
            ]
            if isinstance(executor, WindowExecutor) and pending:
                ran = await executor.execute_window(pending)
            else:
                ran = await gather([partial(executor.execute, c) for c in pending])
            self._results.update((c.id, r) for c, r in zip(pending, ran, strict=True))
            for call in run:
                if call.id in self._done:
                    await self._done[call.id].wait()
            out.extend(self._results[c.id] for c in run)
        return out


@dataclass(frozen=True)
class Step:
    """What one admission did to the windows: ``closed`` (closed before the call is handled:
    reveal it first), the admission itself, ``window`` (the window the call joined) and
    ``completed`` (closed right after the call joined: reveal it after)."""

    admission: Admission
    closed: Window | None = None
    window: Window | None = None
    completed: Window | None = None


class Windows:
    """A tracker and the open window it decides about (see the module docstring)."""

    def __init__(
        self, tracker: WindowTracker, opener: Callable[[str | None], Window] = Window
    ) -> None:
        self.tracker = tracker
        self.opener = opener
        self.window: Window | None = None

    @property
    def open_calls(self) -> tuple[ToolCall, ...]:
        return tuple(self.window.calls) if self.window is not None else ()

    def admit(self, call: ToolCall, view: TurnView | None = None) -> Step:
        """Ask the tracker about ``call`` (generated on a turn that saw ``view``) and apply
        its admission."""
        admission = self.tracker.admit(call, self.window, view)
        closed = None
        if admission.closes is not None or (admission.action != "join" and self.window):
            closed = self._close(admission.closes)
        joined = None
        if admission.action == "join":
            if self.window is None:
                self.window = self.opener(admission.phase)
            joined = self.window
            joined.add(call)
        completed = self._close(admission.completes) if admission.completes else None
        return Step(admission, closed, joined, completed)

    def close(self, closed_by: str) -> Window | None:
        """Close the open window now (a final answer, the end of a message)."""
        if self.window is None:
            return None
        return self._close(self.tracker.certificate(self.window, closed_by))

    def _close(self, certificate: Certificate | None) -> Window | None:
        window, self.window = self.window, None
        if window is None or not window.calls:
            return None
        if certificate is None:  # a tracker that forgot to say why: still a closed window
            certificate = self.tracker.certificate(window, "closed")
            assert certificate is not None
        window.close(certificate)
        return window

    def replay(self, calls: Sequence[ToolCall], *, readmit_discarded: bool) -> list[Window]:
        """Admit ``calls`` in order and return every window they closed (then close the
        last). ``readmit_discarded``: admit a discarded call once more, as the loop's
        regenerated call would be (the certification kit's model of a run)."""
        closed: list[Window] = []

        def keep(step: Step) -> None:
            closed.extend(w for w in (step.closed, step.completed) if w is not None)

        for call in calls:
            step = self.admit(call)
            keep(step)
            if readmit_discarded and step.admission.action == "discard":
                keep(self.admit(call))
        last = self.close("end")
        if last is not None:
            closed.append(last)
        return closed
