"""The quality experiment's task set: small DAGs whose every LLM step has a checkable answer.

A task is two people's records behind a read-only ``lookup`` tool and five questions about
them, each an LLM step of a task graph (its inputs are the outputs it builds on)::

    A = lookup(person 1)          B = lookup(person 2)               (tool steps)
    city  < A        What city does this person live in?             simple
    age1  < A        How old is this person?                         moderate, high stakes
    age2  < B        How old is this person?                         moderate, high stakes
    sum   < age1, age2   Add these two ages.                         moderate, high stakes
    older < age1, age2   Who is older, <name 1> or <name 2>?         moderate, high stakes

so a task is extraction (``city``, ``age1``, ``age2``) and arithmetic / comparison over what
the extraction steps found (``sum``, ``older``): an extraction error flows downstream, as in
any DAG. Gold answers come from the generator. :func:`generate_tasks` is deterministic in its
seed; the committed run writes the set it used to ``tasks.jsonl`` beside its table.

**Scoring** (:func:`correct`, against the gold): a numeric step is right when its answer
holds exactly one integer and it is the gold one ("34", "34 years old"; not "34 + 27 = 61");
a name or city step when it names the gold and none of the other candidates
(case-insensitive, whole words).

**Verifiers** (what the fabric checks, without the gold): numeric steps must answer with one
integer; ``older`` must name exactly one of the two people; ``city`` must be grounded, one of
the values of the record the tool returned. They are format and grounding checks: none
computes the answer.

**Agreement** between consensus samples compares :func:`answer_key`: the integers of a
numeric answer, the normalised words of a text answer (so "34" and "34." agree).

:func:`single_pass_messages` / :func:`parse_single_pass` are the spec's naive contender:
both records and the five questions in one prompt, answered in one generation.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from harness.engines.base import Message
from harness.fabric import Node, TaskGraph, Verdict, llm_node, predicate, tool_node
from harness.tools import Toolset, tool

__all__ = (
    "QUESTIONS",
    "QualityTask",
    "answer_key",
    "build_graph",
    "correct",
    "generate_tasks",
    "parse_single_pass",
    "single_pass_messages",
    "tasks_from_jsonl",
    "tasks_to_jsonl",
    "toolset_for",
)

Kind = Literal["number", "text"]

FIRST = (
    "Alice", "Bruno", "Clara", "David", "Elena", "Farid", "Grace", "Hugo", "Irene", "Jonas",
    "Karin", "Liam", "Maria", "Nadia", "Oscar", "Paula", "Quinn", "Rosa", "Samir", "Tara",
)  # fmt: skip
LAST = (
    "Brown", "Chen", "Dubois", "Evans", "Fischer", "Garcia", "Hansen", "Ito", "Jensen",
    "Kowalski", "Lopez", "Moreau", "Novak", "Olsen", "Petrov", "Rossi", "Silva", "Weber",
)  # fmt: skip
CITIES = (
    "Paris", "Lyon", "Berlin", "Madrid", "Rome", "Oslo", "Vienna", "Prague", "Dublin",
    "Lisbon", "Athens", "Warsaw", "Zurich", "Helsinki", "Porto", "Milan", "Munich", "Seville",
)  # fmt: skip
TEAMS = ("red", "blue", "green", "yellow", "orange", "purple")

#: step id -> (answer kind, criticality, high stakes)
QUESTIONS: dict[str, tuple[Kind, str, bool]] = {
    "city": ("text", "simple", False),
    "age1": ("number", "moderate", True),
    "age2": ("number", "moderate", True),
    "sum": ("number", "moderate", True),
    "older": ("text", "moderate", True),
}

_INTEGER = re.compile(r"-?\d+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class QualityTask:
    """One task: two people's records and the gold answer of every step."""

    id: str
    people: tuple[str, str]
    records: tuple[dict[str, str], dict[str, str]]
    gold: dict[str, str]

    def record_text(self, i: int) -> str:
        return "\n".join(f"{k}: {v}" for k, v in self.records[i].items())

    def candidates(self, step: str) -> tuple[str, ...]:
        """The wrong answers a text step must not name (``older``: the other person)."""
        if step == "older":
            return tuple(p for p in self.people if p != self.gold["older"])
        return ()


def generate_tasks(n: int, seed: int = 0) -> list[QualityTask]:
    """``n`` tasks, deterministic in ``seed``; the two people of a task differ in age."""
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        first = rng.sample(FIRST, 2)
        people = (f"{first[0]} {rng.choice(LAST)}", f"{first[1]} {rng.choice(LAST)}")
        ages = rng.sample(range(21, 69), 2)
        records = tuple(
            {
                "name": people[j],
                "city": rng.choice(CITIES),
                "age": str(ages[j]),
                "team": rng.choice(TEAMS),
            }
            for j in range(2)
        )
        gold = {
            "city": records[0]["city"],
            "age1": str(ages[0]),
            "age2": str(ages[1]),
            "sum": str(ages[0] + ages[1]),
            "older": people[0] if ages[0] > ages[1] else people[1],
        }
        tasks.append(QualityTask(f"q{seed}-{i:03d}", people, (records[0], records[1]), gold))
    return tasks


def tasks_to_jsonl(tasks: Sequence[QualityTask]) -> str:
    return "".join(json.dumps(asdict(t), sort_keys=True) + "\n" for t in tasks)


