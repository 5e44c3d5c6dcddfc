"""The `harness run` and `harness bench` commands, on the scripted engine (no model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness._commands.cli import main


def test_harness_run_compares_arms_on_the_scripted_engine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(
            [
                "run",
                "--task",
                "fan_out-02",
                "--engine",
                "scripted",
                "--latency",
                "0",
                "--arm",
                "S",
                "F",
                "P",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "expected windows [4]" in out
    rows = [
        line.split() for line in out.splitlines() if line.strip().startswith(("S ", "F ", "P "))
    ]
    assert [r[0] for r in rows] == ["S", "F", "P"]
    assert all(r[-1] == "yes" for r in rows)


def test_harness_run_writes_a_trace_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    assert (
        main(
            [
                "run",
                "--task",
                "chain-00",
                "--engine",
                "scripted",
                "--latency",
                "0",
                "--arm",
                "F",
                "--trace",
                str(trace),
                "--json",
            ]
        )
        == 0
    )
    jobs = json.loads(capsys.readouterr().out)
    assert jobs[0]["windows"] == []
    assert json.loads(trace.read_text().splitlines()[0])["task_id"] == "chain-00"


def test_harness_run_rejects_bad_input_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--task", "nope-99", "--engine", "scripted"]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert main(["run", "--task", "fan_out-00", "--engine", "scripted", "--policy", "model"]) == 2
    assert "gold" in capsys.readouterr().err


def test_harness_bench_runs_resumes_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = [
        "bench", "--engine", "scripted", "--out", str(tmp_path), "--tasks", "fan_out-06", "chain-00",
        "--arms", "S", "F", "--policy", "gold", "--model-arms", "S", "--bfcl", "0", "0", "--latency", "0",
    ]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["harness", *args])  # the command the plan records
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "R2:" in out
    assert (tmp_path / "report.md").exists()
    assert (
        len((tmp_path / "results.jsonl").read_text().splitlines()) == 6
    )  # 2 tasks × (S, F, F/heuristic)
    assert main(args) == 0
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 6
    before = (
        (tmp_path / "report.md").read_text(),
        json.loads((tmp_path / "summary.json").read_text()),
    )
    assert main(["bench", "--report-only", str(tmp_path)]) == 0
    # A re-report from results.jsonl is the report the run wrote: same text, same meta.
    assert (tmp_path / "report.md").read_text() == before[0]
    assert json.loads((tmp_path / "summary.json").read_text())["meta"] == before[1]["meta"]


def test_harness_bench_report_only_on_an_empty_directory_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--report-only", str(tmp_path)]) == 2
    assert "run `harness bench --out" in capsys.readouterr().err


def test_the_run_transcript_of_the_benchmark_page_is_what_the_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import re
    import shlex

    page = (Path(__file__).resolve().parents[1] / "docs" / "benchmark.md").read_text()
    command = "harness run --task fan_out-06 --engine scripted --latency 0"
    shown = page.split(f"$ {command}\n", 1)[1].split("```", 1)[0]
    assert main(shlex.split(command)[1:]) == 0
    printed = capsys.readouterr().out

    def masked(text: str) -> list[str]:  # the engine and wall seconds differ from run to run
        return [re.sub(r"\d+\.\d\d(\s+)(\d+\.\d\d)(\s+)(yes|NO)$", r"s\1s\3\4", line.rstrip())
                for line in text.strip().splitlines()]  # fmt: skip

    assert masked(printed) == masked(shown)
