"""Fault injection: SIGKILL seeded runs at random points, resume them, compare with a clean run.

``python -m benchmarks.crash_resume --runs N --json`` runs N seeded runs of write-heavy
fan-out and mixed workload tasks (the gold policy on the scripted engine; arms S, F,
F+eager, P) over the workspace store on disk (:mod:`harness.toolsets.workspace.durable`). Each run is a forked
process with a journal that is killed with SIGKILL at a random point — inside a window,
between a call's start and its journaled outcome (before or after its write), during the
absorb turn, or at a random time — and then resumed by fresh processes from its journal.
**Resumes are killed too**: about half the runs kill their first resume (a quarter their
second as well) at a random time, and the last resume runs to the end. The final writes are
compared with an uninterrupted run of the same task and arm.

**Ground truth.** ``--ground-truth store`` (default) reads the writes from the store's
application log (a table of the same SQLite file as the documents). ``--ground-truth file``
reads them from a plain file outside the harness and the store, where every write lands
first (appended and ``fsync``'d; a keyed write once per key): what a real external system
would show.

Half the runs use tools that accept idempotency keys (``keyed``), half the plain workspace
tools (``plain``: ``append_note`` is neither idempotent nor keyed). It prints one JSON object:

``runs``, ``kills`` (runs whose first process died by SIGKILL), ``resume_kills`` (resumes
killed), ``resumed`` (runs the last process finished), ``repeated_writes`` (non-idempotent
writes that took effect more often than in the clean run: must be 0),
``idempotent_reapplied`` (idempotent writes applied again: harmless, counted apart),
``deduplicated`` (keyed writes a store dropped as duplicates), ``lost_writes`` (writes of the
clean run that never took effect), ``explained_lost`` (lost writes whose *own* call — same
tool, same arguments — was ``outcome_unknown`` in some attempt), ``unexplained`` (repeated
writes, lost writes not explained so, and mismatched stores with neither: must be 0),
``state_mismatches``, ``in_doubt`` (calls found in doubt, over every resume), ``in_doubt_retried``,
``outcome_unknown`` (calls ever surfaced as such), and the same per toolset (``by_toolset``)
and per kill point (``by_point``). For ``keyed`` lost writes and mismatches must be 0 too.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from benchmarks._faults import POINTS, Faults, FaultyEngine
from harness.bench.workload import WorkloadTask, generate_tasks
from harness.journal import Journal
from harness.loop import FlattenSettings, LoopConfig, run_loop
from harness.runs.jobs import JobSpec
from harness.toolsets.workspace import WorkspaceState, load_workspace_manifest, make_toolset
from harness.toolsets.workspace.durable import DurableStore, durable_toolset, write_id

__all__ = ("ARMS", "main", "run_benchmark")

ARMS: tuple[str, ...] = ("S", "F", "F+eager", "P")
KILL_POINTS: tuple[str, ...] = (*POINTS, "timer")
#: Injected tool latency: long enough that a timer kill lands inside calls and windows.
LATENCY_S = 0.004
#: How often a timer kill is tried (each time with half the delay) before a run counts as
#: not killed.
_TIMER_ATTEMPTS = 6
#: How many resumes of a run are killed (at a random time), drawn per run.
_RESUME_KILLS = (0, 0, 1, 2)
#: Where a resume is killed: a resume replays what is journaled quickly, then writes.
_RESUME_POINTS = ("before_write", "after_write", "timer")
GROUND_TRUTHS = ("store", "file")


def task_pool(seed: int = 0) -> list[WorkloadTask]:
    """Write-heavy fan-out tasks (status, tag and note writes) and every mixed task."""
    return [
        t
        for t in generate_tasks(seed)
        if t.kind == "mixed"
        or (t.kind == "fan_out" and any(not g.name.startswith(("read", "get", "list"))
                                        for g in t.task.gold_calls))
    ]  # fmt: skip


@dataclass(frozen=True)
class RunPlan:
    index: int
    task: WorkloadTask
    arm: str
    toolset: str  # keyed | plain
    point: str
    k: int
    delay_s: float
    #: How each killed resume dies: (point, k, delay) — at the k-th ``before_write`` or
    #: ``after_write`` of that resume, or ``timer`` after ``delay`` seconds.
    resume_kills: tuple[tuple[str, int, float], ...] = ()


# -- one process's work ---------------------------------------------------------------------


def _config(spec: JobSpec) -> LoopConfig:
    return LoopConfig(arm=spec.arm, policy="gold", flatten=FlattenSettings(eager=spec.eager))


def _loop_run(
    work: Path, wt: WorkloadTask, arm: str, keyed: bool, faults: Faults,
    ready: Callable[[], None] = lambda: None, *, resume: bool, ground_truth: str = "store",
) -> dict[str, Any]:  # fmt: skip
    """Run (or resume) ``wt`` under ``arm`` with a journal in ``work/journal`` over the store
    ``work/store.sqlite3`` (and, with ``ground_truth="file"``, the file
    ``work/ground_truth.log``); what happened, as JSON data."""
    store_path = work / "store.sqlite3"
    store = DurableStore(store_path) if resume else DurableStore.create(
        store_path, wt.initial_state()
    )  # fmt: skip
    truth = work / "ground_truth.log" if ground_truth == "file" else None
    toolset = durable_toolset(
        store, keyed=keyed, latency=LATENCY_S, hook=faults, ground_truth=truth
    )
    spec = JobSpec.from_label(arm, policy="gold", latency_s=0.0)
    journal = (
        Journal.resume(work / "journal")
        if resume
        else Journal.create(work / "journal", f"{wt.id}|{arm}", meta={"task": wt.id, "arm": arm})
    )
    in_doubt = list(journal.replay.in_doubt)

    async def go() -> Any:
        async with FaultyEngine(faults) as engine:
            ready()
            return await run_loop(
                engine, toolset, wt.task, _config(spec), manifest=load_workspace_manifest(),
                journal=journal,
            )  # fmt: skip

    started = time.monotonic()
    try:
        result = anyio.run(go)
    finally:
        journal.close()
    extra = result.summary.extra
    history = journal.state.history
    unknown_calls = [
        c for c, events in history.items() if any(e["event"] == "outcome_unknown" for e in events)
    ]
    intents = journal.state.intents
    return {
        "finished": result.summary.finished,
        "ground_truth": None if truth is None else _file_writes(truth),
        "unknown_writes": [
            write_id(str(intents[c]["tool"]), json.loads(intents[c]["arguments"]))
            for c in unknown_calls
            if c in intents
        ],
        "unknown_calls": unknown_calls,
        "in_doubt_events": sum(
            1 for events in history.values() for e in events if e["event"] == "in_doubt"
        ),
        "retried_events": sum(
            1 for events in history.values() for e in events if e["event"] == "retried"
        ),
        "attempt": journal.state.attempts,
        "wall_s": time.monotonic() - started,
        "counts": faults.counts,
        "fingerprint": store.fingerprint(),
        "applications": store.applications(),
        "in_doubt": in_doubt,
        "retried": extra.get("journal", {}).get("retried", []),
        "outcome_unknown": extra.get("journal", {}).get("unknown", []),
        "replayed_calls": len(extra.get("journal", {}).get("replayed", [])),
        "unknown_in_ledger": [
            r.call_id for r in result.call_records if r.error_kind == "outcome_unknown"
        ],
    }


def _file_writes(path: Path) -> list[str]:
    """The writes a ground-truth file holds (its lines without their keys)."""
    if not path.exists():
        return []
    return [line.split("\t")[0] for line in path.read_text(encoding="utf-8").splitlines()]


def _forked(
    work: Path, job: Callable[[Callable[[], None]], dict[str, Any]], *, kill_after: float | None
) -> tuple[int | None, dict[str, Any] | None, str]:
    """Run ``job`` in a forked child; SIGKILL it ``kill_after`` s after it says it is ready.
    Returns (signal that ended it or None, its result, its error text)."""
    out = work / f"result-{time.monotonic_ns()}.json"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        status = 1
        try:

            def ready() -> None:
                os.write(write_end, b"r")

            out.write_text(json.dumps(job(ready), default=str))
            status = 0
        except BaseException:
            out.write_text(json.dumps({"error": traceback.format_exc()}))
        finally:
            os._exit(status)
    os.close(write_end)
    if kill_after is not None and os.read(read_end, 1):  # ready: the loop is starting
        time.sleep(kill_after)
        with contextlib.suppress(ProcessLookupError):  # it finished first
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(read_end)
    killed = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    data = json.loads(out.read_text()) if out.exists() else None
    error = ""
    if data is not None and "error" in data:
        error, data = str(data["error"]), None
    return killed, data, error


# -- the benchmark ----------------------------------------------------------------------------


_IDEMPOTENT = frozenset(
    name for name, t in make_toolset(WorkspaceState([])).items() if t.effect.idempotent
)


def _idempotent(write: str) -> bool:
    """Whether a write (``tool({...})``) is idempotent: applying it again changes nothing."""
    return write.partition("(")[0] in _IDEMPOTENT


def _write_multiset(applications: list[list[Any]] | list[tuple[str, str, bool]]) -> Counter[str]:
    return Counter(str(w) for w, _, effective in applications if effective)


def _reference(
    work: Path, wt: WorkloadTask, arm: str, keyed: bool, ground_truth: str = "store"
) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    killed, data, error = _forked(
        work,
        lambda ready: _loop_run(
            work, wt, arm, keyed, Faults(), resume=False, ready=ready, ground_truth=ground_truth
        ),
        kill_after=None,
    )
    if data is None:
        raise RuntimeError(f"the clean run of {wt.id} under {arm} failed: {error or killed}")
    return data


def _plan_run(
    index: int, rng: random.Random, pool: list[WorkloadTask], ref: Callable[..., dict[str, Any]]
) -> RunPlan:
    wt = rng.choice(pool)
    arm = rng.choice(ARMS)
    toolset = "keyed" if index % 2 == 0 else "plain"
    clean = ref(wt, arm, toolset == "keyed")
    point = rng.choice(KILL_POINTS)
    possible = [p for p in POINTS if clean["counts"][p] > 0]
    if point != "timer" and point not in possible:
        point = rng.choice(possible)
    k = rng.randint(1, clean["counts"][point]) if point != "timer" else 0
    delay = rng.uniform(0.0, 0.9 * clean["wall_s"]) if point == "timer" else 0.0
    resumes = tuple(
        (rng.choice(_RESUME_POINTS), rng.randint(1, 2), rng.uniform(0.0, 0.3 * clean["wall_s"]))
        for _ in range(rng.choice(_RESUME_KILLS))
    )
    return RunPlan(index, wt, arm, toolset, point, k, delay, resumes)


def _one_run(
    root: Path, plan: RunPlan, clean: dict[str, Any], ground_truth: str = "store"
) -> dict[str, Any]:
    keyed = plan.toolset == "keyed"
    target = None if plan.point == "timer" else plan.point
    delay = plan.delay_s
    for attempt in range(_TIMER_ATTEMPTS if plan.point == "timer" else 1):
        # A timer may fire after the run ended (this process was faster than the clean one):
        # then try again from scratch with half the delay, so every run is really killed.
        work = root / f"run-{plan.index:04d}" / f"attempt-{attempt}"
        work.mkdir(parents=True)
        crash = functools.partial(
            _loop_run, work, plan.task, plan.arm, keyed, Faults(target, plan.k), resume=False,
            ground_truth=ground_truth,
        )  # fmt: skip
        killed, _, crash_error = _forked(
            work, crash, kill_after=delay if plan.point == "timer" else None
        )
        if killed is not None:
            break
        delay /= 2

    def resume(faults: Faults, ready: Callable[[], None]) -> dict[str, Any]:
        return _loop_run(
            work, plan.task, plan.arm, keyed, faults, ready, resume=True,
            ground_truth=ground_truth,
        )  # fmt: skip

    resumed: dict[str, Any] | None = None
    resume_kills = 0
    resume_error = ""
    for point, k, after in plan.resume_kills:  # kill the resume too
        timer = point == "timer"
        faults = Faults(None if timer else point, k)
        died, resumed, resume_error = _forked(
            work, functools.partial(resume, faults), kill_after=after if timer else None
        )
        if died is None:
            break  # it finished before its kill
        resume_kills += 1
        resumed = None
    if resumed is None and not resume_error:
        _, resumed, resume_error = _forked(
            work, functools.partial(resume, Faults()), kill_after=None
        )
    row: dict[str, Any] = {
        "index": plan.index, "task": plan.task.id, "arm": plan.arm, "toolset": plan.toolset,
        "point": plan.point, "k": plan.k, "killed": killed == signal.SIGKILL,
        "resume_kills": resume_kills,
        "resumed": bool(resumed and resumed["finished"]),
        "error": crash_error or resume_error or None,
    }  # fmt: skip
    if resumed is None:
        return row
    row.update(_compare(clean, resumed, ground_truth))
    return row


def _compare(clean: dict[str, Any], resumed: dict[str, Any], ground_truth: str) -> dict[str, Any]:
    """The final writes against the clean run's: repeated, re-applied, lost — each lost write
    explained only by its own call having been ``outcome_unknown``."""
    if ground_truth == "file":
        want, got = Counter(clean["ground_truth"]), Counter(resumed["ground_truth"])
    else:
        want = _write_multiset(clean["applications"])
        got = _write_multiset(resumed["applications"])
    deduplicated = sum(1 for _, _, effective in resumed["applications"] if not effective)
    lost = want - got
    extra = got - want
    unknown = Counter(resumed["unknown_writes"])
    explained = lost & unknown
    repeated = sum(n for w, n in extra.items() if not _idempotent(w))
    reapplied = sum(n for w, n in extra.items() if _idempotent(w))
    mismatch = resumed["fingerprint"] != clean["fingerprint"]
    unexplained_lost = sum((lost - unknown).values())
    # A store that differs with no lost, repeated, re-applied or unknown write to explain it.
    bare_mismatch = mismatch and not (lost or extra or unknown)
    return {
        "lost_writes": sum(lost.values()),
        "explained_lost": sum(explained.values()),
        "unexplained_lost": unexplained_lost,
        "lost_detail": sorted(lost.elements())[:5],
        "state_mismatch": mismatch,
        "in_doubt": resumed["in_doubt_events"],
        "retried": resumed["retried_events"],
        "outcome_unknown": len(resumed["unknown_calls"]),
        "unknown_in_ledger": len(resumed["unknown_in_ledger"]),
        "replayed_calls": resumed["replayed_calls"],
        "repeated_writes": repeated,
        "idempotent_reapplied": reapplied,
        "deduplicated": deduplicated,
        "unexplained": repeated + unexplained_lost + int(bare_mismatch),
        "attempts": resumed["attempt"],
    }


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in rows if "state_mismatch" in r]

    def total(name: str) -> int:
        return sum(int(r[name]) for r in done)

    return {
        "runs": len(rows),
        "kills": sum(r["killed"] for r in rows),
        "resume_kills": sum(r["resume_kills"] for r in rows),
        "runs_with_a_killed_resume": sum(1 for r in rows if r["resume_kills"]),
        "resumed": sum(r["resumed"] for r in rows),
        "repeated_writes": total("repeated_writes"),
        "idempotent_reapplied": total("idempotent_reapplied"),
        "deduplicated": total("deduplicated"),
        "lost_writes": total("lost_writes"),
        "explained_lost": total("explained_lost"),
        "unexplained": total("unexplained"),
        "state_mismatches": total("state_mismatch"),
        "in_doubt": total("in_doubt"),
        "in_doubt_retried": total("retried"),
        "outcome_unknown": total("outcome_unknown"),
        "replayed_calls": total("replayed_calls"),
        "errors": sum(1 for r in rows if r["error"]),
    }


def run_benchmark(
    runs: int,
    *,
    seed: int = 0,
    out: Path | None = None,
    progress: bool = False,
    ground_truth: str = "store",
) -> dict[str, Any]:
    """Run the benchmark (see the module docstring); the JSON object it prints."""
    rng = random.Random(f"crash-resume:{seed}")
    pool = task_pool(seed)
    with tempfile.TemporaryDirectory(prefix="crash-resume-") as tmp:
        root = Path(out) if out is not None else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        cache: dict[tuple[str, str, bool], dict[str, Any]] = {}

        def ref(wt: WorkloadTask, arm: str, keyed: bool) -> dict[str, Any]:
            key = (wt.id, arm, keyed)
            if key not in cache:
                name = f"clean-{wt.id}-{arm.replace('+', '_')}-{'keyed' if keyed else 'plain'}"
                cache[key] = _reference(root / name, wt, arm, keyed, ground_truth)
            return cache[key]

        rows = []
        started = time.monotonic()
        for index in range(runs):
            plan = _plan_run(index, rng, pool, ref)
            clean = ref(plan.task, plan.arm, plan.toolset == "keyed")
            rows.append(_one_run(root, plan, clean, ground_truth))
            if progress:
                print(f"\r{index + 1}/{runs} runs", end="", file=sys.stderr, flush=True)
        if progress:
            print(file=sys.stderr)
        if out is not None:
            (root / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    figures = _totals(rows)
    figures["by_toolset"] = {
        name: _totals([r for r in rows if r["toolset"] == name]) for name in ("keyed", "plain")
    }
    figures["by_point"] = {
        point: _totals([r for r in rows if r["point"] == point]) for point in KILL_POINTS
    }
    figures["seed"] = seed
    figures["ground_truth"] = ground_truth
    figures["wall_s"] = round(time.monotonic() - started, 1)
    figures["failed_runs"] = [r for r in rows if r["error"]][:5]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.crash_resume",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--runs", type=int, default=200, help="killed runs (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the plan (default 0)")
    parser.add_argument("--out", type=Path, default=None, help="keep every run's files here")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    parser.add_argument(
        "--ground-truth", choices=GROUND_TRUTHS, default="store",
        help="where the writes are read from: the store's application log (default) or a "
        "plain file outside the harness that every write lands in first",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    figures = run_benchmark(
        args.runs, seed=args.seed, out=args.out, progress=not args.json,
        ground_truth=args.ground_truth,
    )  # fmt: skip
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    else:
        print(json.dumps({k: v for k, v in figures.items() if k != "by_point"}, indent=2))
    keyed = figures["by_toolset"]["keyed"]
    ok = (
        keyed["runs"] == keyed["kills"] == keyed["resumed"]
        and keyed["lost_writes"] == keyed["state_mismatches"] == 0
        and figures["repeated_writes"] == figures["unexplained"] == figures["errors"] == 0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
