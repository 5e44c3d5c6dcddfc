"""BFCL: loading from the bfcl-eval package, schemas, tasks, and a scorer that agrees with
BFCL's own AST checker on every simple and parallel entry."""

from __future__ import annotations

import copy
import importlib.resources
import importlib.util
import json
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("bfcl_eval", reason="the BFCL data: pip install --no-deps bfcl-eval")

from harness.benchmarks.bfcl import (
    CATEGORIES,
    INSTALL_HINT,
    BFCLDataError,
    BFCLEntry,
    check_calls,
    data_files,
    load_entries,
    select_entries,
    standardize_string,
    to_json_schema,
)
from harness.calls import execute_call
from harness.engines.base import ToolCall
from harness.errors import ConfigError
from harness.loop import LoopConfig, run_loop
from harness.testing import ScriptedEngine

ENTRIES = {category: load_entries(category) for category in CATEGORIES}
ALL = [e for category in CATEGORIES for e in ENTRIES[category]]

Output = list[dict[str, dict[str, Any]]]


def reference_checker() -> Callable[..., dict[str, Any]]:
    """BFCL's own ``ast_checker`` from the installed package, with its model-config import
    (which needs BFCL's full dependency tree) replaced by a stub that says what BFCL says for
    function-calling models: dots in function names become underscores."""

    class _Config:
        underscore_to_dot = True

    class _Mapping(dict[str, Any]):
        def __missing__(self, key: str) -> _Config:
            return _Config()

    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = _Mapping()  # type: ignore[attr-defined]
    path = importlib.resources.files("bfcl_eval") / "eval_checker/ast_eval/ast_checker.py"
    saved = sys.modules.get(stub.__name__)
    sys.modules[stub.__name__] = stub
    try:
        spec = importlib.util.spec_from_file_location("_bfcl_reference_ast_checker", str(path))
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del sys.modules[stub.__name__]
        else:
            sys.modules[stub.__name__] = saved
    from bfcl_eval.constants.enums import Language

    def check(entry: BFCLEntry, output: Output) -> dict[str, Any]:
        category = "simple_python" if entry.category == "simple" else "parallel"
        result: dict[str, Any] = module.ast_checker(
            copy.deepcopy(list(entry.functions)),
            copy.deepcopy(output),
            copy.deepcopy(list(entry.ground_truth)),
            Language.PYTHON,
            category,
            "reference_fc_model",
        )
        return result

    return check


REFERENCE = reference_checker()


def gold_output(entry: BFCLEntry) -> Output:
    return [{g.name: dict(g.arguments)} for g in entry.gold_calls()]


def alternatives(entry: BFCLEntry) -> Iterator[Output]:
    """The gold answer with each parameter set, in turn, to each value its list allows."""
    gold = gold_output(entry)
    for index, answer in enumerate(entry.ground_truth):
        _, possible = next(iter(answer.items()))
        for param, options in possible.items():
            for option in options:
                if isinstance(option, dict | list):
                    continue  # dicts/lists of options are checked through the gold itself
                variant = copy.deepcopy(gold)
                params = next(iter(variant[index].values()))
                if option == "":
                    params.pop(param, None)
                else:
                    params[param] = option
                yield variant


def _wrong_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return 987654321
    if isinstance(value, float):
        return 987654.321
    if isinstance(value, str):
        return "zq wrong value"
    if isinstance(value, list):
        return [*value, *(value[:1] or ["zq"])]
    if isinstance(value, dict):
        return {**value, "zq_key": 1}
    raise AssertionError(value)


def perturbations(entry: BFCLEntry) -> Iterator[tuple[str, Output]]:
    """Wrong answers: each must fail, under our scorer and BFCL's."""
    gold = gold_output(entry)
    name, params = next(iter(gold[0].items()))
    yield "renamed", [{f"{name}_zq": params}, *gold[1:]]
    yield "unexpected parameter", [{name: {**params, "zq_unexpected": 1}}, *gold[1:]]
    required = entry.functions[0]["parameters"].get("required", [])
    present = [p for p in required if p in params]
    if present:
        yield (
            "missing required",
            [{name: {k: v for k, v in params.items() if k != present[0]}}, *gold[1:]],
        )
    _, possible = next(iter(entry.ground_truth[0].items()))
    for param, value in params.items():
        wrong = _wrong_value(value)
        if wrong not in possible[param]:
            yield f"wrong value of {param}", [{name: {**params, param: wrong}}, *gold[1:]]
            break
    yield "two calls", [*gold, gold[0]]
    if entry.category == "parallel":
        yield "one call missing", gold[:-1]
        if standardize_string(json.dumps(gold[-1])) != standardize_string(json.dumps(gold[0])):
            yield "first call twice", [*gold[:-1], gold[0]]


