"""``python -m benchmarks.draft_bench``: drafted decoding of tool-call windows.

Speculative decoding lets the engine verify a draft of the next tokens in one forward pass;
under greedy decoding the output is the same tokens. This measures, on the real in-process
engine, what each proposer (``--proposers``: ``none``, vLLM's ``ngram``, the harness's
``window``, :mod:`harness.engines.window_drafts`) does to a fan-out window's decode:

* **cells**: K survey tasks (one fan-out window of n reads whose keys are task inputs) run
  concurrently on one engine under each arm (``--arms``, default S, F, P; F+spec too) and
  policy (``--policies``, default gold: the engine is constrained to the gold calls, so every
  proposer and arm emits the same text; ``oracle``: the context-bound oracle's calls;
  ``model``: the model chooses, the lossless check bites), tool latency 0 (decode is what
  is measured); with ``--workload ID|KIND ...`` the cells are those workload tasks instead
  (``all``: the 48 seeded tasks), K at a time;
* **every proposer's engine is open at once** and a cell runs on each of them back to back
  (in an order rotated per repetition), so their walls are compared under the same load;
* per job: wall, decode seconds and generated tokens of its turns (decode tokens/s), and the
  engine's draft counters over the cell (drafts, drafted and accepted tokens: acceptance rate
  and tokens per verification step);
* **lossless**: each job's calls (tool and argument text, in order), answer and generated
  tokens of every turn (their digest, :func:`harness.engines.base.token_digest`: the token
  ids themselves, not only their count) are compared with the ``none`` engine's; every
  difference is counted and listed with the first turn that differs.

``--draft-max-batch N`` sets the window proposer's load switch
(:attr:`harness.engines.vllm.VLLMSettings.draft_max_batch`; 0 = draft at any load).

A long run can be stopped and continued: every job's row is written to ``results.jsonl`` as
its cell ends, and ``--resume`` (same arguments, same ``--out``) skips every (cell, arm,
proposer) whose rows are all there and reports over the whole file. Without ``--resume`` an
``OUT`` that already holds results is refused rather than mixed with a new run.

Results: ``OUT/results.jsonl`` (one row per job), ``OUT/report.md`` (per arm, n and K: median
wall and decode tokens/s per proposer, their ratio to ``none``, acceptance, mismatches).
Run it alone on a quiet machine: walls beside other work are noise (the ratios within a cell
less so, the acceptance counts not at all).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from benchmarks.spec_bench import run_cell, survey_task
from harness._jsonl import read_jsonl
from harness.bench.runner import select_tasks
from harness.bench.workload import WorkloadTask, generate_tasks, workload_tasks
from harness.engines.vllm import DRAFT_MAX_BATCH
from harness.toolsets.workspace import load_workspace_manifest

__all__ = ("PROPOSERS", "in_cells", "main", "named_workload", "summarise")

PROPOSERS = ("none", "ngram", "suffix", "window")
DEFAULT_OUT = Path("benchmarks/results/draft")


def _signature(job: dict[str, Any]) -> list[Any]:
    """What the model generated: calls (tool, argument text) in order, the answer, and the
    generated tokens of each turn (count and digest of the ids)."""
    calls = [(c["tool"], c["arguments"]) for c in job["calls"]]
    tokens = [[t.get("completion_tokens"), t.get("token_digest", "")] for t in job["turns"]]
    return [calls, job.get("answer"), tokens]


def first_difference(mine: Sequence[Any], base: Sequence[Any]) -> str:
    """Where two signatures part: the first turn whose tokens differ (1-based), else the
    calls or the answer."""
    for i, (a, b) in enumerate(zip(mine[2], base[2], strict=False), start=1):
        if a != b:
            return f"turn {i}"
    if len(mine[2]) != len(base[2]):
        return f"turn {min(len(mine[2]), len(base[2])) + 1} (one run has more turns)"
    return "calls" if mine[0] != base[0] else "answer"


def _row(job: dict[str, Any], cell: dict[str, Any], proposer: str) -> dict[str, Any]:
    turns = job["turns"]
    decode_s = sum(t.get("decode_s") or 0.0 for t in turns)
    generated = sum(t.get("completion_tokens") or 0 for t in turns)
    return {
        **cell,
        "proposer": proposer,
        "task_id": job["task_id"],
        "arm": job["label"],
        "success": job["success"],
        "error": job["error"],
        "wall_s": job["summary"].get("wall_s"),
        "engine_s": job["summary"].get("engine_s"),
        "decode_s": decode_s,
        "generated_tokens": generated,
        "signature": _signature(job),
    }


async def _cell(
    engine: Any,
    tasks: Sequence[WorkloadTask],
    label: str,
    policy: str,
    manifest: Any,
    levers: dict[str, bool],
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    before = engine.draft_stats
    jobs = await run_cell(engine, tasks, label, 0.0, 0, manifest, policy=policy, **levers)
    delta = engine.draft_stats - before
    counts = {
        "drafts": delta.drafts,
        "draft_tokens": delta.draft_tokens,
        "accepted_tokens": delta.accepted_tokens,
    }
    return sorted(jobs, key=lambda j: j["task_id"]), counts


def named_workload(names: Sequence[str]) -> list[WorkloadTask]:
    """The workload tasks ``names`` picks (ids or kinds; ``all``: the 48 seeded tasks), in
    the benchmark's running order."""
    ids = [t.id for t in generate_tasks(0)] if list(names) == ["all"] else list(names)
    return select_tasks(workload_tasks(0), ids)


