"""One workload *job*: one workload task run once under one arm, policy and detector
(:class:`~harness.runs.jobs.JobSpec`, the same spec a batch of your own tasks uses).

:func:`run_job` builds a fresh store and toolset (with the
injected tool latency), runs the loop on the given engine, scores the run against the task's
gold label, marks false fills (a window the detector certified that the manifest's schema-level
rules reject), and returns a plain JSON-ready dict — the unit the benchmark writes to
``results.jsonl`` and :mod:`harness.bench.analysis` reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.bench.workload import WorkloadTask
from harness.certify import Certificate, SchemaSoundDetector
from harness.engines.base import Engine
from harness.errors import HarnessError, JournalError
from harness.journal import Journal, OnDamage
from harness.loop import LoopResult, run_loop
from harness.loop.ledger import Ledger, record_to_dict
from harness.messages import ToolCall
from harness.runs.jobs import JobSpec, job_id, open_job_journal
from harness.skills.manifest import Manifest
from harness.toolsets.workspace import Latency, fingerprint
from harness.toolsets.workspace.durable import DurableStore, durable_toolset

__all__ = ("run_job",)


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


def _open_durable(
    durable: Path, wt: WorkloadTask, spec: JobSpec, damaged: OnDamage
) -> tuple[Journal, DurableStore]:
    """A durable job's journal and its store on disk, each resumed when the directory holds
    it already (the store created from the task's initial state otherwise)."""
    journal = open_job_journal(durable, job_id(wt.id, spec), label=spec.label, damaged=damaged)
    path = durable / "store.sqlite3"
    store = DurableStore(path) if path.exists() else DurableStore.create(path, wt.initial_state())
    return journal, store


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
        journal, store = _open_durable(durable, wt, spec, damaged)
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
