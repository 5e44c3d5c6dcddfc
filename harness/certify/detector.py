"""The detector protocol, the online tracker protocol, and what both detectors share.

A :class:`Detector` certifies in two ways that call the same rules (D1-D3) and emit the same
reason codes:

* **batch**, :meth:`Detector.certify`: a given block of calls in a given phase (P's messages,
  the P+V validator, the certification kit, the benchmark's false-fill truth);
* **online**, :meth:`Detector.tracker`: a :class:`WindowTracker` that follows one run's phase
  position and decides, for each emitted call and the window still open (a
  :class:`~harness.certify.verdict.WindowView`), what to do with it (an
  :class:`~harness.certify.verdict.Admission`). The tracker does not hold the open window:
  whoever runs the window (:class:`harness.certify.window.Windows`) owns it and passes it in.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, Self

from harness.certify.provenance import TurnView
from harness.certify.verdict import Admission, Certificate, Failure, Rejection, WindowView
from harness.messages import ToolCall
from harness.skills.manifest import Phase, Skill
from harness.tools.toolset import Toolset

__all__ = ("Detector", "TrackerBase", "WindowTracker", "replay")


class WindowTracker(Protocol):
    """Per-run state of a detector: the phase position (never the open window itself).
    ``view``: what the turn that generated the call could see (its visible results, the
    withheld results that already exist), for provenance; ``None`` when unknown."""

    def admit(
        self, call: ToolCall, window: WindowView | None, view: TurnView | None = None
    ) -> Admission: ...

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
        view: TurnView | None = None,
    ) -> Certificate | Rejection: ...


class TrackerBase:
    """What both detectors' trackers share: certificates, and joining a call to the window."""

    detector_name = ""

    def __init__(self, toolset: Toolset, max_window: int) -> None:
        self.toolset = toolset
        self.max_window = max_window

    def evidence(self, phase: str | None, n: int) -> tuple[str, ...]:
        return ()

    def fork(self) -> Self:
        """An independent tracker at this one's phase position: admitting calls to one never
        changes the other. What a tracker only reads (the toolset, the skill, the inputs) and
        its pure caches are shared; subclasses copy their own position state. Only valid
        where no window is open (the proxy caches positions there: its replays)."""
        return copy.copy(self)

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
        before = window.calls if window is not None else ()
        completes = None
        if slots_done or len(before) + 1 >= self.max_window:
            closed_by = "slot_closure" if slots_done else "size_cap"
            completes = self._certificate(phase, [*before, call], closed_by)
        elif closes is None:
            return _plain_join(phase, reason)
        return Admission("join", phase, reason, closes=closes, completes=completes)


@functools.lru_cache(maxsize=256)
def _plain_join(phase: str | None, reason: str) -> Admission:
    """The common admission (join, nothing closes or completes), made once: it is immutable."""
    return Admission("join", phase, reason)


@dataclass
class _Draft:
    """A window that only holds membership (batch replays)."""

    phase: str | None
    calls: list[ToolCall] = field(default_factory=list)


def replay(
    tracker: WindowTracker, calls: Sequence[ToolCall], view: TurnView | None, detector: str
) -> Certificate | Rejection:
    """Batch certification as the online tracker decides it: admit ``calls`` one by one
    (all generated on one turn, ``view``); they certify as one window iff every call joins
    and no window closes before the last call. A rejection lists every call's failures."""
    failures: list[Failure] = []
    window: _Draft | None = None
    certificate: Certificate | None = None
    for position, call in enumerate(calls):
        admission = tracker.admit(call, window, view)
        if admission.action != "join":
            failures.extend(admission.failures)
            if not admission.failures:
                failures.append(Failure("D3", admission.reason, admission.reason, call.id))
            window = None
            continue
        if admission.closes is not None:
            failures.append(
                Failure("D3", "D3_outside_phase", f"'{call.name}' starts another window", call.id)
            )
            window = None
        if window is None:
            window = _Draft(admission.phase)
        window.calls.append(call)
        if admission.completes is not None:
            if position != len(calls) - 1:
                nxt = calls[position + 1]
                failures.append(
                    Failure(
                        "D3",
                        "D3_over_slots",
                        f"the window closed ({admission.completes.closed_by}) before '{nxt.name}'",
                        nxt.id,
                    )
                )
            certificate, window = admission.completes, None
    if certificate is None and window is not None:
        certificate = tracker.certificate(window, "batch")
    if failures or certificate is None or certificate.n != len(calls):
        return Rejection(detector, tuple(failures))
    return replace(certificate, closed_by="batch")
