"""Claims about the conftest guard: unit tests cannot start the real engine by accident."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

vllm_engine = pytest.importorskip("harness.engines.vllm")

GUARD = "mark it @pytest.mark.engine"


@pytest.mark.anyio
async def test_starting_the_engine_in_a_unit_test_raises():
    with pytest.raises(RuntimeError, match=GUARD):
        await vllm_engine.VLLMEngine.start("/nonexistent/model")


@pytest.mark.anyio
async def test_opening_the_default_engine_in_a_unit_test_raises(tmp_path):
    with pytest.raises(RuntimeError, match=GUARD):
        async with vllm_engine.open_default_engine(tmp_path):
            pass


def test_constructing_the_engine_around_a_real_vllm_object_raises():
    real_looking = type("AsyncLLM", (), {"__module__": "vllm.v1.engine.async_llm"})()
    with pytest.raises(RuntimeError, match=GUARD):
        vllm_engine.VLLMEngine(real_looking, Path("m"), None, None)


def test_constructing_the_engine_around_a_fake_is_allowed():
    fake = types.SimpleNamespace(get_tokenizer=lambda: None)
    engine = vllm_engine.VLLMEngine(fake, Path("m"), vllm_engine.VLLMSettings(), None)
    assert engine.name == "vllm:m"
