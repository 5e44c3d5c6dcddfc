"""``harness tasks``: list and show the 48 seeded workload tasks and the task families
(:mod:`harness.bench.workload`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from harness.bench.workload import (
    ALL_KINDS,
    WorkloadTask,
    generate_tasks,
    task_by_id,
    workload_tasks,
)

__all__ = ("register", "run_list", "run_show")

DESCRIPTION = """\
The workload the benchmark runs: 48 deterministic loop tasks over the workspace toolset
(toolsets/workspace), 16 fan-out (one certified window each, n = 2..10), 16 chain (every
call needs the previous result: no window certifies, the null arm) and 16 mixed (fan-out
phases, chains, disjoint writes and conflicting ones). Each task has a gold label decided
by construction: the expected final store fingerprint, the calls it requires and the
phrases its answer must (not) contain. Same seed, same tasks, byte for byte.

Beside the 48, two families of 16 small fan-out tasks (one window of 2-4 calls, a one-line
answer) sized for the packaged 135M model: easy_fan_out (--kind easy_fan_out: tag, status,
note and read tasks) and easy_lookup (--kind easy_lookup: look up the owners of 2-4
documents, then name one of them: the answer is the model's to pick from its results).
"""

EPILOG = """\
examples:
  harness tasks list                       # all 48: kind, skill, window sizes, gold calls
  harness tasks list --kind chain          # the null arm
  harness tasks list --seed 7 --json       # another draw, as JSON
  harness tasks list --kind easy_fan_out   # a family a 135M model can solve
  harness tasks list --kind easy_lookup    # ... and one where it picks the answer
  harness tasks show mixed-03              # prompt, inputs, gold steps and label
  harness tasks show fan_out-12 --json     # the full task file entry
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``harness tasks list|show`` to the CLI."""
    parser = sub.add_parser(
        "tasks",
        help="list or show the workload's tasks (the 48 seeded and the families) and gold labels",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="tasks_command", metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="one line per task: id, kind, skill, window sizes, number of gold calls",
        description="One line per task: id, kind, skill (manifest), expected certified "
        "window sizes, number of gold calls and gold steps.",
        epilog="examples:\n  harness tasks list --kind fan_out\n  harness tasks list --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(listing)
    listing.add_argument(
        "--kind",
        choices=ALL_KINDS,
        help="only tasks of this kind (default: the 48; easy_fan_out, easy_lookup: the families "
        "beside them)",
    )
    listing.set_defaults(func=run_list)
    show = actions.add_parser(
        "show",
        help="one task in full: prompt, inputs, gold steps, gold label",
        description="One task in full: prompt, inputs, the gold steps (each step is one "
        "certified window or one call), the expected windows and the gold label.",
        epilog="examples:\n  harness tasks show chain-04\n  harness tasks show mixed-10 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(show)
    show.add_argument("id", help="task id, e.g. fan_out-03, chain-00, mixed-15, easy_fan_out-02")
    show.set_defaults(func=run_show)
    parser.set_defaults(func=lambda args: _no_action(parser))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seed", type=int, default=0, help="workload seed (default 0; >= 0)", metavar="S"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def _no_action(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _summary(task: WorkloadTask) -> dict[str, Any]:
    return {
        "id": task.id,
        "kind": task.kind,
        "skill": task.skill,
        "windows": list(task.windows),
        "gold_calls": len(task.task.gold_calls),
        "gold_steps": len(task.task.gold_steps),
    }


def run_list(args: argparse.Namespace) -> int:
    everything = generate_tasks(args.seed) if args.kind is None else workload_tasks(args.seed)
    tasks = [t for t in everything if args.kind in (None, t.kind)]
    if args.json:
        print(json.dumps([_summary(t) for t in tasks], indent=1))
        return 0
    iw = max([11, *(len(t.id) for t in tasks)])
    kw = max([8, *(len(t.kind) for t in tasks)])
    print(f"{'id':<{iw}} {'kind':<{kw}} {'skill':<15} {'windows':<10} {'calls':>5} {'steps':>5}")
    for t in tasks:
        windows = ",".join(str(n) for n in t.windows) or "-"
        print(
            f"{t.id:<{iw}} {t.kind:<{kw}} {t.skill:<15} {windows:<10} "
            f"{len(t.task.gold_calls):>5} {len(t.task.gold_steps):>5}"
        )
    windows_total = sum(len(t.windows) for t in tasks)
    print(f"{len(tasks)} tasks, {windows_total} certified windows (seed {args.seed})")
    return 0


def run_show(args: argparse.Namespace) -> int:
    task = task_by_id(workload_tasks(args.seed), args.id)
    if args.json:
        print(json.dumps(task.to_dict(), indent=1, sort_keys=True, ensure_ascii=False))
        return 0
    t = task.task
    print(f"{t.id}  kind={task.kind}  skill={task.skill}  store seed={task.state_seed}")
    print(f"prompt: {t.prompt}")
    print(f"inputs: {json.dumps(dict(t.inputs), sort_keys=True)}")
    print(f"expected windows: {list(task.windows) or 'none'}")
    print("gold steps (one line per step; a step of 2+ calls is one certified window):")
    for phase, step in zip(task.step_phases, t.gold_steps, strict=True):
        calls = "; ".join(
            f"{c.name}({json.dumps(dict(c.arguments), sort_keys=True)})" for c in step
        )
        print(f"  [{phase}] {calls}")
    print(f"gold answer: {t.gold_answer}")
    gold = task.gold
    print(f"answer must contain: {list(gold.answer_expect)}; must not: {list(gold.answer_forbid)}")
    print(f"final store fingerprint: {gold.final_fingerprint}")
    return 0