# ------------------------------------------------------------------------------- loading


def test_the_simple_and_parallel_files_are_found_in_the_package() -> None:
    files = data_files()
    assert files["simple"].endswith("_simple_python.json")
    assert files["parallel"].startswith("BFCL_v")
    assert files["parallel"].endswith("_parallel.json")
    assert "live" not in files["parallel"]
    assert "multiple" not in files["parallel"]
    assert len(ENTRIES["simple"]) >= 32
    assert len(ENTRIES["parallel"]) >= 32
    assert all(e.id.startswith("simple") for e in ENTRIES["simple"])
    assert all(e.id.startswith("parallel_") for e in ENTRIES["parallel"])
    assert all(len(e.ground_truth) >= 2 for e in ENTRIES["parallel"])


def test_a_seeded_selection_is_32_plus_32_and_the_same_for_the_same_seed() -> None:
    chosen = select_entries(0)
    assert [e.category for e in chosen] == ["simple"] * 32 + ["parallel"] * 32
    assert len({e.id for e in chosen}) == 64
    assert [e.id for e in select_entries(0)] == [e.id for e in chosen]
    assert [e.id for e in select_entries(1)] != [e.id for e in chosen]
    small = select_entries(0, simple=3, parallel=5)
    assert [e.category for e in small] == ["simple"] * 3 + ["parallel"] * 5


def test_asking_for_more_entries_than_exist_is_a_clear_error() -> None:
    with pytest.raises(BFCLDataError, match=r"Asked for 100000 BFCL simple entries"):
        select_entries(0, simple=100_000)


def test_a_missing_bfcl_package_says_how_to_install_it() -> None:
    with pytest.raises(BFCLDataError, match=r"pip install --no-deps bfcl-eval") as info:
        load_entries("simple", package="no_such_bfcl_package")
    assert isinstance(info.value, ConfigError)
    assert INSTALL_HINT in str(info.value)


def test_a_package_without_the_data_files_is_a_clear_error() -> None:
    with pytest.raises(BFCLDataError, match=r"no data/ folder.*pip install --no-deps bfcl-eval"):
        load_entries("parallel", package="json")


# -------------------------------------------------------------------------------- schemas


def test_bfcl_types_map_to_json_schema() -> None:
    schema = to_json_schema(
        {
            "type": "dict",
            "properties": {
                "a": {"type": "float", "description": "x."},
                "b": {"type": "tuple", "items": {"type": "float"}},
                "c": {"type": "any"},
                "d": {"type": "dict", "properties": {"e": {"type": "integer"}}},
                "f": {"type": "array", "items": {"type": "string"}, "optional": True},
                "g": {"type": "boolean", "enum": [True]},
            },
            "required": ["a"],
        }
    )
    props = schema["properties"]
    assert schema["type"] == "object"
    assert props["a"] == {"type": "number", "description": "x. This is a float type value."}
    assert props["b"] == {"type": "array", "items": {"type": "number"}}
    assert props["c"] == {"type": "string"}
    assert props["d"] == {"type": "object", "properties": {"e": {"type": "integer"}}}
    assert props["f"] == {"type": "array", "items": {"type": "string"}}
    assert props["g"] == {"type": "boolean", "enum": [True]}
    assert schema["required"] == ["a"]


def test_every_entry_becomes_a_valid_toolset_whose_schema_accepts_the_gold() -> None:
    for entry in ALL:
        toolset = entry.toolset()
        assert len(toolset) == len(entry.functions)
        for call in entry.gold_calls():
            assert call.name in toolset
            assert "." not in call.name
            assert toolset[call.name].validation_errors(dict(call.arguments)) == [], entry.id


@pytest.mark.anyio
async def test_bfcl_tools_are_declared_only_and_return_the_stub() -> None:
    entry = ENTRIES["simple"][0]
    toolset = entry.toolset()
    call = entry.gold_calls()[0]
    result = await execute_call(toolset, call.to_tool_call("c0"))
    assert not result.is_error
    assert result.content == "ok"
    assert not toolset[call.name].effect.annotated


def test_an_entry_becomes_a_task_whose_gold_is_one_step() -> None:
    simple, parallel = ENTRIES["simple"][0], ENTRIES["parallel"][0]
    task = simple.task()
    assert task.id == f"bfcl-{simple.id}"
    assert task.prompt == simple.question[0]["content"]
    assert len(task.gold_steps) == 1
    assert len(task.gold_steps[0]) == 1
    ptask = parallel.task()
    assert len(ptask.gold_steps) == 1
    assert len(ptask.gold_steps[0]) == len(parallel.ground_truth)


