"""``python -m benchmarks.draft_ties``: why a drafted run generated other tokens.

Under greedy decoding a drafted engine must emit the undrafted engine's tokens: vLLM keeps a
drafted token only where it equals the model's own argmax. A difference can still come from
arithmetic: the verification pass computes a position's logits inside a batch of several
positions, the plain decode step one position at a time, and in bfloat16 two candidates
whose logits are within rounding of each other can swap places. This command tells such a
*numerical tie* from a bug:

1. the jobs run concurrently (as in the benchmark's cell: batching is part of the
   arithmetic) on an undrafted engine and on a drafted one (``--proposer``, default
   ``window`` with drafting at any load), recording every generation's prompt and generated
   token ids;
2. a generation whose prompt both engines saw and whose tokens differ parts at token *j*:
   the undrafted engine scores the prompt plus the shared prefix (one position, no grammar)
   and gives both candidates' logits.
   Scored as *raw logits* (``logprobs_mode="raw_logits"``, every token of the vocabulary:
   under a grammar both candidates may be far from the unconstrained top 20);
3. two logits at most ``--tie-ulps`` bfloat16 steps apart (default 2; bfloat16 keeps 8
   significant bits, so logits of magnitude 16-32 are rounded in steps of 0.125) are a
   *tie*: the two passes' rounding can swap them; further apart is a suspected bug.

Jobs: survey tasks (``--survey N ...``, one fan-out window of N reads; ``--seed R`` builds
draft_bench's repetition R of them) or workload tasks (``--workload ID|KIND ... | all``), arm
``--arm`` (default F), policy ``--policy`` (default model); ``--concurrency K`` runs them K at
a time, in draft_bench's cells (default: all at once).
Writes ``OUT/ties.json`` and ``OUT/report.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio

from benchmarks.draft_bench import in_cells, named_workload
from benchmarks.spec_bench import survey_task
from harness.bench.jobs import run_job
from harness.bench.workload import WorkloadTask
from harness.engines.vllm import VLLMEngine
from harness.runs.jobs import JobSpec
from harness.toolsets.workspace import load_workspace_manifest

__all__ = (
    "SCORER_SETTINGS",
    "Generations",
    "bf16_ulp",
    "classify",
    "main",
    "parting",
    "recording",
    "score_partings",
    "selected_tasks",
)

DEFAULT_OUT = Path("benchmarks/results/draft/ties")

TIE_ULPS = 2.0
"""Two raw logits at most this many bfloat16 steps apart are a tie (the default)."""

SCORER_SETTINGS: Mapping[str, Any] = {"max_logprobs": -1, "logprobs_mode": "raw_logits"}
"""The engine arguments ``score_partings``'s scorer needs (every token's raw logit)."""


def parting(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where two token sequences differ (``None`` if equal)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def bf16_ulp(value: float) -> float:
    """The spacing of bfloat16 numbers at ``value`` (8 significant bits)."""
    magnitude = abs(value)
    return 2.0 ** (math.floor(math.log2(magnitude)) - 7) if magnitude > 0 else 2.0**-133


def classify(logit_a: float, logit_b: float, tie_ulps: float) -> tuple[float, str]:
    """How many bfloat16 steps apart two raw logits are, and the verdict: ``tie`` within
    ``tie_ulps`` steps (rounding can swap them), else ``suspect``."""
    ulps = abs(logit_a - logit_b) / bf16_ulp(max(abs(logit_a), abs(logit_b)))
    return ulps, ("tie" if ulps <= tie_ulps else "suspect")


Generations = list[tuple[list[int], list[int]]]
"""Each completion's (prompt token ids, generated token ids), in the order they finished."""


