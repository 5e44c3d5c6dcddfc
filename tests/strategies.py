"""Hypothesis strategies shared by the test suite (append yours; do not rewrite others')."""

from __future__ import annotations

import math
from typing import Any, Literal

from hypothesis import strategies as st

from harness.costmodel import PARAMETERS, Parameter, Regime

# --------------------------------------------------------------------------------------------
# Cost model (harness/costmodel/closed_form.py)

_VALID_BY_KIND: dict[str, st.SearchStrategy[float]] = {
    "positive": st.floats(min_value=1e-3, max_value=1e5, allow_nan=False),
    "nonnegative": st.floats(min_value=0.0, max_value=1e3, allow_nan=False),
    "fraction": st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
    "percent": st.floats(min_value=0.0, max_value=100.0, allow_nan=False),
}

_NOT_A_NUMBER: st.SearchStrategy[Any] = st.one_of(
    st.booleans(), st.none(), st.text(max_size=5), st.lists(st.integers(), max_size=2)
)
_NOT_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])

_INVALID_BY_KIND: dict[str, st.SearchStrategy[Any]] = {
    "positive": st.one_of(
        st.floats(max_value=0.0, allow_nan=False, allow_infinity=False), _NOT_FINITE
    ),
    "nonnegative": st.one_of(st.floats(max_value=-1e-12, allow_infinity=False), _NOT_FINITE),
    "fraction": st.one_of(
        st.floats(min_value=1.0, exclude_min=True, allow_infinity=False),
        st.floats(max_value=0.0, exclude_max=True, allow_infinity=False),
        _NOT_FINITE,
    ),
    "percent": st.one_of(
        st.floats(min_value=100.0, exclude_min=True, allow_infinity=False),
        st.floats(max_value=0.0, exclude_max=True, allow_infinity=False),
        _NOT_FINITE,
    ),
}


def regime_values() -> st.SearchStrategy[dict[str, float]]:
    """A complete, valid set of :class:`Regime` parameters (as ``Regime.to_json`` writes it)."""
    return st.fixed_dictionaries({p.name: _VALID_BY_KIND[p.kind] for p in PARAMETERS})


def regimes() -> st.SearchStrategy[Regime]:
    """Any valid cost-model regime: every parameter anywhere in its allowed range."""
    return regime_values().map(lambda values: Regime(**values))


@st.composite
def bad_regime_parameters(draw: st.DrawFn) -> tuple[Parameter, Any]:
    """One regime parameter and a value it must refuse (out of range, not finite, not a number)."""
    param = draw(st.sampled_from(PARAMETERS))
    value = draw(st.one_of(_INVALID_BY_KIND[param.kind], _NOT_A_NUMBER))
    return param, value


# --------------------------------------------------------------------------------------------
# Calls over the spine's test toolset (tests/doubles.py): read_doc / write_doc / append_log

_KEYS = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def doc_calls(draw: st.DrawFn, max_size: int = 6) -> list[Any]:
    """A window candidate: 1..max_size calls of read_doc / write_doc / append_log."""
    import json

    from harness import ToolCall

    n = draw(st.integers(min_value=1, max_value=max_size))
    calls = []
    for i in range(n):
        name = draw(st.sampled_from(["read_doc", "read_doc", "write_doc", "append_log"]))
        if name == "read_doc":
            args: dict[str, Any] = {"key": draw(_KEYS)}
        elif name == "write_doc":
            args = {"key": draw(_KEYS), "body": draw(st.sampled_from(["x", "y", "z"]))}
        else:
            args = {"line": draw(st.sampled_from(["l1", "l2"]))}
        calls.append(ToolCall(f"call_{i}", name, json.dumps(args, sort_keys=True)))
    return calls


@st.composite
def schedules(draw: st.DrawFn, n: int) -> tuple[list[int], list[int]]:
    """A start order (permutation) and a number of extra yields per call: an interleaving."""
    order = draw(st.permutations(list(range(n))))
    yields = draw(st.lists(st.integers(min_value=0, max_value=3), min_size=n, max_size=n))
    return list(order), yields


# --------------------------------------------------------------------------------------------
# Task graphs of the parallel execution fabric (harness/fabric)


