"""Certification of fan-out windows: the only place the independence rules live.

A *window* is a block of consecutive calls of one fan-out phase. It is certified when

**D1** every pair of calls commutes on the world (:mod:`harness.certify.d1`);
**D2** no argument of any call depends on a result of another call of the window: at the
    schema level, the manifest's argument template for the call's tool has no result
    placeholder that points into the window's own phase (:mod:`harness.certify.d2`);
**D3** a phase signal marks the window as fan-out: the manifest phase is ``fan_out`` (and its
    ``slots`` count is the slot-closure signal) (:mod:`harness.certify.d3`).

Two detectors implement one protocol (:class:`Detector`):

* :class:`SchemaSoundDetector` decides D1-D3 from declared effects and the skill manifest only,
  so a false fill (a certified window that had a dependent edge) is structurally impossible
  as long as the declarations are true (``harness certify`` checks that they are);
* :class:`PhaseHeuristicDetector` guesses gather phases without a manifest; it can false-fill
  and is kept as a reporting control.

Each certifies a given block of calls (:func:`certify`, :meth:`Detector.certify`) and follows
a run online (:meth:`Detector.tracker`); both paths call the same rule functions and emit the
same reason codes (listed in :mod:`harness.certify.verdict`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from harness.certify.d1 import check_d1
from harness.certify.d3 import looks_like_gather
from harness.certify.detector import Detector, WindowTracker
from harness.certify.phase_heuristic import PhaseHeuristicDetector
from harness.certify.schema_sound import SchemaSoundDetector
from harness.certify.verdict import (
    DEFAULT_MARKER,
    DEFAULT_MAX_WINDOW,
    Admission,
    Certificate,
    Condition,
    Failure,
    Rejection,
    WindowRules,
    WindowView,
)
from harness.errors import ConfigError
from harness.messages import ToolCall
from harness.skills.manifest import Phase
from harness.tools.toolset import Toolset

__all__ = (
    "DEFAULT_MARKER",
    "DEFAULT_MAX_WINDOW",
    "Admission",
    "Certificate",
    "Condition",
    "Detector",
    "Failure",
    "PhaseHeuristicDetector",
    "Rejection",
    "SchemaSoundDetector",
    "WindowRules",
    "WindowTracker",
    "WindowView",
    "certify",
    "check_d1",
    "looks_like_gather",
    "make_detector",
)


def make_detector(
    name: str,
    rules: WindowRules | None = None,
    *,
    max_window: int | None = None,
    marker: str | None = None,
) -> Detector:
    """``"schema_sound"`` (default everywhere) or ``"phase_heuristic"`` (reporting control),
    under ``rules`` (default :class:`WindowRules`); ``max_window`` or ``marker``, if given,
    replace that one rule."""
    rules = rules or WindowRules()
    if max_window is not None:
        rules = replace(rules, max_window=max_window)
    if marker is not None:
        rules = replace(rules, marker=marker)
    if name in ("schema_sound", "schema"):
        return SchemaSoundDetector(max_window=rules.max_window, marker=rules.marker)
    if name in ("phase_heuristic", "heuristic"):
        return PhaseHeuristicDetector(marker=rules.marker, max_window=rules.max_window)
    raise ConfigError(f"Unknown detector {name!r}; use 'schema_sound' or 'phase_heuristic'.")


def certify(
    toolset: Toolset,
    calls: Sequence[ToolCall],
    phase: Phase | None,
    inputs: Mapping[str, Any] | None = None,
    *,
    detector: Detector | None = None,
) -> Certificate | Rejection:
    """Certify ``calls`` as one window of ``phase`` (batch), with the schema-sound detector
    unless another is given."""
    return (detector or SchemaSoundDetector()).certify(toolset, calls, phase, inputs)
