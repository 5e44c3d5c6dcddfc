"""Claims about the KV cache's size (``--kv-cache-gib``): the per-token arithmetic, and a cache
too small for one request is a one-line usage error before vLLM starts, not its traceback."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness._commands.cli import main
from harness.engines.kv_cache import (
    GIB,
    check_fits,
    kv_bytes_per_token,
    min_kv_cache_bytes,
    model_kv_bytes,
)
from harness.engines.vllm import VLLMSettings
from harness.errors import ConfigError

#: The fields of SmolLM2-135M-Instruct's config.json that size its KV cache.
SMOLLM2 = {
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "hidden_size": 576,
    "dtype": "bfloat16",
}


@pytest.fixture
def smollm2_config(tmp_path: Path) -> Path:
    folder = tmp_path / "SmolLM2-135M-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(SMOLLM2))
    return folder


def test_one_token_of_smollm2_takes_23040_bytes_in_bf16_and_twice_in_float32() -> None:
    assert kv_bytes_per_token(SMOLLM2) == 2 * 30 * 3 * 64 * 2 == 23_040
    assert kv_bytes_per_token(SMOLLM2, "float32") == 46_080
    without_head_dim = {k: v for k, v in SMOLLM2.items() if k != "head_dim"}
    assert kv_bytes_per_token(without_head_dim) == 23_040  # hidden 576 / 9 heads


@pytest.mark.parametrize(
    "config",
    [
        {**SMOLLM2, "text_config": {}},
        {**SMOLLM2, "kv_lora_rank": 512},
        {**SMOLLM2, "sliding_window": 4096},
        {"hidden_size": 576},
    ],
)
def test_a_layout_the_arithmetic_does_not_know_is_not_guessed(config: dict[str, Any]) -> None:
    assert kv_bytes_per_token(config) is None


def test_the_smallest_cache_is_one_request_in_whole_blocks_plus_the_one_kept_back() -> None:
    assert min_kv_cache_bytes(23_040, 8192, 32) == 257 * 32 * 23_040
    assert min_kv_cache_bytes(100, 65, 32) == 4 * 32 * 100  # 3 blocks for 65 tokens, +1


def test_a_cache_of_one_request_fits_and_one_token_less_does_not(smollm2_config: Path) -> None:
    per_token = model_kv_bytes(smollm2_config)
    assert per_token == 23_040
    needed = min_kv_cache_bytes(per_token, 8192, 32)
    check_fits(smollm2_config, VLLMSettings(kv_cache_gib=needed / GIB))
    with pytest.raises(ConfigError, match=r"needs 8,224 .* give at least 0\.177 GiB"):
        check_fits(smollm2_config, VLLMSettings(kv_cache_gib=(needed - per_token) / GIB))
    # a shorter max_model_len needs less
    check_fits(smollm2_config, VLLMSettings(kv_cache_gib=0.1, max_model_len=4096))


def test_an_overridden_kv_cache_dtype_is_left_to_vllm(smollm2_config: Path) -> None:
    check_fits(smollm2_config, VLLMSettings(kv_cache_gib=0.1, extra={"kv_cache_dtype": "fp8"}))


@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_cache_too_small_for_one_request_is_a_one_line_usage_error(
    command: str, smollm2_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked before vLLM starts: the unit-test guard refuses a real start, so reaching vLLM
    would be a RuntimeError here, not exit 2."""
    argv = {
        "run": ["run", "--task", "fan_out-00", "--arm", "S"],
        "bench": ["bench", "--tasks", "fan_out-00", "--arms", "S", "--policy", "gold",
                  "--bfcl", "0", "0", "--no-heuristic", "--out", str(tmp_path / "out")],
    }[command]  # fmt: skip
    assert main([*argv, "--model", str(smollm2_config), "--kv-cache-gib", "0.1"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert "kv_cache_gib 0.1 (--kv-cache-gib) holds 4,660 tokens" in errors[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("value", ["0", "-1", "lots"])
def test_a_cache_size_that_is_not_a_positive_number_is_refused_by_the_parser(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["run", "--task", "fan_out-00", "--kv-cache-gib", value])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "argument --kv-cache-gib" in err
    assert err.count("\n") == 1, err


def test_run_passes_the_cache_size_to_the_engine_and_leaves_the_default_alone(
    opened_with: list[dict[str, Any]],
) -> None:
    assert main(["run", "--task", "fan_out-00", "--arm", "S", "--kv-cache-gib", "0.5"]) == 0
    assert main(["run", "--task", "fan_out-00", "--arm", "S"]) == 0
    assert opened_with[0]["kv_cache_gib"] == 0.5
    assert "kv_cache_gib" not in opened_with[1]


def test_serve_passes_the_cache_size_to_its_embedded_engine(
    opened_with: list[dict[str, Any]],
) -> None:
    from harness._commands.serve import _engine

    async def open_once(args: argparse.Namespace) -> None:
        async with _engine(args, None):
            pass

    args = argparse.Namespace(upstream=None, drafting="none", model=None, kv_cache_gib=0.25)
    anyio.run(open_once, args)
    assert opened_with == [{"kv_cache_gib": 0.25}]
    upstream = argparse.Namespace(
        upstream=["http://127.0.0.1:1/v1"], drafting="none", model=None, kv_cache_gib=0.25
    )
    with pytest.raises(ConfigError, match="an --upstream server sizes its own"):
        anyio.run(open_once, upstream)


def test_ray_workers_open_their_engines_with_the_cache_size() -> None:
    from harness._commands._engine_args import EngineOptions

    options = EngineOptions.from_args(argparse.Namespace(engine="vllm", kv_cache_gib=0.5))
    assert options.kv_cache_gib == 0.5


@pytest.mark.engine
@pytest.mark.anyio
# vLLM's failed start leaves its ZMQ context to the garbage collector, which warns
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_vllms_own_refusal_becomes_the_same_usage_error(tiny_model_dir: Path) -> None:
    """``VLLMEngine.start`` called directly (no pre-check): vLLM fails to start, and the error
    is the ConfigError that names the size, not vLLM's RuntimeError."""
    from harness.engines.vllm import VLLMEngine
    from tests.engine_support import TINY_SETTINGS

    per_token = model_kv_bytes(tiny_model_dir)
    assert per_token is not None
    needed = min_kv_cache_bytes(per_token, TINY_SETTINGS["max_model_len"], 32)
    with pytest.raises(ConfigError, match="give at least"):
        await VLLMEngine.start(
            tiny_model_dir, **{**TINY_SETTINGS, "kv_cache_gib": (needed - 64 * per_token) / GIB}
        )
