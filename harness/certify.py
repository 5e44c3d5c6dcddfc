"""Certification of fan-out windows: the only place the independence rules live.

A *window* is a block of consecutive calls of one fan-out phase. It is certified when

**D1** every pair of calls commutes on the world: two read-only calls always do; a read and a
    write only when the read declares read targets disjoint from the write's targets; two
    writes only when both declare write targets and they are disjoint. (The paper lets
    "read-only or idempotent" pass on its own; we do not: ``set(x, 1)`` and ``set(x, 2)`` are
    both idempotent and do not commute, and even the same idempotent write twice leaves the
    same state but not the same *results* when the tool reports what it replaced.)
**D2** no argument of any call depends on a result of another call of the window: at the
    schema level, the manifest's argument template for the call's tool has no result
    placeholder that points into the window's own phase;
**D3** a phase signal marks the window as fan-out: the manifest phase is ``fan_out`` (and its
    ``slots`` count is the slot-closure signal).

Two detectors:

* :class:`SchemaSoundDetector` decides D1-D3 from declared effects and the skill manifest only,
  so a false fill (a certified window that had a dependent edge) is structurally impossible
  as long as the declarations are true (``harness certify`` checks that they are).
* :class:`PhaseHeuristicDetector` has no manifest: it guesses that a run of consecutive
  read-like calls (read-only effect, or a ``get_``/``read_``/``list_``/... name) is a gather
  phase, and only catches a dependency when a call's arguments quote the withheld-result
  marker. It can false-fill; it is kept as a reporting control.

Online use (the loop): ``detector.tracker(skill, inputs)`` returns a :class:`WindowTracker`
whose :meth:`~WindowTracker.admit` decides, for each emitted call, whether it *joins* the open
window (its result is withheld), runs *serial*ly (after the open window closes, in emitted
order), or is *discard*ed (it was generated without a withheld result it needed: it is
regenerated after the absorb turn, and that repair is counted). Windows close on the
slot-closure signal, a phase change, a call that fails certification, a final answer, or the
size cap. Batch use (P+V, tests, the certification kit): :meth:`Detector.certify`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from harness.conflicts import Conflict, ConflictIndex
from harness.effects import Footprint
from harness.engines.base import ToolCall
from harness.manifest import Phase, Skill
from harness.provenance import (
    InputValues,
    TurnView,
    Violation,
    check_provenance,
    quotes_withheld,
)
from harness.tools import Toolset

__all__ = (
    "Admission",
    "Certificate",
    "Condition",
    "Detector",
    "Failure",
    "PhaseHeuristicDetector",
    "Rejection",
    "SchemaSoundDetector",
    "WindowTracker",
    "check_d1",
    "make_detector",
)

Condition = Literal["D1", "D2", "D3"]
DEFAULT_MARKER = "[withheld]"  # short and constant: it is re-prefilled on every window turn
_READ_PREFIXES = ("get", "read", "list", "search", "fetch", "lookup", "find", "query", "show")


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


def _args(call: ToolCall) -> Mapping[str, Any] | None:
    try:
        parsed = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def call_footprint(toolset: Toolset, call: ToolCall) -> Footprint | Failure:
    """The canonical footprint of ``call`` (computed once per call), or why it has none: an
    unknown tool, arguments that are not a JSON object valid against the tool's schema, or
    targets that cannot be resolved. Such a call is never certified; it runs on its own and
    gets the serial arm's result. Never raises."""
    if call.name not in toolset:
        return Failure("D1", "D1_unknown_tool", f"'{call.name}' is not a tool", call.id)
    arguments = _args(call)
    if arguments is None:
        return Failure(
            "D1", "D1_bad_arguments", f"'{call.name}' arguments are not a JSON object", call.id
        )
    footprint = toolset[call.name].footprint(arguments)
    if footprint.error is not None:
        code = "D1_bad_arguments" if "schema" in footprint.error else "D1_unresolvable_targets"
        return Failure("D1", code, f"'{call.name}': {footprint.error}", call.id)
    return footprint