def in_cells(tasks: Sequence[WorkloadTask], k: int) -> list[list[WorkloadTask]]:
    """``tasks`` K at a time, in order: the cells a ``--workload`` run gives each engine
    (the last one shorter when K does not divide the count)."""
    return [list(tasks[start : start + k]) for start in range(0, len(tasks), k)]


def _cells(args: argparse.Namespace, rep: int) -> Iterator[tuple[int, int, list[WorkloadTask]]]:
    """(K, n, tasks) of each cell of repetition ``rep``: survey tasks of n reads, K copies;
    or (``--workload``) the named workload tasks K at a time (n = 0)."""
    if args.workload:
        picked = named_workload(args.workload)
        for k in args.concurrency:
            for chunk in in_cells(picked, k):
                yield k, 0, chunk
        return
    for k in args.concurrency:
        for n in args.n:
            yield k, n, [survey_task(n, copy, seed=rep) for copy in range(k)]


def _run_key(cell: dict[str, Any], label: str, proposer: str, task_id: str) -> tuple[Any, ...]:
    """Identifies one job of a run: what ``--resume`` looks for among the stored rows."""
    return (cell["K"], cell["n"], cell["rep"], cell["policy"], label, proposer, task_id)


def _row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """:func:`_run_key` of a stored row (a field it lacks counts as None)."""
    fields = ("K", "n", "rep", "policy", "arm", "proposer", "task_id")
    return tuple(row.get(f) for f in fields)


