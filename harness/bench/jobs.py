"""One *job*: one workload task run once under one arm, policy and detector.

Shared by ``harness run`` and ``harness bench``: builds a fresh store and toolset (with the
injected tool latency), runs the loop on the given engine, scores the run against the task's
gold label, marks false fills (a window the detector certified that the manifest's schema-level
rules reject), and returns a plain JSON-ready dict — the unit the benchmark writes to
``results.jsonl`` and :mod:`harness.bench.analysis` reads.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.bench.workload import WorkloadTask
from harness.certify import Certificate, SchemaSoundDetector
from harness.engines.base import Engine, GenerationSettings
from harness.errors import HarnessError, JournalError
from harness.journal import Journal, OnDamage
from harness.loop import Arm, ArmLabel, FlattenSettings, LoopConfig, LoopResult, Policy, run_loop
from harness.loop.ledger import Ledger, record_to_dict
from harness.messages import ToolCall
from harness.skills.manifest import Manifest
from harness.toolsets.workspace import Latency, fingerprint
from harness.toolsets.workspace.durable import DurableStore, durable_toolset

__all__ = ("JobSpec", "error_kinds", "errored_summary", "job_id", "open_job_journal", "run_job")


def open_job_journal(
    directory: Path, run_id: str, *, label: str, damaged: OnDamage = "refuse"
) -> Journal:
    """The journal of one job in ``directory`` (``journal/`` inside it): resumed, refusing a
    journal of another run or a damaged one (unless ``damaged="continue"``), when the job
    started before; else created. A job directory that lost its journal (a store with no
    journal beside it, a folder with no journal file) is refused, never silently restarted:
    every write it made would run again."""
    path = directory / "journal"
    if path.exists():
        return Journal.resume(path, run_id=run_id, damaged=damaged)
    if (directory / "store.sqlite3").exists():
        raise JournalError(
            f"{directory} holds the store of run {run_id!r} but no journal ({path} is gone): "
            "resuming would run its writes again. Restore the journal, or start the run over "
            "in a new directory."
        )
    return Journal.create(path, run_id, meta={"job": label})


@dataclass(frozen=True)
class JobSpec:
    """What to run: an arm (``S``, ``F``, ``P``, ``P+V``), eager dispatch and speculation (F
    only), a policy, a detector, the injected tool latency, the generation budget and the
    manifest-guided levers (``input_enums``, ``skill_tools``, ``open_slots``: the same for every arm; see
    :mod:`harness.loop.levers`)."""

    arm: Arm
    policy: Policy = "gold"
    detector: str = "schema_sound"
    eager: bool = False
    speculate: bool = False
    latency_s: float = 0.5
    latency_sigma_s: float = 0.0
    max_tokens: int = 160
    latency_seed: int = 0
    input_enums: bool = False
    skill_tools: bool = False
    open_slots: bool = False

    def __post_init__(self) -> None:
        _ = self.arm_label  # ConfigError for an arm and switches that no label names

    @classmethod
    def from_label(cls, label: str | ArmLabel, **fields: Any) -> JobSpec:
        """An :class:`~harness.loop.arm_label.ArmLabel` (or its text: ``S``, ``F``, ``F+eager``,
        ``F+spec``, ``P`` or ``P+V``) plus the other fields."""
        arm = label if isinstance(label, ArmLabel) else ArmLabel.parse(label)
        return cls(arm=arm.arm, eager=arm.eager, speculate=arm.speculate, **fields)

    @property
    def arm_label(self) -> ArmLabel:
        return ArmLabel(self.arm, eager=self.eager, speculate=self.speculate)

    def loop_config(self) -> LoopConfig:
        """The loop's configuration for this job: arm, policy, detector, budget, eager,
        speculate and the manifest-guided levers."""
        return LoopConfig(
            arm=self.arm,
            policy=self.policy,
            detector=self.detector,
            generation=GenerationSettings(max_tokens=self.max_tokens),
            flatten=FlattenSettings(eager=self.eager, speculate=self.speculate),
            input_enums=self.input_enums,
            skill_tools=self.skill_tools,
            open_slots=self.open_slots,
        )

    @property
    def label(self) -> str:
        """The arm label, and ``/detector`` unless the detector is ``schema_sound``."""
        base = str(self.arm_label)
        return base if self.detector == "schema_sound" else f"{base}/{self.detector}"


def job_id(task_id: str, spec: JobSpec) -> str:
    return f"{task_id}|{spec.label}|{spec.policy}"


def _false_fills(wt: WorkloadTask, manifest: Manifest, windows: list[dict[str, Any]]) -> None:
    """Mark each window that the schema-level rules (the manifest is the truth for the
    workload) would not certify: a false fill. Only the phase-heuristic can produce one. The
    windows' own records carry their calls, so a window the run ended with still open (it
    died of a false fill: ``closed_by="aborted"``) is judged too."""
    skill = manifest.skill(wt.skill)
    toolset, _ = wt.toolset()
    truth = SchemaSoundDetector()
    for window in windows:
        calls = [
            ToolCall(i, name, arguments)
            for i, name, arguments in zip(
                window["call_ids"], window.get("tools", ()), window.get("arguments", ()),
                strict=False,
            )
        ]  # fmt: skip
        if len(calls) < 2:
            window["false_fill"] = False
            continue
        phases = [p for p in skill.phases if all(c.name in p.tools for c in calls)]
        verdicts = [truth.certify(toolset, calls, p, wt.task.inputs) for p in phases]
        window["false_fill"] = not any(isinstance(v, Certificate) for v in verdicts)


async def run_job(
    engine: Engine,
    wt: WorkloadTask,
    spec: JobSpec,
    manifest: Manifest,
    *,
    durable: Path | None = None,
    damaged: OnDamage = "refuse",
) -> dict[str, Any]:
    """Run ``wt`` under ``spec`` on ``engine``; the job dict (see the module docstring).
    A run that ends in a :class:`HarnessError` (e.g. a budget) is a failed job, not a crash.

    ``durable``: a directory for a run that survives a crash — the store on disk
    (``store.sqlite3``, keyed writes: :mod:`harness.toolsets.workspace.durable`) and the run's
    journal (``journal/``). A directory that holds them already resumes that run
    (:func:`open_job_journal`; ``damaged`` says what to do with a damaged journal). A journal
    that cannot be written (:class:`~harness.errors.JournalError`) stops the job and is
    raised: no later job can be recorded either."""
    latency = Latency(spec.latency_s, spec.latency_sigma_s, spec.latency_seed)
    journal: Journal | None = None
    store: DurableStore | None = None
    if durable is None:
        toolset, state = wt.toolset(latency=latency)
    else:
        journal = open_job_journal(durable, job_id(wt.id, spec), label=spec.label, damaged=damaged)
        path = durable / "store.sqlite3"
        store = DurableStore(path) if path.exists() else DurableStore.create(
            path, wt.initial_state()
        )  # fmt: skip
        toolset, state = durable_toolset(store, latency=latency), store.state()
    ledger = Ledger(log=True)
    config = spec.loop_config()
    error = None
    result: LoopResult | None = None
    try:
        result = await run_loop(
            engine,
            toolset,
            wt.task,
            config,
            manifest=manifest,
            ledger=ledger,
            run_id=None if journal is not None else job_id(wt.id, spec),
            journal=journal,
        )
    except JournalError:
        if store is not None:
            store.close()
        raise
    except HarnessError as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if journal is not None:
            journal.close()
    if store is not None:
        state = store.state()
        store.close()
    records = [record_to_dict(r) for r in ledger.records]
    turns = [r for r in records if r["kind"] == "turn"]
    calls = [r for r in records if r["kind"] == "call"]
    windows = [r for r in records if r["kind"] == "window"]
    summary = next((r for r in records if r["kind"] == "run"), {})
    failures = (
        ["the run did not finish: " + (error or "")]
        if result is None
        else wt.failures(result.calls, state, result.answer)
    )
    _false_fills(wt, manifest, windows)
    return {
        "job_id": job_id(wt.id, spec),
        "task_id": wt.id,
        "kind": wt.kind,
        "arm": spec.arm,
        "eager": spec.eager,
        "speculate": spec.speculate,
        "policy": spec.policy,
        "detector": spec.detector,
        "label": spec.label,
        "success": not failures,
        "failures": failures,
        "error": error,
        "answer": None if result is None else result.answer,
        "final_fingerprint": fingerprint(state),
        "expected_windows": list(wt.windows),
        "summary": summary,
        "turns": turns,
        "calls": calls,
        "windows": windows,
    }


def dumps(job: dict[str, Any]) -> str:
    return json.dumps(job, sort_keys=True, default=str)


def error_kinds(jobs: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """How many jobs ended in each error class (``job["error"]`` is ``"Kind: message"``)."""
    return Counter(
        str(job["error"]).split(":", 1)[0].strip() or "error" for job in jobs if job.get("error")
    )


def errored_summary(jobs: Iterable[Mapping[str, Any]]) -> str | None:
    """``"2 of 5 job(s) errored: EngineRequestError ×1, UsageLimitExceeded ×1"``, or ``None``
    when none did."""
    jobs = list(jobs)
    kinds = error_kinds(jobs)
    if not kinds:
        return None
    listed = ", ".join(f"{kind} ×{n}" for kind, n in sorted(kinds.items()))
    return f"{sum(kinds.values())} of {len(jobs)} job(s) errored: {listed}"
