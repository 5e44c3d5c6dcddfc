"""Drafted decoding on the real engine: the same tokens with and without the window proposer
(marked ``engine``; the full comparison is ``python -m benchmarks.draft_bench``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.draft_bench import _signature
from benchmarks.spec_bench import survey_task
from harness.bench.jobs import JobSpec, run_job
from harness.engines.vllm import VLLMEngine
from harness.toolsets.workspace import load_workspace_manifest

pytestmark = [pytest.mark.anyio, pytest.mark.engine, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
async def window_engine(smollm2_dir: Path) -> AsyncIterator[VLLMEngine]:
    engine = await VLLMEngine.start(smollm2_dir, speculate="window")
    try:
        yield engine
    finally:
        await engine.aclose()


@pytest.mark.parametrize(("label", "policy"), [("F", "gold"), ("P", "gold"), ("F", "model")])
async def test_the_window_proposer_generates_the_same_tokens_and_drafts_them(
    real_engine: VLLMEngine, window_engine: VLLMEngine, label: str, policy: str
) -> None:
    manifest = load_workspace_manifest()
    task = survey_task(3, 0)
    spec = JobSpec.from_label(label, policy=policy, latency_s=0.0, max_tokens=96)
    plain: dict[str, Any] = await run_job(real_engine, task, spec, manifest)
    before = window_engine.draft_stats
    drafted: dict[str, Any] = await run_job(window_engine, task, spec, manifest)
    stats = window_engine.draft_stats - before
    assert _signature(drafted) == _signature(plain)
    assert stats.drafts > 0
    assert stats.accepted_tokens > 0
    if policy == "gold":
        assert stats.tokens_per_step > 2.0  # the window's text is drafted, not generated
