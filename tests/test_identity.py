"""Identity by type and by the store: spellings of one record never certify together.

Each class of issue 25 is written as a toolset whose declarations are honest by the docs
(the store's behaviour is what the effect says), and two or more calls that touch one record
of the store under different spellings. Every arm must give S's results and final state
(the calls may certify only when they really touch different records); no input may make
any arm raise.
"""

from __future__ import annotations

import datetime
import tracemalloc
import unicodedata
import uuid
from decimal import Decimal
from enum import Enum
from pathlib import PurePosixPath
from typing import Any

import anyio
import anyio.lowlevel
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.soundness_identity import CLASSES, differences, run_arms
from harness.errors import ToolsetError
from harness.skills.manifest import Manifest
from harness.tools import Toolset, tool
from harness.tools.effects import Effect
from harness.tools.identity import FOLD_STEPS, Fold, identity_text

UTC = datetime.UTC


async def _race() -> None:
    for _ in range(3):
        await anyio.lowlevel.checkpoint()


def _counter_tools(store: dict[str, Any], key_of: Any, **declared: Any) -> Toolset:
    """``add(key, n)``: a read-modify-write of the record the store keys by ``key_of(key)``,
    with scheduler yields between the read and the write (a lost update shows)."""

    @tool(write_targets="rec:{key}", read_targets="rec:{key}", idempotent=False, **declared)
    async def add(key: Any, n: int) -> int:
        record = key_of(key)
        before = store.get(record, 0)
        await _race()
        store[record] = before + n
        return int(before)

    return Toolset([add])


def _assert_serial(runs: dict[str, Any]) -> None:
    assert differences(runs) == {}


# -- 1. identity by type ---------------------------------------------------------------------


def test_one_instant_in_two_offsets_is_one_record() -> None:
    calls = [
        ("add", {"when": "2026-01-01T10:00:00+02:00", "n": 1}),
        ("add", {"when": "2026-01-01T08:00:00Z", "n": 2}),
        ("add", {"when": "2026-01-01T03:00:00-05:00", "n": 4}),
    ]
    runs = run_arms(CLASSES["instant"], calls)
    _assert_serial(runs)
    assert runs["S"].results[-1][2] == "3"  # the third call saw both earlier writes


def test_a_time_of_day_in_two_offsets_is_one_record() -> None:
    calls = [("add", {"at": "10:00:00+02:00", "n": 1}), ("add", {"at": "08:00:00Z", "n": 2})]
    _assert_serial(run_arms(CLASSES["time"], calls))


def test_naive_and_aware_datetimes_on_one_namespace_never_certify_together() -> None:
    effect = Effect.declare(write_targets="rec:{when}", read_targets=())
    naive = effect.footprint({"when": datetime.datetime(2026, 1, 1, 10)})
    aware = effect.footprint({"when": datetime.datetime(2026, 1, 1, 10, tzinfo=UTC)})
    assert naive.writes == frozenset({"rec:"})  # unknown identity: the whole namespace
    # An aware datetime is no proof either: a store may key it in its own zone, drop the
    # offset, or keep only the day. Declared with identity=, it is the store's key:
    assert aware.writes == frozenset({"rec:"})
    keyed = Effect.declare(
        write_targets="rec:{when}", read_targets=(), identity={"when": lambda d: d}
    )
    one = keyed.footprint({"when": datetime.datetime(2026, 1, 1, 10, tzinfo=UTC)})
    other = keyed.footprint({"when": datetime.datetime(2026, 1, 1, 11, tzinfo=UTC)})
    assert one.writes
    assert other.writes
    assert one.writes != other.writes


def test_a_path_argument_is_normalised_like_a_path_folded_string() -> None:
    calls = [
        ("add", {"path": "a/./b", "n": 1}),
        ("add", {"path": "a/b/", "n": 2}),
        ("add", {"path": "a/c/../b", "n": 4}),
    ]
    _assert_serial(run_arms(CLASSES["path_value"], calls))


@pytest.mark.parametrize(
    ("spellings", "same"),
    [
        # absolute: a join restarts the path there, so it may name any file (its namespace)
        (["/x", "//x", "///x/.", "/y/../x"], ""),
        (["a/b", "a//b", "./a/b/", "a/./b", "a/c/../b"], "a/b"),
        (["/..", "/", "//"], ""),
    ],
)
def test_path_spellings_of_one_file_are_one_target(spellings: list[str], same: str) -> None:
    effect = Effect.declare(write_targets="file:{path}", canonical={"path": "path"})
    targets = {t for s in spellings for t in effect.footprint({"path": s}).writes or ()}
    assert targets == {f"file:{same}"}


def test_numbers_enums_uuids_and_booleans_are_identified_by_value() -> None:
    class Colour(Enum):
        RED = 1

    assert identity_text(True) == identity_text(1) == identity_text(1.0) == "1"
    assert identity_text(Decimal("1.50")) == identity_text(1.5)
    assert identity_text(Colour.RED) == "1"
    u = uuid.uuid4()
    assert identity_text(u) == identity_text(uuid.UUID(str(u).upper()))
    assert identity_text(datetime.date(2026, 1, 2)) == "2026-01-02"
    assert identity_text(object()) is None  # unknown type: unknown


