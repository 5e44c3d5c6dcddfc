"""``harness run`` on your own task: ``--toolset`` with ``--prompt``, or a batch ``--tasks``.

The options (registered by :mod:`harness._commands.run`): ``--toolset MODULE:ATTR``,
``--manifest FILE``, ``--skill NAME``, ``--prompt TEXT``, ``--inputs JSON|@FILE`` for one
task, ``--tasks FILE`` (with ``--out``, ``--concurrency``, ``--retry-failed``) for a batch.
With ``--journal DIR`` the run is journaled (one folder per arm, or per job of a batch under
``DIR/jobs``; a batch's results in ``DIR`` unless ``--out``) and ``harness run --resume DIR``
continues it (:mod:`harness._commands._run_dir`).
Every bad combination or input is a :class:`~harness.errors.ConfigError` (exit 2, one line).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from harness._commands._engine_args import EngineOptions, open_engine
from harness._commands._guide_args import guides
from harness._commands._ray_args import open_ray_pool
from harness._commands._run_dir import arm_folder, check_arm_folders, record_run, resume_hint
from harness._commands._signals import until_signalled
from harness._jsonl import open_append
from harness._progress import Progress
from harness.errors import ConfigError
from harness.journal import OnDamage
from harness.loop.task import Task
from harness.skills.manifest import Manifest, load_manifest

if TYPE_CHECKING:
    from harness.runs.batch import BatchSummary, UserBatch, UserBatchPlan

__all__ = ("USER_ARMS", "add_user_task_arguments", "is_user_task", "run_user_task")

#: The arms a task of yours runs under unless --arm says otherwise.
USER_ARMS = ("S", "F")
_WORKLOAD_ONLY = ("seed", "latency", "sigma")


def add_user_task_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "your own task (instead of --task)",
        "run a task on your toolset: --toolset with --prompt, or a batch with --tasks FILE",
    )
    group.add_argument(
        "--toolset",
        metavar="MODULE:ATTR",
        help="your toolset: a harness.Toolset, or a factory returning one (called once per "
        "run), in a module (mypkg.tools:toolset) or a file (tools.py:make_toolset)",
    )
    group.add_argument(
        "--manifest",
        metavar="FILE",
        type=Path,
        help="your skill manifest (TOML): the phases that let arm F certify windows",
    )
    group.add_argument(
        "--skill",
        metavar="NAME",
        help="the manifest skill of the task (default: the manifest's only skill); with "
        "--tasks, the skill of tasks that name none",
    )
    group.add_argument("--prompt", metavar="TEXT", help="what you ask (one task)")
    group.add_argument(
        "--inputs",
        metavar="JSON|@FILE",
        help="the task inputs the manifest's input:FIELD sources read: a JSON object, or "
        "@FILE holding one",
    )
    group.add_argument(
        "--tasks",
        metavar="FILE",
        type=Path,
        help="a batch of your tasks: a .jsonl, .json or .toml task file (id, prompt, skill, inputs, "
        "optional gold_answer / gold_calls); writes a resumable DIR/results.jsonl",
    )
    group.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        help="with --tasks: the output directory (default runs/tasks-STEM); rerun the same "
        "command to resume",
    )
    group.add_argument(
        "--concurrency",
        type=int,
        default=4,
        metavar="K",
        help="with --tasks: jobs sharing the engine at once (default 4)",
    )
    group.add_argument(
        "--retry-failed",
        action="store_true",
        help="with --tasks, on resume: run again the jobs that errored (engine failures "
        "always run again)",
    )


def is_user_task(args: argparse.Namespace) -> bool:
    """Whether the options ask for a task of yours (any of its options given)."""
    return any(
        getattr(args, name) is not None
        for name in ("toolset", "manifest", "skill", "prompt", "inputs", "tasks", "out")
    ) or bool(args.retry_failed)


def _check_options(args: argparse.Namespace) -> None:
    if args.task is not None:
        raise ConfigError(
            "--task ID runs a task of the seeded workload; --toolset/--prompt/--tasks run your "
            "own. Pass one or the other."
        )
    given = [
        "--" + n.replace("_", "-") for n in _WORKLOAD_ONLY if getattr(args, n, None) is not None
    ]
    if given:
        raise ConfigError(
            f"{', '.join(given)} apply to the seeded workload (--task) only; drop "
            f"{'it' if len(given) == 1 else 'them'} for your own task."
        )
    if args.toolset is None:
        raise ConfigError(
            "Your own task needs --toolset MODULE:ATTR (a harness.Toolset or a factory "
            "returning one), e.g. --toolset mytools:toolset --prompt '...'."
        )
    if args.tasks is not None:
        if args.prompt is not None or args.inputs is not None:
            raise ConfigError(
                f"--tasks {args.tasks} holds each task's prompt and inputs; drop --prompt and "
                "--inputs (or drop --tasks to run one task)."
            )
    else:
        if args.prompt is None:
            raise ConfigError("--toolset needs --prompt TEXT (one task) or --tasks FILE (a batch).")
        for name in ("out", "retry_failed"):
            if getattr(args, name):
                flag = "--" + name.replace("_", "-")
                raise ConfigError(f"{flag} is for a batch (--tasks FILE); drop it for one task.")
    if args.skill is not None and args.manifest is None:
        raise ConfigError(
            f"--skill {args.skill} names a skill of a manifest; pass --manifest FILE too."
        )
    levers = ["--" + n.replace("_", "-") for n, on in guides(args).items() if on]
    if levers and args.manifest is None:
        raise ConfigError(
            f"{', '.join(levers)} narrow{'s' if len(levers) == 1 else ''} the model's choices "
            "by what a skill's phases say (their tools, and which arguments come from which "
            "task input); pass --manifest FILE."
        )


def _skill(manifest: Manifest | None, skill: str | None, *, required: bool) -> str | None:
    if manifest is None:
        return None
    if skill is not None:
        manifest.skill(skill)  # an unknown name is an error that lists the skills
        return skill
    if len(manifest.skills) == 1:
        return next(iter(manifest.skills))
    if not required:
        return None
    raise ConfigError(
        f"{manifest.source} has {len(manifest.skills)} skills; choose one with --skill NAME "
        f"({', '.join(manifest.skills)})."
    )


def _recorded(args: argparse.Namespace, inputs: dict[str, Any]) -> dict[str, Any]:
    """What ``DIR/run.json`` keeps of a journaled run of your own task(s): every option that
    defines it (paths made absolute), so ``--resume DIR`` needs no others."""

    def absolute(path: Path | None) -> str | None:
        return None if path is None else str(path)

    return {
        "kind": "user",
        "toolset": args.toolset,
        "manifest": absolute(args.manifest),
        "skill": args.skill,
        "prompt": args.prompt,
        "inputs": None if args.tasks is not None else json.dumps(inputs),
        "tasks": absolute(args.tasks),
        "out": absolute(args.out),
        "arm": list(args.arm or USER_ARMS),
        "policy": args.policy or "model",
        "detector": args.detector,
        "max_tokens": args.max_tokens,
        **guides(args),
    }


def _check_inputs(manifest: Manifest | None, tasks: Sequence[Task]) -> None:
    """Every task has the inputs its skill's slot counts name (a ManifestError: exit 2)."""
    if manifest is not None:
        for task in tasks:
            if task.skill is not None and task.skill in manifest.skills:
                manifest.check_inputs(task.skill, task.inputs)


