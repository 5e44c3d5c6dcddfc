"""The ledger: every turn, call and window of a run, as structured events.

Each record is a frozen dataclass with a ``kind`` (``turn``, ``call``, ``window``, ``run``,
and the proxy's ``unrestored`` and ``exchange``).
A :class:`Ledger` keeps them in memory, logs each one as a debug event (logger
``harness.ledger``, event name = kind; silent unless the application configures logging, see
:mod:`harness._logging`) and, when given a path, appends it to a JSONL trace.

The fields with a closed set of values have ``Literal`` types exported here (:data:`Purpose`,
:data:`CallMode`, :data:`SettledOutcome`, :data:`UnrestoredReason`, and the arm:
:data:`~harness.loop.arm_label.Arm`); they type the code that writes and compares them. A JSONL
trace is read back as plain dicts (:meth:`Ledger.read_jsonl`), so a trace holding a value
this version does not know still loads.

Billed tokens are counted as the paper counts them: all input plus all output tokens of every
generation (``prompt_tokens + completion_tokens``), cached or not.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from harness._jsonl import append_line, open_append, read_jsonl
from harness._logging import get_logger
from harness.loop.arm_label import Arm, ArmLabel
from harness.tools.execute import CallMode

__all__ = (
    "CallMode",
    "CallRecord",
    "ExchangeRecord",
    "Ledger",
    "Purpose",
    "Record",
    "RunRecord",
    "SettledOutcome",
    "SettledRecord",
    "TurnRecord",
    "UnrestoredReason",
    "UnrestoredRecord",
    "WindowRecord",
)

#: Why a turn was generated (:attr:`TurnRecord.purpose`).
Purpose = Literal["call", "answer", "absorb", "resample", "discard"]
#: How an abandoned sync call ended (:attr:`SettledRecord.outcome`).
SettledOutcome = Literal["returned", "raised"]
#: Why the proxy passed a client's window through as sent (:attr:`UnrestoredRecord.reason`).
UnrestoredReason = Literal["edited", "reshaped", "results", "text"]

_log = get_logger("harness.ledger")


@dataclass(frozen=True)
class TurnRecord:
    """One generation. ``purpose``: ``call`` (emitted calls), ``answer`` (final answer),
    ``absorb`` (first turn after a window closed), ``resample`` (a P+V candidate),
    ``discard`` (a call dropped under D2: no generation of its own, so no tokens).
    ``token_digest``: the generated token ids' digest (:func:`harness.engines.base.token_digest`;
    empty when the engine does not report the ids)."""

    run_id: str
    turn: int
    arm: Arm
    purpose: Purpose
    n_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    engine_s: float = 0.0
    queue_s: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    wall_s: float = 0.0
    started: float = 0.0
    window_open: bool = False
    token_digest: str = ""
    kind: str = "turn"

    @property
    def billed_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class CallRecord:
    """One executed call. ``mode``: ``serial``, ``window`` (withheld, run concurrently at
    close), ``eager`` (withheld, started when emitted), ``speculated`` (it took over a
    speculation, arm F+spec), ``parallel`` (a P/P+V message) or ``client`` (the proxy: the
    client ran it).
    ``outcome_known`` is False for a sync call abandoned while its thread still ran (a
    :class:`SettledRecord` follows when it ends); ``error_kind="outcome_unknown"`` marks an
    in-doubt call of a resumed run that was not run again (:mod:`harness.journal`)."""

    run_id: str
    call_id: str
    tool: str
    arguments: str
    turn: int
    mode: CallMode
    window: int | None
    is_error: bool
    error_kind: str | None
    started: float
    finished: float
    result_chars: int
    outcome_known: bool = True
    kind: str = "call"

    @property
    def tool_s(self) -> float:
        return self.finished - self.started


@dataclass(frozen=True)
class SettledRecord:
    """The late outcome of an abandoned sync call (timed out or cancelled): its thread ended
    after the call was given up on. ``outcome``: ``returned`` (a write it made has landed)
    or ``raised`` (``error`` says what). ``finished`` is a ``time.monotonic()`` stamp."""

    run_id: str
    call_id: str
    tool: str
    outcome: SettledOutcome
    error: str | None
    finished: float
    kind: str = "settled"


@dataclass(frozen=True)
class WindowRecord:
    """One window that ran concurrently: its calls, why it closed, how long its tools took
    (``tool_wall_s``: first start to last finish) against one-by-one (``tool_serial_s``).

    Arm F+spec (:mod:`harness.certify.speculation`) adds what speculation did for the window's phase:
    ``spec_predicted`` calls started before they were emitted (0: prediction was not
    possible), ``spec_hits`` emitted calls that took one over, ``spec_misses`` that matched
    none, ``spec_cancelled`` unmatched ones discarded at close and ``spec_wasted_s`` the tool
    seconds they cost (``None`` in the other arms)."""

    run_id: str
    index: int
    arm: Arm
    detector: str
    phase: str | None
    n: int
    call_ids: tuple[str, ...]
    #: Why the window closed: how the loop ended it (``final_answer``, ``message``, ``end``,
    #: ``aborted``, ...) or the certification failure code of the call that closed it — an
    #: open set (:attr:`harness.certify.Failure.code`), so a plain ``str``.
    closed_by: str
    evidence: tuple[str, ...]
    opened_turn: int
    closed_turn: int
    tool_wall_s: float
    tool_serial_s: float
    spec_predicted: int | None = None
    spec_hits: int | None = None
    spec_misses: int | None = None
    spec_cancelled: int | None = None
    spec_wasted_s: float | None = None
    #: The window's calls as emitted (tool names and raw arguments, in ``call_ids`` order):
    #: what an audit needs to recheck the certificate, also when a run ended with the window
    #: open (``closed_by="aborted"``: its calls never ran, so no call records exist).
    tools: tuple[str, ...] = ()
    arguments: tuple[str, ...] = ()
    kind: str = "window"


@dataclass(frozen=True)
class RunRecord:
    """The summary of one run. :attr:`label` names its arm as
    :class:`~harness.loop.arm_label.ArmLabel` (``F+spec`` for ``arm="F"`` with ``speculate``)."""

    run_id: str
    task_id: str
    arm: Arm
    policy: str
    detector: str
    eager: bool
    finished: bool
    error: str | None
    answer: str | None
    turns: int
    calls: int
    windows: int
    discards: int
    resamples: int
    model_errors: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    billed_tokens: int
    engine_s: float
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)
    speculate: bool = False
    kind: str = "run"

    @property
    def label(self) -> ArmLabel:
        return ArmLabel.of(self.arm, eager=self.eager, speculate=self.speculate)


@dataclass(frozen=True)
class UnrestoredRecord:
    """A window the proxy (:mod:`harness.proxy.restore`) handed to a client that came back
    changed and was passed through as sent, once per window: ``window`` its key, ``reason``
    ``edited`` (an argument value or tool changed, or an id not minted for it), ``reshaped``
    (calls missing, split or reordered), ``results`` (results missing, unknown or
    repeated) or ``text`` (written back as text in a form :mod:`harness.proxy.text_history`
    does not restore), ``message`` what was wrong."""

    run_id: str
    window: str
    reason: UnrestoredReason
    message: str
    kind: str = "unrestored"


@dataclass(frozen=True)
class ExchangeRecord:
    """One request the proxy answered (written only to a ledger file, ``harness serve
    --ledger FILE``), as the client got it, as a serial trace needs it to draft a skill
    manifest (``harness init --traces``): ``turn`` the
    assistant messages the client's history held, ``tools`` and ``arguments`` the calls the
    reply carried (names and raw argument strings, in order), ``prompt`` the first user
    message's text on a conversation's first request (``None`` on the later ones).
    ``before`` and ``after`` chain the requests of one conversation: ``before`` is the
    digest of the request's history, the results it brings left out, ``after`` of that
    history with the reply appended (:func:`harness.proxy.conversation.history_digest`), so
    the next request of the conversation has ``before`` equal to this one's ``after`` (a
    flattened window, which the client's next request brings in its own shape, ends the
    chain)."""

    run_id: str
    turn: int
    before: str
    after: str
    tools: tuple[str, ...] = ()
    arguments: tuple[str, ...] = ()
    prompt: str | None = None
    kind: str = "exchange"


Record = (
    TurnRecord
    | CallRecord
    | SettledRecord
    | WindowRecord
    | RunRecord
    | UnrestoredRecord
    | ExchangeRecord
)


def record_to_dict(record: Record) -> dict[str, Any]:
    data = asdict(record)
    if isinstance(record, TurnRecord):
        data["billed_tokens"] = record.billed_tokens
    return data


class Ledger:
    """Collects records; logs each and optionally appends it to a JSONL file."""

    def __init__(
        self, path: str | Path | None = None, *, log: bool = True, keep: int | None = None
    ) -> None:
        """``keep``: hold at most about that many records in :attr:`records` (the newest;
        a long-running server's ledger must not grow without end); ``None``: every one."""
        self.records: list[Record] = []
        self._keep = keep
        self.path = Path(path) if path is not None else None
        self._log = log
        self._file: IO[str] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def emit(self, record: Record) -> None:
        """Keep, log and write ``record`` (safe from a worker thread: a late outcome)."""
        with self._lock:
            self.records.append(record)
            if self._keep is not None and len(self.records) > 2 * self._keep:
                del self.records[: -self._keep]  # amortised: once every `keep` records
            if not self._log and self.path is None:
                return  # kept only: no need to turn it into a dict
            data = record_to_dict(record)
            if self._log:
                _log.debug(record.kind, **{k: v for k, v in data.items() if k != "kind"})
            if self.path is None:
                return
            if self._closed:  # a late outcome after the run: a short-lived handle
                with open_append(self.path) as out:
                    append_line(out, data)
                return
            if self._file is None:  # a torn last line from a crash is ended first
                self._file = open_append(self.path)
            append_line(self._file, data)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None

    @staticmethod
    def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
        """Read a JSONL trace back as dicts (lines torn by a crash are skipped)."""
        return read_jsonl(path)[0]
