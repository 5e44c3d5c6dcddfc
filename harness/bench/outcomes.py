"""What a benchmark job's result means: solved, the model could not solve it, or the harness failed.

A job that did not meet its gold label is one of two different facts, and the report, the
progress line and the exit status keep them apart:

- **model** (``"model_failed"``): the model could not solve it. Under the ``model`` policy (and
  every BFCL entry) the model chooses its calls; a run that misses the gold label, or ends in
  a budget (:class:`~harness.errors.UsageLimitExceeded`: the stuck-loop guard, the turn or
  model-mistake budget; or :class:`~harness.errors.ContextWindowExceeded`: the chat outgrew
  the engine's context), is a measurement of the model, not a defect.
- A BFCL entry is scored on the calls the model made (BFCL's checker): one scored correct is
  **solved** even when the model then ran into a budget (it repeated its call until the
  stuck-loop guard), as R4 counts it.
- **control** (``"control_failed"``): the phase-heuristic control missed. Under a forced
  policy (``gold``, ``oracle``) a job run with the ``phase_heuristic`` detector — the unsound
  detector the protocol runs *as a control* — that misses its label or ends in a budget is
  the cost of its false fills: the measurement R3 exists for (the context-bound oracle
  re-reads the document it could see until the stuck guard, or writes the wrong one), not a
  defect of the harness's certifier.
- **harness** (``"harness_failed"``): the harness failed. An engine failure (``EngineError``
  and its subclasses), a replay divergence, or any other error is the harness's (or the
  machine's) under every policy; and under a forced policy — decoding forced to the gold
  calls, or the oracle's calls from what the context shows — any miss or error of a
  schema-sound job is the harness's, since a correct harness cannot fail there.

``harness bench`` exits 1 only for harness failures; model failures and the control's misses
are results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Literal

__all__ = (
    "OUTCOMES",
    "Outcome",
    "error_kind",
    "outcome",
    "outcome_counts",
    "outcome_line",
)

Outcome = Literal["solved", "model_failed", "control_failed", "harness_failed"]
#: Every outcome, in the order reports list them.
OUTCOMES: tuple[Outcome, ...] = ("solved", "model_failed", "control_failed", "harness_failed")

#: Error kinds that are the model's when the model chooses (a budget it ran out of).
_MODEL_ERRORS = frozenset({"UsageLimitExceeded", "ContextWindowExceeded"})


def error_kind(job: Mapping[str, Any]) -> str | None:
    """The error class of a job (``job["error"]`` is ``"Kind: message"``), or ``None``."""
    error = job.get("error")
    if not error:
        return None
    return str(error).split(":", 1)[0].strip() or "error"


def _bfcl(job: Mapping[str, Any]) -> bool:
    return str(job.get("kind", "")).startswith("bfcl")


def outcome(job: Mapping[str, Any]) -> Outcome:
    """Whether ``job`` solved its task, the model could not, or the harness failed."""
    kind = error_kind(job)
    if job.get("success") and (kind is None or (kind in _MODEL_ERRORS and _bfcl(job))):
        return "solved"  # a BFCL entry is scored on its calls: a budget after them undoes nothing
    if job.get("policy") != "model":
        if job.get("detector") == "phase_heuristic" and (kind is None or kind in _MODEL_ERRORS):
            return "control_failed"  # the unsound control's false fills cost the task (R3)
        return "harness_failed"  # forced calls cannot miss under a sound detector
    if kind is None or kind in _MODEL_ERRORS:
        return "model_failed"
    return "harness_failed"


def outcome_counts(jobs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """``{policy: {outcome: n}}`` for every outcome of :data:`OUTCOMES` (zeros included)."""
    out: dict[str, Counter[str]] = {}
    for job in jobs:
        counts = out.setdefault(str(job.get("policy", "gold")), Counter())
        counts[outcome(job)] += 1
    return {policy: {k: counts[k] for k in OUTCOMES} for policy, counts in sorted(out.items())}


def outcome_line(jobs: Iterable[Mapping[str, Any]]) -> str:
    """One sentence: ``"9 jobs: 7 solved, 2 the model could not solve (model policy), 0
    harness failures"``."""
    jobs = list(jobs)
    counts = Counter(outcome(j) for j in jobs)
    control = (
        f", {counts['control_failed']} the phase-heuristic control missed (its false fills: "
        "the R3 measurement)"
        if counts["control_failed"]
        else ""
    )
    return (
        f"{len(jobs)} jobs: {counts['solved']} solved, {counts['model_failed']} the model could "
        f"not solve (model policy: a measurement, not an error){control}, "
        f"{counts['harness_failed']} harness failure(s)"
    )