def test_an_unknown_type_touches_its_whole_namespace() -> None:
    effect = Effect.declare(write_targets="cal:{user}/{thing}", read_targets=())
    footprint = effect.footprint({"user": "ann", "thing": object()})
    assert footprint.writes == frozenset({"cal:"})  # (a value could fold into '..')


# -- 2. closed folds, composite and literal templates -----------------------------------------

_UNICODE = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12
) | st.sampled_from(["ı", "𝚤", "İ", "ǅ", "ﬀ", "ΐ", "ᾼ", "Ά", "ｉ", "ß", "ẞ", "Ω", "K", "a/./b"])


@settings(max_examples=400, deadline=None)
@given(text=_UNICODE, step=st.sampled_from(sorted(FOLD_STEPS)))
def test_every_built_in_fold_is_closed(text: str, step: str) -> None:
    fold = Fold((step,))
    assert fold(fold(text)) == fold(text)


@settings(max_examples=200, deadline=None)
@given(text=_UNICODE)
def test_combined_folds_are_closed(text: str) -> None:
    for spec in ("case+nfkc", "nfkc+case", "nfc+case", "case+whitespace+nfkc"):
        fold = Fold.of(spec)
        assert fold(fold(text)) == fold(text)


def test_a_fold_that_is_not_closed_in_one_pass_is_applied_to_its_fixed_point() -> None:
    # nfkc after case is not closed in one pass: the mathematical dotless i becomes a dotless
    # i, which case folds again to i. A store that folds to the fixed point merges them.
    def make(store: dict[str, Any]) -> Toolset:
        store_fold = Fold.of("case+nfkc")
        return _counter_tools(store, store_fold, canonical="case+nfkc")

    calls = [("add", {"key": "𝚤", "n": 1}), ("add", {"key": "i", "n": 2})]
    _assert_serial(run_arms(make, calls))


def test_greek_with_combining_marks_folds_to_one_target() -> None:
    fold = Fold.of("nfc+case")
    a, b = "ΐ", unicodedata.normalize("NFD", "ΐ").upper()
    assert fold(a) == fold(b)


def test_a_composite_path_template_is_joined_then_normalised() -> None:
    calls = [
        ("add_in", {"dir": ".", "name": "b", "n": 1}),
        ("add", {"path": "b", "n": 2}),
        ("add_in", {"dir": "x/..", "name": "./b", "n": 4}),
    ]
    _assert_serial(run_arms(CLASSES["composite"], calls))


def test_literal_template_text_goes_through_the_fold() -> None:
    calls = [("add", {"key": "README", "n": 1}), ("bump_readme", {"n": 2})]
    _assert_serial(run_arms(CLASSES["literal"], calls))


def test_a_literal_target_in_a_folded_namespace_must_fold_alike() -> None:
    @tool(write_targets="doc:{key}", read_targets=(), canonical="case")
    def write(key: str) -> None: ...

    @tool(write_targets="doc:Readme", read_targets=())
    def touch_readme() -> None: ...

    with pytest.raises(ToolsetError, match="namespace 'doc:'"):
        Toolset([write, touch_readme])


# -- nested models and mappings ---------------------------------------------------------------


class Key(pydantic.BaseModel):
    ns: str
    name: str


def test_the_declared_fold_reaches_inside_a_model_argument() -> None:
    calls = [
        ("add", {"key": {"ns": "A", "name": "B"}, "n": 1}),
        ("add", {"key": {"name": "b", "ns": "a"}, "n": 2}),
    ]
    _assert_serial(run_arms(CLASSES["nested"], calls))


def test_a_mapping_whose_keys_fold_together_is_unknown() -> None:
    assert identity_text({"A": 1, "a": 2}, Fold.of("case")) is None
    assert identity_text({"A": 1, "b": 2}, Fold.of("case")) == '{"a":"1","b":"2"}'


# -- 3. the store's own identity ----------------------------------------------------------------


def test_a_declared_identity_function_keys_the_targets() -> None:
    calls = [("add", {"key": "Doc#1", "n": 1}), ("add", {"key": "doc#2", "n": 2})]
    _assert_serial(run_arms(CLASSES["store_identity"], calls))


def test_tools_sharing_a_namespace_must_share_its_identity_function() -> None:
    @tool(write_targets="doc:{key}", read_targets=(), identity={"key": str.lower})
    def a(key: str) -> None: ...

    @tool(write_targets="doc:{key}", read_targets=())
    def b(key: str) -> None: ...

    with pytest.raises(ToolsetError, match="identity="):
        Toolset([a, b])


# -- 4. globs and collections -------------------------------------------------------------------


def test_a_glob_overlaps_every_target_of_its_namespace() -> None:
    calls = [("add", {"key": "a", "n": 1}), ("total", {}), ("add", {"key": "b", "n": 2})]
    _assert_serial(run_arms(CLASSES["glob"], calls))
    effect = Effect.declare(write_targets=["doc:*", "log:{key}/*"], read_targets=())
    assert effect.footprint({"key": "k"}).writes == frozenset({"doc:", "log:k/"})