@pytest.mark.anyio
@pytest.mark.parametrize("arm", ["S", "P"])
async def test_the_gold_policy_scores_every_selected_entry(arm: Any) -> None:
    for entry in select_entries(0, simple=8, parallel=8):
        async with ScriptedEngine() as engine:
            result = await run_loop(
                engine, entry.toolset(), entry.task(), LoopConfig(arm=arm, policy="gold")
            )
        assert entry.score(result.calls).valid, (arm, entry.id)


# -------------------------------------------------------------------------------- scoring


def test_standardize_string_follows_bfcl() -> None:
    assert standardize_string("April 1, 2024") == standardize_string("april 1 2024")
    assert standardize_string("New-York_City") == "newyorkcity"
    assert standardize_string("it's") == 'it"s'


def test_every_entrys_own_possible_answer_scores_and_bfcl_agrees() -> None:
    for entry in ALL:
        gold = gold_output(entry)
        assert entry.score(gold).valid, entry.id
        assert REFERENCE(entry, gold)["valid"], entry.id
        calls = [g.to_tool_call(f"c{i}") for i, g in enumerate(entry.gold_calls())]
        assert entry.score(calls).valid, entry.id
        backwards = list(reversed(gold))
        assert entry.score(backwards).valid == REFERENCE(entry, backwards)["valid"], entry.id


def test_parallel_calls_match_in_any_order_greedily_as_bfcl_does() -> None:
    orders = 0
    for entry in ENTRIES["parallel"]:
        gold = gold_output(entry)
        for shift in range(1, len(gold)):
            rotated = gold[shift:] + gold[:shift]
            ours = entry.score(rotated).valid
            assert ours == REFERENCE(entry, rotated)["valid"], entry.id
            orders += ours
    # BFCL matches each answer to the first call that fits, without backtracking, so a few
    # orders of a correct answer fail in BFCL too (an answer whose options admit two calls).
    assert orders > 0.9 * sum(len(e.ground_truth) - 1 for e in ENTRIES["parallel"])


def test_every_allowed_alternative_gets_the_same_verdict_as_bfcl() -> None:
    checked = 0
    for entry in ALL:
        for variant in alternatives(entry):
            ours = entry.score(variant)
            theirs = REFERENCE(entry, variant)
            assert ours.valid == theirs["valid"], (entry.id, variant, ours, theirs)
            checked += 1
    assert checked > 1500


def test_every_perturbed_answer_fails_under_our_scorer_and_bfcls() -> None:
    for entry in ALL:
        kinds = []
        for kind, output in perturbations(entry):
            ours = entry.score(output)
            assert not ours.valid, (entry.id, kind, output)
            assert not REFERENCE(entry, output)["valid"], (entry.id, kind)
            kinds.append(kind)
        assert {"renamed", "unexpected parameter", "two calls"} <= set(kinds)


def test_int_is_accepted_for_float_and_strings_are_normalised() -> None:
    entry = next(e for e in ENTRIES["simple"] if e.id == "simple_python_0")
    gold = gold_output(entry)
    params = next(iter(gold[0].values()))
    assert params["unit"] == "units"
    assert entry.score([{"calculate_triangle_area": {**params, "unit": " UNITS"}}]).valid
    assert entry.score([{"calculate_triangle_area": {"base": 10, "height": 5}}]).valid
    assert not entry.score([{"calculate_triangle_area": {"base": 10.0, "height": 5}}]).valid
    floats = next(
        e
        for e in ALL
        for g in e.gold_calls()
        for p, v in g.arguments.items()
        if isinstance(v, float)
        and v.is_integer()
        and e.functions[0]["parameters"]["properties"].get(p, {}).get("type") == "float"
    )
    output = gold_output(floats)
    for call in output:
        params = next(iter(call.values()))
        for key, value in params.items():
            if isinstance(value, float) and value.is_integer():
                params[key] = int(value)
    assert floats.score(output).valid


def test_bad_json_arguments_and_a_wrong_count_fail() -> None:
    entry = ENTRIES["simple"][0]
    name = entry.gold_calls()[0].name
    assert not entry.score([ToolCall("c", name, "{not json")]).valid
    assert not entry.score([]).valid
    verdict = check_calls("simple", entry.functions, [], entry.ground_truth)
    assert verdict.error_type == "simple_function_checker:wrong_count"


def test_entries_serialise_to_json() -> None:
    for entry in select_entries(0, simple=2, parallel=2):
        json.dumps([entry.tool_specs(), [dict(g.arguments) for g in entry.gold_calls()]])


def test_scoring_does_not_change_the_entry() -> None:
    for entry in ENTRIES["parallel"][:20]:
        before = copy.deepcopy(entry.ground_truth)
        output = gold_output(entry)
        kept = copy.deepcopy(output)
        entry.score(output)
        assert entry.ground_truth == before
        assert output == kept
