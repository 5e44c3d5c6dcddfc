"""What a journal says about a run: the replay view folded from its entries, and the codecs
between entries and the loop's values (completions, tool results)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.engines.base import GenerationSettings
from harness.messages import Completion, Message, Timings, ToolCall, ToolSpec, Usage
from harness.tools.execute import ToolResult

__all__ = (
    "EVENTS",
    "JournalState",
    "completion_from_entry",
    "completion_to_entry",
    "prompt_hash",
    "result_from_entry",
    "result_to_entry",
)


#: GenerationSettings fields added after journals were first written, with their defaults
#: (a field absent from this version, e.g. drafted decoding's ``draft_calls``, is skipped).
_LATER_FIELDS: tuple[tuple[str, object], ...] = (
    ("grammar_tools", None),
    ("model", None),
    ("unsent", frozenset()),
    ("draft_calls", ()),
    ("tool_choice", "auto"),
)

#: What can become of a call in one attempt of a run: ``started`` (intent journaled),
#: ``in_doubt`` (the attempt ended with no outcome), ``retried`` (started again with its key),
#: ``finished`` / ``abandoned`` (outcome journaled; abandoned: a sync thread still ran),
#: ``outcome_unknown`` (in doubt, not run again), ``settled_late`` (an abandoned call's late
#: outcome replayed), ``replayed`` (not executed: its journaled outcome was used).
EVENTS = (
    "started",
    "in_doubt",
    "retried",
    "finished",
    "abandoned",
    "outcome_unknown",
    "settled_late",
    "replayed",
)


def prompt_hash(
    messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
) -> str:
    """SHA-256 of what a generation was asked: the chat, the tools and the settings. A resumed
    run that asks something else at a journaled turn has diverged from the journal."""
    asked = asdict(settings)
    # Fields added later, at their defaults, are left out: hashes of older journals still match.
    for key, default in _LATER_FIELDS:
        if key in asked and asked[key] == default:
            asked.pop(key)
    text = json.dumps([list(messages), list(tools), asked], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def completion_to_entry(completion: Completion) -> dict[str, Any]:
    return {
        "content": completion.content,
        "tool_calls": [[c.id, c.name, c.arguments] for c in completion.tool_calls],
        "usage": asdict(completion.usage),
        "timings": asdict(completion.timings),
        "finish_reason": completion.finish_reason,
    }


def completion_from_entry(data: Mapping[str, Any]) -> Completion:
    return Completion(
        content=data.get("content"),
        tool_calls=tuple(ToolCall(str(i), str(n), str(a)) for i, n, a in data["tool_calls"]),
        usage=Usage(**data.get("usage", {})),
        timings=Timings(**data.get("timings", {})),
        finish_reason=data.get("finish_reason", "stop"),
    )


def _json_value(value: Any) -> Any:
    """The tool's raw value if it is plain JSON data (else ``None``: its rendering is kept)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return value


def result_to_entry(result: ToolResult) -> dict[str, Any]:
    return {
        "call_id": result.call_id,
        "tool": result.name,
        "content": result.content,
        "is_error": result.is_error,
        "error_kind": result.error_kind,
        "value": _json_value(result.value),
        "started": result.started,
        "finished": result.finished,
    }


def result_from_entry(data: Mapping[str, Any]) -> ToolResult:
    return ToolResult(
        call_id=str(data["call_id"]),
        name=str(data["tool"]),
        content=str(data["content"]),
        is_error=bool(data["is_error"]),
        error_kind=data.get("error_kind"),
        value=data.get("value"),
        started=float(data.get("started", 0.0)),
        finished=float(data.get("finished", 0.0)),
    )


@dataclass
class JournalState:
    """A run as its journal tells it (later entries win over earlier ones for the same key).

    ``intents`` and ``outcomes`` are keyed by call id; a call with an intent and no outcome is
    *in doubt*: it started and nobody knows whether it took effect. ``settled`` holds late
    outcomes of abandoned sync calls (their threads ended after the call was given up on).
    ``attempts`` counts the processes that wrote the journal (1 + resumes); ``skipped`` the
    entries torn by a crash. ``history`` keeps, per call, what became of it in each attempt
    (:data:`EVENTS`), so a call that was in doubt once stays on the record after a later
    attempt replays it.
    """

    run: dict[str, Any] = field(default_factory=dict)
    turns: dict[int, dict[str, Any]] = field(default_factory=dict)
    intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    settled: dict[str, dict[str, Any]] = field(default_factory=dict)
    windows: dict[int, dict[str, Any]] = field(default_factory=dict)
    end: dict[str, Any] | None = None
    attempts: int = 0
    skipped: int = 0
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def fold(cls, entries: Sequence[Mapping[str, Any]], skipped: int = 0) -> JournalState:
        state = cls(skipped=skipped)
        for entry in entries:
            state.apply(entry)
        return state

    def apply(self, entry: Mapping[str, Any]) -> None:
        kind = entry.get("kind")
        data = dict(entry)
        if kind == "run":
            self.run = data
            self.attempts += 1
        elif kind == "resume":
            for call_id in self.in_doubt:  # started in the attempt that ended, no outcome
                if self.history[call_id][-1]["event"] in ("started", "retried"):
                    self.note(call_id, "in_doubt")
            self.attempts += 1
            self.end = None
        elif kind == "turn":
            self.turns[int(data["turn"])] = data
        elif kind == "intent":
            call_id = str(data["call_id"])
            self.note(call_id, "retried" if call_id in self.intents else "started")
            self.intents[call_id] = data
        elif kind == "outcome":
            call_id = str(data["call_id"])
            if data.get("error_kind") == "outcome_unknown":
                event = "outcome_unknown"
            elif data.get("replayed"):
                event = "settled_late"
            else:
                event = "finished" if data.get("status", "done") == "done" else "abandoned"
            self.note(call_id, event)
            self.outcomes[call_id] = data
        elif kind == "settled":
            self.settled[str(data["call_id"])] = data
        elif kind == "window":
            self.windows[int(data["index"])] = data
        elif kind == "end":
            self.end = data

    def note(self, call_id: str, event: str) -> None:
        """Add ``event`` (:data:`EVENTS`) to ``call_id``'s history, at the current attempt."""
        self.history.setdefault(call_id, []).append({"attempt": self.attempts, "event": event})

    def eventful(self) -> dict[str, list[dict[str, Any]]]:
        """The history of every call that was ever in doubt (the others started, finished and
        were at most replayed)."""
        return {
            c: list(events)
            for c, events in self.history.items()
            if any(e["event"] in ("in_doubt", "outcome_unknown", "retried") for e in events)
        }

    @property
    def run_id(self) -> str:
        return str(self.run.get("run_id", ""))

    @property
    def in_doubt(self) -> list[str]:
        """Call ids that started (intent journaled) and have no journaled outcome."""
        return [c for c in self.intents if c not in self.outcomes]

    @property
    def finished(self) -> bool:
        return self.end is not None and bool(self.end.get("finished"))
