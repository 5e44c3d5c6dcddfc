"""The workload: 48 deterministic, seeded loop tasks over the workspace toolset.

:func:`generate_tasks` builds 16 **fan-out** tasks (one window each, sizes 2,3,4,4,5,5,...,
10,10 over the templates ``survey``, ``set_status_all``, ``tag_all``, ``annotate_each``), 16
**chain** tasks (``follow``/``follow_mark``: every call needs the previous result, so no window
may certify: the null arm) and 16 **mixed** tasks (``triage``, ``trace_and_mark``,
``review_notes``, ``handover``: fan-out phases, chains, disjoint writes and conflicting ones).
Same seed, same tasks, byte for byte (:func:`tasks_to_json`).

Beside the paper's 48, :func:`generate_family` builds a **task family** (:data:`FAMILIES`):
``easy_fan_out`` (:mod:`harness.bench._easy_templates`) is 16 small fan-out tasks, one
window of n = 2-4 calls each, that a 135M model can solve under the model policy. Its ids
(``easy_fan_out-00`` .. ``-15``), store seeds and skills are its own, so the 48 tasks do not
change; :func:`workload_tasks` is the 48 and every family, which ``harness run --task`` and
``harness bench --tasks`` pick from.

Each :class:`WorkloadTask` bundles a :class:`harness.loop.task.Task` (prompt, system, skill,
inputs, gold steps = certified windows and single calls, gold answer), the seed that rebuilds
its initial store (:meth:`WorkloadTask.initial_state`), the manifest skill, the expected
certified window sizes (``windows``: every gold group of two or more calls; the schema-sound
detector certifies exactly these) and a :class:`GoldLabel` decided by construction.

**Gold label and score.** :meth:`WorkloadTask.score` ``(calls, final_state, answer) -> bool`` is
true when all three hold:

1. the final store's fingerprint equals the expected one (the store the task description
   leads to, edited directly, not through the tools);
2. every required call (every gold call) was made: the same tool with the same arguments, or,
   for a required read, any read-only call whose read targets cover it (``read_doc(k)`` covers
   ``get_field(k, f)``);
3. the answer contains every expected phrase and no forbidden one (case-insensitive, whole
   words, punctuation ignored); tasks whose answer does not matter expect nothing.

:meth:`WorkloadTask.failures` gives the reasons when the score is false.

Task files: :func:`save_tasks` / :func:`load_tasks` (JSON; a file that does not validate raises
:class:`TaskFileError` naming the entry, the field and the fix).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args

import jsonschema

from harness.bench._easy_templates import (
    EASY_SYSTEM_PROMPT,
    EASY_TEMPLATES,
    LOOKUP_SYSTEM_PROMPT,
    LOOKUP_TEMPLATES,
)
from harness.bench._templates import SYSTEM_PROMPT, TEMPLATES
from harness.certify.conflicts import contains
from harness.errors import ConfigError
from harness.loop.task import GoldCall, Task
from harness.messages import ToolCall
from harness.tools.toolset import Toolset
from harness.toolsets.workspace import Latency, WorkspaceState, fingerprint, make_toolset, new_state

__all__ = (
    "ALL_KINDS",
    "FAMILIES",
    "KINDS",
    "STATE_SIZE",
    "SYSTEM_PROMPT",
    "GoldLabel",
    "Kind",
    "TaskFileError",
    "WorkloadTask",
    "build_task",
    "generate_family",
    "generate_tasks",
    "load_tasks",
    "save_tasks",
    "task_by_id",
    "tasks_from_json",
    "tasks_to_json",
    "workload_tasks",
)

Kind = Literal["fan_out", "chain", "mixed", "easy_fan_out", "easy_lookup"]
#: The kinds of the paper's 48 tasks (:func:`generate_tasks`).
KINDS: Final[tuple[Kind, ...]] = ("fan_out", "chain", "mixed")
#: Task families beside the 48 (:func:`generate_family`).
FAMILIES: Final[tuple[Kind, ...]] = ("easy_fan_out", "easy_lookup")
ALL_KINDS: Final[tuple[Kind, ...]] = get_args(Kind)
STATE_SIZE: Final = 24
TASKS_PER_KIND: Final = 16
_ATTEMPTS: Final = 100

_FAN_OUT_SIZES = (2, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10)
_FAN_OUT_TEMPLATES = ("survey", "set_status_all", "tag_all", "annotate_each")
_MIXED: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("triage", (3, 2)),
    ("trace_and_mark", (2,)),
    ("review_notes", (2, 2)),
    ("handover", (1, 2)),
    ("triage", (4, 2)),
    ("trace_and_mark", (3,)),
    ("review_notes", (3, 2)),
    ("handover", (2, 3)),
    ("triage", (5, 3)),
    ("trace_and_mark", (4,)),
    ("review_notes", (4, 3)),
    ("handover", (2, 4)),
    ("triage", (6, 4)),
    ("trace_and_mark", (5,)),
    ("review_notes", (5, 3)),
    ("handover", (3, 4)),
)
#: easy_fan_out: the four templates in turn, window sizes 2, 3, 4 in turn.
_EASY_TEMPLATES = ("easy_tag", "easy_status", "easy_read", "easy_note")
_EASY_SIZES = (2, 3, 4)
#: Each family: its templates in turn, with the window sizes 2, 3, 4 in turn.
_FAMILY_TEMPLATES: dict[Kind, tuple[str, ...]] = {
    "easy_fan_out": _EASY_TEMPLATES,
    "easy_lookup": ("easy_lookup",),
}
_ALL_TEMPLATES = {**TEMPLATES, **EASY_TEMPLATES, **LOOKUP_TEMPLATES}
_SYSTEM = {"easy_fan_out": EASY_SYSTEM_PROMPT, "easy_lookup": LOOKUP_SYSTEM_PROMPT}


class TaskFileError(ConfigError):
    """A task file (JSON) that does not validate; the message names the entry and field."""


def _specs() -> list[tuple[Kind, str, tuple[int, ...]]]:
    fan_out: list[tuple[Kind, str, tuple[int, ...]]] = [
        ("fan_out", _FAN_OUT_TEMPLATES[i % 4], (n,)) for i, n in enumerate(_FAN_OUT_SIZES)
    ]
    chain: list[tuple[Kind, str, tuple[int, ...]]] = [
        ("chain", "follow" if i % 2 == 0 else "follow_mark", (2 + i // 2,))
        for i in range(TASKS_PER_KIND)
    ]
    mixed: list[tuple[Kind, str, tuple[int, ...]]] = [("mixed", t, p) for t, p in _MIXED]
    return fan_out + chain + mixed


_WORD = re.compile(r"[^0-9a-z]+")


def _normalise(text: str) -> str:
    return " " + " ".join(_WORD.split(text.casefold())).strip() + " "


def _contains(text: str, phrase: str) -> bool:
    return _normalise(phrase) in _normalise(text)


def _canonical(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class GoldLabel:
    """What a correct run achieves, decided by construction (see the module docstring)."""

    final_fingerprint: str
    required_calls: tuple[GoldCall, ...]
    answer_expect: tuple[str, ...] = ()
    answer_forbid: tuple[str, ...] = ()

    def answer_failures(self, answer: str | None) -> list[str]:
        text = answer or ""
        out = [f"answer lacks {p!r}" for p in self.answer_expect if not _contains(text, p)]
        out += [f"answer contains {p!r}" for p in self.answer_forbid if _contains(text, p)]
        return out


@dataclass(frozen=True)
class WorkloadTask:
    """One workload task: the loop task, its store seed, its expected windows and gold label."""

    task: Task
    kind: Kind
    template: str
    state_seed: int
    state_size: int
    step_phases: tuple[str, ...]
    windows: tuple[int, ...]
    gold: GoldLabel
    initial_fingerprint: str

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def skill(self) -> str:
        """The manifest skill (``manifests/workspace.toml``) this task runs under."""
        assert self.task.skill is not None
        return self.task.skill

    def initial_state(self) -> WorkspaceState:
        """A fresh copy of the task's initial store (rebuilt from its seed)."""
        return new_state(self.state_seed, size=self.state_size)

    def toolset(
        self, state: WorkspaceState | None = None, *, latency: Latency | float | None = None
    ) -> tuple[Toolset, WorkspaceState]:
        """A toolset bound to ``state`` (a fresh initial store by default) and that store."""
        store = self.initial_state() if state is None else state
        return make_toolset(store, latency=latency), store

    def failures(
        self,
        calls: Iterable[ToolCall | GoldCall],
        final_state: WorkspaceState | str,
        answer: str | None,
    ) -> list[str]:
        """Why a run with these ``calls``, ``final_state`` (or its fingerprint) and ``answer``
        does not score (empty when it does)."""
        out: list[str] = []
        final = final_state if isinstance(final_state, str) else fingerprint(final_state)
        if final != self.gold.final_fingerprint:
            out.append("the final store differs from the expected one")
        made = [_as_pair(c) for c in calls]
        missing = [g for g in self.gold.required_calls if not _covered(g, made)]
        out += [f"required call {g.name}({_canonical(g.arguments)}) not made" for g in missing]
        out += self.gold.answer_failures(answer)
        return out

    def score(
        self,
        calls: Iterable[ToolCall | GoldCall],
        final_state: WorkspaceState | str,
        answer: str | None,
    ) -> bool:
        """True when the run succeeded (module docstring: fingerprint, required calls, answer)."""
        return not self.failures(calls, final_state, answer)

    def to_dict(self) -> dict[str, Any]:
        """JSON data (what :func:`save_tasks` writes)."""
        t = self.task
        return {
            "id": t.id,
            "kind": self.kind,
            "template": self.template,
            "skill": t.skill,
            "system": t.system,
            "prompt": t.prompt,
            "inputs": dict(t.inputs),
            "gold_steps": [[_call_dict(c) for c in step] for step in t.gold_steps],
            "step_phases": list(self.step_phases),
            "gold_answer": t.gold_answer,
            "max_turns": t.max_turns,
            "state_seed": self.state_seed,
            "state_size": self.state_size,
            "initial_fingerprint": self.initial_fingerprint,
            "windows": list(self.windows),
            "gold": {
                "final_fingerprint": self.gold.final_fingerprint,
                "required_calls": [_call_dict(c) for c in self.gold.required_calls],
                "answer_expect": list(self.gold.answer_expect),
                "answer_forbid": list(self.gold.answer_forbid),
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "task") -> WorkloadTask:
        """Validate and rebuild a task from :meth:`to_dict` data; raises :class:`TaskFileError`."""
        _validate_entry(data, where)
        task = Task(
            id=data["id"],
            prompt=data["prompt"],
            system=data["system"],
            skill=data["skill"],
            inputs=data["inputs"],
            gold_steps=tuple(
                tuple(GoldCall(c["name"], c["arguments"]) for c in step)
                for step in data["gold_steps"]
            ),
            gold_answer=data["gold_answer"],
            max_turns=data["max_turns"],
            answer_facts=tuple(data["gold"]["answer_expect"]),
        )
        gold = data["gold"]
        out = cls(
            task=task,
            kind=data["kind"],
            template=data["template"],
            state_seed=data["state_seed"],
            state_size=data["state_size"],
            step_phases=tuple(data["step_phases"]),
            windows=tuple(data["windows"]),
            gold=GoldLabel(
                final_fingerprint=gold["final_fingerprint"],
                required_calls=tuple(
                    GoldCall(c["name"], c["arguments"]) for c in gold["required_calls"]
                ),
                answer_expect=tuple(gold["answer_expect"]),
                answer_forbid=tuple(gold["answer_forbid"]),
            ),
            initial_fingerprint=data["initial_fingerprint"],
        )
        _check_consistency(out, where)
        return out


def _call_dict(call: GoldCall) -> dict[str, Any]:
    return {"name": call.name, "arguments": dict(call.arguments)}


def _as_pair(call: ToolCall | GoldCall) -> tuple[str, Mapping[str, Any] | None]:
    if isinstance(call, GoldCall):
        return call.name, call.arguments
    try:
        parsed = call.parsed_arguments()
    except ValueError:
        return call.name, None
    return call.name, parsed if isinstance(parsed, dict) else None


_PROBE = make_toolset(new_state(0, size=2))  # effects only: which reads cover which


def _covered(required: GoldCall, made: Sequence[tuple[str, Mapping[str, Any] | None]]) -> bool:
    want = _canonical(required.arguments)
    if any(n == required.name and a is not None and _canonical(a) == want for n, a in made):
        return True
    tool = _PROBE.get(required.name)
    if tool is None or not tool.effect.read_only:
        return False
    needed = tool.effect.reads(required.arguments)
    if not needed:
        return False
    for name, arguments in made:
        other = _PROBE.get(name)
        if other is None or arguments is None or not other.effect.read_only:
            continue
        covers = other.effect.reads(arguments)
        if covers is not None and all(any(contains(c, t) for c in covers) for t in needed):
            return True
    return False


# ---------------------------------------------------------------------------------- build


def build_task(
    seed: int, index: int, kind: Kind, template: str, params: tuple[int, ...]
) -> WorkloadTask:
    """The task number ``index`` of ``kind`` built by ``template`` with ``params`` from
    ``seed`` (deterministic: the same arguments build the same task, store and gold label)."""
    number = index % TASKS_PER_KIND
    for attempt in range(_ATTEMPTS):
        state_seed = seed * 10_000 + index * _ATTEMPTS + attempt
        state = new_state(state_seed, size=STATE_SIZE)
        rng = random.Random(f"task:{seed}:{index}:{attempt}")
        built = _ALL_TEMPLATES[template](state, rng, params)
        if built is not None:
            break
    else:  # pragma: no cover - every template fits a 24-document store within a few tries
        raise RuntimeError(f"template {template!r} found no store in {_ATTEMPTS} seeds")
    steps = tuple(group for _, group in built.steps)
    calls = tuple(c for group in steps for c in group)
    task = Task(
        id=f"{kind}-{number:02d}",
        prompt=built.prompt,
        system=_SYSTEM.get(kind, SYSTEM_PROMPT),
        skill=template,
        inputs=built.inputs,
        gold_steps=steps,
        gold_answer=built.answer,
        max_turns=2 * len(calls) + 4,
        answer_facts=built.expect,
    )
    return WorkloadTask(
        task=task,
        kind=kind,
        template=template,
        state_seed=state_seed,
        state_size=STATE_SIZE,
        step_phases=tuple(phase for phase, _ in built.steps),
        windows=tuple(len(group) for group in steps if len(group) >= 2),
        gold=GoldLabel(
            final_fingerprint=built.final.fingerprint(),
            required_calls=calls,
            answer_expect=built.expect,
            answer_forbid=built.forbid,
        ),
        initial_fingerprint=state.fingerprint(),
    )


def generate_tasks(seed: int = 0) -> list[WorkloadTask]:
    """The 48 workload tasks for ``seed`` (16 fan-out, 16 chain, 16 mixed, in that order)."""
    _check_seed(seed)
    return [
        build_task(seed, index, kind, template, params)
        for index, (kind, template, params) in enumerate(_specs())
    ]


def _check_seed(seed: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"The task seed must be a non-negative integer, got {seed!r}.")


def _family_specs(family: Kind) -> list[tuple[Kind, str, tuple[int, ...]]]:
    if family not in FAMILIES:
        raise ConfigError(f"Unknown task family {family!r}; the families are {list(FAMILIES)}.")
    templates = _FAMILY_TEMPLATES[family]
    return [
        (family, templates[i % len(templates)], (_EASY_SIZES[i % 3],))
        for i in range(TASKS_PER_KIND)
    ]


def generate_family(family: Kind, seed: int = 0) -> list[WorkloadTask]:
    """The 16 tasks of ``family`` (:data:`FAMILIES`) for ``seed``; their store seeds follow
    the 48 tasks' and the families' before it, so no two tasks share a store seed."""
    _check_seed(seed)
    specs = _family_specs(family)  # an unknown family is an error naming the families
    offset = len(_specs()) + TASKS_PER_KIND * FAMILIES.index(family)
    return [
        build_task(seed, offset + i, kind, template, params)
        for i, (kind, template, params) in enumerate(specs)
    ]


def workload_tasks(seed: int = 0) -> list[WorkloadTask]:
    """The 48 tasks of :func:`generate_tasks` and then every family's (:data:`FAMILIES`)."""
    return generate_tasks(seed) + [t for f in FAMILIES for t in generate_family(f, seed)]


def task_by_id(tasks: Sequence[WorkloadTask], task_id: str) -> WorkloadTask:
    """The task ``task_id``; a :class:`~harness.errors.ConfigError` listing the ids if absent."""
    for task in tasks:
        if task.id == task_id:
            return task
    ids = [t.id for t in tasks]
    raise ConfigError(
        f"No task {task_id!r}; ids run {ids[0]} .. {ids[-1]} per kind "
        f"(e.g. fan_out-03, chain-00, mixed-15, easy_fan_out-02). Run `harness tasks list` to "
        "see them all."
    )


# ------------------------------------------------------------------------------ task files


def tasks_to_json(tasks: Sequence[WorkloadTask]) -> str:
    """Canonical JSON of ``tasks`` (sorted keys): equal strings iff equal tasks."""
    return json.dumps(
        {"version": 1, "tasks": [t.to_dict() for t in tasks]},
        sort_keys=True,
        indent=1,
        ensure_ascii=False,
    )


def tasks_from_json(text: str, source: str = "<string>") -> list[WorkloadTask]:
    """Parse and validate :func:`tasks_to_json` output; raises :class:`TaskFileError`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(
            f"{source}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}). {_FIX}"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise TaskFileError(f"{source}: expected an object with a 'tasks' list. {_FIX}")
    if data.get("version") != 1:
        raise TaskFileError(
            f"{source}: unknown version {data.get('version')!r} (expected 1). {_FIX}"
        )
    tasks = [
        WorkloadTask.from_dict(entry, f"{source}: task #{i + 1}")
        for i, entry in enumerate(data["tasks"])
    ]
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise TaskFileError(f"{source}: two tasks have the id {task.id!r}. {_FIX}")
        seen.add(task.id)
    return tasks


def save_tasks(path: str | Path, tasks: Sequence[WorkloadTask]) -> None:
    """Write ``tasks`` as a JSON task file."""
    Path(path).write_text(tasks_to_json(tasks) + "\n", encoding="utf-8")


def load_tasks(path: str | Path) -> list[WorkloadTask]:
    """Read and validate a JSON task file; raises :class:`TaskFileError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFileError(f"Task file {str(p)!r} does not exist. {_FIX}") from None
    return tasks_from_json(text, str(p))


_FIX = (
    "Regenerate the file with `harness.bench.workload.save_tasks(path, generate_tasks(seed))` "
    "instead of editing it by hand."
)

_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "arguments"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string", "minLength": 1}, "arguments": {"type": "object"}},
}
_STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
_HEX: dict[str, Any] = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "id",
        "kind",
        "template",
        "skill",
        "system",
        "prompt",
        "inputs",
        "gold_steps",
        "step_phases",
        "gold_answer",
        "max_turns",
        "state_seed",
        "state_size",
        "initial_fingerprint",
        "windows",
        "gold",
    ],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "kind": {"enum": list(ALL_KINDS)},
        "template": {"enum": sorted(_ALL_TEMPLATES)},
        "skill": {"type": "string", "minLength": 1},
        "system": {"type": ["string", "null"]},
        "prompt": {"type": "string", "minLength": 1},
        "inputs": {"type": "object"},
        "gold_steps": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "array", "minItems": 1, "items": _CALL_SCHEMA},
        },
        "step_phases": _STRINGS,
        "gold_answer": {"type": ["string", "null"]},
        "max_turns": {"type": ["integer", "null"], "minimum": 1},
        "state_seed": {"type": "integer"},
        "state_size": {"type": "integer", "minimum": 2},
        "initial_fingerprint": _HEX,
        "windows": {"type": "array", "items": {"type": "integer", "minimum": 2}},
        "gold": {
            "type": "object",
            "additionalProperties": False,
            "required": ["final_fingerprint", "required_calls", "answer_expect", "answer_forbid"],
            "properties": {
                "final_fingerprint": _HEX,
                "required_calls": {"type": "array", "items": _CALL_SCHEMA},
                "answer_expect": _STRINGS,
                "answer_forbid": _STRINGS,
            },
        },
    },
}


def _validate_entry(data: Any, where: str) -> None:
    validator = jsonschema.Draft202012Validator(_ENTRY_SCHEMA)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        field = "/".join(str(p) for p in error.absolute_path) or "(entry)"
        raise TaskFileError(f"{where}, field {field!r}: {error.message}. {_FIX}")


def _check_consistency(task: WorkloadTask, where: str) -> None:
    """What the schema cannot say: steps match phases, windows match steps, tools exist, and
    the seed rebuilds the same store."""
    at = f"{where} ({task.id})"
    steps = task.task.gold_steps
    if len(task.step_phases) != len(steps):
        raise TaskFileError(
            f"{at}, field 'step_phases': {len(task.step_phases)} phases for {len(steps)} gold "
            f"steps; there must be one per step. {_FIX}"
        )
    sizes = tuple(len(s) for s in steps if len(s) >= 2)
    if task.windows != sizes:
        raise TaskFileError(
            f"{at}, field 'windows': {list(task.windows)} but the gold steps of two or more "
            f"calls have sizes {list(sizes)}. {_FIX}"
        )
    unknown = sorted({c.name for c in task.task.gold_calls} - set(_PROBE))
    if unknown:
        raise TaskFileError(
            f"{at}, field 'gold_steps': unknown tool(s) {unknown}; the workspace has "
            f"{sorted(_PROBE)}. {_FIX}"
        )
    rebuilt = new_state(task.state_seed, size=task.state_size).fingerprint()
    if rebuilt != task.initial_fingerprint:
        raise TaskFileError(
            f"{at}, field 'initial_fingerprint': store seed {task.state_seed} rebuilds a "
            f"different store ({rebuilt[:12]}…, file says {task.initial_fingerprint[:12]}…): "
            f"the store generator changed since the file was written. {_FIX}"
        )
