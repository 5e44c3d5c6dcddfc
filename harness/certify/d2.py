"""D2: no argument of a call in a window depends on a result of another call of the window.

The one home of the rule. At the schema level the manifest says where each argument comes
from (:class:`~harness.skills.manifest.ArgSource`); an argument sourced from ``result:PHASE`` is a
*result placeholder*. The rule has four uses, each a function here:

* :func:`placeholder_failure`: the manifest sources an argument of this tool from a result of
  the call's own phase, so no window of that phase may hold it (batch, online, the validator);
* :func:`withheld_arguments`: online, the arguments of a newly emitted call that the manifest
  sources from the phase of the window still open, whose results were withheld when the
  call was generated (the call is discarded and regenerated after the absorb turn);
* :func:`marker_failure`: without a manifest (the phase heuristic, the validator), an
  argument that quotes the withheld-result marker;
* :func:`provenance_failures`: online and batch, for every detector, arguments that quote the
  marker or the text of a withheld result, and (with a manifest) arguments whose value does
  not come from their declared source (:mod:`harness.certify.provenance`);
* :func:`dependent_edge`: the ground truth the certification kit checks windows against.

A call with a provenance failure is never admitted: discarded and regenerated after the absorb
turn while a window is open (it may have depended on a withheld result), run on its own
otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.certify.provenance import (
    InputValues,
    ProvenancePlan,
    TurnView,
    Violation,
    quotes_withheld,
)
from harness.certify.verdict import Failure
from harness.messages import ToolCall
from harness.skills.manifest import ArgSource, Phase, Skill
from harness.tools.effects import Effect

__all__ = (
    "dependent_edge",
    "marker_failure",
    "placeholder_failure",
    "provenance_failures",
    "withheld_arguments",
    "withheld_failure",
)


def placeholder_failure(phase: Phase, call: ToolCall) -> Failure | None:
    """D2 at the schema level: ``call``'s tool has an argument that the manifest sources
    from a result of ``phase`` itself."""
    placeholders = phase.in_window_placeholders(call.name)
    if not placeholders:
        return None
    return Failure(
        "D2",
        "D2_result_placeholder",
        f"'{call.name}' argument(s) {placeholders} are results of phase {phase.name!r} itself",
        call.id,
    )


def withheld_arguments(
    call: ToolCall, phases: Sequence[Phase | None], window_phase: str | None
) -> list[str]:
    """Arguments of ``call`` that the manifest sources from a result of the open window's
    phase, under any of the phases the call may belong to (sorted, without repeats)."""
    if window_phase is None:
        return []
    found = [p.result_arguments(call.name, window_phase) for p in phases if p is not None]
    return sorted({argument for arguments in found for argument in arguments})


def withheld_failure(call: ToolCall, arguments: Sequence[str], window_phase: str) -> Failure:
    """The failure for a call generated while results it needs were withheld."""
    return Failure(
        "D2",
        "D2_result_placeholder",
        f"'{call.name}' argument(s) {list(arguments)} come from results of phase "
        f"{window_phase!r}, withheld when it was generated",
        call.id,
    )


def marker_failure(call: ToolCall, marker: str) -> Failure | None:
    """D2 without a manifest: an argument quotes the withheld-result marker."""
    if marker not in call.arguments:
        return None
    return Failure(
        "D2", "D2_quotes_marker", f"'{call.name}' arguments quote a withheld result", call.id
    )


def _violation(call: ToolCall, violation: Violation) -> Failure:
    return Failure("D2", violation.code, f"'{call.name}': {violation.message}", call.id)


def provenance_failures(
    call: ToolCall,
    *,
    marker: str,
    view: TurnView | None,
    sources: Mapping[str, ArgSource] | None = None,
    inputs: Mapping[str, Any] | InputValues | None = None,
    effect: Effect | None = None,
    plan: ProvenancePlan | None = None,
) -> list[Failure]:
    """Arguments of ``call`` that quote the marker or a withheld result's text (every
    detector), and, given the manifest's ``sources`` for its tool, arguments whose value
    does not come from there. ``view``: what the call's turn could see (``None`` outside a
    run: result-sourced values are then not checked). ``plan``: the sources, inputs and
    effect compiled once (:class:`~harness.certify.provenance.ProvenancePlan`), instead of the three."""
    arguments = call.args.value
    if arguments is None:
        if marker and marker in call.arguments:
            return [Failure("D2", "D2_quotes_marker", f"'{call.name}' quotes {marker!r}", call.id)]
        return []  # not a JSON object: D1 says so
    withheld = () if view is None else view.withheld
    if plan is None:
        if sources is None:
            return [_violation(call, v) for v in quotes_withheld(arguments, marker, withheld)]
        plan = ProvenancePlan(call.name, sources, inputs if inputs is not None else {}, effect)
    found = plan.check(
        arguments, None if view is None else view.visible, marker=marker, withheld=withheld
    )
    return [_violation(call, v) for v in found] if found else []


def dependent_edge(skill: Skill, window: Sequence[tuple[int, str]]) -> tuple[int, str, str] | None:
    """The first dependent edge inside a window, by the manifest: ``window`` lists each
    call's (phase index it was generated in, tool). Returns (position in the window,
    argument, source phase) of the first call with an argument sourced from a result of a
    phase that an earlier call of the window was generated in; ``None`` when there is none."""
    for j, (index, name) in enumerate(window):
        earlier = {skill.phases[i].name for i, _ in window[:j]}
        for argument, source in sorted(skill.phases[index].sources(name).items()):
            if source.is_result_placeholder and source.ref in earlier:
                return j, argument, str(source.ref)
    return None