@st.composite
def dag_specs(
    draw: st.DrawFn, max_nodes: int = 12, max_deps: int = 3
) -> list[tuple[str, tuple[str, ...]]]:
    """A random DAG as ``[(id, deps), ...]``: each node depends on up to ``max_deps`` nodes
    drawn before it (so it is acyclic), then the list is shuffled (so graph order is not a
    topological order)."""
    n = draw(st.integers(min_value=1, max_value=max_nodes))
    ids = [f"n{i}" for i in range(n)]
    spec = []
    for i, node_id in enumerate(ids):
        deps = draw(st.lists(st.sampled_from(ids[:i]), max_size=max_deps, unique=True)) if i else []
        spec.append((node_id, tuple(deps)))
    return draw(st.permutations(spec))


@st.composite
def ballots(draw: st.DrawFn, max_size: int = 7) -> tuple[list[str], list[float]]:
    """Consensus samples drawn from a few answers spelled differently (case, spacing, JSON key
    order), and one distinct temperature per sample."""
    spellings = {
        "paris": ["Paris", " paris ", "PARIS", "paris\n"],
        "lyon": ["Lyon", "lyon", "  LYON"],
        "json": ['{"a": 1, "b": 2}', '{"b":2,"a":1}', '{ "a" : 1 , "b" : 2 }'],
    }
    answers = draw(st.lists(st.sampled_from(sorted(spellings)), min_size=1, max_size=max_size))
    samples = [draw(st.sampled_from(spellings[a])) for a in answers]
    temps = draw(
        st.lists(
            st.integers(min_value=0, max_value=20),
            min_size=len(samples),
            max_size=len(samples),
            unique=True,
        )
    )
    return samples, [t / 10 for t in temps]


# --------------------------------------------------------------------------------------------
# Tool argument schemas for the certification kit's JSON Schema → strategy converter


def _pydantic_schemas() -> list[dict[str, Any]]:
    from typing import Annotated

    import pydantic

    class Address(pydantic.BaseModel):
        city: Annotated[str, pydantic.Field(min_length=2, max_length=5)]
        zip: Annotated[int, pydantic.Field(ge=1000, lt=10000, multiple_of=10)]

    class Order(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        id: Annotated[int, pydantic.Field(gt=0)]
        kind: Literal["a", "b"]
        ship_to: Address
        backup: Address | None = None
        items: Annotated[list[str], pydantic.Field(min_length=1, max_length=3)]
        weight: Annotated[float, pydantic.Field(ge=0.5, le=2.5)]
        rush: bool = False
        tags: set[str] = set()

    return [Order.model_json_schema()]


_HANDWRITTEN: list[dict[str, Any]] = [
    {"type": "object", "properties": {}, "additionalProperties": False},
    {
        "type": "object",
        "properties": {
            "mode": {"const": "fast"},
            "level": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1},
            "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2}$"},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]},
            "one": {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
            "maybe": {"type": ["string", "null"], "enum": ["x", None]},
            "unique": {"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True},
            "free": {},
            "map": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["mode", "level", "code", "either", "pair"],
    },
    {
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"v": {"type": "integer"}}}},
        "properties": {
            "node": {"$ref": "#/$defs/Node"},
            "all": {"allOf": [{"$ref": "#/$defs/Node"}]},
        },
        "required": ["node", "all"],
    },
]


def tool_schemas() -> st.SearchStrategy[dict[str, Any]]:
    """Argument schemas of the kinds tools use: pydantic's output ($defs, anyOf, bounds,
    multipleOf, sets) and hand-written ones (const, pattern, prefixItems, oneOf, type lists)."""
    return st.sampled_from([*_pydantic_schemas(), *_HANDWRITTEN])


# --------------------------------------------------------------------------------------------
# Footprints and hierarchical targets (harness/tools/effects.py, harness/certify/conflicts.py)


@st.composite
def targets(draw: st.DrawFn) -> str:
    """A hierarchical target over a tiny alphabet, so overlaps are common: ``doc``,
    ``doc:``, ``doc:a``, ``doc:ab``, ``doc:a/s``, ``doc:a.txt``, ``log:a/s/x`` …"""
    out = draw(st.sampled_from(["doc", "log"]))
    for _ in range(draw(st.integers(0, 3))):
        sep = draw(st.sampled_from([":", "/", "."]))
        out += sep + draw(st.sampled_from(["", "a", "ab", "b", "s"]))
    return out


@st.composite
def footprints(draw: st.DrawFn) -> Any:
    """A footprint with each side unknown (``None``) sometimes, empty sometimes."""
    from harness.tools.effects import Footprint

    def side() -> frozenset[str] | None:
        if draw(st.integers(0, 5)) == 0:
            return None
        return frozenset(draw(st.lists(targets(), max_size=3)))

    return Footprint(side(), side())


