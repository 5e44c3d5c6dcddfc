"""The three manifest-guided levers (:data:`LEVERS`: ``input_enums``, ``skill_tools``,
``open_slots``), the same for every arm. Constrained decoding: an argument the manifest sources
from a task input may only take that input's values.

A small model invents keys (``read_doc("d417")`` when the prompt names d558 and d484). When a
skill's manifest says an argument comes from ``input:FIELD`` in every phase that uses its tool,
:func:`input_enum_specs` adds an ``enum`` of that input's values to the argument's JSON schema,
so the engine's reply grammar (one strict branch per tool) cannot emit anything else. The
model still decides which value, in which order, and when to stop. The specs are the same for
every arm (S, F, P, P+V), so the comparison stays fair; the tools block of the prompt shows the
enum too.

:func:`skill_specs` is the other manifest-guided lever (``LoopConfig.skill_tools``): only the
tools the skill's phases name are offered, so neither the prompt's tools block nor the reply
grammar holds a tool the skill never uses. Both are fixed for the whole run (the prompt prefix
stays the same turn after turn) and the same for every arm.

:func:`open_slot_specs` narrows the grammar further, turn by turn (``LoopConfig.open_slots``):
a fan-out phase fills each of its input slots once, so an enum argument may only take the
values no earlier call of its tool used (an argument whose every value was used, such as a
tag every call shares, keeps them all), and a tool every combination of whose enum values was
called is *closed*: the grammar leaves it out, and when every tool of the run is closed only
the final answer remains. Only the reply grammar narrows (``GenerationSettings.grammar_tools``);
the prompt keeps the full enums, so its prefix is stable. The calls counted are the ones
emitted into the context, withheld results included, so every arm narrows alike; inside one
parallel message duplicates are not excluded (that is the P+V validator's job), but the
message is capped at the open slots' count (:func:`open_slot_count`), the most calls a serial
run could still make. What the model
still decides: whether to call at all, which open value when several enum arguments remain
free, and its answer.

Values of ``input:FIELD``: the field itself when it is a scalar; its items when it is a list;
for a list of records (``[{"key": …, "field": …}]``) the record's value under the argument's
own name. Only values of the argument's declared JSON type are kept; an argument with no such
value, a ``model``, ``args:`` or ``result:`` source in any phase, or no schema property is left
as it is.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from harness.messages import ToolCall, ToolSpec
from harness.skills.manifest import ArgSource, Skill

__all__ = (
    "LEVERS",
    "input_enum_specs",
    "input_values",
    "open_slot_count",
    "open_slot_specs",
    "skill_specs",
)

#: The levers' :class:`~harness.loop.config.LoopConfig` field names (each off by default), as
#: the CLI options, job specs and run plans name them.
LEVERS: tuple[str, ...] = ("input_enums", "skill_tools", "open_slots")

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def input_values(source: ArgSource, argument: str, inputs: Mapping[str, Any]) -> list[Any]:
    """The values ``source`` (an ``input`` source) allows for ``argument``, in input order."""
    fields = [inputs[source.ref]] if source.ref is not None and source.ref in inputs else []
    if source.ref is None:
        fields = list(inputs.values())
    out: list[Any] = []
    for value in fields:
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            picked = item.get(argument) if isinstance(item, Mapping) else item
            if picked is not None and not isinstance(picked, Mapping | list | tuple):
                out.append(picked)
    return list(dict.fromkeys(out))


def skill_specs(specs: Sequence[ToolSpec], skill: Skill) -> list[ToolSpec]:
    """The specs of the tools ``skill``'s phases name, in the toolset's order; all of ``specs``
    when the skill names none of them (a skill with no phases narrows nothing)."""
    named = {tool for phase in skill.phases for tool in phase.tools}
    kept = [s for s in specs if str(s.get("function", s).get("name")) in named]
    return kept or list(specs)


def input_enum_specs(
    specs: Sequence[ToolSpec], skill: Skill, inputs: Mapping[str, Any]
) -> list[ToolSpec]:
    """``specs`` with every argument ``skill`` sources from a task input in all of its phases
    restricted to those inputs' values (module docstring). The specs passed in are not changed."""
    uses: dict[str, int] = {}
    sourced: dict[tuple[str, str], int] = {}
    allowed: dict[tuple[str, str], list[Any]] = {}
    for phase in skill.phases:
        for tool in phase.tools:
            uses[tool] = uses.get(tool, 0) + 1
        for (tool, argument), source in phase.args.items():
            if source.kind == "input":
                key = (tool, argument)
                sourced[key] = sourced.get(key, 0) + 1
                values = [*allowed.get(key, []), *input_values(source, argument, inputs)]
                allowed[key] = list(dict.fromkeys(values))
    out: list[ToolSpec] = []
    for spec in specs:
        narrowed = copy.deepcopy(dict(spec))
        function = narrowed.get("function", narrowed)
        properties = (function.get("parameters") or {}).get("properties") or {}
        name = str(function.get("name"))
        for argument, schema in properties.items():
            key = (name, argument)
            chosen = allowed.get(key) if sourced.get(key) == uses.get(name) else None
            kinds = _TYPES.get(str(schema.get("type"))) if isinstance(schema, dict) else None
            if not chosen or kinds is None:
                continue
            typed = [v for v in chosen if isinstance(v, kinds) and not (
                isinstance(v, bool) and bool not in kinds)]  # fmt: skip
            if typed:
                schema["enum"] = typed
        out.append(narrowed)
    return out


