"""What certification says: a failed condition, a certificate, a rejection, an admission.

These are the certifier's outputs, shared by the rules (:mod:`~harness.certify.d1`,
:mod:`~harness.certify.d2`, :mod:`~harness.certify.d3`), both detectors, batch
:func:`~harness.certify.certify` and the online tracker, so both paths speak the same reason
codes. Codes, by condition:

``D1``  ``D1_unknown_tool``, ``D1_bad_arguments``, ``D1_unresolvable_targets``,
        ``D1_unknown_write_targets``, ``D1_write_conflict``, ``D1_unknown_read_targets``,
        ``D1_read_write_conflict``
``D2``  ``D2_result_placeholder`` (the manifest sources an argument from a result inside the
        window), ``D2_provenance`` (an argument is not from its declared source),
        ``D2_quotes_marker`` (an argument quotes the marker or a withheld result's text)
``D3``  ``D3_no_phase``, ``D3_chain_phase``, ``D3_outside_phase``, ``D3_over_slots``,
        ``D3_ambiguous_phase``, ``D3_not_gather`` (the phase heuristic's guess said no)

:class:`WindowRules` owns the two facts every part that opens, fills or shows a window must
agree on (the marker and the window's size limit) and their defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from harness.messages import ToolCall

__all__ = (
    "DEFAULT_MARKER",
    "DEFAULT_MAX_WINDOW",
    "Admission",
    "AdmissionAction",
    "Certificate",
    "Condition",
    "Failure",
    "Rejection",
    "WindowRules",
    "WindowView",
)

Condition = Literal["D1", "D2", "D3"]
AdmissionAction = Literal["join", "serial", "discard"]

#: What stands in for a withheld result in the context: short and constant, because it is
#: re-prefilled on every turn of the window.
DEFAULT_MARKER = "[withheld]"
#: The most calls one window holds (a phase's slot count closes it sooner).
DEFAULT_MAX_WINDOW = 16


@dataclass(frozen=True)
class WindowRules:
    """What the detector, the loop, the validator and certified speculation agree on about a
    window: ``marker``, what stands in for a withheld result in the context (D2 refuses a
    call that quotes it), and ``max_window``, the most calls one window holds. Built once per
    run (:attr:`harness.loop.LoopConfig.window_rules`) and passed down."""

    marker: str = DEFAULT_MARKER
    max_window: int = DEFAULT_MAX_WINDOW


@dataclass(frozen=True)
class Failure:
    """One failed condition: which (D1/D2/D3), a stable reason code, and a sentence."""

    condition: Condition
    code: str
    message: str
    call_id: str | None = None


@dataclass(frozen=True)
class Certificate:
    """A certified window: the calls, the phase and the evidence for each condition."""

    detector: str
    phase: str | None
    call_ids: tuple[str, ...]
    evidence: tuple[str, ...]
    closed_by: str = ""

    @property
    def n(self) -> int:
        return len(self.call_ids)


@dataclass(frozen=True)
class Rejection:
    """A window that did not certify, with every failed condition."""

    detector: str
    failures: tuple[Failure, ...]

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(f.code for f in self.failures)

    @property
    def conditions(self) -> frozenset[Condition]:
        return frozenset(f.condition for f in self.failures)


@dataclass(frozen=True)
class Admission:
    """The tracker's decision for one emitted call.

    ``closes``: the open window this call closes *before* it is handled (run it and reveal its
    results first). ``action``: ``join`` (withhold, part of the now-open window), ``serial``
    (run it on its own, after ``closes``), ``discard`` (it was generated without a withheld
    result it needed: drop it; the absorb turn regenerates it). ``completes``: the window
    this call completes (slot closure or size cap): close it right after the call joins.
    """

    action: AdmissionAction
    phase: str | None
    reason: str
    closes: Certificate | None = None
    completes: Certificate | None = None
    failures: tuple[Failure, ...] = ()


class WindowView(Protocol):
    """What the certifier reads of the open window (the loop's
    :class:`~harness.certify.window.Window` is one): its phase and its calls in emitted order."""

    @property
    def phase(self) -> str | None: ...

    @property
    def calls(self) -> Sequence[ToolCall]: ...
