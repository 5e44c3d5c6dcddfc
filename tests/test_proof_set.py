"""Distinct only by proof (issue 40): the declarations reviewers wrote as new users, each a
store key spelled two ways, and what the harness now does with them — keep the two calls
apart, refuse the declaration with what to write instead, or stop in bounded work."""

from __future__ import annotations

import enum

import pytest

from harness import Toolset, tool
from harness.errors import ToolsetError
from harness.tools.effects import Effect
from harness.tools.identity import under_root, value_text


def test_an_integral_float_inside_a_longer_name_is_outside_the_set() -> None:
    # f"{a}-{b}" writes '7.0-x'; JavaScript's `${a}-${b}` writes '7-x': no one spelling.
    effect = Effect.declare(write_targets="kv:{a}-{b}", read_targets=())
    assert effect.targets({"a": 7.0, "b": "x"}) == frozenset({"kv:"})
    assert effect.targets({"a": 7, "b": "x"}) == frozenset({"kv:7.x"})
    alone = Effect.declare(write_targets="num:{n}", read_targets=())
    assert alone.targets({"n": 7.0}) == alone.targets({"n": 7}) == frozenset({"num:7"})


def test_only_enums_whose_str_is_their_value_are_in_the_set() -> None:
    class Mixin(str, enum.Enum):  # noqa: UP042 (the mixin users write, not StrEnum)
        RED = "red"

    class Strict(enum.StrEnum):
        RED = "red"

    class Plain(enum.Enum):
        RED = "red"

    assert f"{Mixin.RED}" == "Mixin.RED"  # (what a store writing f"{color}" keys)
    assert value_text(Mixin.RED) is None
    assert value_text(Plain.RED) is None
    assert value_text(Strict.RED) == "red" == f"{Strict.RED}"


def test_a_namespace_keyed_by_identity_must_be_named_that_way_by_every_template() -> None:
    key = under_root("/srv")

    @tool(write_targets="file:{path}", read_targets=(), identity={"path": key})
    def write_file(path: str) -> str:
        """Write /srv/<path>."""
        return "ok"

    @tool(write_targets="file:docs/{name}", read_targets=())
    def write_doc(name: str) -> str:
        """Write /srv/docs/<name> (named relative to the root: another spelling)."""
        return "ok"

    @tool(write_targets="file:{dir}/{name}", read_targets=(), identity={"dir": key})
    def write_at(dir: str, name: str) -> str:
        """Write <name> under the store's key of <dir> (below a keyed field: allowed)."""
        return "ok"

    with pytest.raises(ToolsetError, match="one store's records must be named one way"):
        Toolset([write_file, write_doc])
    Toolset([write_file, write_at])  # no error


def test_a_namespace_spelled_in_capitals_is_the_same_namespace() -> None:
    @tool(write_targets="file:{path}", read_targets=(), canonical="case")
    def lower(path: str) -> str:
        """x"""
        return "ok"

    @tool(write_targets="FILE:{path}", read_targets=())
    def upper(path: str) -> str:
        """x"""
        return "ok"

    with pytest.raises(ToolsetError, match="fold the name differently"):
        Toolset([lower, upper])


def test_under_root_refuses_a_relative_root() -> None:
    with pytest.raises(ValueError, match="absolute"):
        under_root("data")


def test_a_product_of_long_list_arguments_is_unknown_before_it_is_built() -> None:
    effect = Effect.declare(write_targets="doc:{a}/{b}", read_targets=())
    paths = ["/".join(f"p{i}x{j}" for j in range(31)) for i in range(32)]
    footprint = effect.footprint({"a": paths, "b": paths})
    assert footprint.writes is None  # every resource: sound, and bounded work
    assert "characters of targets" in footprint.unknown  # (1024 targets built before: 134 ms)


def test_a_collection_and_its_members_meet_whatever_the_namespace_spelling() -> None:
    # 'todo_items' (the collection a minting writer declares) and 'todo_items:{id}' (a
    # member): the namespace is written in its name normal form, as the collection is.
    collection = Effect.declare(write_targets="todo_items", read_targets=())
    member = Effect.declare(write_targets="todo_items:{id}", read_targets=())
    from harness.certify.conflicts import overlaps

    (c,) = collection.targets({})
    (m,) = member.targets({"id": "17"})
    assert overlaps(c, m), (c, m)
    by_function = Effect.declare(write_targets=lambda a: [f"{a['ns']}:{a['key']}"])
    (x,) = by_function.targets({"ns": "user_data", "key": "a"})
    (y,) = by_function.targets({"ns": "user-data", "key": "a"})
    assert x == y  # (one namespace to a store that unifies separators)
    assert by_function.targets({"ns": "my ns", "key": "a"}) is None  # unprovable: everything
    with pytest.raises(ToolsetError, match="not a plain name"):
        Effect.declare(write_targets="my ns:{key}")


def test_a_target_function_returning_too_much_text_is_unknown() -> None:
    deep = "/".join(f"p{j}" for j in range(63))
    effect = Effect.declare(write_targets=lambda a: [f"doc:{i}/{deep}" for i in range(1024)])
    footprint = effect.footprint({})
    assert footprint.writes is None
    assert "characters of targets" in footprint.unknown


def test_a_provenance_search_past_its_budget_is_not_proven() -> None:
    from harness.certify.provenance import MAX_SCAN, _appears, _Scan

    results = ["x" * 16_000 + "needle"] * 60
    scan = _Scan(results)
    found = [_appears(f"needle{i}"[:6], scan, set()) for i in range(1000)]
    assert found[0] is True  # searched while the budget lasts
    assert found[-1] is False
    assert scan.spent
    assert scan.size * (MAX_SCAN // scan.size) <= MAX_SCAN


def test_a_lookup_fold_on_a_literal_with_a_path_is_its_namespace_when_readings_differ() -> None:
    # The store keys 'latest' as 'v3'; a literal 'doc:latest/status' folded whole is not in
    # the alias table, folded per name it is 'doc:v3/status': the readings differ, so the
    # literal names its namespace and meets 'doc:{key}/status' with key 'v3'.
    from harness.certify.conflicts import overlaps
    from harness.tools.identity import Fold

    fold = Fold(custom=lambda s: {"latest": "v3"}.get(s, s))
    literal = Effect.declare(write_targets="doc:latest/status", read_targets=(), canonical=fold)
    keyed = Effect.declare(write_targets="doc:{key}/status", read_targets=(), canonical=fold)
    (a,) = literal.targets({})
    (b,) = keyed.targets({"key": "v3"})
    assert overlaps(a, b), (a, b)


def test_a_fold_declared_beside_identity_is_applied_to_the_key() -> None:
    # A store keyed by path under a root that also folds case: 'Ａ.txt' (full-width) and
    # 'a.txt' are one file; the fold runs on the store's key, so it only merges keys.
    from harness.certify.conflicts import overlaps

    key = under_root("/srv")
    effect = Effect.declare(
        write_targets="file:{path}", read_targets=(), identity={"path": key}, canonical="case"
    )
    (a,) = effect.targets({"path": "Ａ.txt"})
    (b,) = effect.targets({"path": "a.txt"})
    (c,) = effect.targets({"path": "STRASSE"})
    (d,) = effect.targets({"path": "straße"})
    assert overlaps(a, b)
    assert overlaps(c, d)
    (e,) = effect.targets({"path": "b.txt"})
    assert not overlaps(a, e)
