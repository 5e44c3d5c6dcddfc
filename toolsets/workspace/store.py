"""The workspace store: typed documents in memory, seeded, snapshot-able and fingerprinted.

A :class:`Document` has a ``key`` (``"d417"``) and typed fields: ``title`` (unique in a store),
``owner``, ``status`` (one of :data:`STATUSES`), ``priority`` (1-5), ``tags`` (a sorted set),
``next`` (the key of another document, or ``None``: the pointer chain the chain tasks
follow) and ``notes`` (an append-only log). :func:`new_state` builds a store from a seed, the
same bytes for the same seed on every machine (``random.Random`` seeded with a string).

The ``next`` pointers of a seeded store form one path through every document, so from any
document the chain can be followed until the last one (``next = None``).

:meth:`WorkspaceState.snapshot` is plain JSON data; :meth:`WorkspaceState.fingerprint` is the
SHA-256 of its canonical JSON: equal fingerprints mean equal stores.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, get_args

__all__ = (
    "FIELDS",
    "OWNERS",
    "STATUSES",
    "TAGS",
    "Document",
    "Field",
    "Status",
    "WorkspaceState",
    "fingerprint",
    "new_state",
)

Status = Literal["draft", "review", "approved", "archived"]
STATUSES: Final[tuple[Status, ...]] = get_args(Status)

#: The fields a document has besides its key (what ``get_field`` may ask for).
Field = Literal["title", "owner", "status", "priority", "tags", "next", "notes"]
FIELDS: Final[tuple[Field, ...]] = get_args(Field)

OWNERS: Final = ("ana", "bruno", "chen", "dara", "elif", "farid", "greta", "hugo")
TAGS: Final = ("finance", "legal", "ops", "hiring", "design", "security")
_ADJECTIVES: Final = (
    "Annual", "Quarterly", "Regional", "Internal", "Public", "Legacy", "Shared", "Weekly",
    "Vendor", "Field", "Pilot", "Global",
)  # fmt: skip
_NOUNS: Final = (
    "budget", "roadmap", "contract", "report", "policy", "memo", "plan", "survey", "invoice",
    "checklist", "forecast", "handbook",
)  # fmt: skip


@dataclass(frozen=True)
class Document:
    """One document of the store (immutable; the store replaces it on every write)."""

    key: str
    title: str
    owner: str
    status: Status
    priority: int
    tags: tuple[str, ...] = ()
    next: str | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The document as JSON data (what ``read_doc`` returns)."""
        return {
            "key": self.key,
            "title": self.title,
            "owner": self.owner,
            "status": self.status,
            "priority": self.priority,
            "tags": list(self.tags),
            "next": self.next,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Document:
        status = data["status"]
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        return cls(
            key=str(data["key"]),
            title=str(data["title"]),
            owner=str(data["owner"]),
            status=status,
            priority=int(data["priority"]),
            tags=tuple(sorted(str(t) for t in data.get("tags", ()))),
            next=None if data.get("next") is None else str(data["next"]),
            notes=tuple(str(n) for n in data.get("notes", ())),
        )


class WorkspaceState:
    """The store: documents by key. Tools mutate it through :meth:`update`, which replaces a
    document in one step (no ``await`` inside), so concurrent tool calls never interleave
    within a write."""

    def __init__(self, documents: Iterable[Document], *, seed: int | None = None) -> None:
        self.seed = seed
        self._docs: dict[str, Document] = {}
        for doc in documents:
            if doc.key in self._docs:
                raise ValueError(f"two documents have the key {doc.key!r}")
            self._docs[doc.key] = doc

    def __repr__(self) -> str:
        return f"WorkspaceState(seed={self.seed}, documents={len(self._docs)})"

    def __contains__(self, key: object) -> bool:
        return key in self._docs

    def __len__(self) -> int:
        return len(self._docs)

    def __iter__(self) -> Iterator[str]:
        """Every document key, sorted (as :meth:`keys`)."""
        return iter(self.keys())

    def keys(self) -> list[str]:
        """Every document key, sorted."""
        return sorted(self._docs)

    def get(self, key: str) -> Document:
        """The document ``key``; a :class:`LookupError` that lists some keys when it is absent
        (a tool's error result, so the model can correct itself)."""
        try:
            return self._docs[key]
        except KeyError:
            sample = ", ".join(self.keys()[:6])
            raise LookupError(
                f"no document with key {key!r}; keys look like {sample}, ... "
                "(call list_docs for all of them)"
            ) from None

    def update(self, key: str, **changes: Any) -> Document:
        """Replace document ``key`` with ``changes`` applied; returns the new document."""
        doc = replace(self.get(key), **changes)
        self._docs[key] = doc
        return doc

    def chain(self, start: str, reads: int) -> list[str]:
        """The keys a reader visits starting at ``start`` and following ``next``, ``reads``
        documents in all (fewer when the chain ends first)."""
        out = [start]
        while len(out) < reads:
            nxt = self.get(out[-1]).next
            if nxt is None:
                break
            out.append(nxt)
        return out

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Every document as JSON data, by key (sorted)."""
        return {key: self._docs[key].to_dict() for key in self.keys()}

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the snapshot's canonical JSON: equal iff the stores are equal."""
        canonical = json.dumps(self.snapshot(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def copy(self) -> WorkspaceState:
        """An independent copy (documents are immutable, so a shallow copy is enough)."""
        return WorkspaceState(self._docs.values(), seed=self.seed)

    @classmethod
    def from_snapshot(
        cls, snapshot: Mapping[str, Mapping[str, Any]], *, seed: int | None = None
    ) -> WorkspaceState:
        return cls((Document.from_dict(doc) for doc in snapshot.values()), seed=seed)


def fingerprint(state: WorkspaceState) -> str:
    """The state's fingerprint (:meth:`WorkspaceState.fingerprint`), as a function."""
    return state.fingerprint()


def new_state(seed: int = 0, *, size: int = 24) -> WorkspaceState:
    """A seeded store of ``size`` documents (at most 144: titles are unique).

    Same seed and size, same store, byte for byte. The ``next`` pointers form one path through
    all documents in a seeded random order.
    """
    if not 2 <= size <= len(_ADJECTIVES) * len(_NOUNS):
        raise ValueError(f"size must be 2..{len(_ADJECTIVES) * len(_NOUNS)}, got {size}")
    rng = random.Random(f"workspace:{seed}:{size}")
    keys = [f"d{n}" for n in rng.sample(range(100, 1000), size)]
    titles = rng.sample([f"{a} {n}" for a in _ADJECTIVES for n in _NOUNS], size)
    path = rng.sample(keys, size)
    successor = dict(itertools.pairwise(path))
    docs = [
        Document(
            key=key,
            title=title,
            owner=rng.choice(OWNERS),
            status=rng.choice(STATUSES),
            priority=rng.randint(1, 5),
            tags=tuple(sorted(rng.sample(TAGS, rng.randint(0, 2)))),
            next=successor.get(key),
        )
        for key, title in zip(keys, titles, strict=True)
    ]
    return WorkspaceState(docs, seed=seed)
