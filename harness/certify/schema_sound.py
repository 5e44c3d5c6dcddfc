"""The schema-sound detector: D1-D3 from declared effects and the skill manifest only.

A false fill (a certified window that had a dependent edge) is structurally impossible as
long as the declarations are true (``harness certify`` checks that they are).

Online, the tracker follows the run's position in the skill's phases: a call belongs to the
current phase while it has room, else to the next phase (forward only) that lists its tool.
A call *joins* the open window when D1-D3 hold, runs *serial*ly when one fails (after the open
window closes), or is *discard*ed when it may need a result of the open window (the manifest
says so, or an argument does not come from its declared source, or quotes a withheld result:
it was generated while that result was withheld; it is regenerated after the absorb turn).
Batch :meth:`SchemaSoundDetector.certify` replays the calls through a fresh tracker at the
start of the phase (:func:`~harness.certify.detector.replay`): one decision procedure.
Windows close on the slot-closure signal, a phase change, a call that fails certification, a
final answer, or the size cap.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.certify.d1 import WindowConflicts
from harness.certify.d2 import (
    placeholder_failure,
    provenance_failures,
    withheld_arguments,
    withheld_failure,
)
from harness.certify.d3 import ambiguity_failure, phase_failures
from harness.certify.detector import TrackerBase, WindowTracker, replay
from harness.certify.provenance import InputValues, ProvenancePlan, TurnView
from harness.certify.verdict import (
    DEFAULT_MARKER,
    DEFAULT_MAX_WINDOW,
    Admission,
    Certificate,
    Failure,
    Rejection,
    WindowView,
)
from harness.messages import ToolCall
from harness.skills.manifest import Phase, Skill
from harness.tools.effects import Footprint
from harness.tools.toolset import Toolset

__all__ = ("SchemaSoundDetector",)

NAME = "schema_sound"


@functools.lru_cache(maxsize=1024)
def _evidence(phase: str | None, n: int) -> tuple[str, ...]:
    return (
        f"D1: {n} calls pairwise commute (effects and targets)",
        f"D2: no argument of phase {phase!r} is a result placeholder into the phase",
        f"D3: manifest marks phase {phase!r} fan_out",
    )


class _Placement:
    """Where a call of one tool goes from one phase position, and what admitting it needs
    that does not depend on the call: worked out once per tracker, tool and position."""

    __slots__ = ("clear", "index", "phase", "plans", "pname", "rivals", "slots", "withheld")

    def __init__(
        self,
        tool: str,
        index: int | None,
        phase: Phase | None,
        rivals: tuple[Phase, ...],
        slots: int | None,
        plans: tuple[ProvenancePlan, ...],
    ) -> None:
        self.index = index  # the phase it belongs to (see _SchemaSoundTracker._locate)
        self.phase = phase
        self.pname = phase.name if phase is not None else None
        self.rivals = rivals  # later phases that may own it instead
        self.slots = slots  # the phase's slot count
        self.plans = plans  # provenance under each phase it may belong to
        #: D3 (but the slot count) and schema-level D2 hold for every call of the tool here:
        #: a fan-out phase that lists it, no result placeholder into the phase, no rival.
        self.clear = bool(
            phase is not None
            and phase.is_fan_out
            and not rivals
            and tool in phase.tools
            and not phase.result_arguments(tool, phase.name)  # (in_window_placeholders)
        )
        # Per open window's phase, withheld_arguments: for one phase, the manifest's own
        # index; with rivals, the union, computed on first use.
        self.withheld: Mapping[str, Sequence[str]] = (
            phase.result_sources(tool) if phase is not None and not rivals else {}
        )

    def withheld_from(self, call: ToolCall, window_phase: str) -> Sequence[str]:
        """:func:`~harness.certify.d2.withheld_arguments` for this tool (it reads the name)."""
        if not self.rivals:
            return self.withheld.get(window_phase, ())
        found = self.withheld.get(window_phase)
        if found is None:
            found = withheld_arguments(call, (self.phase, *self.rivals), window_phase)
            self.withheld = {**self.withheld, window_phase: found}
        return found


class _SchemaSoundTracker(TrackerBase):
    detector_name = NAME

    def __init__(
        self,
        toolset: Toolset,
        skill: Skill | None,
        inputs: Mapping[str, Any],
        max_window: int,
        marker: str = DEFAULT_MARKER,
    ) -> None:
        super().__init__(toolset, max_window)
        self.skill = skill
        self.inputs = inputs
        self.input_values = InputValues(inputs)
        self.marker = marker
        self.d1 = WindowConflicts(toolset)
        self.phase_index = 0
        self.phase_calls = 0
        self._slot_counts: dict[str, int | None] = {}
        # Placements per phase position (see _placement); _here: those of the current one.
        self._placements: dict[tuple[int, bool], dict[str, _Placement]] = {}
        self._here: dict[str, _Placement] = {}
        self._full_at: int | None = None  # the current phase's slot count
        self._move(0, 0)

    def _slots(self, phase: Phase) -> int | None:
        """The phase's slot count for this task (computed once per phase)."""
        if phase.name not in self._slot_counts:
            self._slot_counts[phase.name] = phase.slot_count(self.inputs)
        return self._slot_counts[phase.name]

    def evidence(self, phase: str | None, n: int) -> tuple[str, ...]:
        return _evidence(phase, n)

    def fork(self) -> _SchemaSoundTracker:
        clone = super().fork()
        clone.d1 = self.d1.fork()
        clone._slot_counts = dict(self._slot_counts)
        return clone

    def _locate(self, tool: str) -> int | None:
        """The phase this call belongs to: the current one while it has room, else the next
        phase (forward only) that lists the tool."""
        if self.skill is None:
            return None
        current = self.skill.phases[self.phase_index]
        slots = self._slots(current)
        if tool in current.tools and (slots is None or self.phase_calls < slots):
            return self.phase_index
        later = self.skill.later(tool, self.phase_index)
        if later:
            return later[0]
        if tool in current.tools:
            return self.phase_index  # over the slot count: still this phase, but no window
        return None

    def phase_of(self, calls: Sequence[ToolCall]) -> Phase | None:
        if self.skill is None or not calls:
            return None
        index = self._locate(calls[0].name)
        return None if index is None else self.skill.phases[index]

    def _rivals(self, tool: str, index: int | None) -> list[Phase]:
        """Later phases that may own a call attributed to an open-ended phase: when the
        attributed phase declares no slot count, nothing says where it ends, so a call of a
        tool that a later phase also lists may belong to either."""
        if self.skill is None or index is None:
            return []
        phases = self.skill.phases
        if self._slots(phases[index]) is not None:
            return []
        return [phases[i] for i in self.skill.later(tool, index)]

    def _move(self, index: int, calls: int) -> None:
        """Set the phase position. :meth:`_locate` depends only on the tool, the current
        phase and whether it has room, so the placements of that position apply."""
        self.phase_index, self.phase_calls = index, calls
        room = True
        if self.skill is not None:
            slots = self._full_at = self._slots(self.skill.phases[index])
            room = slots is None or calls < slots
        here = self._placements.get((index, room))
        if here is None:
            here = self._placements[index, room] = {}
        self._here = here

    def _placement(self, tool: str) -> _Placement:
        """The :class:`_Placement` of a call of ``tool`` at the current phase position."""
        found = self._here.get(tool)
        if found is None:
            found = self._here[tool] = self._place(tool)
        return found

    def _place(self, tool: str) -> _Placement:
        index = self._locate(tool)
        skill = self.skill
        phase: Phase | None = None
        rivals: tuple[Phase, ...] = ()
        slots: int | None = None
        if index is not None and skill is not None:
            phase = skill.phases[index]
            slots = self._slots(phase)
            if slots is None:  # (_rivals, without looking the slot count up again)
                rivals = tuple(skill.phases[i] for i in skill.later(tool, index))
        found = self.toolset.get(tool)
        effect = found.effect if found is not None else None
        values = self.input_values
        if rivals:
            plans = tuple(
                ProvenancePlan(tool, p.sources(tool), values, effect)
                for p in (phase, *rivals)
                if p is not None
            )
        else:  # one phase, or none (then only what every detector checks: quotes)
            plans = (ProvenancePlan(tool, phase.sources(tool) if phase else {}, values, effect),)
        return _Placement(tool, index, phase, rivals, slots, plans)

    def admit(
        self, call: ToolCall, window: WindowView | None, view: TurnView | None = None
    ) -> Admission:
        place = self._here.get(call.name) or self._placement(call.name)
        index, phase, rivals, pname = place.index, place.phase, place.rivals, place.pname
        if index is not None and index != self.phase_index:
            self._move(index, 0)
        # D2 against the open window: generated while results it needs were withheld
        # (under any phase the call may belong to).
        wphase = window.phase if window is not None else None
        if wphase is not None:
            assert window is not None
            if rivals:
                dependent = place.withheld_from(call, wphase)
            else:
                dependent = place.withheld.get(wphase, ())
            if dependent:
                failure = withheld_failure(call, dependent, wphase)
                closes = self.certificate(window, "D2_dependent_call")
                return Admission("discard", pname, "D2", closes=closes, failures=(failure,))
        refused = self._provenance(call, place.plans, view)
        if refused and window is not None:
            # It may have taken a value from a result withheld from its turn: regenerate it
            # after the absorb turn, when every result is in view.
            closes = self.certificate(window, "D2_dependent_call")
            return Admission("discard", pname, "D2", closes=closes, failures=tuple(refused))
        if index is not None:
            self.phase_calls += 1
            if self.phase_calls == self._full_at:  # no room left: other placements apply
                self._move(index, self.phase_calls)
        footprint = self.d1.footprint(call)
        slots = place.slots
        if not (
            place.clear
            and not refused
            and isinstance(footprint, Footprint)
            and (slots is None or self.phase_calls <= slots)
        ):  # some condition may fail: find which, in order (else every one holds)
            failures = self._certify_one(call, phase, footprint)
            if not failures and rivals:
                assert phase is not None
                failures = [ambiguity_failure(call, phase, rivals)]
            failures.extend(refused)
            if failures:
                reason = failures[0].code
                closes = self.certificate(window, reason) if window is not None else None
                return Admission("serial", pname, reason, closes=closes, failures=tuple(failures))
        assert phase is not None
        assert isinstance(footprint, Footprint)
        closes = None
        if window is not None and wphase != pname:
            closes, window = self.certificate(window, "phase_change"), None
        if window is not None:
            conflict = self.d1.conflict(window, call, footprint)
            if conflict is not None:
                closes = self.certificate(window, "D1_conflict")
                return Admission("serial", pname, "D1", closes=closes, failures=(conflict,))
        done = slots is not None and self.phase_calls >= slots
        return self._join(call, window, pname, "certified", slots_done=done, closes=closes)

    def _provenance(
        self, call: ToolCall, plans: Sequence[ProvenancePlan], view: TurnView | None
    ) -> list[Failure]:
        """Arguments not from their declared sources and arguments that quote a withheld
        result (:mod:`harness.certify.provenance`), under *every* phase the call may belong to (one
        plan each): a violation under any of them refuses the call (its phase is not known,
        so neither is where its arguments should come from)."""
        if len(plans) == 1:  # (one plan's failures are distinct already: one per argument)
            return provenance_failures(call, marker=self.marker, view=view, plan=plans[0])
        found: dict[str, Failure] = {}
        for plan in plans:
            for failure in provenance_failures(call, marker=self.marker, view=view, plan=plan):
                found.setdefault(failure.message, failure)
        return list(found.values())

    def _certify_one(
        self, call: ToolCall, phase: Phase | None, footprint: Footprint | Failure
    ) -> list[Failure]:
        """D3 and schema-level D2 for one call, and whether it has a footprint at all (a
        known tool, arguments valid against its schema, resolvable targets): the first D3
        failure, then every other."""
        failures = phase_failures(phase, [call], self.inputs, count=self.phase_calls)[:1]
        if phase is not None and (d2 := placeholder_failure(phase, call)) is not None:
            failures.append(d2)
        if isinstance(footprint, Failure):
            failures.append(footprint)
        return failures


@dataclass(frozen=True)
class SchemaSoundDetector:
    """D1-D3 from declared effects and the skill manifest: no false fill is possible."""

    max_window: int = DEFAULT_MAX_WINDOW
    name: str = NAME
    marker: str = DEFAULT_MARKER

    def tracker(
        self, toolset: Toolset, skill: Skill | None, inputs: Mapping[str, Any]
    ) -> WindowTracker:
        return _SchemaSoundTracker(toolset, skill, inputs, self.max_window, self.marker)

    def certify(
        self,
        toolset: Toolset,
        calls: Sequence[ToolCall],
        phase: Phase | None,
        inputs: Mapping[str, Any] | None = None,
        view: TurnView | None = None,
    ) -> Certificate | Rejection:
        """Batch: ``calls`` as one window of ``phase``, decided by a fresh online tracker at
        the start of that phase (slot counts, provenance, D1-D3: the same rules and codes).
        ``view``: what the turn that generated them could see, when known."""
        skill = None if phase is None else Skill("batch", (phase,))
        tracker = _SchemaSoundTracker(toolset, skill, inputs or {}, max(len(calls), 1), self.marker)
        return replay(tracker, calls, view, self.name)
