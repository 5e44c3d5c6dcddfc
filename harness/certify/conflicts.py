"""When two calls' footprints conflict (D1), and an index that finds conflicts fast.

**Overlap.** Targets are hierarchical names. Two targets overlap when they are equal or one
is an *ancestor* of the other: a prefix that ends just before or just after a separator
(:data:`SEPARATORS`: ``/``, ``:`` and ``.``). The three separators are one: a store may nest
by any of them (a config store reads ``db.port`` as ``db/port``), so ``cfg:db.port`` and
``cfg:db/port`` are one target. So ``doc:a`` overlaps ``doc:a/status`` and ``doc:a.txt``
(and ``doc`` and ``doc:`` overlap all three), while ``doc:a`` and ``doc:ab`` do not. Any
other character is part of a name. A side that is unknown (``None``) overlaps every
non-empty side.

**Conflict (D1, one pair).** Calls ``a`` and ``b`` commute unless a write of one overlaps a
write or a read of the other::

    overlap(W(a), W(b))  or  overlap(W(a), R(b))  or  overlap(R(a), W(b))

Two calls that only read never conflict. A call whose reads are unknown conflicts with every
call that writes anything; a call whose writes are unknown conflicts with every call that
reads or writes anything. (A write reports a result, so a write that reads what another call
writes — ``copy(a -> b)`` beside ``set(a)`` — does not commute with it.)

**The index.** :class:`ConflictIndex` holds the footprints of a window's calls. Adding a call
and asking whether a new call conflicts with any member cost O(total length of the new
call's targets): each target is looked up in hash maps of the members' exact targets and of
every ancestor of every member target (no pairwise scan, no trie walk over the members).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Literal

from harness.tools.effects import Footprint

__all__ = (
    "SEPARATORS",
    "Conflict",
    "ConflictIndex",
    "ancestors",
    "conflict",
    "contains",
    "overlaps",
)

#: The characters at which a target name nests: ``doc:a/status`` lies under ``doc:a``,
#: ``doc:`` and ``doc``.
SEPARATORS = frozenset("/:.")

ConflictCode = Literal[
    "D1_write_conflict",
    "D1_read_write_conflict",
    "D1_unknown_write_targets",
    "D1_unknown_read_targets",
]


_SEPARATOR = re.compile("[/:.]")
#: Every separator written as '/': the form targets are compared in.
_ONE_SEPARATOR = str.maketrans(":.", "//")


def _canon(target: str) -> str:
    """``target`` with every separator written ``/`` (``doc:a.b`` -> ``doc/a/b``)."""
    return target.translate(_ONE_SEPARATOR)


def ancestors(target: str) -> tuple[str, ...]:
    """Every strict ancestor of ``target``, written with ``/`` for every separator: its
    prefixes ending just before or just after a separator (``"doc:a/s"`` -> ``"doc"``,
    ``"doc/"``, ``"doc/a"``, ``"doc/a/"``). Targets
    are bounded (:func:`harness.tools.effects.bound_target`: at most 512 characters and 64
    separators), so this costs at most 128 prefixes; short targets are cached."""
    target = _canon(target)
    if len(target) <= _CACHED_LENGTH:
        return _cached_ancestors(target)
    return _ancestors(target)


#: Targets up to this length keep their ancestors in a cache (the common case: short names
#: met again and again); longer ones are computed each time, so the cache stays small.
_CACHED_LENGTH = 128


@functools.lru_cache(maxsize=1 << 14)
def _cached_ancestors(target: str) -> tuple[str, ...]:
    return _ancestors(target)


def _ancestors(target: str) -> tuple[str, ...]:
    out: list[str] = []
    end = len(target) - 1
    for match in _SEPARATOR.finditer(target):
        i = match.start()
        if i and (not out or len(out[-1]) != i):
            out.append(target[:i])
        if i < end:
            out.append(target[: i + 1])
    return tuple(out)


def overlaps(a: str, b: str) -> bool:
    """Whether targets ``a`` and ``b`` name overlapping resources (equal, or one is an
    ancestor of the other)."""
    if a == b:
        return True
    a, b = _canon(a), _canon(b)
    if a == b:
        return True
    short, long = (a, b) if len(a) < len(b) else (b, a)
    if not long.startswith(short) or not short:
        return False
    return short[-1] == "/" or long[len(short)] == "/"


def contains(outer: str, inner: str) -> bool:
    """Whether resource ``outer`` includes ``inner``: equal, or an ancestor of it
    (``doc:a`` contains ``doc:a/status``)."""
    return outer == inner or _canon(outer) in (_canon(inner), *ancestors(inner))


def _sides_overlap(x: frozenset[str] | None, y: frozenset[str] | None) -> bool:
    if x is None:
        return y is None or bool(y)
    if y is None:
        return bool(x)
    return any(overlaps(a, b) for a in x for b in y)


@dataclass(frozen=True)
class Conflict:
    """Why a call may not join: the member it conflicts with, a reason code, a sentence."""

    other: Hashable
    code: ConflictCode
    detail: str


def conflict(a: Footprint, b: Footprint) -> tuple[ConflictCode, str] | None:
    """The D1 rule for one pair (the reference the index must agree with): a reason code
    and the overlapping targets, or ``None`` when the calls commute."""
    if _sides_overlap(a.writes, b.writes):
        if a.writes is None or b.writes is None:
            return "D1_unknown_write_targets", "writes unknown"
        return "D1_write_conflict", _shared(a.writes, b.writes)
    for w, r in ((a.writes, b.reads), (b.writes, a.reads)):
        if _sides_overlap(w, r):
            if w is None:
                return "D1_unknown_write_targets", "writes unknown"
            if r is None:
                return "D1_unknown_read_targets", "reads unknown"
            return "D1_read_write_conflict", _shared(w, r)
    return None


def _shared(x: Iterable[str], y: Iterable[str]) -> str:
    ys = list(y)
    pairs = sorted({a if a == b else f"{a} ~ {b}" for a in x for b in ys if overlaps(a, b)})
    return ", ".join(pairs[:3]) + (" …" if len(pairs) > 3 else "")


class _Side:
    """One side (reads or writes) of the members: each exact target and each ancestor of a
    target, mapped to the first member that has it (members are only ever added)."""

    __slots__ = ("below", "exact", "members", "unknown")

    def __init__(self) -> None:  # (a plain class: a window builds two per index)
        # canonical target (every separator '/') -> (a member, its target as written)
        self.exact: dict[str, tuple[Hashable, str]] = {}
        self.below: dict[str, tuple[Hashable, str]] = {}  # ancestor -> a member under it
        self.unknown: list[Hashable] = []
        self.members: list[Hashable] = []  # every member with a non-empty side

    def add(self, key: Hashable, targets: frozenset[str] | None) -> None:
        if targets is None:
            self.unknown.append(key)
            self.members.append(key)
            return
        if targets:
            self.members.append(key)
        exact, below = self.exact, self.below
        for t in targets:
            exact.setdefault(_canon(t), (key, t))
            for a in ancestors(t):
                below.setdefault(a, (key, t))

    def hit(self, target: str, above: tuple[str, ...]) -> tuple[Hashable, str] | None:
        """A member whose side overlaps ``target`` (whose ancestors are ``above``), and its
        target (``?`` when that member's side is unknown)."""
        if self.unknown:
            return self.unknown[0], "?"
        canon = _canon(target)
        if canon in self.exact:
            return self.exact[canon]
        if canon in self.below:
            return self.below[canon]
        for a in above:
            if a in self.exact:
                return self.exact[a]
        return None


class ConflictIndex:
    """The footprints of a window's members, indexed for :meth:`find` (see the module
    docstring). Members are identified by any hashable key (e.g. the call id)."""

    def __init__(self) -> None:
        self._writes = _Side()
        self._reads = _Side()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, key: Hashable, footprint: Footprint) -> None:
        """Add a member (its footprint must have no ``error``)."""
        self._writes.add(key, footprint.writes)
        self._reads.add(key, footprint.reads)
        self._size += 1

    def find(self, footprint: Footprint) -> Conflict | None:
        """The first member that ``footprint`` conflicts with, or ``None``. Which conflict
        is reported does not depend on set order: targets are tried in sorted order once a
        conflict is known to exist."""
        found = self._find(footprint, ordered=False)
        return None if found is None else self._find(footprint, ordered=True)

    def _find(self, footprint: Footprint, *, ordered: bool) -> Conflict | None:
        w, r = self._writes, self._reads
        if footprint.writes is None:
            if w.members:
                return Conflict(w.members[0], "D1_unknown_write_targets", "writes unknown")
            if r.members:
                return Conflict(r.members[0], "D1_unknown_write_targets", "writes unknown")
        else:
            for target in sorted(footprint.writes) if ordered else footprint.writes:
                above = ancestors(target)
                if (hit := w.hit(target, above)) is not None:
                    code: ConflictCode = (
                        "D1_unknown_write_targets" if hit[1] == "?" else "D1_write_conflict"
                    )
                    return Conflict(hit[0], code, _pair(target, hit[1]))
                if (hit := r.hit(target, above)) is not None:
                    code = "D1_unknown_read_targets" if hit[1] == "?" else "D1_read_write_conflict"
                    return Conflict(hit[0], code, _pair(target, hit[1]))
        if footprint.reads is None:
            if w.members:
                return Conflict(w.members[0], "D1_unknown_read_targets", "reads unknown")
        else:
            for target in sorted(footprint.reads) if ordered else footprint.reads:
                if (hit := w.hit(target, ancestors(target))) is not None:
                    code = "D1_unknown_write_targets" if hit[1] == "?" else "D1_read_write_conflict"
                    return Conflict(hit[0], code, _pair(target, hit[1]))
        return None


def _pair(mine: str, theirs: str) -> str:
    if theirs == "?":
        return f"{mine} (the other side is unknown)"
    return mine if mine == theirs else f"{mine} ~ {theirs}"
