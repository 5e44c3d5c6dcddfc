"""The context-bound oracle on the real engine: forced through vLLM's constrained decoding like
gold, the same tokens where it sees what gold needs, a failed task under a false fill."""

from __future__ import annotations

from typing import Any

import pytest

from harness.bench.jobs import run_job
from harness.bench.workload import generate_tasks, task_by_id
from harness.runs.jobs import JobSpec
from harness.toolsets.workspace import load_workspace_manifest

pytestmark = [pytest.mark.anyio, pytest.mark.engine, pytest.mark.timeout(600)]

TASK = task_by_id(generate_tasks(0), "chain-00")  # follow: two reads, then the title
MANIFEST = load_workspace_manifest()


async def _job(engine: Any, policy: str, detector: str) -> dict[str, Any]:
    spec = JobSpec(arm="F", policy=policy, detector=detector, latency_s=0.0)  # type: ignore[arg-type]
    return await run_job(engine, TASK, spec, MANIFEST)


def _replies(job: dict[str, Any]) -> list[tuple[int, int]]:
    return [(t["prompt_tokens"], t["completion_tokens"]) for t in job["turns"]]


async def test_on_vllm_the_oracle_decodes_golds_tokens_and_a_false_fill_costs_it_the_task(
    real_engine: Any,
) -> None:
    gold = await _job(real_engine, "gold", "schema_sound")
    oracle = await _job(real_engine, "oracle", "schema_sound")
    assert gold["success"], gold["failures"]
    assert oracle["success"], oracle["failures"]
    assert _replies(oracle) == _replies(gold)  # token for token: prompts and replies
    assert oracle["answer"] == gold["answer"] == TASK.task.gold_answer

    gold_h = await _job(real_engine, "gold", "phase_heuristic")
    oracle_h = await _job(real_engine, "oracle", "phase_heuristic")
    assert gold_h["success"]  # gold forces what it could not have seen
    assert not oracle_h["success"]
    assert any(w["false_fill"] for w in oracle_h["windows"])
    assert oracle_h["answer"] == "unknown"
