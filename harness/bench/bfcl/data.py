"""BFCL entries: the data files, tool schemas, gold calls and loop tasks.

The Berkeley Function Calling Leaderboard ships its data inside the PyPI package
``bfcl-eval`` (install it with ``pip install --no-deps bfcl-eval``: only the data files and
the AST checker are used). This module reads, as package resources, the question file of each
category in :data:`~harness.bench.bfcl.categories.CATEGORIES`,
``bfcl_eval/data/BFCL_v<N>_<category>.json`` (``simple`` is ``BFCL_v<N>_simple_python.json``,
or ``BFCL_v<N>_simple.json`` in older releases), and its ground truth in
``data/possible_answer/`` (same name). The files are JSON Lines. The newest version present is
used.

* :func:`to_json_schema` maps BFCL's parameter types (``dict``, ``float``, ``tuple``, ``any``,
  ...) to JSON Schema as BFCL's own OpenAI-style handlers do (``any`` is a string, ``float``
  a number, ``tuple`` an array), dropping BFCL's ``optional`` marker.
* :class:`BFCLEntry` gives the entry's :class:`~harness.tools.Toolset` (declared-only tools:
  every call returns :data:`STUB_RESULT`), its gold calls, its
  :class:`~harness.loop.task.Task` and :meth:`BFCLEntry.score` (:mod:`harness.bench.bfcl.checker`).

**The gold calls** are built from the possible answers parameter by parameter: the first
allowed value that the parameter's JSON Schema accepts — or the enum member BFCL's string
normalisation takes it for (``"Horror"`` for an allowed ``"horror"``) — ``""`` meaning "leave
it out" (never for a required parameter, and always for a parameter the function does not
document). Where no allowed value fits, the first one is kept, and the entry is a data quirk
(:mod:`harness.bench.bfcl.selection`).
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any, Final

import jsonschema

from harness.bench.bfcl.categories import CATEGORIES, Category, parse_category
from harness.bench.bfcl.checker import (
    BFCLVerdict,
    check_calls,
    find_function,
    standardize_string,
    tool_name,
)
from harness.errors import ConfigError
from harness.loop.task import GoldCall, Task
from harness.messages import ToolCall
from harness.tools.toolset import Toolset

__all__ = (
    "INSTALL_HINT",
    "PACKAGE",
    "STUB_RESULT",
    "BFCLDataError",
    "BFCLEntry",
    "data_files",
    "load_entries",
    "to_json_schema",
)

PACKAGE: Final = "bfcl_eval"
INSTALL_HINT: Final = "pip install --no-deps bfcl-eval"
#: What every BFCL tool "returns": the functions are declared, not executable.
STUB_RESULT: Final = "ok"


def _patterns(category: Category) -> tuple[str, ...]:
    if category == "simple":
        return (r"BFCL_v(\d+)_simple_python\.json", r"BFCL_v(\d+)_simple\.json")
    return (rf"BFCL_v(\d+)_{category}\.json",)


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
_NESTED: Final = ("array", "tuple")


class BFCLDataError(ConfigError):
    """The BFCL data cannot be read: the package is missing, a file is absent or malformed,
    or more entries were asked for than a category has."""


# ---------------------------------------------------------------------------------- files


def _data_root(package: str) -> Traversable:
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError as exc:  # chained: a traceback names the missing module
        raise BFCLDataError(
            f"The BFCL data comes from the PyPI package bfcl-eval, and Python package "
            f"{package!r} is not installed; install it with `{INSTALL_HINT}` (only its data "
            "files are used, so --no-deps is enough)."
        ) from exc
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
    for pattern in _patterns(category):
        found = [n for n in names if re.fullmatch(pattern, n)]
        if found:
            return max(found, key=_version)
    wanted = " or ".join(p.replace(r"(\d+)", "<N>").replace("\\", "") for p in _patterns(category))
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


# ---------------------------------------------------------------------------------- entries

_OMIT: Final = object()


def _resolve(value: Any, detail: Mapping[str, Any]) -> Any:
    """An allowed value with dicts and lists of dicts resolved key by key (their options)."""
    kind = detail.get("type")
    if kind == "dict" and isinstance(value, dict):
        return _first_dict(value)
    items = detail.get("items", {})
    if kind in _NESTED and items.get("type") == "dict" and isinstance(value, list):
        return [_first_dict(v) if isinstance(v, dict) else v for v in value]
    return value


def _first_dict(answer: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, options in answer.items():
        if isinstance(options, list) and options and options[0] != "":
            out[key] = options[0]
    return out


def _choose(
    options: Sequence[Any],
    detail: Mapping[str, Any] | None,
    schema: Mapping[str, Any],
    required: bool,
) -> Any:
    """One parameter's gold value, or :data:`_OMIT` (see the module docstring)."""
    if detail is None:  # not documented: BFCL's checker rejects it unless it may be left out
        return _OMIT if "" in options or not options else _resolve(options[0], {})
    candidates = [_OMIT if o == "" else _resolve(o, detail) for o in options]
    if required:
        candidates = [c for c in candidates if c is not _OMIT]
    if not candidates:
        return _OMIT
    validator = jsonschema.Draft202012Validator(dict(schema))
    for candidate in candidates:
        if candidate is _OMIT or validator.is_valid(candidate):
            return candidate
        spelled = _enum_spelling(candidate, schema)
        if spelled is not None:
            return spelled
    return candidates[0]


