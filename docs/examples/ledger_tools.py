"""A toolset whose writes land in a plain file outside the harness: docs/durability.md.

``record(entry)`` appends one line to the file ``$LEDGER_FILE`` (default ``ledger.txt``): it is
neither idempotent nor keyed, so a journaled run killed while it runs must never repeat it.
``read_ledger()`` reads the file. ``$LEDGER_DELAY`` (seconds, default 0) slows each write down,
so that a kill lands in the middle of a run.

    cd docs/examples
    harness run --toolset ledger_tools:make_toolset --tasks ledger_tasks.jsonl \\
        --engine scripted --policy gold --arm S --journal /tmp/ledger-run
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from harness import Toolset, tool


def _file() -> Path:
    return Path(os.environ.get("LEDGER_FILE", "ledger.txt"))


def make_toolset() -> Toolset:
    @tool(read_only=True, read_targets="ledger")
    def read_ledger() -> str:
        """Read every entry of the ledger."""
        return _file().read_text(encoding="utf-8") if _file().exists() else ""

    @tool(write_targets="ledger", read_targets=(), timeout_s=60.0)
    def record(entry: str) -> str:
        """Append one entry to the ledger (not idempotent: twice is two entries)."""
        time.sleep(float(os.environ.get("LEDGER_DELAY", "0")))
        with _file().open("a", encoding="utf-8") as f:
            f.write(entry + "\n")
            f.flush()
            os.fsync(f.fileno())
        return f"recorded {entry!r}"

    return Toolset([read_ledger, record])
