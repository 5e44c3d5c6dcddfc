"""The context-bound oracle policy: gold where the context shows what gold needs, a failed task
where a false fill withheld it; and gold labels that a false fill can fail."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from harness._commands.cli import main
from harness.bench.analysis import verdict_r3
from harness.bench.jobs import run_job
from harness.bench.workload import WorkloadTask, generate_tasks, task_by_id
from harness.certify import DEFAULT_MARKER
from harness.engines.base import GenerationSettings
from harness.loop import LoopConfig, run_loop
from harness.loop.oracle import UNKNOWN, ContextView, OraclePolicy
from harness.loop.task import GoldCall, Task
from harness.loop.transcript import Transcript
from harness.runs.jobs import JobSpec
from harness.testing import ScriptedEngine
from harness.tools.execute import execute_call
from harness.toolsets.workspace import load_workspace_manifest

TASKS = generate_tasks(0)
MANIFEST = load_workspace_manifest()
#: Tasks with a chain phase the phase-heuristic detector windows: its windows there are false
#: fills (every read needs the previous result).
DEPENDENT = [t for t in TASKS if t.template in ("follow", "follow_mark", "trace_and_mark")]
SOUND_ARMS = [("S", False), ("F", False), ("F", True), ("P", False), ("P+V", False)]


def run(wt: WorkloadTask, policy: str, arm: str, *, eager: bool = False, detector: str = "schema_sound") -> tuple[list[Any], dict[str, Any]]:  # fmt: skip
    """The forced reply of every generation and the job record."""
    engine = ScriptedEngine()
    spec = JobSpec(arm=arm, policy=policy, detector=detector, eager=eager, latency_s=0.0)  # type: ignore[arg-type]

    async def go() -> dict[str, Any]:
        async with engine:
            return await run_job(engine, wt, spec, MANIFEST)

    job = anyio.run(go)
    forced = [
        ([(c.name, c.arguments) for c in r.settings.forced or ()], r.settings.forced_answer)
        for r in engine.requests
    ]
    return forced, job


@pytest.mark.parametrize(("arm", "eager"), SOUND_ARMS, ids=[a + ("+eager" if e else "") for a, e in SOUND_ARMS])  # fmt: skip
def test_the_oracle_forces_the_gold_replies_token_for_token_where_nothing_it_needs_is_withheld(
    arm: str, eager: bool
) -> None:
    for wt in TASKS:
        gold, gold_job = run(wt, "gold", arm, eager=eager)
        oracle, oracle_job = run(wt, "oracle", arm, eager=eager)
        assert oracle == gold, wt.id
        assert oracle_job["success"], (wt.id, oracle_job["failures"])
        assert gold_job["success"], wt.id
        assert oracle_job["answer"] == gold_job["answer"] == wt.task.gold_answer


def test_under_the_phase_heuristic_the_oracle_is_gold_on_tasks_without_false_fills() -> None:
    for wt in TASKS:
        if wt in DEPENDENT:
            continue
        _, gold = run(wt, "gold", "F", detector="phase_heuristic")
        _, oracle = run(wt, "oracle", "F", detector="phase_heuristic")
        # The same calls and answer; a final answer generated while the window was still open
        # (discarded, then regenerated after the reveal) may differ: it could not see yet.
        made = [(c["tool"], c["arguments"]) for c in oracle["calls"]]
        assert made == [(c["tool"], c["arguments"]) for c in gold["calls"]], wt.id
        assert oracle["answer"] == gold["answer"], wt.id
        assert oracle["success"], wt.id


@pytest.mark.parametrize("wt", DEPENDENT, ids=[t.id for t in DEPENDENT])
def test_a_false_fill_costs_the_oracle_the_task_it_would_have_solved(wt: WorkloadTask) -> None:
    _, serial = run(wt, "oracle", "S", detector="phase_heuristic")
    _, gold = run(wt, "gold", "F", detector="phase_heuristic")
    _, oracle = run(wt, "oracle", "F", detector="phase_heuristic")
    assert serial["success"]
    assert gold["success"]  # R3 cannot fail under gold: it forces what it could not have seen
    assert not oracle["success"]
    # Either way the false fill is on record (the report's per-detector false-fill count).
    assert any(w["false_fill"] for w in oracle["windows"])
    if oracle["error"] is None:  # it answered: the label names what the false fill broke
        assert oracle["failures"]
    else:  # it kept reading the one document it could see, as a stuck model does
        assert oracle["error"].startswith("UsageLimitExceeded")
        assert "same call" in oracle["error"]
        # The run died with the false-filled window open: recorded as closed by "aborted".
        aborted = [w for w in oracle["windows"] if w["closed_by"] == "aborted"]
        assert aborted, oracle["windows"]
        assert aborted[-1]["false_fill"]
        assert len(aborted[-1]["tools"]) == len(aborted[-1]["call_ids"]) >= 2


def test_the_oracle_under_a_false_fill_reads_the_stale_key_and_answers_unknown() -> None:
    wt = task_by_id(TASKS, "chain-00")  # follow: two reads, answer the second one's title
    first, second = (c.arguments["key"] for c in wt.task.gold_calls)
    forced, job = run(wt, "oracle", "F", detector="phase_heuristic")
    keys = [calls[0][1] for calls, _ in forced if calls]
    assert keys == [json.dumps({"key": first}), json.dumps({"key": first})]
    assert second not in json.dumps(forced)
    assert job["answer"] == UNKNOWN
    assert f"required call read_doc({json.dumps({'key': second}, separators=(',', ':'))}) not made" in job["failures"]  # fmt: skip


# ---------------------------------------------------------------------- the context view


def _transcript(*tool_contents: str, calls: list[dict[str, Any]] | None = None) -> Transcript:
    transcript = Transcript("system", "Start at document d1 and set it to 'approved'.")
    for i, content in enumerate(tool_contents):
        arguments = (calls or [{"key": f"k{i}"}] * len(tool_contents))[i]
        transcript.messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read_doc", "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        transcript.messages.append(
            {"role": "tool", "tool_call_id": f"c{i}", "name": "read_doc", "content": content}
        )
    return transcript


TASK = Task(
    "t",
    "Start at document d1 and set it to 'approved'.",
    inputs={"start": "d1", "status": "approved"},
    gold_steps=((GoldCall("read_doc", {"key": "d1"}),), (GoldCall("read_doc", {"key": "d2"}),)),
    gold_answer="The title is Field survey.",
    answer_facts=("Field survey",),
)


def test_a_value_is_shown_by_the_inputs_the_prompt_or_a_visible_result_never_a_marker() -> None:
    visible = ContextView.of(TASK, _transcript('{"key": "d1", "next": "d2"}').messages, "[w]")
    withheld = ContextView.of(TASK, _transcript("[w]").messages, "[w]")
    assert visible.shows("d1")
    assert withheld.shows("d1")
    assert visible.shows("approved")
    assert withheld.shows("approved")
    assert visible.shows("d2")
    assert not withheld.shows("d2")
    assert not visible.shows("d3")
    assert not withheld.shows({"key": "d2"})  # a structured value: every part must be shown


def _forced_arguments(settings: GenerationSettings) -> Any:
    assert settings.forced
    return json.loads(settings.forced[0].arguments)


def test_the_stale_rule_reuses_the_last_value_of_the_argument_else_the_marker() -> None:
    policy = OraclePolicy(marker="[w]")
    base = GenerationSettings()
    fresh = Transcript("system", TASK.prompt)
    assert _forced_arguments(policy.steer(TASK, fresh, base, step=None)) == {"key": "d1"}
    withheld = _transcript("[w]", calls=[{"key": "d1"}])
    assert _forced_arguments(policy.steer(TASK, withheld, base, step=None)) == {"key": "d1"}
    shown = _transcript('{"key": "d1", "next": "d2"}', calls=[{"key": "d1"}])
    assert _forced_arguments(policy.steer(TASK, shown, base, step=None)) == {"key": "d2"}
    lone = Task("t", "p", gold_steps=((GoldCall("read_doc", {"key": "d9"}),),))
    settings = policy.steer(lone, Transcript("s", "p"), base, step=None)
    assert _forced_arguments(settings) == {"key": "[w]"}


def test_the_answer_states_only_facts_a_visible_result_holds() -> None:
    policy = OraclePolicy(marker="[w]")
    base = GenerationSettings()
    seen = _transcript('{"key": "d1"}', '{"key": "d2", "title": "Field survey"}')
    unseen = _transcript('{"key": "d1"}', "[w]")
    assert policy.steer(TASK, seen, base, step=None).forced_answer == TASK.gold_answer
    assert policy.steer(TASK, unseen, base, step=None).forced_answer == "The title is unknown."


def test_every_workload_task_lists_its_answer_phrases_as_the_facts_the_oracle_must_see() -> None:
    for wt in TASKS:
        assert wt.task.answer_facts == wt.gold.answer_expect
        for fact in wt.task.answer_facts:
            assert fact.casefold() in (wt.task.gold_answer or "").casefold(), wt.id


def test_loop_config_names_the_oracle_among_the_policies() -> None:
    assert LoopConfig(policy="oracle").policy == "oracle"
    with pytest.raises(Exception, match="'oracle'"):
        LoopConfig(policy="perfect")  # type: ignore[arg-type]


def test_the_oracle_reads_the_runs_own_marker() -> None:
    wt = task_by_id(TASKS, "chain-00")
    config = LoopConfig(arm="F", policy="oracle", detector="phase_heuristic", marker="<hidden>")
    toolset, _ = wt.toolset(latency=0.0)

    async def go() -> str | None:
        async with ScriptedEngine() as engine:
            result = await run_loop(engine, toolset, wt.task, config, manifest=MANIFEST)
        return result.answer

    assert anyio.run(go) == UNKNOWN
    assert DEFAULT_MARKER != "<hidden>"


# ------------------------------------------------------- gold labels a false fill can fail


@pytest.mark.parametrize("wt", TASKS, ids=[t.id for t in TASKS])
def test_the_gold_label_fails_when_any_one_gold_call_is_missing(wt: WorkloadTask) -> None:
    calls = list(wt.task.gold_calls)
    for i in range(len(calls)):
        rest = calls[:i] + calls[i + 1 :]
        toolset, state = wt.toolset(latency=0.0)

        async def apply(rest: list[GoldCall] = rest, toolset: Any = toolset) -> None:
            for n, c in enumerate(rest):
                await execute_call(toolset, c.to_tool_call(f"c{n}"))

        anyio.run(apply)
        assert not wt.score(rest, state, wt.task.gold_answer), (wt.id, i)


@pytest.mark.parametrize("wt", [t for t in TASKS if t.gold.answer_expect], ids=lambda t: t.id)
def test_the_gold_label_fails_an_answer_that_states_a_fact_as_unknown(wt: WorkloadTask) -> None:
    toolset, state = wt.toolset(latency=0.0)
    calls = list(wt.task.gold_calls)

    async def apply() -> None:
        for n, c in enumerate(calls):
            await execute_call(toolset, c.to_tool_call(f"c{n}"))

    anyio.run(apply)
    assert wt.score(calls, state, wt.task.gold_answer)
    for fact in wt.task.answer_facts:
        answer = OraclePolicy().answer(
            wt.task,
            ContextView(frozenset(), " ", (frozenset(set(wt.task.answer_facts) - {fact}),), ()),
        )
        assert not wt.score(calls, state, answer), (wt.id, fact)


def test_harness_run_takes_the_oracle_policy_on_the_scripted_engine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["run", "--task", "chain-03", "--engine", "scripted", "--arm", "S", "F", "--latency", "0"]  # fmt: skip
    assert main([*argv, "--detector", "phase_heuristic", "--policy", "oracle"]) == 1
    out = capsys.readouterr().out
    assert "UsageLimitExceeded" in out
    assert main([*argv, "--policy", "oracle"]) == 0
    assert capsys.readouterr().out.count(" yes") == 2


def test_harness_run_says_when_the_gold_policy_hides_a_false_fills_cost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["run", "--task", "chain-03", "--engine", "scripted", "--arm", "S", "F", "--latency", "0"]  # fmt: skip
    assert main([*argv, "--detector", "phase_heuristic"]) == 0  # gold: forced, so it "solves"
    out = capsys.readouterr().out
    assert "F/phase_heuristic: 1 of 1 certified window(s) were false fills" in out
    assert "rerun with --policy oracle" in out
    assert main(argv) == 0  # schema-sound: no false fill, no note
    assert "false fill" not in capsys.readouterr().out


def test_r3_reports_the_oracles_heuristic_control_where_a_false_fill_costs_accuracy() -> None:
    tasks = [task_by_id(TASKS, "fan_out-00"), task_by_id(TASKS, "chain-00")]
    jobs = [run(wt, "oracle", arm, detector=d)[1] for wt in tasks for arm, d in
            (("S", "schema_sound"), ("F", "schema_sound"), ("F", "phase_heuristic"))]  # fmt: skip
    verdict = verdict_r3(jobs)
    assert verdict.held is True  # schema-sound F costs the oracle nothing
    assert verdict.figures["oracle"]["delta_pp"] == 0
    control = verdict.figures["oracle_heuristic"]
    assert control["F"] == [1, 2]
    assert control["delta_pp"] == -50
    assert "control: oracle policy, F/phase_heuristic 1/2" in verdict.summary
