"""BFCL: every AST category by BFCL's own name, a scorer that agrees with BFCL's own checker,
data quirks set aside, seeded per-category selection, and g per category pair.

The full agreement sweep over every entry is a command (``python -m harness.bench.bfcl
agreement``); these tests run it on a seeded sample of each category."""

from __future__ import annotations

import copy
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("bfcl_eval", reason="the BFCL data: pip install --no-deps bfcl-eval")

import harness.bench.bfcl.checker as checker_module
from harness.bench.analysis import bfcl_gaps, gap_pp, verdict_r4
from harness.bench.bfcl import (
    CATEGORIES,
    INSTALL_HINT,
    PAIRS,
    PARALLEL_CATEGORIES,
    SINGLE_CALL_CATEGORIES,
    BFCLCategoryError,
    BFCLDataError,
    arm_of,
    bench_counts,
    check_calls,
    data_files,
    data_quirks,
    load_entries,
    parse_categories,
    reference_checker,
    scorable_entries,
    select_entries,
    standardize_string,
    to_json_schema,
)
from harness.bench.bfcl.__main__ import main
from harness.bench.bfcl.agreement import KINDS, cases, measure_agreement
from harness.bench.bfcl.categories import bfcl_name, checker_kind
from harness.bench.report import write_report
from harness.bench.runner import BenchPlan, plan_jobs
from harness.errors import ConfigError
from harness.loop import LoopConfig, run_loop
from harness.messages import ToolCall
from harness.testing import ScriptedEngine
from harness.tools.execute import execute_call

ENTRIES = {category: load_entries(category) for category in CATEGORIES}
REFERENCE = reference_checker()


def sample(category: str, count: int = 12, seed: int = 0) -> list[Any]:
    entries = ENTRIES[category]
    rng = random.Random(f"test:{seed}:{category}")
    return [entries[i] for i in sorted(rng.sample(range(len(entries)), min(count, len(entries))))]


def bfcl_verdict(entry: Any, output: Any) -> bool:
    return bool(REFERENCE(entry.category, entry.functions, output, entry.ground_truth)["valid"])


# ---------------------------------------------------------------------------- categories


def test_every_ast_category_file_is_found_in_the_package() -> None:
    files = data_files()
    assert tuple(files) == CATEGORIES
    assert files["simple"].endswith("_simple_python.json")
    for category in CATEGORIES:
        if category != "simple":
            assert re.fullmatch(rf"BFCL_v\d+_{category}\.json", files[category])
        prefix = "simple_python_" if category == "simple" else f"{category}_"
        assert all(e.id.startswith(prefix) for e in ENTRIES[category]), category
        assert all(e.category == category for e in ENTRIES[category])
    assert len(ENTRIES["live_parallel"]) < 32 < len(ENTRIES["live_multiple"])


def test_the_categories_are_bfcls_names_and_each_single_call_one_pairs_with_its_parallel_one() -> (
    None
):
    assert CATEGORIES == (
        "simple", "multiple", "parallel", "parallel_multiple",
        "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
    )  # fmt: skip
    assert PAIRS == (
        ("simple", "parallel"),
        ("multiple", "parallel_multiple"),
        ("live_simple", "live_parallel"),
        ("live_multiple", "live_parallel_multiple"),
    )
    assert {arm_of(c) for c in SINGLE_CALL_CATEGORIES} == {"S"}
    assert {arm_of(c) for c in PARALLEL_CATEGORIES} == {"P"}
    assert [checker_kind(c) for c in CATEGORIES] == [
        "simple", "multiple", "parallel", "parallel", "simple", "multiple", "parallel", "parallel",
    ]  # fmt: skip
    assert bfcl_name("simple") == "simple_python"
    assert bfcl_name("live_parallel_multiple") == "live_parallel_multiple"


def test_single_call_entries_have_one_gold_call_and_parallel_entries_several() -> None:
    for category in SINGLE_CALL_CATEGORIES:
        assert all(len(e.ground_truth) == 1 for e in ENTRIES[category]), category
    for category in PARALLEL_CATEGORIES:
        several = [len(e.ground_truth) >= 2 for e in ENTRIES[category]]
        assert sum(several) >= 0.9 * len(several), category
    for category in ("multiple", "live_multiple", "parallel_multiple"):
        assert all(len(e.functions) >= 2 for e in ENTRIES[category]), category


