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
``result_hidden_as_model_``       the manifest says ``close_ticket.ticket`` is     commutes
``argument`` (+ ``RESULT_HIDDEN_  ``model``; it is the id an ``open_ticket`` of the
AS_MODEL_MANIFEST``)              same window returns (``result:file``)
``raw_targets_on_a_folding_``     the cabinet's store folds names (NFKC, strip,    targets_
``store``                         case); targets use the raw argument              canonical
``weaker_fold_than_the_store``    declares ``canonical="case"`` only               targets_
                                                                                   canonical
``honest_folding_store``          none (declares the store's fold)                 (all pass)
``sync_writer_after_timeout``     sync ``audit`` read-only, writes in its thread   read_only
                                  after its timeout abandoned it
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
    closed: list[str] = field(default_factory=list)


def new_state(seed: int) -> Desk:
    return Desk(docs={k: {"status": "draft", "tags": [], "rev": 0, "reads": 0} for k in KEYS})


def fingerprint(state: Desk) -> str:
    blob = json.dumps([state.docs, state.tickets, state.counter, state.closed], sort_keys=True)
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

    @tool(idempotent=True, write_targets="doc:{key}/status", read_targets=())
    async def set_status(key: str, status: Status) -> dict[str, Any]:
        """Set a document's status."""
        await anyio.lowlevel.checkpoint()
        _doc(state, key)["status"] = status
        return {"key": key, "status": status}

    @tool(
        idempotent=True,
        destructive=False,
        write_targets="doc:{key}/tags",
        read_targets="doc:{key}/tags",
    )
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


def writer_that_always_fails() -> CertifiableToolset:
    """A writer that errors on every state the kit makes (it needs what the seed lacks):
    its claims are unverified, never passed."""

    def make(state: Desk) -> Toolset:
        @tool(idempotent=True, write_targets="doc:{key}/status", read_targets=())
        async def set_status(key: str, status: str) -> dict[str, Any]:
            """Set a document's status (it needs an archive the kit's states lack)."""
            raise RuntimeError("ENOENT: no archive to write to")

        return _toolset(state, set_status=set_status)

    return _certifiable(make)


def idempotent_that_appends() -> CertifiableToolset:
    def make(state: Desk) -> Toolset:
        @tool(
            idempotent=True,
            destructive=False,
            write_targets="doc:{key}/tags",
            read_targets="doc:{key}/tags",
        )
        async def add_tag(key: str, tag: str) -> dict[str, Any]:
            """Add a tag — as a list append, so twice adds it twice."""
            doc = _doc(state, key)
            doc["tags"] = [*doc["tags"], tag]
            return {"key": key, "added": tag}

        return _toolset(state, add_tag=add_tag)

    return _certifiable(make)


def underreported_targets() -> CertifiableToolset:
    def make(state: Desk) -> Toolset:
        @tool(idempotent=True, write_targets="doc:{key}/status", read_targets="doc:{key}/status")
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
        # The lie is in the reads: it reads the desk's counter, not only its own ticket.
        @tool(write_targets="ticket:{title}", read_targets="ticket:{title}")
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


def result_hidden_as_model_argument() -> CertifiableToolset:
    """Tickets: ``open_ticket()`` numbers a new ticket from the desk's counter and returns its
    id; ``close_ticket(ticket)`` closes an existing one. Each declares only what it can name
    from its arguments (``tickets``, ``ticket:{ticket}``), so D1 lets them share a window; what
    keeps ``close_ticket("T1")`` from running before the ``open_ticket()`` that makes T1 is D2,
    and only if the manifest says the ticket is a result. The lie is in
    :data:`RESULT_HIDDEN_AS_MODEL_MANIFEST` (``close_ticket.ticket = "model"``);
    :data:`RESULT_MARKED_MANIFEST` is the honest one."""

    def make(state: Desk) -> Toolset:
        @tool(write_targets="tickets", read_targets="tickets")
        async def open_ticket() -> dict[str, Any]:
            """Open a ticket; its id comes from the counter."""
            await anyio.lowlevel.checkpoint()
            state.counter += 1
            ticket = f"T{state.counter}"
            state.tickets[ticket] = state.counter
            return {"ticket": ticket}

        @tool(
            idempotent=True,
            destructive=False,
            write_targets="ticket:{ticket}",
            read_targets="ticket:{ticket}",
        )
        async def close_ticket(ticket: str) -> dict[str, Any]:
            """Close an open ticket (closing it again changes nothing)."""
            if ticket not in state.tickets:
                raise LookupError(f"no ticket {ticket!r}")
            if ticket not in state.closed:
                state.closed.append(ticket)
            return {"ticket": ticket, "status": "closed"}

        return _toolset(state, open_ticket=open_ticket, close_ticket=close_ticket)

    def ticket_resources(state: Desk) -> dict[str, str]:
        out = {k: v for k, v in resources(state).items() if k.startswith("doc:")}
        out["tickets"] = json.dumps([state.counter, sorted(state.tickets)])
        out.update({f"ticket:{t}": "closed" for t in state.closed})
        return out

    def ticket_examples(state: Desk) -> dict[str, Any]:
        # the ids open_ticket hands out on a fresh desk: the values a hidden result takes
        return {**example_values(state), "close_ticket.ticket": ("T1", "T2")}

    return CertifiableToolset(
        new_state=new_state,
        make_toolset=make,
        fingerprint=fingerprint,
        resources=ticket_resources,
        example_values=ticket_examples,
        name="desk with tickets",
    )


def _tickets_manifest(ticket_source: str, name: str) -> Manifest:
    return Manifest.from_dict(
        {
            "skills": {
                "tickets": {
                    "phases": [
                        {
                            "name": "file",
                            "kind": "fan_out",
                            "tools": ["open_ticket", "close_ticket"],
                            "args": {"close_ticket.ticket": ticket_source},
                        }
                    ]
                }
            }
        },
        source=f"tests/broken_toolsets.py:{name}",
    )


#: The lie: phase ``file`` says the model chooses ``close_ticket.ticket``, but the ticket it
#: closes is the id an ``open_ticket`` of the same window returns. D2 sees no placeholder, the
#: certifier windows ``open_ticket()`` with ``close_ticket("T1")`` and they do not commute.
RESULT_HIDDEN_AS_MODEL_MANIFEST = _tickets_manifest("model", "RESULT_HIDDEN_AS_MODEL_MANIFEST")
#: The honest manifest: ``close_ticket.ticket = "result:file"``, so D2 keeps it out of windows.
RESULT_MARKED_MANIFEST = _tickets_manifest("result:file", "RESULT_MARKED_MANIFEST")


def open_world() -> CertifiableToolset:
    """A toolset whose ``notify`` tool reaches outside the process: only idempotence via
    results can be checked for it."""

    def make(state: Desk) -> Toolset:
        sent: list[str] = []

        @tool(
            idempotent=True,
            open_world=True,
            write_targets="outbox:{to}",
            read_targets="outbox:{to}",
        )
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
    import harness.toolsets.workspace as ws
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


# ------------------------------------------------------------- stores that canonicalise names
#
# A *cabinet* of files keyed by a folded name: the store applies NFKC, strips surrounding
# whitespace and folds case, so 'Report', ' report' and 'ｒｅｐｏｒｔ' are one file. Its tools
# must declare that fold (canonical=...); the kit's aliasing variants find the ones that do
# not (issue 16 item 7).


@dataclass
class Cabinet:
    files: dict[str, str] = field(default_factory=dict)


def _store_name(name: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFKC", name).strip().casefold()


def _cabinet_toolset(state: Cabinet, canonical: str | None) -> Toolset:
    @tool(idempotent=True, write_targets="file:{name}", read_targets=(), canonical=canonical)
    async def write_file(name: str, text: str) -> str:
        """Write a file (the store folds its name)."""
        await anyio.lowlevel.checkpoint()
        state.files[_store_name(name)] = text
        return f"wrote {len(text)} characters"

    @tool(read_only=True, read_targets="file:{name}", canonical=canonical)
    async def read_file(name: str) -> str:
        """Read a file."""
        await anyio.lowlevel.checkpoint()
        return state.files.get(_store_name(name), "(no such file)")

    return Toolset([write_file, read_file], name="cabinet")


def _cabinet(canonical: str | None) -> CertifiableToolset:
    return CertifiableToolset(
        new_state=lambda seed: Cabinet(),
        make_toolset=lambda state: _cabinet_toolset(state, canonical),
        fingerprint=lambda state: json.dumps(state.files, sort_keys=True),
        resources=lambda state: {f"file:{n}": t for n, t in state.files.items()},
        example_values=lambda state: {"name": ("report", "notes", "café"), "text": ("x", "y")},
        name=f"cabinet (canonical={canonical})",
    )


def raw_targets_on_a_folding_store() -> CertifiableToolset:
    """The store folds names; the targets are templated on the raw argument."""
    return _cabinet(None)


def weaker_fold_than_the_store() -> CertifiableToolset:
    """The tools declare ``canonical="case"`` (NFKC_Casefold); the store also strips."""
    return _cabinet("case")


def honest_folding_store() -> CertifiableToolset:
    """The tools declare the store's fold: every claim holds."""
    return _cabinet("nfkc+strip+case")


def sync_writer_after_timeout() -> CertifiableToolset:
    """A sync tool annotated read-only that times out and writes *after* the timeout, in
    the thread the call abandoned: judged before the thread ends, it looks read-only."""
    import time

    def make(state: Desk) -> Toolset:
        @tool(read_only=True, read_targets="doc:{key}/status", timeout_s=0.05)
        def audit(key: str) -> str:
            """Audit a document (slowly; it bumps the ticket counter when done)."""
            time.sleep(0.3)
            state.counter += 1
            return "audited"

        return _toolset(state, audit=audit)

    return _certifiable(make)
