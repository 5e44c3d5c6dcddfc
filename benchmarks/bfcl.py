"""BFCL simple and parallel entries: loading, tool schemas, tasks and an AST-checker scorer.

The Berkeley Function Calling Leaderboard ships its data inside the PyPI package
``bfcl-eval`` (install it with ``pip install --no-deps bfcl-eval``: only the data files are
used). This module reads, as package resources, the question files
``bfcl_eval/data/BFCL_v<N>_simple_python.json`` (``BFCL_v<N>_simple.json`` in older releases)
and ``BFCL_v<N>_parallel.json``, and their ground truth in ``data/possible_answer/`` (same
names). The files are JSON Lines. The newest version present is used.

* :func:`to_json_schema` maps BFCL's parameter types (``dict``, ``float``, ``tuple``, ``any``,
  ...) to JSON Schema as BFCL's own OpenAI-style handlers do (``any`` is a string, ``float``
  a number, ``tuple`` an array), dropping BFCL's ``optional`` marker.
* :func:`select_entries` draws a seeded selection (32 simple + 32 parallel by default).
* :class:`BFCLEntry` gives the entry's :class:`~harness.tools.Toolset` (declared-only tools:
  every call returns :data:`STUB_RESULT`), its :class:`~harness.task.Task` (gold: the first
  possible answer) and :meth:`BFCLEntry.score`.

The scorer follows BFCL's AST checker (``bfcl_eval/eval_checker/ast_eval/ast_checker.py``)
for Python rule by rule: the function name (dots become underscores, as for BFCL's
function-calling models); every required parameter present; no parameter the function or
the possible answer does not know; exact Python types, except that an int is accepted for a
float (and a value of the possible answer's own type, BFCL's "variable" case); strings
compared after BFCL's normalisation (lowercase, drop spaces and ``,./-_*^``, ``'`` -> ``"``);
values from the allowed list; ``""`` in the list meaning the parameter may be left out; dicts
and lists of dicts key by key; a simple entry needs exactly one call; a parallel entry needs
as many calls as the answer, matched in any order (greedily, as BFCL does).
"""

from __future__ import annotations

import copy
import importlib.resources
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any, Final, Literal, get_args

from harness.engines.base import ToolCall
from harness.errors import ConfigError
from harness.task import GoldCall, Task
from harness.tools import Toolset

__all__ = (
    "CATEGORIES",
    "INSTALL_HINT",
    "STUB_RESULT",
    "BFCLDataError",
    "BFCLEntry",
    "BFCLVerdict",
    "Category",
    "check_calls",
    "data_files",
    "load_entries",
    "select_entries",
    "standardize_string",
    "to_json_schema",
)

Category = Literal["simple", "parallel"]
CATEGORIES: Final[tuple[Category, ...]] = get_args(Category)
PACKAGE: Final = "bfcl_eval"
INSTALL_HINT: Final = "pip install --no-deps bfcl-eval"
#: What every BFCL tool "returns": the functions are declared, not executable.
STUB_RESULT: Final = "ok"

_PATTERNS: Final[dict[Category, tuple[str, ...]]] = {
    "simple": (r"BFCL_v(\d+)_simple_python\.json", r"BFCL_v(\d+)_simple\.json"),
    "parallel": (r"BFCL_v(\d+)_parallel\.json",),
}

#: BFCL type name -> JSON Schema type (BFCL's GORILLA_TO_OPENAPI for Python entries).
BFCL_TO_JSON_SCHEMA: Final[dict[str, str]] = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
}

#: BFCL type name -> the Python type its checker demands (PYTHON_TYPE_MAPPING).
_PYTHON_TYPES: Final[dict[str, type]] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_NESTED: Final = ("array", "tuple")


class BFCLDataError(ConfigError):
    """The BFCL data cannot be read: the package is missing, a file is absent or malformed,
    or more entries were asked for than a category has."""


# ---------------------------------------------------------------------------------- files


def _data_root(package: str) -> Traversable:
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        raise BFCLDataError(
            f"The BFCL data comes from the PyPI package bfcl-eval, and Python package "
            f"{package!r} is not installed; install it with `{INSTALL_HINT}` (only its data "
            "files are used, so --no-deps is enough)."
        ) from None
    data = root / "data"
    if not data.is_dir():
        raise BFCLDataError(
            f"Package {package!r} has no data/ folder; reinstall it with `{INSTALL_HINT}`."
        )
    return data


def _version(name: str) -> int:
    match = re.search(r"_v(\d+)_", name)
    return int(match.group(1)) if match else -1


