"""The 48-task workload: determinism, windows by construction, gold labels, task files, CLI."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness._commands.cli import main
from harness.bench.workload import (
    KINDS,
    TaskFileError,
    WorkloadTask,
    generate_tasks,
    load_tasks,
    save_tasks,
    task_by_id,
    tasks_from_json,
    tasks_to_json,
)
from harness.certify import Certificate, Rejection, SchemaSoundDetector
from harness.certify.window import Windows
from harness.errors import ConfigError
from harness.loop import ARMS, LoopConfig, run_loop
from harness.loop.task import GoldCall
from harness.messages import ToolCall
from harness.testing import ScriptedEngine
from harness.tools.execute import execute_call
from harness.toolsets.workspace import WorkspaceState, load_workspace_manifest

TASKS = generate_tasks(0)
MANIFEST = load_workspace_manifest()
DETECTOR = SchemaSoundDetector()


def by_kind(kind: str) -> list[WorkloadTask]:
    return [t for t in TASKS if t.kind == kind]


def gold_tool_calls(task: WorkloadTask) -> list[ToolCall]:
    return [g.to_tool_call(f"gold_{i}") for i, g in enumerate(task.task.gold_calls)]


async def apply_gold(task: WorkloadTask) -> tuple[list[ToolCall], WorkspaceState]:
    toolset, state = task.toolset()
    calls = gold_tool_calls(task)
    for c in calls:
        result = await execute_call(toolset, c)
        assert not result.is_error, (task.id, result.content)
    return calls, state


def online_windows(task: WorkloadTask) -> tuple[int, ...]:
    """The certified windows the schema-sound tracker forms over the gold calls, in order."""
    toolset, _ = task.toolset()
    windows = Windows(DETECTOR.tracker(toolset, MANIFEST.skill(task.skill), task.task.inputs))
    closed = windows.replay(gold_tool_calls(task), readmit_discarded=False)
    certificates = [w.certificate for w in closed if w.certificate is not None]
    return tuple(c.n for c in certificates if c.n >= 2)


# ---------------------------------------------------------------------------- determinism


def test_there_are_48_tasks_16_of_each_kind_with_unique_ids() -> None:
    assert len(TASKS) == 48
    assert Counter(t.kind for t in TASKS) == dict.fromkeys(KINDS, 16)
    assert len({t.id for t in TASKS}) == 48


def test_the_same_seed_gives_the_same_tasks_byte_for_byte() -> None:
    assert tasks_to_json(generate_tasks(0)) == tasks_to_json(TASKS)
    assert tasks_to_json(generate_tasks(3)) == tasks_to_json(generate_tasks(3))
    assert tasks_to_json(generate_tasks(1)) != tasks_to_json(TASKS)


def test_tasks_round_trip_through_their_json() -> None:
    text = tasks_to_json(TASKS)
    assert tasks_to_json(tasks_from_json(text)) == text


def test_a_task_seed_must_be_a_non_negative_integer() -> None:
    with pytest.raises(ConfigError, match="non-negative integer"):
        generate_tasks(-1)


def test_fan_out_windows_cover_every_size_from_2_to_10() -> None:
    sizes = sorted(n for t in by_kind("fan_out") for n in t.windows)
    assert sizes == [2, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10]
    assert all(len(t.windows) == 1 for t in by_kind("fan_out"))


def test_every_prompt_names_the_keys_and_values_the_gold_calls_use() -> None:
    for task in TASKS:
        assert task.task.system
        first = task.task.gold_calls[0].arguments["key"]
        assert first in task.task.prompt
        for g in task.task.gold_calls:
            for name, value in g.arguments.items():
                if name != "key" and isinstance(value, str):
                    assert value in task.task.prompt, (task.id, name, value)
        if task.kind == "fan_out" or task.template in ("triage", "review_notes"):
            for key in task.task.inputs["keys"]:
                assert key in task.task.prompt


# -------------------------------------------------------------------------- certification


def test_no_chain_task_certifies_any_window() -> None:
    for task in by_kind("chain"):
        assert task.windows == ()
        assert online_windows(task) == ()
        toolset, _ = task.toolset()
        calls = gold_tool_calls(task)
        skill = MANIFEST.skill(task.skill)
        for a, b in itertools.pairwise(calls):
            for phase in skill.phases:
                verdict = DETECTOR.certify(toolset, [a, b], phase, task.task.inputs)
                assert isinstance(verdict, Rejection), (task.id, phase.name)


def test_every_gold_group_of_two_or_more_calls_certifies_with_its_size() -> None:
    for task in TASKS:
        toolset, _ = task.toolset()
        skill = MANIFEST.skill(task.skill)
        calls = iter(gold_tool_calls(task))
        for phase_name, step in zip(task.step_phases, task.task.gold_steps, strict=True):
            group = [next(calls) for _ in step]
            if len(group) < 2:
                continue
            verdict = DETECTOR.certify(toolset, group, skill.phase(phase_name), task.task.inputs)
            assert isinstance(verdict, Certificate), (task.id, verdict)
            assert verdict.n == len(group)


def test_a_gold_group_cannot_grow_by_the_call_that_follows_it_in_its_phase() -> None:
    """Windows are maximal: the next call of the same phase conflicts (D1)."""
    grew = 0
    for task in TASKS:
        toolset, _ = task.toolset()
        skill = MANIFEST.skill(task.skill)
        steps = task.task.gold_steps
        flat = gold_tool_calls(task)
        start = 0
        for i, step in enumerate(steps[:-1]):
            end = start + len(step)
            same_phase = task.step_phases[i] == task.step_phases[i + 1]
            if len(step) >= 2 and same_phase:
                group = flat[start : end + 1]
                phase = skill.phase(task.step_phases[i])
                verdict = DETECTOR.certify(toolset, group, phase, task.task.inputs)
                assert isinstance(verdict, Rejection), task.id
                assert "D1" in verdict.conditions
                grew += 1
            start = end
    assert grew == 8  # review_notes and handover: the conflicting call closes the window


def test_the_online_tracker_forms_exactly_the_stated_windows() -> None:
    for task in TASKS:
        assert online_windows(task) == task.windows, task.id


# ----------------------------------------------------------------------------- gold label


@pytest.mark.anyio
async def test_applying_the_gold_calls_satisfies_every_gold_label() -> None:
    for task in TASKS:
        calls, state = await apply_gold(task)
        assert task.failures(calls, state, task.task.gold_answer) == [], task.id
        assert task.score(calls, state.fingerprint(), task.task.gold_answer)
        assert task.initial_state().fingerprint() == task.initial_fingerprint


@pytest.mark.anyio
async def test_leaving_out_any_gold_call_fails_the_score() -> None:
    for task in TASKS:
        gold = list(task.task.gold_calls)
        for skip in range(len(gold)):
            toolset, state = task.toolset()
            calls = [g.to_tool_call(f"c{i}") for i, g in enumerate(gold) if i != skip]
            for c in calls:
                await execute_call(toolset, c)
            assert not task.score(calls, state, task.task.gold_answer), (task.id, skip)


@pytest.mark.anyio
async def test_a_wrong_answer_fails_when_the_answer_matters() -> None:
    for task in TASKS:
        calls, state = await apply_gold(task)
        if task.gold.answer_expect:
            assert not task.score(calls, state, "I do not know.")
            assert not task.score(calls, state, None)
        if task.gold.answer_forbid:
            wrong = f"{task.task.gold_answer} {task.gold.answer_forbid[0]}"
            assert not task.score(calls, state, wrong)


@pytest.mark.anyio
async def test_an_extra_write_fails_the_score_and_an_extra_read_does_not() -> None:
    task = task_by_id(TASKS, "fan_out-01")
    calls, state = await apply_gold(task)
    toolset = task.toolset(state)[0]
    extra_read = ToolCall("x", "read_doc", json.dumps({"key": state.keys()[0]}))
    await execute_call(toolset, extra_read)
    assert task.score([*calls, extra_read], state, "done")
    key = next(k for k in state if k not in task.task.inputs["keys"])
    extra_write = ToolCall("y", "append_note", json.dumps({"key": key, "text": "oops"}))
    await execute_call(toolset, extra_write)
    assert not task.score([*calls, extra_read, extra_write], state, "done")


def test_answers_match_whole_words_case_and_punctuation_insensitively() -> None:
    task = next(t for t in TASKS if t.template == "follow")
    title = task.gold.answer_expect[0]
    label = task.gold
    assert label.answer_failures(f'The title is "{title.upper()}".') == []
    assert label.answer_failures(title.replace(" ", "")) != []


def test_a_read_that_covers_a_required_read_counts() -> None:
    task = next(t for t in TASKS if t.template == "handover")
    required = task.gold.required_calls[0]
    assert required.name == "get_field"
    rest = list(task.gold.required_calls[1:])
    covering = GoldCall("read_doc", {"key": required.arguments["key"]})
    wrong = GoldCall("read_doc", {"key": "d000"})
    fp = task.gold.final_fingerprint
    assert task.score([covering, *rest], fp, task.task.gold_answer)
    assert not task.score([wrong, *rest], fp, task.task.gold_answer)


@pytest.mark.anyio
@pytest.mark.parametrize("arm", ARMS)
async def test_the_gold_policy_solves_every_task_under_every_arm(arm: Any) -> None:
    for task in TASKS:
        toolset, state = task.toolset()
        async with ScriptedEngine() as engine:
            result = await run_loop(
                engine, toolset, task.task, LoopConfig(arm=arm, policy="gold"), manifest=MANIFEST
            )
        assert task.failures(result.calls, state, result.answer) == [], (arm, task.id)
        if arm != "S":
            assert tuple(w.n for w in result.windows if w.n >= 2) == task.windows, task.id


@pytest.mark.anyio
async def test_every_tool_result_is_the_same_bytes_in_every_arm() -> None:
    for task in TASKS:
        seen: dict[str, list[str]] = {}
        for arm in ARMS:
            toolset, state = task.toolset()
            async with ScriptedEngine() as engine:
                result = await run_loop(
                    engine,
                    toolset,
                    task.task,
                    LoopConfig(arm=arm, policy="gold"),
                    manifest=MANIFEST,
                )
            by_call = {c.id: (c.name, c.arguments) for c in result.calls}
            ordered = sorted(
                json.dumps([*by_call[i], r.content]) for i, r in result.results.items()
            )
            seen[arm] = [*ordered, state.fingerprint()]
        assert seen["F"] == seen["S"], task.id
        assert seen["P"] == seen["S"], task.id
        assert seen["P+V"] == seen["S"], task.id


# ----------------------------------------------------------------------------- task files


def test_tasks_save_and_load_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    save_tasks(path, TASKS)
    assert tasks_to_json(load_tasks(path)) == tasks_to_json(TASKS)


def _corrupt(tmp_path: Path, edit: Any) -> Path:
    data = json.loads(tasks_to_json(TASKS))
    edit(data["tasks"][2])
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.pop("prompt"), r"task #3, field '\(entry\)': 'prompt' is a required property"),
        (lambda t: t.update(kind="loop"), r"task #3, field 'kind': 'loop' is not one of"),
        (lambda t: t["gold_steps"][0][0].pop("name"), r"field 'gold_steps/0/0'"),
        (lambda t: t.update(windows=[3]), r"\(fan_out-02\), field 'windows': \[3\]"),
        (lambda t: t.update(step_phases=[]), r"field 'step_phases': 0 phases for 1 gold steps"),
        (lambda t: t.update(state_seed=t["state_seed"] + 1), r"rebuilds a different store"),
        (
            lambda t: t["gold_steps"][0][0].update(name="read_docs"),
            r"unknown tool\(s\) \['read_docs'\]",
        ),
    ],
)
def test_a_task_file_that_does_not_validate_says_where_and_how_to_fix_it(
    tmp_path: Path, edit: Any, message: str
) -> None:
    with pytest.raises(TaskFileError, match=message) as info:
        load_tasks(_corrupt(tmp_path, edit))
    assert "Regenerate the file" in str(info.value)


def test_a_missing_or_unparsable_task_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="does not exist"):
        load_tasks(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(TaskFileError, match="not JSON"):
        load_tasks(bad)
    bad.write_text(json.dumps({"version": 2, "tasks": []}), encoding="utf-8")
    with pytest.raises(TaskFileError, match="unknown version 2"):
        load_tasks(bad)
    data = json.loads(tasks_to_json(TASKS[:1]))
    data["tasks"].append(data["tasks"][0])
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(TaskFileError, match="two tasks have the id 'fan_out-00'"):
        load_tasks(bad)


# ------------------------------------------------------------------------------------ CLI


def test_tasks_list_shows_every_task_with_kind_windows_and_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    assert "48 tasks" in out
    assert "fan_out-14" in out
    assert "mixed-12    mixed    triage          6,4           11" in out


def test_tasks_list_filters_by_kind_and_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "list", "--kind", "chain", "--json", "--seed", "2"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 16
    assert {r["kind"] for r in rows} == {"chain"}
    assert all(r["windows"] == [] for r in rows)
    assert set(rows[0]) == {"id", "kind", "skill", "windows", "gold_calls", "gold_steps"}


def test_tasks_show_prints_a_task_and_its_gold_label(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "show", "mixed-02"]) == 0
    out = capsys.readouterr().out
    assert "review_notes" in out
    assert "[annotate]" in out
    assert "expected windows: [2, 2]" in out
    assert main(["tasks", "show", "chain-03", "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert WorkloadTask.from_dict(entry).to_dict() == task_by_id(TASKS, "chain-03").to_dict()


def test_tasks_show_of_an_unknown_id_is_an_error_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["tasks", "show", "fan_out-99"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: No task 'fan_out-99'")
    assert "harness tasks list" in err
    assert main(["tasks", "list", "--seed", "-3"]) == 2
    assert "non-negative integer" in capsys.readouterr().err
