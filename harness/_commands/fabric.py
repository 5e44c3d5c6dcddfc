"""``harness fabric``: run a task as a DAG on the parallel execution fabric and print its figures.

``harness fabric run --prompt TEXT`` decomposes the task (one planner call), runs the plan's
steps on the fabric (each as soon as its inputs are ready, ready steps batched, consensus on
high-stakes steps) and composes the answer; ``harness fabric demo`` runs CRP-SPEC-022's
example, 14 steps in layers 4/5/3/2. Both print every step and the PEF figures in the spec's
header format. The real engine (in-process vLLM) is the default.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from harness.engines.base import Engine, GenerationSettings
from harness.errors import ConfigError
from harness.fabric import (
    EXAMPLE_TASK,
    Fabric,
    FabricConfig,
    FabricResult,
    GatingPolicy,
    Mechanisms,
    PEFFigures,
    PlanRun,
    RepairPolicy,
    example_graph,
    example_plan,
    measure_baseline,
    parse_plan,
    plan_and_execute,
)
from harness.fabric.document import run_document

__all__ = ("register", "run")

#: The packaged model's size (SmolLM2-135M-Instruct), for the compute figure.
DEFAULT_MODEL_PARAMS = 135e6

DESCRIPTION = """\
Run a task on the parallel execution fabric (CRP-SPEC-022): decompose it into a DAG of
steps (one planner call, one step per line), run every step the moment its inputs are
ready with ready steps submitted together so the engine batches them, batched consensus
(N=3 at temperatures 0.3/0.6/0.9) on high-stakes moderate steps and N=5 plus a mandatory
check on critical ones, then compose the answer (one call). With a streaming engine
(vllm, http) layer-0 steps start while the plan is still being decoded.

Prints each step (layer, mode, status, round, inferences, start, time, output), the answer
and the PEF figures as the spec's headers: CRP-PEF-Layers (depth/steps),
CRP-PEF-Batch-Efficiency (inferences per sequential batched round), CRP-PEF-Wall-Clock-Ms
and CRP-PEF-Compute-Vs-Naive (model params x tokens against a naive single pass of the same
task, run after the fabric and measured, by a --baseline-params model). A vote without a
strict majority (or --agreement) leaves its step "contested": released, flagged to its
consumers. Exit status 0 when every step is ok, 1 when a step failed, was skipped or
contested or the plan lost steps, 2 on a usage error.
"""

EPILOG = """\
examples:
  harness fabric demo                               # the spec's 14-step example on vLLM
  harness fabric demo --engine scripted-demo        # the same without a model (simulated)
  harness fabric demo --naive                       # one step, one request at a time: baseline
  harness fabric demo --no-batching                 # any mechanism off alone: --no-layering,
                                                    #   --no-speculation, --no-consensus,
                                                    #   --no-verification
  harness fabric run --prompt "Compare B-trees and LSM trees for a write-heavy store."
  harness fabric run --prompt "..." --plan plan.txt --json > run.json

plan format (--plan FILE; what the planner is asked to write), one step per line:
  T1: List the components.
  T2<T1@moderate!: Write the security section.     (deps, criticality, ! = high stakes)
