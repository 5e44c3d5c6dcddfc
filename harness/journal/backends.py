"""Where a journal's entries live: an append-only JSONL file or a SQLite database.

Both backends keep the same promise, checked by one conformance suite
(``tests/test_journal.py``): entries come back in the order they were appended; an entry
appended with ``durable=True`` is on disk when :meth:`JournalBackend.append` returns (it and
every entry before it survive a killed process and a lost machine); a process killed in the
middle of an append loses at most that entry and never corrupts the ones before it; appends
from several threads (an abandoned sync tool reporting its late outcome) do not interleave.

- :class:`JsonlBackend` (the default), ``journal.jsonl``: one JSON object per line, flushed
  to the OS on every append (so it survives a killed process) and ``fsync``'d on durable ones
  (so it survives a crash of the machine). A kill mid-append can only tear the last line; the
  reader skips torn lines and the writer ends a torn line before appending (``harness._jsonl``).
- :class:`SqliteBackend`, ``journal.sqlite3``: one row per entry in a WAL-mode database with
  ``synchronous=FULL``: every append is a committed, synced transaction (SQLite's own journal
  rolls back a half-written one). Use it to query journals with SQL.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from harness._jsonl import append_line, open_append, read_jsonl

__all__ = ("BACKENDS", "BackendName", "JournalBackend", "JsonlBackend", "SqliteBackend")

BackendName = Literal["jsonl", "sqlite"]


class JournalBackend(Protocol):
    """Append-only storage of one run's journal entries (JSON objects)."""

    #: The file inside the run directory that holds the entries.
    filename: str

    def append(self, entry: dict[str, Any], *, durable: bool) -> None: ...

    def read(self) -> tuple[list[dict[str, Any]], int]:
        """Every entry in append order, and how many torn/unreadable ones were skipped."""
        ...

    def scan(self) -> list[tuple[int, dict[str, Any] | None]]:
        """Every stored entry in append order with its position (a JSONL line number, a
        SQLite row id): the entry, or ``None`` where it cannot be read (torn or damaged).
        :mod:`harness.journal.damage` tells a torn tail from damage before it."""
        ...

    def close(self) -> None: ...


class JsonlBackend:
    """Entries as lines of ``journal.jsonl`` (see the module docstring)."""

    filename = "journal.jsonl"

    def __init__(self, directory: Path, *, fsync: bool = True) -> None:
        self.path = directory / self.filename
        self._fsync = fsync
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._closed = False

    def append(self, entry: dict[str, Any], *, durable: bool) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the journal {self.path} is closed")
            if self._file is None:
                self._file = open_append(self.path)  # ends a line torn by an earlier crash
            append_line(self._file, entry, fsync=durable and self._fsync)

    def read(self) -> tuple[list[dict[str, Any]], int]:
        if not self.path.exists():
            return [], 0
        return read_jsonl(self.path)

    def scan(self) -> list[tuple[int, dict[str, Any] | None]]:
        if not self.path.exists():
            return []
        out: list[tuple[int, dict[str, Any] | None]] = []
        with self.path.open(encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    entry = None
                out.append((number, entry if isinstance(entry, dict) else None))
        return out

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                # A flush that failed before (disk full) fails again on close: the append
                # already raised, and that entry was never made durable.
                with contextlib.suppress(OSError):
                    self._file.close()
                self._file = None


class SqliteBackend:
    """Entries as rows of ``journal.sqlite3`` (see the module docstring)."""

    filename = "journal.sqlite3"

    def __init__(self, directory: Path, *, fsync: bool = True) -> None:
        self.path = directory / self.filename
        self._lock = threading.Lock()
        directory.mkdir(parents=True, exist_ok=True)
        # One connection shared by the loop and late-outcome threads, serialised by the lock.
        self._db: sqlite3.Connection | None = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'OFF'}")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "kind TEXT NOT NULL, call_id TEXT, body TEXT NOT NULL)"
        )

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError(f"the journal {self.path} is closed")
        return self._db

    def append(self, entry: dict[str, Any], *, durable: bool) -> None:
        # Every row is its own synced transaction: SQLite cannot sync some commits and not
        # others cheaply, and the journal writes few rows (a few per call).
        body = json.dumps(entry, sort_keys=True, default=str)
        with self._lock:
            self._conn().execute(
                "INSERT INTO entries (kind, call_id, body) VALUES (?, ?, ?)",
                (str(entry.get("kind", "")), entry.get("call_id"), body),
            )

    def read(self) -> tuple[list[dict[str, Any]], int]:
        with self._lock:
            rows = self._conn().execute("SELECT body FROM entries ORDER BY seq").fetchall()
        out: list[dict[str, Any]] = []
        skipped = 0
        for (body,) in rows:
            try:
                entry = json.loads(body)
            except json.JSONDecodeError:
                skipped += 1
                continue
            out.append(entry)
        return out, skipped

    def scan(self) -> list[tuple[int, dict[str, Any] | None]]:
        with self._lock:
            rows = self._conn().execute("SELECT seq, body FROM entries ORDER BY seq").fetchall()
        out: list[tuple[int, dict[str, Any] | None]] = []
        for seq, body in rows:
            try:
                entry = json.loads(body)
            except json.JSONDecodeError:
                entry = None
            out.append((int(seq), entry if isinstance(entry, dict) else None))
        return out

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


BACKENDS: dict[str, type[JsonlBackend] | type[SqliteBackend]] = {
    "jsonl": JsonlBackend,
    "sqlite": SqliteBackend,
}
