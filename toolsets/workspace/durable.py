"""The workspace store on disk, for runs that must survive a crash.

:class:`DurableStore` keeps the workspace's documents in a SQLite file, so what a tool wrote
survives a SIGKILL of the process that wrote it, as a real side effect would. Each write is
one transaction that also appends to an *application log* (``applied``: every write that
reached the store, in order, and whether it took effect).

:func:`durable_toolset` gives the eight workspace tools (same names, schemas, effects and
results as :func:`harness.toolsets.workspace.make_toolset`) over a :class:`DurableStore`. With
``keyed=True`` (the default) every write tool also accepts an idempotency key and applies a
write at most once per key — a second call with the same key returns the first call's result
and changes nothing — as a payment API with an ``Idempotency-Key`` header does; a resumed run
(:mod:`harness.journal`) may then retry any call whose outcome is in doubt. ``hook(point)`` is
called at ``"before_write"`` and ``"after_write"`` of every write (fault injection).
``ground_truth``: a plain file outside the store and the harness where every write lands
first: one line, its :func:`write_id` (and its key, tab-separated), appended and ``fsync``'d
before the store's transaction — the external side effect, the store only the documents'
state. A keyed write whose key the file holds already is not appended again (the file is the
system of record that drops duplicates). The crash benchmark's ``--ground-truth file``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from harness.tools import Tool, Toolset
from harness.toolsets.workspace.latency import Latency
from harness.toolsets.workspace.store import WorkspaceState
from harness.toolsets.workspace.tools import make_toolset

__all__ = ("DurableStore", "durable_toolset", "write_id")

Hook = Callable[[str], None]


class DurableStore:
    """The workspace documents in ``path`` (SQLite), with the application log and the keys."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # a killed process loses nothing committed
        self.db.executescript(
            "CREATE TABLE IF NOT EXISTS docs (key TEXT PRIMARY KEY, body TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS applied (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            " write TEXT NOT NULL, tool TEXT NOT NULL, effective INTEGER NOT NULL);"
            "CREATE TABLE IF NOT EXISTS keys (key TEXT PRIMARY KEY, result TEXT NOT NULL);"
        )

    @classmethod
    def create(cls, path: Path, state: WorkspaceState) -> DurableStore:
        store = cls(path)
        with store.transaction():
            for key, doc in state.snapshot().items():
                store.db.execute(
                    "INSERT INTO docs (key, body) VALUES (?, ?)", (key, json.dumps(doc))
                )
        return store

    def transaction(self) -> _Transaction:
        return _Transaction(self.db)

    def state(self) -> WorkspaceState:
        rows = self.db.execute("SELECT key, body FROM docs").fetchall()
        return WorkspaceState.from_snapshot({k: json.loads(b) for k, b in rows})

    def fingerprint(self) -> str:
        return self.state().fingerprint()

    def applications(self) -> list[tuple[str, str, bool]]:
        """Every write that reached the store, in order: ``(write, tool, took_effect)``."""
        rows = self.db.execute("SELECT write, tool, effective FROM applied ORDER BY seq")
        return [(w, t, bool(e)) for w, t, e in rows.fetchall()]

    def close(self) -> None:
        self.db.close()


class _Transaction:
    """``with store.transaction() as db``: BEGIN IMMEDIATE, then COMMIT (ROLLBACK on error)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.db.execute("ROLLBACK" if exc_type is not None else "COMMIT")


def write_id(tool: str, arguments: Mapping[str, Any]) -> str:
    """A write, named by what it does (the benchmark's tasks never repeat a write)."""
    return f"{tool}({json.dumps(dict(arguments), sort_keys=True)})"


def durable_toolset(
    store: DurableStore,
    *,
    keyed: bool = True,
    latency: Latency | float | None = None,
    hook: Hook | None = None,
    ground_truth: Path | None = None,
) -> Toolset:
    """The workspace tools over ``store`` (see the module docstring); ``latency`` as for
    :func:`~harness.toolsets.workspace.make_toolset`."""
    template = make_toolset(WorkspaceState([]))
    lat = Latency.of(latency)
    tools = [
        _durable(t, store, keyed, lat, hook or _no_hook, ground_truth) for t in template.values()
    ]
    return Toolset(tools, name="workspace")


def _file_holds_key(path: Path, key: str) -> bool:
    if not path.exists():
        return False
    with path.open(encoding="utf-8") as f:
        return any(line.rstrip("\n").endswith("\t" + key) for line in f)


def _land(path: Path, write: str, key: str | None) -> None:
    """The write's external effect: its line in the ground-truth file (once per key)."""
    if key is not None and _file_holds_key(path, key):
        return
    _append_fsynced(path, write + (f"\t{key}" if key is not None else ""))


def _append_fsynced(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _no_hook(point: str) -> None:
    return None


def _durable(
    original: Tool,
    store: DurableStore,
    keyed: bool,
    lat: Latency,
    hook: Hook,
    ground_truth: Path | None,
) -> Tool:
    name = original.name
    writes = not original.effect.read_only

    async def fn(**kwargs: Any) -> Any:
        key = kwargs.pop("idempotency_key", None)
        if writes:
            hook("before_write")
        delay = lat.draw(name, kwargs)
        if delay > 0:
            await anyio.sleep(delay)
        if writes and ground_truth is not None:
            _land(ground_truth, write_id(name, kwargs), key if keyed else None)
        with store.transaction() as db:  # no await inside: one step, like the in-memory store
            if writes and keyed and key is not None:
                seen = db.execute("SELECT result FROM keys WHERE key = ?", (key,)).fetchone()
                if seen is not None:
                    db.execute(
                        "INSERT INTO applied (write, tool, effective) VALUES (?, ?, 0)",
                        (write_id(name, kwargs), name),
                    )
                    return json.loads(seen[0])
            state = WorkspaceState.from_snapshot(
                {k: json.loads(b) for k, b in db.execute("SELECT key, body FROM docs")}
            )
            before = state.snapshot()
            result = await make_toolset(state)[name].invoke(kwargs)
            if writes:
                for doc_key, doc in state.snapshot().items():
                    if doc != before.get(doc_key):
                        db.execute(
                            "UPDATE docs SET body = ? WHERE key = ?", (json.dumps(doc), doc_key)
                        )
                db.execute(
                    "INSERT INTO applied (write, tool, effective) VALUES (?, ?, 1)",
                    (write_id(name, kwargs), name),
                )
                if keyed and key is not None:
                    db.execute(
                        "INSERT INTO keys (key, result) VALUES (?, ?)", (key, json.dumps(result))
                    )
        if writes:
            hook("after_write")
        return result

    effect = original.effect
    if keyed and writes:
        effect = replace(effect, accepts_idempotency_key=True)
    return Tool(
        name=name,
        parameters=original.parameters,
        fn=fn,
        description=original.description,
        effect=effect,
        timeout_s=None,
        result_cap=original.result_cap,
    )