def run_user_task(args: argparse.Namespace, *, resume: Path | None = None) -> int:
    """``harness run`` with your own task or tasks (module docstring). ``resume``: the
    directory of a journaled run whose options were restored on ``args``."""
    from harness.runs.batch import UserBatch, check_gold_policy, run_user_job
    from harness.tools.ref import load_toolset

    _check_options(args)
    if args.journal is not None and getattr(args, "ray", None) is not None:
        raise ConfigError(
            "--ray journals every job of the batch already (in --out); drop --journal."
        )
    damaged: OnDamage = "continue" if getattr(args, "resume_damaged", False) else "refuse"
    arms = tuple(args.arm or USER_ARMS)
    policy = args.policy or "model"
    if args.max_tokens < 8:
        raise ConfigError("--max-tokens must be at least 8.")
    manifest = load_manifest(args.manifest) if args.manifest is not None else None
    default_skill = _skill(manifest, args.skill, required=args.tasks is None)
    factory = load_toolset(args.toolset)
    if manifest is not None:
        manifest.check_tools(factory())
    tasks = _user_tasks(args, default_skill, manifest)
    directory = _journal_directory(args, resume)
    if args.engine == "scripted" and policy != "gold":
        raise ConfigError(
            "--engine scripted only replays gold calls; use --policy gold (tasks with "
            "gold_calls) or a real engine."
        )
    _check_inputs(manifest, tasks)
    check_gold_policy(tasks, policy)
    if args.journal is not None:
        inputs = {} if args.tasks else dict(tasks[0].inputs)
        record_run(Path(args.journal), _recorded(args, inputs))
    plan = _batch_plan(args, arms, policy)
    if args.tasks is not None:
        journals = None if directory is None else directory / "jobs"
        batch = UserBatch(
            plan,
            tuple(tasks),
            factory,
            manifest,
            retry_failed=args.retry_failed,
            journals=journals,
            damaged=damaged,
        )
        return _run_batch(args, batch)
    specs = plan.specs()
    if resume is not None:
        check_arm_folders(resume, [s.label for s in specs])

    async def go() -> list[dict[str, Any]]:
        done = []
        async with open_engine(EngineOptions.from_args(args)) as engine:
            for spec in specs:
                durable = None if directory is None else arm_folder(directory, spec.label)
                job = await run_user_job(
                    engine, tasks[0], factory, spec, manifest, durable=durable, damaged=damaged
                )
                done.append(job)
                if args.trace:
                    with open_append(Path(args.trace)) as out:
                        out.write(json.dumps(job, sort_keys=True, default=str) + "\n")
        return done

    jobs = anyio.run(until_signalled, go, resume_hint(directory))
    return _report(args, jobs, f"your task, skill {default_skill}, policy {policy}")


