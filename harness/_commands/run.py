"""``harness run``: run a workload task, or your own tasks, under one or more arms and print
what each cost."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio

from harness._commands._engine_args import EngineOptions, add_engine_arguments, open_engine
from harness._commands._guide_args import GUIDES, add_guide_arguments, guides
from harness._commands._ray_args import add_ray_arguments, check_ray_arguments
from harness._commands._run_dir import (
    arm_folder,
    check_arm_folders,
    record_run,
    recorded_run,
    resume_hint,
)
from harness._commands._signals import until_signalled
from harness._commands._table import exit_status, flatten_note, render_table
from harness._commands.run_user import (
    add_user_task_arguments,
    is_user_task,
    journal_line,
    run_user_task,
)
from harness._jsonl import open_append
from harness.errors import ConfigError
from harness.journal import OnDamage
from harness.loop.arm_label import ARM_LABEL_NAMES

__all__ = ("register", "render_table", "run")

DESCRIPTION = """\
Run one task of the seeded workload (see `harness tasks list`), or your own task (--toolset
with --prompt, or a batch with --tasks FILE), under the arms you choose, on
the in-process vLLM engine by default, each from a fresh store, and print per arm: turns,
calls, certified windows, D2 discards, prompt / cached / billed tokens, engine and wall seconds,
and whether the run met the task's gold label.

Exit status: 0 when every arm ran (a run that missed its gold label is a result), 1 when an arm
ended in an error (the error kinds are printed with their counts), 2 for a usage mistake,
130/143 when interrupted by SIGINT/SIGTERM.

Arms: S (serial), F (flattened), F+eager (F with eager dispatch), F+spec (F+eager with
certified speculation: calls the manifest makes known start before the model emits them),
P (native parallel), P+V (native parallel with the validator). Policies: gold (the engine is
constrained to emit the gold calls: same tokens in S and F, the dividend at fixed accuracy),
oracle (the gold plan, but every argument resolved from what the context shows: a withheld
value is replaced by the last value used, so a false fill costs it the task) or model (the
model chooses; a 135M model chooses poorly — that is measured, not hidden).
"""

EPILOG = """\
examples:
  harness run --task fan_out-12                          # every arm on the real engine
  harness run --task fan_out-12 --arm F --policy model   # let the model choose its calls
  harness run --task chain-03 --arm S F --latency 0.2    # the null arm: nothing to flatten
  harness run --task mixed-05 --engine scripted          # no model: replays the gold calls (a test double)
  harness run --task chain-03 --arm S F --detector phase_heuristic --policy oracle --engine scripted
                                                         # a false fill costs the oracle the task
  harness run --task easy_fan_out-01 --arm S F --policy model --skill-tools --open-slots
                                                         # a task the 135M model can solve
  harness run --task fan_out-12 --trace run.jsonl --json # every turn, call and window as JSONL
  harness run --task mixed-04 --journal runs/m4          # journaled: survives a crash...
  harness run --resume runs/m4                           # ...and resumes without repeating a write
  harness run --toolset mytools:toolset --manifest skills.toml --prompt 'Summarise a, b' \\
      --inputs '{"keys": ["a", "b"]}'                    # your own task (S and F)
  harness run --toolset mytools:make_toolset --manifest skills.toml --tasks tasks.jsonl \\
      --out runs/mine                                    # a resumable batch of your tasks
