"""D1: every pair of calls in a window commutes on the world.

Two read-only calls always do; a read and a write only when the read declares read targets
disjoint from the write's targets; two writes only when both declare write targets and they
are disjoint. (The paper lets "read-only or idempotent" pass on its own; we do not:
``set(x, 1)`` and ``set(x, 2)`` are both idempotent and do not commute, and even the same
idempotent write twice leaves the same state but not the same *results* when the tool reports
what it replaced.)

This module is the only place the pair rule lives. Its interface is narrow on purpose:
:func:`call_defect` (one call the rule cannot even read), :func:`pair_conflict` (one pair),
:func:`conflicts_with` (a call against the calls already in a window: what the online tracker
asks on each admission) and :func:`check_d1` (a whole window, batch).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from harness.certify.verdict import Failure
from harness.engines.base import ToolCall
from harness.tools import Toolset

__all__ = ("call_defect", "check_d1", "conflicts_with", "pair_conflict")


def call_defect(toolset: Toolset, call: ToolCall) -> Failure | None:
    """Why D1 cannot be decided for ``call`` at all (an unknown tool, arguments that are not
    a JSON object), or ``None``."""
    if call.name not in toolset:
        return Failure("D1", "D1_unknown_tool", f"'{call.name}' is not a tool", call.id)
    if call.args.value is None:
        return Failure(
            "D1", "D1_bad_arguments", f"'{call.name}' arguments are not a JSON object", call.id
        )
    return None


def pair_conflict(toolset: Toolset, a: ToolCall, b: ToolCall) -> Failure | None:
    """Why calls ``a`` and ``b`` may not commute, or ``None`` when they do (D1, one pair)."""
    for call in (a, b):
        if call.name not in toolset:
            return call_defect(toolset, call)
    args_a, args_b = a.args.value, b.args.value
    if args_a is None or args_b is None:
        return call_defect(toolset, a if args_a is None else b)
    ea, eb = toolset[a.name].effect, toolset[b.name].effect
    if ea.read_only and eb.read_only:
        return None
    wa, wb = ea.targets(args_a), eb.targets(args_b)
    if wa is None or wb is None:
        who = a if wa is None else b
        return Failure(
            "D1",
            "D1_unknown_write_targets",
            f"'{who.name}' writes but declares no write targets (unannotated tools are the worst case)",
            who.id,
        )
    if wa & wb:
        return Failure(
            "D1",
            "D1_write_conflict",
            f"'{a.name}' and '{b.name}' both write {sorted(wa & wb)}",
            b.id,
        )
    for reader, rargs, writes, r in ((ea, args_a, wb, a), (eb, args_b, wa, b)):
        if not writes:
            continue
        reads = reader.reads(rargs)
        if reads is None:
            return Failure(
                "D1",
                "D1_unknown_read_targets",
                f"'{r.name}' shares a window with a write but declares no read targets",
                r.id,
            )
        if reads & writes:
            return Failure(
                "D1",
                "D1_read_write_conflict",
                f"'{r.name}' reads {sorted(reads & writes)}, which the window writes",
                r.id,
            )
    return None


def conflicts_with(toolset: Toolset, window: Sequence[ToolCall], call: ToolCall) -> list[Failure]:
    """D1 for ``call`` joining ``window`` (whose calls already commute pairwise): every
    window call it may not commute with, in window order."""
    return [f for other in window if (f := pair_conflict(toolset, other, call)) is not None]


def check_d1(toolset: Toolset, calls: Sequence[ToolCall]) -> list[Failure]:
    """D1 over a whole window: every pair commutes."""
    failures = []
    for a, b in itertools.combinations(calls, 2):
        failure = pair_conflict(toolset, a, b)
        if failure is not None:
            failures.append(failure)
    return failures