def _user_tasks(
    args: argparse.Namespace, default_skill: str | None, manifest: Manifest | None
) -> list[Task]:
    """The tasks ``args`` name: each task of ``--tasks`` (its skill defaulted), or the one
    task of ``--prompt`` with its ``--inputs``."""
    from harness.runs.task_file import load_task_file, parse_inputs

    if args.tasks is not None:
        return [_with_skill(t, default_skill, manifest) for t in load_task_file(args.tasks)]
    task_inputs = parse_inputs(args.inputs) if args.inputs is not None else {}
    return [Task(id="task", prompt=args.prompt, skill=default_skill, inputs=task_inputs)]


def _batch_plan(args: argparse.Namespace, arms: tuple[str, ...], policy: str) -> UserBatchPlan:
    """What the run covers, as its fingerprinted plan: the tasks, toolset and manifest
    files, the arms, the policy, the detector, the budgets and the engine."""
    from harness.runs.batch import UserBatchPlan

    return UserBatchPlan(
        out=args.out or Path(f"runs/tasks-{args.tasks.stem if args.tasks else 'one'}"),
        tasks_file=args.tasks,
        toolset=args.toolset,
        manifest_file=args.manifest,
        arms=arms,
        policy=policy,
        detector=args.detector,
        max_tokens=args.max_tokens,
        concurrency=args.concurrency,
        engine_label=args.engine,
        model=args.model,
        **guides(args),
    )


def _journal_directory(args: argparse.Namespace, resume: Path | None) -> Path | None:
    """The run's directory (``--journal`` or ``--resume``); with ``--journal``, a batch's
    results go there unless ``--out``, and paths are made absolute as run.json keeps them."""
    if args.journal is None:
        return resume
    directory = Path(args.journal)
    if args.tasks is not None and args.out is None:
        args.out = directory
    for name in ("tasks", "manifest", "out"):
        if getattr(args, name) is not None:
            setattr(args, name, Path(getattr(args, name)).resolve())
    return directory


