"""A corpus of deliberately broken toolsets for the certification kit (and one honest one).

All share a tiny state, a *desk*: three documents with a status, tags and a revision number,
and a ticket counter. Each ``make_*`` below returns a :class:`CertifiableToolset` whose
annotations lie in exactly one way:

================================  ===============================================  ==============
toolset                           the lie                                          claim caught
================================  ===============================================  ==============
``honest``                        none                                             (all pass)
``readonly_that_writes``          ``read_doc`` read-only, but counts its reads      read_only
``idempotent_that_appends``       ``add_tag`` idempotent, but appends duplicates   idempotent
``underreported_targets``         ``set_status`` also bumps ``rev``, undeclared    write_targets
``order_dependent``               ``open_ticket`` numbers tickets from a counter   commutes
``underdeclared_read``            ``count_approved`` declares one doc, reads all   commutes
``hidden_placeholder`` (+         an unslotted fan-out phase swallows a later      D2
``HIDDEN_PLACEHOLDER_MANIFEST``)  phase whose argument is a result of itself
================================  ===============================================  ==============

They are importable as ``tests.broken_toolsets:readonly_that_writes`` etc. for CLI tests.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio.lowlevel

from harness import Manifest, Toolset, tool
from harness.certkit import CertifiableToolset
from harness.tools import Tool

KEYS = ("a", "b", "c")
Status = Literal["draft", "review", "approved"]


@dataclass
class Desk:
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    tickets: dict[str, int] = field(default_factory=dict)
    counter: int = 0


def new_state(seed: int) -> Desk:
    return Desk(docs={k: {"status": "draft", "tags": [], "rev": 0, "reads": 0} for k in KEYS})


def fingerprint(state: Desk) -> str:
    blob = json.dumps([state.docs, state.tickets, state.counter], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def resources(state: Desk) -> dict[str, str]:
    out = {f"doc:{k}/{f}": json.dumps(v) for k, doc in state.docs.items() for f, v in doc.items()}
    out.update({f"ticket:{t}": str(n) for t, n in state.tickets.items()})
    out["counter"] = str(state.counter)
    return out


def example_values(state: Desk) -> dict[str, Any]:
    return {"key": KEYS, "tag": ("x", "y"), "title": ("t1", "t2", "t3")}


def _doc(state: Desk, key: str) -> dict[str, Any]:
    if key not in state.docs:
        raise LookupError(f"no document {key!r}")
    return state.docs[key]


def _honest_tools(state: Desk) -> dict[str, Tool]:
    @tool(read_only=True, read_targets=["doc:{key}/status", "doc:{key}/tags", "doc:{key}/rev"])
    async def read_doc(key: str) -> dict[str, Any]:
        """Read one document."""
        await anyio.lowlevel.checkpoint()
        doc = _doc(state, key)
        return {"key": key, "status": doc["status"], "tags": doc["tags"], "rev": doc["rev"]}

    @tool(idempotent=True, write_targets="doc:{key}/status")
    async def set_status(key: str, status: Status) -> dict[str, Any]:
        """Set a document's status."""
        await anyio.lowlevel.checkpoint()
        _doc(state, key)["status"] = status
        return {"key": key, "status": status}

    @tool(idempotent=True, destructive=False, write_targets="doc:{key}/tags")
    async def add_tag(key: str, tag: str) -> dict[str, Any]:
        """Add a tag (a set: adding one twice changes nothing)."""
        await anyio.lowlevel.checkpoint()
        doc = _doc(state, key)
        doc["tags"] = sorted({*doc["tags"], tag})
        return {"key": key, "tags": doc["tags"]}

    return {t.name: t for t in (read_doc, set_status, add_tag)}


def _certifiable(make: Any, *, with_resources: bool = True) -> CertifiableToolset:
    return CertifiableToolset(
        new_state=new_state,
        make_toolset=make,
        fingerprint=fingerprint,
        resources=resources if with_resources else None,
        example_values=example_values,
    )


def _toolset(state: Desk, **replacements: Tool) -> Toolset:
    tools = {**_honest_tools(state), **replacements}
    return Toolset(tools.values(), name="desk")


# ------------------------------------------------------------------------------ the corpus


def honest() -> CertifiableToolset:
    return _certifiable(_toolset)


def readonly_that_writes() -> CertifiableToolset:
    def make(state: Desk) -> Toolset:
        @tool(read_only=True, read_targets="doc:{key}/status")
        async def read_doc(key: str) -> dict[str, Any]:
            """Read one document (and, undeclared, count the read)."""
            doc = _doc(state, key)
            doc["reads"] += 1
            return {"key": key, "status": doc["status"]}

        return _toolset(state, read_doc=read_doc)

    return _certifiable(make)


def idempotent_that_appends() -> CertifiableToolset:
    def make(state: Desk) -> Toolset:
        @tool(idempotent=True, destructive=False, write_targets="doc:{key}/tags")
        async def add_tag(key: str, tag: str) -> dict[str, Any]:
            """Add a tag — as a list append, so twice adds it twice."""
            doc = _doc(state, key)
            doc["tags"] = [*doc["tags"], tag]
            return {"key": key, "added": tag}

        return _toolset(state, add_tag=add_tag)

    return _certifiable(make)


