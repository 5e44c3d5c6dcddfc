"""The easy_fan_out and easy_lookup families and the manifest-guided levers (scripted engine)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness._commands.cli import main
from harness.bench.jobs import run_job
from harness.bench.report_family import family_accuracy, validator_by_family
from harness.bench.runner import BenchPlan, plan_jobs, select_tasks
from harness.bench.workload import (
    FAMILIES,
    generate_family,
    generate_tasks,
    task_by_id,
    tasks_from_json,
    tasks_to_json,
    workload_tasks,
)
from harness.errors import ConfigError
from harness.loop import LoopConfig, run_loop
from harness.loop.levers import open_slot_count, open_slot_specs
from harness.messages import ToolCall
from harness.runs.jobs import JobSpec
from harness.runs.resume import check_plan
from harness.testing import ScriptedEngine
from harness.toolsets.workspace import load_workspace_manifest

FAMILY = generate_family("easy_fan_out")
LOOKUP = generate_family("easy_lookup")
MANIFEST = load_workspace_manifest()
LABELS = ("S", "F", "F+eager", "P", "P+V")
#: sha256 of tasks_to_json(generate_tasks(0)) before the family existed: the 48 are unchanged.
PAPER_TASKS_SHA256 = "89da9db1284b27e1487733d78265c8d0fe94ca78ae68cfa542325ff992eaa469"
#: ... and of the family's, as the committed run (benchmarks/results/feasible) measured it.
FAMILY_SHA256 = "2251bb330cd7050d3095714151ae536696d0fd49eedb04affeb4ad0a5b7c8e29"
#: ... and easy_lookup's, as benchmarks/results/lookup measured it.
LOOKUP_SHA256 = "faf25a3f275246564d23e13eb848f91c688bcb5c9221b8341c35e074db0e76fe"


def _enum(spec: dict[str, Any], argument: str) -> Any:
    return spec.get("function", spec)["parameters"]["properties"][argument].get("enum")


def test_the_family_is_sixteen_small_fan_out_windows_with_their_own_ids_seeds_and_skills() -> None:
    assert [t.id for t in FAMILY] == [f"easy_fan_out-{i:02d}" for i in range(16)]
    assert all(t.kind == "easy_fan_out" and len(t.windows) == 1 for t in FAMILY)
    assert {t.windows[0] for t in FAMILY} == {2, 3, 4}
    paper_seeds = {t.state_seed for t in generate_tasks(0)}
    assert not paper_seeds & {t.state_seed for t in FAMILY}
    assert {t.skill for t in FAMILY} <= set(MANIFEST.skills)
    assert tasks_to_json(generate_family("easy_fan_out", 0)) == tasks_to_json(FAMILY)
    assert tasks_from_json(tasks_to_json(FAMILY)) == FAMILY
    assert hashlib.sha256(tasks_to_json(FAMILY).encode()).hexdigest() == FAMILY_SHA256
    assert FAMILIES == ("easy_fan_out", "easy_lookup")


def test_the_lookup_family_asks_for_one_of_n_different_owners_at_every_position() -> None:
    assert [t.id for t in LOOKUP] == [f"easy_lookup-{i:02d}" for i in range(16)]
    assert all(t.kind == "easy_lookup" and t.skill == "easy_lookup" for t in LOOKUP)
    assert {t.windows[0] for t in LOOKUP} == {2, 3, 4}
    assert hashlib.sha256(tasks_to_json(LOOKUP).encode()).hexdigest() == LOOKUP_SHA256
    seeds = [t.state_seed for t in [*generate_tasks(0), *FAMILY, *LOOKUP]]
    assert len(set(seeds)) == len(seeds)  # no task shares a store with another
    positions = set()
    for wt in LOOKUP:
        keys = list(wt.task.inputs["keys"])
        owners = [wt.initial_state().get(k).owner for k in keys]
        assert len(set(owners)) == len(owners)  # every other listed owner is a wrong answer
        (owner,) = wt.gold.answer_expect
        assert sorted(wt.gold.answer_forbid) == sorted(set(owners) - {owner})
        assert wt.task.prompt.endswith(f"the owner of {keys[owners.index(owner)]}.")
        positions.add((owners.index(owner), len(keys)))
        assert all(c.name == "get_field" and c.arguments["field"] == "owner"
                   for c in wt.gold.required_calls)  # fmt: skip
    assert {p for p, n in positions} >= {0, 1, 2}  # not always the first
    assert {n - 1 for p, n in positions} & {p for p, n in positions}  # the last, sometimes
    assert {p for p, n in positions if p < n - 1}  # ... and not always the last
    # the worked example's owners are not the workspace's: copying it is never right
    from harness.bench.workload import SYSTEM_PROMPT
    from harness.toolsets.workspace import OWNERS

    system = LOOKUP[0].task.system
    assert system != SYSTEM_PROMPT
    assert not [o for o in OWNERS if f'"{o}"' in system]


def test_the_paper_s_48_tasks_are_unchanged_by_the_family() -> None:
    text = tasks_to_json(generate_tasks(0))
    assert hashlib.sha256(text.encode()).hexdigest() == PAPER_TASKS_SHA256
    assert workload_tasks(0)[:48] == generate_tasks(0)
    assert task_by_id(workload_tasks(0), "easy_fan_out-07").template == "easy_note"


def test_an_unknown_family_is_an_error_naming_the_families() -> None:
    with pytest.raises(ConfigError, match=r"easy_fan_out.*easy_lookup"):
        generate_family("hard_fan_out")  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["gold", "oracle"])
@pytest.mark.parametrize("levers", [False, True])
def test_gold_and_oracle_solve_every_family_task_in_every_arm(policy: str, levers: bool) -> None:
    async def go() -> list[dict[str, Any]]:
        jobs = []
        for wt in [*FAMILY, *LOOKUP]:
            for label in LABELS:
                spec = JobSpec.from_label(
                    label, policy=policy, latency_s=0.0, input_enums=levers,
                    skill_tools=levers, open_slots=levers,
                )  # fmt: skip
                jobs.append(await run_job(ScriptedEngine(), wt, spec, MANIFEST))
        return jobs

    jobs = anyio.run(go)
    assert [j["failures"] for j in jobs if not j["success"]] == []
    flattened = [j for j in jobs if j["arm"] == "F"]
    for job in flattened:
        wt = task_by_id([*FAMILY, *LOOKUP], job["task_id"])
        assert [len(w["call_ids"]) for w in job["windows"]] == list(wt.windows)


@pytest.mark.parametrize("template", ["easy_read", "easy_lookup"])
def test_a_family_answer_that_names_another_owner_fails_its_label(template: str) -> None:
    wt = next(t for t in [*FAMILY, *LOOKUP] if t.template == template and t.gold.answer_forbid)
    calls = wt.gold.required_calls
    assert wt.score(calls, wt.initial_state(), wt.task.gold_answer)
    assert wt.score(calls, wt.initial_state(), f"The owner is {wt.task.gold_answer}.")
    assert not wt.score(calls, wt.initial_state(), wt.gold.answer_forbid[0])
    assert not wt.score(calls[:-1], wt.initial_state(), wt.task.gold_answer)


def test_the_lookup_baselines_count_what_no_model_would_solve() -> None:
    from harness.bench.report_family import answer_baselines

    jobs = [{"task_id": t.id, "kind": "easy_lookup", "policy": "model"} for t in LOOKUP]
    base = answer_baselines(jobs)
    assert base is not None
    last = 0
    for wt in LOOKUP:
        keys = list(wt.task.inputs["keys"])
        last += wt.task.prompt.endswith(f"the owner of {keys[-1]}.")
    assert base["last"] == last
    assert base["uniform"] == pytest.approx(sum(1 / len(t.task.inputs["keys"]) for t in LOOKUP))
    assert answer_baselines([{**jobs[0], "policy": "gold"}]) is None


def _first_call(messages: Any, tools: Any) -> Any:
    """A stand-in model: the first listed key for the tool offered, until it has called it
    twice; then it answers."""
    done = sum(1 for m in messages if m["role"] == "tool")
    if done >= 2:
        return "done"
    function = tools[0]["function"]
    properties = function["parameters"]["properties"]
    return {"name": function["name"], "arguments": {a: p["enum"][0] for a, p in properties.items()}}


@pytest.mark.parametrize("arm", ["S", "F", "P", "P+V"])
def test_the_levers_narrow_the_prompt_and_the_grammar_identically_for_every_arm(arm: str) -> None:
    wt = task_by_id(FAMILY, "easy_fan_out-04")  # easy_tag, 3 keys

    async def requests(config: LoopConfig) -> list[Any]:
        toolset, _ = wt.toolset(latency=0.0)
        async with ScriptedEngine(_first_call) as engine:
            await run_loop(engine, toolset, wt.task, config, manifest=MANIFEST)
        return engine.requests

    def config(a: str) -> LoopConfig:
        return LoopConfig(arm=a, policy="model", skill_tools=True, open_slots=True)  # type: ignore[arg-type]

    mine, serial = anyio.run(requests, config(arm)), anyio.run(requests, config("S"))
    keys = list(wt.task.inputs["keys"])
    # The prompt's tools: the skill's one tool, with the full enums, on every turn of every arm.
    assert all(r.tools == serial[0].tools for r in mine + serial)
    assert [s["function"]["name"] for s in serial[0].tools] == ["add_tag"]
    assert _enum(serial[0].tools[0], "key") == keys
    assert _enum(serial[0].tools[0], "tag") == [wt.task.inputs["tag"]]
    # The first turn's grammar is the same in every arm: nothing used yet, nothing narrowed.
    assert mine[0].settings.grammar_tools is None
    assert serial[0].settings.grammar_tools is None
    # After a call on keys[0], the grammar allows only the other keys (the prompt is unchanged).
    second = mine[1].settings.grammar_tools
    assert second is not None
    assert _enum(second[0], "key") == keys[1:]
    if arm in ("S", "F"):
        assert [r.settings.grammar_tools for r in mine] == [
            r.settings.grammar_tools for r in serial
        ]


def test_open_slots_keep_a_shared_value_and_close_a_tool_once_every_slot_is_filled() -> None:
    wt = task_by_id(FAMILY, "easy_fan_out-09")  # easy_status, 2 keys
    toolset, _ = wt.toolset()
    config = LoopConfig(open_slots=True, skill_tools=True)
    from harness.loop.levers import input_enum_specs, skill_specs

    specs = input_enum_specs(
        skill_specs(toolset.specs(), MANIFEST.skill(wt.skill)), MANIFEST.skill(wt.skill),
        wt.task.inputs,
    )  # fmt: skip
    status = wt.task.inputs["status"]
    calls = [
        ToolCall(f"c{i}", "set_status", json.dumps({"key": k, "status": status}))
        for i, k in enumerate(wt.task.inputs["keys"])
    ]
    assert config.open_slots
    one = open_slot_specs(specs, calls[:1])
    assert one is not None
    assert _enum(one[0], "key") == [wt.task.inputs["keys"][1]]
    assert _enum(one[0], "status") == [status]  # one value, always open
    assert open_slot_specs(specs, calls) == []  # every slot filled: only the answer remains
    assert open_slot_specs(specs, []) is None
    again = [*calls[:1], calls[0]]  # a repeated call fills no new slot
    assert open_slot_specs(specs, again) == one


def test_the_open_slot_count_is_what_a_serial_run_could_still_call() -> None:
    wt = task_by_id(FAMILY, "easy_fan_out-04")  # easy_tag, 3 keys, one shared tag
    toolset, _ = wt.toolset()
    from harness.loop.levers import input_enum_specs, skill_specs

    skill = MANIFEST.skill(wt.skill)
    specs = input_enum_specs(skill_specs(toolset.specs(), skill), skill, wt.task.inputs)
    tag, keys = wt.task.inputs["tag"], list(wt.task.inputs["keys"])
    calls = [
        ToolCall(f"c{i}", "add_tag", json.dumps({"key": k, "tag": tag})) for i, k in enumerate(keys)
    ]
    assert open_slot_count(specs, []) == 3
    assert open_slot_count(specs, calls[:1]) == 2
    assert open_slot_count(specs, [calls[0], calls[0]]) == 2  # a duplicate fills no new slot
    assert open_slot_count(specs, calls) == 0
    # A tool with an argument the manifest does not bound has no slots to count.
    assert open_slot_count(toolset.specs(), []) is None


def test_a_parallel_message_is_capped_at_the_open_slots() -> None:
    """P's one message may list at most as many calls as slots are open (the model otherwise
    lists duplicates up to ``max_window``); S's turns are untouched."""
    wt = task_by_id(FAMILY, "easy_fan_out-04")  # 3 keys

    async def requests(arm: str) -> list[Any]:
        toolset, _ = wt.toolset(latency=0.0)
        config = LoopConfig(arm=arm, policy="model", skill_tools=True, open_slots=True)  # type: ignore[arg-type]
        async with ScriptedEngine(_first_call) as engine:
            await run_loop(engine, toolset, wt.task, config, manifest=MANIFEST)
        return engine.requests

    parallel = anyio.run(requests, "P")
    assert parallel[0].settings.max_parallel_calls == 3
    assert parallel[1].settings.max_parallel_calls == 2  # one key called
    assert all(r.settings.max_parallel_calls is None for r in anyio.run(requests, "S"))