def _find(data: Traversable, category: Category) -> str:
    names = sorted(p.name for p in data.iterdir() if p.is_file())
    for pattern in _PATTERNS[category]:
        found = [n for n in names if re.fullmatch(pattern, n)]
        if found:
            return max(found, key=_version)
    wanted = " or ".join(p.replace(r"(\d+)", "<N>").replace("\\", "") for p in _PATTERNS[category])
    raise BFCLDataError(
        f"No BFCL {category} file ({wanted}) in the installed "
        f"bfcl-eval data; found {len(names)} files such as {names[:3]}. Install a release "
        f"that ships it: `{INSTALL_HINT}`."
    )


def data_files(package: str = PACKAGE) -> dict[Category, str]:
    """The question file name used for each category (its answers have the same name under
    ``possible_answer/``)."""
    data = _data_root(package)
    return {category: _find(data, category) for category in CATEGORIES}


def _read_jsonl(path: Traversable, label: str) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BFCLDataError(f"BFCL file {label} is missing; reinstall: `{INSTALL_HINT}`.") from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BFCLDataError(
                f"BFCL file {label}, line {number}, is not JSON ({exc.msg}); reinstall: "
                f"`{INSTALL_HINT}`."
            ) from None
        if not isinstance(row, dict) or "id" not in row:
            raise BFCLDataError(f"BFCL file {label}, line {number}: an entry has no 'id'.")
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------- schema


