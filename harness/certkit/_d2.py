"""The D2 claim of the certification kit: no certified window holds a call that needs a
result of that window.

For each skill of the manifest with a fan-out phase, hypothesis draws calls for every phase in
order (slotted phases get exactly their slot count, with task inputs to match), and the
detector certifies windows two ways: *online*, through its window tracker as the loop runs it
(a discarded call is regenerated after the window closes), and *in batch*, each fan-out
phase's calls as one window. A window is a false fill when one of its calls has an argument
the manifest sources from ``result:PHASE`` and an earlier call of that window was generated in
PHASE. The online check is the one with teeth: a fan-out phase with no slot count keeps every
call of its tools while it is open, so a later phase that reuses a tool can have its calls
certified in the earlier phase's window although the manifest says they need results.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from harness.certify import Certificate
from harness.certify.d2 import dependent_edge
from harness.certify.window import Windows
from harness.certkit._base import Call, Falsified, KitView, tool_call
from harness.certkit._report import ClaimResult, Counterexample, Outcome
from harness.skills.manifest import Skill

__all__ = ("certified_windows", "check_d2", "draw_skill_calls")


def draw_skill_calls(
    kit: KitView, data: st.DataObject, skill: Skill
) -> tuple[list[tuple[int, Call]], dict[str, Any]]:
    """Calls for every phase of ``skill`` in order (each labelled with its phase index)
    and task inputs that give the slotted phases their counts."""
    inputs: dict[str, Any] = {}
    sequence: list[tuple[int, Call]] = []
    for index, phase in enumerate(skill.phases):
        tools = [t for t in phase.tools if t in kit.strategies]
        if not tools:
            continue
        if isinstance(phase.slots, int):
            count = phase.slots
        elif isinstance(phase.slots, str) and phase.slots.startswith("input:"):
            field_name = phase.slots.partition(":")[2]
            if field_name not in inputs:
                inputs[field_name] = list(range(data.draw(st.integers(1, kit.max_window))))
            count = len(inputs[field_name])
        else:
            count = data.draw(st.integers(0, kit.max_window), label=f"{phase.name} calls")
        for _ in range(count):
            name = data.draw(st.sampled_from(tools), label="tool")
            sequence.append((index, (name, data.draw(kit.strategies[name]))))
    return sequence, inputs


def certified_windows(
    kit: KitView, skill: Skill, sequence: list[tuple[int, Call]], inputs: Mapping[str, Any]
) -> list[tuple[str, Certificate]]:
    """Windows the detector certifies for ``sequence``: online (its tracker, as the loop
    runs it: a discarded call is regenerated after the window closes) and in batch (each
    fan-out phase's calls as one window)."""
    calls = [tool_call(i, n, a) for i, (_, (n, a)) in enumerate(sequence)]
    online = Windows(kit.detector.tracker(kit.toolset, skill, inputs))
    windows: list[tuple[str, Certificate]] = [
        ("online", w.certificate)
        for w in online.replay(calls, readmit_discarded=True)
        if w.certificate is not None
    ]
    for index, phase in enumerate(skill.phases):
        block = [c for c, (i, _) in zip(calls, sequence, strict=True) if i == index]
        if phase.is_fan_out and len(block) >= 2:
            verdict = kit.detector.certify(kit.toolset, block, phase, inputs)
            if isinstance(verdict, Certificate):
                windows.append(("batch", verdict))
    return windows


def check_d2(kit: KitView, skill: Skill) -> ClaimResult:
    def body(data: st.DataObject) -> None:
        sequence, inputs = draw_skill_calls(kit, data, skill)
        for mode, certificate in certified_windows(kit, skill, sequence, inputs):
            positions = [int(cid.rpartition("_")[2]) for cid in certificate.call_ids]
            violation = _d2_violation(skill, sequence, positions)
            if violation is not None:
                raise Falsified(
                    _d2_counterexample(skill, sequence, positions, certificate, mode, violation)
                )

    return kit._result("D2", st.data(), body, phase=skill.name)


def _d2_violation(
    skill: Skill, sequence: list[tuple[int, Call]], positions: list[int]
) -> tuple[int, str, str] | None:
    """(window position, argument, source phase) of the first dependent edge in the window
    (see :func:`harness.certify.d2.dependent_edge`); ``None`` when there is none."""
    return dependent_edge(skill, [(sequence[p][0], sequence[p][1][0]) for p in positions])


def _d2_counterexample(
    skill: Skill,
    sequence: list[tuple[int, Call]],
    positions: list[int],
    certificate: Certificate,
    mode: str,
    violation: tuple[int, str, str],
) -> Counterexample:
    j, argument, source = violation
    index, (name, _) = sequence[positions[j]]
    own = skill.phases[index].name
    where = certificate.phase
    how = "online (the loop's window tracker)" if mode == "online" else "in batch"
    if where != own:
        fix = (
            f"Phase '{where}' has no slot count and also lists '{name}', so the certifier keeps "
            f"every '{name}' call in '{where}' while it is open and calls of phase '{own}' join "
            f"its window. Give '{where}' a slot count (slots = N or 'input:FIELD') so its window "
            f"closes before '{own}', or do not list '{name}' in both phases."
        )
    else:
        fix = (
            f"The detector ignores the manifest's result placeholder '{name}.{argument}' = "
            f"'result:{source}': use SchemaSoundDetector (D2 from the manifest)."
        )
    return Counterexample(
        calls=tuple(sequence[p][1] for p in positions),
        message=(
            f"Call #{j} '{name}' (phase '{own}', where its argument '{argument}' is a result of "
            f"phase '{source}') was certified {how} in a window of phase '{where}' together "
            f"with a call of '{source}' whose result it needs."
        ),
        expected=Outcome(
            f"manifest, skill '{skill.name}'",
            details=(f'phase \'{own}\': "{name}.{argument}" = "result:{source}"',),
        ),
        actual=Outcome(
            f"certified window of phase '{where}'",
            details=tuple(
                f"#{k} {sequence[p][1][0]} (generated in phase '{skill.phases[sequence[p][0]].name}')"
                for k, p in enumerate(positions)
            ),
        ),
        fix=fix,
    )
