"""Claims about harness.skills.manifest: valid manifests load; every malformed one says where it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError, ManifestError
from harness.skills.manifest import ArgSource, Manifest, Phase, load_manifest
from harness.tools import Tool, Toolset

VALID = """
version = 1
description = "Demo skills."

[skills.report]
description = "Read the listed documents, then write a summary."

[[skills.report.phases]]
name = "gather"
kind = "fan_out"
tools = ["read_doc", "search"]
slots = "input:keys"
[skills.report.phases.args]
"read_doc.key" = "input:keys"
"search.query" = "model"

[[skills.report.phases]]
name = "write"
kind = "chain"
tools = ["write_doc"]
description = "One write at the end."
[skills.report.phases.args]
"write_doc.body" = "result:gather"
"write_doc.key" = "args:gather"
"write_doc.title" = "input"

[skills.crawl]

[[skills.crawl.phases]]
name = "follow"
kind = "fan_out"
tools = ["fetch"]
slots = 4
[skills.crawl.phases.args]
"fetch.url" = "result:follow"
"""


def write(tmp_path: Path, text: str, name: str = "skills.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def one_phase(phase_body: str, *, before: str = "") -> str:
    """A manifest with skill 'report': optional earlier phases, then phase 'bad'."""
    return f'[skills.report]\n{before}\n[[skills.report.phases]]\nname = "bad"\n{phase_body}\n'


GATHER = '[[skills.report.phases]]\nname = "gather"\nkind = "fan_out"\ntools = ["read_doc"]\n'


# --- a valid manifest ------------------------------------------------------------------------


def test_a_valid_manifest_loads_with_every_phase_in_order(tmp_path):
    manifest = load_manifest(write(tmp_path, VALID))
    assert manifest.source == str(tmp_path / "skills.toml")
    assert list(manifest.skills) == ["report", "crawl"]
    report = manifest.skill("report")
    assert report.description == "Read the listed documents, then write a summary."
    assert [p.name for p in report.phases] == ["gather", "write"]
    gather, write_phase = report.phases
    assert gather.is_fan_out
    assert gather.tools == ("read_doc", "search")
    assert gather.slots == "input:keys"
    assert not write_phase.is_fan_out
    assert write_phase.slots is None
    assert report.phase("write") is write_phase


def test_a_valid_manifest_parses_every_kind_of_argument_source(tmp_path):
    report = load_manifest(write(tmp_path, VALID)).skill("report")
    assert report.phase("gather").sources("read_doc") == {"key": ArgSource("input", "keys")}
    assert report.phase("gather").sources("search") == {"query": ArgSource("model")}
    assert report.phase("write").sources("write_doc") == {
        "body": ArgSource("result", "gather"),
        "key": ArgSource("args", "gather"),
        "title": ArgSource("input"),
    }


def test_load_manifest_accepts_a_string_path(tmp_path):
    assert "crawl" in load_manifest(str(write(tmp_path, VALID))).skills


def test_a_phase_may_take_results_from_itself(tmp_path):
    follow = load_manifest(write(tmp_path, VALID)).skill("crawl").phase("follow")
    assert follow.sources("fetch") == {"url": ArgSource("result", "follow")}
    assert follow.slots == 4


def test_an_unknown_skill_is_a_manifest_error_listing_the_skills(tmp_path):
    manifest = load_manifest(write(tmp_path, VALID))
    with pytest.raises(ManifestError, match=r"no skill named 'reprot'; skills here: report, crawl"):
        manifest.skill("reprot")


def test_an_unknown_phase_is_a_key_error(tmp_path):
    with pytest.raises(KeyError):
        load_manifest(write(tmp_path, VALID)).skill("report").phase("nope")


# --- argument sources ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "source"),
    [
        ("input", ArgSource("input")),
        ("input:keys", ArgSource("input", "keys")),
        ("args:gather", ArgSource("args", "gather")),
        ("result:gather", ArgSource("result", "gather")),
        ("model", ArgSource("model")),
    ],
)
def test_argument_sources_parse_and_print_back(text, source):
    assert ArgSource.parse(text) == source
    assert str(source) == text


def test_only_result_sources_are_result_placeholders():
    assert ArgSource("result", "p").is_result_placeholder
    for kind in ("input", "args", "model"):
        assert not ArgSource.parse(kind if kind != "args" else "args:p").is_result_placeholder


@pytest.mark.parametrize("text", ["output", "", "result", "args", "results:gather"])
def test_bad_argument_sources_do_not_parse(text):
    with pytest.raises(ValueError):
        ArgSource.parse(text)


# --- slot counts and placeholders ------------------------------------------------------------


def test_slot_count_from_an_integer():
    assert Phase("p", "fan_out", ("t",), slots=3).slot_count({}) == 3


@pytest.mark.parametrize(
    ("value", "count"),
    [(["a", "b", "c"], 3), (("a",), 1), ({"x": 1, "y": 2}, 2), (5, 5), ([], 0)],
)
def test_slot_count_from_an_input_field(value, count):
    phase = Phase("p", "fan_out", ("t",), slots="input:keys")
    assert phase.slot_count({"keys": value}) == count


@pytest.mark.parametrize("inputs", [{}, {"keys": "abc"}, {"keys": None}, {"other": [1]}])
def test_slot_count_is_unknown_when_the_input_field_is_missing_or_not_countable(inputs):
    assert Phase("p", "fan_out", ("t",), slots="input:keys").slot_count(inputs) is None


def test_slot_count_is_unknown_when_the_manifest_does_not_say():
    assert Phase("p", "fan_out", ("t",)).slot_count({"keys": [1, 2]}) is None


def test_slot_count_of_a_loaded_manifest_follows_the_task_input(tmp_path):
    gather = load_manifest(write(tmp_path, VALID)).skill("report").phase("gather")
    assert gather.slot_count({"keys": ["a", "b"]}) == 2


def test_in_window_placeholders_are_results_of_the_same_phase(tmp_path):
    manifest = load_manifest(write(tmp_path, VALID))
    assert manifest.skill("crawl").phase("follow").in_window_placeholders("fetch") == ["url"]


def test_results_of_an_earlier_phase_are_not_in_window_placeholders(tmp_path):
    write_phase = load_manifest(write(tmp_path, VALID)).skill("report").phase("write")
    assert write_phase.in_window_placeholders("write_doc") == []


def test_in_window_placeholders_are_per_tool_and_sorted():
    phase = Phase(
        "p",
        "fan_out",
        ("a", "b"),
        args={
            ("a", "z"): ArgSource("result", "p"),
            ("a", "m"): ArgSource("result", "p"),
            ("a", "k"): ArgSource("args", "p"),
            ("b", "x"): ArgSource("result", "p"),
        },
    )
    assert phase.in_window_placeholders("a") == ["m", "z"]
    assert phase.in_window_placeholders("b") == ["x"]
    assert phase.in_window_placeholders("c") == []


# --- check_tools -----------------------------------------------------------------------------


def test_check_tools_passes_when_every_phase_tool_exists(tmp_path):
    manifest = load_manifest(write(tmp_path, VALID))
    manifest.check_tools(["read_doc", "search", "write_doc", "fetch", "extra"])


def _stub_tools(**properties: list[str]) -> Toolset:
    return Toolset(
        [
            Tool(name=n, parameters={"type": "object", "properties": {p: {} for p in ps}})
            for n, ps in properties.items()
        ]
    )


def test_check_tools_accepts_a_toolset(tmp_path):
    toolset = _stub_tools(
        read_doc=["key"], search=["query"], write_doc=["key", "body", "title"], fetch=["url"]
    )
    load_manifest(write(tmp_path, VALID)).check_tools(toolset)


def test_check_tools_refuses_an_args_key_naming_no_argument_of_its_tool(tmp_path):
    toolset = _stub_tools(read_doc=["doc"], search=["query"], write_doc=["key", "body"], fetch=[])
    with pytest.raises(ManifestError, match=r"'read_doc' has no argument 'key'.*\['doc'\]"):
        load_manifest(write(tmp_path, VALID)).check_tools(toolset)


def test_a_slot_count_from_an_input_the_task_does_not_have_is_refused(tmp_path):
    manifest = load_manifest(write(tmp_path, VALID))
    manifest.check_inputs("report", {"keys": ["a"]})
    with pytest.raises(ManifestError, match="names the input 'keys'"):
        manifest.check_inputs("report", {"ids": ["a"]})


def test_check_tools_names_the_phase_and_the_missing_tool(tmp_path):
    path = write(tmp_path, VALID)
    with pytest.raises(ManifestError) as info:
        load_manifest(path).check_tools(["read_doc", "search", "fetch"])
    message = str(info.value)
    assert str(path) in message
    assert "skill 'report'" in message
    assert "phase 'write'" in message
    assert "'tools'" in message
    assert "['write_doc']" in message


# --- malformed manifests ---------------------------------------------------------------------

#: (test id, phase body or manifest text, earlier phases, words the message must contain)
PHASE_ERRORS = [
    ("bad kind", 'kind = "parallel"\ntools = ["read_doc"]', "", "kind", "'parallel'"),
    ("missing kind", 'tools = ["read_doc"]', "", "kind", "None"),
    ("empty tools", 'kind = "chain"\ntools = []', "", "tools", "non-empty list"),
    ("tools not a list", 'kind = "chain"\ntools = "read_doc"', "", "tools", "non-empty list"),
    ("tools not strings", 'kind = "chain"\ntools = [1]', "", "tools", "non-empty list"),
    ("slots on a chain", 'kind = "chain"\ntools = ["t"]\nslots = 2', "", "slots", "fan_out"),
    ("zero slots", 'kind = "fan_out"\ntools = ["t"]\nslots = 0', "", "slots", "positive"),
    ("negative slots", 'kind = "fan_out"\ntools = ["t"]\nslots = -2', "", "slots", "-2"),
    ("boolean slots", 'kind = "fan_out"\ntools = ["t"]\nslots = true', "", "slots", "True"),
    ("float slots", 'kind = "fan_out"\ntools = ["t"]\nslots = 2.5', "", "slots", "2.5"),
    ("slots bad ref", 'kind = "fan_out"\ntools = ["t"]\nslots = "keys"', "", "slots", "'keys'"),
    ("slots empty ref", 'kind = "fan_out"\ntools = ["t"]\nslots = "input:"', "", "slots", "FIELD"),
    ("slots list", 'kind = "fan_out"\ntools = ["t"]\nslots = [1]', "", "slots", "[1]"),
    (
        "bad source kind",
        'kind = "chain"\ntools = ["t"]\n[skills.report.phases.args]\n"t.x" = "output"',
        "",
        "args.t.x",
        "'output'",
    ),
    (
        "args key without a dot",
        'kind = "chain"\ntools = ["t"]\n[skills.report.phases.args]\n"x" = "model"',
        "",
        "args.x",
        "tool.argument",
    ),
    (
        "args key without an argument",
        'kind = "chain"\ntools = ["t"]\n[skills.report.phases.args]\n"t." = "model"',
        "",
        "args.t.",
        "tool.argument",
    ),
    (
        "args tool not in phase",
        'kind = "chain"\ntools = ["t"]\n[skills.report.phases.args]\n"u.x" = "model"',
        "",
        "args.u.x",
        "'u' is not in this phase",
    ),
    (
        "args source not a string",
        'kind = "chain"\ntools = ["t"]\n[skills.report.phases.args]\n"t.x" = 3',
        "",
        "args.t.x",
        "must be a string",
    ),
    (
        "args not a table",
        'kind = "chain"\ntools = ["t"]\nargs = "t.x"',
        "",
        "args",
        "table",
    ),
    (
        "result of an unknown phase",
        'kind = "chain"\ntools = ["t"]\n[skills.report.phases.args]\n"t.x" = "result:nowhere"',
        "",
        "args.t.x",
        "'nowhere'",
    ),
    (
        "args of an unknown phase",
        'kind = "chain"\ntools = ["t"]\n[skills.report.phases.args]\n"t.x" = "args:nowhere"',
        "",
        "args.t.x",
        "'nowhere'",
    ),
    (
        "result without a phase",
        'kind = "chain"\ntools = ["t"]\n[skills.report.phases.args]\n"t.x" = "result"',
        "",
        "args.t.x",
        "result:PHASE",
    ),
    ("unknown field", 'kind = "chain"\ntools = ["t"]\nparallel = true', "", "parallel", "unknown"),
    (
        "duplicate phase name",
        'kind = "chain"\ntools = ["t"]',
        GATHER.replace('"gather"', '"bad"'),
        "name",
        "duplicate",
    ),
]


@pytest.mark.parametrize(
    ("body", "before", "field", "detail"),
    [case[1:] for case in PHASE_ERRORS],
    ids=[case[0] for case in PHASE_ERRORS],
)
def test_a_malformed_phase_names_file_skill_phase_and_field(tmp_path, body, before, field, detail):
    path = write(tmp_path, one_phase(body, before=before))
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    message = str(info.value)
    assert str(path) in message
    assert "skill 'report'" in message
    assert "phase 'bad'" in message
    assert field in message
    assert detail in message


def test_a_result_of_a_later_phase_is_a_manifest_error(tmp_path):
    text = (
        "[skills.report]\n"
        '[[skills.report.phases]]\nname = "first"\nkind = "chain"\ntools = ["t"]\n'
        '[skills.report.phases.args]\n"t.x" = "result:second"\n'
        '[[skills.report.phases]]\nname = "second"\nkind = "chain"\ntools = ["u"]\n'
    )
    path = write(tmp_path, text)
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    message = str(info.value)
    for piece in (str(path), "skill 'report'", "phase 'first'", "args.t.x", "'second'"):
        assert piece in message


def test_a_result_of_an_earlier_phase_loads(tmp_path):
    body = 'kind = "chain"\ntools = ["t"]\n[skills.report.phases.args]\n"t.x" = "result:gather"'
    phase = load_manifest(write(tmp_path, one_phase(body, before=GATHER))).skill("report")
    assert phase.phase("bad").sources("t") == {"x": ArgSource("result", "gather")}


def test_dotted_tool_names_can_be_used_in_args_keys(tmp_path):
    body = (
        'kind = "fan_out"\ntools = ["docs.read"]\n'
        '[skills.report.phases.args]\n"docs.read.key" = "input:keys"'
    )
    phase = load_manifest(write(tmp_path, one_phase(body))).skill("report").phase("bad")
    assert phase.sources("docs.read") == {"key": ArgSource("input", "keys")}


def test_a_phase_without_a_name_is_identified_by_its_position(tmp_path):
    text = f'[skills.report]\n{GATHER}[[skills.report.phases]]\nkind = "chain"\ntools = ["t"]\n'
    path = write(tmp_path, text)
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    message = str(info.value)
    for piece in (str(path), "skill 'report'", "phase #2", "'name'"):
        assert piece in message


def test_a_skill_without_phases_names_file_skill_and_field(tmp_path):
    path = write(tmp_path, '[skills.report]\ndescription = "nothing to do"\n')
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    message = str(info.value)
    for piece in (str(path), "skill 'report'", "'phases'"):
        assert piece in message


def test_an_unknown_skill_field_is_a_manifest_error(tmp_path):
    path = write(tmp_path, f'[skills.report]\nmode = "fast"\n{GATHER}')
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    message = str(info.value)
    for piece in (str(path), "skill 'report'", "mode"):
        assert piece in message


def test_an_unknown_top_level_field_is_a_manifest_error(tmp_path):
    path = write(tmp_path, f'author = "me"\n[skills.report]\n{GATHER}')
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    assert str(path) in str(info.value)
    assert "author" in str(info.value)


@pytest.mark.parametrize("text", ["", "version = 1\n", "[skills]\n", "skills = 3\n"])
def test_a_manifest_without_skills_is_a_manifest_error(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ManifestError, match=r"\[skills\.NAME\]") as info:
        load_manifest(path)
    assert str(path) in str(info.value)


def test_a_file_that_is_not_toml_is_a_manifest_error_naming_the_file(tmp_path):
    path = write(tmp_path, "[skills.report\nname = ")
    with pytest.raises(ManifestError, match="not valid TOML") as info:
        load_manifest(path)
    assert str(path) in str(info.value)


def test_a_missing_file_is_a_manifest_error_naming_the_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(ManifestError, match="does not exist") as info:
        load_manifest(path)
    assert str(path) in str(info.value)


def test_a_directory_is_a_manifest_error_naming_it(tmp_path):
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_a_file_that_is_not_utf8_is_a_manifest_error_naming_the_file(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('description = "Zürich"\n'.encode("latin-1"))
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    assert str(path) in str(info.value)


def test_manifest_errors_are_config_errors():
    assert issubclass(ManifestError, ConfigError)


def test_from_dict_names_its_source():
    with pytest.raises(ManifestError, match=r"^inline: "):
        Manifest.from_dict({"skills": {}}, source="inline")
