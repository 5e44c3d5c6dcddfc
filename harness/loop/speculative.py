"""Arm F+spec: F with eager dispatch and certified speculation (``flatten.speculate``).

Everything the model sees is F's: the same prompting, the same generation calls, the same
markers, the same absorb turn. What changes is *when* a window's calls start. The skill
manifest and the tools' effects (:mod:`harness.certify.speculation`) say which calls of a fan-out
phase are known before the model emits them and safe to start early; those start

* when the run starts, for a first phase that is a fan-out (read-only tools only);
* when a window of the phase opens, for the calls still to come;
* when the window before the phase is revealed, from the task inputs and the results now in
  the context ("predict from what is visible"; read-only tools only).

Each call the certifier admits into a window of that phase is matched against them
(:meth:`~harness.certify.speculation.Speculation.claim`): a hit takes the speculative execution over
(the tool runs once), a miss runs as in F+eager. When the window closes its unmatched
speculations are cancelled and discarded before it is revealed. A call that runs outside the
phase's window and may write (a serial call of a tool that is not read-only) invalidates
every speculation still open, since a prefetched read could otherwise see the world before
that write; so does the final answer. The window record and the run summary (``extra
["speculation"]``) say what speculation did.
"""

from __future__ import annotations

import itertools
from functools import partial

from anyio.abc import TaskGroup

from harness.certify import Detector
from harness.certify.speculation import SpecStats, Speculation, folded_call_key, predict
from harness.certify.window import Window
from harness.loop.flattened import FlattenedArm
from harness.loop.state import RunState
from harness.messages import CallKey, Completion, ToolCall

__all__ = ("SpeculativeArm",)


class SpeculativeArm(FlattenedArm):
    """Arm F+spec (see the module docstring)."""

    def __init__(self, state: RunState, detector: Detector, group: TaskGroup) -> None:
        super().__init__(state, detector, group)
        self._group = group  # misses run as in F+eager
        self._spec_group = group
        self._ids = itertools.count()
        self._live: dict[str, Speculation] = {}
        self._emitted: dict[str, set[CallKey]] = {}
        self.totals = {
            "windows": 0, "windows_predicted": 0, "predicted": 0, "hits": 0, "misses": 0,
            "cancelled": 0, "wasted_s": 0.0, "invalidated": 0,
        }  # fmt: skip
        skill = state.skill
        if skill is not None and skill.phases and skill.phases[0].is_fan_out:
            self._start(skill.phases[0].name, prefetch=True)

    # -- starting -------------------------------------------------------------------------

    def _start(self, phase_name: str, *, prefetch: bool) -> None:
        skill = self.state.skill
        if skill is None or phase_name in self._live:
            return
        try:
            phase = skill.phase(phase_name)
        except KeyError:
            return
        state = self.state
        done = self._emitted.get(phase_name, set())
        predictions = [
            p
            for p in predict(
                phase,
                state.toolset,
                state.task.inputs,
                state.transcript.visible_results(state.config.marker),
                max_window=state.config.max_window,
                prefetch=prefetch,
            )
            if folded_call_key(state.toolset.get(p.tool), p.tool, p.arguments) not in done
        ]
        if predictions:
            self._live[phase_name] = Speculation(
                phase_name, predictions, state.toolset, state.executor, self._spec_group, self._ids
            )

    def _open(self, phase: str | None) -> Window:
        window = super()._open(phase)
        if phase is not None:
            self._start(phase, prefetch=False)
        return window

    # -- matching -------------------------------------------------------------------------

    def _dispatch(self, window: Window, call: ToolCall) -> None:
        tool = self.state.toolset.get(call.name)
        if tool is None or not tool.effect.read_only:
            # A write in a window may change what a later phase's prefetched reads read (its
            # own phase's reads are kept apart from it by D1): they start again after it.
            self._invalidate(keep=window.phase)
        speculation = self._live.get(window.phase) if window.phase is not None else None
        if window.phase is not None and speculation is not None:
            key = speculation.key_of(call)
            if key is not None:
                self._emitted.setdefault(window.phase, set()).add(key)
            entry = speculation.claim(call)
            if entry is not None:
                window.dispatch(call, partial(speculation.adopt, entry, call))
                return
        window.dispatch(call)

    async def _run_serial(self, call: ToolCall) -> None:
        tool = self.state.toolset.get(call.name)
        if tool is None or not tool.effect.read_only:
            self._invalidate()
        await super()._run_serial(call)

    # -- settling -------------------------------------------------------------------------

    async def _reveal(self, window: Window) -> None:
        speculation = self._live.pop(window.phase, None) if window.phase is not None else None
        stats = speculation.settle() if speculation is not None else None
        window.speculation = stats or SpecStats(misses=len(window.calls))
        self._count(window.speculation)
        self.totals["windows"] += 1
        self.totals["windows_predicted"] += window.speculation.predicted > 0
        await super()._reveal(window)
        skill = self.state.skill
        if skill is not None and window.phase is not None:
            names = [p.name for p in skill.phases]
            if window.phase in names and names.index(window.phase) + 1 < len(names):
                following = skill.phases[names.index(window.phase) + 1]
                if following.is_fan_out:
                    self._start(following.name, prefetch=True)

    def _invalidate(self, keep: str | None = None) -> None:
        """A call that may write runs outside the speculated windows (serially, or in a
        window of phase ``keep``): cancel every other one."""
        self._settle_all(invalidated=True, keep=keep)

    def _settle_all(self, *, invalidated: bool, keep: str | None = None) -> None:
        for phase, speculation in list(self._live.items()):
            if keep is not None and phase == keep:
                continue
            self.totals["invalidated"] += invalidated
            self._count(speculation.settle(), with_misses=False)
            del self._live[phase]
        self.state.extra["speculation"] = dict(self.totals)

    def _count(self, stats: SpecStats, *, with_misses: bool = True) -> None:
        totals = self.totals
        totals["predicted"] += stats.predicted
        totals["hits"] += stats.hits
        totals["misses"] += stats.misses if with_misses else 0
        totals["cancelled"] += stats.cancelled
        totals["wasted_s"] += stats.wasted_s
        self.state.extra["speculation"] = dict(totals)

    async def handle(self, completion: Completion) -> bool:
        done = await super().handle(completion)
        if done:  # the run ends: nothing still speculated may keep it waiting
            self._settle_all(invalidated=False)
        return done
