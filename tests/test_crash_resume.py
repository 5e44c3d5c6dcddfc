"""The fault-injection benchmark on a few runs: SIGKILLed runs resume to the clean run's store."""

from __future__ import annotations

from pathlib import Path

from benchmarks.crash_resume import run_benchmark


def test_killed_runs_resume_to_the_clean_store_with_no_repeated_or_lost_write(tmp_path: Path):
    figures = run_benchmark(8, seed=3, out=tmp_path)
    assert figures["errors"] == 0, figures["failed_runs"]
    assert figures["runs"] == figures["kills"] == figures["resumed"] == 8
    keyed = figures["by_toolset"]["keyed"]
    assert keyed["repeated_writes"] == keyed["lost_writes"] == keyed["state_mismatches"] == 0
    assert keyed["outcome_unknown"] == 0
    assert figures["unexplained"] == 0
    assert (tmp_path / "runs.jsonl").exists()


def test_killed_resumes_against_a_ground_truth_file_repeat_no_write_and_explain_each_lost_one(
    tmp_path: Path,
):
    figures = run_benchmark(10, seed=1, out=tmp_path, ground_truth="file")
    assert figures["errors"] == 0, figures["failed_runs"]
    assert figures["runs"] == figures["kills"] == figures["resumed"] == 10
    assert figures["resume_kills"] > 0  # resumes were killed too, and resumed again
    assert figures["repeated_writes"] == 0
    assert figures["lost_writes"] == figures["explained_lost"]  # each by its own unknown call
    assert figures["unexplained"] == 0
    keyed = figures["by_toolset"]["keyed"]
    assert keyed["lost_writes"] == keyed["state_mismatches"] == keyed["outcome_unknown"] == 0
    assert all((tmp_path / f"run-{i:04d}").exists() for i in range(10))
