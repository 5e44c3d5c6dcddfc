"""The soundness property (issue 15): no false fill under true declarations.

200 generated cases run here (the benchmark command runs 10,000); each control undoes one
fix and the same generators find a false fill, so the property can fail.
"""

from __future__ import annotations

import pytest

from benchmarks.soundness import CONTROLS, run_property
from benchmarks.soundness_identity import CLASSES, run_identity_property


@pytest.mark.timeout(900)
def test_no_certified_window_differs_from_the_serial_run_in_200_generated_cases() -> None:
    tally = run_property(200, seed=15)
    assert tally.cases == 200
    assert tally.false_fills == 0, tally.first
    assert tally.windows > 0  # the property is not vacuous: windows do certify


@pytest.mark.parametrize(
    ("control", "focus"),
    [
        ("raw_targets", ("get", "set_field")),
        ("reads_are_writes", ("copy_doc", "set_field")),
        ("exact_targets", ("get", "set_field")),
        ("no_provenance", ("get", "set_field")),
    ],
)
@pytest.mark.timeout(900)
def test_the_generators_catch_a_deliberately_unsound_rule(
    control: str, focus: tuple[str, ...]
) -> None:
    assert control in CONTROLS
    tally = run_property(300, control=control, seed=15, stop_on_false_fill=True, focus=focus)
    assert tally.false_fills >= 1, f"{control}: no false fill in {tally.cases} cases"


@pytest.mark.timeout(900)
def test_no_identity_class_gives_a_false_fill_or_an_exception_in_130_cases() -> None:
    tally = run_identity_property(130, seed=25)
    assert tally.cases == 130
    assert set(tally.by_class) == set(CLASSES)  # every class of issue 25 ran
    assert tally.false_fills == 0, tally.first
    assert tally.exceptions == 0, tally.first
    assert tally.windows > 0  # not vacuous: distinct records do certify


@pytest.mark.parametrize(
    ("control", "classes"),
    [
        ("raw_components", ("literal", "unicode")),
        ("recursive_identity", ("deep",)),
    ],
)
@pytest.mark.timeout(900)
def test_each_identity_control_finds_false_fills(control: str, classes: tuple[str, ...]) -> None:
    tally = run_identity_property(
        200, seed=25, control=control, classes=classes, stop_on_false_fill=True
    )
    assert tally.false_fills + tally.exceptions >= 1, f"{control}: nothing in {tally.cases} cases"
