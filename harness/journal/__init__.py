"""The write-ahead journal of a run: what it is about to do, before it does it.

Every run with a journal keeps one directory. Entries are appended as things happen, never
at exit:

=========  ======================================================  =========================
kind       what                                                    when (durable = on disk)
=========  ======================================================  =========================
run        run id, task, arm, the config's fingerprint             created (durable)
resume     another process took the run over                       resumed (durable)
turn       one generation: prompt hash, the completion             after the engine answered
intent     a call: tool, arguments, idempotency key                *before* it starts (durable)
outcome    its result as the model saw it (``unknown`` when an     after it ended (durable)
           abandoned sync thread was still running)
settled    the late outcome of an abandoned sync call              when its thread ended (durable)
window     a closed window: its calls, why it closed               at close
end        finished or not, the error, the answer                  at exit (durable)
=========  ======================================================  =========================

Resuming (:meth:`Journal.resume`) replays the run from its entries: a journaled turn is not
generated again, a call with a journaled outcome is never executed again. A call with an
intent and no outcome is *in doubt*: it may or may not have taken effect. It is retried with
the **same idempotency key** (:func:`idempotency_key`: run id + call id) only when the tool is
read-only, idempotent, or accepts a key; any other is not re-run and becomes an
``outcome_unknown`` error result the model and the ledger see
(:mod:`harness.journal.execution`).

Why JSONL by default (:class:`~harness.journal.backends.JsonlBackend`): the journal is an
append-only log written by one process, read back whole, once, on resume. An append-only file
needs one ``write`` and, at the points that matter (intent, outcome, end), one ``fsync``; a
crash can only tear the last line, which the reader skips. It is greppable and ``tail -f``-able
and has the ledger's format. SQLite (:class:`~harness.journal.backends.SqliteBackend`) is the
alternative for users who want SQL over their journals; both pass one conformance suite.

A run directory has one writer at a time: :meth:`Journal.create` and :meth:`Journal.resume`
take an exclusive lock on ``DIR/.lock`` (released when the process ends, even by SIGKILL).

Every entry carries ``seq`` (0, 1, 2, ...), so a resume tells a torn tail (a crash) from
damage before it (:mod:`harness.journal.damage`): damage is refused unless the caller says to
go on. Every I/O failure (a directory that cannot be written, a full disk, a file-size limit)
is a one-line :class:`~harness.errors.JournalError`, raised by the append that failed, so a
run stops before the next call that would not be recorded.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

from harness._lockfile import lock_directory
from harness.errors import JournalError
from harness.journal._state import (
    EVENTS,
    JournalState,
    completion_from_entry,
    completion_to_entry,
    prompt_hash,
    result_from_entry,
    result_to_entry,
)
from harness.journal.backends import BACKENDS, BackendName, JournalBackend
from harness.journal.damage import Damage, Horizon, find_damage
from harness.messages import Completion, ToolCall
from harness.tools.execute import ToolResult
from harness.tools.toolset import ToolThread

__all__ = (
    "EVENTS",
    "FORMAT",
    "Damage",
    "Journal",
    "JournalState",
    "OnDamage",
    "completion_from_entry",
    "idempotency_key",
    "io_error",
    "prompt_hash",
    "result_from_entry",
)

#: Bumped when entries change incompatibly; a journal of another format is refused.
FORMAT = 1

#: What :meth:`Journal.resume` does with a journal damaged before its tail.
OnDamage = Literal["refuse", "continue"]


def io_error(directory: Path, exc: BaseException, doing: str) -> JournalError:
    """A one-line :class:`JournalError` for an I/O failure of the journal in ``directory``."""
    if isinstance(exc, OSError):
        name = errno.errorcode.get(exc.errno or 0, "")
        reason = f"{exc.strerror or exc}" + (f" ({name})" if name else "")
        if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            fix = "free space (or raise the file-size limit)"
        elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            fix = "make the directory writable"
        else:
            fix = "fix the directory"
    else:
        reason, fix = f"{type(exc).__name__}: {exc}", "fix the directory"
    return JournalError(
        f"Cannot {doing} the journal in {directory}: {reason}; the run stopped before its "
        f"next call. {fix[0].upper()}{fix[1:]}, then resume with `--resume`."
        if doing == "write to"
        else f"Cannot {doing} the journal in {directory}: {reason}; nothing ran. "
        f"{fix[0].upper()}{fix[1:]} or choose another directory."
    )


@contextmanager
def _io(directory: Path, doing: str) -> Iterator[None]:
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        raise io_error(directory, exc, doing) from exc


def idempotency_key(run_id: str, call_id: str) -> str:
    """The key a call carries to a tool that accepts one: the same in every attempt of the
    run, different for every call (call ids are run-unique and arm-independent)."""
    return f"{run_id}/{call_id}"


def _detect(directory: Path) -> BackendName | None:
    for name, backend in BACKENDS.items():
        if (directory / backend.filename).exists():
            return name  # type: ignore[return-value]
    return None


class Journal:
    """One run's journal in ``directory``. Make one with :meth:`create` (a new run) or
    :meth:`resume` (continue a killed one); :meth:`open` does whichever fits."""

    def __init__(
        self,
        directory: Path,
        backend: JournalBackend,
        state: JournalState,
        lock: IO[str],
        *,
        resumed: bool,
    ) -> None:
        self.directory = directory
        self._backend = backend
        self.state = state
        self._lock_file: IO[str] | None = lock
        self.resumed = resumed
        self._closed = False
        self._late = threading.Lock()  # orders a late outcome against close()
        self._write = threading.Lock()  # numbers entries in the order they are appended
        self._seq = 0
        #: What the directory held when it was opened: the part of the run to replay.
        self.replay = JournalState.fold([]) if not resumed else _copy(state)
        #: Damage before the tail that the resume was told to go on past (else None), and how
        #: far the run had got: calls behind it without a readable intent are in doubt.
        self.damage: Damage | None = None
        self.horizon: Horizon | None = None

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: str | os.PathLike[str],
        run_id: str,
        *,
        meta: Mapping[str, Any] | None = None,
        backend: BackendName = "jsonl",
        fsync: bool = True,
    ) -> Journal:
        """Start the journal of a new run in ``directory`` (created if missing; it must not
        hold a journal already)."""
        path = Path(directory)
        if backend not in BACKENDS:
            raise JournalError(f"Unknown journal backend {backend!r}; choose jsonl or sqlite.")
        if _detect(path) is not None:
            raise JournalError(
                f"{path} already holds a run's journal; resume it (`--resume {path}`) or "
                "choose an empty directory."
            )
        with _io(path, "create"):
            path.mkdir(parents=True, exist_ok=True)
            lock = _lock(path)
        try:
            store = BACKENDS[backend](path, fsync=fsync)
            journal = cls(path, store, JournalState(), lock, resumed=False)
            journal._append(
                {
                    "kind": "run",
                    "format": FORMAT,
                    "run_id": run_id,
                    "backend": backend,
                    "created": time.time(),
                    "meta": dict(meta or {}),
                },
                durable=True,
                doing="create",
            )
        except (OSError, sqlite3.Error, JournalError) as exc:
            lock.close()
            if isinstance(exc, JournalError):
                raise
            raise io_error(path, exc, "create") from exc
        return journal

    @classmethod
    def resume(
        cls,
        directory: str | os.PathLike[str],
        *,
        run_id: str | None = None,
        damaged: OnDamage = "refuse",
        fsync: bool = True,
    ) -> Journal:
        """Take over the journal of a killed (or finished) run in ``directory``.

        ``run_id``: the run the caller expects; a journal of another run is refused.
        ``damaged``: a journal damaged before its tail (:mod:`harness.journal.damage`) is
        refused unless ``"continue"``; then every call behind the damage that has no readable
        intent and is not safe to repeat is ``outcome_unknown``."""
        path = Path(directory)
        name = _detect(path)
        if name is None:
            raise JournalError(
                f"{path} holds no run journal (no journal.jsonl or journal.sqlite3); check the "
                "path, or start a new run with --journal."
            )
        with _io(path, "read"):
            lock = _lock(path)
        try:
            store = BACKENDS[name](path, fsync=fsync)
            scanned = store.scan()
        except (OSError, sqlite3.Error) as exc:
            lock.close()
            raise io_error(path, exc, "read") from exc
        entries = [e for _, e in scanned if e is not None]
        state = JournalState.fold(entries, len(scanned) - len(entries))

        def refuse(message: str) -> JournalError:
            store.close()
            lock.close()
            return JournalError(message)

        if not state.run:
            raise refuse(
                f"The journal in {path} has no header entry (it was torn before its first "
                "record was written): nothing ran; start the run again in a new directory."
            )
        if state.run.get("format") != FORMAT:
            raise refuse(
                f"The journal in {path} has format {state.run.get('format')!r}; this version "
                f"reads format {FORMAT}. Resume it with the version that wrote it."
            )
        if run_id is not None and state.run_id != run_id:
            raise refuse(
                f"{path} holds the journal of run {state.run_id!r}, not of {run_id!r}: it "
                "belongs to another run; resume that run, or point --resume at this run's "
                "directory."
            )
        damage = find_damage(scanned)
        if damage is not None and damaged != "continue" and not _acknowledged(entries, damage):
            raise refuse(
                f"The journal {path / store.filename} is {damage.describe()}: the records of "
                "calls that ran may be lost, so resuming could repeat a write. Nothing ran; "
                "restore the file, or pass --resume-damaged to go on (every call behind the "
                "damage that is not idempotent becomes outcome_unknown, never re-run)."
            )
        journal = cls(path, store, state, lock, resumed=True)
        journal._seq = 1 + max(
            (e["seq"] for e in entries if isinstance(e.get("seq"), int)), default=len(entries) - 1
        )
        resume: dict[str, Any] = {
            "kind": "resume",
            "attempt": state.attempts + 1,
            "at": time.time(),
        }
        if damage is not None:
            journal.damage = damage
            journal.horizon = Horizon.of(entries)
            resume["damage"] = damage.to_json()
        try:
            journal._append(resume, durable=True, doing="write to")
        except JournalError:
            journal.close()
            raise
        return journal

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        run_id: str,
        *,
        meta: Mapping[str, Any] | None = None,
        backend: BackendName = "jsonl",
        fsync: bool = True,
        damaged: OnDamage = "refuse",
    ) -> Journal:
        """Resume the run in ``directory`` if it holds a journal, else create one."""
        if _detect(Path(directory)) is not None:
            return cls.resume(directory, fsync=fsync, damaged=damaged)
        return cls.create(directory, run_id, meta=meta, backend=backend, fsync=fsync)

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.state.run.get("meta", {}))

    def close(self) -> None:
        """Close the storage and release the directory (late outcomes still get written)."""
        with self._late:
            self._closed = True
            self._backend.close()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------------

    def _append(self, entry: dict[str, Any], *, durable: bool, doing: str = "write to") -> None:
        with self._write:
            entry["seq"] = self._seq
            try:
                self._backend.append(entry, durable=durable)
            except (OSError, sqlite3.Error) as exc:
                raise io_error(self.directory, exc, doing) from exc
            self._seq += 1
            self.state.apply(entry)

    def record_turn(self, turn: int, purpose: str, prompt: str, completion: Completion) -> None:
        """A generation the engine answered (``prompt``: :func:`prompt_hash` of its request)."""
        self._append(
            {
                "kind": "turn",
                "turn": turn,
                "purpose": purpose,
                "prompt": prompt,
                "completion": completion_to_entry(completion),
            },
            durable=False,
        )

    def record_intent(
        self, call: ToolCall, *, key: str, turn: int | None, mode: str, window: int | None
    ) -> None:
        """A call about to start; on disk before it does."""
        self._append(
            {
                "kind": "intent",
                "call_id": call.id,
                "tool": call.name,
                "arguments": call.arguments,
                "key": key,
                "turn": turn,
                "mode": mode,
                "window": window,
                "at": time.time(),
            },
            durable=True,
        )

    def record_outcome(self, result: ToolResult, *, replayed: bool = False) -> None:
        """A call's result as the model sees it; ``status`` says whether its effect is known
        (``unknown`` while an abandoned sync thread still runs)."""
        entry = result_to_entry(result)
        entry.update(
            kind="outcome",
            status="done" if result.outcome_known else "unknown",
            replayed=replayed,
        )
        self._append(entry, durable=True)

    def record_settled(self, call: ToolCall, thread: ToolThread) -> None:
        """The late outcome of an abandoned sync call (called from its worker thread)."""
        error = thread.error
        entry = {
            "kind": "settled",
            "call_id": call.id,
            "tool": call.name,
            "status": "raised" if error is not None else "returned",
            "error": None if error is None else f"{type(error).__name__}: {error}",
            "value": None
            if error is not None
            else result_to_entry(ToolResult(call.id, call.name, "", value=thread.value))["value"],
            "at": time.time(),
        }
        with self._late:
            if not self._closed:
                self._append(entry, durable=True)
                return
            # The run ended before the thread did: write through a fresh handle, with no
            # ``seq`` (another process may be resuming the run and numbering its entries).
            try:
                backend = BACKENDS[_detect(self.directory) or "jsonl"](self.directory)
                try:
                    backend.append(entry, durable=True)
                finally:
                    backend.close()
            except (OSError, sqlite3.Error):  # nothing to stop: the run has ended
                pass

    def record_window(self, index: int, call_ids: list[str], closed_by: str) -> None:
        self._append(
            {"kind": "window", "index": index, "call_ids": call_ids, "closed_by": closed_by},
            durable=False,
        )

    def record_end(self, *, finished: bool, error: str | None, answer: str | None) -> None:
        self._append(
            {"kind": "end", "finished": finished, "error": error, "answer": answer},
            durable=True,
        )


def _acknowledged(entries: list[dict[str, Any]], damage: Damage) -> bool:
    """Whether an earlier resume was told to go on past this damage (it is journaled)."""
    for entry in entries:
        seen = entry.get("damage") if entry.get("kind") == "resume" else None
        if isinstance(seen, dict) and all(
            seen.get(k) == v for k, v in damage.to_json().items() if k != "after"
        ):
            return True
    return False


def _copy(state: JournalState) -> JournalState:
    return JournalState(
        run=dict(state.run),
        turns=dict(state.turns),
        intents=dict(state.intents),
        outcomes=dict(state.outcomes),
        settled=dict(state.settled),
        windows=dict(state.windows),
        end=state.end,
        attempts=state.attempts,
        skipped=state.skipped,
        history={c: list(events) for c, events in state.history.items()},
    )


def _lock(directory: Path) -> IO[str]:
    return lock_directory(
        directory,
        lambda holder: JournalError(
            f"The run in {directory} is being written by {holder}; wait for it to end (or "
            "stop it) before resuming, or use another directory."
        ),
    )
