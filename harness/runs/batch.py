"""Your own tasks as jobs: one task of yours run once under one arm, and batches of them.

:func:`run_user_job` runs a :class:`~harness.loop.task.Task` (from ``harness run --prompt`` or a
task file, :mod:`harness.runs.task_file`) on a toolset of yours (a fresh one per job when it comes
from a factory, :mod:`harness.tools.ref`) and returns the same JSON-ready job dict as
:func:`harness.bench.jobs.run_job` (``job_id``, ``label``, ``success``, ``failures``,
``error``, ``answer``, ``summary``, ``turns``, ``calls``, ``windows``), plus ``messages``:
the final transcript as OpenAI-format messages. A task without a gold label succeeds when it
finishes; one with a label is scored (:func:`harness.runs.task_file.failures`).

:func:`run_user_batch` runs a :class:`UserBatch` (the plan, the tasks of a task file, the
toolset and manifest, how to treat earlier runs): every task under every chosen arm,
``concurrency`` jobs at a time on one engine, each finished job appended to
``out/results.jsonl`` with the resume machinery ``harness bench`` shares
(:mod:`harness.runs.resume`): the directory is locked, ``plan.json`` fingerprints the
plan (the task file's and manifest's contents, the toolset reference, arms and settings) so
results of two plans never mix, finished jobs are skipped when the same command runs again,
engine failures always run again and other errors with ``retry_failed``. With an
``executor`` (``harness run --tasks FILE --ray ...``: :class:`UserJobRunner` on
:class:`~harness.runs.ray_pool.RayPool` workers) each job runs journaled in its own
directory, so a job whose worker died resumes on another without repeating a call.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import anyio

from harness._jsonl import open_append
from harness._lockfile import lock_directory
from harness._progress import Progress
from harness.engines.base import Engine
from harness.errors import ConfigError, HarnessError, JournalError
from harness.journal import OnDamage, io_error
from harness.loop import LoopResult, run_loop
from harness.loop.arm_label import ArmLabel
from harness.loop.ledger import Ledger, record_to_dict
from harness.loop.levers import LEVERS
from harness.loop.task import Task
from harness.runs.jobs import JobSpec, dumps, error_kinds, job_id, open_job_journal
from harness.runs.ray_pool import job_directory
from harness.runs.resume import JobExecutor, check_plan, load_results, rerun_on_resume
from harness.runs.task_file import failures
from harness.skills.manifest import Manifest, load_manifest
from harness.tools.ref import ToolsetFactory, load_toolset

__all__ = (
    "BatchSummary",
    "UserBatch",
    "UserBatchPlan",
    "UserJobRunner",
    "check_gold_policy",
    "run_user_batch",
    "run_user_job",
)


def check_gold_policy(tasks: Sequence[Task], policy: str) -> None:
    """The gold and oracle policies force each task's gold calls: every task needs some."""
    missing = [t.id for t in tasks if not t.gold_steps]
    if policy in ("gold", "oracle") and missing:
        raise ConfigError(
            f"--policy {policy} forces each task's gold_calls, and task(s) {missing[:5]} have none; "
            "add gold_calls to them or use --policy model."
        )


async def run_user_job(
    engine: Engine,
    task: Task,
    toolset: ToolsetFactory,
    spec: JobSpec,
    manifest: Manifest | None,
    *,
    durable: Path | None = None,
    damaged: OnDamage = "refuse",
) -> dict[str, Any]:
    """Run ``task`` once under ``spec`` (module docstring). A run that ends in a
    :class:`~harness.errors.HarnessError` (a budget, an engine failure) is a failed job; one
    whose journal cannot be written raises its :class:`~harness.errors.JournalError`.

    ``durable``: a directory for the run's journal (``journal/``); one that holds it already
    resumes the run (journaled turns and calls are replayed, not repeated;
    :func:`~harness.runs.jobs.open_job_journal`)."""
    ledger = Ledger(log=True)
    config = spec.loop_config()
    error = None
    result: LoopResult | None = None
    run_id = job_id(task.id, spec)
    journal = None
    if durable is not None:
        journal = open_job_journal(durable, run_id, label=spec.label, damaged=damaged, task=task)
    try:
        result = await run_loop(
            engine,
            toolset(),
            task,
            config,
            manifest=manifest if task.skill is not None else None,
            ledger=ledger,
            run_id=None if journal is not None else run_id,
            journal=journal,
        )
    except JournalError:
        raise
    except HarnessError as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if journal is not None:
            journal.close()
    records = [record_to_dict(r) for r in ledger.records]
    if result is None:
        missed = ["the run did not finish: " + (error or "")]
    else:
        missed = failures(task, result.calls, result.answer)
    return {
        "job_id": run_id,
        "task_id": task.id,
        "kind": "user",
        "arm": spec.arm,
        "eager": spec.eager,
        "policy": spec.policy,
        "detector": spec.detector,
        "label": spec.label,
        "success": not missed,
        "scored": bool(task.gold_steps or task.gold_answer is not None),
        "failures": missed,
        "error": error,
        "answer": None if result is None else result.answer,
        "summary": next((r for r in records if r["kind"] == "run"), {}),
        "turns": [r for r in records if r["kind"] == "turn"],
        "calls": [r for r in records if r["kind"] == "call"],
        "windows": [r for r in records if r["kind"] == "window"],
        "messages": [] if result is None else result.openai_messages(),
    }


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    inner = group.exceptions[0]
    return _first(inner) if isinstance(inner, BaseExceptionGroup) else inner


