"""The phase-heuristic detector: gather phases guessed without a manifest; can false-fill.

It guesses that a run of consecutive read-like calls (read-only effect, or a ``get_``/
``read_``/``list_``/... name) is a gather phase (D3), checks D1 from the declared effects,
and only catches a dependency (D2) when a call's arguments quote the withheld-result marker.
It is kept as a reporting control: how often a detector without declarations false-fills.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.certify.d1 import check_d1, conflicts_with
from harness.certify.d2 import marker_failure
from harness.certify.d3 import looks_like_gather, not_gather_failure
from harness.certify.detector import TrackerBase, WindowTracker
from harness.certify.verdict import DEFAULT_MARKER, Admission, Certificate, Rejection, WindowView
from harness.engines.base import ToolCall
from harness.manifest import Phase, Skill
from harness.tools import Toolset

__all__ = ("PhaseHeuristicDetector",)

NAME = "phase_heuristic"
GATHER = "gather"


def _evidence(phase: str | None, n: int) -> tuple[str, ...]:
    return (
        f"D1: {n} calls pairwise commute (effects and targets)",
        "D2: assumed (no manifest); no argument quotes the withheld marker",
        "D3: guessed gather phase from tool names/effects",
    )


class _HeuristicTracker(TrackerBase):
    detector_name = NAME

    def __init__(self, toolset: Toolset, marker: str, max_window: int) -> None:
        super().__init__(toolset, max_window)
        self.marker = marker

    def evidence(self, phase: str | None, n: int) -> tuple[str, ...]:
        return _evidence(phase, n)

    def phase_of(self, calls: Sequence[ToolCall]) -> Phase | None:
        return None

    def admit(self, call: ToolCall, window: WindowView | None) -> Admission:
        if window is not None and (quotes := marker_failure(call, self.marker)) is not None:
            closes = self.certificate(window, "D2_dependent_call")
            return Admission("discard", None, "D2", closes=closes, failures=(quotes,))
        if not looks_like_gather(self.toolset, call):
            closes = self.certificate(window, "phase_change") if window is not None else None
            failure = not_gather_failure(call)
            return Admission("serial", None, "D3", closes=closes, failures=(failure,))
        if window is not None:
            conflicts = conflicts_with(self.toolset, window.calls, call)
            if conflicts:
                closes = self.certificate(window, "D1_conflict")
                return Admission("serial", None, "D1", closes=closes, failures=tuple(conflicts))
        return self._join(call, window, GATHER, "guessed", slots_done=False)


@dataclass(frozen=True)
class PhaseHeuristicDetector:
    """Guesses gather phases from names/effects, without a manifest; can false-fill."""

    marker: str = DEFAULT_MARKER
    max_window: int = 16
    name: str = NAME

    def tracker(
        self, toolset: Toolset, skill: Skill | None, inputs: Mapping[str, Any]
    ) -> WindowTracker:
        return _HeuristicTracker(toolset, self.marker, self.max_window)

    def certify(
        self,
        toolset: Toolset,
        calls: Sequence[ToolCall],
        phase: Phase | None,
        inputs: Mapping[str, Any] | None = None,
    ) -> Certificate | Rejection:
        failures = [not_gather_failure(c) for c in calls if not looks_like_gather(toolset, c)]
        failures.extend(f for c in calls if (f := marker_failure(c, self.marker)) is not None)
        failures.extend(check_d1(toolset, calls))
        if failures:
            return Rejection(self.name, tuple(failures))
        ids = tuple(c.id for c in calls)
        return Certificate(self.name, GATHER, ids, _evidence(GATHER, len(ids)), "batch")
