"""``python -m harness.benchmarks.fabric_bench``: the parallel execution fabric on the real engine.

On the in-process vLLM engine (the packaged SmolLM2-135M-Instruct on CPU unless ``--model``),
with a small generation budget (``--max-tokens``, default 32), it measures:

1. **batch cost**: the wall time of one batch of K = 1, 2, 4, 8 distinct prompts submitted
   together, relative to one prompt;
2. **the spec's graph** (14 nodes, depth 4, layers 4/5/3/2, one pass per node) run naively
   (one node at a time) and on the fabric: wall ratio, batch efficiency, and how the fabric's
   wall compares with D × per-batch latency (per-batch latency = the measured wall of one
   batch of K = 4 prompts, about the graph's mean layer width of 3.5);
3. **plan and execute** of the same example: the planner decodes the example's gold plan
   (forced, every token decoded), the DAG runs with N=3 consensus on its six high-stakes
   nodes, the composer answers; rounds, batch efficiency, and wall against the spec's budget
   (D + 2) × per-batch latency. (The planner's round decodes a ~400-token plan, so it is
   much longer than a node round; the report shows both.)

Medians over ``--runs`` runs, with the compared cases interleaved within each run (K values;
naive and fabric alternate) so that load from other processes falls on both alike; the
prefix cache is emptied before every measured run. On a shared machine absolute times are
noisy; ratios are the point. Prints a report and,
with ``--json FILE``, writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import structlog

from harness.engines.base import Engine, GenerationSettings, Message
from harness.fabric import (
    EXAMPLE_TASK,
    Fabric,
    FabricConfig,
    FabricResult,
    GatingPolicy,
    PlanRun,
    example_graph,
    example_plan,
    plan_and_execute,
    render_messages,
    sample_batch,
)

__all__ = ("main", "measure")

BATCH_SIZES = (1, 2, 4, 8)
LATENCY_K = 4
MODEL_PARAMS = 135e6


async def _reset(engine: Engine) -> None:
    reset = getattr(engine, "reset_prefix_cache", None)
    if reset is not None:
        await reset()


async def _timed(engine: Engine, fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    await _reset(engine)
    started = time.perf_counter()
    value = await fn()
    return time.perf_counter() - started, value


def _prompts(k: int) -> list[list[Message]]:
    nodes = list(example_graph())[:k]
    return [render_messages(node, {}) for node in nodes]


async def _batch_cost(
    engine: Engine, settings: GenerationSettings, runs: int
) -> dict[int, list[float]]:
    """Median wall per K; the K values are interleaved within each run so that load from
    other processes on a shared machine falls on every K alike."""
    walls: dict[int, list[float]] = {k: [] for k in BATCH_SIZES}
    for _ in range(runs):
        for k in BATCH_SIZES:
            chats = _prompts(k)

            async def batch(chats: list[list[Message]] = chats) -> None:
                async def one(chat: list[Message]) -> None:
                    await engine.generate(chat, [], settings)

                async with anyio.create_task_group() as tg:
                    for chat in chats:
                        tg.start_soon(one, chat)

            wall, _ = await _timed(engine, batch)
            walls[k].append(wall)
    return walls


async def _graphs(
    engine: Engine, naive: FabricConfig, fabric: FabricConfig, runs: int
) -> tuple[tuple[list[float], FabricResult], tuple[list[float], FabricResult]]:
    """Naive and fabric runs alternated (ABAB…): every wall of each, and a result of each."""
    walls: dict[bool, list[float]] = {True: [], False: []}
    last: dict[bool, FabricResult] = {}
    for _ in range(runs):
        for config in (naive, fabric):

            def run(config: FabricConfig = config) -> Awaitable[FabricResult]:
                return Fabric(engine, config=config).run(example_graph(consensus=False))

            wall, result = await _timed(engine, run)
            walls[config.naive].append(wall)
            last[config.naive] = result
    return (walls[True], last[True]), (walls[False], last[False])


async def _plan(engine: Engine, config: FabricConfig, runs: int) -> tuple[float, PlanRun]:
    walls, last = [], None
    for _ in range(runs):
        wall, last = await _timed(
            engine,
            lambda: plan_and_execute(engine, EXAMPLE_TASK, config=config, plan=example_plan()),
        )
        walls.append(wall)
    assert last is not None
    return statistics.median(walls), last


async def measure(
    engine: Engine, *, runs: int = 3, max_tokens: int = 32, plan_runs: int = 1
) -> dict[str, Any]:
    """Every figure of the module docstring, measured on ``engine``."""
    settings = GenerationSettings(max_tokens=max_tokens, constrain=False)
    fabric = FabricConfig(settings=settings, model_params=MODEL_PARAMS)
    single = FabricConfig(
        settings=settings, model_params=MODEL_PARAMS, gating=GatingPolicy(enabled=False)
    )
    naive = FabricConfig(
        settings=settings,
        model_params=MODEL_PARAMS,
        gating=GatingPolicy(enabled=False),
        naive=True,
    )
    await sample_batch(engine, _prompts(1)[0], [], [settings])  # warm-up
    batch_walls = await _batch_cost(engine, settings, runs)
    batch = {k: statistics.median(v) for k, v in batch_walls.items()}
    latency = batch[LATENCY_K]
    (naive_walls, naive_result), (fabric_walls, fabric_result) = await _graphs(
        engine, naive, single, runs
    )
    naive_wall, fabric_wall = statistics.median(naive_walls), statistics.median(fabric_walls)
    plan_wall, plan_run = await _plan(engine, fabric, plan_runs)
    depth = fabric_result.figures.depth
    planner_s = plan_run.planner.timings.total_s
    return {
        "engine": engine.name,
        "max_tokens": max_tokens,
        "runs": runs,
        "batch_wall_s": batch,
        "batch_relative": {k: v / batch[1] for k, v in batch.items()},
        "batch_walls_s": batch_walls,
        "per_batch_latency_s": latency,
        "graph": {
            "depth": depth,
            "total": fabric_result.figures.total,
            "naive_wall_s": naive_wall,
            "fabric_wall_s": fabric_wall,
            "wall_ratio": naive_wall / fabric_wall,
            "naive_walls_s": naive_walls,
            "fabric_walls_s": fabric_walls,
            "paired_ratios": [n / f for n, f in zip(naive_walls, fabric_walls, strict=True)],
            "naive": naive_result.figures.to_json(),
            "fabric": fabric_result.figures.to_json(),
            "budget_s": depth * latency,
            "fabric_over_budget": fabric_wall / (depth * latency),
        },
        "plan_and_execute": {
            "wall_s": plan_wall,
            "figures": plan_run.figures.to_json(),
            "planner_s": planner_s,
            "planner_tokens": plan_run.planner.usage.completion_tokens,
            "budget_s": (depth + 2) * latency,
            "over_budget": plan_wall / ((depth + 2) * latency),
            "without_planner_over_budget": (plan_wall - planner_s) / ((depth + 1) * latency),
            "ok": plan_run.ok,
            "speculative": list(plan_run.speculative),
        },
    }


def report(doc: dict[str, Any]) -> str:
    g, p = doc["graph"], doc["plan_and_execute"]
    lines = [
        f"engine {doc['engine']}, max_tokens {doc['max_tokens']}, medians of {doc['runs']} runs",
        "",
        "one batch of K prompts, wall time relative to K = 1:",
        "  "
        + "  ".join(
            f"K={k}: {doc['batch_wall_s'][k]:.2f} s ({doc['batch_relative'][k]:.2f}x)"
            for k in BATCH_SIZES
        ),
        f"per-batch latency (K = {LATENCY_K}): {doc['per_batch_latency_s']:.2f} s",
        "",
        f"spec graph ({g['total']} nodes, depth {g['depth']}, one pass each):",
        f"  naive (one node at a time): {g['naive_wall_s']:.2f} s, "
        f"batch efficiency {g['naive']['headers']['CRP-PEF-Batch-Efficiency']}",
        f"  fabric:                     {g['fabric_wall_s']:.2f} s, "
        f"batch efficiency {g['fabric']['headers']['CRP-PEF-Batch-Efficiency']} "
        f"({g['fabric']['inferences']} inferences / {g['fabric']['rounds']} rounds)",
        f"  wall ratio naive/fabric: {g['wall_ratio']:.2f}x (per run: "
        + ", ".join(f"{r:.2f}" for r in g["paired_ratios"])
        + ")",
        f"  fabric wall / (D x per-batch latency = {g['budget_s']:.2f} s): "
        f"{g['fabric_over_budget']:.2f}",
        "",
        "plan and execute (gold plan decoded by the planner, consensus N=3 on 6 nodes):",
        f"  wall {p['wall_s']:.2f} s (planner {p['planner_s']:.2f} s for "
        f"{p['planner_tokens']} plan tokens), ok={p['ok']}",
        "  " + "  ".join(f"{k}: {v}" for k, v in p["figures"]["headers"].items()),
        f"  rounds {p['figures']['rounds']} (budget D + 2 = {p['figures']['budget_rounds']}), "
        f"wall / ((D + 2) x per-batch latency = {p['budget_s']:.2f} s): {p['over_budget']:.2f}; "
        f"without the planner's decode, against (D + 1) batches: "
        f"{p['without_planner_over_budget']:.2f}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.benchmarks.fabric_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--plan-runs", type=int, default=1, help="plan-and-execute runs")
    parser.add_argument("--max-tokens", type=int, default=32, help="generation budget")
    parser.add_argument("--model", default=None, help="a local HF model folder")
    parser.add_argument("--json", metavar="FILE", type=Path, default=None, help="write JSON")
    args = parser.parse_args(argv)
    # The fabric logs every node at debug level; keep the report readable.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    async def go() -> dict[str, Any]:
        from harness.engines.vllm import open_default_engine

        async with open_default_engine(args.model) as engine:
            return await measure(
                engine, runs=args.runs, max_tokens=args.max_tokens, plan_runs=args.plan_runs
            )

    doc = anyio.run(go)
    print(report(doc))
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
