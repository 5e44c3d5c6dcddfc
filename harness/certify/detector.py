"""The detector protocol, the online tracker protocol, and what both detectors share.

A :class:`Detector` certifies in two ways that call the same rules (D1-D3) and emit the same
reason codes:

* **batch**, :meth:`Detector.certify`: a given block of calls in a given phase (P's messages,
  the P+V validator, the certification kit, the benchmark's false-fill truth);
* **online**, :meth:`Detector.tracker`: a :class:`WindowTracker` that follows one run's phase
  position and decides, for each emitted call and the window still open (a
  :class:`~harness.certify.verdict.WindowView`), what to do with it (an
  :class:`~harness.certify.verdict.Admission`). The tracker does not hold the open window:
  whoever runs the window (:class:`harness.window.Windows`) owns it and passes it in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from harness.certify.verdict import Admission, Certificate, Rejection, WindowView
from harness.engines.base import ToolCall
from harness.manifest import Phase, Skill
from harness.tools import Toolset

__all__ = ("Detector", "TrackerBase", "WindowTracker")


class WindowTracker(Protocol):
    """Per-run state of a detector: the phase position (never the open window itself)."""

    def admit(self, call: ToolCall, window: WindowView | None) -> Admission: ...

    def certificate(self, window: WindowView, closed_by: str) -> Certificate | None: ...

    def phase_of(self, calls: Sequence[ToolCall]) -> Phase | None: ...


class Detector(Protocol):
    """A certifier: D1-D3 decided from some evidence (declarations, or a guess)."""

    @property
    def name(self) -> str: ...

    def tracker(
        self, toolset: Toolset, skill: Skill | None, inputs: Mapping[str, Any]
    ) -> WindowTracker: ...

    def certify(
        self,
        toolset: Toolset,
        calls: Sequence[ToolCall],
        phase: Phase | None,
        inputs: Mapping[str, Any] | None = None,
    ) -> Certificate | Rejection: ...


class TrackerBase:
    """What both detectors' trackers share: certificates, and joining a call to the window."""

    detector_name = ""

    def __init__(self, toolset: Toolset, max_window: int) -> None:
        self.toolset = toolset
        self.max_window = max_window

    def evidence(self, phase: str | None, n: int) -> tuple[str, ...]:
        return ()

    def certificate(self, window: WindowView, closed_by: str) -> Certificate | None:
        """The certificate of ``window`` closing now (``None`` for an empty window)."""
        return self._certificate(window.phase, window.calls, closed_by)

    def _certificate(
        self, phase: str | None, calls: Sequence[ToolCall], closed_by: str
    ) -> Certificate | None:
        if not calls:
            return None
        ids = tuple(c.id for c in calls)
        return Certificate(
            self.detector_name, phase, ids, self.evidence(phase, len(ids)), closed_by
        )

    def _join(
        self,
        call: ToolCall,
        window: WindowView | None,
        phase: str | None,
        reason: str,
        *,
        slots_done: bool,
        closes: Certificate | None = None,
    ) -> Admission:
        """``call`` joins ``window`` (or opens one); the window completes right away when this
        call fills the phase's slot count or the size cap."""
        calls = [*(window.calls if window is not None else ()), call]
        completes = None
        if slots_done:
            completes = self._certificate(phase, calls, "slot_closure")
        elif len(calls) >= self.max_window:
            completes = self._certificate(phase, calls, "size_cap")
        return Admission("join", phase, reason, closes=closes, completes=completes)
