"""``python -m benchmarks.draft_ties``: why a drafted run generated other tokens.

Under greedy decoding a drafted engine must emit the undrafted engine's tokens: vLLM keeps a
drafted token only where it equals the model's own argmax. A difference can still come from
arithmetic: the verification pass computes a position's logits inside a batch of several
positions, the plain decode step one position at a time, and in bfloat16 two candidates
whose logits are within rounding of each other can swap places. This command tells such a
*numerical tie* from a bug:

1. each job runs on an undrafted engine and on a drafted one (``--proposer``, default
   ``window`` with drafting at any load), recording every turn's prompt and generated token
   ids;
2. at the first turn whose tokens differ, the two outputs share a prefix and part at token
   *j*: the undrafted engine scores the prompt plus that prefix (one position, no grammar,
   the top 20 log-probabilities) and gives both candidates' log-probabilities;
3. a gap below ``--tie`` (default 0.1 nats: bfloat16 keeps ~3 significant digits, so logits
   of magnitude 10-20 are rounded in steps of 0.06-0.125) is a tie; a larger gap, or a
   candidate outside the top 20, is a suspected bug.

Jobs: survey tasks (``--survey N ...``, one fan-out window of N reads) or workload tasks
(``--workload ID|KIND ...``), arm ``--arm`` (default F), policy ``--policy`` (default model).
Writes ``OUT/ties.json`` and ``OUT/report.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from benchmarks.spec_bench import survey_task
from harness.bench.jobs import JobSpec, run_job
from harness.bench.runner import select_tasks
from harness.bench.workload import WorkloadTask, workload_tasks
from harness.engines.vllm import VLLMEngine
from harness.toolsets.workspace import load_workspace_manifest

__all__ = ("classify", "main", "parting")

DEFAULT_OUT = Path("benchmarks/results/draft/ties")


def parting(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where two token sequences differ (``None`` if equal)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def classify(gap: float | None, tie: float) -> str:
    """``tie`` when both candidates' log-probabilities are within ``tie`` nats, else
    ``suspect`` (a candidate outside the scored top 20 has no gap: suspect)."""
    return "tie" if gap is not None and gap <= tie else "suspect"


def _record(engine: VLLMEngine) -> list[tuple[list[int], list[int]]]:
    """Record each completion's (prompt ids, generated ids) of ``engine``, in order."""
    seen: list[tuple[list[int], list[int]]] = []
    inner = VLLMEngine._completion.__get__(engine)  # not an earlier job's recorder

    def completion(final: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(
            (list(final.prompt_token_ids or ()), [int(t) for t in final.outputs[0].token_ids])
        )
        return inner(final, *args, **kwargs)

    engine._completion = completion  # type: ignore[method-assign]
    return seen


async def _score(
    engine: VLLMEngine, ids: list[int], candidates: Sequence[int]
) -> tuple[int, dict[int, float | None]]:
    """The undrafted engine's argmax after ``ids`` and its log-probabilities of
    ``candidates`` (``None`` outside its top 20)."""
    from vllm import SamplingParams
    from vllm.inputs.engine import tokens_input

    params = SamplingParams(n=1, temperature=0.0, max_tokens=1, logprobs=20)
    final: Any = None
    assert engine._llm is not None
    async for out in engine._llm.generate(tokens_input(ids), params, f"tie-{time.time_ns()}"):
        final = out
    top = final.outputs[0].logprobs[0]
    scored = {int(t): float(lp.logprob) for t, lp in top.items()}
    argmax = max(scored, key=lambda t: scored[t])
    return argmax, {c: scored.get(c) for c in candidates}


async def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    from harness.engines.vllm import open_default_engine

    manifest = load_workspace_manifest()
    tasks: list[WorkloadTask] = [survey_task(n, 0) for n in args.survey]
    if args.workload:
        tasks += select_tasks(workload_tasks(0), args.workload)
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
        plain = await stack.enter_async_context(open_default_engine())
        print(f"starting the {args.proposer} engine…", file=sys.stderr, flush=True)
        drafted = await stack.enter_async_context(
            open_default_engine(speculate=args.proposer, draft_max_batch=0)
        )
        assert isinstance(plain, VLLMEngine)
        assert isinstance(drafted, VLLMEngine)
        for wt in tasks:
            runs = []
            for engine in (plain, drafted):
                seen = _record(engine)
                await run_job(engine, wt, spec, manifest)
                runs.append(seen)
            row: dict[str, Any] = {"task_id": wt.id, "turns": [len(runs[0]), len(runs[1])]}
            for turn, ((prompt_a, out_a), (prompt_b, out_b)) in enumerate(
                zip(runs[0], runs[1], strict=False), start=1
            ):
                if prompt_a != prompt_b:  # an earlier difference changed the chat
                    break
                j = parting(out_a, out_b)
                if j is None:
                    continue
                if j >= min(len(out_a), len(out_b)):
                    row.update(turn=turn, index=j, verdict="suspect", note="one output is longer")
                    break
                a, b = out_a[j], out_b[j]
                argmax, scores = await _score(plain, prompt_a + out_a[:j], (a, b))
                score_a, score_b = scores[a], scores[b]
                gap = (
                    abs(score_a - score_b) if score_a is not None and score_b is not None else None
                )
                row.update(
                    turn=turn,
                    index=j,
                    undrafted_token=plain._tokenizer.decode([a]),
                    drafted_token=plain._tokenizer.decode([b]),
                    logprob_undrafted=score_a,
                    logprob_drafted=score_b,
                    argmax=plain._tokenizer.decode([argmax]),
                    gap=gap,
                    verdict=classify(gap, args.tie),
                )
                break
            else:
                row["verdict"] = "same" if len(runs[0]) == len(runs[1]) else "suspect"
            found.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return found


def report(rows: Sequence[dict[str, Any]], command: str, seconds: float) -> str:
    lines = [
        "# Drafted decoding: ties and mismatches",
        "",
        f"Command: `{command}` ({seconds:.0f} s)",
        "",
        "| task | verdict | turn | token | undrafted | drafted | log-prob gap |",
        "|---|---|---:|---:|---|---|---:|",
    ]
    for r in rows:
        gap = f"{r['gap']:.4f}" if r.get("gap") is not None else "-"
        lines.append(
            f"| {r['task_id']} | {r['verdict']} | {r.get('turn', '-')} | {r.get('index', '-')} | "
            f"{json.dumps(r.get('undrafted_token', ''))} | {json.dumps(r.get('drafted_token', ''))}"
            f" | {gap} |"
        )
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in ("same", "tie", "suspect")}
    lines += [
        "",
        f"{len(rows)} jobs: {counts['same']} the same tokens, {counts['tie']} numerical ties, "
        f"{counts['suspect']} suspected bugs.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.draft_ties", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--survey", nargs="*", type=int, default=[], metavar="N")
    parser.add_argument("--workload", nargs="*", default=[], metavar="ID")
    parser.add_argument("--arm", default="F")
    parser.add_argument("--policy", default="model", choices=("gold", "oracle", "model"))
    parser.add_argument("--proposer", default="window", choices=("ngram", "suffix", "window"))
    parser.add_argument("--tie", type=float, default=0.1, metavar="NATS")
    parser.add_argument("--skill-tools", action="store_true")
    parser.add_argument("--open-slots", action="store_true")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not args.survey and not args.workload:
        parser.error("name the jobs: --survey N ... and/or --workload ID ...")
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