@contextmanager
def recording(engine: VLLMEngine) -> Iterator[Generations]:
    """Record each completion ``engine`` finishes while the block runs (restored after; a
    recorder inside another's block feeds both)."""
    seen: Generations = []
    wrapped = "_completion" in vars(engine)  # another recorder's, not the class's method
    inner = engine._completion

    def completion(final: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(
            (list(final.prompt_token_ids or ()), [int(t) for t in final.outputs[0].token_ids])
        )
        return inner(final, *args, **kwargs)

    engine._completion = completion  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        if wrapped:
            engine._completion = inner  # type: ignore[method-assign]
        else:
            del engine._completion  # the class's method again


async def _score(
    engine: VLLMEngine, ids: list[int], candidates: Sequence[int]
) -> tuple[int, dict[int, float]]:
    """The undrafted engine's raw argmax after ``ids`` and the raw logits of ``candidates``
    (the engine runs with ``logprobs_mode="raw_logits"`` and unlimited log-probs: every
    token is scored, before any grammar)."""
    from vllm import SamplingParams
    from vllm.inputs.engine import tokens_input

    params = SamplingParams(n=1, temperature=0.0, max_tokens=1, logprobs=-1)
    final: Any = None
    assert engine._llm is not None
    async for out in engine._llm.generate(tokens_input(ids), params, f"tie-{time.time_ns()}"):
        final = out
    scored = {int(t): float(lp.logprob) for t, lp in final.outputs[0].logprobs[0].items()}
    argmax = max(scored, key=lambda t: scored[t])
    return argmax, {c: scored[c] for c in candidates}


async def _run_all(
    engine: VLLMEngine, cells: Sequence[Sequence[WorkloadTask]], spec: JobSpec, manifest: Any
) -> Generations:
    """Run each cell's tasks concurrently, one cell after another (as the benchmark's cells
    ran: batching changes the arithmetic), and return every generation."""

    async def one(wt: WorkloadTask) -> None:
        await run_job(engine, wt, spec, manifest)

    with recording(engine) as seen:
        for cell in cells:
            async with anyio.create_task_group() as group:
                for wt in cell:
                    group.start_soon(one, wt)
    return seen


async def score_partings(
    scorer: VLLMEngine,
    undrafted: Generations,
    drafted: Generations,
    tie_ulps: float = TIE_ULPS,
    *,
    log: bool = False,
) -> tuple[list[dict[str, Any]], int]:
    """Each drafted generation whose prompt the undrafted run also saw and whose tokens
    differ, scored where they part: a row with both candidates' raw logits and the verdict
    (``tie`` or ``suspect``); and how many such generations emitted the same tokens.

    ``scorer`` is an undrafted engine started with ``max_logprobs=-1`` and
    ``logprobs_mode="raw_logits"``. A task's turns are found by their prompt: the same prompt
    on both engines is the same chat, so the first turn whose outputs differ is where the
    runs part (later turns of that chat have other prompts and are not compared)."""
    by_prompt = {tuple(prompt): out for prompt, out in undrafted}
    rows: list[dict[str, Any]] = []
    same = 0
    for prompt, out_b in drafted:
        out_a = by_prompt.get(tuple(prompt))
        if out_a is None:
            continue  # a chat the undrafted run never reached (after a parting)
        j = parting(out_a, out_b)
        if j is None:
            same += 1
            continue
        row: dict[str, Any] = {"prompt_tokens": len(prompt), "index": j}
        if j >= min(len(out_a), len(out_b)):
            row.update(verdict="suspect", note="one output is a prefix of the other")
        else:
            a, b = out_a[j], out_b[j]
            argmax, logits = await _score(scorer, prompt + out_a[:j], (a, b))
            ulps, verdict = classify(logits[a], logits[b], tie_ulps)
            row.update(
                undrafted_token=scorer._tokenizer.decode([a]),
                drafted_token=scorer._tokenizer.decode([b]),
                logit_undrafted=logits[a],
                logit_drafted=logits[b],
                argmax=scorer._tokenizer.decode([argmax]),
                ulps=ulps,
                verdict=verdict,
            )
        rows.append(row)
        if log:
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows, same


def selected_tasks(
    survey: Sequence[int], workload: Sequence[str], seed: int = 0
) -> list[WorkloadTask]:
    """The tasks to run: survey tasks of ``survey`` reads as ``draft_bench``'s repetition
    ``seed`` builds them (its first copy), then the named workload tasks (``all``: the 48
    seeded tasks) in draft_bench's order."""
    tasks = [survey_task(n, 0, seed=seed) for n in survey]
    if workload:
        tasks += named_workload(workload)
    return tasks


async def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    from harness.engines.vllm import open_default_engine

    manifest = load_workspace_manifest()
    tasks = selected_tasks(args.survey, args.workload, args.seed)
    spec = JobSpec.from_label(
        args.arm,
        policy=args.policy,
        latency_s=0.0,
        skill_tools=args.skill_tools,
        open_slots=args.open_slots,
    )
    found: list[dict[str, Any]] = []
    async with AsyncExitStack() as stack:
        print("starting the undrafted engine…", file=sys.stderr, flush=True)
        plain = await stack.enter_async_context(open_default_engine(extra=SCORER_SETTINGS))
        print(f"starting the {args.proposer} engine…", file=sys.stderr, flush=True)
        drafted = await stack.enter_async_context(
            open_default_engine(drafting=args.proposer, draft_max_batch=0)
        )
        assert isinstance(plain, VLLMEngine)
        assert isinstance(drafted, VLLMEngine)
        cells = in_cells(tasks, args.concurrency or len(tasks))
        print(
            f"{len(tasks)} jobs on each engine, {len(cells)} cell(s) one after another…",
            file=sys.stderr,
            flush=True,
        )
        undrafted_runs = await _run_all(plain, cells, spec, manifest)
        drafted_runs = await _run_all(drafted, cells, spec, manifest)
        rows, same = await score_partings(
            plain, undrafted_runs, drafted_runs, args.tie_ulps, log=True
        )
        found.extend(rows)
    found.append({"verdict": "same", "generations": same})
    return found


def report(rows: Sequence[dict[str, Any]], command: str, seconds: float) -> str:
    partings = [r for r in rows if r["verdict"] != "same"]
    same = sum(r.get("generations", 0) for r in rows if r["verdict"] == "same")
    lines = [
        "# Drafted decoding: ties and mismatches",
        "",
        f"Command: `{command}` ({seconds:.0f} s)",
        "",
        "| prompt tokens | verdict | token | undrafted | drafted | their raw logits | "
        "bf16 steps apart |",
        "|---:|---|---:|---|---|---|---:|",
    ]
    for r in partings:
        gap = f"{r['ulps']:.1f}" if "ulps" in r else "-"
        scores = f"{r['logit_undrafted']}, {r['logit_drafted']}" if "logit_undrafted" in r else "-"
        lines.append(
            f"| {r['prompt_tokens']} | {r['verdict']} | {r['index']} | "
            f"{json.dumps(r.get('undrafted_token', ''))} | "
            f"{json.dumps(r.get('drafted_token', ''))} | {scores} | {gap} |"
        )
    ties = sum(1 for r in partings if r["verdict"] == "tie")
    lines += [
        "",
        f"Generations with the same prompt on both engines: {same} emitted the same tokens, "
        f"{len(partings)} parted ({ties} numerical ties, {len(partings) - ties} suspected "
        "bugs).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.draft_ties", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--survey",
        nargs="*",
        type=int,
        default=[],
        metavar="N",
        help="survey tasks of one fan-out window of N reads (draft_bench's --n), one job each",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the survey tasks' seed: draft_bench's repetition r builds them with seed r "
        "(default 0)",
    )
    parser.add_argument(
        "--workload",
        nargs="*",
        default=[],
        metavar="ID",
        help="workload tasks (ids or kinds; all = the 48 seeded tasks, in draft_bench's "
        "order); with --concurrency K they run in draft_bench's cells again",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=0,
        metavar="K",
        help="run the jobs K at a time, cell after cell, as draft_bench --workload ... "
        "--concurrency K cuts them (default 0: every job at once)",
    )
    parser.add_argument("--arm", default="F", help="the arm label the jobs run (default: F)")
    parser.add_argument(
        "--policy",
        default="model",
        choices=("gold", "oracle", "model"),
        help="the policy the jobs run under (default: model)",
    )
    parser.add_argument(
        "--proposer",
        default="window",
        choices=("none", "ngram", "suffix", "window"),
        help="the drafted engine's proposer (none: a second undrafted engine, the control: "
        "how often batching alone parts two runs)",
    )
    parser.add_argument(
        "--tie-ulps",
        type=float,
        default=TIE_ULPS,
        metavar="N",
        help="a parting whose two raw logits are at most N bfloat16 steps apart is a "
        "numerical tie (default 2)",
    )
    parser.add_argument("--skill-tools", action="store_true", help="the skill-tools lever")
    parser.add_argument("--open-slots", action="store_true", help="the open-slots lever")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"directory for the scored partings and report.md (default: {DEFAULT_OUT})",
    )
    args = parser.parse_args(argv)
    if not args.survey and not args.workload:
        parser.error("name the jobs: --survey N ... and/or --workload ID ...")
    if args.concurrency < 0:
        parser.error("--concurrency must be 0 (every job at once) or more")
    logging.getLogger("harness").setLevel(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    rows = anyio.run(measure, args, backend="asyncio")
    shown = list(sys.argv[1:] if argv is None else argv)
    text = report(
        rows, "python -m benchmarks.draft_ties " + " ".join(shown), time.monotonic() - started
    )
    (args.out / "ties.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    (args.out / "report.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
