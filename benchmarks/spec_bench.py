"""``python -m benchmarks.spec_bench``: certified speculation (F+spec) against F+eager
and P on fan-out windows, on the real engine.

Each *cell* is a loop count K, a tool latency L, a window size n and a repetition: K survey
tasks (one fan-out window of n read-only reads whose keys are task inputs, so speculation
can predict every call) run concurrently on one shared engine under each arm, gold policy
(the engine is constrained to the gold calls: every arm emits the same calls). The arms of a
cell run one after the other, in an order rotated per repetition, so they meet the same load.
Per job it records the run's wall time, the window span (first window turn to the end of its
absorb turn, :func:`~harness.bench.analysis.span`) and, for F+spec, what speculation did
(predicted, hits, misses, cancelled, wasted tool seconds). ``--mixed`` adds the workload's
mixed tasks (phases whose arguments come from earlier results) under the same arms.

Results go to ``OUT/results.jsonl`` one job per line as it finishes (restart the same
command: finished jobs are skipped, so several commands can fill one directory), and the
summary to ``OUT/summary.json`` and ``OUT/report.md``: per (K, L, n) the median wall of each
arm, F+spec / P and F+eager / P, the hit rate and the wasted tool seconds, and for the mixed
tasks how often prediction was possible.

The full grid (n = 2..10, L = 0.1, 0.5, 2 s, K = 1 and 8, three repetitions, three arms) is
``python -m benchmarks.spec_bench --n 2 3 4 5 6 7 8 9 10 --latency 0.1 0.5 2
--concurrency 1 8 --reps 3 --mixed``; run it alone on a quiet machine (walls are
meaningless beside other work).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from harness._jsonl import open_append, read_jsonl
from harness.bench.analysis import span
from harness.bench.jobs import run_job
from harness.bench.report_facts import format_cell
from harness.bench.workload import WorkloadTask, build_task, generate_tasks
from harness.engines.base import Engine, reset_prefix_cache
from harness.loop.arm_label import ARM_LABEL_NAMES
from harness.runs.jobs import JobSpec
from harness.toolsets.workspace import load_workspace_manifest

__all__ = ("main", "measure", "run_cell", "summarise", "survey_task")

ARMS: tuple[str, ...] = ("F+eager", "F+spec", "P")
DEFAULT_OUT = Path("benchmarks/results/spec")


def survey_task(n: int, copy: int, seed: int = 0) -> WorkloadTask:
    """A survey task with one fan-out window of ``n`` reads (``copy``: which of K loops)."""
    built = build_task(seed, 1000 + 37 * n + copy, "fan_out", "survey", (n,))
    task = replace(built.task, id=f"survey-n{n}-k{copy}")
    return replace(built, task=task)


def _row(job: dict[str, Any], cell: dict[str, Any]) -> dict[str, Any]:
    windows = [w for w in job["windows"] if len(w["call_ids"]) >= 2]
    spans = [s for w in windows if (s := span(job, tuple(w["call_ids"]))) is not None]
    spec = {
        key: sum(w.get(f"spec_{key}") or 0 for w in job["windows"])
        for key in ("predicted", "hits", "misses", "cancelled")
    }
    spec["wasted_s"] = sum(w.get("spec_wasted_s") or 0.0 for w in job["windows"])
    spec["windows"] = len(job["windows"])
    spec["windows_predicted"] = sum(1 for w in job["windows"] if w.get("spec_predicted"))
    summary = job["summary"]
    return {
        **cell,
        "task_id": job["task_id"],
        "arm": job["label"],
        "success": job["success"],
        "error": job["error"],
        "wall_s": summary.get("wall_s"),
        "window_span_s": sum(spans) if spans else None,
        "turns": summary.get("turns"),
        "billed_tokens": summary.get("billed_tokens"),
        "speculation": spec if job.get("speculate") else None,
    }


def _key(row: dict[str, Any]) -> str:
    return "|".join(str(row[k]) for k in ("group", "K", "L", "n", "rep", "arm"))


async def run_cell(
    engine: Engine,
    tasks: Sequence[WorkloadTask],
    label: str,
    latency: float,
    rep: int,
    manifest: Any,
    *,
    policy: str = "gold",
    skill_tools: bool = False,
    open_slots: bool = False,
) -> list[dict[str, Any]]:
    """The K tasks of one cell under one arm and policy, concurrently (each one job);
    ``skill_tools`` and ``open_slots`` are the manifest-guided levers."""
    spec = JobSpec.from_label(
        label,
        policy=policy,
        latency_s=latency,
        latency_seed=rep,
        skill_tools=skill_tools,
        open_slots=open_slots,
    )
    jobs: list[dict[str, Any]] = []

    async def one(wt: WorkloadTask) -> None:
        jobs.append(await run_job(engine, wt, spec, manifest))

    async with anyio.create_task_group() as group:
        for wt in tasks:
            group.start_soon(one, wt)
    return jobs


def _cells(args: argparse.Namespace) -> Iterable[tuple[dict[str, Any], list[WorkloadTask]]]:
    # Repetitions outermost: an interrupted run still has every (K, L, n) measured.
    for rep in range(args.reps):
        for k in args.concurrency:
            for latency in args.latency:
                for n in args.n:
                    cell = {"group": "fan_out", "K": k, "L": latency, "n": n, "rep": rep}
                    yield cell, [survey_task(n, copy, seed=rep) for copy in range(k)]
    if args.mixed:
        mixed = [t for t in generate_tasks(0) if t.kind == "mixed"][: args.mixed]
        for rep in range(getattr(args, "mixed_reps", 1)):
            for wt in mixed:
                cell = {"group": wt.id, "K": 1, "L": args.latency[0], "n": 0, "rep": rep}
                yield cell, [wt]


def _warmers(cell: dict[str, Any]) -> list[WorkloadTask]:
    """Tasks of the cell's shape with other documents: they warm the shared prefix only."""
    n = cell["n"] if cell["group"] == "fan_out" else 2
    return [survey_task(n, copy, seed=1000 + cell["rep"]) for copy in range(cell["K"])]


