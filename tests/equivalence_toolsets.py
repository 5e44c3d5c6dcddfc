"""Toolsets for the kit's equivalence claims (issue 25): one honest, and one lying in each
class of equivalent spellings. None supplies example values: the kit must find every lie on
its own, from the argument types.

=====================================  ==========================================================
toolset                                what it shows
=====================================  ==========================================================
``hierarchical_notebook``              honest: ``set_status`` declares ``doc:{key}`` while the
                                       store reports ``doc:{key}/status``; ``add_todo(text)``
                                       declares the collection ``todos`` while the store mints
                                       ``todos:17`` — the kit must pass both
``instants_keyed_by_utc``              a calendar keys a ``date-time`` string by its UTC instant;
                                       ``book`` declares ``slot:{at}`` on the raw string
``paths_normalised``                   a file store normalises paths (``./a``, ``a/../b``,
                                       ``//a``, ``a/``); ``write`` declares ``file:{path}`` raw
``names_case_and_nfkc_folded``         a tag store keys names by NFKC + casefold;
                                       ``tag`` declares ``tag:{name}`` raw
``nested_model_folded``                a contact store keys a nested model's ``email`` by its
                                       case fold; ``save`` declares ``contact:{person}`` raw
``writers_disjoint_by_declaration``    ``set_owner`` and ``close`` declare ``owner:{doc}`` and
                                       ``status:{doc}`` but ``close`` clears the owner: only a
                                       window with the same ``doc`` twice shows it
``identity_that_splits_a_record``      ``book`` declares ``identity={"at": ...}`` that keeps the
                                       offset, while the store keys by UTC instant
``identity_not_idempotent``            an identity that is not a fixed point (``x -> x + "/"``)
=====================================  ==========================================================
"""

from __future__ import annotations

import datetime
import hashlib
import json
import posixpath
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import anyio.lowlevel
from pydantic import BaseModel, Field

from harness import Toolset, tool
from harness.certkit import CertifiableToolset

#: A string the model fills with an ISO 8601 date-time (what pydantic emits for ``datetime``).
DateTimeText = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


#: A document id: ``D`` and six digits.
DocId = Annotated[str, Field(pattern=r"^D[0-9]{6}$")]


@dataclass
class Records:
    """A store of named records (``kind:name`` -> value) and a counter that mints ids."""

    records: dict[str, Any] = field(default_factory=dict)
    counter: int = 0


def _new_state(seed: int) -> Records:
    return Records()