def test_the_levers_are_part_of_the_bench_plan_and_old_plans_keep_their_fingerprint(
    tmp_path: Path,
) -> None:
    plain = BenchPlan(out=tmp_path)
    assert not {"input_enums", "skill_tools", "open_slots"} & set(plain.settings())
    guided = BenchPlan(out=tmp_path, skill_tools=True, open_slots=True)
    assert guided.settings()["open_slots"] is True
    assert guided.fingerprint() != plain.fingerprint()
    check_plan(tmp_path, guided.settings(), guided.fingerprint(), has_results=False)
    with pytest.raises(ConfigError, match="open_slots"):
        check_plan(tmp_path, plain.settings(), plain.fingerprint(), has_results=True)
    jobs = plan_jobs(
        BenchPlan(out=tmp_path, task_ids=("easy_fan_out",), policies=("model",), arms=("S", "P"),
                  heuristic=False, bfcl_simple=0, bfcl_parallel=0, open_slots=True)
    )  # fmt: skip
    assert len(jobs) == 32
    assert all(j.spec.open_slots and not j.spec.input_enums for j in jobs)
    assert all(j.spec.loop_config().open_slots for j in jobs)


def test_a_kind_in_the_task_list_picks_all_of_its_tasks_and_an_unknown_name_is_an_error() -> None:
    tasks = workload_tasks(0)
    picked = select_tasks(tasks, ["chain-01", "easy_fan_out", "chain-01"])
    assert [t.id for t in picked] == ["chain-01", *(t.id for t in FAMILY)]
    with pytest.raises(ConfigError, match="easy_fan_out"):
        select_tasks(tasks, ["easy-00"])


