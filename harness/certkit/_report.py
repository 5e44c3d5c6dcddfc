"""The certification kit's report: each claim checked, its status and, when false, a minimal
counterexample with the two outcomes that differ and what to change. See :mod:`harness.certkit`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = (
    "CLAIMS",
    "CertificationReport",
    "ClaimName",
    "ClaimResult",
    "ClaimStatus",
    "Counterexample",
    "Outcome",
)

ClaimName = Literal[
    "read_only",
    "idempotent",
    "write_targets",
    "targets_canonical",
    "identity",
    "commutes",
    "D2",
    "speculable",
]
ClaimStatus = Literal["passed", "FALSE", "unverified"]

CLAIMS: Mapping[str, str] = {
    "read_only": "a call leaves the state unchanged",
    "idempotent": "calling twice leaves the same state and result as calling once",
    "write_targets": "a call changes nothing outside its declared write targets",
    "targets_canonical": (
        "two spellings of an argument that change one resource declare overlapping targets"
    ),
    "identity": ("the store's identity= function is idempotent and gives one record one identity"),
    "commutes": "certified windows run concurrently in any order equal the serial run",
    "D2": "no certified window holds a call that needs a result of that window",
    "speculable": "run twice with one key, or before a call it commutes with, changes nothing",
}


@dataclass(frozen=True)
class Outcome:
    """One side of a counterexample: what a run returned and left behind."""

    label: str
    results: tuple[str, ...] = ()
    state: str | None = None
    details: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "results": list(self.results),
            "state": self.state,
            "details": list(self.details),
        }


@dataclass(frozen=True)
class Counterexample:
    """A minimal (shrunk) example that makes a claim false."""

    calls: tuple[tuple[str, Mapping[str, Any]], ...]
    message: str
    expected: Outcome
    actual: Outcome
    fix: str
    flaky: bool = False
    #: The claim could not be judged: the same calls on two fresh states gave different
    #: results (nondeterministic text), so the example shows those two runs.
    nondeterministic: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": [{"name": n, "arguments": dict(a)} for n, a in self.calls],
            "message": self.message,
            "expected": self.expected.to_json(),
            "actual": self.actual.to_json(),
            "fix": self.fix,
            "flaky": self.flaky,
            "nondeterministic": self.nondeterministic,
        }


@dataclass(frozen=True)
class ClaimResult:
    """One claim checked: about a ``tool`` (per-tool claims) or a ``phase``/skill (windows)."""

    claim: ClaimName
    status: ClaimStatus
    examples: int
    tool: str | None = None
    phase: str | None = None
    reason: str = ""
    counterexample: Counterexample | None = None

    @property
    def subject(self) -> str:
        if self.tool is not None:
            return self.tool
        return f"windows of {self.phase}" if self.claim == "commutes" else f"skill {self.phase}"

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "tool": self.tool,
            "phase": self.phase,
            "status": self.status,
            "examples": self.examples,
            "reason": self.reason,
            "counterexample": self.counterexample.to_json() if self.counterexample else None,
        }


@dataclass(frozen=True)
class CertificationReport:
    """Every claim checked, with its result; :attr:`ok` is false when any claim is FALSE."""

    toolset: str
    tools: tuple[str, ...]
    seed: int
    examples: int
    manifest: str | None
    claims: tuple[ClaimResult, ...]
    notes: tuple[str, ...] = ()
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.false

    @property
    def false(self) -> tuple[ClaimResult, ...]:
        return tuple(c for c in self.claims if c.status == "FALSE")

    @property
    def unverified(self) -> tuple[ClaimResult, ...]:
        return tuple(c for c in self.claims if c.status == "unverified")

    @property
    def passed(self) -> tuple[ClaimResult, ...]:
        return tuple(c for c in self.claims if c.status == "passed")

    def to_json(self) -> dict[str, Any]:
        return {
            "toolset": self.toolset,
            "tools": list(self.tools),
            "seed": self.seed,
            "examples": self.examples,
            "manifest": self.manifest,
            "ok": self.ok,
            "summary": {
                "passed": len(self.passed),
                "false": len(self.false),
                "unverified": len(self.unverified),
            },
            "elapsed_s": round(self.elapsed_s, 3),
            "notes": list(self.notes),
            "claims": [c.to_json() for c in self.claims],
        }

    def render(self) -> str:
        """The report as text: a table of claims, then each FALSE claim in full."""
        out = [
            f"Certifying toolset {self.toolset!r}: {len(self.tools)} tools, state seed "
            f"{self.seed}, {self.examples} drawn examples per claim (after each example value, once)",
            f"manifest: {self.manifest or 'none'}",
            *(f"note: {n}" for n in self.notes),
            "",
        ]
        width = max([len("tool / windows"), *(len(c.subject) for c in self.claims)])
        out.append(f"{'tool / windows':<{width}}  {'claim':<17} {'examples':>8}  result")
        previous = None
        for c in self.claims:
            subject = c.subject if c.subject != previous else ""
            previous = c.subject
            result = c.status + (f" ({c.reason})" if c.reason else "")
            out.append(f"{subject:<{width}}  {c.claim:<17} {c.examples:>8}  {result}")
        for c in (*self.false, *(c for c in self.unverified if c.counterexample)):
            out.extend(["", *_render_false(c)])
        out.append("")
        out.append(
            f"{len(self.claims)} claims: {len(self.passed)} passed, {len(self.false)} FALSE, "
            f"{len(self.unverified)} unverified ({self.elapsed_s:.1f} s)"
        )
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()


def _render_false(c: ClaimResult) -> list[str]:
    ce = c.counterexample
    head = f"{c.status}  {c.subject}: {c.claim} — {CLAIMS[c.claim]}"
    if ce is None:
        return [head]
    lines = [
        head,
        f"  {ce.message}"
        + (
            " (it did not reproduce on a re-run: the outcome depends on timing or hidden state)"
            if ce.flaky
            else ""
        ),
    ]
    lines.append("  calls:")
    lines.extend(
        f"    #{i} {n}({json.dumps(dict(a), sort_keys=True)})" for i, (n, a) in enumerate(ce.calls)
    )
    for outcome, other in ((ce.expected, ce.actual), (ce.actual, ce.expected)):
        lines.append(f"  {outcome.label}:")
        for i, r in enumerate(outcome.results):
            theirs = other.results[i] if i < len(other.results) else None
            lines.append(f"    result #{i}: {_shown(r, theirs)}")
        if outcome.state is not None:
            lines.append(f"    state: {outcome.state}")
        lines.extend(f"    {d}" for d in outcome.details)
    lines.append(f"  fix: {ce.fix}")
    return lines


#: A result longer than this is shown around the place it differs (or its start).
SHOWN_WHOLE = 4000


def _shown(text: str, other: str | None) -> str:
    """A result shown whole (up to :data:`SHOWN_WHOLE` characters); where it differs from
    the other outcome's result, the first differing character is marked ``⟦…⟧``."""
    if other is None or other == text:
        return _clip(text, SHOWN_WHOLE)
    at = next((i for i, (a, b) in enumerate(zip(text, other, strict=False)) if a != b), None)
    at = min(len(text), len(other)) if at is None else at
    start = 0 if len(text) <= SHOWN_WHOLE else max(0, at - SHOWN_WHOLE // 4)
    window = text[start : start + SHOWN_WHOLE]
    cut = at - start
    marked = window[:cut] + "⟦" + window[cut : cut + 40] + "⟧" + window[cut + 40 :]
    before = f"…({start} characters) " if start else ""
    after = f" …({len(text) - start - len(window)} more)" if start + len(window) < len(text) else ""
    return f"{before}{marked}{after}  (differs at character {at})"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + f"… ({len(text)} characters)"