JSON Lines ({"id": ..., "prompt": ..., "deps": [...]}) are read too.
"""


def _engine_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engine")
    group.add_argument(
        "--engine",
        choices=("vllm", "http", "scripted-demo"),
        default="vllm",
        help="vllm (default): the in-process vLLM engine; http: an OpenAI-compatible server "
        "(--base-url); scripted-demo: canned answers with simulated latency (no model)",
    )
    group.add_argument(
        "--model",
        metavar="PATH",
        default=None,
        help="a local Hugging Face model folder (default: the packaged SmolLM2-135M-Instruct); "
        "for --engine http, the served model name",
    )
    group.add_argument("--base-url", default=None, help="for --engine http: the server's URL")
    group.add_argument("--api-key", default=None, help="for --engine http: bearer token")


def _fabric_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("fabric")
    group.add_argument(
        "--max-tokens", type=int, default=64, help="generation budget per step (default 64)"
    )
    group.add_argument(
        "--temperature", type=float, default=0.0, help="single-pass temperature (default 0)"
    )
    group.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    group.add_argument(
        "--max-repairs", type=int, default=2, help="re-runs of a rejected step (default 2)"
    )
    group.add_argument(
        "--agreement",
        type=float,
        default=None,
        metavar="SHARE",
        help="the share of consensus samples the winner needs (default: a strict majority)",
    )
    group.add_argument(
        "--max-in-flight",
        type=int,
        default=64,
        metavar="N",
        help="the most engine requests in flight at once (default 64)",
    )
    group.add_argument(
        "--node-timeout", type=float, default=None, metavar="S", help="per-step timeout (s)"
    )
    group.add_argument(
        "--verifier-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="per-verifier timeout (default 30 s)",
    )
    mech = parser.add_argument_group(
        "mechanisms (each can be switched off alone; --naive switches off the first three)"
    )
    mech.add_argument(
        "--naive",
        action="store_true",
        help="the naive baseline: one step after another, one request at a time, no "
        "speculation (the same steps, samples and checks)",
    )
    mech.add_argument("--no-layering", action="store_true", help="one step at a time")
    mech.add_argument("--no-batching", action="store_true", help="one engine request at a time")
    mech.add_argument(
        "--no-speculation",
        "--no-speculative",
        action="store_true",
        help="parse the plan only once it is complete",
    )
    mech.add_argument(
        "--no-consensus", action="store_true", help="every step runs once (no batched consensus)"
    )
    mech.add_argument("--no-verification", action="store_true", help="run no verifier (no repairs)")
    compute = parser.add_argument_group("compute figure")
    compute.add_argument(
        "--model-params",
        type=float,
        default=None,
        help="the model's parameter count (default: 135e6, the packaged model, unless --model "
        "names another)",
    )
    compute.add_argument(
        "--baseline-params",
        type=float,
        default=70e9,
        help="the naive model's parameter count (default 70e9, CRP-SPEC-022 §3.1)",
    )
    compute.add_argument(
        "--no-naive-pass",
        action="store_true",
        help="do not run the naive pass of the task (the compute header is then left out)",
    )
    parser.add_argument("--json", action="store_true", help="print the run as JSON")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``harness fabric`` (with ``run`` and ``demo``) to the CLI."""
    parser = sub.add_parser(
        "fabric",
        help="run a task as a DAG of batched steps and report the PEF figures",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = parser.add_subparsers(dest="fabric_command", metavar="{run,demo}")
    run_parser = verbs.add_parser(
        "run",
        help="decompose a task, run the plan on the fabric, compose the answer",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run_parser.add_argument("--prompt", required=True, help="the task")
    run_parser.add_argument(
        "--plan",
        metavar="FILE",
        type=Path,
        default=None,
        help="force this plan (plan lines or JSON Lines; the planner still decodes it)",
    )
    demo_parser = verbs.add_parser(
        "demo",
        help="the spec's 14-step, depth-4 example (layers 4/5/3/2)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo_parser.add_argument(
        "--graph-only",
        action="store_true",
        help="run only the DAG (no planner or composer call)",
    )
    for verb in (run_parser, demo_parser):
        _engine_options(verb)
        _fabric_options(verb)
        verb.set_defaults(func=run)
    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _mechanisms(args: argparse.Namespace) -> Mechanisms:
    naive = Mechanisms.naive() if args.naive else Mechanisms()
    return Mechanisms(
        layering=naive.layering and not args.no_layering,
        batching=naive.batching and not args.no_batching,
        speculation=naive.speculation and not args.no_speculation,
        consensus=not args.no_consensus,
        verification=not args.no_verification,
    )


def _config(args: argparse.Namespace) -> FabricConfig:
    if args.max_tokens < 1:
        raise ConfigError(f"--max-tokens {args.max_tokens} is below 1; try --max-tokens 64.")
    if args.max_repairs < 0:
        raise ConfigError(f"--max-repairs {args.max_repairs} is negative; use 0 or more.")
    if args.max_in_flight < 1:
        raise ConfigError(f"--max-in-flight {args.max_in_flight} is below 1; use 1 or more.")
    params = args.model_params
    if params is None and args.model is None:
        params = DEFAULT_MODEL_PARAMS
    return FabricConfig(
        settings=GenerationSettings(
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            seed=args.seed,
            constrain=False,
        ),
        gating=GatingPolicy(agreement=args.agreement),
        repair=RepairPolicy(max_repairs=args.max_repairs),
        mechanisms=_mechanisms(args),
        max_in_flight=args.max_in_flight,
        node_timeout_s=args.node_timeout,
        verifier_timeout_s=args.verifier_timeout,
        model_params=params,
        baseline_params=args.baseline_params,
    )


@asynccontextmanager
async def _open(args: argparse.Namespace) -> AsyncIterator[Engine]:
    if args.engine == "scripted-demo":
        from harness.testing import fabric_demo_engine

        async with fabric_demo_engine() as scripted:
            yield scripted
        return
    from harness._commands._engine_args import EngineOptions, open_engine

    async with open_engine(EngineOptions.from_args(args)) as engine:
        yield engine


def _read_plan(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"Cannot read the plan '{path}': {exc.strerror or type(exc).__name__}. Pass an "
            "existing JSON Lines file to --plan."
        ) from None
    parse_plan(text, strict=True)
    return text


def run(args: argparse.Namespace) -> int:
    """Run ``fabric run`` or ``fabric demo`` and print the steps and figures."""
    config = _config(args)
    demo = args.fabric_command == "demo"
    graph_only = demo and args.graph_only
    task = EXAMPLE_TASK if demo else args.prompt
    if not task.strip():
        raise ConfigError('--prompt is empty; pass the task, e.g. --prompt "Explain tides."')
    plan: str | None = None
    if demo:
        plan = example_plan()
    elif args.plan is not None:
        plan = _read_plan(args.plan)

    async def go() -> tuple[FabricResult, PlanRun | None]:
        async with _open(args) as engine:
            if graph_only:
                result = await Fabric(engine, config=config).run(example_graph())
                if not args.no_naive_pass:
                    baseline, _ = await measure_baseline(engine, task, config)
                    result = replace(result, figures=replace(result.figures, baseline=baseline))
                return result, None
            outcome = await plan_and_execute(
                engine, task, config=config, plan=plan, naive_pass=not args.no_naive_pass
            )
            return outcome.fabric, outcome

    result, outcome = anyio.run(go)
    figures = outcome.figures if outcome is not None else result.figures
    if args.json:
        print(json.dumps(_document(result, outcome, figures), indent=2, default=str))
    else:
        print(_report(result, outcome, figures))
    ok = outcome.ok if outcome is not None else result.ok
    return 0 if ok else 1


def _document(result: FabricResult, outcome: PlanRun | None, figures: PEFFigures) -> dict[str, Any]:
    return run_document(result, outcome, figures, task=EXAMPLE_TASK)


def _one_line(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _table(doc: dict[str, Any]) -> list[str]:
    header = ("step", "layer", "mode", "status", "round", "inf", "start", "ms", "output")
    rows = [
        (
            n["id"],
            str(n["layer"]),
            n["mode"],
            n["status"],
            str(n["round"]),
            str(n["inferences"]),
            "" if n["start_s"] is None else f"+{n['start_s']:.2f}",
            f"{n['ms']:.0f}",
            _one_line(n["error"] or n["text"]),
        )
        for n in doc["nodes"]
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header[:-1])]
    out = []
    for row in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)]
        out.append("  ".join([*cells, row[-1]]))
    return out


