"""Arm F, harness-flattened: serial prompting, certified windows withheld and run together.

The same prompting and the same generation calls as S. Each emitted call goes to the
detector's tracker through :class:`~harness.certify.window.Windows`, and the admission is applied:

* **admit** (*join*): the call joins the open window; its result is *withheld* (the window's
  marker stands in for it in the transcript) and, with eager dispatch, it starts now;
* **withhold** lasts until the window closes (slot count, phase change, a call that fails
  certification, a final answer, the size cap);
* **absorb**: the closed window is revealed (:meth:`~harness.loop.state.RunState.reveal`):
  every result replaces its marker in emitted order and the next generation is the window's
  absorb turn, whose context is message for message the serial arm's;
* **serial**: a call that does not certify runs on its own, after the open window closes;
* **discard**: a call generated while a result it needed was withheld (D2: the manifest says
  so, an argument does not come from its declared source, or quotes a withheld result) is
  dropped and regenerated after the absorb turn, counted against ``flatten.max_discards``;
  so is every later call of the same reply (S would run them after it, so they are
  regenerated after it), and a reply discarded whole does not count toward the stuck guard
  (``max_identical_calls``: S never saw it);
* **budgets**: no window call runs that S would not have reached — the calls past what the
  remaining mistake and tool-failure budgets allow wait for the results before them, and the
  budgets are checked at the reveal after each reply's results, where S checks them.
"""

from __future__ import annotations

from anyio.abc import TaskGroup

from harness.certify import Detector, WindowTracker
from harness.certify.provenance import TurnView
from harness.certify.window import Window, Windows
from harness.engines.base import GenerationSettings
from harness.loop.serial import serial_settings
from harness.loop.state import RunState
from harness.messages import Completion, ToolCall

__all__ = ("FlattenedArm",)


class FlattenedArm:
    """Arm F (and F+eager with ``flatten.eager``)."""

    def __init__(
        self,
        state: RunState,
        detector: Detector,
        group: TaskGroup,
        tracker: WindowTracker | None = None,
    ) -> None:
        """``tracker``: the detector's tracker for this run, when one already stands at the
        run's phase position (the proxy's cached replays); default: a fresh one."""
        self.state = state
        self._group = group if state.config.flatten.eager else None
        if tracker is None:
            tracker = detector.tracker(state.toolset, state.skill, state.task.inputs)
        self.windows = Windows(tracker, self._open)

    def _open(self, phase: str | None) -> Window:
        return Window(
            phase,
            opened_turn=self.state.turn - 1,
            executor=self.state.executor,
            eager=self._group,
            marker=self.state.config.marker,
            reach=self.state.reach,
            harmless=self._read_only,
        )

    def _read_only(self, call: ToolCall) -> bool:
        tool = self.state.toolset.get(call.name)
        return tool is not None and tool.effect.read_only

    @property
    def window_open(self) -> bool:
        return self.windows.window is not None

    def settings(self) -> GenerationSettings:
        return serial_settings(self.state)

    async def review(self, completion: Completion) -> Completion:
        return completion

    async def handle(self, completion: Completion) -> bool:
        if not completion.tool_calls:
            closed = self.windows.close("final_answer")
            if closed is not None:
                # A final answer generated while results were withheld: reveal, regenerate.
                await self._reveal(closed)
                self.state.count.discards += 1
                self.state.budgets.unsee()  # S never saw this answer
                return False
            self.state.transcript.append_answer(completion)
            return True
        view = self._view()  # every call of one reply was generated on the same turn
        calls = completion.tool_calls
        for i, call in enumerate(calls):
            if not await self._admit(call, completion, view):
                continue
            # Discarded: so is every later call of the reply. S runs a reply's calls in order,
            # so they come after the discarded one, regenerated after the absorb turn.
            for sibling in calls[i + 1 :]:
                self.state.discard(sibling, f"a later call of the same reply as {call.id}")
            if i == 0:  # the whole reply: S never saw it, the stuck guard does not count it
                self.state.budgets.unsee()
            break
        return False

    def abandon(self) -> None:
        """The run ended (a budget, an error, a cancel) with a window open: record it, closed
        by ``"aborted"`` (no results: they were never revealed), so a window that certified a
        false fill is counted even when the run died of it."""
        window = self.windows.window
        if window is None or not window.calls:
            return
        self.state.record_window(
            self.state.next_window_index(),
            window.calls,
            (),
            phase=window.phase,
            closed_by="aborted",
            evidence=(),
            opened_turn=window.opened_turn,
            closed_turn=self.state.turn,
        )

    def _view(self) -> TurnView:
        """What the turn just generated could see: the results in the context, and the
        withheld results that already exist (eager dispatch)."""
        window = self.windows.window
        return TurnView(
            self.state.transcript.visible_results(self.state.config.marker),
            window.finished_texts() if window is not None else (),
        )

    async def _admit(self, call: ToolCall, completion: Completion, view: TurnView) -> bool:
        """Admit one call and apply the admission; True when it was discarded."""
        step = self.windows.admit(call, view)
        if step.closed is not None:
            await self._reveal(step.closed)
        admission = step.admission
        if admission.action == "discard":
            failures = admission.failures
            self.state.discard(call, failures[0].message if failures else admission.reason)
            return True
        self.state.transcript.append_calls(completion, [call])
        if step.window is None:
            await self._run_serial(call)
        else:
            self._dispatch(step.window, call)
            self.state.transcript.append_result(call, step.window.marker)
        if step.completed is not None:
            await self._reveal(step.completed)
        return False

    # -- the seams F+spec (:mod:`harness.loop.speculative`) extends ------------------------

    async def _reveal(self, window: Window) -> None:
        await self.state.reveal(window)

    async def _run_serial(self, call: ToolCall) -> None:
        await self.state.run_serial(call)

    def _dispatch(self, window: Window, call: ToolCall) -> None:
        window.dispatch(call)