async def measure(engine: Engine, args: argparse.Namespace, out: Path) -> None:
    """Run every cell not yet in ``out/results.jsonl`` (without an error) and append its
    rows."""
    path = out / "results.jsonl"
    done = {_key(r) for r in read_jsonl(path)[0] if not r["error"]} if path.exists() else set()
    manifest = load_workspace_manifest()
    for cell, tasks in _cells(args):
        arms = list(args.arms)
        shift = cell["rep"] % len(arms)
        todo = [a for a in arms[shift:] + arms[:shift] if _key({**cell, "arm": a}) not in done]
        warm = [replace(t, task=replace(t.task, id=f"warm-{t.id}")) for t in _warmers(cell)]
        for label in todo:  # rotated per repetition: no arm always runs first
            rowcell = {**cell, "arm": label}
            # Every arm starts from the same cache: emptied, then the shared prefix (system
            # prompt and tools) warmed by another task of the same shape.
            await reset_prefix_cache(engine)
            await run_cell(engine, warm, "P", 0.0, cell["rep"], manifest)
            started = time.monotonic()
            jobs = await run_cell(engine, tasks, label, cell["L"], cell["rep"], manifest)
            rows = [_row(job, cell) for job in jobs]
            with open_append(path) as fh:
                for row in rows:
                    fh.write(json.dumps({**row, "cell_wall_s": time.monotonic() - started}) + "\n")
            walls = ", ".join(f"{r['wall_s']:.2f}" for r in rows if r["wall_s"] is not None)
            print(f"{_key(rowcell)}: wall {walls} s", flush=True)


