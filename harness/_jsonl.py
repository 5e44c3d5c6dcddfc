"""Append-only JSONL files that survive a crash: the ledger's trace, the journal, bench results.

A process killed in the middle of ``write`` leaves a *torn* last line: a prefix of a record
with no newline. Two rules make such a file safe to read and to keep appending to:

- :func:`open_append` ends a torn last line (writes the missing newline) before the first new
  record, so the next record starts on a line of its own instead of being glued to the torn
  one (and lost with it when the file is read back).
- :func:`read_jsonl` skips lines that are not a JSON object (each is a crash point) and says
  how many it skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

__all__ = ("append_line", "end_torn_line", "open_append", "read_jsonl")


def end_torn_line(path: Path) -> bool:
    """If ``path`` ends without a newline (a torn last record), add one. True when it did."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    if size == 0:
        return False
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
    if last == b"\n":
        return False
    with path.open("ab") as f:
        f.write(b"\n")
    return True


def open_append(path: Path) -> IO[str]:
    """Open ``path`` for appending records (creating its folder), a torn last line ended first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    end_torn_line(path)
    return path.open("a", encoding="utf-8")


def append_line(out: IO[str], data: Any, *, fsync: bool = False) -> None:
    """Write ``data`` as one JSON line and flush it (and ``fsync`` it to disk when asked)."""
    out.write(json.dumps(data, sort_keys=True, default=str) + "\n")
    out.flush()
    if fsync:
        os.fsync(out.fileno())


def read_jsonl(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """Every JSON-object line of ``path`` and how many lines were skipped (torn by a crash)."""
    records: list[dict[str, Any]] = []
    skipped = 0
    with Path(path).open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                skipped += 1
                continue
            if isinstance(record, dict):
                records.append(record)
            else:
                skipped += 1
    return records, skipped