def _conflict_failure(call: ToolCall, other: ToolCall, found: Conflict) -> Failure:
    what = {
        "D1_write_conflict": f"'{other.name}' and '{call.name}' both write {found.detail}",
        "D1_read_write_conflict": (
            f"'{call.name}' and '{other.name}': one reads what the other writes ({found.detail})"
        ),
        "D1_unknown_write_targets": (
            f"'{call.name}' or '{other.name}' writes unknown targets (declare write_targets; "
            "unannotated tools are the worst case)"
        ),
        "D1_unknown_read_targets": (
            f"'{call.name}' or '{other.name}' shares a window with a write but declares no "
            "read targets (reads unknown: declare read_targets, () for a blind write)"
        ),
    }[found.code]
    return Failure("D1", found.code, what, call.id)


def _violation_failure(call: ToolCall, violation: Violation) -> Failure:
    return Failure("D2", violation.code, f"'{call.name}': {violation.message}", call.id)


def check_d1(toolset: Toolset, calls: Sequence[ToolCall]) -> list[Failure]:
    """D1 over a whole window: every pair commutes (:mod:`harness.conflicts`). Footprints
    are computed once per call and conflicts found through an index, not by pairs."""
    failures: list[Failure] = []
    index = ConflictIndex()
    by_id: dict[int, ToolCall] = {}
    for position, call in enumerate(calls):
        footprint = call_footprint(toolset, call)
        if isinstance(footprint, Failure):
            failures.append(footprint)
            continue
        found = index.find(footprint)
        if found is not None:
            failures.append(_conflict_failure(call, by_id[int(str(found.other))], found))
        index.add(position, footprint)
        by_id[position] = call
    return failures


@dataclass(frozen=True)
class Admission:
    """The tracker's decision for one emitted call.

    ``closes``: the window this call closes *before* it is handled (run it and reveal its
    results first). ``action``: ``join`` (withhold, part of the now-open window), ``serial``
    (run it on its own, after ``closes``), ``discard`` (it was generated without a withheld
    result it needed: drop it; the absorb turn regenerates it). ``completes``: the window
    this call completes (slot closure or size cap): close it right after the call joins.
    """

    action: Literal["join", "serial", "discard"]
    phase: str | None
    reason: str
    closes: Certificate | None = None
    completes: Certificate | None = None
    failures: tuple[Failure, ...] = ()


class WindowTracker(Protocol):
    """Per-run state of a detector: the phase position and the open window."""

    def admit(self, call: ToolCall, view: TurnView | None = None) -> Admission: ...

    def close(self, closed_by: str) -> Certificate | None: ...

    @property
    def open_calls(self) -> tuple[ToolCall, ...]: ...

    def phase_of(self, calls: Sequence[ToolCall]) -> Phase | None: ...


class Detector(Protocol):
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


@dataclass
class _Window:
    """The open window: its calls, and their footprints indexed for D1 (each computed once,
    when its call was admitted)."""

    phase: str | None
    calls: list[ToolCall] = field(default_factory=list)
    index: ConflictIndex = field(default_factory=ConflictIndex)
    by_id: dict[str, ToolCall] = field(default_factory=dict)

    def conflict(self, call: ToolCall, footprint: Footprint) -> Failure | None:
        """D1 between ``call`` and every call of the window, through the index."""
        found = self.index.find(footprint)
        if found is None:
            return None
        return _conflict_failure(call, self.by_id[str(found.other)], found)


class _TrackerBase:
    """What both detectors share: the open window and closing it into a certificate."""

    detector_name = ""

    def __init__(self, toolset: Toolset, max_window: int) -> None:
        self.toolset = toolset
        self.max_window = max_window
        self.window: _Window | None = None

    @property
    def open_calls(self) -> tuple[ToolCall, ...]:
        return tuple(self.window.calls) if self.window else ()

    def _evidence(self, window: _Window) -> tuple[str, ...]:
        return ()

    def close(self, closed_by: str) -> Certificate | None:
        window, self.window = self.window, None
        if window is None or not window.calls:
            return None
        return Certificate(
            self.detector_name,
            window.phase,
            tuple(c.id for c in window.calls),
            self._evidence(window),
            closed_by,
        )

    def _join(
        self,
        call: ToolCall,
        phase: str | None,
        reason: str,
        slots_done: bool,
        footprint: Footprint,
    ) -> Admission:
        """Add ``call`` to the open window (opening one if needed); close it right away when
        this call fills the phase's slot count or the size cap."""
        if self.window is None:
            self.window = _Window(phase)
        self.window.calls.append(call)
        self.window.index.add(call.id, footprint)
        self.window.by_id[call.id] = call
        completes = None
        if slots_done:
            completes = self.close("slot_closure")
        elif len(self.window.calls) >= self.max_window:
            completes = self.close("size_cap")
        return Admission("join", phase, reason, completes=completes)