def _plan_lines(outcome: PlanRun) -> list[str]:
    out = []
    tokens = outcome.planner.usage.completion_tokens
    steps = len(outcome.fabric.nodes)
    per = f" ({tokens / steps:.1f} per step)" if steps else ""
    out.append(
        f"plan: {tokens} tokens{per}, last token at +{outcome.plan_done_s:.2f} s"
        + (
            f" (first at +{outcome.plan_first_token_s:.2f} s)"
            if outcome.plan_first_token_s is not None
            else ""
        )
    )
    if outcome.speculative:
        first = min(outcome.fabric.nodes[n].started for n in outcome.speculative)
        at = first - outcome.fabric.started
        out.append(
            f"started before the plan's last token: {' '.join(outcome.speculative)} "
            f"(the first at +{at:.2f} s)"
        )
    out += [f"plan problem: {p}" for p in outcome.problems]
    out += [f"missing: {m}" for m in outcome.missing]
    return out


def _report(result: FabricResult, outcome: PlanRun | None, figures: PEFFigures) -> str:
    doc = _document(result, outcome, figures)
    shape = "/".join(str(len(layer)) for layer in result.layers)
    out = [
        f"task: {doc['task']}",
        f"graph: {figures.total} steps, depth {figures.depth}, layers {shape}",
    ]
    if outcome is not None:
        out += _plan_lines(outcome)
    out += ["", *_table(doc)]
    if outcome is not None:
        out += [
            "",
            f"planner: {outcome.planner.usage.completion_tokens} plan tokens in "
            f"{outcome.planner.timings.total_s:.2f} s; composer: "
            f"{outcome.composer.timings.total_s:.2f} s",
            f"answer: {outcome.answer.strip()}",
        ]
    out.append("")
    out += [f"{k}: {v}" for k, v in figures.headers().items()]
    if outcome is not None:
        budget = f"the spec's budget for depth {figures.depth} is {figures.budget_rounds} rounds"
    else:
        budget = f"a graph of depth {figures.depth} needs at least {figures.depth}"
    out.append(f"({figures.inferences} inferences in {figures.rounds} sequential rounds; {budget})")
    if figures.baseline is not None:
        out.append(
            f"(compute: {figures.tokens} tokens x {figures.model_params:.3g} params against a "
            f"naive pass of the task: {figures.baseline.tokens} tokens x "
            f"{figures.baseline.params:.3g} params)"
        )
    if figures.votes:
        out.append(
            f"consensus: {figures.votes} vote(s), mean agreement {figures.agreement:.2f}, "
            f"{figures.contested} without consensus"
        )
    if figures.failed_requests:
        out.append(f"engine requests that failed: {figures.failed_requests}")
    for node_id in result.contested:
        out.append(f"contested: {node_id}: {result.nodes[node_id].note}")
    if result.failed:
        out.append(f"failed steps: {', '.join(result.failed)}")
    if outcome is not None and outcome.lost:
        out.append(f"the plan lost: {', '.join(outcome.lost)}")
    return "\n".join(out)
