"""JSON Schema → hypothesis strategies, for the subset tool argument schemas use.

Supported: ``type`` (one or a list), ``object`` (``properties``, ``required``,
``additionalProperties``, ``minProperties``), ``string`` (``enum``, ``minLength``,
``maxLength``, ``pattern``, ``format`` ``date-time``, ``time``, ``date`` and ``uuid`` as
ISO 8601 and hyphenated strings), ``integer``/``number`` (``minimum``, ``maximum``, the exclusive
bounds in both drafts' spellings, ``multipleOf``), ``boolean``, ``null``, ``array``
(``items``, ``prefixItems``, ``minItems``, ``maxItems``, ``uniqueItems``), ``anyOf``,
``oneOf``, ``allOf``, ``const``, ``enum`` and ``$ref`` into ``$defs``/``definitions`` (what
pydantic emits). Anything else falls back to small JSON values; every strategy is filtered by
the real validator (``jsonschema``), so a keyword this module does not know narrows what is
generated instead of producing invalid arguments.

:func:`arguments_strategy` builds the strategy for one tool's arguments and lets a toolset
bias it: *example values* (drawn most of the time, e.g. document keys that exist in the fresh
state) and whole per-argument strategies, both keyed ``"argument"`` or ``"tool.argument"``.

This module imports hypothesis; :mod:`harness.certkit` imports it lazily, so ``import harness``
does not need hypothesis.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
from hypothesis import strategies as st

from harness.errors import ToolsetError

__all__ = ("arguments_strategy", "explicit_arguments", "from_schema", "simplest_arguments")

Strategy = st.SearchStrategy[Any]

_CHARS = st.characters(min_codepoint=32, max_codepoint=126)
_EXTRA_LENGTH = 10  # strings/arrays without a maximum get at most min + this many items
_EXTRA_ITEMS = 4


def _json_values() -> Strategy:
    """Small JSON values of any type (for ``{}``, ``true`` and unknown schemas)."""
    leaves = st.none() | st.booleans() | st.integers(-10, 10) | st.text(_CHARS, max_size=6)
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.text(_CHARS, max_size=4), inner, max_size=3)
        ),
        max_leaves=5,
    )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class _Converter:
    """Converts the schemas of one document (``root``), resolving ``$ref`` against it."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self._refs: dict[str, Strategy] = {}

    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ToolsetError(
                f"Schema reference {ref!r} is not local: only '#/$defs/...' references are supported."
            )
        node: Any = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise ToolsetError(f"Schema reference {ref!r} points at nothing.")
            node = node[part]
        return node

    def convert(self, schema: Any) -> Strategy:
        if schema is True or schema == {}:
            return _json_values()
        if schema is False:
            return st.nothing()
        if not isinstance(schema, Mapping):
            raise ToolsetError(f"Not a JSON Schema: {schema!r:.80}.")
        if "$ref" in schema:
            return self._ref(schema)
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            return st.sampled_from(list(schema["enum"])) if schema["enum"] else st.nothing()
        for key in ("anyOf", "oneOf"):
            if key in schema:
                rest = {k: v for k, v in schema.items() if k != key}
                return st.one_of([self.convert({**rest, **branch}) for branch in schema[key]])
        if "allOf" in schema:
            return self._all_of(schema)
        kind = schema.get("type")
        if isinstance(kind, list):
            return st.one_of([self.convert({**schema, "type": t}) for t in kind])
        if kind is None:
            kind = _infer_type(schema)
        return self._typed(kind, schema)

    def _ref(self, schema: Mapping[str, Any]) -> Strategy:
        ref = str(schema["$ref"])
        siblings = {k: v for k, v in schema.items() if k not in ("$ref", "description", "title")}
        if siblings:
            target = self.resolve(ref)
            merged = {**target, **siblings} if isinstance(target, Mapping) else target
            return self.convert(merged)
        if ref not in self._refs:
            # deferred: recursive models (a tree of nodes) refer to themselves
            self._refs[ref] = st.deferred(lambda: self.convert(self.resolve(ref)))
        return self._refs[ref]

    def _all_of(self, schema: Mapping[str, Any]) -> Strategy:
        parts = list(schema["allOf"])
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        first = parts[0] if parts else {}
        if isinstance(first, Mapping) and "$ref" in first:
            first = self.resolve(str(first["$ref"]))
        base = {**first, **rest} if isinstance(first, Mapping) else first
        others = [
            jsonschema.Draft202012Validator({**self._defs(), **p})
            for p in parts[1:]
            if isinstance(p, Mapping)
        ]
        return self.convert(base).filter(lambda v: all(o.is_valid(v) for o in others))

    def _defs(self) -> dict[str, Any]:
        return {k: self.root[k] for k in ("$defs", "definitions") if k in self.root}

    def _typed(self, kind: str, schema: Mapping[str, Any]) -> Strategy:
        if kind == "object":
            return self._object(schema)
        if kind == "array":
            return self._array(schema)
        if kind == "string":
            return _string(schema)
        if kind == "integer":
            return _integer(schema)
        if kind == "number":
            return _number(schema)
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        return _json_values()

    def _object(self, schema: Mapping[str, Any]) -> Strategy:
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fixed = {name: self.convert(sub) for name, sub in properties.items() if name in required}
        optional = {
            name: self.convert(sub) for name, sub in properties.items() if name not in required
        }
        for name in required - set(properties):  # required but undescribed: any value
            fixed[name] = _json_values()
        strategy: Strategy = st.fixed_dictionaries(fixed, optional=optional)
        extra = schema.get("additionalProperties", True)
        minimum = int(schema.get("minProperties", 0))
        if not properties and extra is not False and (minimum or isinstance(extra, Mapping)):
            values = self.convert(extra if isinstance(extra, Mapping) else {})
            strategy = st.dictionaries(
                st.text(_CHARS, min_size=1, max_size=6),
                values,
                min_size=minimum,
                max_size=minimum + 3,
            )
        return strategy

    def _array(self, schema: Mapping[str, Any]) -> Strategy:
        low = int(schema.get("minItems", 0))
        high = int(schema.get("maxItems", low + _EXTRA_ITEMS))
        prefix = [self.convert(s) for s in schema.get("prefixItems", ())]
        items = schema.get("items", True)
        element = self.convert(items) if items is not False else st.nothing()
        unique = bool(schema.get("uniqueItems", False))
        rest_low, rest_high = max(0, low - len(prefix)), max(0, high - len(prefix))
        tail = st.lists(
            element,
            min_size=rest_low,
            max_size=rest_high,
            unique_by=_canonical if unique else None,
        )
        if not prefix:
            return tail
        head = st.tuples(*prefix).map(list)
        return st.tuples(head, tail).map(lambda pair: [*pair[0], *pair[1]])


