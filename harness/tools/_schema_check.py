"""A compiled ``is_valid`` for the common subset of JSON Schema (Draft 2020-12).

Every call the model emits is checked against its tool's argument schema when the certifier
admits it and when it runs; ``jsonschema`` re-walks the schema on each check (tens of µs for
a two-property object). :func:`compile_check` turns a schema built only from the keywords
below into a closure tree once per tool, with **exactly** ``jsonschema``'s semantics for them
(``Draft202012Validator(schema).is_valid``, no format checker), checked by a property test
against ``jsonschema`` on random schemas and instances:

``type`` (one or a list: ``integer`` admits a float with an integral value, never a bool),
``enum`` / ``const`` of strings, integers, booleans and null (``1`` and ``True`` differ,
``1`` and ``1.0`` do not), ``properties``, ``required``, ``additionalProperties`` (a boolean
or a schema), ``items`` (a schema), ``minItems`` / ``maxItems``, ``minLength`` /
``maxLength``, ``minimum`` / ``maximum`` / ``exclusiveMinimum`` / ``exclusiveMaximum``,
``anyOf`` / ``allOf`` / ``oneOf`` / ``not``, boolean schemas, and the annotations (``title``,
``description``, ``default``, ``examples``, ``format``, …), which assert nothing.

A schema with any other keyword (``$ref``, ``pattern``, ``uniqueItems``, …) compiles to
``None``: the caller uses ``jsonschema``. An instance that holds anything but the plain JSON
types ``json.loads`` produces (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``,
``None``, exactly) gets ``None`` from the check, for the same reason: the fast path never
guesses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ("Check", "compile_check")

#: ``instance -> valid?``; ``None`` when the instance is outside the plain JSON types.
Check = Callable[[Any], "bool | None"]
_Node = Callable[[Any], bool]

_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "format",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
_SUPPORTED = _ANNOTATIONS | {
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "anyOf",
    "allOf",
    "oneOf",
    "not",
}


class _Unsupported(Exception):
    """The schema uses a keyword outside the subset."""


class _NotPlain(Exception):
    """The instance holds a value outside the plain JSON types."""


def _plain(instance: Any) -> type:
    kind = type(instance)
    if kind not in _PLAIN:
        raise _NotPlain
    return kind


def _is_number(instance: Any) -> bool:
    return _plain(instance) in (int, float)  # a bool is not a number


_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),  # and a float with an integral value (below); never a bool
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}


def _type_node(names: list[str]) -> _Node:
    kinds = frozenset(k for n in names for k in _TYPES[n])
    integral_float = "integer" in names and "number" not in names

    def node(x: Any) -> bool:
        kind = type(x)
        if kind not in _PLAIN:
            raise _NotPlain
        return kind in kinds or (integral_float and kind is float and x.is_integer())

    return node


def _all(checks: list[_Node]) -> _Node:
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda x: first(x) and second(x)

    def node(x: Any) -> bool:
        return all(check(x) for check in checks)

    return node


def _enum_node(values: Any) -> _Node:
    allowed = _members(values)
    if all(kind == "str" for kind, _ in allowed):
        texts = frozenset(v for _, v in allowed)

        def strings(x: Any) -> bool:
            kind = type(x)
            if kind not in _PLAIN:
                raise _NotPlain
            return kind is str and x in texts

        return strings
    return lambda x: _key(x) in allowed


def _key(value: Any) -> tuple[str, Any]:
    """What ``jsonschema``'s ``equal`` compares for a scalar: bools apart from numbers."""
    kind = _plain(value)
    if kind is bool:
        return ("bool", value)
    if kind is str:
        return ("str", value)
    if kind is type(None):
        return ("null", None)
    if kind in (int, float):
        return ("num", value)
    return ("other", id(value))  # a list or an object equals no scalar member


def _members(values: Any) -> frozenset[tuple[str, Any]]:
    out = set()
    for value in values:
        if type(value) not in (str, int, bool, type(None)):
            raise _Unsupported  # floats (nan), lists and objects: leave them to jsonschema
        out.add(_key(value))
    return frozenset(out)


