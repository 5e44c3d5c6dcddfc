"""``python -m benchmarks.r1_dividend``: R1 as the closed form prices it, K = 1 and K = 8.

The closed form prices F's wall-time dividend for *one loop alone* on the engine; the full
protocol measures it with K = 8 loops sharing the engine, where every turn also queues behind
seven other loops. This benchmark runs the same gold-policy jobs (arms S, F, F+eager and P on
the n = 6 fan-out tasks) both ways, ``--reps`` times (K values interleaved, so slow drift in the
machine's load hits both):

- **K = 1**: the jobs one after another, one loop on the engine, the prefix cache emptied
  before each (otherwise F, run after S on the same task, would find S's prompts cached);
- **K = 8**: the jobs side by side (8 loops sharing the engine, as ``harness bench`` runs),
  the cache emptied before the pass.

Per repetition and K it prices the closed form at the regime that repetition measured
(:func:`~harness.bench.analysis.estimate_regime` over its own S jobs) and compares the
measured F dividend (S − F over the window span) with it. Where the measured dividend falls
short, the residual is decomposed term by term from the ledger, per window:

- **tool latency hidden**: S's window calls one by one (sum of call durations) minus F's window
  running them concurrently (the window record's ``tool_wall_s``); priced ``n L − E[max L]``;
- **prefill saved**: S's prefill seconds over the span minus F's (F never re-prefills the
  withheld results); priced ``t_pf (1 − h_R) r n(n−1)/2``;
- **the rest** (decode, queueing behind other loops, per-call overheads): the dividend minus
  the two terms above; priced 0.

It also reports F+eager against P on the same windows (wall per window, medians).

Prints a table; ``--out DIR`` writes ``r1.json`` (every figure) and ``r1.md``. The default
engine is the in-process vLLM engine (run it alone: other work on the machine is in the walls);
``--engine scripted`` runs the same protocol on the test double's injected timings.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from harness import costmodel
from harness.bench.analysis import estimate_regime, measure_windows
from harness.bench.jobs import run_job
from harness.bench.workload import WorkloadTask, generate_tasks
from harness.engines.base import Engine, reset_prefix_cache
from harness.loop.arm_label import ArmLabel
from harness.runs.jobs import JobSpec
from harness.toolsets.workspace import load_workspace_manifest

__all__ = ("ARMS", "TASKS", "decompose", "main", "run_r1", "summarise")

TASKS: tuple[str, ...] = ("fan_out-06", "fan_out-07")
ARMS: tuple[str, ...] = ("S", "F", "F+eager", "P")

Job = Mapping[str, Any]


async def run_pass(
    engine: Engine,
    tasks: Sequence[WorkloadTask],
    k: int,
    latency_s: float,
    arms: Sequence[str] = ARMS,
    progress: Callable[[str], None] = lambda line: None,
) -> list[dict[str, Any]]:
    """Every (task, arm) job once under the gold policy, at most ``k`` at a time, each from
    an empty prefix cache (``k`` = 1: emptied before every job, so no arm reuses what another
    arm's run of the same task left in the cache; otherwise once before the pass, and the
    arms of one task then run side by side on one cache: a turn one arm prefilled can be
    read by another arm whose prompt starts the same). ``progress`` gets a line as each job
    ends."""
    manifest = load_workspace_manifest()
    limiter = anyio.CapacityLimiter(k)
    jobs: list[dict[str, Any]] = []
    if k > 1:
        await reset_prefix_cache(engine)

    async def one(wt: WorkloadTask, label: str) -> None:
        spec = JobSpec.from_label(label, policy="gold", latency_s=latency_s)
        async with limiter:
            if k == 1:
                await reset_prefix_cache(engine)
            started = time.monotonic()
            jobs.append(await run_job(engine, wt, spec, manifest))
            progress(
                f"  K={k}: {len(jobs)}/{len(tasks) * len(arms)} jobs "
                f"({wt.id} {label} {time.monotonic() - started:.0f} s)"
            )

    async with anyio.create_task_group() as tg:
        for wt in tasks:
            for label in arms:
                tg.start_soon(one, wt, label)
    return jobs


def _window_calls(job: Job, ids: Sequence[str]) -> list[Job]:
    wanted = set(ids)
    return [c for c in job.get("calls", []) if c["call_id"] in wanted]


def _span_prefill(job: Job, ids: Sequence[str]) -> float:
    """Prefill seconds of the turns from the one that emitted the first call to the absorb."""
    turns = [c["turn"] for c in _window_calls(job, ids)]
    first, absorb = min(turns), max(turns) + 1
    return float(sum(t["prefill_s"] for t in job.get("turns", []) if first <= t["turn"] <= absorb))


def decompose(jobs: Sequence[Job], regime: costmodel.Regime) -> list[dict[str, Any]]:
    """Per certified window: measured and closed-form dividend and its terms (see the module
    docstring); F+eager and P wall beside it."""
    by_key = {(j["task_id"], j["arm"], bool(j.get("eager"))): j for j in jobs}
    rows = []
    for w in measure_windows(jobs):
        if ArmLabel.S not in w.wall or ArmLabel.F not in w.wall:
            continue
        s_job, f_job = by_key[(w.task_id, "S", False)], by_key[(w.task_id, "F", False)]
        s_tool = sum(c["finished"] - c["started"] for c in _window_calls(s_job, w.call_ids))
        f_window = next(x for x in f_job["windows"] if tuple(x["call_ids"]) == w.call_ids)
        tool = s_tool - float(f_window["tool_wall_s"])
        prefill = _span_prefill(s_job, w.call_ids) - _span_prefill(f_job, w.call_ids)
        dividend = w.wall[ArmLabel.S] - w.wall[ArmLabel.F]
        n = w.n
        tool_pred = n * regime.tool_latency_s - costmodel.expected_max_latency(regime, n)
        predicted = costmodel.wall_dividend_flattened(regime, n)
        rows.append({
            "task_id": w.task_id, "n": n, "wall": {str(k): v for k, v in w.wall.items()},
            "dividend": dividend, "predicted": predicted, "ratio": dividend / predicted,
            "tool_hidden": tool, "tool_hidden_predicted": tool_pred,
            "prefill_saved": prefill, "prefill_saved_predicted": predicted - tool_pred,
            "rest": dividend - tool - prefill,
        })  # fmt: skip
    return rows


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per K: the per-repetition ratio (sum measured / sum predicted over its windows) and
    each term, as median, min and max over repetitions."""
    out: dict[str, Any] = {}
    for k in sorted({int(r["k"]) for r in runs}):
        reps = [r for r in runs if r["k"] == k and r["windows"]]
        if not reps:
            continue

        def per_rep(key: str, reps: Sequence[Mapping[str, Any]] = reps) -> list[float]:
            return [sum(float(w[key]) for w in r["windows"]) / len(r["windows"]) for r in reps]

        ratios = [
            sum(w["dividend"] for w in r["windows"]) / sum(w["predicted"] for w in r["windows"])
            for r in reps
        ]
        walls = {
            arm: [statistics.median(w["wall"][arm] for w in r["windows"]) for r in reps]
            for arm in ARMS
            if all(arm in w["wall"] for r in reps for w in r["windows"])
        }
        out[str(k)] = {
            "repetitions": len(reps),
            "ratio": _spread(ratios),
            **{
                key: _spread(per_rep(key))
                for key in (
                    "dividend",
                    "predicted",
                    "tool_hidden",
                    "tool_hidden_predicted",
                    "prefill_saved",
                    "prefill_saved_predicted",
                    "rest",
                )
            },
            "wall": {arm: _spread(v) for arm, v in walls.items()},
        }
    return out