def _infer_type(schema: Mapping[str, Any]) -> str:
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if "minLength" in schema or "maxLength" in schema or "pattern" in schema:
        return "string"
    if "minimum" in schema or "maximum" in schema:
        return "number"
    return "any"


_OFFSETS: Strategy = st.one_of(
    st.none(),
    st.integers(-12 * 60, 14 * 60).map(
        lambda minutes: datetime.timezone(datetime.timedelta(minutes=minutes))
    ),
)
_MOMENTS: Strategy = st.datetimes(datetime.datetime(1990, 1, 1), datetime.datetime(2060, 1, 1))
#: Strings in the formats pydantic emits for typed arguments, written as a client would.
_FORMATS: Mapping[str, Strategy] = {
    "date-time": st.tuples(_MOMENTS, _OFFSETS).map(lambda p: p[0].replace(tzinfo=p[1]).isoformat()),
    "time": st.tuples(st.times(), _OFFSETS).map(lambda p: p[0].replace(tzinfo=p[1]).isoformat()),
    "date": st.dates(datetime.date(1990, 1, 1), datetime.date(2060, 1, 1)).map(
        datetime.date.isoformat
    ),
    "uuid": st.uuids().map(str),
}


def _string(schema: Mapping[str, Any]) -> Strategy:
    low = int(schema.get("minLength", 0))
    high = int(schema.get("maxLength", low + _EXTRA_LENGTH))
    if "pattern" in schema:
        pattern = str(schema["pattern"])
        return st.from_regex(pattern).filter(lambda s: low <= len(s) <= high)
    formatted = _FORMATS.get(str(schema.get("format")))
    if formatted is not None:  # as long as its format makes it, unless bounded
        top = int(schema.get("maxLength", 1 << 30))
        return formatted.filter(lambda s: low <= len(s) <= top)
    return st.text(_CHARS, min_size=low, max_size=high)


