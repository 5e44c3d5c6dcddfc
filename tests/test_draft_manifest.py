"""Skill manifests drafted from recorded serial runs (``harness init --traces``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ConfigError
from harness.skills.draft_manifest import mine_fan_outs, read_chats, render_manifest, value_pattern
from harness.skills.manifest import load_manifest


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ],
    }  # fmt: skip


def _serial_chat(keys: list[str], prompt: str | None = None) -> list[dict[str, Any]]:
    """A serial loop: one read_doc per turn, then list_docs once, then the answer."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": prompt or f"Read {', '.join(keys)} and summarise them."}
    ]
    for key in keys:
        messages += [_call("read_doc", key=key, verbose=False), {"role": "tool", "tool_call_id": "c", "content": "text"}]  # fmt: skip
    messages += [_call("list_docs"), {"role": "tool", "tool_call_id": "c", "content": "[]"}]
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def test_serial_runs_become_one_fan_out_phase_with_its_evidence(tmp_path: Path) -> None:
    chats = [_serial_chat(["d558", "d12", "d484"]), _serial_chat(["d7", "d90"])]
    (proposal,) = mine_fan_outs(chats)
    assert (proposal.tool, proposal.argument, proposal.fixed) == ("read_doc", "key", {"verbose"})
    assert [n for _, _, n in proposal.runs] == [3, 2]
    assert proposal.from_prompt
    text = render_manifest([proposal], source="runs.jsonl")
    assert "# evidence: 2 serial run(s) of read_doc" in text
    path = tmp_path / "skills.toml"
    path.write_text(text)
    manifest = load_manifest(path)
    skill = manifest.skills["read_doc_each_key"]
    (phase,) = skill.phases
    assert phase.is_fan_out
    assert phase.tools == ("read_doc",)
    # the proxy reads the slot values from a new prompt with the drafted rule
    prompt = [{"role": "user", "content": "Please read d3, d41 and d5 today."}]
    assert skill.read_inputs(prompt) == {"keys": ["d3", "d41", "d5"]}
    assert phase.slot_count({"keys": ["d3", "d41", "d5"]}) == 3


def test_values_not_in_the_prompt_are_left_to_the_task_inputs() -> None:
    (proposal,) = mine_fan_outs([_serial_chat(["a", "b"], prompt="Summarise the folder.")])
    assert not proposal.from_prompt
    assert "X-Harness-Inputs" in render_manifest([proposal], source="t")


def test_a_single_call_or_several_changing_arguments_propose_nothing() -> None:
    one = _serial_chat(["d1"])
    both = [
        {"role": "user", "content": "x"},
        _call("put", k="a", v="1"),
        _call("put", k="b", v="2"),
    ]
    assert mine_fan_outs([one, both]) == []


@pytest.mark.parametrize(
    ("values", "pattern"),
    [
        (["d558", "d12"], r"\bd\d+\b"),
        (["INV-2024-001", "INV-2023-17"], r"\bINV\-\d+\-\d+\b"),
        (["alpha", "beta"], r"\b[A-Za-z]+\b"),
        (["a b", "c"], r"\b(?:a\ b|c)\b"),
    ],
)
def test_the_prompt_pattern_follows_the_values_shape(values: list[str], pattern: str) -> None:
    assert value_pattern(values) == pattern


def test_traces_that_are_not_chats_are_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [1, 2]}\n')
    with pytest.raises(ConfigError, match="line 1"):
        read_chats(bad)
    with pytest.raises(ConfigError, match="Cannot read"):
        read_chats(tmp_path / "missing.jsonl")


def test_harness_init_drafts_a_manifest_from_traces(tmp_path: Path) -> None:
    traces = tmp_path / "runs.jsonl"
    traces.write_text("\n".join(json.dumps({"messages": _serial_chat(k)}) for k in (["d1", "d2"], ["d3", "d4", "d5"])))  # fmt: skip
    out = tmp_path / "skills.toml"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "init", "--traces", str(traces), "--manifest-output", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 fan-out phase(s) found in 2 chat(s)" in done.stderr
    assert "read_doc_each_key" in load_manifest(out).skills
    again = subprocess.run(
        [sys.executable, "-m", "harness", "init", "--traces", str(traces), "--manifest-output", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 2
    assert "--force" in again.stderr
    nothing = subprocess.run(
        [sys.executable, "-m", "harness", "init"], capture_output=True, text=True, timeout=120
    )
    assert nothing.returncode == 2
    assert "Name what to draft from" in nothing.stderr