def to_json_schema(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL ``parameters`` block as JSON Schema (see the module docstring)."""
    out = _convert(parameters)
    out["type"] = "object"
    out.setdefault("properties", {})
    return out


def _convert(node: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type":
            out["type"] = BFCL_TO_JSON_SCHEMA.get(str(value), "string")
        elif key == "properties" and isinstance(value, Mapping):
            out["properties"] = {
                name: _convert(prop) if isinstance(prop, Mapping) else {"type": "string"}
                for name, prop in value.items()
            }
        elif key == "items" and isinstance(value, Mapping):
            out["items"] = _convert(value)
        elif key == "optional":
            continue  # BFCL's own marker; JSON Schema says it with "required"
        else:
            out[key] = copy.deepcopy(value)
    if node.get("type") == "float" and isinstance(out.get("description"), str):
        out["description"] += " This is a float type value."  # as BFCL's FC handlers add
    return out


def tool_name(name: str) -> str:
    """A BFCL function name as a tool name: dots become underscores (BFCL does the same for
    function-calling models, whose APIs reject dots)."""
    return name.replace(".", "_")


# ---------------------------------------------------------------------------------- scorer


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
        expected_type = _PYTHON_TYPES[expected]
        nested = None
        if expected in _NESTED:
            nested = _PYTHON_TYPES[str(details[param].get("items", {}).get("type", "any"))]
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


def _find_function(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for function in functions:
        if function["name"] == name:
            return function
    return functions[0]


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
        function = _find_function(functions, next(iter(answer)))
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


def check_calls(
    category: Category,
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[ToolCall | Mapping[str, Any]],
    ground_truth: Sequence[Mapping[str, Any]],
) -> BFCLVerdict:
    """Score ``calls`` (tool calls, or BFCL's ``{name: {param: value}}`` form) against one
    entry's ground truth with BFCL's AST checker rules."""
    outputs = [_as_bfcl_output(c) for c in calls]
    if any(o is None for o in outputs):
        return BFCLVerdict(False, ("A call's arguments are not a JSON object.",), "bad_json")
    clean = [o for o in outputs if o is not None]
    if category == "parallel":
        result = _parallel_check(functions, clean, ground_truth)
    elif len(clean) != 1:
        result = _bad("simple_function_checker:wrong_count", "Wrong number of functions.")
    else:
        result = _simple_check(functions[0], clean[0], ground_truth[0])
    if result["valid"]:
        return BFCLVerdict(True)
    return BFCLVerdict(False, tuple(str(e) for e in result["error"]), result.get("error_type"))


# ---------------------------------------------------------------------------------- entries


def _first_choice(
    options: Sequence[Any], detail: Mapping[str, Any], required: bool
) -> tuple[bool, Any]:
    """The first allowed value of one parameter (``(False, None)`` when it is ``""``: leave
    the parameter out), with dicts and lists of dicts resolved key by key. A *required*
    parameter whose list starts with ``""`` takes its first real value (a quirk of a few
    entries: leaving a required parameter out fails BFCL's own checker)."""
    if required:
        options = [o for o in options if o != ""]
    if not options or options[0] == "":
        return False, None
    value = options[0]
    kind = detail.get("type")
    if kind == "dict" and isinstance(value, dict):
        return True, _first_dict(value)
    items = detail.get("items", {})
    if kind in _NESTED and items.get("type") == "dict" and isinstance(value, list):
        return True, [_first_dict(v) if isinstance(v, dict) else v for v in value]
    return True, value


def _first_dict(answer: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, options in answer.items():
        if isinstance(options, list) and options and options[0] != "":
            out[key] = options[0]
    return out


@dataclass(frozen=True)
class BFCLEntry:
    """One BFCL entry: question, function docs and ground truth (the possible answers)."""

    id: str
    category: Category
    question: tuple[Mapping[str, Any], ...]
    functions: tuple[Mapping[str, Any], ...]
    ground_truth: tuple[Mapping[str, Any], ...]
    source: str

    def tool_specs(self) -> list[dict[str, Any]]:
        """OpenAI function specs of the entry's functions (names with dots as underscores)."""
        return [
            {
                "type": "function",
                "function": {
                    "name": tool_name(str(f["name"])),
                    "description": str(f.get("description", "")),
                    "parameters": to_json_schema(f.get("parameters", {})),
                },
            }
            for f in self.functions
        ]

    def toolset(self) -> Toolset:
        """Declared-only tools (not executable): every call returns :data:`STUB_RESULT`."""
        return Toolset.from_openai(
            self.tool_specs(), name=f"bfcl:{self.id}", stub_result=STUB_RESULT
        )

    def gold_calls(self) -> tuple[GoldCall, ...]:
        """The first possible answer, one call per ground-truth function call."""
        calls = []
        for answer in self.ground_truth:
            name, possible = next(iter(answer.items()))
            parameters = _find_function(self.functions, name)["parameters"]
            details, required = parameters.get("properties", {}), parameters.get("required", [])
            arguments = {}
            for param, options in possible.items():
                present, value = _first_choice(options, details.get(param, {}), param in required)
                if present:
                    arguments[param] = value
            calls.append(GoldCall(tool_name(name), arguments))
        return tuple(calls)

    def task(self) -> Task:
        """The entry as a loop task: a simple entry's gold is one step of one call, a parallel
        entry's one step of all its calls (one message in P, one call per turn in S/F)."""
        users = [str(m.get("content", "")) for m in self.question if m.get("role") == "user"]
        systems = [str(m.get("content", "")) for m in self.question if m.get("role") == "system"]
        return Task(
            id=f"bfcl-{self.id}",
            prompt="\n\n".join(users),
            system="\n\n".join(systems) or None,
            gold_steps=(self.gold_calls(),),
            gold_answer="Done.",
            max_turns=2 * len(self.ground_truth) + 4,
        )

    def score(self, calls: Sequence[ToolCall | Mapping[str, Any]]) -> BFCLVerdict:
        """BFCL's AST-checker verdict on ``calls`` (see :func:`check_calls`)."""
        return check_calls(self.category, self.functions, calls, self.ground_truth)


def load_entries(category: Category, *, package: str = PACKAGE) -> list[BFCLEntry]:
    """Every entry of one category, in file order, with its ground truth."""
    if category not in CATEGORIES:
        raise BFCLDataError(f"Unknown BFCL category {category!r}; use one of {CATEGORIES}.")
    data = _data_root(package)
    name = _find(data, category)
    questions = _read_jsonl(data / name, f"data/{name}")
    answers = {
        row["id"]: row
        for row in _read_jsonl(data / "possible_answer" / name, f"data/possible_answer/{name}")
    }
    entries = []
    for row in questions:
        answer = answers.get(row["id"])
        if answer is None:
            raise BFCLDataError(
                f"BFCL entry {row['id']!r} of data/{name} has no possible answer; reinstall: "
                f"`{INSTALL_HINT}`."
            )
        turns = row.get("question") or [[]]
        entries.append(
            BFCLEntry(
                id=str(row["id"]),
                category=category,
                question=tuple(turns[0]),
                functions=tuple(row.get("function", ())),
                ground_truth=tuple(answer["ground_truth"]),
                source=name,
            )
        )
    return entries


def select_entries(
    seed: int = 0, *, simple: int = 32, parallel: int = 32, package: str = PACKAGE
) -> list[BFCLEntry]:
    """A seeded selection: ``simple`` simple entries then ``parallel`` parallel ones, each in
    file order. Same seed, same entries."""
    chosen: list[BFCLEntry] = []
    wanted: tuple[tuple[Category, int], ...] = (("simple", simple), ("parallel", parallel))
    for category, count in wanted:
        entries = load_entries(category, package=package)
        if not 0 <= count <= len(entries):
            raise BFCLDataError(
                f"Asked for {count} BFCL {category} entries; the installed data has "
                f"{len(entries)}. Ask for 0..{len(entries)}."
            )
        rng = random.Random(f"bfcl:{seed}:{category}")
        picked = sorted(rng.sample(range(len(entries)), count))
        chosen += [entries[i] for i in picked]
    return chosen
