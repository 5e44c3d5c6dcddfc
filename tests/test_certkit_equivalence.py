"""Claims about the kit's knowledge of equivalence (issue 25, items 6 and 7): it matches
targets hierarchically like the certifier, generates equivalent spellings by type on its own,
and finds every lying declaration without example values, at seeds 0 to 3."""

from __future__ import annotations

import datetime
import posixpath
import unicodedata
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import Toolset, tool
from harness.certkit import DEFAULT_EXAMPLES, CertifiableToolset, check_toolset
from harness.certkit._aliases import SEEDS, seed_values, spellings
from harness.certkit._base import not_covered
from harness.certkit._schema_strategies import arguments_strategy
from tests import equivalence_toolsets as eq

SEEDS_0_3 = (0, 1, 2, 3)

# ------------------------------------------------------------------------ one overlap


def test_a_declared_target_covers_what_the_store_reports_inside_it():
    changed = {"doc:a/status", "todos:17", "doc:ab", "other"}
    assert not_covered(changed, {"doc:a", "todos"}) == {"doc:ab", "other"}
    assert not_covered(changed, {"doc:a", "todos:"}) == {"doc:ab", "other"}
    assert not_covered({"doc:a"}, {"doc:a/status"}) == {"doc:a"}  # the inner one is narrower


@pytest.mark.parametrize("seed", SEEDS_0_3)
def test_an_honest_toolset_with_hierarchical_targets_and_a_minted_id_writer_has_no_false_claim(
    seed,
):
    report = check_toolset(eq.hierarchical_notebook(), seed=seed, examples=25)
    assert report.ok, report.render()
    passed = {(c.subject, c.claim) for c in report.passed}
    assert ("set_status", "write_targets") in passed  # doc:{key} covers doc:{key}/status
    assert ("add_todo", "write_targets") in passed  # todos covers the minted todos:17
    assert ("windows of all tools", "commutes") in passed


def test_a_store_that_reports_a_coarser_resource_than_the_target_is_told_to_report_finer():
    def make(state: eq.Records) -> Toolset:
        @tool(idempotent=True, write_targets="doc:{key}/status", read_targets=())
        async def set_status(key: str) -> str:
            """Set a status (the store reports the whole document)."""
            state.records[f"doc:{key}"] = "done"
            return "done"

        return Toolset([set_status])

    coarse = CertifiableToolset(
        eq._new_state, make, eq._fingerprint, eq._resources, name="coarse store"
    )
    report = check_toolset(coarse, examples=5)
    (claim,) = [c for c in report.false if c.claim == "write_targets"]
    assert claim.counterexample is not None
    assert "as finely as the targets name them" in claim.counterexample.fix


# --------------------------------------------------------- lies found without examples


def _same_instant(a: str, b: str) -> bool:
    return eq._utc_key(a) == eq._utc_key(b)


def _same_path(a: str, b: str) -> bool:
    return eq._normal_path(a) == eq._normal_path(b)


def _same_name(a: str, b: str) -> bool:
    return eq._folded(a) == eq._folded(b)


