"""The schema-sound detector: D1-D3 from declared effects and the skill manifest only.

A false fill (a certified window that had a dependent edge) is structurally impossible as
long as the declarations are true (``harness certify`` checks that they are).

Online, the tracker follows the run's position in the skill's phases: a call belongs to the
current phase while it has room, else to the next phase (forward only) that lists its tool.
A call *joins* the open window when D1-D3 hold, runs *serial*ly when one fails (after the open
window closes), or is *discard*ed when the manifest says it needs a result of the open window
(it was generated while that result was withheld; it is regenerated after the absorb turn).
Windows close on the slot-closure signal, a phase change, a call that fails certification, a
final answer, or the size cap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.certify.d1 import call_defect, check_d1, conflicts_with
from harness.certify.d2 import placeholder_failure, withheld_arguments, withheld_failure
from harness.certify.d3 import ambiguity_failure, phase_failures
from harness.certify.detector import TrackerBase, WindowTracker
from harness.certify.verdict import Admission, Certificate, Failure, Rejection, WindowView
from harness.engines.base import ToolCall
from harness.manifest import Phase, Skill
from harness.tools import Toolset

__all__ = ("SchemaSoundDetector",)

NAME = "schema_sound"


def _evidence(phase: str | None, n: int) -> tuple[str, ...]:
    return (
        f"D1: {n} calls pairwise commute (effects and targets)",
        f"D2: no argument of phase {phase!r} is a result placeholder into the phase",
        f"D3: manifest marks phase {phase!r} fan_out",
    )


class _SchemaSoundTracker(TrackerBase):
    detector_name = NAME

    def __init__(
        self, toolset: Toolset, skill: Skill | None, inputs: Mapping[str, Any], max_window: int
    ) -> None:
        super().__init__(toolset, max_window)
        self.skill = skill
        self.inputs = inputs
        self.phase_index = 0
        self.phase_calls = 0

    def evidence(self, phase: str | None, n: int) -> tuple[str, ...]:
        return _evidence(phase, n)

    def _locate(self, tool: str) -> int | None:
        """The phase this call belongs to: the current one while it has room, else the next
        phase (forward only) that lists the tool."""
        if self.skill is None:
            return None
        phases = self.skill.phases
        current = phases[self.phase_index]
        slots = current.slot_count(self.inputs)
        if tool in current.tools and (slots is None or self.phase_calls < slots):
            return self.phase_index
        for index in range(self.phase_index + 1, len(phases)):
            if tool in phases[index].tools:
                return index
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
        phase = self.skill.phases[index]
        if phase.slot_count(self.inputs) is not None:
            return []
        return [p for p in self.skill.phases[index + 1 :] if tool in p.tools]

    def admit(self, call: ToolCall, window: WindowView | None) -> Admission:
        index = self._locate(call.name)
        phase = None if index is None or self.skill is None else self.skill.phases[index]
        rivals = self._rivals(call.name, index)
        if index is not None and index != self.phase_index:
            self.phase_index, self.phase_calls = index, 0
        pname = phase.name if phase else None
        # D2 against the open window: generated while results it needs were withheld
        # (under any phase the call may belong to).
        if window is not None and window.phase is not None:
            dependent = withheld_arguments(call, (phase, *rivals), window.phase)
            if dependent:
                failure = withheld_failure(call, dependent, window.phase)
                closes = self.certificate(window, "D2_dependent_call")
                return Admission("discard", pname, "D2", closes=closes, failures=(failure,))
        if index is not None:
            self.phase_calls += 1
        failures = self._certify_one(call, phase)
        if not failures and rivals:
            assert phase is not None
            failures = [ambiguity_failure(call, phase, rivals)]
        if failures:
            reason = failures[0].code
            closes = self.certificate(window, reason) if window is not None else None
            return Admission("serial", pname, reason, closes=closes, failures=tuple(failures))
        assert phase is not None
        closes = None
        if window is not None and window.phase != pname:
            closes, window = self.certificate(window, "phase_change"), None
        if window is not None:
            conflicts = conflicts_with(self.toolset, window.calls, call)
            if conflicts:
                closes = self.certificate(window, "D1_conflict")
                return Admission("serial", pname, "D1", closes=closes, failures=tuple(conflicts))
        slots = phase.slot_count(self.inputs)
        done = slots is not None and self.phase_calls >= slots
        return self._join(call, window, pname, "certified", slots_done=done, closes=closes)

    def _certify_one(self, call: ToolCall, phase: Phase | None) -> list[Failure]:
        """D3 and schema-level D2 for one call, and whether D1 can read it at all; the first
        failure only (a serial call needs one reason)."""
        d3 = phase_failures(phase, [call], self.inputs, count=self.phase_calls)
        if d3:
            return d3[:1]
        assert phase is not None
        d2 = placeholder_failure(phase, call)
        if d2 is not None:
            return [d2]
        defect = call_defect(self.toolset, call)
        return [defect] if defect is not None else []


@dataclass(frozen=True)
class SchemaSoundDetector:
    """D1-D3 from declared effects and the skill manifest: no false fill is possible."""

    max_window: int = 16
    name: str = NAME

    def tracker(
        self, toolset: Toolset, skill: Skill | None, inputs: Mapping[str, Any]
    ) -> WindowTracker:
        return _SchemaSoundTracker(toolset, skill, inputs, self.max_window)

    def certify(
        self,
        toolset: Toolset,
        calls: Sequence[ToolCall],
        phase: Phase | None,
        inputs: Mapping[str, Any] | None = None,
    ) -> Certificate | Rejection:
        failures = phase_failures(phase, calls, inputs or {})
        if phase is not None:
            failures.extend(f for c in calls if (f := placeholder_failure(phase, c)) is not None)
        failures.extend(check_d1(toolset, calls) if len(calls) > 1 else [])
        if len(calls) == 1 and (defect := call_defect(toolset, calls[0])) is not None:
            failures.append(defect)
        if failures:
            return Rejection(self.name, tuple(failures))
        assert phase is not None
        ids = tuple(c.id for c in calls)
        return Certificate(self.name, phase.name, ids, _evidence(phase.name, len(ids)), "batch")
