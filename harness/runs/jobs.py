"""A job of a batch: what to run (:class:`JobSpec`), its id, and the JSON line it becomes.

Shared by ``harness run --tasks`` (:mod:`harness.runs.batch`) and ``harness bench``
(:mod:`harness.bench.jobs` runs the workload's jobs): a job is one task run once under one arm,
policy and detector; its outcome is a JSON-ready dict, one line of ``results.jsonl``. A job
that runs durably keeps its journal in its own directory (:func:`open_job_journal`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engines.base import GenerationSettings
from harness.errors import JournalError
from harness.journal import Journal, OnDamage
from harness.loop import Arm, ArmLabel, FlattenSettings, LoopConfig, Policy
from harness.loop.task import Task

__all__ = ("JobSpec", "dumps", "error_kinds", "errored_summary", "job_id", "open_job_journal")


def open_job_journal(
    directory: Path,
    run_id: str,
    *,
    label: str,
    damaged: OnDamage = "refuse",
    task: Task | None = None,
) -> Journal:
    """The journal of one job in ``directory`` (``journal/`` inside it): resumed, refusing a
    journal of another run or a damaged one (unless ``damaged="continue"``), when the job
    started before; else created, its header's meta naming the job's arm (``job``) and,
    given ``task``, the task's id, prompt and inputs (what ``harness init --traces`` reads
    a serial run's prompt from). A job directory that lost its journal (a store with no
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
    meta: dict[str, Any] = {"job": label}
    if task is not None:
        meta.update(task=task.id, prompt=task.prompt, inputs=dict(task.inputs))
    return Journal.create(path, run_id, meta=meta)


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