class _SchemaSoundTracker(_TrackerBase):
    detector_name = "schema_sound"

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
        self.phase_index = 0
        self.phase_calls = 0
        self._slot_counts: dict[str, int | None] = {}

    def _slots(self, phase: Phase) -> int | None:
        """The phase's slot count for this task (computed once per phase)."""
        if phase.name not in self._slot_counts:
            self._slot_counts[phase.name] = phase.slot_count(self.inputs)
        return self._slot_counts[phase.name]

    def _locate(self, tool: str) -> int | None:
        """The phase this call belongs to: the current one while it has room, else the next
        phase (forward only) that lists the tool."""
        if self.skill is None:
            return None
        phases = self.skill.phases
        current = phases[self.phase_index]
        slots = self._slots(current)
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

    def _evidence(self, window: _Window) -> tuple[str, ...]:
        return (
            f"D1: {len(window.calls)} calls pairwise commute (effects and targets)",
            f"D2: no argument of phase {window.phase!r} is a result placeholder into the phase",
            f"D3: manifest marks phase {window.phase!r} fan_out",
        )

    def _needs_withheld(self, call: ToolCall, phase: Phase | None) -> list[str]:
        """Arguments of ``call`` that the manifest sources from a result of the open window."""
        if self.window is None or phase is None or self.window.phase is None:
            return []
        return sorted(
            arg
            for arg, src in phase.sources(call.name).items()
            if src.is_result_placeholder and src.ref == self.window.phase
        )

    def _rivals(self, tool: str, index: int | None) -> list[Phase]:
        """Later phases that may own a call attributed to an open-ended phase: when the
        attributed phase declares no slot count, nothing says where it ends, so a call of a
        tool that a later phase also lists may belong to either."""
        if self.skill is None or index is None:
            return []
        phase = self.skill.phases[index]
        if self._slots(phase) is not None:
            return []
        return [p for p in self.skill.phases[index + 1 :] if tool in p.tools]

    def admit(self, call: ToolCall, view: TurnView | None = None) -> Admission:
        index = self._locate(call.name)
        phase = None if index is None or self.skill is None else self.skill.phases[index]
        rivals = self._rivals(call.name, index)
        if index is not None and index != self.phase_index:
            self.phase_index, self.phase_calls = index, 0
        pname = phase.name if phase else None
        # D2 against the open window: generated while results it needs were withheld
        # (under any phase the call may belong to).
        dependent = sorted({a for p in (phase, *rivals) for a in self._needs_withheld(call, p)})
        if dependent:
            closes = self.close("D2_dependent_call")
            failure = Failure(
                "D2",
                "D2_result_placeholder",
                f"'{call.name}' argument(s) {dependent} come from results of phase "
                f"{closes.phase if closes else pname!r}, withheld when it was generated",
                call.id,
            )
            return Admission("discard", pname, "D2", closes=closes, failures=(failure,))
        violations = self._provenance(call, (phase, *rivals), view)
        if violations and self.window is not None:
            # It may have taken the value from a result withheld from its turn: regenerate it
            # after the absorb turn, when every result is in view.
            closes = self.close("D2_dependent_call")
            refused = tuple(_violation_failure(call, v) for v in violations)
            return Admission("discard", pname, "D2", closes=closes, failures=refused)
        if index is not None:
            self.phase_calls += 1
        footprint = call_footprint(self.toolset, call)
        failures = self._certify_one(call, phase, footprint)
        if not failures and rivals:
            failures = [
                Failure(
                    "D3",
                    "D3_ambiguous_phase",
                    f"'{call.name}' may belong to phase {pname!r} or to later phase(s) "
                    f"{[p.name for p in rivals]}; {pname!r} declares no slot count, so its end "
                    "is unknown",
                    call.id,
                )
            ]
        failures.extend(_violation_failure(call, v) for v in violations)
        if failures:
            reason = failures[0].code
            closes = self.close(reason if self.window else "")
            return Admission("serial", pname, reason, closes=closes, failures=tuple(failures))
        assert phase is not None
        closes = None
        if self.window is not None and self.window.phase != pname:
            closes = self.close("phase_change")
        assert isinstance(footprint, Footprint)
        if self.window is not None:
            conflict = self.window.conflict(call, footprint)
            if conflict is not None:
                closes = self.close("D1_conflict")
                return Admission("serial", pname, "D1", closes=closes, failures=(conflict,))
        slots = self._slots(phase)
        done = slots is not None and self.phase_calls >= slots
        joined = self._join(call, pname, "certified", done, footprint)
        return Admission("join", pname, joined.reason, closes=closes, completes=joined.completes)

    def _provenance(
        self, call: ToolCall, phases: Sequence[Phase | None], view: TurnView | None
    ) -> list[Violation]:
        """Arguments not from their declared sources, under any phase the call may belong
        to, and arguments that quote a withheld result (:mod:`harness.provenance`)."""
        arguments = _args(call)
        if arguments is None:
            return []  # not a JSON object: D1 says so
        effect = self.toolset[call.name].effect if call.name in self.toolset else None
        sources = {a: s for p in phases if p is not None for a, s in p.sources(call.name).items()}
        return check_provenance(
            call.name,
            arguments,
            sources,
            self.input_values,
            None if view is None else view.visible,
            marker=self.marker,
            withheld=() if view is None else view.withheld,
            effect=effect,
        )

    def _certify_one(
        self, call: ToolCall, phase: Phase | None, footprint: Footprint | Failure
    ) -> list[Failure]:
        """D3 and schema-level D2 for one call, and whether it has a footprint at all (a
        known tool, arguments valid against its schema, resolvable targets): every failure."""
        failures: list[Failure] = []
        if phase is None:
            failures.append(
                Failure(
                    "D3", "D3_no_phase", f"'{call.name}' is in no remaining manifest phase", call.id
                )
            )
        elif not phase.is_fan_out:
            failures.append(
                Failure("D3", "D3_chain_phase", f"phase {phase.name!r} is a chain", call.id)
            )
        elif (slots := self._slots(phase)) is not None and self.phase_calls > slots:
            failures.append(
                Failure(
                    "D3",
                    "D3_over_slots",
                    f"phase {phase.name!r} already has its {slots} calls",
                    call.id,
                )
            )
        placeholders = phase.in_window_placeholders(call.name) if phase is not None else []
        if placeholders and phase is not None:
            failures.append(
                Failure(
                    "D2",
                    "D2_result_placeholder",
                    f"'{call.name}' argument(s) {placeholders} are results of phase "
                    f"{phase.name!r} itself",
                    call.id,
                )
            )
        if isinstance(footprint, Failure):
            failures.append(footprint)
        return failures