def test_an_unknown_category_is_an_error_that_lists_the_valid_names() -> None:
    attempts = [
        lambda: load_entries("simpel"),
        lambda: parse_categories(["simple", "paralel"]),
        lambda: check_calls("simpel", [], [], []),
        lambda: select_entries(0, {"multi": 1}),
        lambda: bench_counts(["nope"]),
        lambda: data_quirks("nope"),
        lambda: BenchPlan(out=Path("."), bfcl_categories=("nope",)),
    ]
    for attempt in attempts:
        with pytest.raises(BFCLCategoryError) as info:
            attempt()
        assert isinstance(info.value, ConfigError)
        for name in CATEGORIES:
            assert name in str(info.value)


def test_java_javascript_and_non_ast_categories_are_refused_with_the_reason() -> None:
    with pytest.raises(BFCLCategoryError, match=r"simple_java.*not run here.*Java/JavaScript"):
        parse_categories(["simple_java"])
    with pytest.raises(BFCLCategoryError, match=r"simple_javascript.*not run here"):
        load_entries("simple_javascript")
    with pytest.raises(BFCLCategoryError, match=r"irrelevance.*not scored by BFCL's AST checker"):
        parse_categories(["irrelevance"])
    with pytest.raises(BFCLCategoryError, match=r"No BFCL category given"):
        parse_categories([])


def test_simple_python_is_accepted_as_bfcls_v4_name_for_simple() -> None:
    assert parse_categories(["simple_python", "parallel", "simple"]) == ("simple", "parallel")
    assert [e.id for e in load_entries("simple_python")] == [e.id for e in ENTRIES["simple"]]


# ---------------------------------------------------------------------------------- data


def test_a_missing_bfcl_package_says_how_to_install_it() -> None:
    with pytest.raises(BFCLDataError, match=r"pip install --no-deps bfcl-eval") as info:
        load_entries("simple", package="no_such_bfcl_package")
    assert isinstance(info.value, ConfigError)
    assert INSTALL_HINT in str(info.value)
    with pytest.raises(BFCLDataError, match=r"not installed.*pip install --no-deps bfcl-eval"):
        reference_checker("no_such_bfcl_package")


def test_a_package_without_the_data_files_or_the_checker_is_a_clear_error() -> None:
    with pytest.raises(BFCLDataError, match=r"no data/ folder.*pip install --no-deps bfcl-eval"):
        load_entries("parallel", package="json")
    with pytest.raises(BFCLDataError, match=r"has no eval_checker/ast_eval/ast_checker\.py"):
        reference_checker("json")


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


def test_sampled_entries_of_every_category_become_toolsets_whose_schema_accepts_the_gold() -> None:
    for category in CATEGORIES:
        quirks = {q.id for q in data_quirks(category)}
        for entry in sample(category, 6):
            toolset = entry.toolset()
            assert len(toolset) == len(entry.functions)
            for call in entry.gold_calls():
                assert call.name in toolset
                assert "." not in call.name
                errors = toolset[call.name].validation_errors(dict(call.arguments))
                assert errors == entry.schema_errors(call), entry.id
                assert (errors == []) or entry.id in quirks, entry.id


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
    live = next(e for e in ENTRIES["live_multiple"] if e.question[0]["role"] == "system")
    assert live.task().system == live.question[0]["content"]
    assert live.task().prompt == live.question[1]["content"]


def test_the_gold_takes_the_enum_spelling_bfcl_forgives_and_leaves_out_undocumented_params() -> (
    None
):
    horror = next(e for e in ENTRIES["live_multiple"] if e.id == "live_multiple_756-169-11")
    possible = next(iter(horror.ground_truth[0].values()))
    assert possible["genre"] == ["horror"]
    assert horror.gold_calls()[0].arguments["genre"] == "Horror"
    assert bfcl_verdict(horror, horror.gold_output())
    assert horror.schema_errors(horror.gold_calls()[0]) == []
    bank = next(e for e in ENTRIES["parallel_multiple"] if e.id == "parallel_multiple_26")
    balance = next(iter(bank.ground_truth[1].values()))
    assert balance["type"] == ["credit", ""]  # "type" is not a documented parameter
    assert "type" not in bank.gold_calls()[1].arguments
    assert bfcl_verdict(bank, bank.gold_output())


# -------------------------------------------------------------------------------- quirks


