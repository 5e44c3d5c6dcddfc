"""``python -m benchmarks.fabric_bench``: the parallel execution fabric on the real engine.

On the in-process vLLM engine (the packaged SmolLM2-135M-Instruct on CPU unless ``--model``),
with a small generation budget (``--max-tokens``, default 32), it measures:

1. **batch cost**: the wall time of one batch of K = 1, 2, 4, 8 distinct short prompts (the
   example's node prompts) submitted together, relative to one prompt, and where each
   request's time went (queue, prefill, decode; medians of the engine's own timings);
2. **the plan**: tokens per step of the example's plan in plan lines and in JSON Lines;
3. **mechanisms on the DAG**: CRP-SPEC-022's example graph (14 steps in layers 4/5/3/2, N=3
   consensus on six, ``non_empty`` verification on every step) run with every mechanism on
   (*fabric*), with each switched off alone (*-layering*, *-batching*, *-consensus*,
   *-verification*) and as the naive baseline (one step after another, one request at a
   time, the same samples and checks): each variant's wall, rounds and inferences, and
   what switching a mechanism off costs (wall without it / wall of the fabric: above 1 it
   was buying time, below 1 it costs time);
4. **plan and execute** of the same example (the gold plan decoded by the planner, steps
   streamed into the fabric as their lines complete, one composer call): *fabric*,
   *-speculation* and *naive*, with when the first step started and the plan's last token
   arrived.

Medians over ``--runs`` runs, with the compared cases interleaved within each run (K values;
the variants in turn) so that load from other processes falls on all alike; the prefix cache
is emptied before every measured case. On a shared machine absolute times are noisy; ratios
within a run are the point. Prints a report and, with ``--json FILE``, writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import structlog

from harness.engines.base import Engine, GenerationSettings, reset_prefix_cache
from harness.fabric import (
    EXAMPLE_TASK,
    Fabric,
    FabricConfig,
    FabricResult,
    Mechanisms,
    NaiveBaseline,
    PlanRun,
    example_graph,
    example_plan,
    measure_baseline,
    non_empty,
    plan_and_execute,
    plan_to_jsonl,
    render_messages,
    sample_batch,
)
from harness.messages import Completion, Message

__all__ = ("GRAPH_VARIANTS", "PLAN_VARIANTS", "main", "measure", "report")

BATCH_SIZES = (1, 2, 4, 8)
MODEL_PARAMS = 135e6
#: The DAG variants: name -> the mechanisms switched on.
GRAPH_VARIANTS: dict[str, Mechanisms] = {
    "fabric": Mechanisms(),
    "-layering": Mechanisms.without("layering"),
    "-batching": Mechanisms.without("batching"),
    "-consensus": Mechanisms.without("consensus"),
    "-verification": Mechanisms.without("verification"),
    "naive": Mechanisms.naive(),
}
#: The plan-and-execute variants.
PLAN_VARIANTS: dict[str, Mechanisms] = {
    "fabric": Mechanisms(),
    "-speculation": Mechanisms.without("speculation"),
    "naive": Mechanisms.naive(),
}


async def _timed(engine: Engine, fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    await reset_prefix_cache(engine)
    started = time.perf_counter()
    value = await fn()
    return time.perf_counter() - started, value


def _prompts(k: int) -> list[list[Message]]:
    nodes = list(example_graph())[:k]
    return [render_messages(node, {}) for node in nodes]


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


async def _batch_cost(engine: Engine, settings: GenerationSettings, runs: int) -> dict[str, Any]:
    """Wall per K (every run) and the engine's per-request timings (all runs pooled); the K
    values are interleaved within each run."""
    walls: dict[int, list[float]] = {k: [] for k in BATCH_SIZES}
    parts: dict[int, list[Completion]] = {k: [] for k in BATCH_SIZES}
    for _ in range(runs):
        for k in BATCH_SIZES:
            chats = _prompts(k)

            async def batch(chats: list[list[Message]] = chats) -> list[Completion]:
                out: list[Completion] = []

                async def one(chat: list[Message]) -> None:
                    out.append(await engine.generate(chat, [], settings))

                async with anyio.create_task_group() as tg:
                    for chat in chats:
                        tg.start_soon(one, chat)
                return out

            wall, done = await _timed(engine, batch)
            walls[k].append(wall)
            parts[k].extend(done)
    median = {k: _median(v) for k, v in walls.items()}
    return {
        "wall_s": median,
        "relative": {k: v / median[1] if median[1] else 0.0 for k, v in median.items()},
        "walls_s": walls,
        "paired_relative": {
            k: [w / w1 for w, w1 in zip(walls[k], walls[1], strict=True)] for k in BATCH_SIZES
        },
        "per_request": {
            k: {
                "queue_s": _median([c.timings.queue_s for c in cs]),
                "prefill_s": _median([c.timings.prefill_s for c in cs]),
                "decode_s": _median([c.timings.decode_s for c in cs]),
                "total_s": _median([c.timings.total_s for c in cs]),
                "prompt_tokens": _median([c.usage.prompt_tokens for c in cs]),
                "cached_tokens": _median([c.usage.cached_tokens for c in cs]),
                "completion_tokens": _median([c.usage.completion_tokens for c in cs]),
            }
            for k, cs in parts.items()
        },
    }


def _plan_tokens(engine: Engine) -> dict[str, Any]:
    count = getattr(engine, "count_tokens", None)
    texts = {"plan_lines": example_plan(), "json_lines": plan_to_jsonl(example_graph())}
    steps = len(example_graph())
    out: dict[str, Any] = {"steps": steps, "tokenizer": "engine" if count else "words"}
    for name, text in texts.items():
        tokens = count(text) if count else len(text.split())
        out[name] = {"tokens": tokens, "per_step": tokens / steps}
    return out


def _summary(result: FabricResult, wall: float) -> dict[str, Any]:
    fig = result.figures
    return {
        "wall_s": wall,
        "rounds": fig.rounds,
        "inferences": fig.inferences,
        "batch_efficiency": fig.batch_efficiency,
        "ok": result.ok,
        "contested": list(result.contested),
        "failed": list(result.failed),
        "agreement": fig.agreement,
        "headers": fig.headers(),
        "figures": fig.to_json(),
    }


def _plan_summary(run: PlanRun, wall: float, baseline: NaiveBaseline | None) -> dict[str, Any]:
    out = _summary(run.fabric, wall)
    fig = replace(run.figures, baseline=baseline)
    out.update(
        rounds=fig.rounds,
        inferences=fig.inferences,
        batch_efficiency=fig.batch_efficiency,
        ok=run.ok,
        speculative=list(run.speculative),
        plan_tokens=run.planner.usage.completion_tokens,
        plan_done_s=run.plan_done_s,
        first_step_s=min(
            (r.started - run.fabric.started for r in run.fabric.nodes.values() if r.started),
            default=None,
        ),
        headers=fig.headers(),
        figures=fig.to_json(),
    )
    return out


async def _variants(
    engine: Engine, base: FabricConfig, runs: int
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Every variant once per run, in turn (the DAG's, then plan and execute's); the naive
    pass of the task (the compute baseline) is measured once, outside every timed run."""
    graph: dict[str, list[dict[str, Any]]] = {name: [] for name in GRAPH_VARIANTS}
    plans: dict[str, list[dict[str, Any]]] = {name: [] for name in PLAN_VARIANTS}
    plan = example_plan()
    baseline, _ = await measure_baseline(engine, EXAMPLE_TASK, base)
    for _ in range(runs):
        for name, mechanisms in GRAPH_VARIANTS.items():
            fabric = Fabric(engine, config=replace(base, mechanisms=mechanisms))

            def dag(fabric: Fabric = fabric) -> Awaitable[FabricResult]:
                return fabric.run(example_graph())

            wall, result = await _timed(engine, dag)
            graph[name].append(_summary(result, wall))
        for name, mechanisms in PLAN_VARIANTS.items():
            config = replace(base, mechanisms=mechanisms)

            def go(config: FabricConfig = config) -> Awaitable[PlanRun]:
                return plan_and_execute(
                    engine, EXAMPLE_TASK, config=config, plan=plan, naive_pass=False
                )

            wall, run = await _timed(engine, go)
            plans[name].append(_plan_summary(run, wall, baseline))
    return graph, plans