# --------------------------------------------------------------------------------------------
# The soundness property (benchmarks/soundness.py): honest toolsets, manifests and agents

_SOUND_KEYS = ("a", "b", "c")
#: Phases whose tools touch one document at two granularities, or read what others write.
_SOUND_FAMILIES: tuple[tuple[str, ...], ...] = (
    ("get", "set_field"),
    ("get", "bump"),
    ("get", "tag_many"),
    ("get_field", "set_field"),
    ("copy_doc", "set_field"),
    ("copy_doc", "get"),
    ("put_slot", "get_slot"),
    ("bump",),
    ("put_slot",),
)
_SOUND_TOOLS = (
    "get",
    "get_field",
    "set_field",
    "bump",
    "tag_many",
    "copy_doc",
    "put_slot",
    "get_slot",
)
#: Each argument's role: what kind of value it takes.
_SOUND_ROLES: dict[str, dict[str, str]] = {
    "get": {"key": "key"},
    "get_field": {"key": "key", "field": "read_field"},
    "set_field": {"key": "key", "field": "write_field", "value": "value"},
    "bump": {"key": "key", "n": "int"},
    "tag_many": {"keys": "keys", "tag": "tag"},
    "copy_doc": {"src": "key", "dst": "key"},
    "put_slot": {"slot": "slot", "value": "value"},
    "get_slot": {"slot": "slot"},
}
#: Which result fields feed which role: (producing tool, field).
_SOUND_FEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "key": (("get", "next"),),
    "value": (("get", "owner"), ("get_slot", "value")),
    "int": (("get", "count"),),
}
_SOUND_INPUT: dict[str, str] = {"key": "keys", "keys": "keys", "value": "owner", "slot": "slots"}


@st.composite
def soundness_worlds(draw: st.DrawFn, focus: tuple[str, ...] | None = None) -> Any:
    """One case of the soundness property: an honest toolset and manifest over a seeded
    store, task inputs, and a context-bound agent's steps (see ``benchmarks/soundness.py``
    for what each class of case means). ``World.classes`` names the classes a case holds.
    ``focus``: every phase uses exactly these tools (mostly fan-out), to aim at one class."""
    from benchmarks.soundness import PhasePlan, Step, World

    classes: set[str] = set()
    fold = draw(st.booleans(), label="fold")
    docs = {
        k: {
            "status": draw(st.sampled_from(["draft", "review"])),
            "owner": draw(st.sampled_from(["ana", "bo"])),
            "next": draw(st.sampled_from(_SOUND_KEYS)),
            "count": draw(st.integers(0, 3)),
            "tags": [],
        }
        for k in _SOUND_KEYS
    }
    keys = draw(st.lists(st.sampled_from(_SOUND_KEYS), min_size=1, max_size=3, unique=True))
    slot_inputs = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3, unique=True))
    inputs = {"keys": keys, "slots": slot_inputs, "owner": draw(st.sampled_from(["ana", "cy"]))}
    steps: list[Any] = []
    phases: list[Any] = []
    for p in range(draw(st.integers(1, 3), label="phases")):
        name = f"p{p}"
        kind: Literal["fan_out", "chain"] = draw(
            st.sampled_from(["fan_out", "fan_out", "chain"]), label="kind"
        )
        if focus is not None:
            kind = "fan_out" if draw(st.integers(0, 9)) else "chain"
        tools = (
            list(focus)
            if focus is not None
            else draw(
                st.one_of(
                    st.lists(st.sampled_from(_SOUND_TOOLS), min_size=1, max_size=3, unique=True),
                    st.sampled_from(_SOUND_FAMILIES).map(list),
                ),
                label="tools",
            )
        )
        declared: dict[str, str] = {}
        count = draw(st.integers(1, 5), label="steps")
        first = len(steps)
        for _ in range(count):
            tool_name = draw(st.sampled_from(tools))
            recipes = {}
            for arg, role in _SOUND_ROLES[tool_name].items():
                recipe, source = _draw_recipe(draw, role, steps, phases, name, inputs, fold)
                slot = f"{tool_name}.{arg}"
                if slot not in declared:
                    declared[slot] = source
                elif declared[slot] != source:
                    recipe, source = _honest_variant(draw, role, declared[slot], steps, inputs)
                if recipe.kind == "result" and not source.startswith("result:"):
                    classes.add("deviation")
                if recipe.spelling in ("upper", "wide"):
                    classes.add("alias" if fold else "distinct_spelling")
                if recipe.spelling == "float":
                    classes.add("coercible")
                recipes[arg] = recipe
            if tool_name == "tag_many":
                classes.add("list_args")
            if tool_name == "copy_doc":
                classes.add("unset_reads")
            steps.append(Step(tool_name, recipes, p))
        used = {s.tool for s in steps[first:]}
        if kind == "fan_out" and "get" in used and used & {"set_field", "bump", "tag_many"}:
            classes.add("mixed_granularity")
        slots = draw(st.sampled_from([None, count])) if kind == "fan_out" else None
        phases.append(PhasePlan(name, kind, tuple(tools), slots, declared))
    groups = _parallel_groups(steps, phases)
    return World(
        seed=draw(st.integers(0, 2**16), label="seed"),
        fold=fold,
        docs=docs,
        slots={1: "x", 2: "y", 3: "z"},
        phases=tuple(phases),
        steps=tuple(steps),
        inputs=inputs,
        groups=groups,
        classes=frozenset(classes),
    )


