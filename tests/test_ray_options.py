"""``--ray`` and its options without a cluster: what is refused, and the message without Ray."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness._commands.cli import main
from harness.errors import ConfigError
from harness.runs.ray_pool import job_directory, require_ray


def test_without_ray_installed_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'agent-harness\[ray\]'"):
        require_ray()


def test_bench_with_ray_but_without_ray_installed_exits_2_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    argv = ["bench", "--quick", "--engine", "scripted", "--out", str(tmp_path), "--ray", "auto"]
    assert main(argv) == 2
    assert "agent-harness[ray]" in capsys.readouterr().err
    assert not (tmp_path / "results.jsonl").exists()


@pytest.mark.parametrize(
    ("option", "value"), [("--ray-workers", "2"), ("--ray-cpus", "2"), ("--ray-journal", "j")]
)
def test_a_ray_option_without_ray_is_refused(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--quick", "--engine", "scripted", "--out", str(tmp_path), option, value]
    assert main(argv) == 2
    assert f"{option} only apply with --ray" in capsys.readouterr().err


def test_ray_workers_must_be_at_least_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--quick", "--engine", "scripted", "--out", str(tmp_path), "--ray", "auto"]
    assert main([*argv, "--ray-workers", "0"]) == 2
    assert "--ray-workers must be at least 1" in capsys.readouterr().err


def test_job_directories_are_safe_names_and_distinct_for_ids_that_clean_up_alike() -> None:
    a = job_directory(Path("j"), "mixed-06|F+eager|gold")
    b = job_directory(Path("j"), "mixed-06|F_eager|gold")
    assert a.parent == Path("j")
    assert a.name.startswith("mixed-06_F_eager_gold-")
    assert a != b


def test_run_with_ray_needs_a_batch_of_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--task", "chain-00", "--engine", "scripted", "--ray", "auto"]
    assert main(argv) == 2
    assert "--ray runs a batch of tasks on a cluster: use it with --tasks FILE" in (
        capsys.readouterr().err
    )
