"""D1: every pair of calls in a window commutes on the world.

Each call's *footprint* — the canonical targets it reads and writes
(:meth:`harness.tools.Tool.footprint`, :mod:`harness.tools.effects`) — is computed once, when the
call is admitted. Two calls conflict when a write of one overlaps a write or a read of the
other, targets overlapping hierarchically (``doc:a`` contains ``doc:a/status``); an unknown
side (undeclared, over the expansion bound) is every resource, so a writer that declares no
read targets conflicts with every other write. The rule itself lives in
:mod:`harness.certify.conflicts`; the paper lets "read-only or idempotent" pass on its own, we do not
(``set(x, 1)`` and ``set(x, 2)`` are both idempotent and do not commute).

This module applies the rule to calls: :func:`call_footprint` (a call's footprint, or why it
has none: an unknown tool, arguments that are not a JSON object valid against the tool's
schema, targets that cannot be resolved), :class:`WindowConflicts` (a call against the
window still open, through an index kept in step with it: what the online tracker asks on each
admission) and :func:`check_d1` (a whole block).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from harness.certify.conflicts import Conflict, ConflictIndex
from harness.certify.verdict import Failure, WindowView
from harness.messages import ToolCall
from harness.tools.effects import Footprint
from harness.tools.toolset import Toolset

__all__ = (
    "WindowConflicts",
    "call_footprint",
    "check_d1",
    "conflicts_with",
)


def call_footprint(toolset: Toolset, call: ToolCall) -> Footprint | Failure:
    """The canonical footprint of ``call``, or why it has none (then it is never certified:
    it runs on its own and gets the serial arm's result). Never raises."""
    tool = toolset.get(call.name)
    if tool is None:
        return Failure("D1", "D1_unknown_tool", f"'{call.name}' is not a tool", call.id)
    arguments = call.args.value
    if arguments is None:
        return Failure(
            "D1", "D1_bad_arguments", f"'{call.name}' arguments are not a JSON object", call.id
        )
    footprint = tool.footprint(arguments, call=(call.id, call.arguments))
    if footprint.error is not None:
        code = "D1_bad_arguments" if "schema" in footprint.error else "D1_unresolvable_targets"
        return Failure("D1", code, f"'{call.name}': {footprint.error}", call.id)
    return footprint


def _failure(call: ToolCall, other: ToolCall, found: Conflict) -> Failure:
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


class WindowConflicts:
    """D1 against the open window, through a :class:`~harness.certify.conflicts.ConflictIndex` kept
    in step with it: the calls the window gained since the last question are indexed (each
    footprint computed once per call), so an admission costs the new call's targets, never
    a scan of the window's pairs. A different window rebuilds the index."""

    def __init__(self, toolset: Toolset) -> None:
        self.toolset = toolset
        self._window: WindowView | None = None
        self._indexed = 0
        self._index = ConflictIndex()
        self._members: dict[Hashable, ToolCall] = {}
        self._footprints: dict[tuple[str, str, str], Footprint | Failure] = {}

    def fork(self) -> WindowConflicts:
        """A fresh index over the same toolset, sharing the footprint cache (footprints are
        a pure function of the toolset and the call)."""
        clone = WindowConflicts(self.toolset)
        clone._footprints = self._footprints
        return clone

    def footprint(self, call: ToolCall) -> Footprint | Failure:
        """The footprint of ``call`` (cached: an admitted call is indexed without another
        resolution)."""
        key = (call.id, call.name, call.arguments)
        found = self._footprints.get(key)
        if found is None:
            if len(self._footprints) > 4096:
                self._footprints.clear()
            found = self._footprints[key] = call_footprint(self.toolset, call)
        return found

    def conflict(self, window: WindowView, call: ToolCall, footprint: Footprint) -> Failure | None:
        """The first conflict of ``call`` with a call of ``window``, or ``None``."""
        calls = window.calls
        if window is not self._window or len(calls) < self._indexed:
            self._window, self._indexed = window, 0
            if self._members:  # (a fresh index is kept for the next window)
                self._index, self._members = ConflictIndex(), {}
        for position in range(self._indexed, len(calls)):
            member = calls[position]
            found = self.footprint(member)
            # A member without a footprint cannot be in a window; if one is, it is everything.
            self._index.add(position, found if isinstance(found, Footprint) else _EVERYTHING)
            self._members[position] = member
        self._indexed = len(calls)
        hit = self._index.find(footprint)
        return None if hit is None else _failure(call, self._members[hit.other], hit)


_EVERYTHING = Footprint(None, None, "no footprint")


def conflicts_with(toolset: Toolset, window: Sequence[ToolCall], call: ToolCall) -> list[Failure]:
    """D1 for ``call`` joining ``window``: its first conflict (or its own defect), as a
    list (empty when it commutes with every call of the window)."""
    footprint = call_footprint(toolset, call)
    if isinstance(footprint, Failure):
        return [footprint]
    index = ConflictIndex()
    for position, member in enumerate(window):
        found = call_footprint(toolset, member)
        index.add(position, found if isinstance(found, Footprint) else _EVERYTHING)
    hit = index.find(footprint)
    return [] if hit is None else [_failure(call, window[int(str(hit.other))], hit)]


def check_d1(toolset: Toolset, calls: Sequence[ToolCall]) -> list[Failure]:
    """D1 over a whole block: every pair commutes. Footprints are computed once per call and
    conflicts found through an index; each call that conflicts with an earlier one (or has
    no footprint) is reported once."""
    failures: list[Failure] = []
    index = ConflictIndex()
    for position, call in enumerate(calls):
        footprint = call_footprint(toolset, call)
        if isinstance(footprint, Failure):
            failures.append(footprint)
            continue
        hit = index.find(footprint)
        if hit is not None:
            failures.append(_failure(call, calls[int(str(hit.other))], hit))
        index.add(position, footprint)
    return failures
