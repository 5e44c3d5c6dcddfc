"""``harness run``: run one workload task under one or more arms and print what each cost."""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio

from harness._commands._engine_args import add_engine_arguments, open_engine
from harness.errors import ConfigError

__all__ = ("register", "run")

DESCRIPTION = """\
Run one task of the seeded workload (see `harness tasks list`) under the arms you choose, on
the in-process vLLM engine by default, each from a fresh store, and print per arm: turns,
calls, certified windows, D2 discards, prompt / cached / billed tokens, engine and wall seconds,
and whether the run met the task's gold label.

Arms: S (serial), F (flattened), F+eager (F with eager dispatch), P (native parallel),
P+V (native parallel with the validator). Policies: gold (the engine is constrained to emit
the gold calls: same tokens in S and F, the dividend at fixed accuracy) or model (the model
chooses; a 135M model chooses poorly — that is measured, not hidden).
"""

EPILOG = """\
examples:
  harness run --task fan_out-12                          # S, F, F+eager, P, P+V on the real engine
  harness run --task fan_out-12 --arm F --policy model   # let the model choose its calls
  harness run --task chain-03 --arm S F --latency 0.2    # the null arm: nothing to flatten
  harness run --task mixed-05 --engine scripted          # no model: replays the gold calls (a test double)
  harness run --task fan_out-12 --trace run.jsonl --json # every turn, call and window as JSONL
"""

ARM_CHOICES = ("S", "F", "F+eager", "P", "P+V")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "run",
        help="run one workload task under chosen arms and compare what each cost",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--task", required=True, metavar="ID", help="a task id from `harness tasks list`"
    )
    parser.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    parser.add_argument(
        "--arm", nargs="+", choices=ARM_CHOICES, default=list(ARM_CHOICES), metavar="ARM",
        help=f"one or more of {', '.join(ARM_CHOICES)} (default: all)",
    )  # fmt: skip
    parser.add_argument("--policy", choices=("gold", "model"), default="gold", help="default: gold")
    parser.add_argument(
        "--detector", choices=("schema_sound", "phase_heuristic"), default="schema_sound",
        help="window detector for F (default schema_sound; phase_heuristic can false-fill)",
    )  # fmt: skip
    parser.add_argument(
        "--latency",
        type=float,
        default=0.5,
        metavar="S",
        help="tool latency L in seconds (default 0.5)",
    )
    parser.add_argument(
        "--sigma", type=float, default=0.0, metavar="S", help="tool latency spread σ_L (default 0)"
    )
    parser.add_argument(
        "--max-tokens", type=int, default=160, help="generation budget per turn (default 160)"
    )
    parser.add_argument(
        "--trace", metavar="FILE", help="append every turn, call and window to FILE (JSONL)"
    )
    parser.add_argument("--json", action="store_true", help="print the job records as JSON")
    add_engine_arguments(parser)
    parser.set_defaults(func=run)


def _spec(label: str, args: argparse.Namespace) -> Any:
    from harness.benchmarks.jobs import JobSpec

    if args.latency < 0 or args.sigma < 0:
        raise ConfigError("--latency and --sigma must be zero or more seconds.")
    if args.max_tokens < 8:
        raise ConfigError("--max-tokens must be at least 8.")
    return JobSpec.from_label(
        label, policy=args.policy, detector=args.detector, latency_s=args.latency,
        latency_sigma_s=args.sigma, max_tokens=args.max_tokens,
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from harness.benchmarks.jobs import dumps, run_job
    from harness.benchmarks.tasks import generate_tasks, task_by_id
    from harness.toolsets.workspace import load_workspace_manifest

    if args.engine == "scripted" and args.policy != "gold":
        raise ConfigError(
            "--engine scripted only replays gold calls; use --policy gold or a real engine."
        )
    wt = task_by_id(generate_tasks(args.seed), args.task)
    manifest = load_workspace_manifest()
    specs = [_spec(label, args) for label in dict.fromkeys(args.arm)]

    async def go() -> list[dict[str, Any]]:
        async with open_engine(args) as engine:
            return [await run_job(engine, wt, spec, manifest) for spec in specs]

    jobs = anyio.run(go)
    if args.trace:
        with open(args.trace, "a", encoding="utf-8") as out:
            for job in jobs:
                out.write(dumps(job) + "\n")
    if args.json:
        print(json.dumps(jobs, indent=2, sort_keys=True, default=str))
    else:
        print(f"task {wt.id} ({wt.kind}, skill {wt.skill}, expected windows {list(wt.windows)}), "
              f"policy {args.policy}, engine {args.engine}, L={args.latency}s σ={args.sigma}s")  # fmt: skip
        print(render_table(jobs))
        for job in jobs:
            if job["failures"]:
                print(f"  {job['label']}: " + "; ".join(job["failures"][:3]))
    return 0


def render_table(jobs: list[dict[str, Any]]) -> str:
    head = (
        "arm",
        "turns",
        "calls",
        "windows",
        "discards",
        "prompt",
        "cached",
        "billed",
        "engine s",
        "wall s",
        "ok",
    )
    rows = [head]
    for job in jobs:
        s = job["summary"]
        windows = ",".join(str(len(w["call_ids"])) for w in job["windows"]) or "-"
        rows.append((
            job["label"], str(s.get("turns", 0)), str(s.get("calls", 0)), windows,
            str(s.get("discards", s.get("repairs", 0))), str(s.get("prompt_tokens", 0)), str(s.get("cached_tokens", 0)),
            str(s.get("billed_tokens", 0)), f"{s.get('engine_s', 0.0):.2f}", f"{s.get('wall_s', 0.0):.2f}",
            "yes" if job["success"] else "NO",
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
