"""The compiled schema check agrees with jsonschema on every schema of its subset."""

from __future__ import annotations

import math
from typing import Any

import jsonschema
from hypothesis import given, settings

from harness.tools import Tool
from harness.tools._schema_check import compile_check
from tests.strategies import JSON_VALUES, SUBSET_SCHEMAS


@settings(max_examples=600)
@given(SUBSET_SCHEMAS, JSON_VALUES)
def test_the_compiled_check_gives_jsonschemas_verdict(schema: Any, instance: Any) -> None:
    check = compile_check(schema) if isinstance(schema, dict) else None
    expected = jsonschema.Draft202012Validator(schema).is_valid(instance)
    if check is not None:
        assert check(instance) == expected


def test_every_subset_keyword_compiles() -> None:
    schema = {
        "type": "object",
        "properties": {
            "key": {"type": "string", "minLength": 1, "description": "d"},
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["key"],
        "additionalProperties": False,
    }
    check = compile_check(schema)
    assert check is not None
    assert check({"key": "a", "n": 2.0, "tags": ["a"], "maybe": None}) is True
    assert check({"key": "a", "n": True}) is False  # a bool is not an integer
    assert check({"key": "a", "extra": 1}) is False


def test_a_keyword_outside_the_subset_leaves_the_schema_to_jsonschema() -> None:
    assert compile_check({"type": "string", "pattern": "^a"}) is None
    assert compile_check({"$defs": {"x": {}}, "$ref": "#/$defs/x"}) is None
    assert compile_check({"enum": [1.5]}) is None  # float members: jsonschema decides


def test_a_value_json_never_produces_is_left_to_jsonschema() -> None:
    check = compile_check({"type": "object", "properties": {"a": {"type": "array"}}})
    assert check is not None
    assert check({"a": (1, 2)}) is None  # a tuple: jsonschema's type checker decides
    assert check(("not", "a", "dict")) is None
    assert check({"a": [1, 2]}) is True


def test_nan_passes_numeric_bounds_as_in_jsonschema() -> None:
    schema = {"type": "number", "minimum": 1}
    check = compile_check(schema)
    assert check is not None
    assert check(math.nan) == jsonschema.Draft202012Validator(schema).is_valid(math.nan)


def test_a_tool_gives_the_same_verdict_with_and_without_the_compiled_check() -> None:
    schema = {
        "type": "object",
        "properties": {"key": {"type": "string", "minLength": 1}},
        "required": ["key"],
    }
    t = Tool("read", schema)
    for arguments in ({"key": "a"}, {"key": ""}, {}, {"key": 1}, {"key": "a", "x": [1]}):
        assert t.is_valid(arguments) == t._validator.is_valid(arguments)
        assert (t.validation_errors(arguments) == []) == t.is_valid(arguments)
