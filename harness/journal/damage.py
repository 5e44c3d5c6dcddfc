"""Damage in a journal: a torn tail is a crash, anything before it is a damaged disk or file.

A killed writer can tear only the entry it was appending: the last one. The next writer (a
resume) ends that line and appends its ``resume`` entry, so a torn entry followed by a
``resume`` entry (or by nothing) is a crash and is skipped, as it always was. Every entry
carries ``seq``, its position in the run's journal (0, 1, 2, ...), so an entry that is gone
is seen too, not only one that cannot be parsed.

Anything else — an unreadable entry followed by more of the same attempt, a gap in ``seq`` —
is **damage before the tail**: entries the run wrote are lost, and among them may be the
intent or the outcome of a write. Resuming as if nothing happened would run such a write
again, so :meth:`harness.journal.Journal.resume` refuses (:func:`find_damage` says where and
what was lost) unless told to go on (``damaged="continue"``, ``harness run
--resume-damaged``). Then every call *behind the damage* (:class:`Horizon`) that has no
readable intent and is not safe to repeat is ``outcome_unknown``, never re-run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ("Damage", "Horizon", "find_damage")

_CALL = re.compile(r"^call_(\d+)$")


@dataclass(frozen=True)
class Damage:
    """Where a journal is damaged before its tail: ``position`` of the first damaged entry (a
    JSONL line number or a SQLite row id), ``unreadable`` entries that cannot be read and
    ``missing`` ones gone by their ``seq``, ``after`` readable entries that follow it."""

    position: int
    unreadable: int
    missing: int
    after: int

    def describe(self) -> str:
        lost = []
        if self.unreadable:
            lost.append(
                f"{self.unreadable} unreadable entr{'y' if self.unreadable == 1 else 'ies'}"
            )
        if self.missing:
            lost.append(f"{self.missing} missing entr{'y' if self.missing == 1 else 'ies'}")
        return (
            f"damaged at line {self.position} ({' and '.join(lost)}, with {self.after} readable "
            "entries after it)"
        )

    def to_json(self) -> dict[str, int]:
        return {
            "position": self.position,
            "unreadable": self.unreadable,
            "missing": self.missing,
            "after": self.after,
        }


def find_damage(scanned: Sequence[tuple[int, Mapping[str, Any] | None]]) -> Damage | None:
    """The damage before the tail of a journal read by ``JournalBackend.scan``, or ``None``
    when every unreadable entry is a torn tail (module docstring)."""
    first: int | None = None
    unreadable = missing = after = 0
    expected: int | None = None
    gap = 0  # unreadable entries since the last readable one: each held one seq
    i = 0
    while i < len(scanned):
        position, entry = scanned[i]
        if entry is None:
            j = i
            while j < len(scanned) and scanned[j][1] is None:
                j += 1
            follower = scanned[j][1] if j < len(scanned) else None
            torn_tail = j == len(scanned) or (
                follower is not None and follower.get("kind") == "resume"
            )
            if not torn_tail:
                first = position if first is None else first
                unreadable += j - i
                gap += j - i
            i = j
            continue
        if first is not None:
            after += 1
        seq = entry.get("seq")
        if isinstance(seq, int):
            if expected is not None and seq > expected + gap:
                first = position if first is None else first
                missing += seq - expected - gap
            expected = seq + 1
        gap = 0
        i += 1
    if first is None:
        return None
    return Damage(first, unreadable, missing, after)


def call_index(call_id: str) -> int | None:
    match = _CALL.match(call_id)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Horizon:
    """How far a damaged journal's run had got: the highest call index and the highest turn
    any readable entry mentions. A call at or below either may have run with its record lost
    in the damage (its turn is journaled before its intent, its intent before it starts)."""

    last_call: int
    last_turn: int

    @classmethod
    def of(cls, entries: Sequence[Mapping[str, Any]]) -> Horizon:
        last_call = last_turn = -1
        for entry in entries:
            ids = [entry.get("call_id")]
            if entry.get("kind") == "window":
                ids.extend(entry.get("call_ids") or [])
            for call_id in ids:
                index = call_index(str(call_id)) if call_id is not None else None
                if index is not None:
                    last_call = max(last_call, index)
            if entry.get("kind") == "turn" or entry.get("kind") == "intent":
                turn = entry.get("turn")
                if isinstance(turn, int):
                    last_turn = max(last_turn, turn)
        return cls(last_call, last_turn)

    def behind(self, call_id: str, turn: int | None) -> bool:
        """Whether ``call_id`` (emitted at ``turn``, when known) may have run unrecorded."""
        index = call_index(call_id)
        if index is not None and index <= self.last_call:
            return True
        return turn is not None and turn <= self.last_turn
