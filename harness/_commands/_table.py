"""What ``harness run`` prints about its jobs: the per-arm table (one row per job: turns,
calls, windows, tokens, seconds, whether it met its gold label) and the exit status."""

from __future__ import annotations

import sys
from typing import Any

from harness._commands._exit import EXIT_JOB_FAILED, EXIT_OK

__all__ = ("UNSCORED_NOTE", "exit_status", "flatten_note", "render_table")


def exit_status(jobs: list[dict[str, Any]], name: str = "label") -> int:
    """0 when no job errored; else 1, after saying on stderr which kinds of error, how many,
    and each errored job (named by its ``name`` field)."""
    from harness.runs.jobs import errored_summary

    errored = errored_summary(jobs)
    if errored is None:
        return EXIT_OK
    print(f"error: {errored}", file=sys.stderr)
    for job in jobs:
        if job["error"]:
            print(f"  {job[name]}: {job['error']}", file=sys.stderr)
    return EXIT_JOB_FAILED


def _ok(job: dict[str, Any]) -> str:
    """``yes`` / ``NO`` against the gold label; ``-`` for a finished run of a task that has none
    to check (your own task without ``gold_answer`` or ``gold_calls``)."""
    if not job["success"]:
        return "NO"
    return "-" if job.get("scored") is False else "yes"


#: The line under a table that has a ``-`` in its ok column.
UNSCORED_NOTE = (
    "  ok -: the run finished; the task has no gold label (gold_answer, gold_calls) to check"
)


#: What each ``closed_by`` of a window record means, for the line under the table.
CLOSED_BY = {
    "slot_closure": "the phase's slots were filled",
    "size_cap": "the window reached its size cap",
    "closed": "a call outside the phase, or a turn with no call, closed it",
    "aborted": "the run ended with it open",
    "message": "one parallel message",
    "batch": "one batch",
}


def flatten_note(job: dict[str, Any], name: str | None = None) -> str | None:
    """For an F arm that ran no window of 2 or more calls, the line that says why: how each
    window it opened closed (``closed_by``), or that no call joined a window; else None."""
    label = str(job.get("label", ""))
    if not str(job.get("arm", label)).startswith("F") or job.get("error"):
        return None
    windows = job.get("windows") or []
    if any(len(w.get("call_ids", ())) >= 2 for w in windows):
        return None
    who = name or label
    if not windows:
        return (
            f"  {who}: did not flatten: no call joined a certified window (no fan-out phase of "
            "the skill matched its calls), so every call ran serially"
        )
    counts: dict[str, int] = {}
    for window in windows:
        reason = str(window.get("closed_by") or "closed")
        counts[reason] = counts.get(reason, 0) + 1
    reasons = "; ".join(
        f"{reason} x{count} ({CLOSED_BY.get(reason, 'see the --json records')})"
        for reason, count in counts.items()
    )
    return f"  {who}: did not flatten: {len(windows)} window(s) of 1 call, closed by {reasons}"


def render_table(jobs: list[dict[str, Any]]) -> str:
    head = (
        "arm",
        "turns",
        "calls",
        "windows",
        "discards",
        "prompt",
        "cached",
        "billed",
        "engine s",
        "wall s",
        "ok",
    )
    rows = [head]
    for job in jobs:
        s = job["summary"]
        windows = ",".join(str(len(w["call_ids"])) for w in job["windows"]) or "-"
        rows.append((
            job["label"], str(s.get("turns", 0)), str(s.get("calls", 0)), windows,
            str(s.get("discards", s.get("repairs", 0))), str(s.get("prompt_tokens", 0)), str(s.get("cached_tokens", 0)),
            str(s.get("billed_tokens", 0)), f"{s.get('engine_s', 0.0):.2f}", f"{s.get('wall_s', 0.0):.2f}",
            _ok(job),
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