def underreported_targets() -> CertifiableToolset:
    def make(state: Desk) -> Toolset:
        @tool(idempotent=True, write_targets="doc:{key}/status")
        async def set_status(key: str, status: Status) -> dict[str, Any]:
            """Set a document's status (and, undeclared, bump its revision)."""
            doc = _doc(state, key)
            if doc["status"] != status:
                doc["rev"] += 1
            doc["status"] = status
            return {"key": key, "status": status}

        return _toolset(state, set_status=set_status)

    return _certifiable(make)


def order_dependent() -> CertifiableToolset:
    """No ``resources``: the write-target claim is unverified, and only the commutation claim
    can see that ticket numbers depend on the order the calls ran in."""

    def make(state: Desk) -> Toolset:
        @tool(write_targets="ticket:{title}")
        async def open_ticket(title: str) -> dict[str, Any]:
            """Open a ticket; it gets the next number."""
            await anyio.lowlevel.checkpoint()
            state.counter += 1
            state.tickets[title] = state.counter
            return {"title": title, "number": state.counter}

        return Toolset([open_ticket], name="tickets")

    return _certifiable(make, with_resources=False)


def underdeclared_read() -> CertifiableToolset:
    def make(state: Desk) -> Toolset:
        @tool(read_only=True, read_targets="doc:{key}/status")
        async def count_approved(key: str) -> dict[str, Any]:
            """Whether one document is approved — and how many are (reads every status)."""
            await anyio.lowlevel.checkpoint()
            total = sum(d["status"] == "approved" for d in state.docs.values())
            return {
                "key": key,
                "approved": _doc(state, key)["status"] == "approved",
                "of_all": total,
            }

        tools = _honest_tools(state)
        return Toolset([count_approved, tools["set_status"]], name="desk")

    return _certifiable(make)


def hidden_placeholder() -> CertifiableToolset:
    """An honest toolset; the lie is in :data:`HIDDEN_PLACEHOLDER_MANIFEST`."""
    return honest()


#: ``scan`` is a fan-out of ``read_doc`` with no slot count; ``follow`` reads the document each
#: previous read points at (``read_doc.key`` is a result of ``follow`` itself), and the
#: manifest says so. Batch certification of ``follow`` fails D2 as it should — but online,
#: the certifier keeps every ``read_doc`` call in ``scan`` while it is open, so the follow
#: reads are certified together in scan's window.
HIDDEN_PLACEHOLDER_MANIFEST = Manifest.from_dict(
    {
        "skills": {
            "scan_then_follow": {
                "phases": [
                    {
                        "name": "scan",
                        "kind": "fan_out",
                        "tools": ["read_doc"],
                        "args": {"read_doc.key": "input:keys"},
                    },
                    {
                        "name": "follow",
                        "kind": "fan_out",
                        "tools": ["read_doc"],
                        "args": {"read_doc.key": "result:follow"},
                    },
                ]
            },
            "fixed": {
                "phases": [
                    {
                        "name": "scan",
                        "kind": "fan_out",
                        "tools": ["read_doc"],
                        "slots": "input:keys",
                        "args": {"read_doc.key": "input:keys"},
                    },
                    {
                        "name": "follow",
                        "kind": "fan_out",
                        "tools": ["read_doc"],
                        "args": {"read_doc.key": "result:follow"},
                    },
                ]
            },
        }
    },
    source="tests/broken_toolsets.py:HIDDEN_PLACEHOLDER_MANIFEST",
)


def open_world() -> CertifiableToolset:
    """A toolset whose ``notify`` tool reaches outside the process: only idempotence via
    results can be checked for it."""

    def make(state: Desk) -> Toolset:
        sent: list[str] = []

        @tool(idempotent=True, open_world=True, write_targets="outbox:{to}")
        async def notify(to: str) -> str:
            """Send a notification (idempotent by a per-recipient dedupe key)."""
            if to not in sent:
                sent.append(to)
            return f"notified {to}"

        return _toolset(state, notify=notify)

    return _certifiable(make)


SPEC = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look up a record.",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "integer", "minimum": 1}},
                "required": ["id"],
            },
            "annotations": {"readOnlyHint": True},
        },
    },
    {
        "name": "store",
        "description": "Store a record (MCP form).",
        "inputSchema": {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "body": {"type": "string"}},
            "required": ["id", "body"],
        },
        "annotations": {"idempotentHint": True, "writeTargets": "record:{id}"},
    },
]


def mislabeled_workspace() -> CertifiableToolset:
    """The real workspace with one wrong annotation: ``append_note`` declared idempotent
    ("adding a note is safe to retry" — it is not: a retry adds the note twice)."""
    import toolsets.workspace as ws
    from harness import Effect

    def make(state: ws.WorkspaceState) -> Toolset:
        honest_tools = ws.make_toolset(state)
        lying = honest_tools["append_note"].with_effect(
            Effect.declare(idempotent=True, destructive=False, write_targets="doc:{key}/notes")
        )
        tools = [lying if t.name == "append_note" else t for t in honest_tools.values()]
        return Toolset(tools, name="workspace (mislabeled)")

    return CertifiableToolset(
        new_state=ws.new_state,
        make_toolset=make,
        fingerprint=ws.fingerprint,
        resources=ws.resources,
        example_values=ws.example_values,
        name="workspace (append_note mislabeled idempotent)",
    )