def _bounds(schema: Mapping[str, Any]) -> tuple[float | None, float | None, bool, bool]:
    """(low, high, exclude_low, exclude_high) in either draft's spelling."""
    low, high = schema.get("minimum"), schema.get("maximum")
    exclude_low = exclude_high = False
    ex_min, ex_max = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(ex_min, bool):  # draft 4: a flag on minimum
        exclude_low = ex_min
    elif ex_min is not None and (low is None or ex_min >= low):
        low, exclude_low = ex_min, True
    if isinstance(ex_max, bool):
        exclude_high = ex_max
    elif ex_max is not None and (high is None or ex_max <= high):
        high, exclude_high = ex_max, True
    return low, high, exclude_low, exclude_high


def _integer(schema: Mapping[str, Any]) -> Strategy:
    low, high, exclude_low, exclude_high = _bounds(schema)
    lo = None if low is None else math.floor(low) + 1 if exclude_low else math.ceil(low)
    hi = None if high is None else math.ceil(high) - 1 if exclude_high else math.floor(high)
    step = schema.get("multipleOf")
    if isinstance(step, int) and not isinstance(step, bool) and step > 0:
        k_lo = None if lo is None else -(-lo // step)
        k_hi = None if hi is None else hi // step
        return st.integers(k_lo, k_hi).map(lambda k: k * step)
    return st.integers(lo, hi)


def _number(schema: Mapping[str, Any]) -> Strategy:
    low, high, exclude_low, exclude_high = _bounds(schema)
    floats = st.floats(
        min_value=low,
        max_value=high,
        exclude_min=exclude_low and low is not None,
        exclude_max=exclude_high and high is not None,
        allow_nan=False,
        allow_infinity=False,
    )
    return st.one_of(_integer(schema), floats)


def from_schema(schema: Mapping[str, Any]) -> Strategy:
    """Values valid against ``schema`` (a whole document: ``$ref`` resolves inside it)."""
    validator = jsonschema.Draft202012Validator(dict(schema))
    return _Converter(schema).convert(schema).filter(validator.is_valid)


def arguments_strategy(
    tool: str,
    schema: Mapping[str, Any],
    *,
    examples: Mapping[str, Sequence[Any]] | None = None,
    overrides: Mapping[str, Strategy] | None = None,
    aliases: Mapping[str, Sequence[Any]] | None = None,
) -> Strategy:
    """Argument objects for ``tool`` valid against its ``schema``.

    ``overrides``: a whole strategy per argument. ``examples``: values drawn seven times out
    of eight for an argument (the rest come from its schema); values that do not validate
    against the argument's schema are dropped. ``aliases``: other spellings of the examples
    (:mod:`harness.certkit._aliases`), drawn instead of an example one time in three. All are
    keyed ``"tool.argument"`` (first) or ``"argument"``.
    """
    converter = _Converter(schema)
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    defs = converter._defs()
    fixed: dict[str, Strategy] = {}
    optional: dict[str, Strategy] = {}
    for name, sub in properties.items():
        chosen = _pick(tool, name, overrides or {})
        if chosen is None:
            chosen = converter.convert(sub)
            values = _pick(tool, name, examples or {})
            if values:
                check = jsonschema.Draft202012Validator(
                    {**defs, **sub} if isinstance(sub, Mapping) else sub
                )
                valid = [v for v in values if check.is_valid(v)]
                if valid:
                    favoured = st.sampled_from(valid)
                    spellings = [
                        v for v in _pick(tool, name, aliases or {}) or () if check.is_valid(v)
                    ]
                    if spellings:
                        favoured = _favour(favoured, st.sampled_from(spellings), weight=(2, 3))
                    chosen = _favour(favoured, chosen)
        (fixed if name in required else optional)[name] = chosen
    if not properties:
        return from_schema(schema)
    for name in required - set(properties):
        fixed[name] = _json_values()
    validator = jsonschema.Draft202012Validator(dict(schema))
    return st.fixed_dictionaries(fixed, optional=optional).filter(validator.is_valid)


@st.composite
def _favour(
    draw: st.DrawFn, favoured: Strategy, other: Strategy, weight: tuple[int, int] = (7, 8)
) -> Any:
    """``favoured`` seven times out of eight by default (and when shrinking), ``other``
    otherwise."""
    if draw(st.integers(0, weight[1] - 1)) < weight[0]:
        return draw(favoured)
    return draw(other)


def _pick(tool: str, name: str, table: Mapping[str, Any]) -> Any:
    if f"{tool}.{name}" in table:
        return table[f"{tool}.{name}"]
    return table.get(name)


#: At most this many explicit argument objects per tool.
MAX_EXPLICIT = 48


def explicit_arguments(
    tool: str,
    schema: Mapping[str, Any],
    examples: Mapping[str, Sequence[Any]],
    aliases: Mapping[str, Sequence[Any]],
) -> list[dict[str, Any]]:
    """Argument objects that try each example value of each argument (and each of its other
    spellings) once, every other argument at its simplest valid value (its default, its
    first enum value, the empty text, zero, ...). Objects that do not validate against the
    schema are left out; at most :data:`MAX_EXPLICIT`."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = [n for n in schema.get("required", ()) if n in properties]
    base: dict[str, Any] = {}
    for name in required:
        value = _simplest(properties[name])
        if value is _NONE:
            return []
        base[name] = value
    validator = jsonschema.Draft202012Validator(dict(schema))
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for name in properties:
        values = [*(_pick(tool, name, examples) or ()), *(_pick(tool, name, aliases) or ())]
        for value in values:
            candidate = {**base, name: value}
            key = repr(sorted(candidate.items(), key=lambda item: item[0]))
            if key in seen or not validator.is_valid(candidate):
                continue
            seen.add(key)
            out.append(candidate)
            if len(out) >= MAX_EXPLICIT:
                return out
    return out


_NONE = object()


def simplest_arguments(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The simplest argument object ``schema`` accepts (every required argument at its
    simplest value), or ``None`` when there is no obvious one or it does not validate."""
    value = _simplest({**schema, "type": "object"})
    if not isinstance(value, dict):
        return None
    return value if jsonschema.Draft202012Validator(dict(schema)).is_valid(value) else None


def _simplest(schema: Any) -> Any:
    """The simplest value a (sub)schema accepts, or ``_NONE`` when there is no obvious one."""
    if not isinstance(schema, Mapping):
        return _NONE
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _simplest(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "string":
        return "a" * int(schema.get("minLength", 0))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return _simplest_container(schema, kind)


def _simplest_container(schema: Mapping[str, Any], kind: Any) -> Any:
    if kind == "array":
        count = int(schema.get("minItems", 0))
        item = _simplest(schema.get("items", {})) if count else None
        return _NONE if item is _NONE else [item] * count
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        out = {}
        for name in schema.get("required", ()):
            value = _simplest(props.get(name, {}))
            if value is _NONE:
                return _NONE
            out[name] = value
        return out
    return _NONE
