"""Drafted decoding on the real engine: the same tokens with and without the window proposer
(marked ``engine``; the full comparison is ``python -m benchmarks.draft_bench``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.draft_bench import _signature
from benchmarks.draft_ties import recording, score_partings
from benchmarks.spec_bench import survey_task
from harness.bench.jobs import run_job
from harness.bench.runner import select_tasks
from harness.bench.workload import WorkloadTask, workload_tasks
from harness.engines.vllm import VLLMEngine
from harness.runs.jobs import JobSpec
from harness.toolsets.workspace import load_workspace_manifest

pytestmark = [pytest.mark.anyio, pytest.mark.engine, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
async def window_engine(smollm2_dir: Path) -> AsyncIterator[VLLMEngine]:
    # Drafting at any load: the comparison must exercise the drafts.
    engine = await VLLMEngine.start(smollm2_dir, drafting="window", draft_max_batch=0)
    try:
        yield engine
    finally:
        await engine.aclose()


def _task(name: str) -> WorkloadTask:
    if name.startswith("survey-"):
        return survey_task(int(name.removeprefix("survey-")), 0)
    return select_tasks(workload_tasks(0), [name])[0]


# A few tasks of the full comparison (python -m benchmarks.draft_bench --workload all
# --policies gold oracle, committed under benchmarks/results/draft/lossless-all/): a fan-out
# window under F and P, the model choosing, a chain under the oracle, a mixed task.
#
# Lossless means: every generation emits the undrafted engine's tokens, or the two part at a
# numerical tie — two candidates whose raw logits are within 2 bfloat16 steps, where the
# verification pass's rounding can swap them (benchmarks.draft_ties scores it). Ties are not
# reproducible from run to run: two *undrafted* engines part as often (ties-all-control), so
# the test scores each parting instead of expecting one run's exact tokens.
@pytest.mark.parametrize(
    ("name", "label", "policy"),
    [
        ("survey-3", "F", "gold"),
        ("survey-3", "P", "gold"),
        ("survey-3", "F", "model"),
        ("chain-00", "F", "oracle"),
        ("mixed-00", "F", "gold"),
    ],
)
async def test_the_window_proposer_generates_the_same_tokens_and_drafts_them(
    real_engine: VLLMEngine, window_engine: VLLMEngine, name: str, label: str, policy: str
) -> None:
    manifest = load_workspace_manifest()
    task = _task(name)
    spec = JobSpec.from_label(label, policy=policy, latency_s=0.0, max_tokens=96)
    with recording(real_engine) as undrafted:
        plain: dict[str, Any] = await run_job(real_engine, task, spec, manifest)
    before = window_engine.draft_stats
    with recording(window_engine) as drafted_runs:
        drafted: dict[str, Any] = await run_job(window_engine, task, spec, manifest)
    stats = window_engine.draft_stats - before
    partings, same = await score_partings(real_engine, undrafted, drafted_runs)
    assert [p for p in partings if p["verdict"] != "tie"] == [], "a parting that is no tie"
    assert same >= 1  # generations were compared token by token
    assert all(t["token_digest"] for t in drafted["turns"])  # token ids compared, not counts
    if not partings:
        assert same == len(drafted_runs)
        assert _signature(drafted) == _signature(plain)
    assert stats.drafts > 0
    assert stats.accepted_tokens > 0
    if policy == "gold" and name.startswith("survey-"):
        assert stats.tokens_per_step > 2.0  # the window's text is drafted, not generated
