"""``python -m benchmarks.certifier_bench``: what certifying one call costs.

The schema-sound certifier decides, for every call the model emits in arm F, whether it
joins the open window. This measures that decision — parse the arguments, validate them,
resolve the canonical footprint, check provenance, find conflicts in the window's index —
as microseconds per admitted call:

1. **synthetic**: windows of n = 2 … 64 calls of a tool whose list arguments expand to k =
   1 … 10⁴ targets per call, every call disjoint from the others (so every call joins and the
   index grows to n × k targets: the worst case for the index). At k = 10⁴ a call is over
   the expansion bound (``harness.tools.effects.MAX_TARGETS``) and touches everything: the bound
   at work (such a call joins no window with a writer).
2. **index alone**: the conflict index with footprints of k expanded targets (no bound), to
   show the cost per target is flat up to 10⁴ targets a call, 64 calls a window.
3. **workspace**: the real workspace toolset and manifest at the workload's sizes (a survey
   window of n ``read_doc`` calls, 8 read targets each; a ``set_status_all`` window of n
   writes).
4. **long keys**: one call whose key is 32,000 characters (plain, every character a
   separator, and under the ``case`` fold), admitted into a window: wall time and peak
   memory (``tracemalloc``) of the admission. Targets are bounded (512 characters, 64
   separators), so neither grows with the key beyond one linear pass.

Times are CPU time of this process (``time.process_time``), so other processes on a shared
machine do not count; medians over ``--runs`` repetitions. A calibration figure (ns per
``dict.setdefault``) says how fast this machine runs Python at the moment. The goal (issue 15): < 50 µs per admitted call at the
workspace's sizes, and no superlinear growth with n or k (µs per call per target flat).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.certify import SchemaSoundDetector
from harness.certify.conflicts import ConflictIndex
from harness.certify.window import Windows
from harness.messages import ToolCall
from harness.skills.manifest import Manifest, Skill
from harness.tools import Toolset, tool
from harness.tools.effects import MAX_TARGETS, Footprint

__all__ = ("main", "measure", "report")

WINDOWS = (2, 4, 8, 16, 32, 64)
TARGETS = (1, 10, 100, 1_000, 10_000)
GOAL_US = 50.0
LONG_KEY = 32_000
LONG_GOAL_MS = 50.0
LONG_GOAL_MB = 50.0


def _synthetic_toolset() -> Toolset:
    @tool(idempotent=True, write_targets="doc:{keys}/{fields}", read_targets=())
    def put(keys: list[str], fields: list[str], value: str) -> str:
        """Set ``fields`` of every document in ``keys``."""
        return "ok"

    return Toolset([put], name="bench")


_PHASE = Manifest.from_dict(
    {"skills": {"bench": {"phases": [{"name": "put", "kind": "fan_out", "tools": ["put"]}]}}}
).skill("bench")


def _split(k: int) -> tuple[int, int]:
    """Two list lengths whose product is ``k`` (as square as possible)."""
    a = int(k**0.5)
    while k % a:
        a -= 1
    return k // a, a


def _synthetic_calls(n: int, k: int) -> list[ToolCall]:
    a, b = _split(k)
    calls = []
    for i in range(n):
        args = {
            "keys": [f"w{i}k{j}" for j in range(a)],
            "fields": [f"f{j}" for j in range(b)],
            "value": "v",
        }
        calls.append(ToolCall(f"call_{i}", "put", json.dumps(args)))
    return calls


def _factory(
    detector: SchemaSoundDetector, toolset: Toolset, skill: Skill, inputs: dict[str, Any]
) -> Callable[[], Any]:
    """A fresh tracker and window owner per run (the loop's own path: ``Windows.admit``)."""
    return lambda: Windows(detector.tracker(toolset, skill, inputs))


def _time_admissions(make: Callable[[], Any], calls: Sequence[ToolCall], runs: int) -> float:
    """Median µs per admitted call: a fresh tracker per run, every call admitted. One
    untimed run first: in a loop the certifier's code is warm (Python 3.11 specialises
    bytecode after a few executions; caches per tool and phase fill on first use)."""
    samples = []
    warm = make()
    for call in calls:
        warm.admit(call)
    for _ in range(runs):
        windows = make()
        started = time.process_time()
        for call in calls:
            windows.admit(call)
        samples.append((time.process_time() - started) / len(calls) * 1e6)
    return statistics.median(samples)


def _synthetic(runs: int) -> list[dict[str, Any]]:
    toolset = _synthetic_toolset()
    rows = []
    for k in TARGETS:
        for n in WINDOWS:
            detector = SchemaSoundDetector(max_window=n)
            calls = _synthetic_calls(n, k)
            windows = Windows(detector.tracker(toolset, _PHASE, {}))
            joined = sum(windows.admit(c).admission.action == "join" for c in calls)
            us = _time_admissions(_factory(detector, toolset, _PHASE, {}), calls, runs)
            rows.append(
                {"n": n, "k": k, "us_per_call": us, "joined": joined, "bounded": k > MAX_TARGETS}
            )
    return rows


def _index_alone(runs: int) -> list[dict[str, Any]]:
    rows = []
    for k in TARGETS:
        for n in (2, 16, 64):
            prints = [
                Footprint(frozenset(f"doc:w{i}k{j}/status" for j in range(k)), frozenset())
                for i in range(n)
            ]
            samples = []
            for _ in range(max(1, runs // 2)):
                index = ConflictIndex()
                started = time.process_time()
                for i, footprint in enumerate(prints):
                    if index.find(footprint) is None:
                        index.add(i, footprint)
                samples.append((time.process_time() - started) / n * 1e6)
            us = statistics.median(samples)
            rows.append({"n": n, "k": k, "us_per_call": us, "ns_per_target": us * 1e3 / k})
    return rows


def _workspace(runs: int) -> list[dict[str, Any]]:
    from harness.toolsets.workspace import load_workspace_manifest, make_toolset, new_state

    manifest = load_workspace_manifest()
    toolset = make_toolset(new_state(0))
    keys = [f"d{100 + i}" for i in range(64)]
    rows = []
    for skill, tool_name, extra in (
        ("survey", "read_doc", {}),
        ("set_status_all", "set_status", {"status": "approved"}),
    ):
        for n in (2, 6, 8, 16):
            inputs = {"keys": keys[:n], **extra}
            calls = [
                ToolCall(f"call_{i}", tool_name, json.dumps({"key": keys[i], **extra}))
                for i in range(n)
            ]
            detector = SchemaSoundDetector()
            windows = Windows(detector.tracker(toolset, manifest.skill(skill), inputs))
            joined = sum(windows.admit(c).admission.action == "join" for c in calls)
            us = _time_admissions(
                _factory(detector, toolset, manifest.skill(skill), inputs), calls, runs
            )
            rows.append({"skill": skill, "n": n, "us_per_call": us, "joined": joined})
    return rows


def _long_keys(runs: int) -> list[dict[str, Any]]:
    import tracemalloc

    @tool(write_targets="doc:{key}", read_targets="doc:{key}", canonical="case")
    def folded(key: str) -> str:
        return key

    @tool(write_targets="raw:{key}", read_targets="raw:{key}")
    def plain(key: str) -> str:
        return key

    toolset = Toolset([folded, plain])
    manifest = Manifest.from_dict(
        {
            "skills": {
                "s": {"phases": [{"name": "g", "kind": "fan_out", "tools": ["folded", "plain"]}]}
            }
        },
        source="certifier_bench",
    )
    rows = []
    for label, name, key in (
        ("plain", "plain", "k" * LONG_KEY),
        ("separators", "plain", "/" * LONG_KEY),
        ("a/ repeated", "plain", "a/" * (LONG_KEY // 2)),
        ("case fold", "folded", "Ǆ/" * (LONG_KEY // 2)),
    ):
        walls, peaks = [], []
        for i in range(runs):
            detector = SchemaSoundDetector()
            windows = Windows(detector.tracker(toolset, manifest.skill("s"), {}))
            windows.admit(ToolCall(f"call_a{i}", name, json.dumps({"key": "short"})))
            call = ToolCall(f"call_b{i}", name, json.dumps({"key": key}))
            tracemalloc.start()
            started = time.perf_counter()
            windows.admit(call)
            walls.append((time.perf_counter() - started) * 1e3)
            peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
            tracemalloc.stop()
        rows.append(
            {
                "key": label,
                "chars": len(key),
                "ms": statistics.median(walls),
                "peak_mb": statistics.median(peaks),
            }
        )
    return rows


def _calibration() -> float:
    """ns per ``dict.setdefault`` on this machine now (median of 5)."""
    samples = []
    for _ in range(5):
        d: dict[int, int] = {}
        started = time.process_time()
        for i in range(200_000):
            d.setdefault(i, i)
        samples.append((time.process_time() - started) / 200_000 * 1e9)
    return statistics.median(samples)


def measure(runs: int = 7) -> dict[str, Any]:
    """Every figure of the benchmark (see the module docstring)."""
    calibration = _calibration()
    synthetic = _synthetic(runs)
    index = _index_alone(runs)
    workspace = _workspace(runs)
    long_keys = _long_keys(runs)
    worst_workspace = max(r["us_per_call"] for r in workspace)
    by_k: dict[int, list[float]] = {}
    for row in synthetic:
        by_k.setdefault(row["k"], []).append(row["us_per_call"])
    growth = {
        k: max(v) / min(v) for k, v in by_k.items()
    }  # µs/call at the slowest n over the fastest n
    return {
        "runs": runs,
        "calibration_ns_per_dict_op": calibration,
        "max_targets": MAX_TARGETS,
        "synthetic": synthetic,
        "index": index,
        "workspace": workspace,
        "goal_us": GOAL_US,
        "workspace_worst_us": worst_workspace,
        "meets_goal": worst_workspace < GOAL_US,
        "growth_over_n": growth,
        "long_keys": long_keys,
        "long_goal_ms": LONG_GOAL_MS,
        "long_goal_mb": LONG_GOAL_MB,
        "long_meets_goal": all(
            r["ms"] < LONG_GOAL_MS and r["peak_mb"] < LONG_GOAL_MB for r in long_keys
        ),
    }


def report(doc: dict[str, Any]) -> str:
    lines = [
        f"Certifier cost, median CPU µs per admitted call over {doc['runs']} runs "
        f"(this machine now: {doc['calibration_ns_per_dict_op']:.0f} ns per dict.setdefault)",
        "",
        "1. synthetic windows (rows: targets per call k; columns: window size n)",
        "   k \\ n  " + "".join(f"{n:>9}" for n in WINDOWS) + "   max/min over n",
    ]
    for k in TARGETS:
        row = [r for r in doc["synthetic"] if r["k"] == k]
        note = "  (over the bound: touches everything)" if row[0]["bounded"] else ""
        lines.append(
            f"   {k:>6}  "
            + "".join(f"{r['us_per_call']:>9.1f}" for r in row)
            + f"   {doc['growth_over_n'][k]:.2f}{note}"
        )
    lines += ["", "2. the conflict index alone (ns per target, expanded, no bound)"]
    lines.append("   k \\ n  " + "".join(f"{n:>9}" for n in (2, 16, 64)))
    for k in TARGETS:
        row = [r for r in doc["index"] if r["k"] == k]
        lines.append(f"   {k:>6}  " + "".join(f"{r['ns_per_target']:>9.0f}" for r in row))
    lines += ["", "3. the workspace (real toolset and manifest)"]
    for r in doc["workspace"]:
        lines.append(
            f"   {r['skill']:<15} n={r['n']:>2}: {r['us_per_call']:6.1f} µs/call "
            f"({r['joined']} joined)"
        )
    lines += ["", f"4. one call with a {LONG_KEY:,}-character key (wall ms, peak MB, median)"]
    for r in doc.get("long_keys", ()):
        lines.append(f"   {r['key']:<12} {r['ms']:8.2f} ms {r['peak_mb']:8.2f} MB")
    verdict = "meets" if doc["meets_goal"] else "MISSES"
    lines += [
        "",
        f"Goal < {doc['goal_us']:.0f} µs per call at the workspace's sizes: {verdict} it "
        f"(worst {doc['workspace_worst_us']:.1f} µs).",
    ]
    if "long_keys" in doc:
        verdict = "meets" if doc["long_meets_goal"] else "MISSES"
        lines.append(
            f"Goal < {doc['long_goal_ms']:.0f} ms and {doc['long_goal_mb']:.0f} MB for a "
            f"{LONG_KEY:,}-character key: {verdict} it."
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.certifier_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=7, help="repetitions (median), default 7")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    doc = measure(args.runs)
    print(report(doc))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    return 0 if doc["meets_goal"] else 1


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