class _HeuristicTracker(_TrackerBase):
    detector_name = "phase_heuristic"

    def __init__(self, toolset: Toolset, marker: str, max_window: int) -> None:
        super().__init__(toolset, max_window)
        self.marker = marker

    def phase_of(self, calls: Sequence[ToolCall]) -> Phase | None:
        return None

    def _evidence(self, window: _Window) -> tuple[str, ...]:
        return (
            f"D1: {len(window.calls)} calls pairwise commute (effects and targets)",
            "D2: assumed (no manifest); no argument quotes the withheld marker",
            "D3: guessed gather phase from tool names/effects",
        )

    def admit(self, call: ToolCall, view: TurnView | None = None) -> Admission:
        arguments = _args(call)
        view = view or TurnView()
        quoted = quotes_withheld(arguments, self.marker, view.withheld) if arguments else []
        if arguments is None and self.marker in call.arguments:
            quoted = [Violation("(arguments)", "marker", f"the arguments quote {self.marker!r}")]
        if quoted:
            failures = tuple(_violation_failure(call, v) for v in quoted)
            if self.window is not None:
                closes = self.close("D2_dependent_call")
                return Admission("discard", None, "D2", closes=closes, failures=failures)
            return Admission("serial", None, "D2", failures=failures)
        if not looks_like_gather(self.toolset, call):
            closes = self.close("phase_change")
            failure = Failure(
                "D3", "D3_not_gather", f"'{call.name}' does not look like a gather call", call.id
            )
            return Admission("serial", None, "D3", closes=closes, failures=(failure,))
        footprint = call_footprint(self.toolset, call)
        if isinstance(footprint, Failure):
            closes = self.close("D1_conflict")
            return Admission("serial", None, "D1", closes=closes, failures=(footprint,))
        if self.window is not None:
            conflict = self.window.conflict(call, footprint)
            if conflict is not None:
                closes = self.close("D1_conflict")
                return Admission("serial", None, "D1", closes=closes, failures=(conflict,))
        return self._join(call, "gather", "guessed", False, footprint)


