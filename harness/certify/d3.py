"""D3: a phase signal marks the window as fan-out.

With a manifest (the schema-sound detector) the signal is the phase annotation: the calls'
phase is ``fan_out``, every call's tool belongs to it, and the phase's slot count (the
slot-closure signal) is not exceeded; a call of an open-ended phase that a later phase could
also own is ambiguous. Without one (the phase heuristic) it is a guess from the tool's effect
and name: :func:`looks_like_gather`.

Batch :func:`~harness.certify.certify` and the online tracker both call
:func:`phase_failures`, so they emit the same reason codes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.certify.verdict import Failure
from harness.messages import ToolCall
from harness.skills.manifest import Phase
from harness.tools.toolset import Toolset

__all__ = (
    "READ_PREFIXES",
    "ambiguity_failure",
    "looks_like_gather",
    "not_gather_failure",
    "phase_failures",
)

#: Tool-name prefixes the phase heuristic reads as "gathers".
READ_PREFIXES = ("get", "read", "list", "search", "fetch", "lookup", "find", "query", "show")


def phase_failures(
    phase: Phase | None,
    calls: Sequence[ToolCall],
    inputs: Mapping[str, Any],
    *,
    count: int | None = None,
) -> list[Failure]:
    """D3 for ``calls`` in ``phase``: the phase exists, is a fan-out, owns every call's tool,
    and ``count`` (the phase's calls so far, these included; default ``len(calls)``) does
    not exceed its slot count. Online the tracker passes one call at a time and stops at the
    first failure; batch reports them all."""
    call_id = calls[0].id if len(calls) == 1 else None
    if phase is None:
        where = f"'{calls[0].name}' is in" if call_id else "these calls are in"
        return [Failure("D3", "D3_no_phase", f"{where} no remaining manifest phase", call_id)]
    failures = []
    if not phase.is_fan_out:
        failures.append(
            Failure("D3", "D3_chain_phase", f"phase {phase.name!r} is a chain", call_id)
        )
    outside = [c.name for c in calls if c.name not in phase.tools]
    if outside:
        failures.append(
            Failure(
                "D3",
                "D3_outside_phase",
                f"{outside} are not tools of phase {phase.name!r}",
                call_id,
            )
        )
    slots = phase.slot_count(inputs)
    n = len(calls) if count is None else count
    if phase.is_fan_out and slots is not None and n > slots:
        failures.append(
            Failure(
                "D3",
                "D3_over_slots",
                f"phase {phase.name!r} has {slots} slots and {n} calls",
                call_id,
            )
        )
    return failures


def ambiguity_failure(call: ToolCall, phase: Phase, rivals: Sequence[Phase]) -> Failure:
    """A call of an open-ended phase (no slot count) that later phase(s) also list."""
    return Failure(
        "D3",
        "D3_ambiguous_phase",
        f"'{call.name}' may belong to phase {phase.name!r} or to later phase(s) "
        f"{[p.name for p in rivals]}; {phase.name!r} declares no slot count, so its end "
        "is unknown",
        call.id,
    )


def looks_like_gather(toolset: Toolset, call: ToolCall) -> bool:
    """The phase heuristic's D3 guess: a read-only tool, or a read-like name."""
    if call.name not in toolset or call.args.value is None:
        return False
    return toolset[call.name].effect.read_only or call.name.lower().startswith(READ_PREFIXES)


def not_gather_failure(call: ToolCall) -> Failure:
    return Failure(
        "D3", "D3_not_gather", f"'{call.name}' does not look like a gather call", call.id
    )
