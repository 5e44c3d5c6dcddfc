"""Claims about the certification kit: it catches every lie in the broken corpus with the
right claim, passes the honest workspace, says "unverified" instead of passing what it cannot
see, and its command line fails cleanly."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import Toolset, tool
from harness._commands.cli import main
from harness.certify.conflicts import conflict
from harness.certkit import (
    DEFAULT_EXAMPLES,
    CertifiableToolset,
    CertificationReport,
    check_toolset,
    load_certifiable,
)
from harness.certkit._schema_strategies import arguments_strategy, from_schema
from harness.errors import ConfigError
from harness.testing import certify_toolset
from tests import broken_toolsets as broken
from tests.strategies import tool_schemas

# ------------------------------------------------------------------ JSON Schema → strategies


@settings(max_examples=150, deadline=None)
@given(schema=tool_schemas(), data=st.data())
def test_generated_arguments_always_satisfy_their_schema(schema, data):
    value = data.draw(from_schema(schema))
    assert jsonschema.Draft202012Validator(schema).is_valid(value)


SCHEMA = {
    "type": "object",
    "properties": {"key": {"type": "string", "minLength": 1}, "n": {"type": "integer"}},
    "required": ["key", "n"],
}


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_example_values_are_favoured_and_invalid_ones_are_never_drawn(data):
    strategy = arguments_strategy("t", SCHEMA, examples={"key": ["a", "b", ""], "t.n": [7]})
    value = data.draw(strategy)
    assert value["key"] != ""  # fails minLength: dropped from the examples
    assert jsonschema.Draft202012Validator(SCHEMA).is_valid(value)


def test_example_values_are_drawn_most_of_the_time():
    strategy = arguments_strategy("t", SCHEMA, examples={"key": ["a", "b"], "t.n": [7]})
    drawn: list[dict[str, Any]] = []

    @settings(max_examples=200, deadline=None, database=None)
    @given(strategy)
    def collect(value):
        drawn.append(value)

    collect()
    favoured = sum(v["key"] in ("a", "b") for v in drawn)
    assert favoured > len(drawn) / 2
    assert any(v["key"] not in ("a", "b") for v in drawn)  # the schema still gets a say


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_a_per_argument_strategy_replaces_the_schema_strategy(data):
    strategy = arguments_strategy("t", SCHEMA, overrides={"t.key": st.just("only")})
    assert data.draw(strategy)["key"] == "only"


# ------------------------------------------------------------------------------- the corpus

CORPUS = [
    (broken.readonly_that_writes, None, {("read_doc", "read_only"), ("read_doc", "idempotent")}),
    (broken.idempotent_that_appends, None, {("add_tag", "idempotent")}),
    (broken.underreported_targets, None, {("set_status", "write_targets")}),
    (broken.order_dependent, None, {("windows of all tools", "commutes")}),
    (broken.underdeclared_read, None, {("windows of all tools", "commutes")}),
    (
        broken.result_hidden_as_model_argument,
        broken.RESULT_HIDDEN_AS_MODEL_MANIFEST,
        {("windows of all tools", "commutes"), ("windows of tickets.file", "commutes")},
    ),
]


@pytest.mark.parametrize(
    ("factory", "manifest", "expected"), CORPUS, ids=[c[0].__name__ for c in CORPUS]
)
def test_each_broken_toolset_is_caught_with_the_right_claim_named(factory, manifest, expected):
    report = check_toolset(factory(), manifest=manifest)
    assert not report.ok
    assert {(c.subject, c.claim) for c in report.false} == expected
    for claim in report.false:
        ce = claim.counterexample
        assert ce is not None
        assert ce.calls, "a counterexample names the calls"
        assert ce.fix
        assert ce.expected != ce.actual
        tool_names = {name for name, _ in ce.calls}
        assert any(f"'{name}'" in ce.message for name in tool_names)


def test_a_false_claim_is_shrunk_to_a_minimal_counterexample():
    report = check_toolset(broken.order_dependent())
    (claim,) = report.false
    assert claim.counterexample is not None
    assert len(claim.counterexample.calls) == 2  # two tickets are enough to disagree


def test_the_report_says_the_tool_the_claim_the_arguments_both_outcomes_and_the_fix():
    report = check_toolset(broken.idempotent_that_appends(), examples=10)
    text = report.render()
    assert "FALSE  add_tag: idempotent" in text
    assert "#0 add_tag({" in text
    assert "called once:" in text
    assert "called twice" in text
    assert "differs doc:" in text
    assert "fix: Mark 'add_tag' idempotent=False" in text
    assert "1 FALSE" in text.splitlines()[-1]


def test_the_same_seed_gives_the_same_counterexample():
    first = check_toolset(broken.order_dependent(), seed=3)
    second = check_toolset(broken.order_dependent(), seed=3)
    assert first.false
    assert [c.to_json() for c in first.claims] == [c.to_json() for c in second.claims]


def test_an_honest_toolset_passes_every_claim():
    report = check_toolset(broken.honest())
    assert report.ok
    assert not report.unverified
    assert {(c.subject, c.claim) for c in report.claims} == {
        ("read_doc", "read_only"),
        ("read_doc", "idempotent"),
        ("set_status", "idempotent"),
        ("set_status", "write_targets"),
        ("set_status", "targets_canonical"),
        ("add_tag", "idempotent"),
        ("add_tag", "write_targets"),
        ("add_tag", "targets_canonical"),
        ("windows of all tools", "commutes"),
    }


def test_a_result_hidden_as_a_model_argument_is_named_in_the_fix_with_the_call_it_comes_from():
    report = check_toolset(
        broken.result_hidden_as_model_argument(),
        manifest=broken.RESULT_HIDDEN_AS_MODEL_MANIFEST,
        examples=20,
    )
    (claim,) = [c for c in report.false if c.phase == "tickets.file"]
    ce = claim.counterexample
    assert ce is not None
    assert sorted(ce.calls) == [("close_ticket", {"ticket": "T1"}), ("open_ticket", {})]
    assert "'close_ticket' gets ticket=\"T1\", which" in ce.fix
    assert "'open_ticket' returns" in ce.fix
    assert "mark it result:PHASE in the manifest (D2)" in ce.fix
    assert "declare it in write/read targets (D1)" in ce.fix


def test_the_manifest_that_marks_the_ticket_a_result_passes_where_the_hidden_one_fails():
    report = check_toolset(
        broken.result_hidden_as_model_argument(),
        manifest=broken.RESULT_MARKED_MANIFEST,
        examples=20,
    )
    assert report.ok, report.render()
    by_subject = {c.subject: c.status for c in report.claims if c.claim in ("commutes", "D2")}
    assert by_subject == {
        "windows of all tools": "passed",  # close_ticket is left out, as D2 leaves it out
        "windows of tickets.file": "unverified",  # only open_ticket may join, and one at a time
        "skill tickets": "passed",
    }


def test_the_honest_workspace_certifies_with_the_default_example_count():
    """The runtime of this test is the figure quoted in the README (about 30 s on 2 cores)."""
    report = check_toolset("harness.toolsets.workspace")
    assert report.ok, report.render()
    assert not report.unverified
    assert report.examples == DEFAULT_EXAMPLES
    claims = {(c.subject, c.claim) for c in report.claims}
    assert ("append_note", "write_targets") in claims
    assert ("append_note", "idempotent") not in claims  # it does not claim it
    assert ("windows of all tools", "commutes") in claims
    assert ("append_note", "targets_canonical") in claims
    assert len(report.claims) == 21


def test_the_workspace_manifest_adds_its_phases_and_D2_per_skill():
    from harness.toolsets.workspace import load_workspace_manifest

    report = check_toolset(
        "harness.toolsets.workspace", manifest=load_workspace_manifest(), examples=5
    )
    assert report.ok, report.render()
    subjects = {c.subject for c in report.claims}
    assert "windows of handover.handover" in subjects
    assert "skill triage" in subjects
    assert "skill follow" not in subjects  # chains only: nothing certifies


def test_the_mislabeled_workspace_is_caught():
    report = check_toolset(broken.mislabeled_workspace(), examples=10)
    assert [(c.subject, c.claim) for c in report.false] == [("append_note", "idempotent")]


# -------------------------------------------------------------- what cannot be fingerprinted


def test_write_targets_are_unverified_not_passed_without_resources():
    report = check_toolset(broken.order_dependent())
    (targets,) = [c for c in report.claims if c.claim == "write_targets"]
    assert targets.status == "unverified"
    assert "resources" in targets.reason


def test_an_open_world_tool_is_checked_for_idempotence_by_results_only():
    report = check_toolset(broken.open_world(), examples=10)
    notify = {c.claim: c for c in report.claims if c.tool == "notify"}
    assert notify["idempotent"].status == "passed"
    assert "results only" in notify["idempotent"].reason
    assert notify["write_targets"].status == "unverified"
    assert "open_world" in notify["write_targets"].reason
    assert any("notify" in note for note in report.notes)  # left out of windows


def test_a_spec_file_is_loaded_and_every_claim_it_cannot_run_is_unverified(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(broken.SPEC))
    report = check_toolset(str(path), examples=5)
    assert report.ok
    assert report.tools == ("lookup", "store")
    assert not report.passed
    assert {c.claim for c in report.unverified} == {
        "read_only",
        "idempotent",
        "write_targets",
        "targets_canonical",
    }
    assert all("declared only" in c.reason for c in report.unverified)
    assert "no state factory" in report.notes[0]


def test_a_stateless_toolset_is_checked_for_idempotence_by_results_and_can_fail_it():
    calls = {"n": 0}

    @tool(idempotent=True, write_targets="remote:{key}")
    def put(key: str) -> str:
        """A remote write that reports a version number (changes on every call)."""
        calls["n"] += 1
        return f"{key} v{calls['n']}"

    report = check_toolset(Toolset([put]), examples=10)
    by_claim = {c.claim: c for c in report.claims}
    assert by_claim["idempotent"].status == "FALSE"
    assert by_claim["write_targets"].status == "unverified"
    assert by_claim["commutes"].status == "unverified"


def _journal(*, ready: bool) -> CertifiableToolset:
    """A store whose writer also appends to a log (a lie: it declares only its entry), and
    fails on every call when the state lacks its directory (``ready=False``)."""

    def new_state(seed: int) -> dict[str, Any]:
        return {"ready": ready, "files": {}}

    def make_toolset(state: dict[str, Any]) -> Toolset:
        @tool(idempotent=False, write_targets="entry:{key}", read_targets=[])
        def append(key: str) -> str:
            """Add an entry and log it."""
            if not state["ready"]:
                raise FileNotFoundError("no such directory: data/")
            state["files"][f"entry:{key}"] = "x"
            state["files"]["entry-log"] = state["files"].get("entry-log", "") + key
            return "ok"

        @tool(read_only=True, read_targets=[])
        def count() -> int:
            """How many files there are."""
            return len(state["files"])

        return Toolset([append, count], name="journal")

    def resources(state: dict[str, Any]) -> dict[str, str]:
        return dict(state["files"])

    return CertifiableToolset(
        new_state=new_state,
        make_toolset=make_toolset,
        fingerprint=lambda state: tuple(sorted(state["files"].items())),
        resources=resources,
    )


def test_a_claim_whose_tool_never_succeeded_is_unverified_not_passed():
    """Every call of the writer fails on the kit's fresh state (a directory the seed lacks):
    its false declaration must not pass vacuously, nor the windows it is the writer of."""
    report = check_toolset(_journal(ready=False), examples=10)
    by_claim = {(c.subject, c.claim): c for c in report.claims}
    for key in (("append", "write_targets"), ("windows of all tools", "commutes")):
        claim = by_claim[key]
        assert claim.status == "unverified", report.render()
        assert "'append' never succeeded" in claim.reason
        assert "no such directory: data/" in claim.reason
    assert by_claim[("count", "read_only")].status == "passed"  # it succeeded
    assert report.ok  # nothing is FALSE: the summary counts them unverified
    assert any("never succeeded" in n for n in report.notes)
    assert not [c for c in report.passed if c.tool == "append"], report.render()
    assert f"0 FALSE, {len(report.unverified)} unverified" in report.render()
    seeded = check_toolset(_journal(ready=True), examples=10)
    assert {(c.subject, c.claim): c.status for c in seeded.claims}[
        ("append", "write_targets")
    ] == "FALSE"


# ------------------------------------------------------------------------- the pytest helper


def test_certify_toolset_returns_the_report_for_an_honest_toolset():
    report = certify_toolset(broken.honest, examples=10)
    assert isinstance(report, CertificationReport)
    assert report.ok


def test_certify_toolset_raises_an_assertion_with_the_report_on_a_false_claim():
    with pytest.raises(AssertionError, match=r"FALSE  read_doc: read_only"):
        certify_toolset(broken.readonly_that_writes(), examples=10)


@pytest.mark.anyio
async def test_the_kit_refuses_to_run_inside_an_event_loop_with_a_clear_error():
    with pytest.raises(ConfigError, match="plain `def` test"):
        check_toolset(broken.honest())


# ------------------------------------------------------------------------------- loading


def test_toolset_names_load_as_modules_objects_and_factories():
    module = load_certifiable("harness.toolsets.workspace")
    assert module.resources is not None
    assert module.example_values is not None
    factory = load_certifiable("tests.broken_toolsets:honest")
    assert isinstance(factory, CertifiableToolset)
    assert factory.stateful


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_pkg.tools", "no module named 'no_such_pkg'"),
        ("tests.broken_toolsets:nothing_here", "has no attribute 'nothing_here'"),
        ("harness.errors", "lacks new_state, make_toolset, fingerprint"),
        ("tests.broken_toolsets:", "malformed"),
        ("missing.json", "does not exist"),
    ],
)
def test_a_bad_toolset_name_is_a_config_error_that_says_what_to_pass(spec, message):
    with pytest.raises(ConfigError, match=message):
        load_certifiable(spec)


# ----------------------------------------------------------------------------------- the CLI


def test_cli_exits_0_when_no_claim_is_false(capsys):
    assert main(["certify", "tests.broken_toolsets:honest", "--examples", "5"]) == 0
    out = capsys.readouterr().out
    assert "9 claims: 9 passed, 0 FALSE, 0 unverified" in out


def test_cli_exits_1_on_a_false_claim_and_prints_the_counterexample(capsys):
    assert main(["certify", "tests.broken_toolsets:underreported_targets", "--examples", "20"]) == 1
    out = capsys.readouterr().out
    assert "FALSE  set_status: write_targets" in out
    assert "fix: Add ['doc:" in out


def test_cli_json_has_the_documented_shape(capsys):
    code = main(["certify", "tests.broken_toolsets:order_dependent", "--json", "--seed", "1"])
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == [
        "toolset", "tools", "seed", "examples", "manifest", "ok", "summary", "elapsed_s",
        "notes", "claims",
    ]  # fmt: skip
    assert doc["ok"] is False
    assert doc["seed"] == 1
    assert doc["summary"] == {"passed": 1, "false": 1, "unverified": 1}
    claims = {c["claim"]: c for c in doc["claims"]}
    assert list(claims["commutes"]) == [
        "claim", "tool", "phase", "status", "examples", "reason", "counterexample",
    ]  # fmt: skip
    ce = claims["commutes"]["counterexample"]
    assert list(ce) == [
        "calls",
        "message",
        "expected",
        "actual",
        "fix",
        "flaky",
        "nondeterministic",
    ]
    assert list(ce["expected"]) == ["label", "results", "state", "details"]
    assert ce["calls"][0]["name"] == "open_ticket"
    assert claims["write_targets"]["status"] == "unverified"


@pytest.mark.parametrize(
    "argv",
    [
        ["certify", "no_such_pkg.tools"],
        ["certify", "tests.broken_toolsets:nothing_here"],
        ["certify", "harness.errors"],
        ["certify", "tests.broken_toolsets:honest", "--examples", "0"],
        ["certify", "tests.broken_toolsets:honest", "--manifest", "nowhere.toml"],
    ],
)
def test_cli_bad_input_exits_2_with_an_error_line_not_a_traceback(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "Traceback" not in err


def test_cli_help_teaches_the_contract_and_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["certify", "--help"])
    out = capsys.readouterr().out
    for needle in ("new_state(seed)", "resources(state)", "exit status", "--json", "unverified"):
        assert needle in out


# ------------------------------------------------- aliasing: stores that canonicalise names


@pytest.mark.parametrize(
    "factory",
    [broken.raw_targets_on_a_folding_store, broken.weaker_fold_than_the_store],
    ids=["raw_targets", "weaker_fold"],
)
def test_a_store_that_folds_names_more_than_its_targets_say_is_safe_by_proof(factory):
    """Before issue 40 these declarations were lies the kit caught (the store folds NFKC,
    strip and case; the targets used the raw name or case only). Distinct only by proof:
    spellings a store may merge share a proof key, and a name outside the proof set is its
    whole namespace, so no two calls on one record run together, and the kit's aliases
    (case, Unicode forms, padding) find nothing false."""
    report = check_toolset(factory(), examples=40)
    assert not report.false, report.render()
    cert = factory()
    tool = cert.make_toolset(cert.new_state(0))["write_file"]
    spellings = ("notes", "Notes", " notes", "ＮＯＴＥＳ", "notes\t")  # one file in the store
    footprints = [tool.footprint({"name": n, "text": "x"}) for n in spellings]
    assert footprints[0].writes == {"file:notes"}
    assert all(conflict(a, b) for a in footprints for b in footprints)


def test_tools_that_declare_the_stores_fold_pass_every_claim():
    report = check_toolset(broken.honest_folding_store(), examples=20)
    assert report.ok
    assert not report.unverified
    assert ("write_file", "targets_canonical") in {(c.subject, c.claim) for c in report.passed}


def test_a_sync_tool_is_judged_only_after_its_abandoned_thread_has_ended():
    report = check_toolset(broken.sync_writer_after_timeout(), examples=5)
    assert {(c.subject, c.claim) for c in report.false} >= {
        ("audit", "read_only"),
        ("audit", "idempotent"),
    }


def test_aliasing_variants_cover_case_unicode_whitespace_paths_and_numbers():
    from harness.certkit._aliases import alias_variants

    text = alias_variants("a/b")
    assert {"A/B", " a/b", "a/b ", "a/./b", "a//b", "./a/b", "a/b/", "ａ／ｂ"} <= set(text)
    assert "cafe\u0301" not in text
    assert "cafe\u0301" in alias_variants("caf\u00e9")  # NFD of the precomposed form
    assert alias_variants(1) == [1.0, "1"]
    assert alias_variants(1.0) == [1, "1", "1.0"]
    assert [v for v in alias_variants("1") if not isinstance(v, str)] == [1, 1.0]
    assert [type(v) for v in alias_variants("1") if not isinstance(v, str)] == [int, float]
    assert alias_variants(True) == []
    assert "a/b" not in text


def test_the_kit_writes_nothing_in_the_working_directory(tmp_path):
    """hypothesis would leave a .hypothesis/ folder in the working directory; a fresh
    process (so no cache of hypothesis's is already loaded) shows the kit keeps it away."""
    import subprocess
    import sys

    code = (
        "from harness.certkit import check_toolset\n"
        "report = check_toolset('harness.toolsets.workspace', examples=2)\n"
        "assert report.ok\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=300)
    assert list(tmp_path.iterdir()) == []


def test_a_long_result_is_shown_where_it_differs_not_cut_before_it():
    from harness.certkit._report import _shown

    same = "x" * 5000
    shown = _shown(same + "A tail", same + "B tail")
    assert "⟦A tail⟧" in shown  # the differing field, marked
    assert "differs at character 5000" in shown
    assert _shown("short", "other") == "⟦short⟧  (differs at character 0)"
    assert _shown("y" * 3000, None) == "y" * 3000  # shown whole up to 4,000 characters