def test_a_data_quirk_is_an_entry_whose_gold_fails_bfcls_checker_or_the_tool_schema() -> None:
    found = {c: data_quirks(c) for c in CATEGORIES}
    assert not found["simple"]
    assert not found["parallel"]
    reasons = [r for quirks in found.values() for q in quirks for r in q.reasons]
    assert any(r.startswith("BFCL's checker rejects the gold") for r in reasons)
    assert any("rejects the gold:" in r and r.startswith("the schema of") for r in reasons)
    for category, quirks in found.items():
        by_id = {e.id: e for e in ENTRIES[category]}
        for quirk in quirks:
            entry = by_id[quirk.id]
            schema_ok = all(not entry.schema_errors(c) for c in entry.gold_calls())
            assert not (bfcl_verdict(entry, entry.gold_output()) and schema_ok), quirk
        for entry in sample(category, 10):
            if entry.id not in {q.id for q in quirks}:
                assert bfcl_verdict(entry, entry.gold_output()), entry.id
                assert entry.score(entry.gold_output()).valid, entry.id


def test_quirks_are_never_selected_and_a_category_smaller_than_asked_is_taken_whole() -> None:
    counts = bench_counts()
    assert counts["live_parallel"] == len(scorable_entries("live_parallel")) < 32
    assert counts["simple"] == 32
    everything = select_entries(0, {c: len(scorable_entries(c)) for c in CATEGORIES})
    quirks = {q.id for c in CATEGORIES for q in data_quirks(c)}
    assert quirks
    assert not quirks & {e.id for e in everything}
    assert len(everything) == sum(len(ENTRIES[c]) for c in CATEGORIES) - len(quirks)


# ----------------------------------------------------------------------------- selection


def test_a_seeded_selection_draws_each_category_independently_and_reproducibly() -> None:
    both = select_entries(0, {"simple": 5, "live_parallel_multiple": 4, "multiple": 3})
    assert [e.category for e in both] == ["simple"] * 5 + ["multiple"] * 3 + [
        "live_parallel_multiple"
    ] * 4
    alone = select_entries(0, {"multiple": 3})
    assert [e.id for e in alone] == [e.id for e in both if e.category == "multiple"]
    assert [e.id for e in select_entries(0, {"multiple": 3})] == [e.id for e in alone]
    assert [e.id for e in select_entries(1, {"multiple": 3})] != [e.id for e in alone]


def test_the_draw_keeps_the_benchs_seed_semantics_for_simple_and_parallel() -> None:
    for seed in (0, 7):
        chosen = select_entries(seed, {"simple": 32, "parallel": 32})
        for category in ("simple", "parallel"):
            rng = random.Random(f"bfcl:{seed}:{category}")
            indices = sorted(rng.sample(range(len(ENTRIES[category])), 32))
            expected = [ENTRIES[category][i].id for i in indices]
            assert [e.id for e in chosen if e.category == category] == expected


def test_the_default_selection_is_32_per_category_or_the_whole_category() -> None:
    chosen = select_entries(0)
    for category in CATEGORIES:
        got = sum(1 for e in chosen if e.category == category)
        assert got == min(32, len(scorable_entries(category)))


def test_asking_for_more_entries_than_exist_is_a_clear_error() -> None:
    with pytest.raises(BFCLDataError, match=r"Asked for 100000 BFCL simple entries"):
        select_entries(0, {"simple": 100_000})
    with pytest.raises(BFCLDataError, match=r"live_parallel_multiple.*1 data quirks"):
        select_entries(0, {"live_parallel_multiple": 24})
    with pytest.raises(BFCLDataError, match=r"0 or more"):
        bench_counts(single=-1)


# ------------------------------------------------------------------------------- scoring


def test_standardize_string_follows_bfcl() -> None:
    assert standardize_string("April 1, 2024") == standardize_string("april 1 2024")
    assert standardize_string("New-York_City") == "newyorkcity"
    assert standardize_string("it's") == 'it"s'


def test_int_is_accepted_for_float_and_strings_are_normalised() -> None:
    entry = next(e for e in ENTRIES["simple"] if e.id == "simple_python_0")
    params = next(iter(entry.gold_output()[0].values()))
    assert params["unit"] == "units"
    assert entry.score([{"calculate_triangle_area": {**params, "unit": " UNITS"}}]).valid
    assert entry.score([{"calculate_triangle_area": {"base": 10, "height": 5}}]).valid
    assert not entry.score([{"calculate_triangle_area": {"base": 10.0, "height": 5}}]).valid