def _median(values: Iterable[float | None]) -> float | None:
    data = [v for v in values if v is not None]
    return statistics.median(data) if data else None


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians per (K, L, n) and arm, ratios to P, hit rates and wasted seconds; the mixed
    tasks' prediction coverage."""
    cells: dict[tuple[int, float, int], dict[str, list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    mixed: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["error"]:
            continue  # an engine that died, a budget: not a measurement (the rerun replaces it)
        if row["group"] == "fan_out":
            cells[(row["K"], row["L"], row["n"])][row["arm"]].append(row)
        else:
            mixed[row["group"]][row["arm"]].append(row)
    fan_out = []
    for (k, latency, n), arms in sorted(cells.items()):
        wall = {arm: _median(r["wall_s"] for r in rs) for arm, rs in arms.items()}
        window = {arm: _median(r["window_span_s"] for r in rs) for arm, rs in arms.items()}
        entry: dict[str, Any] = {
            "K": k,
            "L": latency,
            "n": n,
            "runs": {arm: len(rs) for arm, rs in arms.items()},
            "wall_s": wall,
            "window_s": window,
            "ok": all(r["success"] for rs in arms.values() for r in rs),
        }
        for arm in ("F+spec", "F+eager"):
            if wall.get(arm) and wall.get("P"):
                entry[f"{arm}/P"] = wall[arm] / wall["P"]  # type: ignore[operator]
        entry.update(_spec_stats(arms.get("F+spec", [])))
        fan_out.append(entry)
    mixed_rows = []
    for group, arms in sorted(mixed.items()):
        wall = {arm: _median(r["wall_s"] for r in rs) for arm, rs in arms.items()}
        mixed_rows.append(
            {"task": group, "wall_s": wall, "ok": all(r["success"] for rs in arms.values() for r in rs),
             **_spec_stats(arms.get("F+spec", []))}
        )  # fmt: skip
    return {"fan_out": fan_out, "mixed": mixed_rows}


def _spec_stats(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    specs = [r["speculation"] for r in rows if r.get("speculation")]
    if not specs:
        return {}
    hits = sum(s["hits"] for s in specs)
    emitted = hits + sum(s["misses"] for s in specs)
    return {
        "hit_rate": hits / emitted if emitted else None,
        "cancelled": sum(s["cancelled"] for s in specs),
        "wasted_s_per_run": statistics.median(s["wasted_s"] for s in specs),
        "windows_predicted": f"{sum(s['windows_predicted'] for s in specs)}/"
        f"{sum(s['windows'] for s in specs)}",
    }


def report(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        "# Certified speculation (F+spec) vs F+eager vs P",
        "",
        f"Engine {meta.get('engine', '?')}, gold policy; load at start: {meta.get('load', '?')}; "
        f"at end: {meta.get('load_end', '?')}. Medians over repetitions (and over the K loops).",
        "",
        "| K | L s | n | F+eager wall | F+spec wall | P wall | F+spec/P | F+eager/P | hit rate | "
        "cancelled | wasted s/run | ok |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in summary["fan_out"]:
        w = e["wall_s"]
        lines.append(
            f"| {e['K']} | {e['L']} | {e['n']} | {format_cell(w.get('F+eager'))} | "
            f"{format_cell(w.get('F+spec'))} | {format_cell(w.get('P'))} | {format_cell(e.get('F+spec/P'))} | "
            f"{format_cell(e.get('F+eager/P'))} | {format_cell(e.get('hit_rate'))} | "
            f"{format_cell(e.get('cancelled'))} | {format_cell(e.get('wasted_s_per_run'), 3)} | "
            f"{'yes' if e['ok'] else 'NO'} |"
        )
    if summary["mixed"]:
        lines += [
            "",
            "## Mixed tasks (K = 1)",
            "",
            "| task | F+eager wall | F+spec wall | P wall | windows predicted | hit rate | "
            "wasted s/run | ok |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for m in summary["mixed"]:
            w = m["wall_s"]
            lines.append(
                f"| {m['task']} | {format_cell(w.get('F+eager'))} | {format_cell(w.get('F+spec'))} | "
                f"{format_cell(w.get('P'))} | {m.get('windows_predicted', '–')} | "
                f"{format_cell(m.get('hit_rate'))} | {format_cell(m.get('wasted_s_per_run'), 3)} | "
                f"{'yes' if m['ok'] else 'NO'} |"
            )
    return "\n".join(lines) + "\n"


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text(encoding="utf-8").split(" ")[0]
    except OSError:
        return "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.spec_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--n", type=int, nargs="+", default=[2, 4, 6, 8, 10], help="window sizes")
    parser.add_argument(
        "--latency", type=float, nargs="+", default=[0.5, 2.0], metavar="S", help="tool latency L"
    )
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[1], metavar="K", help="loops per cell"
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions per cell (default 3)")
    parser.add_argument(
        "--arms", nargs="+", default=list(ARMS), choices=ARM_LABEL_NAMES, metavar="ARM"
    )
    parser.add_argument(
        "--mixed", type=int, default=0, metavar="N", help="also the first N mixed workload tasks"
    )
    parser.add_argument(
        "--mixed-reps", type=int, default=1, metavar="R", help="repetitions of each mixed task"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    parser.add_argument("--model", default=None, help="a local HF model folder")
    parser.add_argument(
        "--engine",
        choices=("vllm", "scripted"),
        default="vllm",
        help="vllm (default): the real engine; scripted: the test double with simulated "
        "per-token timings (a check of the mechanism, not a measurement of an engine)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="summarise OUT/results.jsonl; run nothing"
    )
    args = parser.parse_args(argv)
    if min(args.n) < 2 or args.reps < 1 or min(args.concurrency) < 1:
        parser.error("--n must be at least 2, --reps and --concurrency at least 1")
    logging.getLogger("harness").setLevel(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"load": _load()}
    if not args.report_only:

        async def go() -> str:
            if args.engine == "scripted":
                from harness.testing import ScriptedEngine

                # SmolLM2-135M on this machine, unloaded (docs/engines.md): ~1.3 ms per
                # prefilled token, ~24 ms per decoded token; 50 ms per request.
                timed = ScriptedEngine(
                    prefill_ms_per_token=1.3, decode_ms_per_token=24.0, overhead_ms=50.0
                )
                await measure(timed, args, args.out)
                return "scripted (simulated timings: 1.3 ms/prefill tok, 24 ms/decode tok, 50 ms/request)"
            from harness.engines.vllm import open_default_engine

            async with open_default_engine(args.model) as engine:
                await measure(engine, args, args.out)
                return engine.name

        meta["engine"] = anyio.run(go)
    meta["load_end"] = _load()
    rows = read_jsonl(args.out / "results.jsonl")[0]
    summary = summarise(rows)
    (args.out / "summary.json").write_text(
        json.dumps({"meta": meta, **summary}, indent=2, default=str) + "\n", encoding="utf-8"
    )
    text = report(summary, meta)
    (args.out / "report.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
