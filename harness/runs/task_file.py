"""Your own tasks: task inputs from the command line, task files, and their gold labels.

A *task file* lists tasks to run as a batch (``harness run --tasks FILE``), as JSON Lines
(``.jsonl``: one object per line; blank lines and lines starting with ``#`` are skipped), a
JSON array (``.json``) or TOML (``.toml``: an array of ``[[tasks]]`` tables). Each task has::

    id          unique name (required)
    prompt      what the user asks (required)
    skill       the manifest skill whose phases the certifier uses (optional)
    inputs      an object: the task inputs the manifest's ``input:FIELD`` sources read
    system      a system prompt (optional; default: the loop's)
    max_turns   a turn budget for this task (optional)
    gold_answer a phrase the final answer must contain, case-insensitive (optional)
    gold_calls  the calls a correct run makes, in order (optional): each entry is
                {"name": ..., "arguments": {...}}, or a list of them (a group that one
                parallel message may carry: a fan-out window)

A task with ``gold_answer`` or ``gold_calls`` is scored (:func:`failures`); with
``gold_calls`` it can also run under the gold policy (the engine forced to emit them).
:func:`load_task_file` raises :class:`~harness.errors.ConfigError` naming the file, the line
or entry and the field.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.loop.task import GoldCall, Task
from harness.messages import ToolCall

__all__ = ("TASK_FIELDS", "failures", "load_task_file", "parse_inputs", "task_from_dict")

#: The fields a task of a task file may have.
TASK_FIELDS = (
    "id",
    "prompt",
    "skill",
    "inputs",
    "system",
    "max_turns",
    "gold_answer",
    "gold_calls",
)


def parse_inputs(text: str) -> dict[str, Any]:
    """``--inputs``: a JSON object, or ``@FILE`` holding one."""
    where = "--inputs"
    if text.startswith("@"):
        path = Path(text[1:])
        where = f"--inputs file {str(path)!r}"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"Cannot read {where}: {exc.strerror or exc}; pass @FILE naming a JSON file."
            ) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            'pass an object like \'{"keys": ["a", "b"]}\' or @FILE.'
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{where} must be a JSON object (field names to values), got {type(value).__name__}."
        )
    return value


def _gold_call(raw: Any, at: str) -> GoldCall:
    if (
        not isinstance(raw, Mapping)
        or not isinstance(raw.get("name"), str)
        or not isinstance(raw.get("arguments", {}), Mapping)
    ):
        raise ConfigError(
            f"{at}: each gold call is {{'name': TOOL, 'arguments': {{...}}}}, got {raw!r:.80}."
        )
    return GoldCall(raw["name"], dict(raw.get("arguments", {})))


def task_from_dict(raw: Any, at: str) -> Task:
    """One task of a task file (``at`` names where it came from, for errors)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{at}: a task is an object with id and prompt, got {raw!r:.80}.")
    unknown = sorted(set(raw) - set(TASK_FIELDS))
    if unknown:
        raise ConfigError(f"{at}: unknown field(s) {unknown}; a task has {', '.join(TASK_FIELDS)}.")
    for name in ("id", "prompt"):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise ConfigError(f"{at}: field {name!r} is required and must be a non-empty string.")
    for name in ("skill", "system", "gold_answer"):
        if name in raw and not isinstance(raw[name], str):
            raise ConfigError(f"{at}: field {name!r} must be a string.")
    inputs = raw.get("inputs", {})
    if not isinstance(inputs, Mapping):
        raise ConfigError(f"{at}: field 'inputs' must be an object (field names to values).")
    max_turns = raw.get("max_turns")
    if max_turns is not None and (not isinstance(max_turns, int) or max_turns < 1):
        raise ConfigError(f"{at}: field 'max_turns' must be a whole number of at least 1.")
    steps: list[tuple[GoldCall, ...]] = []
    gold_calls = raw.get("gold_calls", [])
    if not isinstance(gold_calls, list):
        raise ConfigError(f"{at}: field 'gold_calls' must be a list of calls.")
    for i, entry in enumerate(gold_calls):
        where = f"{at}, gold_calls[{i}]"
        group = entry if isinstance(entry, list) else [entry]
        steps.append(tuple(_gold_call(c, where) for c in group))
    return Task(
        id=raw["id"],
        prompt=raw["prompt"],
        system=raw.get("system"),
        skill=raw.get("skill"),
        inputs=dict(inputs),
        gold_steps=tuple(steps),
        gold_answer=raw.get("gold_answer"),
        max_turns=max_turns,
    )


def load_task_file(path: str | Path) -> list[Task]:
    """The tasks of a ``.jsonl``, ``.json`` or ``.toml`` task file (module docstring); ids are unique."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"Task file {str(p)!r} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read task file {str(p)!r}: {exc}.") from None
    if p.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{p}: not valid TOML: {exc}.") from None
        entries = data.get("tasks")
        if not isinstance(entries, list) or set(data) - {"tasks"}:
            raise ConfigError(f"{p}: a TOML task file holds only [[tasks]] tables.")
        tasks = [task_from_dict(e, f"{p}, task #{i + 1}") for i, e in enumerate(entries)]
    elif p.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{p}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})."
            ) from None
        if not isinstance(data, list):
            raise ConfigError(f"{p}: a .json task file is a JSON array of tasks.")
        tasks = [task_from_dict(e, f"{p}, task #{i + 1}") for i, e in enumerate(data)]
    elif p.suffix in (".jsonl", ".ndjson"):
        tasks = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{p}, line {number}: not valid JSON ({exc.msg} at column {exc.colno}); "
                    "a JSONL task file has one JSON object per line."
                ) from None
            tasks.append(task_from_dict(raw, f"{p}, line {number}"))
    else:
        raise ConfigError(
            f"Task file {str(p)!r} has suffix {p.suffix!r}; name it .jsonl (JSON Lines), .json (an array) or .toml."
        )
    if not tasks:
        raise ConfigError(f"Task file {str(p)!r} holds no tasks.")
    _check_unique([t.id for t in tasks], p)
    return tasks


def _check_unique(ids: Sequence[str], path: Path) -> None:
    seen: set[str] = set()
    for task_id in ids:
        if task_id in seen:
            raise ConfigError(f"{path}: task id {task_id!r} appears twice; ids must be unique.")
        seen.add(task_id)


def failures(task: Task, calls: Iterable[ToolCall], answer: str | None) -> list[str]:
    """Why a run of ``task`` with these ``calls`` and ``answer`` misses its gold label (empty
    when it meets it, or when the task has none): every gold call made (same tool, same
    parsed arguments), the gold answer phrase in the answer (case-insensitive)."""
    out: list[str] = []
    made = list(calls)
    for gold in task.gold_calls:
        if not any(gold.matches(c) for c in made):
            arguments = json.dumps(dict(gold.arguments), sort_keys=True)
            out.append(f"gold call {gold.name}({arguments}) not made")
    if task.gold_answer is not None and task.gold_answer.lower() not in (answer or "").lower():
        out.append(f"the answer does not contain {task.gold_answer!r}")
    return out
