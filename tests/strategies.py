"""Hypothesis strategies shared by the test suite (append yours; do not rewrite others')."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

from harness.costmodel import PARAMETERS, Parameter, Regime

# --------------------------------------------------------------------------------------------
# Cost model (harness/costmodel.py)

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
    from typing import Annotated, Literal

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
# Footprints and hierarchical targets (harness/effects.py, harness/conflicts.py)


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
    from harness.effects import Footprint

    def side() -> frozenset[str] | None:
        if draw(st.integers(0, 5)) == 0:
            return None
        return frozenset(draw(st.lists(targets(), max_size=3)))

    return Footprint(side(), side())
