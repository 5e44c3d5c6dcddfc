"""What makes a batch resumable: its results file, its plan, and which jobs run again.

A batch (``harness run --tasks``, :mod:`harness.runs.batch`; ``harness bench``,
:mod:`harness.bench.runner`) appends each finished job to ``results.jsonl``
(:func:`load_results` reads the last run of each job back), records its plan in ``plan.json``
so results of two plans never mix (:func:`check_plan`), and on resume runs again the jobs that
errored (:func:`rerun_on_resume`). A :class:`JobExecutor` runs the jobs elsewhere (a Ray
cluster, :class:`harness.runs.ray_pool.RayPool`) while the driver writes every result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from harness.errors import ConfigError
from harness.loop.ledger import Ledger

__all__ = ("JobExecutor", "check_plan", "load_results", "rerun_on_resume")

#: Job errors from the engine (an outage, a dead worker): a resume runs those jobs again.
_ENGINE_ERRORS = frozenset({"EngineError", "EngineDeadError", "EngineRequestError"})


class JobExecutor(Protocol):
    """Runs jobs somewhere else (a Ray cluster: :class:`harness.runs.ray_pool.RayPool`)
    and hands each job's dict back to the driver, which writes it."""

    @property
    def capacity(self) -> int:
        """Jobs it runs at once."""
        ...

    async def run(self, job_id: str, *, fresh: bool = False) -> dict[str, Any]:
        """Run one job (``fresh``: from scratch, not from its journal) and return its dict."""
        ...

    def describe(self) -> dict[str, Any]:
        """Where the jobs ran, for the report's metadata."""
        ...


def load_results(path: Path) -> list[dict[str, Any]]:
    """Jobs in ``results.jsonl``, one per job id (the last run of a job wins; lines torn by a
    crash are ignored)."""
    if not path.exists():
        return []
    latest: dict[str, dict[str, Any]] = {}
    for record in Ledger.read_jsonl(path):
        if "job_id" in record:
            latest.pop(record["job_id"], None)  # keep file order: a re-run moves to the end
            latest[record["job_id"]] = record
    return list(latest.values())


def check_plan(out: Path, settings: dict[str, Any], fingerprint: str, has_results: bool) -> None:
    """Refuse to mix results of two plans in ``out``; record the plan (``out/plan.json``:
    its ``settings`` and their ``fingerprint``) otherwise. Shared by every resumable batch
    (``harness bench``, ``harness run --tasks``)."""
    path = out / "plan.json"
    mine: dict[str, Any] = {"fingerprint": fingerprint, "settings": settings}
    if path.exists():
        try:
            theirs = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            theirs = {}
        if theirs.get("fingerprint") == mine["fingerprint"]:
            return
        old = theirs.get("settings", {})
        names = [*settings, *(k for k in old if k not in settings)]  # a lever set only there too
        changed = [
            f"{k} {old.get(k)!r} -> {settings.get(k)!r}"
            for k in names
            if old.get(k) != settings.get(k)
        ]
        raise ConfigError(
            f"{out} holds results of another plan (changed: {'; '.join(changed) or 'unknown'})"
            "; results of two plans must not mix in one report. Use another --out, or delete "
            f"{out} to start over."
        )
    if has_results:
        raise ConfigError(
            f"{out} holds results but no plan.json (written by an older version), so they "
            "cannot be checked against this plan. Use another --out, or delete it to start over."
        )
    path.write_text(json.dumps(mine, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def rerun_on_resume(job: dict[str, Any], retry_failed: bool) -> bool:
    """An errored job runs again: always when the engine failed, else with ``retry_failed``."""
    if not job.get("error"):
        return False
    kind = str(job["error"]).split(":", 1)[0]
    return retry_failed or kind in _ENGINE_ERRORS
