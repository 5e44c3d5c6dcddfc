"""Claims about effects and footprints: canonical, folded, bounded, total (issue 15)."""

from __future__ import annotations

import enum
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.errors import ToolsetError
from harness.tools import Tool, Toolset, tool
from harness.tools.effects import (
    MAX_TARGETS,
    Effect,
    Fold,
    Footprint,
    canonical_text,
    literal_target,
)

# --- canonical values (item 1) --------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1.0),
        (1, True),
        (0, -0.0),
        (2**70, float(2**70)),
        (Decimal("1.50"), 1.5),
        (Colour.RED, "red"),
        (uuid.UUID("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        ({"b": 1, "a": 2.0}, {"a": 2, "b": True}),
    ],
)
def test_values_python_holds_equal_have_one_canonical_spelling(a: Any, b: Any) -> None:
    assert canonical_text(a) == canonical_text(b)


def test_values_python_holds_different_keep_different_spellings() -> None:
    assert canonical_text(0.1) != canonical_text(Decimal("0.1"))  # 0.1 != Decimal("0.1")
    assert canonical_text(1.5) != canonical_text(1)


@given(
    st.one_of(
        st.integers(), st.floats(allow_nan=False), st.booleans(), st.decimals(allow_nan=False)
    )
)
def test_equal_numbers_always_spell_alike(x: Any) -> None:
    for y in (int(x) if float(x).is_integer() else x, float(x)):
        if x == y:
            assert canonical_text(x) == canonical_text(y)


def test_a_coercible_spelling_names_the_same_target_through_the_tools_model() -> None:
    """Issue 15, item 1: ``1`` and ``1.0`` for an int, a UUID in two cases: one target."""

    @tool(idempotent=True, write_targets="row:{n}/{u}", read_targets=())
    def put(n: int, u: uuid.UUID) -> str:
        return "ok"

    upper = put.footprint({"n": 1.0, "u": "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"})
    lower = put.footprint({"n": 1, "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"})
    assert upper.writes == lower.writes == {"row:1/a0eebc99.9c0b.4ef8.bb6d.6bb9bd380a11"}


def test_a_spec_tool_without_a_model_still_spells_numbers_canonically() -> None:
    spec = {
        "name": "put",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "annotations": {"idempotentHint": True, "writeTargets": "row:{n}", "readTargets": []},
    }
    put = Toolset.from_openai([spec])["put"]
    assert put.footprint({"n": 8.0}).writes == put.footprint({"n": 8}).writes == {"row:8"}


def test_defaults_the_tool_receives_fill_the_targets() -> None:
    @tool(idempotent=True, write_targets="doc:{key}/{field}", read_targets=())
    def put(key: str, field: str = "body") -> str:
        return "ok"

    assert put.footprint({"key": "a"}).writes == {"doc:a/body"}


# --- folds (item 1) ---------------------------------------------------------------------------


def test_a_declared_fold_makes_aliases_one_target() -> None:
    @tool(idempotent=True, write_targets="user:{name}", read_targets=(), canonical="case+nfkc")
    def put(name: str) -> str:
        return "ok"

    aliases = ["Ana", "ANA", "ana", "\uff21na"]  # the last one is a fullwidth A
    assert {t for a in aliases for t in put.footprint({"name": a}).writes or ()} == {"user:ana"}


def test_a_fold_can_be_declared_per_argument() -> None:
    effect = Effect.declare(
        write_targets="{bucket}/{path}", read_targets=(), canonical={"path": "path"}
    )
    assert effect.targets({"bucket": "B", "path": "a//b/./c/"}) == {"b/a/b/c"}


def test_the_case_fold_covers_stores_that_fold_with_upper() -> None:
    fold = Fold.of("case")
    assert fold("ı") == fold("i") == fold("I")  # 'ı'.upper() == 'I'
    assert fold("ß") == fold("SS")


def test_folds_with_the_same_steps_are_the_same_fold() -> None:
    assert Fold.of("case+nfc") == Fold.of(["case", "nfc"])
    assert Fold.of("case") != Fold.of("nfc")


def test_an_unknown_fold_step_is_a_toolset_error() -> None:
    with pytest.raises(ToolsetError, match="Unknown fold step"):
        Fold.of("shout")


def test_tools_that_fold_one_family_of_names_differently_are_refused() -> None:
    @tool(idempotent=True, write_targets="user:{name}", read_targets=(), canonical="case")
    def put(name: str) -> str:
        return "ok"

    @tool(read_only=True, read_targets="user:{who}")
    def get(who: str) -> str:
        return "ok"

    with pytest.raises(ToolsetError, match="fold the name differently"):
        Toolset([put, get])


# --- unknown reads (item 2) -------------------------------------------------------------------


