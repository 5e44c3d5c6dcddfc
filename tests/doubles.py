"""A small in-memory toolset and manifest for the spine's tests (not the workload)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import anyio

from harness import Manifest, Task, Toolset, tool
from harness.loop.task import GoldCall
from harness.proxy.effects_file import effects_from_dict


@dataclass
class Store:
    docs: dict[str, str] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def fingerprint(self) -> str:
        blob = json.dumps({"docs": self.docs, "log": self.log}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()


def make_toolset(store: Store, *, delay: float = 0.0) -> Toolset:
    @tool(read_only=True, read_targets="doc:{key}")
    async def read_doc(key: str) -> dict[str, Any]:
        """Read one document."""
        if delay:
            await anyio.sleep(delay)
        await anyio.lowlevel.checkpoint()
        return {"key": key, "body": store.docs.get(key, "")}

    @tool(idempotent=True, write_targets="doc:{key}", read_targets=())
    async def write_doc(key: str, body: str) -> str:
        """Write a document (replaces its body)."""
        await anyio.lowlevel.checkpoint()
        store.docs[key] = body
        return "ok"

    @tool(write_targets="log", read_targets="log")
    async def append_log(line: str) -> int:
        """Append a line to the log (not idempotent)."""
        await anyio.lowlevel.checkpoint()
        store.log.append(line)
        return len(store.log)

    return Toolset([read_doc, write_doc, append_log], name="docs")


MANIFEST = Manifest.from_dict(
    {
        "skills": {
            "report": {
                "phases": [
                    {
                        "name": "gather",
                        "kind": "fan_out",
                        "tools": ["read_doc"],
                        "slots": "input:keys",
                        "args": {"read_doc.key": "input:keys"},
                    },
                    {
                        "name": "write",
                        "kind": "chain",
                        "tools": ["write_doc"],
                        "args": {"write_doc.body": "result:gather", "write_doc.key": "input"},
                    },
                ]
            },
            "report_unslotted": {
                "phases": [
                    {"name": "gather", "kind": "fan_out", "tools": ["read_doc"]},
                    {
                        "name": "write",
                        "kind": "chain",
                        "tools": ["write_doc"],
                        "args": {"write_doc.body": "result:gather"},
                    },
                ]
            },
            "fanwrite": {
                "phases": [{"name": "put", "kind": "fan_out", "tools": ["write_doc", "append_log"]}]
            },
            "chain": {
                "phases": [
                    {
                        "name": "follow",
                        "kind": "chain",
                        "tools": ["read_doc"],
                        "args": {"read_doc.key": "result:follow"},
                    }
                ]
            },
        }
    },
    source="tests/doubles.py",
)


def report_task(keys: list[str], *, skill: str = "report") -> Task:
    reads = tuple(GoldCall("read_doc", {"key": k}) for k in keys)
    body = " + ".join(keys)
    return Task(
        id=f"report-{len(keys)}",
        prompt=f"Read {', '.join(keys)} and write a summary to 'summary'.",
        skill=skill,
        inputs={"keys": keys},
        gold_steps=(reads, (GoldCall("write_doc", {"key": "summary", "body": body}),)),
        gold_answer="Summary written.",
    )


def seeded_store(keys: list[str]) -> Store:
    return Store(docs={k: f"body of {k}: " + "lorem ipsum " * 6 for k in keys})


#: A one-phase survey for the proxy's client tests: ``read_doc`` over the task's keys, read-only.
SURVEY_KEYS = ("a", "b", "c")
SURVEY_EFFECTS = effects_from_dict({"tools": {"read_doc": {"read_only": True}}})
SURVEY_MANIFEST = Manifest.from_dict(
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
                ]
            }
        }
    }
)
