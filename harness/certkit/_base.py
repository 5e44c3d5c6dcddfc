"""What the certification kit's claim modules share: a drawn call, the exception a property
raises on a false claim, and the view of the kit the D2 claim needs (so it does not import
the kit that imports it)."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness.certify import Detector
from harness.certify.conflicts import contains, overlaps
from harness.certkit._report import ClaimName, ClaimResult, Counterexample, Outcome
from harness.certkit.nondeterminism import NONDETERMINISTIC_PRESETS, normaliser
from harness.messages import ToolCall
from harness.tools.effects import literal_target
from harness.tools.execute import ToolResult
from harness.tools.toolset import Tool, Toolset

__all__ = (
    "Call",
    "Falsified",
    "KitView",
    "Observed",
    "RunningKit",
    "Snapshot",
    "any_overlap",
    "change_lines",
    "changed_resources",
    "declared_writes",
    "nondeterministic_counterexample",
    "not_covered",
    "not_overlapping",
    "outcome_text",
    "shared_resources",
    "short",
    "tool_call",
    "varying",
)

#: One drawn call: the tool's name and its arguments.
Call = tuple[str, Mapping[str, Any]]


class Falsified(Exception):  # internal control flow, not a HarnessError: see below
    """Raised inside a property: the claim is false for this example.

    Internal control flow, kept outside the :class:`~harness.errors.HarnessError` tree on
    purpose: hypothesis sees it as the property failing (and shrinks the example), and
    ``Kit`` (:mod:`harness.certkit._kit`) catches it and turns its counterexample into the
    claim's result. It never reaches a caller of the kit; a ``HarnessError`` a tool or the
    kit raises is a real failure and must not be mistaken for a falsified claim."""

    def __init__(self, counterexample: Counterexample) -> None:
        super().__init__(counterexample.message)
        self.counterexample = counterexample


def tool_call(index: int, name: str, arguments: Mapping[str, Any]) -> ToolCall:
    """The drawn call as the loop would see it: ``call_<index>``, key-sorted JSON arguments."""
    return ToolCall(f"call_{index}", name, json.dumps(dict(arguments), sort_keys=True))


def changed_resources(
    before: Mapping[str, Hashable] | None, after: Mapping[str, Hashable] | None
) -> set[str]:
    """The resources whose fingerprint differs between two ``resources(state)`` maps."""
    if before is None or after is None:
        return set()
    return {k for k in set(before) | set(after) if before.get(k) != after.get(k)}


# -- one overlap: the certifier's hierarchical rule (harness.certify.conflicts), never exact matching --


def declared_writes(tool: Tool, arguments: Mapping[str, Any]) -> frozenset[str] | None:
    """The write targets a call declares, as the certifier computes them
    (:meth:`harness.tools.Tool.footprint`, from the values the tool receives); ``None`` when
    unknown or unresolvable (the certifier keeps such a call apart anyway)."""
    footprint = tool.footprint(arguments)
    return None if footprint.error else footprint.writes


def _structured(resource: str) -> tuple[str, bool]:
    """A resource name as the certifier structures a target (:func:`~harness.tools.effects.
    literal_target`), and whether it is only its namespace (a name the proof set cannot
    spell: any target in that namespace may be it)."""
    target = literal_target(resource)
    return target, target == "" or target.endswith(":")


def not_covered(changed: Iterable[str], declared: Iterable[str]) -> set[str]:
    """The changed resources that no declared target contains (:func:`harness.certify.conflicts.contains`:
    ``doc:a`` contains ``doc:a/status``; ``todos`` and ``todos:`` contain ``todos:17``). A
    resource is named as the certifier names targets (``doc:Report`` is ``doc:report``)."""
    targets = list(declared)
    out = set()
    for c in changed:
        s, whole = _structured(c)
        if not any(contains(t, s) or (whole and overlaps(t, s)) for t in targets):
            out.add(c)
    return out


def not_overlapping(touched: Iterable[str], declared: Iterable[str]) -> set[str]:
    """The resources in ``touched`` that no declared target overlaps
    (:func:`harness.certify.conflicts.overlaps`), named as the certifier names targets."""
    targets = list(declared)
    return {c for c in touched if not any(overlaps(t, _structured(c)[0]) for t in targets)}


def any_overlap(x: Iterable[str], y: Iterable[str]) -> bool:
    """Whether some target of ``x`` overlaps some target of ``y`` (the certifier's D1 test)."""
    ys = list(y)
    return any(overlaps(a, b) for a in x for b in ys)


def shared_resources(x: Iterable[str], y: Iterable[str]) -> list[str]:
    """The resources two runs both changed, hierarchically: ``a`` when both changed ``a``,
    ``a ~ a/b`` when one changed a resource inside the other's (sorted)."""
    ys = list(y)
    return sorted({a if a == b else f"{a} ~ {b}" for a in x for b in ys if overlaps(a, b)})


@dataclass(frozen=True)
class Snapshot:
    """The state as the kit sees it: its fingerprint and, per resource, a fingerprint."""

    fingerprint: Hashable | None
    resources: Mapping[str, Hashable] | None


@dataclass(frozen=True)
class Observed:
    """What running calls on a fresh state gave: their results, the state before and after."""

    results: tuple[ToolResult, ...]
    before: Snapshot
    after: Snapshot


def outcome_text(result: ToolResult) -> str:
    """A result as the report shows it."""
    return result.content


def varying(first: Observed, second: Observed) -> list[int]:
    """The results that differ between two runs of the same calls, each on a fresh state."""
    return [
        i
        for i, (x, y) in enumerate(zip(first.results, second.results, strict=True))
        if outcome_text(x) != outcome_text(y)
    ]


def nondeterministic_counterexample(
    calls: Sequence[Call], first: Observed, second: Observed, *, claim_fix: str = ""
) -> Counterexample:
    """The claim cannot be judged: ``first`` and ``second`` ran the same ``calls`` in the same
    way on two fresh states, yet their results differ. The fix names the presets of
    ``--nondeterministic`` that would make them equal, when some would."""
    indices = varying(first, second)
    names = sorted({calls[i][0] for i in indices})
    pairs = [(outcome_text(first.results[i]), outcome_text(second.results[i])) for i in indices]
    presets = [
        p
        for p in NONDETERMINISTIC_PRESETS
        if all(normaliser([p])(a) == normaliser([p])(b) for a, b in pairs)
    ]
    mark = (
        f"--nondeterministic {presets[0]}"
        if presets
        else "--nondeterministic REGEX (a regular expression for the part that varies)"
    )
    return Counterexample(
        calls=tuple(calls),
        message=(
            f"The result of {', '.join(repr(n) for n in names)} differs between two runs of "
            "the same calls on fresh states: its text is nondeterministic, so no claim about "
            "it can be judged from results."
        ),
        expected=Outcome("first run", tuple(outcome_text(r) for r in first.results)),
        actual=Outcome("second run", tuple(outcome_text(r) for r in second.results)),
        fix=(
            f"If the varying text is noise (a time, a temporary name), mark it: {mark} for an "
            "MCP server, or return text without it from the tool; if it is not noise, the "
            f"tool's results depend on something outside the state{claim_fix}."
        ),
        nondeterministic=True,
    )


def short(value: Hashable | None) -> str | None:
    """A fingerprint, shortened for the report."""
    if value is None:
        return None
    text = value if isinstance(value, str) else repr(value)
    return text[:12] if isinstance(value, str) and len(text) >= 32 else text[:60]


def _clip(value: Any, width: int = 60) -> str:
    text = "(absent)" if value is None else value if isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def change_lines(
    before: Mapping[str, Hashable] | None, after: Mapping[str, Hashable] | None, keys: set[str]
) -> tuple[str, ...]:
    if before is None or after is None:
        return ()
    return tuple(
        f"changed {k}: {_clip(before.get(k))} → {_clip(after.get(k))}" for k in sorted(keys)
    )


class KitView(Protocol):
    """What a claim module needs of the kit."""

    @property
    def toolset(self) -> Toolset: ...

    @property
    def detector(self) -> Detector: ...

    @property
    def max_window(self) -> int: ...

    @property
    def strategies(self) -> Mapping[str, Any]: ...

    @property
    def explicit(self) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        """Per tool, the argument objects every per-tool claim tries first."""

    def once(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """One call run alone on a fresh state (memoised): an ``Observed``."""

    def _result(
        self,
        claim: ClaimName,
        strategy: Any,
        body: Callable[[Any], None],
        *,
        tool: str | None = None,
        phase: str | None = None,
        note: str = "",
        empty: str = ...,
        examples: int | None = None,
    ) -> ClaimResult: ...


class RunningKit(KitView, Protocol):
    """What the window claims need of the kit besides :class:`KitView`: running calls."""

    @property
    def cert(self) -> Any: ...

    @property
    def examples(self) -> int: ...

    def execute(
        self,
        calls: Sequence[Call],
        *,
        order: Sequence[int] | None = None,
        yields: Sequence[int] | None = None,
    ) -> Observed:
        """Run ``calls`` on a fresh state: serially in emitted order, or concurrently."""

    def eligible(self, names: Sequence[str]) -> list[str]:
        """The tools of ``names`` that may join a window the kit runs."""