def _with_skill(task: Task, skill: str | None, manifest: Manifest | None) -> Task:
    if task.skill is None:
        if manifest is not None and skill is None:
            raise ConfigError(
                f"Task {task.id!r} names no skill and {manifest.source} has "
                f"{len(manifest.skills)}; give the task a skill or pass --skill NAME "
                f"({', '.join(manifest.skills)})."
            )
        return Task(**{**task.__dict__, "skill": skill})
    if manifest is None:
        raise ConfigError(
            f"Task {task.id!r} names skill {task.skill!r}, but no --manifest FILE says what "
            "its phases are; pass --manifest."
        )
    manifest.skill(task.skill)
    return task


def _run_batch(args: argparse.Namespace, batch: UserBatch) -> int:
    from harness.runs.batch import UserJobRunner, run_user_batch

    plan, journals = batch.plan, batch.journals

    async def go() -> BatchSummary:
        if getattr(args, "ray", None) is not None:
            runner = UserJobRunner(plan, batch.tasks)
            async with open_ray_pool(args, runner, plan.out, plan.concurrency) as pool:
                # the pool journals each job in its own folder under --out
                ray_batch = replace(batch, journals=None, damaged="refuse")
                return await run_user_batch(
                    None, ray_batch, progress=Progress(0, "jobs"), executor=pool
                )
        async with open_engine(EngineOptions.from_args(args)) as engine:
            return await run_user_batch(engine, batch, progress=Progress(0, "jobs"))

    resume = (
        f"`harness run --resume {journals.parent}`"
        if journals is not None
        else "rerun the same command"
    )
    summary = anyio.run(
        until_signalled,
        go,
        f"finished jobs are in {plan.out / 'results.jsonl'}: {resume} to resume.",
    )
    return _report(
        args,
        summary.selected,
        f"{len(batch.tasks)} task(s) from {args.tasks}, results in {summary.results} "
        f"({summary.ran} run now, {summary.skipped} kept from before)",
    )


def _report(args: argparse.Namespace, jobs: list[dict[str, Any]], head: str) -> int:
    from harness._commands._table import UNSCORED_NOTE, exit_status, flatten_note, render_table

    if args.json:
        print(json.dumps(jobs, indent=2, sort_keys=True, default=str))
    else:
        print(f"{head}, engine {args.engine}")
        rows = [{**j, "label": f"{j['task_id']} {j['label']}"} for j in jobs]
        print(render_table(rows if args.tasks else jobs))
        if any(j["success"] and j.get("scored") is False for j in jobs):
            print(UNSCORED_NOTE)
        for job in jobs:
            name = f"{job['task_id']} {job['label']}" if args.tasks else job["label"]
            if job["answer"] is not None:
                print(f"  {name} answer: {str(job['answer'])[:200]}")
            if job["failures"]:
                print(f"  {name}: " + "; ".join(job["failures"][:3]))
            note = flatten_note(job, name)
            if note:
                print(note)
            resumed = journal_line(job)
            if resumed:
                print(f"  {name}: {resumed}")
    return exit_status(jobs, "job_id")


def journal_line(job: dict[str, Any]) -> str | None:
    """What resuming a job's journal did, in one line (None for a run that was not resumed)."""
    journal = job.get("summary", {}).get("extra", {}).get("journal")
    if not journal or journal.get("attempt", 1) < 2:
        return None
    line = (
        f"resumed (attempt {journal['attempt']}): {journal['turns_replayed']} turn(s) and "
        f"{len(journal['replayed'])} call(s) replayed, {len(journal['retried'])} in-doubt "
        f"call(s) retried with their key"
    )
    unknown = journal.get("unknown") or []
    if unknown:
        line += f", outcome_unknown (not run again; check them): {', '.join(unknown)}"
    return line