def _same_contact(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["team"] == b["team"] and a["email"].casefold() == b["email"].casefold()


LIES = {
    "a_instants": (eq.instants_keyed_by_utc, "book", "at", _same_instant),
    "b_paths": (eq.paths_normalised, "write", "path", _same_path),
    "c_case_and_nfkc": (eq.names_case_and_nfkc_folded, "tag", "name", _same_name),
    "d_nested_model": (eq.nested_model_folded, "save", "person", _same_contact),
}


@pytest.mark.parametrize("seed", SEEDS_0_3)
@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_declaration_that_spells_a_record_otherwise_than_its_store_is_safe_by_proof(lie, seed):
    """Before issue 40 each of these was a lie the kit found without examples: the targets
    spelled a record otherwise than its store keys it (an instant in another offset, a path
    with ``./``, a case or NFKC form, a model with a folded leaf). Distinct only by proof,
    every such pair of spellings is kept apart by the certifier (one proof key, or a value
    outside the proof set: its namespace), so the same declarations are now true, and the
    kit, which meets the same spellings, finds nothing false."""
    factory = LIES[lie][0]
    cert = factory()
    assert cert.example_values is None
    assert cert.argument_strategies is None
    report = check_toolset(cert, seed=seed)
    assert not [c for c in report.false if c.claim in ("targets_canonical", "commutes")], (
        report.render()
    )


def test_a_datetime_argument_is_its_namespace_unless_the_store_key_is_declared():
    cert = eq.instants_keyed_by_utc()
    tool = cert.make_toolset(cert.new_state(0))["book"]
    writes = [
        tool.footprint({"at": at, "who": "ann"}).writes
        for at in ("2026-01-01T10:00:00Z", "2026-01-02T10:00:00Z")
    ]
    assert writes[0] == writes[1]  # no proof of distinctness: one namespace
    assert all(w and all(t.endswith(":") for t in w) for w in writes)


@pytest.mark.parametrize("seed", SEEDS_0_3)
def test_commutes_finds_two_writers_whose_store_targets_overlap_at_every_seed(seed):
    """At the default example count: the pair is found because windows are constructed to
    share argument values, not by chance (a document id is ``D`` and six random digits)."""
    report = check_toolset(eq.writers_disjoint_by_declaration(), seed=seed)
    assert report.examples == DEFAULT_EXAMPLES
    (claim,) = report.false
    assert (claim.subject, claim.claim) == ("windows of all tools", "commutes")
    assert claim.counterexample is not None
    calls = claim.counterexample.calls
    assert {n for n, _ in calls} == {"set_owner", "close"}
    assert len({a["doc"] for _, a in calls}) == 1


# ------------------------------------------------------------------- identity=


@pytest.mark.parametrize("seed", SEEDS_0_3)
def test_an_identity_that_gives_one_record_two_identities_is_false(seed):
    report = check_toolset(eq.identity_that_splits_a_record(), seed=seed, examples=20)
    (claim,) = [c for c in report.claims if c.claim == "identity"]
    assert claim.status == "FALSE"
    assert claim.counterexample is not None
    (_, a), (_, b) = claim.counterexample.calls
    assert _same_instant(a["at"], b["at"])
    assert "two identities" in claim.counterexample.message


def test_an_identity_that_is_not_a_fixed_point_is_false():
    report = check_toolset(eq.identity_not_idempotent(), examples=20)
    (claim,) = [c for c in report.claims if c.claim == "identity"]
    assert claim.status == "FALSE"
    assert claim.counterexample is not None
    assert "not idempotent" in claim.counterexample.message


@pytest.mark.parametrize("seed", SEEDS_0_3)
def test_the_stores_own_identity_passes_the_identity_claim(seed):
    report = check_toolset(eq.honest_identity(), seed=seed, examples=20)
    (claim,) = [c for c in report.claims if c.claim == "identity"]
    assert claim.status == "passed", report.render()


def test_a_tool_without_identity_has_no_identity_claim():
    report = check_toolset(eq.instants_keyed_by_utc(), examples=5)
    assert "identity" not in {c.claim for c in report.claims}


# ------------------------------------------------------------------- spellings by type


def _utc(text: str) -> datetime.datetime:
    value = datetime.datetime.fromisoformat(text)
    assert value.tzinfo is not None
    return value.astimezone(datetime.UTC)


def test_an_aware_date_time_is_spelled_as_the_same_instant_in_other_offsets():
    schema = {"type": "string", "format": "date-time"}
    texts = spellings("2024-03-10T12:00:00+00:00", schema)
    aware = [t for t in texts if isinstance(t, str) and t[:4] == "2024" and t[-6] in "+-"]
    assert len({t[-6:] for t in aware}) >= 4
    assert {_utc(t) for t in aware} == {_utc("2024-03-10T12:00:00+00:00")}
    assert "2024-03-10T12:00:00Z" in texts


def test_an_aware_time_is_spelled_in_other_offsets_and_a_uuid_in_every_form_it_parses():
    day = datetime.date(2000, 1, 3)
    offsets, instants = set(), set()
    for text in spellings("12:00:00+00:00", {"format": "time"}):
        try:
            value = datetime.time.fromisoformat(text)
        except ValueError:
            continue  # a text spelling (full width, …): not a time to Python
        if value.utcoffset() is not None:
            offsets.add(value.utcoffset())
            instants.add(datetime.datetime.combine(day, value).astimezone(datetime.UTC))
    assert len(offsets) >= 4
    assert instants == {datetime.datetime(2000, 1, 3, 12, tzinfo=datetime.UTC)}
    plain = "0a1b2c3d-1234-5678-9abc-def012345678"
    forms = spellings(plain, {"type": "string", "format": "uuid"})
    assert {uuid.UUID(f) for f in forms if _parses_as_uuid(f)} == {uuid.UUID(plain)}
    assert {plain.upper(), plain.replace("-", ""), "urn:uuid:" + plain} <= set(forms)


def _parses_as_uuid(text: Any) -> bool:
    try:
        uuid.UUID(str(text))
    except ValueError:
        return False
    return True


def test_a_path_is_spelled_with_dots_parents_and_repeated_slashes():
    forms = spellings("a/b", {"type": "string", "format": "path"})
    assert {"./a/b", "x/../a/b", "//a/b", "a/b/", "a//b", "a/./b"} <= set(forms)
    assert {posixpath.normpath(f) for f in ("./a/b", "x/../a/b", "a/b/", "a//b")} == {"a/b"}


def test_a_name_is_spelled_in_case_compatibility_and_confusable_forms():
    forms = set(spellings("file"))
    assert {"FILE", "File", "\uff46\uff49\uff4c\uff45"} <= forms  # full width
    assert "\U0001d41f\U0001d422\U0001d425\U0001d41e" in forms  # mathematical bold
    assert {"f\u0131le", "f\U0001d6a4le", "f\u0130le"} <= forms  # dotless, 𝚤, dotted capital
    greek = "\u1f48\u03b4\u03c5\u03c3\u03c3\u03b5\u03cd\u03c2"  # Ὀδυσσεύς
    assert greek in SEEDS["string"]
    decomposed = unicodedata.normalize("NFD", greek.upper())  # capitals with combining marks
    assert decomposed != greek.upper()
    assert decomposed in set(spellings(greek))
    assert "０１" in set(spellings("01"))  # full-width digits


def test_a_nested_model_and_a_list_are_spelled_on_their_leaves():
    root = {
        "$defs": {
            "Person": {
                "type": "object",
                "properties": {"email": {"type": "string"}, "team": {"enum": ["core"]}},
            }
        },
        "properties": {"person": {"$ref": "#/$defs/Person"}},
    }
    person = {"email": "A", "team": "core"}
    forms = spellings(person, root["properties"]["person"], root)
    assert {"email": "a", "team": "core"} in forms
    assert all(f["team"] == "core" for f in forms)  # an enum leaf is respelled only as text
    assert ["a", "B"] in spellings(["A", "B"], {"type": "array", "items": {"type": "string"}})


def test_the_kit_starts_from_values_of_each_type_when_the_toolset_gives_none():
    @tool(idempotent=True, write_targets="x:{at}/{person}")
    async def f(at: datetime.datetime, person: eq.Person) -> str:
        """A tool with typed arguments."""
        return ""

    props = f.parameters["properties"]
    assert all(_utc(v) for v in seed_values(props["at"]) if v[-6] in "+-")
    assert seed_values({"type": "string", "format": "path"})[0] == "a/b"
    people = seed_values(props["person"], f.parameters)
    assert {p["team"] for p in people} == {"core", "docs"}  # an enum leaf: its members
    assert {p["email"] for p in people} <= set(SEEDS["string"])


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_date_time_and_uuid_arguments_are_generated_as_what_they_are(data):
    schema = {
        "type": "object",
        "properties": {
            "at": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "uuid"},
        },
        "required": ["at", "id"],
    }
    value = data.draw(arguments_strategy("t", schema))
    datetime.datetime.fromisoformat(value["at"])
    uuid.UUID(value["id"])


