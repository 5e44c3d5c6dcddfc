"""The P+V validator: a free, deterministic gate on a natively parallel window.

A message of several calls (arm P) is accepted only when every call names a tool that exists,
its arguments are a JSON object valid against the tool's schema, no call depends on a result
of another call in the message (D2, :mod:`harness.certify.d2`: no in-window result
placeholder in the manifest, no quoted withheld-result marker), the message does not
over-fill the phase's slot count (D3's slot rule), and no call is a duplicate of another (the
same call by :func:`~harness.messages.call_key`: the same tool, the same arguments by value). A
rejected window is resampled (:mod:`harness.loop.validated`); the validator itself never calls
the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from harness.certify.d2 import marker_failure, placeholder_failure
from harness.certify.verdict import DEFAULT_MARKER
from harness.messages import CallKey, ToolCall, call_key
from harness.skills.manifest import Phase
from harness.tools.toolset import Toolset

__all__ = ("validate_window",)


def validate_window(
    toolset: Toolset,
    calls: Sequence[ToolCall],
    phase: Phase | None,
    inputs: Mapping[str, Any],
    *,
    marker: str = DEFAULT_MARKER,
) -> list[str]:
    """Every reason to reject this window (empty when it passes)."""
    problems: list[str] = []
    seen: set[CallKey] = set()
    for call in calls:
        if call.name not in toolset:
            problems.append(f"unknown tool '{call.name}'")
            continue
        arguments = call.args.value
        if arguments is None:
            problems.append(call.args.problem or f"'{call.name}' arguments are not an object")
            continue
        problems.extend(
            f"'{call.name}' {p}" for p in toolset[call.name].validation_errors(arguments)
        )
        if phase is not None and len(calls) > 1 and placeholder_failure(phase, call):
            problems.append(f"'{call.name}' needs a result of another call in the window (D2)")
        if marker_failure(call, marker) is not None:
            problems.append(f"'{call.name}' quotes a withheld result (D2)")
        key = call_key(call.name, arguments)
        if key in seen:
            problems.append(f"duplicate call '{call.name}' {json.dumps(arguments, sort_keys=True)}")
        seen.add(key)
    if phase is not None and phase.is_fan_out and all(c.name in phase.tools for c in calls):
        # A message may hold fewer than the phase's slots (its calls can be split across
        # messages by write conflicts, D1), never more: over-filling is the model's mistake.
        slots = phase.slot_count(inputs)
        if slots is not None and len(calls) > slots:
            problems.append(
                f"phase {phase.name!r} has {slots} slots, the message has {len(calls)} calls"
            )
    return problems