def looks_like_gather(toolset: Toolset, call: ToolCall) -> bool:
    """The phase heuristic's D3 guess: a read-only tool, or a read-like name."""
    if call.name not in toolset or _args(call) is None:
        return False
    tool = toolset[call.name]
    lowered = call.name.lower()
    return tool.effect.read_only or lowered.startswith(_READ_PREFIXES)


@dataclass(frozen=True)
class SchemaSoundDetector:
    """D1-D3 from declared effects and the skill manifest: no false fill is possible."""

    max_window: int = 16
    name: str = "schema_sound"
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
        """Batch: the calls as one window of ``phase``, decided by the online tracker itself
        (a fresh one at the start of that phase), so slot counts, provenance, D1, D2 and D3
        are the same rules with the same reason codes."""
        skill = None if phase is None else Skill("batch", (phase,))
        tracker = _SchemaSoundTracker(toolset, skill, inputs or {}, max(len(calls), 1), self.marker)
        return replay(tracker, calls, view, self.name)


def replay(
    tracker: WindowTracker, calls: Sequence[ToolCall], view: TurnView | None, detector: str
) -> Certificate | Rejection:
    """Admit ``calls`` one by one into ``tracker`` (all generated on one turn: ``view``);
    they certify as one window iff every call joins and no window closes before the last
    call. Every call's failures are reported."""
    failures: list[Failure] = []
    certificate: Certificate | None = None
    for position, call in enumerate(calls):
        admission = tracker.admit(call, view)
        if admission.action != "join":
            failures.extend(admission.failures)
            if not admission.failures:
                failures.append(Failure("D3", admission.reason, admission.reason, call.id))
        elif admission.closes is not None:
            failures.append(
                Failure("D3", "D3_outside_phase", f"'{call.name}' starts another window", call.id)
            )
        if admission.completes is not None:
            if position != len(calls) - 1:
                failures.append(
                    Failure(
                        "D3",
                        "D3_over_slots",
                        f"the window closed ({admission.completes.closed_by}) before "
                        f"'{calls[position + 1].name}'",
                        calls[position + 1].id,
                    )
                )
            certificate = admission.completes
    if certificate is None:
        certificate = tracker.close("batch")
    if failures or certificate is None or certificate.n != len(calls):
        return Rejection(detector, tuple(failures))
    return replace(certificate, closed_by="batch")


@dataclass(frozen=True)
class PhaseHeuristicDetector:
    """Guesses gather phases from names/effects, without a manifest; can false-fill."""

    marker: str = DEFAULT_MARKER
    max_window: int = 16
    name: str = "phase_heuristic"

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
        """Batch: the calls as one window, decided by the online tracker itself."""
        tracker = _HeuristicTracker(toolset, self.marker, max(len(calls), 1))
        return replay(tracker, calls, view, self.name)


def make_detector(name: str, *, max_window: int = 16, marker: str = DEFAULT_MARKER) -> Detector:
    """``"schema_sound"`` (default everywhere) or ``"phase_heuristic"`` (reporting control)."""
    if name in ("schema_sound", "schema"):
        return SchemaSoundDetector(max_window=max_window, marker=marker)
    if name in ("phase_heuristic", "heuristic"):
        return PhaseHeuristicDetector(marker=marker, max_window=max_window)
    from harness.errors import ConfigError

    raise ConfigError(f"Unknown detector {name!r}; use 'schema_sound' or 'phase_heuristic'.")