def _fingerprint(state: Records) -> str:
    blob = json.dumps([state.records, state.counter], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _resources(state: Records) -> dict[str, str]:
    return {name: json.dumps(value, sort_keys=True) for name, value in state.records.items()}


def _certifiable(make: Any, name: str) -> CertifiableToolset:
    return CertifiableToolset(
        new_state=_new_state,
        make_toolset=make,
        fingerprint=_fingerprint,
        resources=_resources,
        name=name,
    )


# ------------------------------------------------------------------------------ honest


def hierarchical_notebook() -> CertifiableToolset:
    """Honest, with coarse targets: the store reports finer resources inside them."""

    def make(state: Records) -> Toolset:
        @tool(idempotent=True, write_targets="doc:{key}", read_targets=())
        async def set_status(key: str, status: Literal["draft", "done"]) -> str:
            """Set a document's status (the store reports doc:KEY/status)."""
            await anyio.lowlevel.checkpoint()
            state.records[f"doc:{key}/status"] = status
            return status

        @tool(read_only=True, read_targets="doc:{key}")
        async def read_status(key: str) -> str:
            """Read a document's status."""
            await anyio.lowlevel.checkpoint()
            return str(state.records.get(f"doc:{key}/status", "none"))

        @tool(write_targets="todos", read_targets="todos")
        async def add_todo(text: str) -> int:
            """Add a todo; the store mints its id (todos:N)."""
            await anyio.lowlevel.checkpoint()
            state.counter += 1
            state.records[f"todos:{state.counter}"] = text
            return state.counter

        return Toolset([set_status, read_status, add_todo], name="notebook")

    return _certifiable(make, "hierarchical notebook")


# ----------------------------------------------------------- lying: one class each


def _utc_key(text: str) -> str:
    """The calendar's key: the UTC instant of an aware date-time (naive: its wall clock)."""
    moment = datetime.datetime.fromisoformat(text)
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
    return moment.isoformat()


def _calendar(identity: Callable[[Any], Any] | None = None) -> Any:
    def make(state: Records) -> Toolset:
        @tool(
            idempotent=True,
            write_targets="slot:{at}",
            read_targets=(),
            identity=None if identity is None else {"at": identity},
        )
        async def book(at: DateTimeText, who: Literal["ann", "bob"]) -> str:
            """Book a slot at a date-time (the calendar keys it by its UTC instant)."""
            await anyio.lowlevel.checkpoint()
            state.records[f"slot:{_utc_key(at)}"] = who
            return f"booked {who}"

        return Toolset([book])

    return make


def instants_keyed_by_utc() -> CertifiableToolset:
    """The lie: ``slot:{at}`` names the raw string, so one instant with two offsets is two
    targets; the calendar keys both as one slot."""
    return _certifiable(_calendar(), "calendar keyed by UTC instant")


def _normal_path(text: str) -> str:
    return posixpath.normpath("/" + text).lstrip("/") or "."


def paths_normalised() -> CertifiableToolset:
    """The lie: ``file:{path}`` on the raw path (no ``path`` fold); the store normalises it."""

    def make(state: Records) -> Toolset:
        @tool(idempotent=True, write_targets="file:{path}", read_targets=())
        async def write(path: str, text: Literal["x", "y"]) -> str:
            """Write a file (the store normalises its path)."""
            await anyio.lowlevel.checkpoint()
            state.records[f"file:{_normal_path(path)}"] = text
            return f"wrote {path}"

        return Toolset([write], name="files")

    return _certifiable(make, "files with normalised paths")


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def names_case_and_nfkc_folded() -> CertifiableToolset:
    """The lie: ``tag:{name}`` on the raw name (no fold); the store folds NFKC and case."""

    def make(state: Records) -> Toolset:
        @tool(idempotent=True, write_targets="tag:{name}", read_targets=())
        async def tag(name: str, colour: Literal["red", "blue"]) -> str:
            """Colour a tag (the store folds its name)."""
            await anyio.lowlevel.checkpoint()
            state.records[f"tag:{_folded(name)}"] = colour
            return f"{name} is {colour}"

        return Toolset([tag], name="tags")

    return _certifiable(make, "tags folded by NFKC and case")


class Person(BaseModel):
    email: str
    team: Literal["core", "docs"]


def nested_model_folded() -> CertifiableToolset:
    """The lie: ``contact:{person}`` names the model's raw JSON; the store keys a contact by
    its e-mail folded for case (a nested leaf)."""

    def make(state: Records) -> Toolset:
        @tool(idempotent=True, write_targets="contact:{person}", read_targets=())
        async def save(person: Person, note: Literal["met", "called"]) -> str:
            """Save a note on a contact (the store folds the e-mail's case)."""
            await anyio.lowlevel.checkpoint()
            folded = {"email": person.email.casefold(), "team": person.team}
            key = json.dumps(folded, sort_keys=True, separators=(",", ":"))
            state.records[f"contact:{key}"] = note
            return note

        return Toolset([save], name="contacts")

    return _certifiable(make, "contacts keyed by a folded nested field")


def writers_disjoint_by_declaration() -> CertifiableToolset:
    """The lie: ``close`` declares ``status:{doc}`` but also clears ``owner:{doc}``, which
    ``set_owner`` writes. No ``resources``: only the commutation claim can see it, and only in
    a window where both calls name the same document — a ``D`` and six digits, so two calls
    drawn independently almost never do."""

    def make(state: Records) -> Toolset:
        @tool(idempotent=True, write_targets="owner:{doc}", read_targets=())
        async def set_owner(doc: DocId, owner: Literal["ann", "bob"]) -> str:
            """Give a document an owner."""
            await anyio.lowlevel.checkpoint()
            state.records[f"owner:{doc}"] = owner
            return owner

        @tool(idempotent=True, write_targets="status:{doc}", read_targets=())
        async def close(doc: DocId) -> str:
            """Close a document (and, undeclared, clear its owner)."""
            await anyio.lowlevel.checkpoint()
            state.records[f"status:{doc}"] = "closed"
            state.records.pop(f"owner:{doc}", None)
            return "closed"

        return Toolset([set_owner, close], name="owners")

    return CertifiableToolset(
        new_state=_new_state,
        make_toolset=make,
        fingerprint=_fingerprint,
        name="owners cleared by close",
    )


def _offset_kept(text: str) -> str:
    """An identity that keeps the offset: one instant, two identities."""
    return datetime.datetime.fromisoformat(text).isoformat()


def identity_that_splits_a_record() -> CertifiableToolset:
    """The lie: ``identity={"at": ...}`` keeps the offset, the calendar keys by UTC instant."""
    return _certifiable(_calendar(_offset_kept), "calendar with an offset-keeping identity")


def _trailing_slash(text: str) -> str:
    return text + "/"


def identity_not_idempotent() -> CertifiableToolset:
    """The lie: an identity that is not a fixed point (``x -> x + "/"``)."""
    return _certifiable(_calendar(_trailing_slash), "calendar with a non-idempotent identity")


def honest_identity() -> CertifiableToolset:
    """Honest: ``identity={"at": <the calendar's own key>}``."""
    return _certifiable(_calendar(_utc_key), "calendar with the store's identity")
