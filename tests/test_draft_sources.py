"""Drafts from more sources (issue 45): effects from a Python toolset (``harness init
--toolset``), and manifests from the proxy's ledger and from ``harness run`` journals besides
a JSONL of chats — each read from files the real code writes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.certkit.draft_effects import draft_effects, records_keying, render_effects
from harness.errors import ConfigError
from harness.loop.ledger import Ledger
from harness.messages import Message, ToolSpec
from harness.proxy import ProxyConfig, build_app, in_process_client
from harness.skills.draft_manifest import mine_fan_outs
from harness.skills.traces import read_traces
from harness.testing import Reply, ScriptedEngine
from harness.tools.effects_file import effects_from_dict, load_effects
from harness.toolsets.workspace import certification, make_toolset, new_state
from tests.serial_clients import client_loop, sdk

ROOT = Path(__file__).resolve().parents[1]


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


# -- effects from a Python toolset ----------------------------------------------------------


def test_a_python_toolset_draft_keys_records_as_its_resources_and_keeps_its_read_only_tools() -> (
    None
):
    state = new_state(0)
    toolset = make_toolset(state)
    draft = draft_effects(
        toolset,
        hints={n: t.effect for n, t in toolset.items()},
        trust_hints=True,
        keying=records_keying(certification.resources(state)),
        hints_are="the toolset declares it",
    )
    tools = draft.tables()["tools"]
    assert "root" not in draft.tables()  # records, not files under a root
    assert tools["read_doc"] == {"read_only": True, "read_targets": "doc:{key}"}
    assert tools["list_docs"] == {"read_only": True}  # nothing keys it: it may read anything
    assert tools["set_status"]["write_targets"] == "doc:{key}"
    assert tools["set_status"]["idempotent"] is True
    assert "idempotent" not in tools["append_note"]  # the toolset says it is not
    effects = effects_from_dict(draft.tables())
    assert effects["set_owner"].targets({"key": "d1", "owner": "ana"}) == frozenset({"doc:d1"})
    text = render_effects(draft, source="a test")
    assert "# draft: read-only: the toolset declares it" in text
    assert "'key' holds a key (its name), a record (named as the toolset's resources are" in text


def test_untrusted_hints_and_unkeyed_writers_leave_a_tool_undeclared() -> None:
    toolset = make_toolset(new_state(0))
    draft = draft_effects(toolset, hints={n: t.effect for n, t in toolset.items()},
                          keying=records_keying([]))  # fmt: skip
    tables = draft.tables()["tools"]
    assert "list_docs" not in tables  # not trusted, no key: the worst case
    assert tables["read_doc"]["write_targets"] == "record:{key}"  # a writer until said otherwise


def test_harness_init_drafts_and_certifies_a_python_toolset(tmp_path: Path) -> None:
    out = tmp_path / "workspace.effects.toml"
    done = _harness("init", "--toolset", "harness.toolsets.workspace", "--examples", "5",
                    "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "8 tools declared and certified, 0 refused, 0 left undeclared" in done.stderr
    effects = load_effects(out)
    assert effects["read_doc"].read_only
    assert effects["add_tag"].targets({"key": "d7", "tag": "x"}) == frozenset({"doc:d7"})


def test_a_toolset_whose_read_only_tool_writes_gets_that_declaration_refused(
    tmp_path: Path,
) -> None:
    out = tmp_path / "desk.toml"
    done = _harness("init", "--toolset", "tests.broken_toolsets:readonly_that_writes",
                    "--examples", "10", "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 refused" in done.stderr
    text = out.read_text()
    assert "# REFUSED by the kit" in text
    assert "read_only FALSE" in text
    effects = load_effects(out)
    assert "read_doc" not in effects  # a comment only: the worst case
    assert effects["set_status"].idempotent


def test_a_tool_that_never_succeeds_is_declared_but_marked_unverified(tmp_path: Path) -> None:
    out = tmp_path / "desk.toml"
    done = _harness("init", "--toolset", "tests.broken_toolsets:writer_that_always_fails",
                    "--examples", "5", "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 declared but unverified (set_status" in done.stderr
    text = out.read_text()
    assert "# UNVERIFIED by the kit:" in text
    assert "never succeeded" in text


def test_harness_certify_checks_an_effects_file_in_place_of_the_toolsets_own(
    tmp_path: Path,
) -> None:
    drafted = tmp_path / "drafted.toml"
    made = _harness("init", "--toolset", "harness.toolsets.workspace", "--examples", "5",
                    "-o", str(drafted))  # fmt: skip
    assert made.returncode == 0, made.stderr
    passed = _harness("certify", "harness.toolsets.workspace", "--effects", str(drafted),
                      "--examples", "5")  # fmt: skip
    assert passed.returncode == 0, passed.stdout + passed.stderr
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[tools.set_status]\nread_only = true\nread_targets = "doc:{key}"\n')
    failed = _harness("certify", "harness.toolsets.workspace", "--effects", str(wrong),
                      "--examples", "5")  # fmt: skip
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "set_status" in failed.stdout
    assert "read_only" in failed.stdout
    assert "FALSE" in failed.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--trust-hints"], "--mcp-server only"),
        (["--root", "/srv"], "--mcp-server only"),
        (["--read-only", "no_such_tool"], "does not have"),
        (["--mcp-server", "x {root}"], "one toolset"),
        (["--examples", "0"], "at least 1"),
    ],
)
def test_init_toolset_usage_errors_exit_2(extra: list[str], message: str) -> None:
    done = _harness("init", "--toolset", "harness.toolsets.workspace", *extra)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


# -- traces: the proxy's ledger -------------------------------------------------------------


def _reads(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Reply:
    """A serial model: read_doc on each d-key of the prompt, one per turn, then answer."""
    prompt = next(str(m["content"]) for m in messages if m["role"] == "user")
    keys = re.findall(r"\bd\d+\b", prompt)
    done = sum(m["role"] == "tool" for m in messages)
    if done < len(keys):
        return {"name": "read_doc", "arguments": {"key": keys[done]}}
    return "done"


@pytest.mark.anyio
async def test_the_proxy_ledger_is_read_as_one_chat_per_conversation(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path, log=False)
    app = build_app(ScriptedEngine(script=_reads), ProxyConfig(), ledger=ledger)
    prompts = ["Read d1, d2 and d3.", "Read d4 and d5.", "Read d1, d2 and d3."]  # one twice
    async with in_process_client(app) as http:
        for prompt in prompts:
            run = await client_loop(sdk(http), make_toolset(new_state(0)), prompt, {})
            assert len(run.calls) == len(re.findall(r"\bd\d+", prompt))
        # a pass-through request (X-Harness-Arm: S) is recorded the same way
        await client_loop(sdk(http), make_toolset(new_state(0)), "Read d8 and d9.",
                          {"X-Harness-Arm": "S"})  # fmt: skip
    ledger.close()
    traces = read_traces(path)
    assert traces.kind == "ledger"
    assert len(traces.chats) == 4
    first = traces.chats[0]
    assert first[0] == {"role": "user", "content": "Read d1, d2 and d3."}
    assert [len(m.get("tool_calls") or ()) for m in first[1:]] == [1, 1, 1, 0]
    (proposal,) = mine_fan_outs(traces.chats)
    assert (proposal.tool, proposal.argument) == ("read_doc", "key")
    assert [n for _, _, n in proposal.runs] == [3, 2, 3, 2]
    assert proposal.from_prompt


def test_a_ledger_without_exchange_records_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps({"kind": "turn", "run_id": "r", "turn": 0}) + "\n")
    with pytest.raises(ConfigError, match="no exchange records"):
        read_traces(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"rows": 3}\n', "not a recognized trace"),
        ("not json\n", "line 1: not JSON"),
        ("\n", "hold no record"),
    ],
)
def test_unrecognized_traces_exit_2_with_what_was_expected(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_traces(path)
    done = _harness("init", "--traces", str(path))
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


# -- traces: harness run journals -----------------------------------------------------------


def test_harness_run_journals_are_read_as_chats_with_their_prompts(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = []
    for i, keys in enumerate((["a", "b", "c"], ["c", "a"])):
        rows.append({
            "id": f"t{i}",
            "prompt": f"Write 'x' to {' and '.join(keys)}.",
            "gold_calls": [{"name": "write_doc", "arguments": {"key": k, "body": "x"}} for k in keys],
        })  # fmt: skip
    tasks.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    directory = tmp_path / "runs"
    done = _harness("run", "--toolset", "tests.user_toolset:make_toolset",
                    "--tasks", str(tasks), "--journal", str(directory), "--arm", "S",
                    "--engine", "scripted", "--policy", "gold")  # fmt: skip
    assert done.returncode == 0, done.stderr
    traces = read_traces(directory)
    assert traces.kind == "journals"
    assert len(traces.chats) == 2
    assert sorted(str(c[0]["content"]) for c in traces.chats) == sorted(
        str(r["prompt"]) for r in rows
    )
    (proposal,) = mine_fan_outs(traces.chats)
    assert (proposal.tool, proposal.argument, proposal.fixed) == ("write_doc", "key", {"body"})
    assert sorted(n for _, _, n in proposal.runs) == [2, 3]
    assert proposal.from_prompt
    out = tmp_path / "skills.toml"
    made = _harness("init", "--traces", str(directory), "--manifest-output", str(out))
    assert made.returncode == 0, made.stderr
    assert "found in 2 chat(s) of" in made.stderr
    assert "(journals)" in made.stderr