def _producers(steps: list[Any], role: str) -> list[tuple[int, str]]:
    feeds = _SOUND_FEEDS.get(role, ())
    return [(i, f) for i, s in enumerate(steps) for t, f in feeds if s.tool == t]


def _draw_recipe(
    draw: st.DrawFn,
    role: str,
    steps: list[Any],
    phases: list[Any],
    phase: str,
    inputs: dict[str, Any],
    fold: bool,
) -> tuple[Any, str]:
    """A recipe for one argument and the source an honest manifest declares for it (a
    deviation: the recipe reads a result while the declared source says otherwise)."""
    from benchmarks.soundness import ArgRecipe

    producers = _producers(steps, role)
    options = (
        ["const"]
        + (["input"] if role in _SOUND_INPUT else [])
        + (["result", "deviation"] if producers else [])
    )
    choice = draw(st.sampled_from(options), label=f"{role} source")
    if choice in ("result", "deviation"):
        index, field_name = draw(st.sampled_from(producers))
        producer_phase = f"p{steps[index].phase}"
        if choice == "result":
            return ArgRecipe("result", ref=field_name, index=index), f"result:{producer_phase}"
        fallback: Literal["marker", "guess"] = (
            draw(st.sampled_from(["marker", "guess"])) if role in _SOUND_INPUT else "marker"
        )
        declared = f"input:{_SOUND_INPUT[role]}" if fallback == "guess" else "model"
        return ArgRecipe("result", ref=field_name, index=index, fallback=fallback), declared
    if choice == "input":
        field_name = _SOUND_INPUT[role]
        value = inputs[field_name]
        if role == "keys":
            return ArgRecipe("const", value=list(value)), f"input:{field_name}"
        index = draw(st.integers(0, len(value) - 1)) if isinstance(value, list) else 0
        spellings = ["as_is"]
        if role == "key":
            spellings += ["upper", "wide"]
        if role == "slot":
            spellings += ["float"]
        spelling = draw(st.sampled_from(spellings))
        if isinstance(value, list):
            return ArgRecipe("input", ref=field_name, index=index, spelling=spelling), (
                f"input:{field_name}"
            )
        return ArgRecipe("const", value=value), f"input:{field_name}"
    return ArgRecipe("const", value=_const_value(draw, role)), "model"


def _const_value(draw: st.DrawFn, role: str) -> Any:
    if role == "key":
        return draw(st.sampled_from([*_SOUND_KEYS, "A", "ｂ"]))  # "ｂ": a full-width b
    if role == "keys":
        return draw(st.lists(st.sampled_from(_SOUND_KEYS), min_size=1, max_size=3, unique=True))
    if role == "read_field":
        return draw(st.sampled_from(["status", "owner", "next", "count"]))
    if role == "write_field":
        return draw(st.sampled_from(["status", "owner"]))
    if role == "int":
        return draw(st.sampled_from([1, 2, 1.0]))
    if role == "slot":
        return draw(st.sampled_from([1, 2, 3, 2.0]))
    return draw(st.sampled_from(["v1", "v2", "ana"]))


