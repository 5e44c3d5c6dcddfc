"""``python -m benchmarks.fabric_quality``: does the fabric buy accuracy, at what cost?

CRP-SPEC-022 §8 asks whether a small model on the fabric (batched consensus, verification,
gating) reaches the quality of a larger one. This benchmark measures the first half on one
model: the same tasks (:mod:`benchmarks.fabric_quality_tasks`: extraction, then
arithmetic and comparison over what extraction found, every step with a gold answer) run
by one model in these **arms**:

================  ===========================================================================
arm               what runs
================  ===========================================================================
``single-pass``   the spec's naive contender: the whole task in one prompt, one generation
``naive``         the task's DAG, one step after another, one greedy pass each, no checks
``layered``       the DAG with layering and batching, one greedy pass each, no checks
``fabric``        the DAG with every mechanism: consensus N=3 at 0.3/0.6/0.9 on the
                  high-stakes steps (gating: the ``simple`` step runs once), verification
                  with bounded repair (2 re-runs; a rejected moderate step escalates to
                  consensus), layering, batching
``-consensus``    ``fabric`` without consensus (verification and repair only); optional
``-verification`` ``fabric`` without verification (consensus only); optional
================  ===========================================================================

For each arm: step accuracy and task accuracy (all five steps right) with 95% Wilson
intervals, accuracy per step, wall time (total and median per task), inferences (engine
requests), rounds, tokens (prompt + completion, as the engine reported them) and compute
(model parameters × tokens, also relative to ``naive``); for the fabric arms the steps that
ended *contested* (no majority: released, flagged) or *failed* (verification rejected every
repair: no answer) and the accuracy of the unflagged answers; and against ``naive`` the
paired step counts (right here and wrong there, and the reverse) with an exact McNemar
p-value.

Arms are interleaved task by task (their order rotating), the prefix cache emptied before
every task of every arm, so load from other processes and caching fall on all alike. A
larger model runs the same way: ``--model PATH`` (a local Hugging Face folder on the
in-process vLLM engine) or ``--engine http --base-url URL --model NAME`` (any
OpenAI-compatible server), with ``--model-params`` for the compute figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from benchmarks.fabric_quality_tasks import (
    QUESTIONS,
    QualityTask,
    build_graph,
    correct,
    extract,
    generate_tasks,
    parse_single_pass,
    single_pass_messages,
    tasks_to_jsonl,
    toolset_for,
)
from harness.engines.base import Engine, GenerationSettings, reset_prefix_cache
from harness.fabric import Fabric, FabricConfig, GatingPolicy, Mechanisms, RepairPolicy
from harness.messages import Completion, Message, ToolSpec
from harness.tools import Toolset

__all__ = (
    "ARMS",
    "OPTIONAL_ARMS",
    "QualitySettings",
    "main",
    "mcnemar_p",
    "measure",
    "report",
    "summarise",
    "warm_up",
    "wilson",
)

#: The DAG arms: name -> the mechanisms switched on (``single-pass`` runs no DAG).
ARMS: dict[str, Mechanisms | None] = {
    "single-pass": None,
    "naive": Mechanisms(
        layering=False, batching=False, speculation=False, consensus=False, verification=False
    ),
    "layered": Mechanisms.without("consensus", "verification"),
    "fabric": Mechanisms(),
    "-consensus": Mechanisms.without("consensus"),
    "-verification": Mechanisms.without("verification"),
}
#: Arms left out unless ``--arms`` names them.
OPTIONAL_ARMS = ("-consensus", "-verification")
DEFAULT_ARMS = tuple(a for a in ARMS if a not in OPTIONAL_ARMS)
#: The packaged model's size (SmolLM2-135M-Instruct).
DEFAULT_MODEL_PARAMS = 135e6


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% for ``z`` = 1.96); (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denominator = 1 + z * z / n
    return max(0.0, (centre - margin) / denominator), min(1.0, (centre + margin) / denominator)


def mcnemar_p(b: int, c: int) -> float:
    """The exact two-sided McNemar p-value of ``b`` vs ``c`` discordant pairs (binomial)."""
    n = b + c
    if n == 0:
        return 1.0
    tail: float = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class QualitySettings:
    """One experiment: ``max_tokens`` per step (the single pass gets five steps' worth),
    the base ``seed``, the repair budget and the model's size for the compute figure."""

    max_tokens: int = 12
    seed: int = 0
    max_repairs: int = 2
    model_params: float = DEFAULT_MODEL_PARAMS

    def config(self, mechanisms: Mechanisms, seed: int) -> FabricConfig:
        return FabricConfig(
            settings=GenerationSettings(
                max_tokens=self.max_tokens,
                temperature=0.0,
                seed=seed,
                constrain=False,
                stop=("\n",),
            ),
            gating=GatingPolicy(),  # each step votes with its own comparator (same_answer)
            repair=RepairPolicy(max_repairs=self.max_repairs),
            mechanisms=mechanisms,
            model_params=self.model_params,
        )


class _Recorder:
    """The engine, keeping every reply (its step's prompt line, temperature, text) so a run's
    results show what each sample said, not only each vote's winner."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.name = engine.name
        self.replies: list[dict[str, Any]] = []

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> Completion:
        completion = await self.engine.generate(messages, tools, settings)
        prompt = str(messages[-1].get("content") or "").splitlines()
        self.replies.append(
            {
                "step": prompt[0] if prompt else "",
                "temperature": settings.temperature,
                "reply": completion.content,
            }
        )
        return completion

    async def aclose(self) -> None:
        return None  # the caller owns the engine

    async def __aenter__(self) -> _Recorder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


async def warm_up(engine: Engine) -> None:
    """One short request before any arm runs, so no arm's first request pays the engine's
    first-request cost (the single pass did in the first run)."""
    await engine.generate(
        [{"role": "user", "content": "Say hello."}],
        [],
        GenerationSettings(max_tokens=4, temperature=0.0, constrain=False),
    )


async def _single_pass(
    engine: Engine, task: QualityTask, settings: QualitySettings, seed: int
) -> dict[str, Any]:
    started = time.perf_counter()
    completion = await engine.generate(
        single_pass_messages(task),
        [],
        GenerationSettings(
            max_tokens=len(QUESTIONS) * settings.max_tokens + 20,
            temperature=0.0,
            seed=seed,
            constrain=False,
        ),
    )
    wall = time.perf_counter() - started
    answers = parse_single_pass(completion.content or "")
    return {
        "wall_s": wall,
        "inferences": 1,
        "rounds": 1,
        "tokens": completion.usage.billed_tokens,
        "replies": [{"step": "single-pass", "temperature": 0.0, "reply": completion.content}],
        "steps": {
            step: {
                "answer": answers[step],
                "value": extract(task, step, answers[step]),
                "status": "ok" if answers[step] is not None else "missing",
                "correct": correct(task, step, answers[step]),
                "inferences": 0,
            }
            for step in QUESTIONS
        },
    }


async def _dag(
    engine: Engine,
    toolset: Toolset,
    task: QualityTask,
    settings: QualitySettings,
    mechanisms: Mechanisms,
    seed: int,
) -> dict[str, Any]:
    recorder = _Recorder(engine)
    fabric = Fabric(recorder, toolset=toolset, config=settings.config(mechanisms, seed))
    started = time.perf_counter()
    result = await fabric.run(build_graph(task))
    wall = time.perf_counter() - started
    steps = {}
    for step in QUESTIONS:
        node = result.nodes[step]
        answer = node.text if node.released else None
        steps[step] = {
            "answer": answer,
            "value": extract(task, step, answer),
            "status": node.status,
            "correct": correct(task, step, answer),
            "inferences": node.inferences,
            "attempts": node.attempts,
            "agreement": node.agreement,
        }
    figures = result.figures
    return {
        "wall_s": wall,
        "inferences": figures.inferences,
        "rounds": figures.rounds,
        "tokens": figures.tokens,
        "replies": recorder.replies,
        "steps": steps,
    }


async def measure(
    engine: Engine,
    tasks: Sequence[QualityTask],
    *,
    arms: Sequence[str] = DEFAULT_ARMS,
    settings: QualitySettings | None = None,
    progress: bool = False,
    on_task: Callable[[dict[str, Any]], object] | None = None,
) -> dict[str, Any]:
    """Run every task in every arm (interleaved, the order rotating); per-task records.
    ``on_task`` gets the document so far after every task (to save partial results)."""
    settings = settings or QualitySettings()
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise ValueError(f"Unknown arm(s) {unknown}; known: {', '.join(ARMS)}.")
    toolset = toolset_for(tasks)
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    load_start = os.getloadavg()
    started = time.perf_counter()

    def document(done: int) -> dict[str, Any]:
        return {
            "engine": engine.name,
            "settings": {
                "max_tokens": settings.max_tokens,
                "seed": settings.seed,
                "max_repairs": settings.max_repairs,
                "model_params": settings.model_params,
            },
            "tasks": done,
            "arms": list(arms),
            "load_start": list(load_start),
            "load_end": list(os.getloadavg()),
            "total_s": time.perf_counter() - started,
            "runs": runs,
        }

    for i, task in enumerate(tasks):
        seed = settings.seed * 1000 + i
        order = [arms[(i + k) % len(arms)] for k in range(len(arms))]
        for arm in order:
            await reset_prefix_cache(engine)
            mechanisms = ARMS[arm]
            if mechanisms is None:
                record = await _single_pass(engine, task, settings, seed)
            else:
                record = await _dag(engine, toolset, task, settings, mechanisms, seed)
            runs[arm].append({"task": task.id, **record})
            if progress:
                right = sum(s["correct"] for s in record["steps"].values())
                print(
                    f"  {task.id} {arm}: {right}/{len(QUESTIONS)} right, {record['wall_s']:.1f} s, "
                    f"{record['inferences']} inferences",
                    file=sys.stderr,
                    flush=True,
                )
        if progress:
            right = {a: sum(s["correct"] for s in runs[a][-1]["steps"].values()) for a in arms}
            print(
                f"task {i + 1}/{len(tasks)} {task.id}: steps right "
                + " ".join(f"{a} {r}/5" for a, r in right.items())
                + f" (+{time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
        if on_task is not None:
            on_task(document(i + 1))
    return document(len(tasks))


def _arm_summary(records: list[dict[str, Any]], params: float) -> dict[str, Any]:
    steps = [s for r in records for s in r["steps"].values()]
    n_right = sum(s["correct"] for s in steps)
    tasks_right = sum(all(s["correct"] for s in r["steps"].values()) for r in records)
    unflagged = [s for s in steps if s["status"] == "ok"]
    tokens = sum(r["tokens"] for r in records)
    return {
        "steps": len(steps),
        "step_correct": n_right,
        "step_accuracy": n_right / len(steps) if steps else 0.0,
        "step_ci": wilson(n_right, len(steps)),
        "tasks_correct": tasks_right,
        "task_accuracy": tasks_right / len(records) if records else 0.0,
        "task_ci": wilson(tasks_right, len(records)),
        "per_step": {
            step: sum(r["steps"][step]["correct"] for r in records) / len(records)
            for step in QUESTIONS
        },
        "wall_s": sum(r["wall_s"] for r in records),
        "wall_median_s": statistics.median(r["wall_s"] for r in records),
        "inferences": sum(r["inferences"] for r in records),
        "rounds_median": statistics.median(r["rounds"] for r in records),
        "tokens": tokens,
        "compute": params * tokens,
        "contested": sum(s["status"] == "contested" for s in steps),
        "failed": sum(s["status"] in ("failed", "skipped") for s in steps),
        "unflagged": len(unflagged),
        "unflagged_accuracy": (
            sum(s["correct"] for s in unflagged) / len(unflagged) if unflagged else None
        ),
    }


def summarise(doc: dict[str, Any]) -> dict[str, Any]:
    """Per-arm figures and the paired comparison with ``naive`` (module docstring)."""
    params = doc["settings"]["model_params"]
    arms = {arm: _arm_summary(records, params) for arm, records in doc["runs"].items()}
    base = arms.get("naive")
    paired: dict[str, dict[str, Any]] = {}
    for arm, summary in arms.items():
        if base is not None:
            summary["compute_vs_naive"] = summary["compute"] / base["compute"]
            summary["wall_vs_naive"] = summary["wall_s"] / base["wall_s"]
        if arm == "naive" or "naive" not in doc["runs"]:
            continue
        better = worse = 0
        for mine, theirs in zip(doc["runs"][arm], doc["runs"]["naive"], strict=True):
            for step in QUESTIONS:
                a, b = mine["steps"][step]["correct"], theirs["steps"][step]["correct"]
                better += a and not b
                worse += b and not a
        paired[arm] = {"better": better, "worse": worse, "p": mcnemar_p(better, worse)}
    return {"arms": arms, "paired_vs_naive": paired}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def report(doc: dict[str, Any], summary: dict[str, Any]) -> str:
    """The table as Markdown."""
    s = doc["settings"]
    lines = [
        f"engine {doc['engine']} ({s['model_params']:.3g} params), {doc['tasks']} tasks x "
        f"{len(QUESTIONS)} steps, max_tokens {s['max_tokens']}, seed {s['seed']}, repairs "
        f"{s['max_repairs']}; load average {doc['load_start'][0]:.1f} at the start, "
        f"{doc['load_end'][0]:.1f} at the end; {doc['total_s']:.0f} s in all",
        "",
        "| arm | step accuracy (95% CI) | task accuracy (95% CI) | wall s (median/task) "
        "| inferences | tokens | compute vs naive | contested | failed | unflagged accuracy |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, a in summary["arms"].items():
        lo, hi = a["step_ci"]
        tlo, thi = a["task_ci"]
        unflagged = (
            f"{_pct(a['unflagged_accuracy'])} of {a['unflagged']}"
            if a["unflagged_accuracy"] is not None
            else "-"
        )
        lines.append(
            f"| {arm} | {_pct(a['step_accuracy'])} ({_pct(lo)}–{_pct(hi)}) | "
            f"{_pct(a['task_accuracy'])} ({_pct(tlo)}–{_pct(thi)}) | "
            f"{a['wall_s']:.1f} ({a['wall_median_s']:.2f}) | {a['inferences']} | "
            f"{a['tokens']} | {a.get('compute_vs_naive', float('nan')):.2f} | "
            f"{a['contested']} | {a['failed']} | {unflagged} |"
        )
    lines += ["", "accuracy per step:", "", "| arm | " + " | ".join(QUESTIONS) + " |"]
    lines.append("|---|" + "---|" * len(QUESTIONS))
    for arm, a in summary["arms"].items():
        lines.append(f"| {arm} | " + " | ".join(_pct(v) for v in a["per_step"].values()) + " |")
    if summary["paired_vs_naive"]:
        lines += ["", "paired with naive, step by step (exact McNemar):", ""]
        for arm, p in summary["paired_vs_naive"].items():
            lines.append(
                f"- {arm}: right where naive was wrong {p['better']}, wrong where naive was "
                f"right {p['worse']}, p = {p['p']:.3g}"
            )
    return "\n".join(lines)


@asynccontextmanager
async def _open(args: argparse.Namespace) -> AsyncIterator[Engine]:
    if args.engine == "http":
        if not args.base_url:
            raise SystemExit("--engine http needs --base-url, e.g. http://127.0.0.1:8000/v1")
        from harness.engines.openai_http import OpenAIHTTPEngine

        async with OpenAIHTTPEngine(
            base_url=args.base_url, model=args.model or "default", api_key=args.api_key
        ) as http:
            yield http
        return
    from harness.engines.vllm import open_default_engine

    async with open_default_engine(args.model) as engine:
        yield engine


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fabric_quality",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    parser.add_argument("--tasks", type=int, default=24, help="tasks (5 steps each; default 24)")
    parser.add_argument("--seed", type=int, default=0, help="task-set and sampling seed")
    parser.add_argument("--max-tokens", type=int, default=12, help="budget per step (12)")
    parser.add_argument("--max-repairs", type=int, default=2, help="re-runs of a rejected step")
    parser.add_argument(
        "--arms",
        default=",".join(DEFAULT_ARMS),
        help=f"comma-separated arms (default {','.join(DEFAULT_ARMS)}; also "
        f"{','.join(OPTIONAL_ARMS)})",
    )
    parser.add_argument("--engine", choices=("vllm", "http"), default="vllm")
    parser.add_argument(
        "--model", default=None, help="a local HF model folder (vllm) or the served name (http)"
    )
    parser.add_argument("--base-url", default=None, help="for --engine http")
    parser.add_argument("--api-key", default=None, help="for --engine http")
    parser.add_argument(
        "--model-params",
        type=float,
        default=None,
        help="the model's parameter count for the compute figure (default 135e6, the "
        "packaged model; required with --model or --engine http)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="write table.md, results.json, tasks.jsonl here"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        print(f"Unknown arm(s) {unknown}; known: {', '.join(ARMS)}.", file=sys.stderr)
        return 2
    params = args.model_params
    if params is None:
        if args.model is not None or args.engine == "http":
            print("Give --model-params for a model other than the packaged one.", file=sys.stderr)
            return 2
        params = DEFAULT_MODEL_PARAMS
    if args.tasks < 1 or args.max_tokens < 1 or args.max_repairs < 0:
        print(
            "--tasks and --max-tokens must be 1 or more, --max-repairs 0 or more.",
            file=sys.stderr,
        )
        return 2
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    tasks = generate_tasks(args.tasks, args.seed)
    settings = QualitySettings(args.max_tokens, args.seed, args.max_repairs, params)

    command = "python -m benchmarks.fabric_quality " + shlex.join(
        sys.argv[1:] if argv is None else list(argv)
    )
    model = args.model or "SmolLM2-135M-Instruct (packaged)"

    def save(doc: dict[str, Any]) -> str:
        doc["command"] = command
        doc["model"] = model
        doc["date"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        summary = summarise(doc)
        table = report(doc, summary)
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            header = f"# Fabric quality\n\nmodel: {model}\ncommand: `{command}`\n"
            header += f"date: {doc['date']}\n\n"
            (args.out / "table.md").write_text(header + table + "\n", encoding="utf-8")
            (args.out / "results.json").write_text(
                json.dumps({**doc, "summary": summary}, indent=1, default=str), encoding="utf-8"
            )
            (args.out / "tasks.jsonl").write_text(
                tasks_to_jsonl(tasks[: doc["tasks"]]), encoding="utf-8"
            )
        return table

    async def go() -> dict[str, Any]:
        async with _open(args) as engine:
            await warm_up(engine)
            return await measure(
                engine, tasks, arms=arms, settings=settings, progress=True, on_task=save
            )

    print(save(anyio.run(go)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