def _compile(schema: Any) -> _Node:
    if schema is True:
        return lambda x: True
    if schema is False:
        return lambda x: False
    if not isinstance(schema, dict) or not set(schema) <= _SUPPORTED:
        raise _Unsupported
    checks: list[_Node] = []
    if "type" in schema:
        names = [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
        checks.append(_type_node(names))
    if "enum" in schema:
        checks.append(_enum_node(schema["enum"]))
    if "const" in schema:
        checks.append(_enum_node([schema["const"]]))
    checks.extend(_object_checks(schema))
    checks.extend(_array_checks(schema))
    checks.extend(_scalar_checks(schema))
    if "anyOf" in schema:
        alternatives = [_compile(s) for s in schema["anyOf"]]
        checks.append(lambda x: any(s(x) for s in alternatives))
    if "allOf" in schema:
        checks.append(_all([_compile(s) for s in schema["allOf"]]))
    if "oneOf" in schema:
        ones = [_compile(s) for s in schema["oneOf"]]
        checks.append(lambda x: sum(1 for s in ones if s(x)) == 1)
    if "not" in schema:
        negated = _compile(schema["not"])
        checks.append(lambda x: not negated(x))
    return _all(checks) if checks else (lambda x: True)


def _object_checks(schema: dict[str, Any]) -> list[_Node]:
    checks: list[_Node] = []
    properties = {name: _compile(s) for name, s in schema.get("properties", {}).items()}
    required = tuple(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    extra_node = None if isinstance(extra, bool) else _compile(extra)
    if properties or required or extra is not True:

        def check_object(x: Any) -> bool:
            if _plain(x) is not dict:
                return True
            for name in required:
                if name not in x:
                    return False
            for name, value in x.items():
                node = properties.get(name)
                if node is not None:
                    if not node(value):
                        return False
                elif extra is False or (extra_node is not None and not extra_node(value)):
                    return False
            return True

        checks.append(check_object)
    return checks


def _array_checks(schema: dict[str, Any]) -> list[_Node]:
    checks: list[_Node] = []
    low, high = schema.get("minItems"), schema.get("maxItems")
    item = _compile(schema["items"]) if "items" in schema else None
    if item is not None or low is not None or high is not None:

        def check_array(x: Any) -> bool:
            if _plain(x) is not list:
                return True
            if (low is not None and len(x) < low) or (high is not None and len(x) > high):
                return False
            return item is None or all(item(v) for v in x)

        checks.append(check_array)
    return checks


def _scalar_checks(schema: dict[str, Any]) -> list[_Node]:
    checks: list[_Node] = []
    short, long = schema.get("minLength"), schema.get("maxLength")
    if short is not None or long is not None:

        def check_string(x: Any) -> bool:
            if _plain(x) is not str:
                return True
            return not (
                (short is not None and len(x) < short) or (long is not None and len(x) > long)
            )

        checks.append(check_string)
    bounds: list[tuple[Any, Callable[[Any, Any], bool]]] = [
        (schema[word], test)
        for word, test in (
            # jsonschema's failure tests, negated (so NaN passes every bound, as there)
            ("minimum", lambda x, b: not x < b),
            ("maximum", lambda x, b: not x > b),
            ("exclusiveMinimum", lambda x, b: not x <= b),
            ("exclusiveMaximum", lambda x, b: not x >= b),
        )
        if word in schema
    ]
    if bounds:
        checks.append(lambda x: not _is_number(x) or all(test(x, b) for b, test in bounds))
    return checks


def compile_check(schema: Mapping[str, Any]) -> Check | None:
    """A fast ``is_valid`` for ``schema``, or ``None`` when it uses a keyword outside the
    subset (see the module docstring). The check returns ``None`` for an instance outside
    the plain JSON types (or nested too deeply): ask ``jsonschema`` then."""
    try:
        node = _compile(dict(schema))
    except (_Unsupported, KeyError, TypeError):
        return None

    def check(instance: Any) -> bool | None:
        try:
            return node(instance)
        except (_NotPlain, RecursionError):
            return None

    return check
