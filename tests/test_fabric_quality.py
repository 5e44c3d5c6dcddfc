"""The fabric quality experiment (benchmarks.fabric_quality): its task set, scoring,
statistics and arms, on scripted engines."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.fabric_quality import (
    ARMS,
    main,
    mcnemar_p,
    measure,
    report,
    summarise,
    wilson,
)
from benchmarks.fabric_quality_tasks import (
    QUESTIONS,
    build_graph,
    correct,
    extract,
    generate_tasks,
    parse_single_pass,
    same_answer,
    tasks_from_jsonl,
    tasks_to_jsonl,
)
from harness.testing import ScriptedEngine


def oracle(messages: Any, tools: Any) -> str:
    """Answers every step right from what its prompt shows (a perfect small model)."""
    text = messages[-1]["content"]
    first = text.splitlines()[0]
    if "A1:" in text:
        cities = re.findall(r"city: (\w+)", text)
        ages = [int(a) for a in re.findall(r"age: (\d+)", text)]
        names = re.findall(r"name: (.+)", text)
        older = names[0] if ages[0] > ages[1] else names[1]
        return f"A1: {cities[0]}\nA2: {ages[0]}\nA3: {ages[1]}\nA4: {sum(ages)}\nA5: {older}"
    if "city" in first:
        return re.findall(r"city: (\w+)", text)[0]
    if "How old" in first:
        return re.findall(r"age: (\d+)", text)[0]
    shown = [int(x) for x in re.findall(r"\[age\d\] (\d+)", text)]
    if "Add" in first:
        return str(sum(shown))
    names = re.findall(r"^(.+?)'s age is in \[age1\] and (.+?)'s age", first)[0]
    return names[0] if shown[0] > shown[1] else names[1]


def test_the_task_set_is_deterministic_in_its_seed_and_its_gold_is_consistent():
    tasks = generate_tasks(20, seed=3)
    assert tasks == generate_tasks(20, seed=3)
    assert tasks != generate_tasks(20, seed=4)
    for t in tasks:
        ages = [int(r["age"]) for r in t.records]
        assert ages[0] != ages[1]
        assert t.gold["sum"] == str(sum(ages))
        assert t.gold["older"] == t.people[ages.index(max(ages))]
        assert t.gold["city"] == t.records[0]["city"]


def test_the_task_set_round_trips_through_json_lines():
    tasks = generate_tasks(5)
    assert tasks_from_jsonl(tasks_to_jsonl(tasks)) == tasks


def test_scoring_wants_the_one_gold_number_or_the_gold_name_alone():
    task = generate_tasks(1)[0]
    total, older = task.gold["sum"], task.gold["older"]
    other = next(p for p in task.people if p != older)
    assert correct(task, "sum", total)
    assert correct(task, "sum", f"{total} years.")
    assert not correct(task, "sum", f"{task.gold['age1']} + {task.gold['age2']} = {total}")
    assert not correct(task, "sum", None)
    assert correct(task, "older", f"{older.upper()}.")
    assert not correct(task, "older", f"{older} or {other}")
    assert correct(task, "city", f"The city is {task.gold['city']}")


def test_the_wilson_interval_has_its_textbook_values():
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(10, 10)[1] == 1.0
    assert wilson(0, 0) == (0.0, 1.0)


def test_the_exact_mcnemar_p_value_is_a_two_sided_sign_test():
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_p(3, 3) == 1.0


def test_the_single_pass_parser_reads_one_answer_per_question_line():
    found = parse_single_pass("Sure.\nQ1: Paris\nq2) 34\nQ4: 70\nQ4: again\nQ9: x")
    assert found == {"city": "Paris", "age1": "34", "age2": None, "sum": "70", "older": None}


@pytest.mark.anyio
async def test_a_perfect_model_is_right_in_every_arm_and_the_fabric_pays_for_its_samples():
    tasks = generate_tasks(3)
    async with ScriptedEngine(script=oracle) as engine:
        doc = await measure(engine, tasks, arms=list(ARMS))
    summary = summarise(doc)
    for arm, figures in summary["arms"].items():
        assert figures["step_accuracy"] == 1.0, arm
        assert figures["task_accuracy"] == 1.0, arm
    arms = summary["arms"]
    assert arms["single-pass"]["inferences"] == 3
    assert arms["naive"]["inferences"] == arms["layered"]["inferences"] == 3 * 5
    assert arms["fabric"]["inferences"] == 3 * (1 + 4 * 3)  # city once, four N=3 votes
    assert arms["-consensus"]["inferences"] == 3 * 5
    assert arms["fabric"]["compute_vs_naive"] > 2
    assert summary["paired_vs_naive"]["fabric"] == {"better": 0, "worse": 0, "p": 1.0}
    assert doc["runs"]["naive"][0]["rounds"] == 5  # one step after another
    assert doc["runs"]["layered"][0]["rounds"] == 2  # extraction, then sum and older
    table = report(doc, summary)
    assert "| fabric | 100.0%" in table


@pytest.mark.anyio
async def test_verification_repairs_a_malformed_answer_that_the_naive_arm_keeps():
    def vague(messages: Any, tools: Any) -> str:
        text = messages[-1]["content"]
        if text.startswith("How old") and "rejected" not in text:
            return "about thirty"
        return oracle(messages, tools)

    tasks = generate_tasks(2)
    async with ScriptedEngine(script=vague) as engine:
        doc = await measure(engine, tasks, arms=["naive", "-consensus", "fabric"])
    summary = summarise(doc)
    per_step = {arm: summary["arms"][arm]["per_step"] for arm in summary["arms"]}
    assert per_step["naive"]["age1"] == 0.0
    assert per_step["-consensus"]["age1"] == 1.0  # rejected once, repaired
    assert per_step["fabric"]["age1"] == 1.0
    assert summary["paired_vs_naive"]["-consensus"]["better"] >= 2 * 2
    record = doc["runs"]["-consensus"][0]["steps"]["age1"]
    assert record["attempts"] == 2


@pytest.mark.anyio
async def test_samples_that_disagree_leave_a_step_contested_and_flagged():
    def scattered(messages: Any, tools: Any) -> str:
        text = messages[-1]["content"]
        if text.startswith("Add"):
            scattered.calls += 1  # type: ignore[attr-defined]
            return str(100 + scattered.calls)  # type: ignore[attr-defined]
        return oracle(messages, tools)

    scattered.calls = 0  # type: ignore[attr-defined]
    async with ScriptedEngine(script=scattered) as engine:
        doc = await measure(engine, generate_tasks(1), arms=["fabric"])
    summary = summarise(doc)["arms"]["fabric"]
    assert doc["runs"]["fabric"][0]["steps"]["sum"]["status"] == "contested"
    assert summary["contested"] == 1
    assert summary["unflagged"] == len(QUESTIONS) - 1


def test_an_unknown_arm_is_a_usage_error(capsys):
    assert main(["--arms", "naive,turbo"]) == 2
    assert "turbo" in capsys.readouterr().err


def test_another_model_needs_its_parameter_count(capsys):
    assert main(["--engine", "http", "--base-url", "http://127.0.0.1:1/v1"]) == 2
    assert "--model-params" in capsys.readouterr().err


def _task_in(city: str) -> Any:
    return next(t for t in generate_tasks(200) if t.gold["city"] == city)


def test_extraction_reads_the_one_value_a_verbose_reply_gives():
    task = _task_in("Zurich")
    assert extract(task, "city", "This person lives in Zurich, a city in Switzerland.") == "Zurich"
    assert extract(task, "city", "Zurich or Paris") is None
    assert extract(task, "age1", "This person is 53 years old, and the team") == "53"
    assert extract(task, "sum", "34 + 27 = 61") is None
    assert extract(task, "older", f"The answer is: {task.people[1]}.") == task.people[1]
    assert extract(task, "older", " or ".join(task.people)) is None
    assert extract(task, "age1", None) is None


def test_the_city_verifier_accepts_every_reply_the_scorer_scores_right():
    task = _task_in("Zurich")
    (check,) = build_graph(task)["city"].verifiers
    other = next(c for c in ("Paris", "Oslo", "Rome") if c not in task.records[0].values())
    for reply, right in [
        ("This person lives in Zurich, a city in Switzerland.", True),
        ("Zurich", True),
        (f"This person lives in {other}.", False),
        ("Zurich or Paris", False),
        ("a nice town", False),
    ]:
        verdict = check(SimpleNamespace(text=reply, value=reply))
        assert correct(task, "city", reply) is right, reply
        assert verdict.passed is right, reply


def test_consensus_samples_that_give_the_same_integer_agree_whatever_their_other_words():
    task = generate_tasks(1)[0]
    same = same_answer(task, "age1")
    assert same("This person is 53 years old, and the team", "53.")
    assert same("53", "He is 53 years old and lives in Rome")
    assert not same("53", "52")
    assert not same("fifty", "fifty")  # no value: agrees with nothing, not even itself
    older = same_answer(task, "older")
    assert older(f"{task.people[0]}.", f"The older one is {task.people[0]}")
    assert not older(task.people[0], task.people[1])


@pytest.mark.anyio
async def test_a_vote_over_verbose_samples_with_one_integer_is_a_consensus_not_contested():
    def wordy(messages: Any, tools: Any) -> Any:
        text = messages[-1]["content"]
        if text.startswith("How old"):
            age = re.findall(r"age: (\d+)", text)[0]
            wordy.n += 1  # type: ignore[attr-defined]
            return f"This person is {age} years old" + " and the team" * (wordy.n % 3)  # type: ignore[attr-defined]
        return oracle(messages, tools)

    wordy.n = 0  # type: ignore[attr-defined]
    async with ScriptedEngine(script=wordy) as engine:
        doc = await measure(engine, generate_tasks(2), arms=["fabric"])
    for record in doc["runs"]["fabric"]:
        for step in ("age1", "age2"):
            assert record["steps"][step]["status"] == "ok", record["steps"][step]
            assert record["steps"][step]["agreement"] == 1.0
            assert record["steps"][step]["correct"]


@pytest.mark.anyio
async def test_a_consumer_sees_a_contested_inputs_value_but_not_its_flag():
    prompts: list[str] = []

    seen: dict[str, int] = {}

    def split(messages: Any, tools: Any) -> Any:
        text = messages[-1]["content"]
        if text.startswith("How old"):
            seen[text] = seen.get(text, 0) + 1  # each of a vote's 3 samples says another age
            age = int(re.findall(r"age: (\d+)", text)[0])
            return f"{age + seen[text] - 1} years"
        if "[age1]" in text:
            prompts.append(text)
        return oracle(messages, tools)

    async with ScriptedEngine(script=split) as engine:
        doc = await measure(engine, generate_tasks(1), arms=["fabric"])
    steps = doc["runs"]["fabric"][0]["steps"]
    assert steps["age1"]["status"] == steps["age2"]["status"] == "contested"
    assert prompts, "the consumers ran"
    for prompt in prompts:
        assert "unconfirmed" not in prompt
        assert "consensus" not in prompt
        assert re.search(r"^\[age1\] \d+$", prompt, re.MULTILINE), prompt
    summary = summarise(doc)["arms"]["fabric"]
    assert summary["contested"] >= 2  # the flag stays in the figures


def test_the_single_pass_parser_skips_a_line_that_repeats_a_question():
    found = parse_single_pass("Q1: What city does Maria Chen live in?\nA1: Zurich\nA2: 53")
    assert found["city"] == "Zurich"
    assert found["age1"] == "53"


@pytest.mark.anyio
async def test_every_arm_records_what_each_request_replied():
    async with ScriptedEngine(script=oracle) as engine:
        doc = await measure(engine, generate_tasks(1), arms=["single-pass", "fabric"])
    fabric = doc["runs"]["fabric"][0]
    assert len(fabric["replies"]) == fabric["inferences"]
    assert {r["temperature"] for r in fabric["replies"]} >= {0.3, 0.6, 0.9}
    assert doc["runs"]["single-pass"][0]["replies"][0]["reply"].startswith("A1:")