def open_slot_specs(specs: Sequence[ToolSpec], calls: Sequence[ToolCall]) -> list[ToolSpec] | None:
    """``specs`` narrowed to the open slots, given the ``calls`` emitted so far (module
    docstring); ``None`` when nothing narrows. A tool every combination of whose enum values
    was called is closed (left out); when every tool is, only the answer remains."""
    used: dict[tuple[str, str], set[str]] = {}
    combos: dict[str, list[dict[str, Any]]] = {}
    for call in calls:
        arguments = dict(call.args.value or {})
        combos.setdefault(call.name, []).append(arguments)
        for argument, value in arguments.items():
            used.setdefault((call.name, argument), set()).add(_key(value))
    out: list[ToolSpec] = []
    changed = False
    for spec in specs:
        function = spec.get("function", spec)
        name = str(function.get("name"))
        properties = (function.get("parameters") or {}).get("properties") or {}
        enums = _enums(properties)
        if enums and _all_called(enums, combos.get(name, [])):
            changed = True  # closed: every slot of this tool is filled
            continue
        narrowing = {
            a: [v for v in properties[a]["enum"] if _key(v) not in used.get((name, a), set())]
            for a in enums
        }
        narrowing = {a: vs for a, vs in narrowing.items() if 0 < len(vs) < len(enums[a])}
        if not narrowing:
            out.append(spec)
            continue
        narrowed = copy.deepcopy(dict(spec))
        props = narrowed.get("function", narrowed)["parameters"]["properties"]
        for argument, values in narrowing.items():
            props[argument]["enum"] = values
        out.append(narrowed)
        changed = True
    return out if changed else None


def open_slot_count(specs: Sequence[ToolSpec], calls: Sequence[ToolCall]) -> int | None:
    """How many calls can still fill an open slot, given the ``calls`` emitted so far: per
    tool, its enum combinations not yet called; ``None`` (no bound) when a tool has an argument
    without an enum (it has no slots to count). A parallel message is capped at this many
    calls, as a serial run can make at most this many before every tool is closed."""
    combos: dict[str, list[Mapping[str, Any]]] = {}
    for call in calls:
        combos.setdefault(call.name, []).append(dict(call.args.value or {}))
    total = 0
    for spec in specs:
        function = spec.get("function", spec)
        properties = (function.get("parameters") or {}).get("properties") or {}
        if not properties:
            return None
        enums = _enums(properties)
        if len(enums) < len(properties):
            return None
        total += _needed(enums) - len(_seen(enums, combos.get(str(function.get("name")), [])))
    return total


def _enums(properties: Mapping[str, Any]) -> dict[str, list[str]]:
    """The enum arguments of a tool's schema properties, each value as its canonical key."""
    return {
        a: [_key(v) for v in p["enum"]]
        for a, p in properties.items()
        if isinstance(p, dict) and isinstance(p.get("enum"), list)
    }


def _needed(enums: Mapping[str, Sequence[str]]) -> int:
    needed = 1
    for values in enums.values():
        needed *= len(set(values))
    return needed


def _seen(
    enums: Mapping[str, Sequence[str]], calls: Sequence[Mapping[str, Any]]
) -> set[tuple[str, ...]]:
    return {
        tuple(_key(c.get(a)) for a in enums)
        for c in calls
        if all(_key(c.get(a)) in enums[a] for a in enums)
    }


def _all_called(enums: Mapping[str, Sequence[str]], calls: Sequence[Mapping[str, Any]]) -> bool:
    """Every combination of the enum arguments' values was called."""
    return len(_seen(enums, calls)) >= _needed(enums)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
