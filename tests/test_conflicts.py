"""Claims about D1's conflict rule: hierarchical overlap, unknown sides, and the index."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.certify.conflicts import ConflictIndex, ancestors, conflict, overlaps
from harness.tools.effects import Footprint
from tests.strategies import footprints


def fp(writes: set[str] | None = None, reads: set[str] | None = None) -> Footprint:
    return Footprint(
        None if writes is None else frozenset(writes), None if reads is None else frozenset(reads)
    )


# --- hierarchical targets (item 3) --------------------------------------------------------------


def test_a_target_overlaps_its_prefixes_at_a_separator() -> None:
    assert overlaps("doc:a", "doc:a/status")
    assert overlaps("doc:a/status", "doc:a")
    assert overlaps("doc", "doc:a")
    assert overlaps("doc:", "doc:a")
    assert overlaps("file:a", "file:a.txt")


def test_a_prefix_that_does_not_end_at_a_separator_is_another_name() -> None:
    assert not overlaps("doc:a", "doc:ab")
    assert not overlaps("doc:a/status", "doc:a/owner")


def test_a_read_of_a_document_conflicts_with_a_write_of_one_of_its_fields() -> None:
    """Issue 15, item 3: ``doc:{key}`` (a read) beside ``doc:{key}/status`` (a write)."""
    assert conflict(fp(set(), {"doc:a"}), fp({"doc:a/status"}, set())) is not None
    index = ConflictIndex()
    index.add("read", fp(set(), {"doc:a"}))
    found = index.find(fp({"doc:a/status"}, set()))
    assert found is not None
    assert found.code == "D1_read_write_conflict"


def test_ancestors_are_the_prefixes_before_and_after_each_separator() -> None:
    # (written with '/' for every separator: the form targets are compared in)
    assert list(ancestors("doc:a/status")) == ["doc", "doc/", "doc/a", "doc/a/"]
    assert list(ancestors("plain")) == []


def test_the_three_separators_are_one() -> None:
    # A store may nest by any of them: 'cfg:db.port' and 'cfg:db/port' are one record.
    assert overlaps("cfg:db.port", "cfg:db/port")
    assert not overlaps("cfg:db.port", "cfg:db/part")
    index = ConflictIndex()
    index.add("slash", fp({"cfg:db/port"}, set()))
    found = index.find(fp({"cfg:db.port"}, set()))
    assert found is not None
    assert found.code == "D1_write_conflict"
    assert found.detail == "cfg:db.port ~ cfg:db/port"  # (as the declarations wrote them)


# --- unknown sides (item 2) -----------------------------------------------------------------------


def test_a_writer_with_unknown_reads_conflicts_with_every_other_writer() -> None:
    """Issue 15, item 2: ``copy(a -> b)`` (reads unset) beside ``set(a)``."""
    copy = fp({"doc:b"}, None)
    set_a = fp({"doc:a"}, set())
    assert conflict(copy, set_a) == ("D1_unknown_read_targets", "reads unknown")
    index = ConflictIndex()
    index.add("set", set_a)
    assert index.find(copy) is not None


def test_a_writer_with_unknown_reads_still_commutes_with_pure_reads() -> None:
    assert conflict(fp({"doc:b"}, None), fp(set(), {"doc:c"})) is None


def test_unknown_writes_conflict_with_anything_that_reads_or_writes() -> None:
    assert conflict(fp(None, set()), fp(set(), {"x"})) is not None
    assert conflict(fp(None, set()), fp(set(), set())) is None


def test_two_pure_reads_never_conflict() -> None:
    assert conflict(fp(set(), None), fp(set(), None)) is None


# --- the index agrees with the pairwise rule (item 7) ---------------------------------------------


@settings(max_examples=300)
@given(members=st.lists(footprints(), max_size=8), new=footprints())
def test_the_index_finds_a_conflict_exactly_when_some_pair_conflicts(
    members: list[Footprint], new: Footprint
) -> None:
    index = ConflictIndex()
    for i, member in enumerate(members):
        index.add(i, member)
    found = index.find(new)
    pairwise = [i for i, m in enumerate(members) if conflict(new, m) is not None]
    assert (found is not None) == bool(pairwise)
    if found is not None:
        assert found.other in pairwise