# -- slots from an input list with repeated values ----------------------------------------------


def test_repeated_input_values_are_one_slot() -> None:
    manifest = Manifest.from_dict(
        {
            "skills": {
                "s": {
                    "phases": [
                        {"name": "g", "kind": "fan_out", "tools": ["get"], "slots": "input:keys"}
                    ]
                }
            }
        },
        source="test",
    )
    phase = manifest.skill("s").phases[0]
    assert phase.slot_count({"keys": ["a", "a"]}) == 1
    assert phase.slot_count({"keys": ["a", "A", "b"]}) == 2
    assert phase.slot_count({"keys": ["a", "b"]}) == 2


# -- 5. total and bounded -----------------------------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def test_an_argument_nested_hundreds_deep_raises_from_no_arm_and_still_certifies() -> None:
    def make(store: dict[str, Any]) -> Toolset:
        @tool(write_targets="rec:{key}/{blob}", read_targets=())
        async def put(key: str, blob: dict[str, Any]) -> str:
            store[key] = store.get(key, 0) + 1
            return "ok"

        return Toolset([put])

    # (deeper than ~1,900 levels the scripted engine's own JSON encoder gives up)
    depth = 900
    calls = [("put", {"key": k, "blob": _nested(depth)}) for k in ("a", "b")]
    runs = run_arms(make, calls)
    assert differences(runs) == {}  # every arm refuses it alike: a model mistake
    assert runs["F"].windows == 0
    assert all("nested" in result for _, _, result in runs["S"].results)
    assert identity_text(_nested(100_000)) is None  # over MAX_NODES parts: unknown


def test_distinct_records_still_certify_together() -> None:
    calls = [
        ("add", {"when": "2026-01-01T10:00:00+02:00", "n": 1}),
        ("add", {"when": "2026-01-01T10:00:00Z", "n": 2}),
    ]
    runs = run_arms(CLASSES["instant"], calls)
    _assert_serial(runs)
    assert runs["F"].windows == runs["P"].windows == 1


def test_a_32000_character_key_is_bounded_in_targets_and_memory() -> None:
    # Time is measured by `python -m benchmarks.certifier_bench` (section 4), not here.
    from harness.certify.conflicts import ConflictIndex

    effect = Effect.declare(write_targets="doc:{key}", read_targets="doc:{key}", canonical="case")
    tracemalloc.start()
    footprint = effect.footprint({"key": "a/" * 16_000})
    index = ConflictIndex()
    index.add(0, footprint)
    assert index.find(footprint) is not None  # a call conflicts with itself
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert footprint.writes is not None
    assert all(len(t) <= 512 for t in footprint.writes)
    assert peak < 50 * 2**20


def test_a_target_over_the_bounds_is_cut_back_to_an_ancestor() -> None:
    from harness.certify.conflicts import overlaps
    from harness.tools.effects import MAX_TARGET_DEPTH, bound_target

    long = "doc:" + "x" * 2000
    assert bound_target(long) == "doc:"
    deep = "doc:" + "/".join(["a"] * 200)
    cut = bound_target(deep)
    assert cut.count("/") + cut.count(":") <= MAX_TARGET_DEPTH
    assert overlaps(cut, deep)


def test_pure_paths_of_either_flavour_are_posix_paths() -> None:
    assert identity_text(PurePosixPath("a//b/")) == "a/b"


# -- no input makes the certifier raise ---------------------------------------------------------

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(
    value=_JSON,
    template=st.sampled_from(
        ["doc:{v}", "{v}", "file:{v}/x", "a*{v}", "doc:{v}/{w}", "n:{w}.{v}", "lit:Text"]
    ),
    fold=st.sampled_from([None, "case", "path", "case+nfkc+path", "whitespace+nfc"]),
    other=_JSON,
)
def test_no_argument_makes_a_footprint_raise(
    value: Any, template: str, fold: str | None, other: Any
) -> None:
    effect = Effect.declare(write_targets=template, read_targets=(template,), canonical=fold)
    footprint = effect.footprint({"v": value, "w": other})
    for side in (footprint.writes, footprint.reads):
        assert side is None or all(0 < len(t) <= 512 for t in side)
    identity_text(value)  # never raises, whatever the value


def test_in_root_resolves_the_path_as_sent_before_it_folds_each_name() -> None:
    # The reference filesystem server resolves the text it is sent; a full-width solidus is
    # a character of a name there, never a separator, and '~' is the home directory.
    from harness.tools.identity import in_root

    key = in_root("/srv")
    assert key("a.txt") == key("/srv/a.txt") == key("./A.TXT") == "a.txt"
    assert key("x/../../srv/a.txt") == "a.txt"
    outside = key("~/a.txt")
    for path in ("~", "../x", "／srv／a.txt", "./／tmp/x", "a／..／b"):
        assert key(path) is outside, path
    assert key("/srv") == "."
