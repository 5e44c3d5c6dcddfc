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

**Extraction** (:func:`extract`) is the one reading of a reply that every arm, the scorer,
the verifiers and the consensus vote share: a numeric step's value is the one integer its
reply holds ("34", "This person is 34 years old, and the team"; none for "34 + 27 = 61" or
"about thirty"); a name or city step's value is the one candidate it names (whole words,
case-insensitive) — for ``older`` the task's two people, for ``city`` the cities the
generator draws from — and none when it names none or several.

**Scoring** (:func:`correct`, against the gold): the extracted value is the gold one.

**Verifiers** (what the fabric checks, without the gold), on the extracted value: numeric
steps and ``older`` must have one; ``city``'s must be grounded, a value of the record the
tool returned. A verifier therefore rejects exactly the replies the scorer cannot read, plus
an ungrounded city: none computes the answer.

**Agreement** between consensus samples (:func:`same_answer`, each step's own comparator):
equal extracted values; a sample without one agrees with no other.

**Consumers** (``sum``, ``older``) are shown each input's extracted value only
(``[age1] 34``; the reply itself when nothing could be extracted), in every arm: the
fabric's flag on a contested input stays in the result and the report, not in the prompt,
where the model copied it instead of answering.

:func:`single_pass_messages` / :func:`parse_single_pass` are the spec's naive contender:
both records and the five questions in one prompt, answered in one generation.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from harness.fabric import (
    NODE_SYSTEM,
    Comparator,
    Node,
    NodeResult,
    TaskGraph,
    Verdict,
    llm_node,
    tool_node,
)
from harness.messages import Message
from harness.tools import Toolset, tool

__all__ = (
    "QUESTIONS",
    "QualityTask",
    "build_graph",
    "correct",
    "extract",
    "generate_tasks",
    "parse_single_pass",
    "same_answer",
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

    def options(self, step: str) -> tuple[str, ...]:
        """The candidates a text step's reply is read against (``older``: the two people;
        ``city``: every city the generator draws from)."""
        return self.people if step == "older" else CITIES


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


def _names(text: str, name: str) -> bool:
    wanted = _words(name)
    words = _words(text)
    return any(words[i : i + len(wanted)] == wanted for i in range(len(words)))


def extract(task: QualityTask, step: str, reply: str | None) -> str | None:
    """The value ``reply`` gives for ``step`` (module docstring), or ``None`` when it gives
    none or several."""
    if reply is None:
        return None
    if QUESTIONS[step][0] == "number":
        found = _INTEGER.findall(reply)
        return str(int(found[0])) if len(found) == 1 else None
    named = [c for c in task.options(step) if _names(reply, c)]
    return named[0] if len(named) == 1 else None


def correct(task: QualityTask, step: str, reply: str | None) -> bool:
    """Is the value ``reply`` gives for ``step`` the gold one?"""
    return extract(task, step, reply) == task.gold[step]


def same_answer(task: QualityTask, step: str) -> Comparator:
    """``step``'s consensus comparator: two samples agree when they give the same value."""

    def same(a: str, b: str) -> bool:
        value = extract(task, step, a)
        return value is not None and value == extract(task, step, b)

    return same


@dataclass(frozen=True)
class _Extracted:
    """A step's verifier: its reply must give a value (module docstring); ``city``'s must
    be a value of the record the tool returned."""

    task: QualityTask
    step: str

    @property
    def name(self) -> str:
        return f"extracted({self.step})"

    def __call__(self, result: Any) -> Verdict:
        task, step = self.task, self.step
        value = extract(task, step, result.text)
        if value is None:
            what = {
                "city": "one city",
                "older": f"exactly one of {' or '.join(task.people)}",
            }.get(step, "one number")
            return Verdict(False, f"the answer must name {what}; answer with it only", self.name)
        if step == "city" and value.casefold() not in {
            v.casefold() for v in task.records[0].values()
        }:
            return Verdict(
                False, f"{value} is not in the record; copy the city from the record", self.name
            )
        return Verdict(True, verifier=self.name)


def _shown(task: QualityTask, dep: str, result: NodeResult) -> str:
    value = extract(task, dep, result.text)
    return f"[{dep}] {value if value is not None else result.text.strip()}"


def build_graph(task: QualityTask) -> TaskGraph:
    """The task's DAG (module docstring); verifiers run only when the mechanism is on."""
    one, two = task.people

    def ask(step: str, prompt: str, deps: list[str]) -> Node:
        _, crit, high = QUESTIONS[step]
        consumes = all(d in QUESTIONS for d in deps)
        return llm_node(
            step,
            prompt,
            deps,
            criticality=crit,
            high_stakes=high,
            verifiers=[_Extracted(task, step)],
            messages=_consumer_messages(task, prompt, deps) if consumes else None,
            same=same_answer(task, step),
        )

    return TaskGraph(
        [
            tool_node("A", "lookup", {"person": one}),
            tool_node("B", "lookup", {"person": two}),
            ask("city", "What city does this person live in? Answer with the city only.", ["A"]),
            ask("age1", "How old is this person? Answer with the number only.", ["A"]),
            ask("age2", "How old is this person? Answer with the number only.", ["B"]),
            ask("sum", "Add these two ages. Answer with one number only.", ["age1", "age2"]),
            ask(
                "older",
                f"{one}'s age is in [age1] and {two}'s age is in [age2]. Who is older, {one} "
                f"or {two}? Answer with the name only.",
                ["age1", "age2"],
            ),
        ]
    )


def _consumer_messages(
    task: QualityTask, prompt: str, deps: Sequence[str]
) -> Callable[[Mapping[str, NodeResult]], list[Message]]:
    """A consumer's chat: the fabric's default layout, each input shown as its value only."""

    def messages(inputs: Mapping[str, NodeResult]) -> list[Message]:
        shown = "\n".join(_shown(task, dep, inputs[dep]) for dep in deps)
        user = f"{prompt}\n\nOutputs of the steps this one builds on:\n{shown}"
        return [{"role": "system", "content": NODE_SYSTEM}, {"role": "user", "content": user}]

    return messages


_SINGLE_SYSTEM = "Answer every question, briefly, one line per question."
_LINE = re.compile(r"^\s*(?:A|Answer|Q)\s*(\d)\s*[:.)-]\s*(.*)$", re.IGNORECASE)
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
        + "\n".join(f"Question {i + 1}. {q}" for i, q in enumerate(questions))
        + "\n\nAnswer each question on its own line as 'A1: answer', with the answer only."
    )
    return [{"role": "system", "content": _SINGLE_SYSTEM}, {"role": "user", "content": body}]


def parse_single_pass(text: str) -> Mapping[str, str | None]:
    """Step id -> the answer on its ``Ak:`` line (``Qk:`` too; ``None`` when the line is
    missing). A line that repeats a question (it ends with ``?``) is no answer."""
    found: dict[str, str | None] = dict.fromkeys(_ORDER)
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and 1 <= int(match[1]) <= len(_ORDER):
            step = _ORDER[int(match[1]) - 1]
            answer = match[2].strip()
            if found[step] is None and answer and not answer.endswith("?"):
                found[step] = answer
    return found