def _versus(variants: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    walls = {name: [r["wall_s"] for r in rs] for name, rs in variants.items()}
    fabric = walls["fabric"]
    return {
        "wall_s": {name: _median(w) for name, w in walls.items()},
        "vs_fabric": {
            name: _median([a / b for a, b in zip(w, fabric, strict=True)])
            for name, w in walls.items()
        },
    }


async def measure(engine: Engine, *, runs: int = 3, max_tokens: int = 32) -> dict[str, Any]:
    """Every figure of the module docstring, measured on ``engine``."""
    settings = GenerationSettings(max_tokens=max_tokens, constrain=False)
    base = FabricConfig(
        settings=settings,
        model_params=MODEL_PARAMS,
        baseline_params=70e9,
        verifiers=(non_empty(),),
    )
    await sample_batch(engine, _prompts(1)[0], [], [settings])  # warm-up
    batch = await _batch_cost(engine, settings, runs)
    graph, plans = await _variants(engine, base, runs)
    return {
        "engine": engine.name,
        "max_tokens": max_tokens,
        "runs": runs,
        "batch": batch,
        "plan": _plan_tokens(engine),
        "graph": {"variants": graph, **_versus(graph)},
        "plan_and_execute": {"variants": plans, **_versus(plans)},
    }


def _table(section: dict[str, Any]) -> list[str]:
    lines = [
        f"  {'variant':<14} {'wall s':>7} {'x fabric':>9} {'rounds':>6} {'inf':>4} {'eff':>5}  ok",
    ]
    for name, runs in section["variants"].items():
        last = runs[-1]
        lines.append(
            f"  {name:<14} {section['wall_s'][name]:7.2f} {section['vs_fabric'][name]:9.2f} "
            f"{last['rounds']:6d} {last['inferences']:4d} {last['batch_efficiency']:5.1f}  "
            f"{sum(r['ok'] for r in runs)}/{len(runs)}"
        )
    return lines


def report(doc: dict[str, Any]) -> str:
    batch, plan = doc["batch"], doc["plan"]
    lines = [
        f"engine {doc['engine']}, max_tokens {doc['max_tokens']}, medians of {doc['runs']} runs",
        "",
        "one batch of K short prompts: wall relative to K = 1 (median of per-run ratios), and "
        "per request (medians):",
    ]
    for k in BATCH_SIZES:
        part = batch["per_request"][k]
        lines.append(
            f"  K={k}: {batch['wall_s'][k]:.2f} s, "
            f"{_median(batch['paired_relative'][k]):.2f}x K=1; queue {part['queue_s']:.3f} s, "
            f"prefill {part['prefill_s']:.3f} s, decode {part['decode_s']:.3f} s for "
            f"{part['completion_tokens']:.0f} tokens ({part['prompt_tokens']:.0f} prompt, "
            f"{part['cached_tokens']:.0f} cached)"
        )
    graph, plans = doc["graph"], doc["plan_and_execute"]
    fabric = plans["variants"]["fabric"][-1]
    lines += [
        "",
        f"plan of {plan['steps']} steps ({plan['tokenizer']} tokens): plan lines "
        f"{plan['plan_lines']['tokens']} ({plan['plan_lines']['per_step']:.1f} per step), "
        f"JSON Lines {plan['json_lines']['tokens']} ({plan['json_lines']['per_step']:.1f} "
        "per step)",
        "",
        "the spec's example DAG, each mechanism off alone (wall: median; x fabric: median of "
        "per-run ratios):",
        *_table(graph),
        "",
        "plan and execute of the example (the gold plan decoded by the planner):",
        *_table(plans),
        "",
        f"naive / fabric: DAG {graph['vs_fabric']['naive']:.2f}x, plan and execute "
        f"{plans['vs_fabric']['naive']:.2f}x",
        f"fabric: the first step started at +{fabric['first_step_s']:.2f} s, the plan's last "
        f"token at +{fabric['plan_done_s']:.2f} s ({fabric['plan_tokens']} plan tokens); "
        f"started before it: {' '.join(fabric['speculative']) or 'none'}",
        "  " + "  ".join(f"{k}: {v}" for k, v in fabric["headers"].items()),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fabric_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--max-tokens", type=int, default=32, help="generation budget")
    parser.add_argument("--model", default=None, help="a local HF model folder")
    parser.add_argument("--json", metavar="FILE", type=Path, default=None, help="write JSON")
    args = parser.parse_args(argv)
    # The fabric logs every node at debug level; keep the report readable.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    async def go() -> dict[str, Any]:
        from harness.engines.vllm import open_default_engine

        async with open_default_engine(args.model) as engine:
            return await measure(engine, runs=args.runs, max_tokens=args.max_tokens)

    doc = anyio.run(go)
    print(report(doc))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
