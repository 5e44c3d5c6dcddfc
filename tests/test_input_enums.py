"""Manifest-guided constrained decoding: input-sourced arguments may only take input values."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from harness.bench.workload import generate_tasks, task_by_id
from harness.loop import ARMS, LoopConfig, run_loop
from harness.loop.levers import input_enum_specs
from harness.testing import ScriptedEngine
from harness.toolsets.workspace import load_workspace_manifest

TASKS = generate_tasks(0)
MANIFEST = load_workspace_manifest()


def _enums(specs: list[Any]) -> dict[str, Any]:
    return {
        f"{s['function']['name']}.{a}": p.get("enum")
        for s in specs
        for a, p in s["function"]["parameters"]["properties"].items()
    }


def _narrowed(task_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    wt = task_by_id(TASKS, task_id)
    toolset, _ = wt.toolset()
    plain = toolset.specs()
    narrowed = input_enum_specs(plain, MANIFEST.skill(wt.skill), wt.task.inputs)
    return _enums(plain), _enums(narrowed)


def test_an_argument_sourced_from_an_input_list_may_only_take_its_items() -> None:
    wt = task_by_id(TASKS, "fan_out-00")  # survey: read_doc.key = input:keys
    plain, narrowed = _narrowed("fan_out-00")
    assert plain["read_doc.key"] is None
    assert narrowed["read_doc.key"] == list(wt.task.inputs["keys"])
    assert narrowed["set_status.key"] is None  # a tool the skill does not use is left alone


def test_an_argument_any_phase_sources_from_a_result_is_left_free() -> None:
    wt = task_by_id(TASKS, "mixed-00")  # triage: set_status.key = result:read
    _, narrowed = _narrowed("mixed-00")
    assert narrowed["set_status.key"] is None
    assert narrowed["set_status.status"] == ["approved"]
    assert narrowed["append_note.key"] == [wt.task.inputs["log"]]
    _, chain = _narrowed("chain-01")  # follow_mark: every key comes from a result
    assert chain["read_doc.key"] is None


def test_a_list_of_records_gives_each_record_its_value_under_the_arguments_name() -> None:
    wt = task_by_id(TASKS, "mixed-03")  # handover: get_field.key/field = input:checks
    _, narrowed = _narrowed("mixed-03")
    checks = wt.task.inputs["checks"]
    assert narrowed["get_field.key"] == list(dict.fromkeys(c["key"] for c in checks))
    assert narrowed["get_field.field"] == list(dict.fromkeys(c["field"] for c in checks))


def test_narrowing_leaves_the_specs_it_was_given_unchanged() -> None:
    wt = task_by_id(TASKS, "fan_out-00")
    toolset, _ = wt.toolset()
    plain = toolset.specs()
    before = repr(plain)
    input_enum_specs(plain, MANIFEST.skill(wt.skill), wt.task.inputs)
    assert repr(plain) == before


@pytest.mark.parametrize("arm", ARMS)
def test_every_arm_offers_the_engine_the_same_narrowed_tools_when_asked(arm: str) -> None:
    wt = task_by_id(TASKS, "fan_out-02")

    async def tools(input_enums: bool) -> list[Any]:
        toolset, _ = wt.toolset(latency=0.0)
        engine = ScriptedEngine()
        config = LoopConfig(arm=arm, policy="gold", input_enums=input_enums)  # type: ignore[arg-type]
        async with engine:
            await run_loop(engine, toolset, wt.task, config, manifest=MANIFEST)
        return [r.tools for r in engine.requests]

    on, off = anyio.run(tools, True), anyio.run(tools, False)
    assert all(t == on[0] for t in on)
    keys = list(wt.task.inputs["keys"])
    assert _enums(on[0])["add_tag.key"] == keys
    assert _enums(off[0])["add_tag.key"] is None


def test_the_reply_grammar_the_engine_compiles_keeps_the_enum() -> None:
    from harness.engines._format import reply_schema

    wt = task_by_id(TASKS, "fan_out-00")
    toolset, _ = wt.toolset()
    narrowed = input_enum_specs(toolset.specs(), MANIFEST.skill(wt.skill), wt.task.inputs)
    schema = reply_schema(narrowed, parallel=False)
    branches = schema["anyOf"][0]["properties"]["tool_calls"]["items"]["anyOf"]
    read = next(b for b in branches if b["properties"]["name"]["const"] == "read_doc")
    assert read["properties"]["arguments"]["properties"]["key"]["enum"] == list(
        wt.task.inputs["keys"]
    )
