"""Claims about provenance: arguments come from where the manifest says (issue 15, item 4)."""

from __future__ import annotations

from typing import Any

from harness.certify.provenance import check_provenance, quotes_withheld
from harness.skills.manifest import ArgSource
from harness.tools.effects import Effect

MARKER = "[withheld]"


def check(
    arguments: dict[str, Any],
    sources: dict[str, str],
    inputs: dict[str, Any] | None = None,
    visible: tuple[str, ...] = (),
    withheld: tuple[str, ...] = (),
    effect: Effect | None = None,
) -> list[str]:
    parsed = {k: ArgSource.parse(v) for k, v in sources.items()}
    found = check_provenance(
        "t",
        arguments,
        parsed,
        inputs or {},
        visible,
        marker=MARKER,
        withheld=withheld,
        effect=effect,
    )
    return [v.kind for v in found]


def test_an_input_sourced_argument_must_be_one_of_that_inputs_values() -> None:
    inputs = {"keys": ["a", "b"], "status": "done"}
    assert check({"key": "a"}, {"key": "input:keys"}, inputs) == []
    assert check({"key": "c"}, {"key": "input:keys"}, inputs) == ["not_an_input"]
    assert check({"status": "done"}, {"status": "input:status"}, inputs) == []
    assert check({"status": "a"}, {"status": "input:status"}, inputs) == ["not_an_input"]


def test_an_input_sourced_list_argument_must_hold_only_input_values() -> None:
    inputs = {"keys": ["a", "b", "c"]}
    assert check({"keys": ["a", "c"]}, {"keys": "input:keys"}, inputs) == []
    assert check({"keys": ["a", "z"]}, {"keys": "input:keys"}, inputs) == ["not_an_input"]


def test_a_bare_input_source_accepts_any_input_value() -> None:
    inputs = {"keys": ["a"], "owner": "ana"}
    assert check({"who": "ana"}, {"who": "input"}, inputs) == []
    assert check({"who": "bob"}, {"who": "input"}, inputs) == ["not_an_input"]


def test_input_values_compare_canonically_and_through_the_tools_fold() -> None:
    inputs = {"n": [1, 2], "names": ["Ana"]}
    assert check({"n": 1.0}, {"n": "input:n"}, inputs) == []
    folded = Effect.declare(
        idempotent=True, write_targets="u:{name}", read_targets=(), canonical="case"
    )
    assert check({"name": "ANA"}, {"name": "input:names"}, inputs, effect=folded) == []
    assert check({"name": "ANA"}, {"name": "input:names"}, inputs) == ["not_an_input"]


def test_a_result_sourced_argument_must_appear_in_a_visible_result() -> None:
    visible = ('{"key": "a", "next": "d417"}',)
    assert check({"key": "d417"}, {"key": "result:read"}, visible=visible) == []
    assert check({"key": "d558"}, {"key": "result:read"}, visible=visible) == [
        "not_in_visible_results"
    ]
    assert check({"n": 3}, {"n": "result:read"}, visible=('{"count": 3}',)) == []
    assert check({"n": 4}, {"n": "result:read"}, visible=('{"count": 3}',)) == [
        "not_in_visible_results"
    ]


def test_the_withheld_marker_is_a_violation_under_any_source() -> None:
    for source in ("model", "input:keys", "args:p", "result:p"):
        kinds = check({"key": f"x {MARKER}"}, {"key": source}, {"keys": ["x"]})
        assert kinds == ["marker"], source
    assert [v.code for v in quotes_withheld({"a": [{"b": MARKER}]}, MARKER)] == ["D2_quotes_marker"]


def test_the_text_of_a_withheld_result_is_a_violation_unless_it_is_also_visible() -> None:
    assert check({"key": "u-17"}, {"key": "model"}, withheld=("u-17",)) == ["withheld_text"]
    assert check({"n": 17}, {"n": "model"}, withheld=("17",)) == ["withheld_text"]
    assert check({"key": "u-17"}, {"key": "model"}, visible=("u-17",), withheld=("u-17",)) == []


def test_model_and_args_sources_are_free() -> None:
    assert check({"key": "anything"}, {"key": "model"}) == []
    assert check({"key": "anything"}, {"key": "args:p"}) == []


def test_an_argument_the_manifest_does_not_mention_is_free() -> None:
    assert check({"key": "anything"}, {}) == []


# --- round 4 of fresh cases (issue 40) ---------------------------------------------------


def test_the_marker_inside_a_mapping_key_is_caught() -> None:
    found = quotes_withheld({"meta": {"[withheld]": 1}}, "[withheld]")
    assert [v.code for v in found] == ["D2_quotes_marker"]
    found = quotes_withheld({"meta": {"alpha-content": 1}}, "[withheld]", ["alpha-content"])
    assert [v.code for v in found] == ["D2_quotes_marker"]  # a withheld result's text


def test_an_input_the_task_lacks_proves_nothing() -> None:
    sources = {"key": ArgSource("input", "keys")}
    lacking = check_provenance("t", {"key": "b"}, sources, {}, None, marker="[withheld]")
    assert [v.kind for v in lacking] == ["not_an_input"]
    present = check_provenance("t", {"key": "b"}, sources, {"keys": ["b"]}, None, marker="[w]")
    assert present == []


def test_an_input_integer_too_long_to_spell_allows_nothing_and_raises_nothing() -> None:
    sources = {"key": ArgSource("input", "keys")}
    huge = {"keys": [10**5000, "b"]}  # (past Python's 4,300-digit limit on str(int))
    assert check_provenance("t", {"key": "b"}, sources, huge, None, marker="[w]") == []


def test_the_search_for_withheld_text_is_bounded() -> None:
    from harness.certify.provenance import MAX_SCAN

    text = "ab" * (MAX_SCAN // 2)
    found = quotes_withheld({"blob": text}, "[withheld]", ["x" * 16_000] * 15)
    assert [v.code for v in found] == ["D2_quotes_marker"]  # not proven otherwise
