"""The phase-heuristic detector: gather phases guessed without a manifest; can false-fill.

It guesses that a run of consecutive read-like calls (read-only effect, or a ``get_``/
``read_``/``list_``/... name) is a gather phase (D3), checks D1 from the declared effects,
and only catches a dependency (D2) when a call's arguments quote the withheld-result marker
or the text of a withheld result that already exists (the check every detector makes).
It is kept as a reporting control: how often a detector without declarations false-fills.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.certify.d1 import WindowConflicts
from harness.certify.d2 import provenance_failures
from harness.certify.d3 import looks_like_gather, not_gather_failure
from harness.certify.detector import TrackerBase, WindowTracker, replay
from harness.certify.provenance import TurnView
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
from harness.tools.toolset import Toolset

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
        self.d1 = WindowConflicts(toolset)

    def evidence(self, phase: str | None, n: int) -> tuple[str, ...]:
        return _evidence(phase, n)

    def fork(self) -> _HeuristicTracker:
        clone = super().fork()
        clone.d1 = self.d1.fork()
        return clone

    def phase_of(self, calls: Sequence[ToolCall]) -> Phase | None:
        return None

    def admit(
        self, call: ToolCall, window: WindowView | None, view: TurnView | None = None
    ) -> Admission:
        quoted = provenance_failures(call, marker=self.marker, view=view)
        if quoted:
            if window is not None:
                closes = self.certificate(window, "D2_dependent_call")
                return Admission("discard", None, "D2", closes=closes, failures=tuple(quoted))
            return Admission("serial", None, "D2", failures=tuple(quoted))
        if not looks_like_gather(self.toolset, call):
            closes = self.certificate(window, "phase_change") if window is not None else None
            failure = not_gather_failure(call)
            return Admission("serial", None, "D3", closes=closes, failures=(failure,))
        footprint = self.d1.footprint(call)
        if isinstance(footprint, Failure):
            closes = self.certificate(window, "D1_conflict") if window is not None else None
            return Admission("serial", None, "D1", closes=closes, failures=(footprint,))
        if window is not None:
            conflict = self.d1.conflict(window, call, footprint)
            if conflict is not None:
                closes = self.certificate(window, "D1_conflict")
                return Admission("serial", None, "D1", closes=closes, failures=(conflict,))
        return self._join(call, window, GATHER, "guessed", slots_done=False)


@dataclass(frozen=True)
class PhaseHeuristicDetector:
    """Guesses gather phases from names/effects, without a manifest; can false-fill."""

    marker: str = DEFAULT_MARKER
    max_window: int = DEFAULT_MAX_WINDOW
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
        view: TurnView | None = None,
    ) -> Certificate | Rejection:
        """Batch: ``calls`` as one window, decided by a fresh online tracker."""
        tracker = _HeuristicTracker(toolset, self.marker, max(len(calls), 1))
        return replay(tracker, calls, view, self.name)
