"""``python -m benchmarks.certified_windows``: which windows certify on the workload tasks.

A change to the certifier must not cost the fan-outs it exists for. This runs each of the 80
workload tasks (the 48 of the protocol and the 32 of the task families) under arm F with the gold policy on a scripted engine (the gold calls, forced,
as the real engine would emit them; no model), and records every window the schema-sound
detector certified (its size) and every call it ran on its own. ``--json OUT`` writes them;
``--compare OLD.json`` says, task by task, where the windows differ from an earlier run.
Run from a checkout of the certifier you want to measure (``PYTHONPATH=...``) to compare two
versions; the result for this version is in ``benchmarks/results/reference_stores/``.

BFCL entries carry no effect declarations (their tools are the worst case), so no window
certifies on them under any version: they are not part of this comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from harness.bench.workload import workload_tasks
from harness.loop import LoopConfig, run_loop
from harness.testing import ScriptedEngine
from harness.toolsets.workspace import load_workspace_manifest

__all__ = ("certified_windows", "main")


def _no_model(messages: Any, tools: Any) -> str:
    raise AssertionError("the gold policy forces every reply")  # pragma: no cover


async def _windows() -> dict[str, list[int]]:
    manifest = load_workspace_manifest()
    out: dict[str, list[int]] = {}
    for wt in workload_tasks():
        toolset, _state = wt.toolset()
        config = LoopConfig(arm="F", policy="gold")
        result = await run_loop(
            ScriptedEngine(_no_model), toolset, wt.task, config, manifest=manifest
        )
        out[wt.id] = [w.n for w in result.windows]
    return out


def certified_windows() -> dict[str, list[int]]:
    """Each workload task's certified windows (their sizes, in order)."""
    return anyio.run(_windows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.certified_windows",
        description="The windows certified on the 80 workload tasks (arm F, gold policy).",
    )
    parser.add_argument("--json", type=Path, help="write the windows as JSON here")
    parser.add_argument("--compare", type=Path, help="an earlier --json to compare with")
    args = parser.parse_args(argv)
    found = certified_windows()
    windows = sum(len(w) for w in found.values())
    calls = sum(sum(w) for w in found.values())
    print(f"{len(found)} tasks, {windows} windows certified, {calls} calls in windows")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    if args.compare:
        old = json.loads(args.compare.read_text())
        differ = sorted(t for t in set(old) | set(found) if old.get(t) != found.get(t))
        for task in differ:
            print(f"  {task}: {old.get(task)} -> {found.get(task)}")
        print(f"{len(differ)} of {len(found)} tasks differ from {args.compare}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
