"""The scorer: BFCL's AST checker rules for Python, over the harness's tool calls.

This is an independent implementation of ``bfcl_eval/eval_checker/ast_eval/ast_checker.py``
(its verdicts are measured against BFCL's own checker, imported from the installed package,
by ``python -m harness.bench.bfcl agreement``; see :mod:`harness.bench.bfcl.agreement`). Rule by
rule:

* the function name, dots as underscores (BFCL does the same for function-calling models,
  whose APIs reject dots); every required parameter present; no parameter the function or the
  possible answer does not know;
* exact Python types, except that an int is accepted for a float, and a value of the possible
  answer's own type is accepted and compared as such (BFCL's "variable" case);
* strings compared after BFCL's normalisation (lowercase, drop spaces and ``,./-_*^``,
  ``'`` -> ``"``); values from the allowed list; ``""`` in the list meaning the parameter may
  be left out; dicts and lists of dicts key by key;
* by category (BFCL's dispatch on the name, :func:`~harness.bench.bfcl.categories.checker_kind`):
  ``simple`` categories need exactly one call of the only function; ``multiple`` ones exactly
  one call, checked against the function the answer names; ``parallel`` ones as many calls as
  the answer, matched in any order, each answer to the first unmatched call that fits
  (greedily, without backtracking, as BFCL does).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from harness.bench.bfcl.categories import checker_kind
from harness.messages import ToolCall

__all__ = ("BFCLVerdict", "check_calls", "find_function", "standardize_string", "tool_name")

#: BFCL type name -> the Python type its checker demands (PYTHON_TYPE_MAPPING).
PYTHON_TYPES: Final[dict[str, type]] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
NESTED: Final = ("array", "tuple")


def tool_name(name: str) -> str:
    """A BFCL function name as a tool name: dots become underscores (BFCL does the same for
    function-calling models, whose APIs reject dots)."""
    return name.replace(".", "_")


def find_function(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    """The documented function called ``name`` (BFCL's name, dots kept), if any."""
    return next((f for f in functions if f["name"] == name), None)


@dataclass(frozen=True)
class BFCLVerdict:
    """The checker's verdict: valid or not, with BFCL's error messages and error type."""

    valid: bool
    errors: tuple[str, ...] = ()
    error_type: str | None = None


def _ok() -> dict[str, Any]:
    return {"valid": True, "error": []}


def _bad(error_type: str, *errors: Any) -> dict[str, Any]:
    return {"valid": False, "error": list(errors), "error_type": error_type}


def standardize_string(text: str) -> str:
    """BFCL's string normalisation: drop spaces and ``,./-_*^``, lowercase, ``'`` -> ``"``."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", text).lower().replace("'", '"')


def _answer_type(possible: Sequence[Any]) -> type | None:
    for answer in possible:
        if answer != "":
            return type(answer)
    return None


def _type_check(
    param: str,
    value: Any,
    possible: Sequence[Any],
    expected: str,
    expected_type: type,
    nested_type: type | None,
) -> dict[str, Any]:
    """BFCL's ``type_checker`` (one level of nesting), including its "variable" case: a value
    of the possible answer's own type is accepted and compared as such."""
    answer_type = _answer_type(possible)
    is_variable = answer_type is not None and answer_type is not expected_type
    if type(value) is expected_type:
        if nested_type is None:
            return {"valid": True, "error": [], "is_variable": is_variable}
        for item in possible:
            fits = True
            if type(item) is list:
                elements: Any = value  # a list: its type is expected_type, a list type
                for element in elements:
                    inner = _type_check(
                        param, element, item, nested_type.__name__, nested_type, None
                    )
                    if not inner["valid"]:
                        fits = False
                        break
            if fits:
                return {"valid": True, "error": [], "is_variable": is_variable}
    if answer_type is not None and type(value) is answer_type:
        if type(value) is expected_type:  # nested items failed: still not valid
            return _bad("type_error:nested", f"Nested type checking failed for {param!r}.")
        return {"valid": True, "error": [], "is_variable": True}
    return _bad(
        "type_error:simple",
        f"Incorrect type for parameter {param!r}. Expected type {expected}, got "
        f"{type(value).__name__}. Parameter value: {value!r}.",
    )


def _standardized(candidates: Sequence[Any]) -> list[Any]:
    return [standardize_string(c) if type(c) is str else c for c in candidates]


def _string_check(param: str, value: str, possible: Sequence[Any]) -> dict[str, Any]:
    allowed = [standardize_string(p) for p in possible if type(p) is str]
    if standardize_string(value) not in allowed:
        return _bad(
            "value_error:string",
            f"Invalid value for parameter {param!r}: {value!r}. Expected one of {list(possible)}. "
            "Case insensitive.",
        )
    return _ok()


def _list_check(param: str, value: list[Any], possible: Sequence[Any]) -> dict[str, Any]:
    given = _standardized(value)
    allowed = [_standardized([c[j] for j in range(len(c))]) for c in possible]
    if given not in allowed:
        return _bad(
            "value_error:list/tuple",
            f"Invalid value for parameter {param!r}: {value!r}. Expected one of {list(possible)}.",
        )
    return _ok()


def _dict_check(param: str, value: Mapping[str, Any], possible: Sequence[Any]) -> dict[str, Any]:
    result = _bad("dict_checker:unclear")
    for answer in possible:
        if answer == "":
            continue
        result = _bad("dict_checker:unclear")
        fits = True
        for key, item in value.items():
            if key not in answer:
                result = _bad("value_error:dict_key", f"Unexpected dict key parameter: '{key}'.")
                fits = False
                break
            given = standardize_string(item) if type(item) is str else item
            if given not in _standardized(answer[key]):
                result = _bad(
                    "value_error:dict_value",
                    f"Invalid value for parameter {key!r}: {item!r}. Expected one of "
                    f"{_standardized(answer[key])}.",
                )
                fits = False
                break
        for key, options in answer.items():
            if key not in value and "" not in options:
                result = _bad("value_error:dict_key", f"Missing dict key parameter: '{key}'.")
                fits = False
                break
        if fits:
            return _ok()
    return result


def _list_dict_check(param: str, value: list[Any], possible: Sequence[Any]) -> dict[str, Any]:
    result = _bad("list_dict_checker:unclear")
    for answer in possible:
        if len(value) != len(answer):
            result = _bad(
                "value_error:list_dict_count", "Wrong number of dictionaries in the list."
            )
            continue
        fits = True
        for index, item in enumerate(value):
            result = _dict_check(param, item, [answer[index]])
            if not result["valid"]:
                fits = False
                break
        if fits:
            return _ok()
    return result


def _value_check(
    param: str, value: Any, possible: Sequence[Any], expected_type: type, nested: type | None
) -> dict[str, Any] | None:
    """The per-type value checks BFCL runs when the value is not a "variable" (``None`` when
    no special check applies and plain membership decides)."""
    if expected_type is dict:
        return _dict_check(param, value, possible)
    if expected_type is list and nested is dict:
        return _list_dict_check(param, value, possible)
    if expected_type is str:
        return _string_check(param, value, possible)
    if expected_type is list:
        return _list_check(param, value, possible)
    return None


def _simple_check(
    function: Mapping[str, Any], output: Mapping[str, Any], answer: Mapping[str, Any]
) -> dict[str, Any]:
    """BFCL's ``simple_function_checker`` for Python."""
    possible: Mapping[str, Any] = next(iter(answer.values()))
    name = tool_name(str(function["name"]))
    details: Mapping[str, Any] = function["parameters"].get("properties", {})
    required: Sequence[str] = function["parameters"].get("required", [])
    if name not in output:
        return _bad(
            "simple_function_checker:wrong_func_name",
            f"Function name {name!r} not found in model output.",
        )
    params: Mapping[str, Any] = output[name]
    for param in required:
        if param not in params:
            return _bad(
                "simple_function_checker:missing_required",
                f"Missing required parameter: {param!r}.",
            )
    for param, raw in params.items():
        if param not in details or param not in possible:
            return _bad(
                "simple_function_checker:unexpected_param", f"Unexpected parameter: {param!r}."
            )
        expected = str(details[param]["type"])
        expected_type = PYTHON_TYPES[expected]
        nested = None
        if expected in NESTED:
            nested = PYTHON_TYPES[str(details[param].get("items", {}).get("type", "any"))]
        value = float(raw) if expected == "float" and type(raw) is int else raw
        checked = _type_check(param, value, possible[param], expected, expected_type, nested)
        if not checked["valid"]:
            return checked
        if not checked["is_variable"]:
            special = _value_check(param, value, possible[param], expected_type, nested)
            if special is not None:
                if not special["valid"]:
                    return special
                continue
        if value not in possible[param]:
            return _bad(
                "value_error:others",
                f"Invalid value for parameter {param!r}: {value!r}. Expected one of "
                f"{possible[param]}.",
            )
    for param, options in possible.items():
        if param not in params and "" not in options:
            return _bad(
                "simple_function_checker:missing_optional",
                f"Optional parameter {param!r} not provided and not marked as optional.",
            )
    return _ok()


def _parallel_check(
    functions: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
    answers: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """BFCL's ``parallel_function_checker_no_order``: every answer matched by a distinct
    call, first match wins."""
    if len(outputs) != len(answers):
        return _bad("parallel_function_checker_no_order:wrong_count", "Wrong number of functions.")
    matched: list[int] = []
    for i, answer in enumerate(answers):
        function = find_function(functions, next(iter(answer)))
        if function is None:
            return _no_description(next(iter(answer)))
        result = _bad("parallel_function_checker_no_order:cannot_find_match")
        for index, output in enumerate(outputs):
            if index in matched:
                continue
            result = _simple_check(function, output, answer)
            if result["valid"]:
                matched.append(index)
                break
        if not result["valid"]:
            return _bad(
                "parallel_function_checker_no_order:cannot_find_match",
                f"Could not find a matching function for index {i} of possible answers.",
                *result["error"],
            )
    return _ok()


def _as_bfcl_output(call: ToolCall | Mapping[str, Any]) -> dict[str, Any] | None:
    if isinstance(call, ToolCall):
        try:
            arguments = call.parsed_arguments() if call.arguments.strip() else {}
        except ValueError:
            return None
        return {call.name: arguments} if isinstance(arguments, dict) else None
    return dict(call)


def _no_description(name: str) -> dict[str, Any]:
    """The answer names a function the entry does not document (BFCL's checker would fail
    on it with a TypeError; no such entry is known in BFCL v4)."""
    return _bad(
        "checker:undocumented_function", f"The answer's function {name!r} is not documented."
    )


def _multiple_check(
    functions: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
    answers: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """BFCL's ``multiple_function_checker``: as many calls as answers (one), the first
    checked against the function the first answer names."""
    if len(outputs) != len(answers):
        return _bad("multiple_function_checker:wrong_count", "Wrong number of functions.")
    function = find_function(functions, next(iter(answers[0])))
    if function is None:
        return _no_description(next(iter(answers[0])))
    return _simple_check(function, outputs[0], answers[0])


def check_calls(
    category: str,
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[ToolCall | Mapping[str, Any]],
    ground_truth: Sequence[Mapping[str, Any]],
) -> BFCLVerdict:
    """Score ``calls`` (tool calls, or BFCL's ``{name: {param: value}}`` form) against one
    entry's ground truth with BFCL's AST checker rules for ``category`` (one of
    :data:`~harness.bench.bfcl.categories.CATEGORIES`; any other name raises
    :class:`~harness.bench.bfcl.categories.BFCLCategoryError`, never a silent mis-score)."""
    kind = checker_kind(category)
    outputs = [_as_bfcl_output(c) for c in calls]
    if any(o is None for o in outputs):
        return BFCLVerdict(False, ("A call's arguments are not a JSON object.",), "bad_json")
    clean = [o for o in outputs if o is not None]
    if kind == "parallel":
        result = _parallel_check(functions, clean, ground_truth)
    elif kind == "multiple":
        result = _multiple_check(functions, clean, ground_truth)
    elif len(clean) != 1:
        result = _bad("simple_function_checker:wrong_count", "Wrong number of functions.")
    else:
        result = _simple_check(functions[0], clean[0], ground_truth[0])
    if result["valid"]:
        return BFCLVerdict(True)
    return BFCLVerdict(False, tuple(str(e) for e in result["error"]), result.get("error_type"))
