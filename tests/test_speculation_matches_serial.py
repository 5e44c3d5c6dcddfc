"""F+spec gives S's results where reviewers found it did not (issue 40, fifth round of fresh
cases): a speculation is taken over only by a call spelled as it was, and a write in a window
of another phase cancels the prefetched reads of the phases after it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import anyio
import pytest

from harness import Manifest, Toolset, tool
from harness.loop import FlattenSettings, LoopConfig, run_loop
from harness.loop.task import Task
from harness.testing import ScriptedEngine

Script = Callable[[list[dict[str, Any]], Any], Any]


def _results(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(m.get("content", "")) for m in messages if m.get("role") == "tool"]


def _run(
    make: Callable[[dict[str, Any]], Toolset],
    manifest: Mapping[str, Any],
    script: Script,
    inputs: Mapping[str, Any],
    arm: str,
) -> tuple[list[str], dict[str, Any]]:
    store: dict[str, Any] = {}
    toolset = make(store)
    config = LoopConfig(
        arm="S" if arm == "S" else "F",
        max_turns=100,
        flatten=FlattenSettings(eager=arm == "F+spec", speculate=arm == "F+spec"),
    )
    config = replace(config, max_model_errors=100, max_identical_calls=100)
    task = Task(id="t", prompt="solve", skill="s", inputs=copy.deepcopy(dict(inputs)))

    async def go() -> list[str]:
        result = await run_loop(
            ScriptedEngine(script), toolset, task, config, manifest=Manifest.from_dict(manifest)
        )
        return _results([m if isinstance(m, dict) else m.to_dict() for m in result.messages])

    return anyio.run(go), store


def _folding_reader(store: dict[str, Any]) -> Toolset:
    store.update({"d1": "draft", "d2": "review"})

    @tool(read_only=True, read_targets="doc:{key}", canonical="case")
    async def read_doc(key: str) -> str:
        """Read one document (the store folds case; the result echoes the key as sent)."""
        return json.dumps({"key": key, "status": store[key.lower()]})

    return Toolset([read_doc])


def _writer_then_reader(store: dict[str, Any]) -> Toolset:
    store.update(dict.fromkeys("abc", "draft"))

    @tool(read_only=True, read_targets="doc:{key}")
    async def read_doc(key: str) -> str:
        """Read one document."""
        return json.dumps({"key": key, "status": store[key]})

    @tool(idempotent=True, write_targets="doc:{key}/status", read_targets=())
    async def set_status(key: str, status: str) -> str:
        """Set a document's status (a blind overwrite)."""
        store[key] = status
        return json.dumps({"key": key, "status": status})

    return Toolset([read_doc, set_status])


_READ = {"skills": {"s": {"phases": [{"name": "read", "kind": "fan_out",
         "tools": ["read_doc"], "slots": "input:keys", "args": {"read_doc.key": "input:keys"}}]}}}  # fmt: skip
_APPROVE_THEN_CHECK = {"skills": {"s": {"phases": [
    {"name": "approve", "kind": "fan_out", "tools": ["set_status"],
     "args": {"set_status.key": "input:keys", "set_status.status": "input:to"}},
    {"name": "check", "kind": "fan_out", "tools": ["read_doc"], "slots": "input:keys",
     "args": {"read_doc.key": "input:keys"}},
]}}}  # fmt: skip


def _upper_case_reads(messages: list[dict[str, Any]], tools: Any) -> Any:
    n = len(_results(messages))
    return {"name": "read_doc", "arguments": {"key": ["D1", "D2"][n]}} if n < 2 else "done"


def _write_guess_then_read(messages: list[dict[str, Any]], tools: Any) -> Any:
    calls = [("set_status", {"key": k, "status": "done"}) for k in "cab"]
    calls += [("read_doc", {"key": k}) for k in "abc"]
    results = _results(messages)
    if len(results) >= len(calls):
        return "done"
    if len(results) == 2 and "[withheld]" in results[-1]:  # a guess, discarded (D2)
        return {"name": "set_status", "arguments": {"key": "bb", "status": "done"}}
    name, arguments = calls[len(results)]
    return {"name": name, "arguments": arguments}


@pytest.mark.parametrize(
    ("make", "manifest", "script", "inputs"),
    [
        # a call spelled 'D1' must not take over the speculation of 'd1' (one record under the
        # fold, but the result echoes the spelling)
        (_folding_reader, _READ, _upper_case_reads, {"keys": ["d1", "d2"]}),
        # the approve phase goes on in a new window (a discarded guess closed the first) after
        # the check phase's reads were prefetched: its write must cancel them
        (
            _writer_then_reader,
            _APPROVE_THEN_CHECK,
            _write_guess_then_read,
            {"keys": ["a", "b", "c"], "to": "done"},
        ),
    ],
)
def test_f_spec_gives_the_serial_results_and_store(
    make: Callable[[dict[str, Any]], Toolset],
    manifest: Mapping[str, Any],
    script: Script,
    inputs: Mapping[str, Any],
) -> None:
    serial = _run(make, manifest, script, inputs, "S")
    speculated = _run(make, manifest, script, inputs, "F+spec")
    assert speculated == serial
