"""The segments of a resumable ``harness bench`` run: one line per invocation that ran.

A run interrupted and resumed is several segments; its wall time is their sum, not the last
one's. Each segment appends ``{"started", "wall_s", "jobs_run", "command"}`` to
``segments.jsonl`` in the output directory.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness._jsonl import open_append
from harness.loop.ledger import Ledger

__all__ = ("SEGMENTS_FILE", "load_segments", "record_segment")

SEGMENTS_FILE = "segments.jsonl"


def load_segments(out: Path) -> list[dict[str, Any]]:
    """Every segment recorded in ``out`` (a torn last line is ignored)."""
    path = out / SEGMENTS_FILE
    if not path.exists():
        return []
    return [r for r in Ledger.read_jsonl(path) if "wall_s" in r]


def record_segment(
    out: Path, *, wall_s: float, jobs_run: int, command: str
) -> list[dict[str, Any]]:
    """Append this segment (unless it ran nothing) and return all segments so far."""
    if jobs_run:
        record = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - wall_s)),
            "wall_s": round(wall_s, 3),
            "jobs_run": jobs_run,
            "command": command,
        }
        with open_append(out / SEGMENTS_FILE) as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
    return load_segments(out)