def tasks_from_jsonl(text: str) -> list[QualityTask]:
    out = []
    for line in text.splitlines():
        if line.strip():
            raw: dict[str, Any] = json.loads(line)
            out.append(
                QualityTask(
                    raw["id"],
                    (raw["people"][0], raw["people"][1]),
                    (raw["records"][0], raw["records"][1]),
                    raw["gold"],
                )
            )
    return out


def toolset_for(tasks: Sequence[QualityTask]) -> Toolset:
    """The ``lookup`` tool over every task's records (read-only)."""
    records = {t.records[i]["name"]: t.record_text(i) for t in tasks for i in range(2)}

    @tool(read_only=True)
    async def lookup(person: str) -> str:
        """The record of a person: name, city, age, team."""
        return records[person]

    return Toolset([lookup], name="people")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def answer_key(text: str, kind: Kind) -> str:
    """What two answers must share to agree: the integers of a numeric answer, the words of
    a text answer."""
    if kind == "number":
        return " ".join(_INTEGER.findall(text))
    return " ".join(_words(text))


def _names(text: str, name: str) -> bool:
    wanted = _words(name)
    words = _words(text)
    return any(words[i : i + len(wanted)] == wanted for i in range(len(words)))


def correct(task: QualityTask, step: str, answer: str | None) -> bool:
    """Is ``answer`` the gold answer of ``step`` (see the module docstring)?"""
    if answer is None:
        return False
    kind = QUESTIONS[step][0]
    gold = task.gold[step]
    if kind == "number":
        return _INTEGER.findall(answer) == [gold]
    return _names(answer, gold) and not any(_names(answer, c) for c in task.candidates(step))


def _one_integer(result: Any) -> Verdict:
    found = _INTEGER.findall(result.text)
    if len(found) == 1:
        return Verdict(True, verifier="one_integer")
    return Verdict(
        False,
        f"the answer must be one number, it has {len(found)}; answer with the number only",
        "one_integer",
    )


def _grounded(values: Sequence[str]) -> Any:
    keys = {" ".join(_words(v)) for v in values}

    def check(result: Any) -> bool:
        return " ".join(_words(result.text)) in keys

    return predicate(
        check, "the answer is not a value of the record; copy the city from it", name="grounded"
    )


def _one_of(names: Sequence[str]) -> Any:
    def check(result: Any) -> bool:
        return sum(_names(result.text, n) for n in names) == 1

    return predicate(
        check, f"name exactly one of {' or '.join(names)}", name=f"one_of({', '.join(names)})"
    )


def build_graph(task: QualityTask) -> TaskGraph:
    """The task's DAG (module docstring); verifiers run only when the mechanism is on."""
    one, two = task.people
    crit = {step: QUESTIONS[step][1] for step in QUESTIONS}
    high = {step: QUESTIONS[step][2] for step in QUESTIONS}

    def ask(step: str, prompt: str, deps: list[str], verifiers: list[Any]) -> Node:
        return llm_node(
            step,
            prompt,
            deps,
            criticality=crit[step],
            high_stakes=high[step],
            verifiers=verifiers,
        )

    return TaskGraph(
        [
            tool_node("A", "lookup", {"person": one}),
            tool_node("B", "lookup", {"person": two}),
            ask(
                "city",
                "What city does this person live in? Answer with the city only.",
                ["A"],
                [_grounded(list(task.records[0].values()))],
            ),
            ask(
                "age1",
                "How old is this person? Answer with the number only.",
                ["A"],
                [_one_integer],
            ),
            ask(
                "age2",
                "How old is this person? Answer with the number only.",
                ["B"],
                [_one_integer],
            ),
            ask(
                "sum",
                "Add these two ages. Answer with one number only.",
                ["age1", "age2"],
                [_one_integer],
            ),
            ask(
                "older",
                f"{one}'s age is in [age1] and {two}'s age is in [age2]. Who is older, {one} "
                f"or {two}? Answer with the name only.",
                ["age1", "age2"],
                [_one_of(task.people)],
            ),
        ]
    )


_SINGLE_SYSTEM = "Answer every question, briefly, one line per question."
_LINE = re.compile(r"^\s*Q\s*(\d)\s*[:.)-]\s*(.*)$", re.IGNORECASE)
_ORDER = ("city", "age1", "age2", "sum", "older")


def single_pass_messages(task: QualityTask) -> list[Message]:
    """The whole task in one prompt: both records, the five questions, one answer a line."""
    one, two = task.people
    questions = [
        f"What city does {one} live in?",
        f"How old is {one}?",
        f"How old is {two}?",
        f"What is {one}'s age plus {two}'s age?",
        f"Who is older, {one} or {two}?",
    ]
    body = (
        f"Records:\n{task.record_text(0)}\n\n{task.record_text(1)}\n\n"
        "Answer each question on its own line as 'Q1: answer', with the answer only.\n"
        + "\n".join(f"Q{i + 1}: {q}" for i, q in enumerate(questions))
    )
    return [{"role": "system", "content": _SINGLE_SYSTEM}, {"role": "user", "content": body}]


def parse_single_pass(text: str) -> Mapping[str, str | None]:
    """Step id -> the answer on its ``Qk:`` line (``None`` when the line is missing)."""
    found: dict[str, str | None] = dict.fromkeys(_ORDER)
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and 1 <= int(match[1]) <= len(_ORDER):
            step = _ORDER[int(match[1]) - 1]
            if found[step] is None:
                found[step] = match[2].strip()
    return found
