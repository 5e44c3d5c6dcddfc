"""Doubles for the fabric's tests: prompts are "step <id>." so an engine can tell which node
asks; :class:`GatedEngine` lets a test hold a node's request and see when it starts and ends;
:class:`InstantEngine` answers at once with no bookkeeping (for very large graphs)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import anyio

from harness.engines.base import GenerationSettings
from harness.fabric import llm_node
from harness.messages import Completion, Message, ToolSpec, Usage
from harness.testing import ScriptedEngine

_STEP = re.compile(r"step (\S+?)\.")


def node_of(messages: Sequence[Message]) -> str:
    match = _STEP.search(str(messages[-1]["content"]))
    return match.group(1) if match else "?"


def echo(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    return f"out {node_of(messages)}"


def step(node_id: str, deps: Sequence[str] = (), **kwargs: Any) -> Any:
    return llm_node(node_id, f"step {node_id}.", deps, **kwargs)


class GatedEngine:
    """Delegates to a ScriptedEngine. A request for node X sets ``started[X]``, then waits for
    ``gates[X]`` if there is one; ``finished[X]`` is set when its reply is back."""

    def __init__(self, inner: ScriptedEngine, gates: dict[str, anyio.Event] | None = None):
        self.inner = inner
        self.name = "gated"
        self.gates = gates or {}
        self.started: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)
        self.finished: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)

    async def generate(self, messages, tools, settings):
        node = node_of(messages)
        self.started[node].set()
        if node in self.gates:
            await self.gates[node].wait()
        reply = await self.inner.generate(messages, tools, settings)
        self.finished[node].set()
        return reply

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class InstantEngine:
    """Answers every request at once (one checkpoint) with ``"ok"``; counts requests and the
    most in flight together."""

    name = "instant"

    def __init__(self) -> None:
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> Completion:
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await anyio.lowlevel.checkpoint()
            return Completion("ok", usage=Usage(1, 0, 1))
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> InstantEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None
