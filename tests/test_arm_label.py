"""Claims about the arm label (harness.loop.arm_label): one typed value for the six labels, read and
printed in one place, and what the benchmarks' records and reports make of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.bench.analysis import arm_key, job_label
from harness.bench.report_facts import facts
from harness.costmodel import Regime
from harness.errors import ConfigError
from harness.loop.arm_label import ARM_LABEL_NAMES, ARM_LABELS, ArmLabel
from harness.loop.ledger import RunRecord
from harness.runs.jobs import JobSpec

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def test_the_six_labels_in_order_each_round_trips_through_its_text() -> None:
    assert ARM_LABEL_NAMES == ("S", "F", "F+eager", "F+spec", "P", "P+V")
    for label in ARM_LABELS:
        assert ArmLabel.parse(str(label)) == label
    assert len(set(ARM_LABELS)) == 6


def test_f_spec_is_f_with_eager_dispatch_and_speculation() -> None:
    assert ArmLabel.parse("F+spec") == ArmLabel("F", eager=True, speculate=True)
    assert ArmLabel.parse("F+eager") == ArmLabel("F", eager=True)
    assert ArmLabel.parse("P+V") == ArmLabel("P+V")


@pytest.mark.parametrize("text", ["", "f", "F+Spec", "S+eager", "P+eager", "F/phase_heuristic"])
def test_an_unknown_label_is_a_config_error_naming_the_six(text: str) -> None:
    with pytest.raises(ConfigError, match=r"S, F, F\+eager, F\+spec, P, P\+V"):
        ArmLabel.parse(text)


@pytest.mark.parametrize(
    ("arm", "eager", "speculate"),
    [("S", True, False), ("P", False, True), ("P+V", True, True), ("F", False, True), ("Q", False, False)],
)  # fmt: skip
def test_switches_no_label_names_are_a_config_error(arm: Any, eager: bool, speculate: bool) -> None:
    with pytest.raises(ConfigError):
        ArmLabel(arm, eager=eager, speculate=speculate)


def test_of_names_what_the_loop_runs() -> None:
    """The loop ignores F's switches in other arms, and F+spec runs its misses eagerly."""
    assert str(ArmLabel.of("F", speculate=True)) == "F+spec"
    assert str(ArmLabel.of("F", eager=True, speculate=True)) == "F+spec"
    assert str(ArmLabel.of("F", eager=True)) == "F+eager"
    assert str(ArmLabel.of("S", eager=True)) == "S"
    assert str(ArmLabel.of("P+V")) == "P+V"


def _run_record(arm: Any, eager: bool, speculate: bool) -> RunRecord:
    return RunRecord(
        run_id="r", task_id="t", arm=arm, policy="gold", detector="schema_sound", eager=eager,
        finished=True, error=None, answer=None, turns=1, calls=0, windows=0, discards=0,
        resamples=0, model_errors=0, prompt_tokens=0, cached_tokens=0, completion_tokens=0,
        billed_tokens=0, engine_s=0.0, wall_s=0.0, speculate=speculate,
    )  # fmt: skip


def test_a_run_record_names_its_label() -> None:
    assert _run_record("F", True, True).label == ArmLabel.parse("F+spec")
    assert _run_record("F", True, False).label == ArmLabel.parse("F+eager")
    assert _run_record("P", False, False).label == ArmLabel.parse("P")


def test_a_job_spec_is_built_from_a_label_and_prints_it() -> None:
    for label in ARM_LABELS:
        spec = JobSpec.from_label(str(label))
        assert spec.arm_label == label
        assert (spec.arm, spec.eager, spec.speculate) == (label.arm, label.eager, label.speculate)
        assert spec.label == str(label)
    assert JobSpec.from_label("F", detector="phase_heuristic").label == "F/phase_heuristic"
    with pytest.raises(ConfigError, match="F\\+spec"):
        JobSpec.from_label("F+speculate")
    with pytest.raises(ConfigError):
        JobSpec(arm="S", eager=True)


def _job(label: str, kind: str = "fan_out", windows: int = 1) -> dict[str, Any]:
    arm = ArmLabel.parse(label)
    return {
        "arm": arm.arm, "eager": arm.eager, "speculate": arm.speculate, "policy": "gold",
        "detector": "schema_sound", "kind": kind, "label": label,
        "windows": [{"call_ids": ["a", "b"], "false_fill": False}] * windows,
    }  # fmt: skip


def test_the_reports_group_f_spec_jobs_as_f_spec_not_f_eager(tmp_path: Path) -> None:
    """Regression: the report's window counts grouped F+spec jobs with F+eager."""
    jobs = [_job("F"), _job("F+eager", windows=2), _job("F+spec", windows=3), _job("P")]
    assert [arm_key(j) for j in jobs] == ["F", "F+eager", "F+spec", "P"]
    rows = facts(jobs, tmp_path, {}, Regime(), None)["window_counts"]
    by_arm = {row["arm"]: (row["jobs"], row["windows"]) for row in rows}
    assert by_arm == {"F": (1, 1), "F+eager": (1, 2), "F+spec": (1, 3)}


def test_the_committed_full_report_counts_f_spec_windows_on_their_own() -> None:
    summary = json.loads((RESULTS / "full" / "summary.json").read_text(encoding="utf-8"))
    arms = {row["arm"] for row in summary["facts"]["window_counts"]}
    assert {"F", "F+eager", "F+spec"} <= arms


def _committed_rows() -> list[tuple[str, dict[str, Any]]]:
    return [
        (str(path.relative_to(RESULTS)), json.loads(line))
        for path in sorted(RESULTS.rglob("results.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def test_every_committed_result_has_a_label_that_round_trips() -> None:
    """Every row of every committed results.jsonl: a bench job's ``label`` (its arm label,
    and ``/detector`` for another detector) agrees with its arm, eager and speculate fields;
    a spec or draft bench row's ``arm`` is a label's text."""
    rows = _committed_rows()
    files = {name for name, _ in rows}
    assert {"full/results.jsonl", "spec/scripted/results.jsonl"} <= files
    jobs = 0
    for name, row in rows:
        text, _, detector = str(row.get("label", row["arm"])).partition("/")
        label = ArmLabel.parse(text)
        assert str(label) == text, name
        assert ArmLabel.parse(str(label)) == label, name
        if "label" in row:  # a bench job: its fields say the same as its label
            jobs += 1
            fields = (row["arm"], bool(row.get("eager")), bool(row.get("speculate")))
            assert fields == (label.arm, label.eager, label.speculate), (name, row["job_id"])
            assert job_label(row) == label
            assert detector == ("" if row["detector"] == "schema_sound" else row["detector"])
    assert jobs > 1000


def test_a_bench_plan_and_a_batch_of_your_tasks_refuse_an_unknown_label(tmp_path: Path) -> None:
    from harness.bench.runner import BenchPlan
    from harness.runs.batch import UserBatchPlan

    with pytest.raises(ConfigError, match=r"'F\+speculate'.*F\+spec, P, P\+V"):
        BenchPlan(out=tmp_path, arms=("S", "F+speculate"))
    with pytest.raises(ConfigError, match=r"'G'"):
        BenchPlan(out=tmp_path, model_arms=("G",))
    with pytest.raises(ConfigError, match=r"'S\+eager'"):
        UserBatchPlan(out=tmp_path, tasks_file=None, toolset="t:t", arms=("S+eager",))
    assert BenchPlan(out=tmp_path).arms == ARM_LABEL_NAMES
