"""Claims about where a skill's inputs are written in a conversation (harness.skills.input_sources):
the workspace manifest reads every workspace task's inputs from its prompt exactly, a tool's
result is read by a JSON path, every bad declaration is one ManifestError naming the field,
and the proxy reads them for a client that sends none."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.bench.workload import generate_tasks
from harness.errors import ManifestError
from harness.proxy import ProxyConfig, build_app, in_process_client
from harness.skills.manifest import Manifest
from harness.testing import ScriptedEngine
from harness.toolsets.workspace import load_workspace_manifest
from tests.test_proxy import EFFECTS, TOOLS, opening, run_tool, survey_script

pytestmark = pytest.mark.anyio


def _skill(inputs: dict[str, Any]) -> Manifest:
    return Manifest.from_dict(
        {
            "skills": {
                "survey": {
                    "phases": [
                        {
                            "name": "read",
                            "kind": "fan_out",
                            "tools": ["read_doc"],
                            "slots": "input:keys",
                            "args": {"read_doc.key": "input:keys"},
                        }
                    ],
                    "inputs": inputs,
                }
            }
        }
    )


def test_the_workspace_manifest_reads_every_tasks_inputs_from_its_prompt() -> None:
    manifest = load_workspace_manifest()
    read_any = 0
    for wt in generate_tasks():
        skill = manifest.skill(wt.skill)
        chat = [{"role": "system", "content": "s"}, {"role": "user", "content": wt.task.prompt}]
        found = skill.read_inputs(chat)
        assert set(found) == set(skill.inputs), wt.id  # every declared input is found
        for name, value in found.items():
            assert value == wt.task.inputs[name], (wt.id, name)
        read_any += bool(found)
    assert read_any >= 30  # most tasks have inputs the manifest reads


def test_a_pattern_reads_its_group_its_first_match_or_every_match_split_and_typed() -> None:
    chat = [{"role": "user", "content": "Read d1, d2 and d3; then read 2 more; tag 'x' and 'y'."}]
    skill = _skill(
        {
            "keys": {
                "from": "prompt",
                "pattern": r"Read (d\d+(?:(?:, | and )d\d+)*)",
                "split": ", | and ",
            },
            "more": {"from": "prompt", "pattern": r"read (?P<value>\d+) more", "type": "integer"},
            "tags": {"from": "prompt", "pattern": "'([^']+)'", "all": True},
            "first": {"from": "prompt", "pattern": "'([^']+)'"},
            "absent": {"from": "prompt", "pattern": "never here"},
        }
    ).skill("survey")
    assert skill.read_inputs(chat) == {
        "keys": ["d1", "d2", "d3"],
        "more": 2,
        "tags": ["x", "y"],
        "first": "x",
    }


def test_a_result_source_reads_the_first_result_of_its_tool_by_a_json_path() -> None:
    listing = {"items": [{"key": "a"}, {"key": "b"}], "count": 2}
    chat = [
        {"role": "user", "content": "Survey everything."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "list_docs", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(listing)},
    ]
    skill = _skill(
        {
            "keys": {"from": "result:list_docs", "path": "items[*].key"},
            "n": {"from": "result:list_docs", "path": "count", "type": "integer"},
            "second": {"from": "result:list_docs", "path": "items[1].key"},
            "other": {"from": "result:read_doc"},
        }
    ).skill("survey")
    assert skill.read_inputs(chat) == {"keys": ["a", "b"], "n": 2, "second": "b"}
    assert skill.read_inputs(chat[:1]) == {}  # not there yet: nothing read


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"from": "prompt"}, "needs a 'pattern'"),
        ({"from": "user", "pattern": "x"}, "'from'"),
        ({"from": "prompt", "pattern": "("}, "not a regular expression"),
        ({"from": "prompt", "pattern": "x", "type": "float"}, "'type'"),
        ({"from": "prompt", "pattern": "x", "path": "a.b"}, "'path'"),
        ({"from": "result:t", "path": "a..b"}, "'path'"),
        ({"from": "prompt", "pattern": "x", "all": "yes"}, "'all'"),
        ({"from": "prompt", "pattern": "x", "where": 1}, "unknown field"),
        ("prompt", "must be a table"),
    ],
)
def test_every_bad_declaration_is_one_manifest_error_naming_the_field(spec: Any, says: str) -> None:
    with pytest.raises(ManifestError) as caught:
        _skill({"keys": spec})
    assert "skill 'survey', field 'inputs.keys'" in str(caught.value)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


async def test_the_proxy_reads_the_inputs_a_client_never_sends() -> None:
    # The survey of tests/test_proxy.py, its slot count read from "Survey a, b and c.": the
    # window closes at its third call, with no X-Harness-Inputs and no warning.
    manifest = _skill(
        {
            "keys": {
                "from": "prompt",
                "pattern": r"Survey (\w(?:(?:, | and )\w)*)",
                "split": ", | and ",
            }
        }
    )
    engine = ScriptedEngine(survey_script)
    async with in_process_client(
        build_app(engine, ProxyConfig(effects=EFFECTS, manifest=manifest))
    ) as http:
        messages = opening()
        response = await http.post(
            "/chat/completions", json={"model": "m", "messages": messages, "tools": TOOLS}
        )
    assert response.status_code == 200, response.text
    assert response.headers["x-harness-window"] == "3"
    assert response.headers["x-harness-generations"] == "3"  # closed by its slot count
    assert "x-harness-warning" not in response.headers
    calls = response.json()["choices"][0]["message"]["tool_calls"]
    assert [run_tool(c) for c in calls] == ["text of a", "text of b", "text of c"]