def test_harness_bench_records_the_levers_in_its_plan_and_reports_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "b"
    args = ["bench", "--engine", "scripted", "--out", str(out), "--tasks", "easy_fan_out-00",
            "easy_fan_out-02", "--policy", "gold", "--arms", "S", "F", "P", "P+V",
            "--no-heuristic", "--bfcl", "0", "0", "--latency", "0", "--skill-tools",
            "--open-slots"]  # fmt: skip
    assert main(args) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert plan["settings"]["open_slots"] is True
    assert plan["settings"]["skill_tools"] is True
    assert "input_enums" not in plan["settings"]
    report = (out / "report.md").read_text()
    assert "| easy_fan_out | gold | S | 2/2 (100%) | 34%–100% |" in report
    assert "What P+V's resamples bought" in report
    summary = json.loads((out / "summary.json").read_text())
    assert summary["family_accuracy"]["easy_fan_out"]["gold"]["F"]["minus_S_pp"] == 0.0
    assert main([*args[:-1]]) == 2  # resuming with another lever is another plan: refused
    assert "open_slots" in capsys.readouterr().err


def test_the_levers_need_a_manifest_for_your_own_task(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--toolset", "tests.user_toolset:toolset", "--prompt", "x",
                 "--engine", "scripted", "--open-slots", "--skill-tools"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "--skill-tools, --open-slots narrow the model's choices" in err
    assert "pass --manifest FILE" in err


def test_validator_accounting_compares_p_v_with_p_on_the_same_tasks() -> None:
    def job(task: str, arm: str, ok: bool, resamples: int) -> dict[str, Any]:
        turns = [{"n_calls": 2, "purpose": "call"}] + [
            {"n_calls": 2, "purpose": "resample"} for _ in range(resamples)
        ]
        return {"task_id": task, "kind": "easy_fan_out", "policy": "model", "arm": arm,
                "label": arm, "detector": "schema_sound", "success": ok,
                "summary": {"resamples": resamples}, "windows": [{"call_ids": ["a", "b"]}],
                "turns": turns}  # fmt: skip

    jobs = [job("t0", "P", False, 0), job("t0", "P+V", True, 3), job("t1", "P", True, 0),
            job("t1", "P+V", True, 0), job("t0", "S", True, 0), job("t1", "S", False, 0)]  # fmt: skip
    v = validator_by_family(jobs)["easy_fan_out"]["model"]
    assert (v["resamples"], v["epsilon_v"], v["per_message"]) == (3, 1.5, 1.5)
    assert (v["jobs_resampled"], v["resampled_solved"]) == (1, 1)
    assert (v["solved_not_by_P"], v["solved_by_P_only"]) == (1, 0)
    acc = family_accuracy(jobs)["easy_fan_out"]["model"]
    assert acc["P+V"]["solved"] == 2
    assert acc["P+V"]["minus_S_pp"] == pytest.approx(50.0)
    low, high = acc["S"]["ci"]
    assert 0 < low < 0.5 < high < 1


def test_the_reports_validator_rate_is_per_reviewed_message_so_one_call_messages_count() -> None:
    from harness.bench.report_facts import _validator

    def job(n_calls: int, resamples: int, ok: bool) -> dict[str, Any]:
        turns = [{"n_calls": n_calls, "purpose": "call"}, {"n_calls": 0, "purpose": "call"}]
        turns += [{"n_calls": n_calls, "purpose": "resample"} for _ in range(resamples)]
        return {"arm": "P+V", "policy": "model", "success": ok, "turns": turns,
                "summary": {"resamples": resamples}, "windows": []}  # fmt: skip

    # Four 1-call messages (no window of n >= 2 at all), two of them resampled twice each.
    v = _validator([job(1, 2, True), job(1, 2, False), job(1, 0, False), job(1, 0, True)])
    assert v["model"]["messages"] == 4  # the answer turns (no call) are not reviewed
    assert v["model"]["windows"] == 0
    assert v["model"]["epsilon_v"] == pytest.approx(1.0)
    assert (v["model"]["jobs_resampled"], v["model"]["jobs_resampled_solved"]) == (2, 1)
