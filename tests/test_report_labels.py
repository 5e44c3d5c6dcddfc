"""Every report label is true: measured, declared and default kept apart (report.md's tables,
summary.json, regime.json); BFCL successes counted as solved; a re-report reads the run's own
plan.json."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from harness._commands.cli import main
from harness.bench.report_facts import DEFAULT, regime_name

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def _bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Path:
    out = tmp_path / "run"
    args = [
        "bench", "--engine", "scripted", "--out", str(out), "--tasks", "fan_out-06",
        "--bfcl", "0", "0", "--latency", "0", "--no-heuristic", *extra,
    ]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["harness", *args])
    assert main(args) == 0
    return out


def _regime_rows(report: str) -> dict[str, str]:
    section = report.split("## Regime: measured or declared", 1)[1].split("\n\n", 2)[1]
    rows = [line.split(" | ") for line in section.splitlines()[2:]]
    return {cells[0].strip("| "): cells[2].strip("| ") for cells in rows}


def test_a_run_with_no_gold_S_job_labels_the_timings_default_never_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _bench(tmp_path, monkeypatch, "--arms", "F", "--policy", "gold")
    report = (out / "report.md").read_text()
    sources = _regime_rows(report)
    for name in ("prefill_ms_per_token", "decode_ms_per_token", "overhead_s", "prefix_tokens"):
        assert sources[name] == DEFAULT, (name, sources)
    assert sources["watts"] == "declared"
    assert "measured" not in {sources[k] for k in ("prefill_ms_per_token", "overhead_s")}
    assert "Frontier at the nominal regime" in report
    assert "closed form at the measured regime" not in report
    on_disk = json.loads((out / "regime.json").read_text())
    assert on_disk["source"]["decode_ms_per_token"] == DEFAULT


def test_a_gold_S_job_that_times_nothing_leaves_only_the_timings_at_their_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scripted engine of the command line takes no time: its turns measure tokens, not
    # seconds per token.
    out = _bench(tmp_path, monkeypatch, "--arms", "S", "F", "--policy", "gold")
    report = (out / "report.md").read_text()
    sources = _regime_rows(report)
    assert sources["prefix_tokens"] == sources["windows_per_task"] == "measured"
    assert sources["prefill_ms_per_token"] == DEFAULT
    assert sources["gap_pp"] == "declared"
    named = "this run's regime (prefill_ms_per_token, decode_ms_per_token, overhead_s at their"
    assert f"Frontier at {named}" in report
    assert f"closed form at {named}" in report


def test_the_regime_name_says_which_defaults_stood_in() -> None:
    everything = {"prefill_ms_per_token": "measured", "watts": "declared"}
    assert regime_name(everything) == "the measured regime"
    some = {**everything, "stride_hit": DEFAULT}
    assert regime_name(some) == "this run's regime (stride_hit at their defaults: not measured)"


def test_regime_json_holds_the_measured_g_and_phi_the_report_shows() -> None:
    regime = json.loads((RESULTS / "full" / "regime.json").read_text())
    assert regime["gap_pp"] == pytest.approx(43.75)
    assert regime["source"]["gap_pp"].startswith("measured")
    assert regime["false_fill_rate"] == pytest.approx(20 / 35)
    assert regime["source"]["false_fill_rate"].startswith("measured")
    assert regime["source"]["watts"] == "declared"


@pytest.mark.parametrize("run", ["oracle", "feasible", "lookup"])
def test_no_committed_report_labels_a_default_measured(run: str) -> None:
    report = (RESULTS / run / "report.md").read_text()
    sources = _regime_rows(report)
    assert sources["prefill_ms_per_token"] == DEFAULT
    assert "at the measured regime" not in report
    regime = json.loads((RESULTS / run / "regime.json").read_text())
    assert regime["source"]["decode_ms_per_token"] == DEFAULT


def test_bfcl_entries_scored_correct_are_solved_in_the_outcome_table() -> None:
    report = (RESULTS / "full" / "report.md").read_text()
    assert "| model | 16 | 336 | 0 | 0 |" in report  # the 16 correct BFCL entries R4 counts
    summary = json.loads((RESULTS / "full" / "summary.json").read_text())
    scored = sum(n for key, (n, _) in summary["bfcl"].items())
    assert summary["facts"]["outcomes"]["model"]["solved"] == scored == 16


def test_a_re_report_without_the_old_summary_reads_the_loop_count_from_plan_json(
    tmp_path: Path,
) -> None:
    run = tmp_path / "full"
    shutil.copytree(RESULTS / "full", run)
    before = json.loads((run / "summary.json").read_text())["verdicts"]
    (run / "summary.json").unlink()
    main(["bench", "--report-only", str(run)])
    after = json.loads((run / "summary.json").read_text())["verdicts"]
    r1 = next(v for v in after if v["name"] == "R1")
    assert r1["held"] is None  # not judged: 8 loops shared the engine (plan.json's concurrency)
    assert "8 loops shared the engine" in r1["summary"]
    assert [v["held"] for v in after] == [v["held"] for v in before]


@pytest.mark.parametrize("run", ["full", "oracle", "feasible", "lookup"])
def test_every_committed_report_regenerates_byte_for_byte(run: str, tmp_path: Path) -> None:
    # The committed reports were written with the plot extra (their plots section) and the
    # BFCL data (their data quirks): without either a report is rightly shorter.
    pytest.importorskip("matplotlib", reason="the committed reports have plots (the plot extra)")
    pytest.importorskip("bfcl_eval", reason="the committed reports quote the BFCL data's quirks")
    copy = tmp_path / run
    shutil.copytree(RESULTS / run, copy)
    main(["bench", "--report-only", str(copy)])
    for name in ("report.md", "summary.json", "regime.json"):
        assert (copy / name).read_text() == (RESULTS / run / name).read_text(), name


def test_plots_list_only_the_arms_that_ran_and_rotate_long_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from harness.bench import report
    from harness.costmodel import Regime

    seen: dict[str, Any] = {}

    def record(self: Figure, path: Any, *args: Any, **kwargs: Any) -> None:
        ax = self.axes[0]
        legend = ax.get_legend()
        seen[Path(path).name] = {
            "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
            "rotation": {t.get_rotation() for t in ax.get_xticklabels()},
        }

    monkeypatch.setattr(Figure, "savefig", record)
    summary = {
        "per_n": [{"n": 6, "measured": {"S": 9.0, "F": 7.0}}],
        "tokens_by_arm": {"fan_out": {"S": 100.0, "F": 90.0}, "chain": {"S": 80.0, "F": 80.0}},
        "accuracy": {"gold": {"S": [1, 1], "F": [1, 1]}, "model": {"F/phase_heuristic": [0, 1]}},
    }
    names = report._plots(summary, Regime(), tmp_path)
    assert names == ["wall_vs_n.png", "tokens.png", "accuracy.png"]
    assert seen["tokens.png"]["legend"] == ["S", "F"]
    assert seen["wall_vs_n.png"]["legend"] == [
        "S closed form", "F closed form", "S measured", "F measured"
    ]  # fmt: skip
    assert seen["accuracy.png"]["rotation"] == {45.0}
