"""``harness bench --ray``: jobs on a local Ray cluster give the local run's results, and a
worker killed mid-job is resumed by another from the job's journal without repeating a write.

One local cluster (2 CPUs, no dashboard) is started for the module and stopped after it; every
test uses the scripted engine. Deselect with ``-m "not ray"``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

ray = pytest.importorskip("ray", reason="the ray extra: pip install 'agent-harness[ray]'")

from harness._jsonl import read_jsonl  # noqa: E402
from harness.bench.runner import BenchJobRunner, BenchPlan, run_bench  # noqa: E402
from harness.runs.ray_pool import RayPool, connect, job_directory, read_attempts  # noqa: E402
from harness.runs.resume import load_results  # noqa: E402
from harness.testing import ScriptedEngine  # noqa: E402
from harness.toolsets.workspace.durable import DurableStore  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

#: Fields that measure time, and fields that depend on what else the engine served before
#: (its prefix cache): they differ between two local runs at other concurrencies too.
TIMING = ("started", "finished")
ENGINE_STATE = ("cached_tokens", "billed_tokens")


def comparable(value: Any) -> Any:
    """``value`` without timing fields, engine-cache fields and the journal's own report
    (``summary.extra.journal``: where the job's journal was, how often it was resumed)."""
    if isinstance(value, dict):
        return {
            k: comparable(v)
            for k, v in value.items()
            if not (
                k.endswith(("_s", "_ms"))
                or (k in TIMING and isinstance(v, float))
                or k in ENGINE_STATE
                or k == "journal"
            )
        }
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


@pytest.fixture(scope="module")
def cluster() -> Any:
    assert connect("auto", num_cpus=2), "a Ray connection was already open"
    yield ray
    ray.shutdown()


def _plan(out: Path, tasks: tuple[str, ...], arms: tuple[str, ...], **kw: Any) -> BenchPlan:
    return BenchPlan(
        out=out, task_ids=tasks, arms=arms, policies=("gold",), heuristic=False,
        bfcl_simple=0, bfcl_parallel=0, engine_label="scripted", **kw,
    )  # fmt: skip


async def _local(plan: BenchPlan) -> list[dict[str, Any]]:
    async with ScriptedEngine() as engine:
        await run_bench(engine, plan, scripted=True)
    return load_results(plan.out / "results.jsonl")


def _by_id(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    return {j["job_id"]: comparable(j) for j in jobs}


def test_a_bench_slice_on_two_ray_workers_gives_the_results_of_a_local_run(
    cluster: Any, tmp_path: Path
) -> None:
    tasks = ("fan_out-05", "chain-01", "mixed-02", "mixed-03")
    local = _plan(tmp_path / "local", tasks, ("S", "F", "P+V"), latency_s=0.05, concurrency=2)
    on_ray = _plan(tmp_path / "ray", tasks, ("S", "F", "P+V"), latency_s=0.05, concurrency=2)

    async def go() -> dict[str, Any]:
        async with RayPool(
            ScriptedEngine, BenchJobRunner(on_ray), tmp_path / "journals", concurrency=2, workers=2
        ) as pool:
            summary = await run_bench(None, on_ray, scripted=True, executor=pool)
            return {"summary": summary, "pool": pool.describe()}

    ran = anyio.run(go)
    expected = _by_id(anyio.run(_local, local))
    got = _by_id(load_results(on_ray.out / "results.jsonl"))
    assert len(expected) == 12
    assert got == expected
    pids = {a["pid"] for j in got for a in read_attempts(job_directory(tmp_path / "journals", j))}
    assert len(pids) == 2, "the jobs ran on both workers"
    assert {w["pid"] for w in ran["pool"]["workers"]} == pids
    summary = json.loads((on_ray.out / "summary.json").read_text())
    assert summary["meta"]["executor"]["jobs_resumed_after_lost_worker"] == {}
    assert "Ran on Ray: 2 worker(s)" in (on_ray.out / "report.md").read_text()
    local_summary = json.loads((local.out / "summary.json").read_text())
    assert [v["name"] for v in summary["verdicts"]] == [
        v["name"] for v in local_summary["verdicts"]
    ]
    assert summary["jobs"] == local_summary["jobs"]


def test_a_worker_killed_mid_job_is_resumed_by_another_without_repeating_a_write(
    cluster: Any, tmp_path: Path
) -> None:
    # mixed-06 under S: three reads, then three append_note calls (not idempotent), 0.4 s each.
    tasks = ("mixed-06", "chain-01")
    on_ray = _plan(tmp_path / "ray", tasks, ("S",), latency_s=0.4, concurrency=1)
    journals = tmp_path / "journals"
    victim = job_directory(journals, "mixed-06|S|gold")
    killed: list[int] = []

    async def kill_after_first_write() -> None:
        journal = victim / "journal" / "journal.jsonl"
        while True:
            await anyio.sleep(0.05)
            entries = read_jsonl(journal)[0] if journal.exists() else []
            if any(e["kind"] == "outcome" and e.get("tool") == "append_note" for e in entries):
                assert not any(e["kind"] == "end" for e in entries), "the job ended before the kill"
                pid = read_attempts(victim)[0]["pid"]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return

    async def go() -> dict[str, Any]:
        async with RayPool(
            ScriptedEngine, BenchJobRunner(on_ray), journals, concurrency=1, workers=2
        ) as pool:
            async with anyio.create_task_group() as tg:
                tg.start_soon(kill_after_first_write)
                await run_bench(None, on_ray, scripted=True, executor=pool)
            return pool.describe()

    started = time.monotonic()
    described = anyio.run(go)
    assert killed, f"no write was journaled in {time.monotonic() - started:.1f} s"
    attempts = read_attempts(victim)
    assert len(attempts) == 2, attempts
    assert attempts[0]["pid"] == killed[0]
    assert attempts[1]["pid"] != killed[0], "resumed in another worker process"
    assert described["jobs_resumed_after_lost_worker"] == {"mixed-06|S|gold": 1}
    entries, _ = read_jsonl(victim / "journal" / "journal.jsonl")
    assert [e["kind"] for e in entries].count("resume") == 1
    # The store's application log: every write took effect once.
    store = DurableStore(victim / "store.sqlite3")
    try:
        effective = [w for w, _, took in store.applications() if took]
    finally:
        store.close()
    assert len(effective) == 3, effective
    assert len(set(effective)) == 3, effective
    assert all(w.startswith("append_note(") for w in effective)
    # ...and the job's result is the one a local run gives.
    expected = _by_id(anyio.run(_local, _plan(tmp_path / "local", tasks, ("S",), latency_s=0.4)))
    got = _by_id(load_results(on_ray.out / "results.jsonl"))
    assert got == expected
    assert got["mixed-06|S|gold"]["success"]


def test_a_batch_of_your_own_tasks_on_ray_gives_the_results_of_a_local_batch(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness._commands.cli import main
    from tests.test_user_tasks import MANIFEST_TOML, batch, write_tasks

    manifest = tmp_path / "skills.toml"
    manifest.write_text(MANIFEST_TOML)
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4)
    assert main(batch(manifest, tasks, tmp_path / "local", "--concurrency", "2")) == 0
    on_ray = ["--concurrency", "2", "--ray", "auto", "--ray-workers", "2"]
    assert main(batch(manifest, tasks, tmp_path / "ray", *on_ray)) == 0
    assert "8 run now, 0 kept from before" in capsys.readouterr().out
    expected = _by_id(load_results(tmp_path / "local" / "results.jsonl"))
    got = _by_id(load_results(tmp_path / "ray" / "results.jsonl"))
    assert len(got) == 8
    assert got == expected
    journals = tmp_path / "ray" / "ray-jobs"
    pids = {a["pid"] for j in got for a in read_attempts(job_directory(journals, j))}
    assert len(pids) == 2, "the jobs ran on both workers"
    assert all((job_directory(journals, j) / "journal" / "journal.jsonl").exists() for j in got)