def _honest_variant(
    draw: st.DrawFn, role: str, source: str, steps: list[Any], inputs: dict[str, Any]
) -> tuple[Any, str]:
    """A recipe that fits a source already declared for this tool argument in this phase."""
    from benchmarks.soundness import ArgRecipe

    kind, _, ref = source.partition(":")
    if kind == "result":
        producers = [(i, f) for i, f in _producers(steps, role) if f"p{steps[i].phase}" == ref]
        if producers:
            index, field_name = draw(st.sampled_from(producers))
            return ArgRecipe("result", ref=field_name, index=index), source
        return ArgRecipe("const", value=_const_value(draw, role)), source  # over-declared: safe
    if kind == "input" and ref in inputs:
        value = inputs[ref]
        if role == "keys":
            return ArgRecipe("const", value=list(value)), source
        if isinstance(value, list):
            return ArgRecipe("input", ref=ref, index=draw(st.integers(0, len(value) - 1))), source
        return ArgRecipe("const", value=value), source
    return ArgRecipe("const", value=_const_value(draw, role)), source


def _parallel_groups(steps: list[Any], phases: list[Any]) -> tuple[tuple[int, ...], ...]:
    """The P agent's messages: consecutive steps of one fan-out phase, cut before a step that
    reads a result of a step already in the group (up to 16 calls)."""
    groups: list[list[int]] = []
    for i, step in enumerate(steps):
        current = groups[-1] if groups else None
        fan_out = phases[step.phase].kind == "fan_out"
        joins = (
            current is not None
            and fan_out
            and steps[current[0]].phase == step.phase
            and len(current) < 16
            and not any(r.kind == "result" and r.index in current for r in step.args.values())
        )
        if joins and current is not None:
            current.append(i)
        else:
            groups.append([i])
    return tuple(tuple(g) for g in groups)


# --------------------------------------------------------------------------------------------
# Certified speculation (harness/certify/speculation.py, tests/test_speculation.py)


@st.composite
def speculation_scripts(draw: st.DrawFn, keys: list[str]) -> tuple[list[str], list[Any]]:
    """A survey task's keys (a non-empty subset of ``keys``) and a model's calls that deviate
    at random from the gold reads: reads of other keys, of a key outside the inputs, with an
    extra argument, twice, out of order, skipped, and writes or log lines in between."""
    task_keys = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=len(keys), unique=True))
    read = st.tuples(st.just("read"), st.sampled_from([*keys, "zz"]), st.booleans())
    write = st.tuples(st.just("write"), st.sampled_from(keys))
    log = st.tuples(st.just("log"), st.sampled_from(["x", "y"]))
    gold = [("read", k, False) for k in task_keys]
    deviations = draw(st.lists(st.one_of(read, read, write, log), max_size=5))
    script = draw(st.permutations(gold + deviations))
    cut = draw(st.integers(min_value=0, max_value=len(script)))
    return task_keys, list(script[: max(cut, 1)])


# --------------------------------------------------------------------------------------------
# The compiled schema check (harness/tools/_schema_check.py): schemas of its subset, and instances
# drawn from a small universe so that both valid and invalid ones are common.

_JSON_SCALARS: st.SearchStrategy[Any] = st.sampled_from(
    ["", "a", "ab", "é", 0, 1, -1, 5, 1.0, 1.5, -0.0, math.nan, math.inf, True, False, None]
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    ),
    max_leaves=8,
)
_TYPE_NAMES = ["string", "integer", "number", "boolean", "null", "array", "object"]
_ENUM_MEMBERS = st.sampled_from(["", "a", "ab", 0, 1, 5, True, False, None])


def _schema_keywords(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    count = st.integers(0, 3)
    bound = st.sampled_from([0, 1, 1.5, 5, -1])
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(
                st.sampled_from(_TYPE_NAMES),
                st.lists(st.sampled_from(_TYPE_NAMES), min_size=1, max_size=3, unique=True),
            ),
            "enum": st.lists(_ENUM_MEMBERS, min_size=1, max_size=4),
            "const": _ENUM_MEMBERS,
            "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=2),
            "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
            "additionalProperties": st.one_of(st.booleans(), inner),
            "items": inner,
            "minItems": count,
            "maxItems": count,
            "minLength": count,
            "maxLength": count,
            "minimum": bound,
            "maximum": bound,
            "exclusiveMinimum": bound,
            "exclusiveMaximum": bound,
            "anyOf": st.lists(inner, min_size=1, max_size=2),
            "allOf": st.lists(inner, min_size=1, max_size=2),
            "oneOf": st.lists(inner, min_size=1, max_size=2),
            "not": inner,
            "description": st.just("annotations assert nothing"),
            "format": st.just("email"),
        },
    )


#: JSON Schemas built only from the keywords the compiled check supports.
SUBSET_SCHEMAS: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.booleans(), _schema_keywords(st.just({}))),
    _schema_keywords,
    max_leaves=6,
)