"""

ARM_CHOICES = ARM_LABEL_NAMES
#: The defaults of the options a workload task (--task) and your own task do not share.
_WORKLOAD_DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "arm": list(ARM_CHOICES),
    "policy": "gold",
    "latency": 0.5,
    "sigma": 0.0,
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "run",
        help="run a workload task or your own (one, or a batch) under chosen arms; compare the cost",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--task",
        metavar="ID",
        help="a task id from `harness tasks list` (required unless --resume)",
    )
    parser.add_argument("--seed", type=int, default=None, help="workload seed (default 0)")
    parser.add_argument(
        "--arm", nargs="+", choices=ARM_CHOICES, default=None, metavar="ARM",
        help=f"one or more of {', '.join(ARM_CHOICES)} (default: all for --task; S F for your "
        "own task)",
    )  # fmt: skip
    parser.add_argument(
        "--policy", choices=("gold", "oracle", "model"), default=None,
        help="default: gold for --task; model for your own task",
    )  # fmt: skip
    parser.add_argument(
        "--detector", choices=("schema_sound", "phase_heuristic"), default="schema_sound",
        help="window detector for F (default schema_sound; phase_heuristic can false-fill)",
    )  # fmt: skip
    parser.add_argument(
        "--latency",
        type=float,
        default=None,
        metavar="S",
        help="tool latency L of the workload's tools in seconds (default 0.5)",
    )
    parser.add_argument(
        "--sigma",
        type=float,
        default=None,
        metavar="S",
        help="tool latency spread σ_L of the workload's tools (default 0)",
    )
    parser.add_argument(
        "--max-tokens", type=int, default=160, help="generation budget per turn (default 160)"
    )
    parser.add_argument(
        "--trace",
        metavar="FILE",
        help="append each arm's job (every turn, call and window) to FILE (JSONL) as it ends",
    )
    parser.add_argument("--json", action="store_true", help="print the job records as JSON")
    durable = parser.add_argument_group("durable runs")
    durable.add_argument(
        "--journal",
        metavar="DIR",
        type=Path,
        help="journal every turn and call to DIR (one folder per arm, the workload's store on "
        "disk; with --tasks one folder per job), so a killed run can be resumed with "
        "--resume DIR",
    )
    durable.add_argument(
        "--resume",
        metavar="DIR",
        type=Path,
        help="continue the run journaled in DIR (its task and settings come from DIR/run.json): "
        "finished work is replayed, never repeated; a missing, foreign or damaged journal is "
        "refused (exit 2)",
    )
    durable.add_argument(
        "--resume-damaged",
        action="store_true",
        help="with --resume: go on past a journal damaged before its tail; every call behind "
        "the damage that is not idempotent becomes outcome_unknown, never re-run",
    )
    add_guide_arguments(parser)
    add_user_task_arguments(parser)
    add_engine_arguments(parser)
    add_ray_arguments(parser)
    parser.set_defaults(func=run)


def _spec(label: str, args: argparse.Namespace) -> Any:
    from harness.runs.jobs import JobSpec

    if args.latency < 0 or args.sigma < 0:
        raise ConfigError("--latency and --sigma must be zero or more seconds.")
    if args.max_tokens < 8:
        raise ConfigError("--max-tokens must be at least 8.")
    return JobSpec.from_label(
        label, policy=args.policy, detector=args.detector, latency_s=args.latency,
        latency_sigma_s=args.sigma, max_tokens=args.max_tokens, **guides(args),
    )  # fmt: skip


#: The options a journaled run records in DIR/run.json and a resume takes back.
_RECORDED = ("task", "seed", "arm", "policy", "detector", "latency", "sigma", "max_tokens")


def _durable_settings(args: argparse.Namespace) -> Path | None:
    """The run directory, after recording (``--journal``) the options that define the run
    (the workload's defaults filled in first)."""
    for name, default in _WORKLOAD_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.task is None:
        raise ConfigError(
            "harness run needs --task ID (see `harness tasks list`), --resume DIR, or your own "
            "task: --toolset MODULE:ATTR with --prompt TEXT or --tasks FILE."
        )
    if args.journal is None:
        return None
    return record_run(
        Path(args.journal), {name: getattr(args, name) for name in (*_RECORDED, *GUIDES)}
    )


def _restore(args: argparse.Namespace) -> dict[str, Any]:
    """``--resume DIR``: the options recorded in DIR/run.json, set on ``args``."""
    if args.journal is not None:
        raise ConfigError("Pass --journal DIR to start a journaled run or --resume DIR, not both.")
    given = [f"--{n.replace('_', '-')}" for n in (*_RESUME_FORBIDS,) if getattr(args, n, None)]
    if given:
        raise ConfigError(
            f"--resume takes the task and its settings from {args.resume / 'run.json'}; "
            f"drop {', '.join(given)} (and the other run options)."
        )
    recorded = recorded_run(Path(args.resume))
    if recorded.get("kind") == "user":
        for name, value in recorded.items():
            if name != "kind":
                setattr(args, name, Path(value) if name in _PATHS and value else value)
        return recorded
    for name in _RECORDED:
        setattr(args, name, recorded[name])
    for name in GUIDES:  # recorded since they exist; an older run.json has none
        setattr(args, name, recorded.get(name))
    return recorded


#: Options that define a run: given with --resume, they would contradict DIR/run.json.
_RESUME_FORBIDS = ("task", "toolset", "manifest", "skill", "prompt", "inputs", "tasks", "out")
_PATHS = ("manifest", "tasks", "out")


def run(args: argparse.Namespace) -> int:
    from harness.bench.jobs import run_job
    from harness.bench.workload import task_by_id, workload_tasks
    from harness.runs.jobs import dumps
    from harness.toolsets.workspace import load_workspace_manifest

    check_ray_arguments(args, batch_option="tasks")
    if args.resume_damaged and args.resume is None:
        raise ConfigError("--resume-damaged goes with --resume DIR (a journal to go on from).")
    damaged: OnDamage = "continue" if args.resume_damaged else "refuse"
    if args.resume is not None and _restore(args).get("kind") == "user":
        return run_user_task(args, resume=Path(args.resume))
    if args.resume is None and is_user_task(args):
        return run_user_task(args)
    directory = Path(args.resume) if args.resume is not None else _durable_settings(args)
    if args.engine == "scripted" and args.policy == "model":
        raise ConfigError(
            "--engine scripted only replays forced calls; use --policy gold or oracle, or a "
            "real engine."
        )
    wt = task_by_id(workload_tasks(args.seed), args.task)
    manifest = load_workspace_manifest()
    specs = [_spec(label, args) for label in dict.fromkeys(args.arm)]

    if directory is not None and args.resume is not None:
        check_arm_folders(directory, [s.label for s in specs])

    async def go() -> list[dict[str, Any]]:
        done = []
        async with open_engine(EngineOptions.from_args(args)) as engine:
            for spec in specs:
                durable = None if directory is None else arm_folder(directory, spec.label)
                job = await run_job(engine, wt, spec, manifest, durable=durable, damaged=damaged)
                done.append(job)
                if args.trace:  # as each arm finishes: a kill later loses no finished arm
                    with open_append(Path(args.trace)) as out:
                        out.write(dumps(job) + "\n")
        return done

    jobs = anyio.run(until_signalled, go, resume_hint(directory))
    _print_jobs(args, wt, jobs)
    return exit_status(jobs)


def _print_jobs(args: argparse.Namespace, wt: Any, jobs: list[dict[str, Any]]) -> None:
    if args.json:
        print(json.dumps(jobs, indent=2, sort_keys=True, default=str))
    else:
        print(f"task {wt.id} ({wt.kind}, skill {wt.skill}, expected windows {list(wt.windows)}), "
              f"policy {args.policy}, engine {args.engine}, L={args.latency}s σ={args.sigma}s")  # fmt: skip
        print(render_table(jobs))
        for job in jobs:
            if job["failures"]:
                print(f"  {job['label']}: " + "; ".join(job["failures"][:3]))
            note = flatten_note(job)
            if note:
                print(note)
            false_fills = sum(1 for w in job.get("windows", []) if w.get("false_fill"))
            if false_fills:
                print(
                    f"  {job['label']}: {false_fills} of {len(job['windows'])} certified "
                    "window(s) were false fills (a call was generated while a result it "
                    "needed was withheld)"
                    + (
                        "; the gold policy forces every call's arguments, so 'ok' hides their "
                        "cost: rerun with --policy oracle to see it"
                        if job.get("policy") == "gold"
                        else ""
                    )
                )
            resumed = journal_line(job)
            if resumed:
                print(f"  {job['label']}: {resumed}")
            spec = job["summary"].get("extra", {}).get("speculation")
            if spec:
                print(
                    f"  {job['label']}: speculation predicted {spec['predicted']} call(s) in "
                    f"{spec['windows_predicted']}/{spec['windows']} window(s): {spec['hits']} hit, "
                    f"{spec['misses']} missed, {spec['cancelled']} cancelled, "
                    f"{spec['wasted_s']:.2f} tool s wasted"
                )