def test_a_multiple_entry_is_checked_against_the_function_its_answer_names() -> None:
    entry = ENTRIES["multiple"][0]
    gold = entry.gold_output()
    assert entry.score(gold).valid
    name, params = next(iter(gold[0].items()))
    other = next(
        f["name"].replace(".", "_") for f in entry.functions if f["name"].replace(".", "_") != name
    )
    verdict = entry.score([{other: params}])
    assert not verdict.valid
    assert verdict.error_type == "simple_function_checker:wrong_func_name"
    assert entry.score([]).error_type == "multiple_function_checker:wrong_count"


def test_bad_json_arguments_and_a_wrong_count_fail_with_bfcls_error_types() -> None:
    entry = ENTRIES["simple"][0]
    name = entry.gold_calls()[0].name
    assert not entry.score([ToolCall("c", name, "{not json")]).valid
    assert not entry.score([ToolCall("c", name, "[1, 2]")]).valid
    wrong_count = {
        "simple": "simple_function_checker:wrong_count",
        "live_simple": "simple_function_checker:wrong_count",
        "multiple": "multiple_function_checker:wrong_count",
        "parallel_multiple": "parallel_function_checker_no_order:wrong_count",
    }
    for category, error_type in wrong_count.items():
        some = ENTRIES[category][0]
        verdict = check_calls(category, some.functions, [], some.ground_truth)
        assert verdict.error_type == error_type
        theirs = REFERENCE(category, some.functions, [], some.ground_truth)
        assert theirs["error_type"] == error_type


@pytest.mark.anyio
@pytest.mark.parametrize("arm", ["S", "P"])
async def test_the_gold_policy_scores_selected_entries_of_every_category(arm: Any) -> None:
    for entry in select_entries(0, dict.fromkeys(CATEGORIES, 2)):
        async with ScriptedEngine() as engine:
            result = await run_loop(
                engine, entry.toolset(), entry.task(), LoopConfig(arm=arm, policy="gold")
            )
        assert entry.score(result.calls).valid, (arm, entry.id)


def test_scoring_does_not_change_the_entry() -> None:
    for entry in sample("parallel_multiple", 10):
        before = copy.deepcopy(entry.ground_truth)
        output = entry.gold_output()
        kept = copy.deepcopy(output)
        entry.score(output)
        assert entry.ground_truth == before
        assert output == kept


# ----------------------------------------------------------------------------- agreement


def test_the_reference_is_bfcls_own_checker_and_leaves_sys_modules_as_it_found_them() -> None:
    assert REFERENCE.source.endswith("bfcl_eval/eval_checker/ast_eval/ast_checker.py")
    assert REFERENCE.ast_checker.__module__ == "_bfcl_reference_ast_checker"
    assert "bfcl_eval.constants.model_config" not in sys.modules
    entry = ENTRIES["parallel"][0]
    assert REFERENCE("parallel", entry.functions, entry.gold_output(), entry.ground_truth)["valid"]


def test_every_kind_of_case_occurs_in_every_category_where_it_applies() -> None:
    for category in CATEGORIES:
        kinds = {kind for entry in sample(category, 12) for kind, _ in cases(entry)}
        always = {"gold", "wrong function", "wrong value", "wrong type", "extra parameter",
                  "dropped call", "extra call", "allowed alternative", "missing required"}  # fmt: skip
        assert always <= kinds, (category, always - kinds)
        if "multiple" in category:
            assert "other documented function" in kinds, category
        if "parallel" in category:
            assert "reordered calls" in kinds, category
    assert set(KINDS) == {kind for c in CATEGORIES for e in sample(c, 12) for kind, _ in cases(e)}


def test_the_scorer_agrees_with_bfcls_checker_on_a_sample_of_every_category() -> None:
    report = measure_agreement(per_category=10, seed=3)
    total = report.total()
    assert report.disagreements == ()
    assert total.agreed == total.cases > 1000
    assert set(report.by_category()) == set(CATEGORIES)
    by_kind = report.by_kind()
    for kind in ("wrong function", "other documented function", "wrong value", "wrong type",
                 "missing required", "extra parameter", "dropped call", "extra call"):  # fmt: skip
        assert by_kind[kind].accepted == 0, kind  # BFCL rejects every wrong answer...
    assert by_kind["gold"].accepted >= by_kind["gold"].cases - 2  # ...and accepts the gold
    assert by_kind["reordered calls"].accepted > 0.9 * by_kind["reordered calls"].cases


