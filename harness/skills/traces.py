"""Recorded serial runs, read as chats for :func:`~harness.skills.draft_manifest.mine_fan_outs`.

``harness init --traces PATH`` takes three kinds of record, told apart by their contents:

- a **JSONL of chats** in the OpenAI format: each line a list of messages or an object with
  ``messages`` (:func:`~harness.skills.draft_manifest.read_chats`);
- the **proxy's ledger** (``harness serve --ledger FILE``): its ``exchange`` records
  (:class:`~harness.loop.ledger.ExchangeRecord`, one per request, as the client got it),
  chained into conversations by their digests (a request whose ``before`` is an earlier
  one's ``after`` continues it); a conversation's prompt is its first request's;
- **journals** of ``harness run --journal DIR`` (a ``journal.jsonl``, or a directory searched
  for them: one per arm, or per job of a batch): each journaled turn's completion, in turn
  order (the last entry of a turn a resume generated again); the prompt from the journal's
  header (``meta.prompt``, a batch job's) or the run's ``run.json`` (one task's ``--prompt``).

Each becomes a list of OpenAI-format messages: the first user message (the prompt, when the
record has it) and one assistant message per turn with its calls — what the miner reads.
Anything else is one :class:`~harness.errors.ConfigError` saying what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness._jsonl import read_jsonl
from harness.errors import ConfigError
from harness.skills.draft_manifest import read_chats

__all__ = ("LEDGER_KINDS", "Traces", "read_traces")

#: The ``kind`` of every record a ledger holds (:mod:`harness.loop.ledger`).
LEDGER_KINDS = frozenset({"turn", "call", "window", "run", "settled", "unrestored", "exchange"})

_EXPECTED = (
    'expected a JSONL of OpenAI-format chats (a list of messages, or {"messages": [...]}, '
    "per line), a proxy ledger (harness serve --ledger FILE), or a harness run journal "
    "(journal.jsonl, or the --journal directory)"
)


@dataclass(frozen=True)
class Traces:
    """The chats read from ``source``; ``kind`` says what it was (``chats``, ``ledger``,
    ``journals``)."""

    source: str
    kind: str
    chats: list[list[Mapping[str, Any]]]

    @property
    def described(self) -> str:
        what = {"chats": "JSONL of chats", "ledger": "a proxy ledger", "journals": "journals"}
        return f"{self.source} ({what[self.kind]})"


def read_traces(path: str | Path) -> Traces:
    """The serial runs recorded at ``path`` (see the module docstring)."""
    source = Path(path)
    if source.is_dir():
        return Traces(str(source), "journals", _read_journals(source))
    first = _first_record(source)
    if isinstance(first, Mapping) and "seq" in first and first.get("kind") == "run":
        return Traces(str(source), "journals", _read_journals(source))
    if isinstance(first, Mapping) and first.get("kind") in LEDGER_KINDS:
        return Traces(str(source), "ledger", _read_ledger(source))
    if isinstance(first, list) or (isinstance(first, Mapping) and "messages" in first):
        return Traces(str(source), "chats", read_chats(source))
    raise ConfigError(f"Traces {source}: not a recognized trace; {_EXPECTED}.")


def _first_record(source: Path) -> Any:
    try:
        with source.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        return json.loads(line)
                    except ValueError:
                        raise ConfigError(
                            f"Traces {source}, line {number}: not JSON; {_EXPECTED}."
                        ) from None
    except OSError as exc:
        raise ConfigError(f"Cannot read traces {source}: {exc.strerror or exc}.") from None
    except UnicodeDecodeError:
        raise ConfigError(f"Traces {source}: not UTF-8 text; {_EXPECTED}.") from None
    raise ConfigError(f"Traces {source} hold no record.")


def _assistant(turn: int, calls: Iterable[tuple[str, str]], text: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    made = [
        {
            "id": f"t{turn}_{i}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        for i, (name, arguments) in enumerate(calls)
    ]
    if made:
        message["tool_calls"] = made
    return message


def _opening(prompt: Any) -> list[Mapping[str, Any]]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else []


def _read_ledger(source: Path) -> list[list[Mapping[str, Any]]]:
    records = [r for r in read_jsonl(source)[0] if r.get("kind") == "exchange"]
    if not records:
        raise ConfigError(
            f"Traces {source}: a ledger with no exchange records: record the serial runs "
            "with this version's `harness serve --ledger FILE` (before any --effects, or with "
            "X-Harness-Arm: S), then draft from that file."
        )
    chats: list[list[Mapping[str, Any]]] = []
    open_at: dict[str, int] = {}  # a conversation's latest `after` -> its chat
    for record in records:
        index = open_at.pop(str(record.get("before")), None)
        if index is None:
            index = len(chats)
            chats.append(_opening(record.get("prompt")))
        tools, arguments = record.get("tools") or [], record.get("arguments") or []
        turn = int(record.get("turn") or 0)
        chats[index].append(
            _assistant(turn, zip(map(str, tools), map(str, arguments), strict=False))
        )
        open_at[str(record.get("after"))] = index
    return chats


def _journal_files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    found = sorted(source.rglob("journal.jsonl"))
    if not found:
        raise ConfigError(
            f"Traces {source}: a directory with no journal.jsonl under it; {_EXPECTED}."
        )
    return found


def _read_journals(source: Path) -> list[list[Mapping[str, Any]]]:
    return [_read_journal(path) for path in _journal_files(source)]


def _read_journal(path: Path) -> list[Mapping[str, Any]]:
    entries = read_jsonl(path)[0]
    header = next((e for e in entries if e.get("kind") == "run"), None)
    if header is None or "seq" not in header:
        raise ConfigError(f"Traces {path}: not a harness run journal (no header entry).")
    meta = header.get("meta") if isinstance(header.get("meta"), Mapping) else {}
    prompt = meta.get("prompt") if isinstance(meta, Mapping) else None
    if prompt is None:
        prompt = _run_json_prompt(path)
    turns: dict[int, Mapping[str, Any]] = {}
    for entry in entries:
        completion = entry.get("completion")
        if entry.get("kind") == "turn" and isinstance(completion, Mapping):
            turns[int(entry.get("turn") or 0)] = completion
    messages = _opening(prompt)
    for turn in sorted(turns):
        completion = turns[turn]
        calls = [
            (str(c[1]), str(c[2]))
            for c in completion.get("tool_calls") or ()
            if isinstance(c, list) and len(c) == 3
        ]
        messages.append(_assistant(turn, calls, completion.get("content")))
    return messages


def _run_json_prompt(journal: Path) -> str | None:
    """One task's ``--prompt``, from the ``run.json`` of the run directory above the journal
    (``DIR/run.json`` beside ``DIR/ARM/journal/journal.jsonl``)."""
    for directory in list(journal.parents)[:4]:
        recorded = directory / "run.json"
        if recorded.is_file():
            try:
                data = json.loads(recorded.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            prompt = data.get("prompt") if isinstance(data, Mapping) else None
            return prompt if isinstance(prompt, str) else None
    return None