def _digest(path: Path | None) -> str | None:
    if path is None:
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class UserBatchPlan:
    """What a batch covers: the task file (``None`` for one task from the command line), the
    toolset reference, the manifest, the arm labels (:data:`harness.loop.arm_label.ARM_LABEL_NAMES`;
    default ``S`` and ``F``) and the run settings."""

    out: Path
    tasks_file: Path | None
    toolset: str
    manifest_file: Path | None = None
    arms: tuple[str, ...] = ("S", "F")
    policy: str = "model"
    detector: str = "schema_sound"
    max_tokens: int = 160
    concurrency: int = 4
    engine_label: str = "vllm"
    model: str | None = None
    input_enums: bool = False
    skill_tools: bool = False
    open_slots: bool = False

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"--concurrency must be at least 1, got {self.concurrency}.")
        for label in self.arms:
            ArmLabel.parse(label)  # ConfigError naming the six labels

    def settings(self) -> dict[str, Any]:
        """What changes a job's result: everything but the output folder and concurrency;
        the task file and manifest by their contents."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("out", "concurrency"):
                continue
            if f.name in LEVERS and not value:  # unset levers: older plans keep their fingerprint
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
            if isinstance(value, Path):
                out[f.name] = str(value)
        out["tasks_sha256"] = _digest(self.tasks_file)
        out["manifest_sha256"] = _digest(self.manifest_file)
        return out

    def fingerprint(self) -> str:
        text = json.dumps(self.settings(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def specs(self) -> list[JobSpec]:
        return [
            JobSpec.from_label(
                label,
                policy=self.policy,
                detector=self.detector,
                max_tokens=self.max_tokens,
                **{name: getattr(self, name) for name in LEVERS},
            )
            for label in dict.fromkeys(self.arms)
        ]


@dataclass(frozen=True)
class BatchSummary:
    """What a batch run did, over the plan's jobs: how many (``jobs``) and how many succeeded,
    the error classes of those that errored and how often (``errors``), how many ran now
    (``ran``) and how many finished jobs were kept from before (``skipped``), the wall time of
    this run, the results file, the job dicts (``selected``: the last run of each) and, with an
    executor, where the jobs ran."""

    jobs: int
    succeeded: int
    errors: dict[str, int]
    ran: int
    skipped: int
    wall_s: float
    results: Path
    selected: list[dict[str, Any]]
    executor: dict[str, Any] | None = None


class UserJobRunner:
    """One job of a batch by id, on a worker's engine, journaled in the job's directory: what a
    Ray worker runs (:class:`harness.runs.ray_pool.JobRunner`). It travels as the plan,
    the tasks (data) and the folder the command ran in; the worker loads the toolset and the
    manifest from their references there, once (so they must be reachable from every node)."""

    def __init__(self, plan: UserBatchPlan, tasks: Sequence[Task]) -> None:
        self.plan = plan
        self.tasks = list(tasks)
        self.cwd = os.getcwd()
        self._loaded: tuple[ToolsetFactory, Manifest | None] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_loaded": None}

    def _load(self) -> tuple[ToolsetFactory, Manifest | None]:
        if self._loaded is None:
            with contextlib.chdir(self.cwd):  # relative references, as on the driver
                factory = load_toolset(self.plan.toolset)
                manifest = (
                    load_manifest(self.plan.manifest_file) if self.plan.manifest_file else None
                )
            self._loaded = (factory, manifest)
        return self._loaded

    async def __call__(self, engine: Engine, job: str, directory: Path) -> dict[str, Any]:
        factory, manifest = self._load()
        for task in self.tasks:
            for spec in self.plan.specs():
                if job_id(task.id, spec) == job:
                    return await run_user_job(
                        engine, task, factory, spec, manifest, durable=directory
                    )
        raise ConfigError(f"Job {job!r} is not in the batch of {self.plan.tasks_file}.")


@dataclass(frozen=True)
class UserBatch:
    """One batch to run: its :class:`UserBatchPlan` (what it covers, fingerprinted), the tasks,
    the toolset factory and the manifest they run with, and how this run treats the batch's
    earlier runs: ``retry_failed`` (run again the jobs that errored; engine failures always
    run again), ``journals`` (journal every job in its own folder there, ``harness run --tasks
    FILE --journal DIR``, so a job killed with the batch, or one run again after an error,
    resumes from its journal instead of repeating its writes; a job the results file holds
    whose journal folder is gone is refused) and ``damaged`` (what to do with a damaged
    journal)."""

    plan: UserBatchPlan
    tasks: tuple[Task, ...]
    toolset: ToolsetFactory
    manifest: Manifest | None
    retry_failed: bool = False
    journals: Path | None = None
    damaged: OnDamage = "refuse"


async def run_user_batch(
    engine: Engine | None,
    batch: UserBatch,
    *,
    progress: Progress | None = None,
    executor: JobExecutor | None = None,
) -> BatchSummary:
    """Run (or resume) ``batch``; return its :class:`BatchSummary` over the plan's jobs
    (module docstring). With ``executor`` the jobs run there (``engine`` is not used) and this
    process still writes every result. ``progress`` (a bar the caller made, restarted at the
    number of jobs left to run) advances once per job; without one nothing is printed."""
    plan = batch.plan
    try:
        lock = lock_directory(
            plan.out,
            lambda holder: ConfigError(
                f"{plan.out} is being written by {holder} (another batch); wait for it to "
                "finish, stop it, or use another --out."
            ),
        )
    except OSError as exc:
        raise io_error(plan.out, exc, "create") from None
    try:
        return await _run_locked(engine, batch, progress, executor)
    except OSError as exc:  # the results file or plan.json: the batch cannot be recorded
        raise io_error(plan.out, exc, "write to") from None
    finally:
        lock.close()


async def _run_locked(
    engine: Engine | None,
    batch: UserBatch,
    progress: Progress | None,
    executor: JobExecutor | None,
) -> BatchSummary:
    plan, tasks, journals = batch.plan, batch.tasks, batch.journals
    results_path = plan.out / "results.jsonl"
    jobs = load_results(results_path)
    check_plan(plan.out, plan.settings(), plan.fingerprint(), has_results=bool(jobs))
    planned = [(task, spec) for task in tasks for spec in plan.specs()]
    rerun = {j["job_id"] for j in jobs if rerun_on_resume(j, batch.retry_failed)}
    done = {j["job_id"] for j in jobs} - rerun
    todo = [(t, s) for t, s in planned if job_id(t.id, s) not in done]
    if journals is not None:
        lost = [j for j in sorted(rerun) if not (job_directory(journals, j) / "journal").exists()]
        if lost:
            raise JournalError(
                f"{len(lost)} job(s) of {results_path} ran before but their journal folders "
                f"under {journals} are gone (first: {lost[0]!r}): running them again would "
                "repeat their writes. Restore the folders, or start the batch over in a new "
                "directory."
            )
    if progress is not None:
        progress.restart(len(todo))
    limiter = anyio.CapacityLimiter(plan.concurrency if executor is None else executor.capacity)
    started = time.monotonic()

    async def one(task: Task, spec: JobSpec) -> None:
        async with limiter:
            if executor is not None:
                key = job_id(task.id, spec)
                job = await executor.run(key, fresh=key in rerun)
            else:
                assert engine is not None, "run_user_batch needs an engine or an executor"
                key = job_id(task.id, spec)
                durable = None if journals is None else job_directory(journals, key)
                job = await run_user_job(
                    engine,
                    task,
                    batch.toolset,
                    spec,
                    batch.manifest,
                    durable=durable,
                    damaged=batch.damaged,
                )
        jobs.append(job)
        with open_append(results_path) as out:  # a torn line from a crash is ended first
            out.write(dumps(job) + "\n")
        if progress is not None:
            progress.advance(job["job_id"], failed=not job["success"])

    try:
        async with anyio.create_task_group() as group:
            for task, spec in todo:
                group.start_soon(one, task, spec)
    except BaseExceptionGroup as failed:
        # A journal that cannot be written stopped its job and cancelled the others: say
        # that, not an exception group.
        journal_errors, _ = failed.split(JournalError)
        if journal_errors is not None:
            raise _first(journal_errors) from None
        raise
    planned_ids = {job_id(t.id, s) for t, s in planned}
    latest = {j["job_id"]: j for j in jobs}
    selected = [j for j in latest.values() if j["job_id"] in planned_ids]
    return BatchSummary(
        jobs=len(selected),
        succeeded=sum(1 for j in selected if j["success"]),
        errors=dict(error_kinds(selected)),
        ran=len(todo),
        skipped=len(planned) - len(todo),
        wall_s=time.monotonic() - started,
        results=results_path,
        selected=selected,
        executor=executor.describe() if executor is not None else None,
    )