def test_the_agreement_sweep_catches_a_scorer_that_differs_from_bfcl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(checker_module, "standardize_string", lambda text: text)
    report = measure_agreement(["simple", "live_multiple"], per_category=10)
    kinds = {d.kind for d in report.disagreements}
    assert "respelled strings" in kinds
    assert report.total().agreed < report.total().cases
    monkeypatch.undo()
    monkeypatch.setattr(checker_module, "checker_kind", lambda category: "simple")
    report = measure_agreement(["multiple", "parallel"], per_category=10)
    # the simple checker knows only the first function: a multiple entry's answer often names
    # another, and a parallel entry needs several calls
    assert {d.category for d in report.disagreements} == {"multiple", "parallel"}


def test_the_agreement_command_prints_its_figures_and_tells_the_truth_in_its_exit_code(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["agreement", "--sample", "3", "--categories", "simple", "live_parallel", "--json"]
    assert main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["total"]["agreement"] == 1.0
    assert set(figures["categories"]) == {"simple", "live_parallel"}
    assert figures["categories"]["simple"]["kinds"]["gold"]["agreed"] == 3
    assert main(["agreement", "--sample", "2", "--categories", "parallel"]) == 0
    assert "cases agree (100.00%)" in capsys.readouterr().out
    monkeypatch.setattr(checker_module, "standardize_string", lambda text: text)
    assert main(["agreement", "--sample", "10", "--categories", "simple"]) == 1
    assert "disagreement(s)" in capsys.readouterr().out


def test_the_command_refuses_an_unknown_category_with_the_valid_names_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["quirks", "--categories", "simpel"]) == 2
    err = capsys.readouterr().err
    assert "Unknown BFCL category 'simpel'" in err
    assert "live_parallel_multiple" in err
    assert main(["quirks", "--categories", "live_parallel_multiple", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [q["id"] for q in listed["live_parallel_multiple"]] == [
        q.id for q in data_quirks("live_parallel_multiple")
    ]
    assert main(["categories"]) == 0
    assert "live_multiple (S) vs live_parallel_multiple (P)" in capsys.readouterr().out


# -------------------------------------------------------------------------- bench, report


def test_the_bench_runs_single_call_categories_under_s_and_parallel_ones_under_p(
    tmp_path: Path,
) -> None:
    plan = BenchPlan(out=tmp_path, task_ids=("chain-01",), policies=("gold",), arms=("S",),
                     heuristic=False, bfcl_simple=2, bfcl_parallel=2, model_arms=("S", "P"))  # fmt: skip
    bfcl = [p for p in plan_jobs(plan) if p.bfcl is not None]
    by_category: dict[str, set[str]] = {}
    for job in bfcl:
        assert job.bfcl is not None
        by_category.setdefault(job.bfcl.category, set()).add(job.spec.arm)
    assert set(by_category) == set(CATEGORIES)
    for category in SINGLE_CALL_CATEGORIES:
        assert by_category[category] == {"S"}
    for category in PARALLEL_CATEGORIES:
        assert by_category[category] == {"P", "S"}
    assert len(bfcl) == 4 * 2 + 4 * 2 * 2
    only = BenchPlan(out=tmp_path, task_ids=("chain-01",), policies=("gold",), arms=("S",),
                     heuristic=False, bfcl_categories=("live_simple", "live_parallel"))  # fmt: skip
    picked = {p.bfcl.category for p in plan_jobs(only) if p.bfcl is not None}
    assert picked == {"live_simple", "live_parallel"}


@pytest.mark.anyio
async def test_identical_calls_in_one_parallel_message_all_count_but_a_repeat_turn_does_not() -> (
    None
):
    from harness.bench.runner import _spec, run_bfcl_job

    entry = next(e for e in ENTRIES["parallel"] if e.id == "parallel_158")
    gold = entry.gold_calls()
    assert len({json.dumps(dict(g.arguments)) for g in gold}) < len(gold)  # two pairs of twins
    calls = [{"name": g.name, "arguments": dict(g.arguments)} for g in gold]
    turns = iter([calls, calls, calls])

    def parallel_then_again(messages: Any, tools: Any) -> Any:
        return next(turns, "Done.")

    plan = BenchPlan(out=Path("."), bfcl_simple=0, bfcl_parallel=0)
    job = await run_bfcl_job(ScriptedEngine(parallel_then_again), entry, _spec(plan, "P", "model"))
    assert len(job["calls"]) == 3 * len(gold)
    assert job["success"] is True, job["failures"]


def _bfcl_job(category: str, arm: str, index: int, success: bool) -> dict[str, Any]:
    return {
        "job_id": f"bfcl-{category}_{index}|{arm}|model", "task_id": f"bfcl-{category}_{index}",
        "kind": f"bfcl_{category}", "arm": arm, "policy": "model", "detector": "schema_sound",
        "eager": False, "success": success, "summary": {}, "turns": [], "calls": [], "windows": [],
    }  # fmt: skip


def test_the_report_gives_g_for_every_category_pair_and_lists_the_quirks(tmp_path: Path) -> None:
    accuracy = {"simple": 8, "parallel": 6, "multiple": 7, "parallel_multiple": 7,
                "live_simple": 5, "live_parallel": 2}  # fmt: skip
    jobs = [
        _bfcl_job(category, arm_of(category), i, i < correct)
        for category, correct in accuracy.items()
        for i in range(10)
    ]
    summary = write_report(jobs, tmp_path, {"engine": "test"})
    gaps = {row["pair"]: row for row in summary["bfcl_gaps"]}
    assert set(gaps) == {"simple/parallel", "multiple/parallel_multiple",
                         "live_simple/live_parallel", "pooled"}  # fmt: skip
    assert gaps["simple/parallel"]["gap_pp"] == pytest.approx(20.0)
    assert gaps["multiple/parallel_multiple"]["gap_pp"] == pytest.approx(0.0)
    assert gaps["live_simple/live_parallel"]["gap_pp"] == pytest.approx(30.0)
    assert gaps["pooled"]["single"] == [20, 30]
    assert gaps["pooled"]["parallel"] == [15, 30]
    r4 = next(v for v in summary["verdicts"] if v["name"] == "R4")
    assert r4["figures"]["gap_pp"] == pytest.approx(20.0)
    assert summary["bfcl_quirks"]["live_simple"] == [q.id for q in data_quirks("live_simple")]
    assert "live_parallel" not in summary["bfcl_quirks"] or not data_quirks("live_parallel")
    report = (tmp_path / "report.md").read_text()
    assert "| live_simple/live_parallel | 5/10 | 2/10 | +30.0 | [" in report
    assert "Data quirks" in report
    assert data_quirks("live_simple")[0].id in report


def test_g_per_pair_needs_both_sides_and_r4_uses_the_same_gap() -> None:
    assert bfcl_gaps({"simple/S": [3, 4]}) == []
    rows = bfcl_gaps({"simple/S": [3, 4], "parallel/P": [1, 4], "multiple/S": [2, 4]})
    assert [r["pair"] for r in rows] == ["simple/parallel"]
    verdict = verdict_r4((3, 4), (1, 4))
    assert verdict.figures["gap_pp"] == pytest.approx(rows[0]["gap_pp"])
    assert verdict.figures["ci_pp"] == pytest.approx(rows[0]["ci_pp"])


def test_the_gap_interval_is_newcombes_and_never_collapses_at_zero_or_full_accuracy() -> None:
    gap, low, high = gap_pp((0, 1), (0, 1))
    assert gap == 0.0
    assert low < -50  # one entry each: almost anything is possible
    assert high > 50
    gap, low, high = gap_pp((32, 32), (0, 32))
    assert gap == 100.0
    assert 80 < low < 100
    assert high == pytest.approx(100.0)
    # Newcombe (1998), method 10, example (a): 56/70 vs 48/80 -> 0.2, [0.0524, 0.3339]
    gap, low, high = gap_pp((56, 70), (48, 80))
    assert gap == pytest.approx(20.0)
    assert low == pytest.approx(5.24, abs=0.01)
    assert high == pytest.approx(33.39, abs=0.01)


# ------------------------------------------------------------------------------- the docs


def test_the_python_examples_in_docs_bfcl_md_run() -> None:
    text = (Path(__file__).parent.parent / "docs" / "bfcl.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/bfcl.md", "exec"), {})