def test_undeclared_reads_are_unknown_on_writers_too() -> None:
    footprint = Effect.declare(write_targets="doc:{key}").footprint({"key": "a"})
    assert footprint.writes == {"doc:a"}
    assert footprint.reads is None


# --- templates and totality (item 6) ----------------------------------------------------------


@pytest.mark.parametrize("template", ["log:{}", "doc:{0}", "{key:03d}", "{key!r}", "{a.b}", "{"])
def test_a_template_that_is_not_plain_argument_names_is_refused_when_declared(
    template: str,
) -> None:
    with pytest.raises(ToolsetError, match="emplate"):
        Effect.declare(write_targets=template)


def test_a_template_naming_no_argument_of_the_schema_is_refused() -> None:
    with pytest.raises(ToolsetError, match="not arguments"):

        @tool(idempotent=True, write_targets="doc:{kye}")
        def put(key: str) -> str:
            return "ok"


def test_a_target_function_that_raises_gives_a_failed_footprint_not_an_exception() -> None:
    effect = Effect.declare(write_targets=lambda args: [f"doc:{args['key']}"])
    footprint = effect.footprint({})
    assert footprint.error is not None
    assert "KeyError" in footprint.error


def test_a_target_function_that_returns_a_string_is_a_failed_footprint() -> None:
    assert Effect.declare(write_targets=lambda args: "doc:a").footprint({}).error is not None


def test_schema_invalid_arguments_give_a_failed_footprint() -> None:
    @tool(idempotent=True, write_targets="doc:{key}", read_targets=())
    def put(key: int) -> str:
        return "ok"

    assert put.footprint({"key": "eight"}).error is not None
    assert put.footprint(["not", "a", "mapping"]).error is not None
    assert put.footprint({"key": 8.0}) == Footprint(frozenset({"doc:8"}), frozenset())


def test_a_missing_argument_leaves_that_side_unknown() -> None:
    footprint = Effect.declare(write_targets="doc:{key}", read_targets=()).footprint({})
    assert footprint.writes is None
    assert footprint.error is None
    assert "missing" in footprint.unknown


def test_an_empty_target_means_every_resource() -> None:
    effect = Effect.declare(write_targets="{key}", read_targets=())
    assert effect.footprint({"key": ""}).writes is None


# --- the expansion bound (item 7) -------------------------------------------------------------


def test_a_product_of_list_arguments_over_the_bound_touches_everything() -> None:
    effect = Effect.declare(write_targets="{a}/{b}", read_targets=())
    big = list(range(MAX_TARGETS))
    footprint = effect.footprint({"a": big, "b": big})
    assert footprint.writes is None
    assert "over" in footprint.unknown


def test_a_product_at_the_bound_is_expanded() -> None:
    effect = Effect.declare(write_targets="{a}/{b}", read_targets=())
    footprint = effect.footprint({"a": list(range(32)), "b": list(range(32))})
    assert footprint.writes is not None
    assert len(footprint.writes) == 32 * 32 == MAX_TARGETS


def test_a_target_function_over_the_bound_touches_everything() -> None:
    effect = Effect.declare(write_targets=lambda args: (f"row:{i}" for i in range(10**9)))
    assert effect.footprint({}).writes is None


def test_the_old_effect_import_path_still_works() -> None:
    from harness.tools import Effect as Old
    from harness.tools import WriteTargets  # noqa: F401

    assert Old is Effect
    assert Tool(name="t", parameters={"type": "object"}).effect == Effect.worst_case()


_TEMPLATE_PARTS = st.sampled_from([":", "/", "{{", "}}", "x", ".", "{key}", "{field}", "{key}"])
_VALUE = st.text(alphabet=st.characters(exclude_characters="/"), max_size=4)


@given(st.lists(_TEMPLATE_PARTS, min_size=1, max_size=6), _VALUE, _VALUE)
def test_a_compiled_template_fills_like_its_formatted_text(
    parts: list[str], key: str, field: str
) -> None:
    """Filling a parsed template is the structure of the text ``str.format`` writes: the
    namespace, then the components split at '/' and ':' (values hold no '/', so no join
    restarts the path)."""
    template = "doc:" + "".join(parts)
    effect = Effect.declare(idempotent=True, write_targets=template, read_targets=())
    expected = literal_target(template.format_map({"key": key, "field": field}))
    assert effect.footprint({"key": key, "field": field}).writes == {expected}


def test_a_compiled_template_expands_list_arguments_to_their_product() -> None:
    effect = Effect.declare(idempotent=True, write_targets="doc:{keys}/{fields}", read_targets=())
    writes = effect.footprint({"keys": ["a", "b"], "fields": ["x", 1.0]}).writes
    assert writes == {"doc:a/x", "doc:a/1", "doc:b/x", "doc:b/1"}
