"""Run one scripted sequence of calls under S, F, F+eager and P and compare with S.

A test double for the identity tests: the agent emits the given calls one per turn (all in
one message under P), then answers ``done``; each arm's tool results (in transcript order)
and the store's final state are compared with S's. The manifest has one fan-out phase over
every tool, each argument chosen by the model (so only D1, the identity of targets, decides
what certifies).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio

from harness.engines.base import Message, ToolSpec
from harness.loop import FlattenSettings, LoopConfig, run_loop
from harness.manifest import Manifest
from harness.task import Task
from harness.testing import ScriptedEngine
from harness.tools import Toolset

Call = tuple[str, Mapping[str, Any]]


@dataclass
class ArmRun:
    results: list[tuple[str, str, str]]
    state: str
    windows: int
    error: str | None = None


def _transcript(messages: Sequence[Message]) -> list[tuple[str, str, str]]:
    calls: dict[str, tuple[str, str]] = {}
    out = []
    for m in messages:
        for c in m.get("tool_calls") or ():
            fn = c["function"]
            calls[c["id"]] = (fn["name"], fn["arguments"])
        if m.get("role") == "tool":
            name, arguments = calls[str(m["tool_call_id"])]
            out.append((name, arguments, str(m.get("content", ""))))
    return out


def _agent(calls: Sequence[Call], parallel: bool) -> Callable[..., Any]:
    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        done = sum(1 for m in messages if m.get("role") == "tool")
        if done >= len(calls):
            return "done"
        if parallel:
            return [{"name": n, "arguments": dict(a)} for n, a in calls[done:]]
        name, arguments = calls[done]
        return {"name": name, "arguments": dict(arguments)}

    return script


def run_arms(
    make_toolset: Callable[[dict[str, Any]], Toolset],
    calls: Sequence[Call],
    *,
    state: Mapping[str, Any] | None = None,
) -> dict[str, ArmRun]:
    """Each arm's run of ``calls`` on a fresh copy of ``state``."""

    async def one(arm: str, eager: bool) -> ArmRun:
        store: dict[str, Any] = copy.deepcopy(dict(state or {}))
        toolset = make_toolset(store)
        manifest = Manifest.from_dict(
            {
                "skills": {
                    "case": {
                        "phases": [
                            {
                                "name": "gather",
                                "kind": "fan_out",
                                "tools": sorted(toolset),
                                "args": {
                                    f"{t}.{p}": "model"
                                    for t in toolset
                                    for p in toolset[t].parameters.get("properties", {})
                                },
                            }
                        ]
                    }
                }
            },
            source="identity-test",
        )
        config = LoopConfig(
            arm=arm,  # type: ignore[arg-type]
            max_turns=100,
            flatten=FlattenSettings(eager=eager, max_discards=16),
        )
        config = replace(config, max_model_errors=10**6, max_identical_calls=10**6)
        task = Task(id="identity", prompt="solve", skill="case", inputs={})
        try:
            result = await run_loop(
                ScriptedEngine(_agent(calls, arm == "P")),
                toolset,
                task,
                config,
                manifest=manifest.skill("case"),
            )
        except Exception as exc:
            return ArmRun([], json.dumps(store, sort_keys=True, default=str), 0, repr(exc))
        windows = sum(1 for w in result.windows if w.n >= 2)
        return ArmRun(
            _transcript(result.messages),
            json.dumps(store, sort_keys=True, default=str),
            windows,
        )

    async def main() -> dict[str, ArmRun]:
        return {
            "S": await one("S", False),
            "F": await one("F", False),
            "F+eager": await one("F", True),
            "P": await one("P", False),
        }

    return anyio.run(main)


def differences(runs: Mapping[str, ArmRun]) -> dict[str, str]:
    """Each arm whose results or final state differ from S's (or that raised), and how."""
    serial = runs["S"]
    out: dict[str, str] = {}
    for label, run in runs.items():
        if run.error is not None:
            out[label] = f"raised {run.error}"
        elif [r[2] for r in run.results] != [r[2] for r in serial.results]:
            out[label] = f"results {run.results} != {serial.results}"
        elif run.state != serial.state:
            out[label] = f"state {run.state} != {serial.state}"
    return out