async def run_r1(
    engine: Engine, *, reps: int = 3, ks: Sequence[int] = (1, 8), latency_s: float = 0.5
) -> dict[str, Any]:
    """Run the protocol (see the module docstring) and return every figure."""
    by_id = {t.id: t for t in generate_tasks(0)}
    tasks = [by_id[i] for i in TASKS]
    runs = []
    for rep in range(reps):
        for k in ks if rep % 2 == 0 else tuple(reversed(ks)):
            started = time.monotonic()
            jobs = await run_pass(engine, tasks, k, latency_s)
            regime = estimate_regime(jobs)
            runs.append({
                "rep": rep, "k": k, "wall_s": time.monotonic() - started,
                "errors": [j["error"] for j in jobs if j.get("error")],
                "regime": regime.to_json(), "windows": decompose(jobs, regime),
            })  # fmt: skip
    return {"tasks": list(TASKS), "arms": list(ARMS), "runs": runs, "summary": summarise(runs)}


def _markdown(result: Mapping[str, Any], header: str) -> str:
    lines = [
        "# R1 at K = 1 and K = 8: the F dividend against the closed form",
        "",
        header,
        "",
        "Per repetition the closed form is priced at the regime that repetition measured; figures "
        "are per n = 6 window, median [min, max] over repetitions.",
        "",
        "| K | reps | measured/closed form | dividend s | closed form s | tool hidden s (pred) | "
        "prefill saved s (pred) | rest s | S wall | F wall | F+eager wall | P wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def f(x: Mapping[str, float]) -> str:
        return f"{x['median']:.2f} [{x['min']:.2f}, {x['max']:.2f}]"

    for k, s in result["summary"].items():
        wall = s["wall"]
        lines.append(
            f"| {k} | {s['repetitions']} | {f(s['ratio'])} | {f(s['dividend'])} | "
            f"{f(s['predicted'])} | {f(s['tool_hidden'])} ({s['tool_hidden_predicted']['median']:.2f}) | "
            f"{f(s['prefill_saved'])} ({s['prefill_saved_predicted']['median']:.2f}) | {f(s['rest'])} | "
            + " | ".join(f(wall[a]) if a in wall else "–" for a in ARMS)
            + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.r1_dividend",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument(
        "--k", type=int, nargs="+", default=[1, 8], help="loops on the engine (default 1 8)"
    )
    parser.add_argument("--latency", type=float, default=0.5, help="tool latency L (default 0.5 s)")
    parser.add_argument("--out", type=Path, default=None, help="write r1.json and r1.md here")
    parser.add_argument(
        "--engine", choices=("vllm", "scripted"), default="vllm", help="default: vllm"
    )
    args = parser.parse_args(argv)

    async def go() -> dict[str, Any]:
        if args.engine == "scripted":
            from harness.testing import ScriptedEngine

            engine: Any = ScriptedEngine(
                prefill_ms_per_token=1.5, decode_ms_per_token=5.0, overhead_ms=20.0
            )
            async with engine:
                return await run_r1(engine, reps=args.reps, ks=args.k, latency_s=args.latency)
        from harness.engines.vllm import open_default_engine

        async with open_default_engine() as vllm:
            return await run_r1(vllm, reps=args.reps, ks=args.k, latency_s=args.latency)

    started = time.monotonic()
    result = anyio.run(go, backend="asyncio")
    header = (
        f"Engine {args.engine}; tasks {', '.join(TASKS)} (gold policy), arms {', '.join(ARMS)}; "
        f"L = {args.latency} s; {args.reps} repetitions; wall {time.monotonic() - started:.0f} s."
    )
    text = _markdown(result, header)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "r1.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
        (args.out / "r1.md").write_text(text)
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
