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
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from harness._lockfile import lock_directory
from harness.calls import ToolResult
from harness.engines.base import Completion, ToolCall
from harness.errors import JournalError
from harness.journal._state import (
    JournalState,
    completion_from_entry,
    completion_to_entry,
    prompt_hash,
    result_from_entry,
    result_to_entry,
)
from harness.journal.backends import BACKENDS, BackendName, JournalBackend
from harness.tools import ToolThread

__all__ = (
    "FORMAT",
    "Journal",
    "JournalState",
    "completion_from_entry",
    "idempotency_key",
    "prompt_hash",
    "result_from_entry",
)

#: Bumped when entries change incompatibly; a journal of another format is refused.
FORMAT = 1


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
        #: What the directory held when it was opened: the part of the run to replay.
        self.replay = JournalState.fold([]) if not resumed else _copy(state)

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
        path.mkdir(parents=True, exist_ok=True)
        lock = _lock(path)
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
        )
        return journal

    @classmethod
    def resume(cls, directory: str | os.PathLike[str], *, fsync: bool = True) -> Journal:
        """Take over the journal of a killed (or finished) run in ``directory``."""
        path = Path(directory)
        name = _detect(path)
        if name is None:
            raise JournalError(
                f"{path} holds no run journal (no journal.jsonl or journal.sqlite3); check the "
                "path, or start a new run with --journal."
            )
        lock = _lock(path)
        store = BACKENDS[name](path, fsync=fsync)
        entries, skipped = store.read()
        state = JournalState.fold(entries, skipped)
        if not state.run:
            store.close()
            lock.close()
            raise JournalError(
                f"The journal in {path} has no header entry (it was torn before its first "
                "record was written): nothing ran; start the run again in a new directory."
            )
        if state.run.get("format") != FORMAT:
            store.close()
            lock.close()
            raise JournalError(
                f"The journal in {path} has format {state.run.get('format')!r}; this version "
                f"reads format {FORMAT}. Resume it with the version that wrote it."
            )
        journal = cls(path, store, state, lock, resumed=True)
        journal._append(
            {"kind": "resume", "attempt": state.attempts + 1, "at": time.time()}, durable=True
        )
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
    ) -> Journal:
        """Resume the run in ``directory`` if it holds a journal, else create one."""
        if _detect(Path(directory)) is not None:
            return cls.resume(directory, fsync=fsync)
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

    def _append(self, entry: dict[str, Any], *, durable: bool) -> None:
        self._backend.append(entry, durable=durable)
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
            # The run ended before the thread did: write through a fresh handle.
            backend = BACKENDS[_detect(self.directory) or "jsonl"](self.directory)
            try:
                backend.append(entry, durable=True)
            finally:
                backend.close()

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
    )


def _lock(directory: Path) -> IO[str]:
    return lock_directory(
        directory,
        lambda holder: JournalError(
            f"The run in {directory} is being written by {holder}; wait for it to end (or "
            "stop it) before resuming, or use another directory."
        ),
    )
