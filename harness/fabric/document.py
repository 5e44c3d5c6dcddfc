"""A fabric run as a JSON document: what ``harness fabric --json`` prints and the fabric
endpoint (:mod:`harness.fabric.http`) returns.

The document holds the task, whether the run is ``ok``, the plan (its text, ``problems``,
the steps it ``lost``, those that started before its last token), one entry per step
(layer, kind, gate, status, round, attempts, inferences, agreement, start and duration,
output, note, error), the composed answer, what could not be measured after the steps
finished (``missing``: the composer, the naive pass) and the figures (:meth:`PEFFigures.to_json`, the
four ``CRP-PEF-*`` headers included). A DAG run without a planner has ``null`` plan fields
and answer.
"""

from __future__ import annotations

from typing import Any

from harness.fabric.decompose import PlanRun
from harness.fabric.figures import PEFFigures
from harness.fabric.result import FabricResult

__all__ = ("run_document",)


def run_document(
    result: FabricResult,
    outcome: PlanRun | None = None,
    figures: PEFFigures | None = None,
    *,
    task: str = "",
) -> dict[str, Any]:
    """The run as JSON-ready data (see the module docstring). ``figures``: the run's
    (default: the plan run's, else the DAG's); ``task``: the task of a DAG-only run."""
    figures = figures or (outcome.figures if outcome is not None else result.figures)
    layer_of = {nid: i for i, layer in enumerate(result.layers) for nid in layer}
    started = result.started
    return {
        "task": outcome.task if outcome else task,
        "ok": outcome.ok if outcome else result.ok,
        "plan": outcome.plan_text if outcome else None,
        "problems": list(outcome.problems) if outcome else [],
        "missing": list(outcome.missing) if outcome else [],
        "lost": list(outcome.lost) if outcome else [],
        "speculative": list(outcome.speculative) if outcome else [],
        "plan_tokens": outcome.planner.usage.completion_tokens if outcome else None,
        "plan_first_token_s": outcome.plan_first_token_s if outcome else None,
        "plan_done_s": outcome.plan_done_s if outcome else None,
        "nodes": [
            {
                "id": r.id,
                "layer": layer_of[r.id],
                "kind": r.kind,
                "mode": r.mode,
                "status": r.status,
                "round": r.round,
                "attempts": r.attempts,
                "inferences": r.inferences,
                "failed_requests": r.failed_requests,
                "agreement": r.agreement,
                "start_s": round(r.started - started, 3) if r.started else None,
                "ms": round((r.finished - r.started) * 1000, 1) if r.started else 0.0,
                "text": r.text,
                "note": r.note or None,
                "error": str(r.error) if r.error else None,
            }
            for r in result.nodes.values()
        ],
        "answer": outcome.answer if outcome else None,
        "figures": figures.to_json(),
    }