def stored_jobs(rows: Sequence[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """The job keys of ``rows`` already in ``results.jsonl`` (``--resume`` skips them)."""
    return {_row_key(r) for r in rows}


def pending_runs(
    args: argparse.Namespace, stored: set[tuple[Any, ...]]
) -> Iterator[tuple[dict[str, Any], list[WorkloadTask], str, str]]:
    """:func:`_runs` less every (cell, arm, proposer) whose jobs are all in ``stored``."""
    for cell, tasks, label, proposer in _runs(args):
        if not all(_run_key(cell, label, proposer, t.id) in stored for t in tasks):
            yield cell, tasks, label, proposer


def _runs(
    args: argparse.Namespace,
) -> Iterator[tuple[dict[str, Any], list[WorkloadTask], str, str]]:
    """(cell, tasks, arm, proposer) in running order: repetitions outermost, the proposers of
    a cell back to back in an order rotated per repetition (so no proposer always runs first)."""
    for rep in range(args.reps):
        shift = rep % len(args.proposers)
        proposers = list(args.proposers[shift:]) + list(args.proposers[:shift])
        for k, n, tasks in _cells(args, rep):
            for policy in args.policies:
                cell = {"K": k, "n": n, "rep": rep, "policy": policy}
                for label in args.arms:
                    for proposer in proposers:
                        yield cell, tasks, label, proposer


async def measure(
    args: argparse.Namespace, out: Path, stored: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """Run every pending cell (all of them, or those ``stored`` lacks) and return ``stored``'s
    rows followed by the new ones."""
    from harness.engines.vllm import open_default_engine

    manifest = load_workspace_manifest()
    todo = list(pending_runs(args, stored_jobs(stored)))
    rerun = {_run_key(c, label, p, t.id) for c, tasks, label, p in todo for t in tasks}
    # A cell cut short keeps some of its rows; it runs again whole, so those rows go.
    rows = [r for r in stored if _row_key(r) not in rerun]
    if stored:
        print(f"resuming: {len(rows)} stored jobs kept, {len(todo)} cell runs to go", flush=True)
    if not todo:
        return rows
    async with AsyncExitStack() as stack:
        engines = {}
        for proposer in args.proposers:
            print(f"starting the {proposer} engine…", flush=True)
            extra = {"draft_max_batch": args.draft_max_batch} if proposer == "window" else {}
            engines[proposer] = await stack.enter_async_context(
                open_default_engine(drafting=proposer, **extra)
            )
        levers = {"skill_tools": args.skill_tools, "open_slots": args.open_slots}
        with (out / "results.jsonl").open("a", encoding="utf-8") as sink:
            for done, (cell, tasks, label, proposer) in enumerate(todo, start=1):
                jobs, counts = await _cell(
                    engines[proposer], tasks, label, cell["policy"], manifest, levers
                )
                for job in jobs:
                    row = {**_row(job, cell, proposer), **counts}
                    rows.append(row)
                    sink.write(json.dumps(row, default=str) + "\n")
                    sink.flush()
                wall = statistics.median(j["summary"].get("wall_s") or 0 for j in jobs)
                print(
                    f"[{done}/{len(todo)}] "
                    f"K={cell['K']} n={cell['n']} rep={cell['rep']} {cell['policy']} "
                    f"{label:<7} {proposer:<6} wall {wall:6.2f} s  accepted "
                    f"{counts['accepted_tokens']}/{counts['draft_tokens']}",
                    flush=True,
                )
    return rows


def _shape(row: dict[str, Any]) -> str:
    """The report's n column: the survey's n, or a workload task's kind (``fan_out``, ...)."""
    return str(row["n"]) if row["n"] else str(row["task_id"]).rsplit("-", 1)[0]


def _in_order(group: tuple[tuple[Any, ...], Any]) -> tuple[Any, ...]:
    """Report order: policy, arm, K, then survey sizes by number (2 before 10), then kinds."""
    (policy, arm, k, n), _ = group
    return (policy, arm, k, (0, int(n), "") if n.isdigit() else (1, 0, n))


def summarise(rows: Sequence[dict[str, Any]]) -> str:
    """The report: per (policy, arm, K, n), median wall and decode tokens/s per proposer,
    ratios to ``none``, acceptance, and lossless mismatches."""
    groups: dict[tuple[Any, ...], dict[str, list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in rows:
        groups[(r["policy"], r["arm"], r["K"], _shape(r))][r["proposer"]].append(r)
    baseline: dict[tuple[Any, ...], Any] = {
        (r["policy"], r["arm"], r["K"], r["n"], r["rep"], r["task_id"]): r["signature"]
        for r in rows
        if r["proposer"] == "none"
    }
    differ: list[str] = []
    checked = acted = 0
    for r in rows:
        key = (r["policy"], r["arm"], r["K"], r["n"], r["rep"], r["task_id"])
        if r["proposer"] != "none" and key in baseline:
            checked += 1
            if r["signature"] != baseline[key]:
                where = first_difference(r["signature"], baseline[key])
                acted += r["signature"][:2] != baseline[key][:2]
                differ.append(
                    f"- {r['task_id']} {r['arm']} {r['policy']} K={r['K']} rep {r['rep']} "
                    f"{r['proposer']}: {where}"
                )
    mismatches = len(differ)
    lines = [
        "| policy | arm | K | n | proposer | wall s | decode tok/s | wall / none | "
        "accepted / drafted | tokens per step |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for (policy, arm, k, n), by in sorted(groups.items(), key=_in_order):
        base = by.get("none")
        base_wall = statistics.median(r["wall_s"] for r in base) if base else None
        for proposer in PROPOSERS:
            runs = by.get(proposer)
            if not runs:
                continue
            wall = statistics.median(r["wall_s"] for r in runs)
            rate = statistics.median(
                r["generated_tokens"] / r["decode_s"] for r in runs if r["decode_s"]
            )
            drafted = sum(r["draft_tokens"] for r in runs)
            accepted = sum(r["accepted_tokens"] for r in runs)
            steps = sum(r["drafts"] for r in runs)
            ratio = f"{wall / base_wall:.2f}" if base_wall else "-"
            acc = f"{accepted / drafted:.2f}" if drafted else "-"
            per = f"{1 + accepted / steps:.2f}" if steps else "1.00"
            lines.append(
                f"| {policy} | {arm} | {k} | {n} | {proposer} | {wall:.2f} | {rate:.1f} | "
                f"{ratio} | {acc} | {per} |"
            )
    lines += [
        "",
        f"Lossless: {checked} jobs compared with the none engine's, {mismatches} differ "
        "(calls, answer or the generated token ids of a turn); of these, "
        f"{acted} in calls or answer, {mismatches - acted} only in the token ids that spell "
        "them.",
        *differ,
    ]
    return "\n".join(lines + _against_p(groups))


def _against_p(groups: dict[tuple[Any, ...], dict[str, list[dict[str, Any]]]]) -> list[str]:
    """Issue 28's goal lines: F+spec's median wall with each proposer over P's undrafted
    wall and over P's wall with the same proposer, per (policy, K, n)."""
    lines: list[str] = []
    for (policy, arm, k, n), by in sorted(groups.items(), key=_in_order):
        p_runs = groups.get((policy, "P", k, n), {})
        if arm != "F+spec" or not p_runs.get("none"):
            continue
        p_none = statistics.median(r["wall_s"] for r in p_runs["none"])
        for proposer in PROPOSERS:
            if not by.get(proposer):
                continue
            wall = statistics.median(r["wall_s"] for r in by[proposer])
            same = p_runs.get(proposer)
            versus = (
                f", {wall / statistics.median(r['wall_s'] for r in same):.2f}x P with {proposer}"
                if same
                else ""
            )
            lines.append(
                f"- {policy} K={k} n={n}: F+spec with {proposer} {wall / p_none:.2f}x "
                f"P undrafted{versus}"
            )
    return ["", "F+spec against P (median walls):", *lines] if lines else []


def _report_only(out: Path) -> int:
    results = out / "results.jsonl"
    if not results.exists():
        print(f"error: no {results}", file=sys.stderr)
        return 2
    rows, _ = read_jsonl(results)
    header_file = out / "header.md"
    header = (
        header_file.read_text(encoding="utf-8") if header_file.exists() else "# Drafted decoding\n"
    )
    text = f"{header}\n{summarise(rows)}\n"
    (out / "report.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.draft_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--proposers",
        nargs="+",
        choices=PROPOSERS,
        default=["none", "window"],
        help="one engine per proposer, all open at once (none is required: the baseline of "
        "every ratio and of the lossless check; default: none window)",
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        default=["S", "F", "P"],
        help="arm labels (S, F, F+spec, P, P+V; default: S F P)",
    )
    parser.add_argument(
        "--policies",
        nargs="+",
        default=["gold"],
        choices=("gold", "oracle", "model"),
        help="gold and oracle constrain the engine to those calls; model lets it choose "
        "(default: gold)",
    )
    parser.add_argument(
        "--workload",
        nargs="+",
        metavar="ID",
        help="run these workload tasks (ids or kinds, e.g. easy_fan_out; all = the 48 seeded "
        "tasks) instead of survey tasks; --n is then ignored",
    )
    parser.add_argument(
        "--draft-max-batch",
        type=int,
        default=DRAFT_MAX_BATCH,
        metavar="N",
        help="the window proposer drafts only while at most N requests decode in one step "
        f"(0 = at any load; default {DRAFT_MAX_BATCH})",
    )
    parser.add_argument("--skill-tools", action="store_true", help="the skill-tools lever")
    parser.add_argument("--open-slots", action="store_true", help="the open-slots lever")
    parser.add_argument(
        "--n",
        nargs="+",
        type=int,
        default=[2, 4, 6, 10],
        help="survey window sizes (default: 2 4 6 10)",
    )
    parser.add_argument(
        "--concurrency",
        nargs="+",
        type=int,
        default=[1],
        metavar="K",
        help="loops sharing the engine in one cell (default: 1)",
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions (default: 3)")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"directory for results.jsonl, header.md and report.md (default: {DEFAULT_OUT})",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run whose rows OUT/results.jsonl holds: skip the cells it has, "
        "report over the whole file",
    )
    parser.add_argument(
        "--report-only",
        type=Path,
        metavar="DIR",
        help="rewrite DIR/report.md from DIR/results.jsonl (its header: the command and loads "
        "of the run that wrote it) without running anything",
    )
    args = parser.parse_args(argv)
    if args.report_only is not None:
        return _report_only(args.report_only)
    if "none" not in args.proposers:
        parser.error("--proposers must include none (the baseline of every ratio)")
    if any(n < 1 for n in args.concurrency) or args.reps < 1:
        parser.error("--concurrency and --reps must be at least 1")
    results = args.out / "results.jsonl"
    stored: list[dict[str, Any]] = []
    if results.exists() and results.stat().st_size:
        if not args.resume:
            parser.error(
                f"{results} already holds a run: --resume to continue it, or another --out"
            )
        stored, skipped = read_jsonl(results)
        if skipped:
            print(f"note: {skipped} unreadable lines of {results} ignored", file=sys.stderr)
        if not results.read_bytes().endswith(b"\n"):  # a row torn by a kill: end its line
            with results.open("a", encoding="utf-8") as sink:
                sink.write("\n")
    logging.getLogger("harness").setLevel(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    rows = anyio.run(measure, args, args.out, stored, backend="asyncio")
    report = summarise(rows)
    shown = list(sys.argv[1:] if argv is None else argv)
    command = "python -m benchmarks.draft_bench " + " ".join(shown)
    line = (
        f"`{command.strip()}` ({time.monotonic() - started:.0f} s; load average "
        f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
        f"{os.cpu_count()} CPUs)"
    )
    header_file = args.out / "header.md"
    if stored and header_file.exists():
        header = header_file.read_text(encoding="utf-8").rstrip("\n") + f"\n\nResumed: {line}\n"
    else:
        header = f"# Drafted decoding\n\nCommand: {line}\n"
    header_file.write_text(header, encoding="utf-8")
    text = f"{header}\n{report}\n"
    (args.out / "report.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
