"""Where the engine's model threads run: the machine-aware default, the overrides, and the
binding applied in a forked worker (nothing here starts vLLM; a fake ``/sys`` tree stands in
for the machine)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from harness.engines import _threads
from harness.engines._threads import ThreadPlan, bind_this_process, parse_cpus, plan_threads
from harness.engines.vllm import VLLMSettings
from harness.errors import ConfigError


def _machine(tmp_path: Path, cpus: dict[int, tuple[int, int, int]]) -> Path:
    """A ``/sys/devices/system/cpu`` tree: cpu id -> (NUMA node, package, core)."""
    for cpu, (node, package, core) in cpus.items():
        base = tmp_path / f"cpu{cpu}"
        (base / "topology").mkdir(parents=True)
        (base / f"node{node}").mkdir()
        (base / "topology" / "physical_package_id").write_text(f"{package}\n")
        (base / "topology" / "core_id").write_text(f"{core}\n")
    return tmp_path


def test_two_cores_run_the_model_on_one_thread_and_keep_the_other_core_for_the_front_end(
    tmp_path: Path,
) -> None:
    sys_cpu = _machine(tmp_path, {0: (0, 0, 0), 1: (0, 0, 1)})
    plan = plan_threads(None, environ={}, allowed=[0, 1], sys_cpu=sys_cpu)
    assert (plan.cpus, plan.reserved, plan.source) == ((0,), (1,), "default")
    assert plan.bind == "0"
    assert "kept for the front end" in plan.reason


def test_sixteen_hyperthreaded_cpus_get_one_thread_per_physical_core_but_the_last(
    tmp_path: Path,
) -> None:
    # 8 cores, siblings i and i+8 (Linux's usual numbering); vLLM picks the last sibling.
    sys_cpu = _machine(tmp_path, {cpu: (0, 0, cpu % 8) for cpu in range(16)})
    plan = plan_threads(None, environ={}, allowed=range(16), sys_cpu=sys_cpu)
    assert plan.cpus == tuple(range(8, 15))
    assert plan.reserved == (15,)
    assert plan.threads == 7


def test_only_the_first_numa_node_is_used_by_default(tmp_path: Path) -> None:
    sys_cpu = _machine(tmp_path, {c: (c // 4, c // 4, c % 4) for c in range(8)})
    plan = plan_threads(None, environ={}, allowed=range(8), sys_cpu=sys_cpu)
    assert plan.cpus == (0, 1, 2)
    assert plan.reserved == (3,)


def test_one_core_is_shared_by_the_model_and_the_front_end(tmp_path: Path) -> None:
    sys_cpu = _machine(tmp_path, {3: (0, 0, 0)})
    plan = plan_threads(None, environ={}, allowed=[3], sys_cpu=sys_cpu)
    assert (plan.cpus, plan.reserved) == ((3,), ())


def test_a_setting_wins_over_the_environment_and_the_environment_over_the_default(
    tmp_path: Path,
) -> None:
    sys_cpu = _machine(tmp_path, {0: (0, 0, 0), 1: (0, 0, 1)})
    env = {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}
    from_env = plan_threads(None, environ=env, allowed=[0, 1], sys_cpu=sys_cpu)
    assert (from_env.cpus, from_env.source) == ((0, 1), "environment")
    from_setting = plan_threads("1", environ=env, allowed=[0, 1], sys_cpu=sys_cpu)
    assert (from_setting.cpus, from_setting.reserved, from_setting.source) == (
        (1,),
        (0,),
        "setting",
    )
    unbound = plan_threads("nobind", environ=env, allowed=[0, 1], sys_cpu=sys_cpu)
    assert (unbound.cpus, unbound.threads, unbound.bind) == ((), None, "nobind")


def test_cpu_lists_parse_ranges_and_reject_what_is_not_one() -> None:
    assert parse_cpus("0-2,5, 7") == (0, 1, 2, 5, 7)
    with pytest.raises(ValueError, match="not a CPU list"):
        parse_cpus("zero")
    with pytest.raises(ValueError, match=r"CPUs \[9\] are not among"):
        plan_threads("0,9", environ={}, allowed=[0, 1])


def test_a_bad_threads_bind_setting_is_a_config_error_naming_the_fix() -> None:
    with pytest.raises(ConfigError, match="'auto' or 'nobind'"):
        VLLMSettings(threads_bind="fast").thread_plan()


def test_the_environment_the_engine_sets_names_the_planned_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    settings = VLLMSettings(threads_bind="0")
    assert settings.environment()["VLLM_CPU_OMP_THREADS_BIND"] == "0"


def test_binding_a_forked_worker_sets_its_affinity_and_thread_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[object] = []
    monkeypatch.setattr(_threads.os, "sched_setaffinity", lambda pid, cpus: calls.append(cpus))
    fake_torch = types.SimpleNamespace(set_num_threads=lambda n: calls.append(n))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    bind_this_process(ThreadPlan((2, 3), (4,), "setting", "as asked"))
    assert calls == [(2, 3), 2]
    calls.clear()
    bind_this_process(ThreadPlan((), (), "setting", "not bound"))
    assert calls == []