def _truncating_store() -> Any:
    """A store that keys a document by the first six characters of its name, declared as
    if it kept the whole name: distinct proof keys, one record."""
    from dataclasses import dataclass, field

    import anyio.lowlevel

    from harness import Toolset, tool
    from harness.certkit import CertifiableToolset

    @dataclass
    class Docs:
        docs: dict[str, int] = field(default_factory=dict)

    def make(state: Docs) -> Toolset:
        @tool(idempotent=True, write_targets="doc:{name}", read_targets="doc:{name}")
        async def put(name: str, value: int) -> int:
            """Set a document's value (keyed by a name prefix); returns what it wrote."""
            await anyio.lowlevel.checkpoint()
            state.docs[name[:6]] = value
            return value

        return Toolset([put])

    return CertifiableToolset(
        new_state=lambda seed: Docs(),
        make_toolset=make,
        fingerprint=lambda s: tuple(sorted(s.docs.items())),
        resources=lambda s: {f"doc:{k}": v for k, v in s.docs.items()},
        example_values=lambda s: {"name": ("report", "notes1", "budget"), "value": (1, 2)},
        name="truncating store",
    )


@pytest.mark.parametrize("seed", SEEDS_0_3)
def test_a_store_that_truncates_names_is_caught_at_every_seed(seed):
    report = check_toolset(_truncating_store(), seed=seed, examples=20)
    false = {(c.subject, c.claim) for c in report.false}
    assert ("put", "idempotent") not in false  # (honest but for the truncation)
    assert false & {("put", "targets_canonical"), ("put", "write_targets")}, report.render()