def _enum_spelling(value: Any, schema: Mapping[str, Any]) -> str | None:
    """The member of the schema's string enum that BFCL's checker takes for ``value`` (the
    same after :func:`standardize_string`: ``"horror"`` for ``"Horror"``), if any."""
    if not isinstance(value, str):
        return None
    members = [m for m in schema.get("enum", ()) if isinstance(m, str)]
    return next((m for m in members if standardize_string(m) == standardize_string(value)), None)


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
        """One call per ground-truth function call (see the module docstring)."""
        calls = []
        for answer in self.ground_truth:
            name, possible = next(iter(answer.items()))
            function = find_function(self.functions, name) or {"parameters": {}}
            parameters = function["parameters"]
            details = parameters.get("properties", {})
            schemas = to_json_schema(parameters)["properties"]
            required = parameters.get("required", [])
            arguments = {}
            for param, options in possible.items():
                value = _choose(
                    options, details.get(param), schemas.get(param, {}), param in required
                )
                if value is not _OMIT:
                    arguments[param] = value
            calls.append(GoldCall(tool_name(name), arguments))
        return tuple(calls)

    def schema_errors(self, call: GoldCall) -> list[str]:
        """Why ``call``'s arguments do not satisfy its tool's JSON Schema (as
        :meth:`harness.tools.Tool.validation_errors` words it; empty when they do), without
        building the toolset."""
        function = find_function(self.functions, call.name) or next(
            (f for f in self.functions if tool_name(str(f["name"])) == call.name), None
        )
        if function is None:
            return [f"(name): no tool {call.name!r} is documented"]
        validator = jsonschema.Draft202012Validator(to_json_schema(function.get("parameters", {})))
        errors = sorted(validator.iter_errors(dict(call.arguments)), key=lambda e: list(e.path))
        return [f"{'/'.join(str(p) for p in e.path) or '(arguments)'}: {e.message}" for e in errors]

    def gold_output(self) -> list[dict[str, dict[str, Any]]]:
        """The gold calls in BFCL's decoded form, ``[{name: {param: value}}, ...]``."""
        return [{call.name: copy.deepcopy(dict(call.arguments))} for call in self.gold_calls()]

    def task(self) -> Task:
        """The entry as a loop task: a single-call entry's gold is one step of one call, a
        parallel entry's one step of all its calls (one message in P, one call per turn in
        S/F)."""
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
        """BFCL's AST-checker verdict on ``calls`` (see :func:`~harness.bench.bfcl.check_calls`)."""
        return check_calls(self.category, self.functions, calls, self.ground_truth)


def load_entries(category: str, *, package: str = PACKAGE) -> list[BFCLEntry]:
    """Every entry of one category (a name from
    :data:`~harness.bench.bfcl.categories.CATEGORIES`; any other raises), in file order, with
    its ground truth."""
    return list(_load(parse_category(category), package))


@functools.cache
def _load(category: Category, package: str) -> tuple[BFCLEntry, ...]:
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
    return tuple(entries)
