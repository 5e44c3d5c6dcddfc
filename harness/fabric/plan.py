"""Plans as JSON Lines, speculative decomposition, and the plan-and-execute runner.

**Plan format** (what the planner is asked to write, and what ``--plan FILE`` reads): JSON
Lines, one node per line, dependencies before the nodes that use them::

    {"id": "T1", "prompt": "List the components.", "deps": []}
    {"id": "T2", "prompt": "List the requirements.", "deps": [], "criticality": "trivial"}
    {"id": "T3", "prompt": "Write the security section.", "deps": ["T1", "T2"],
     "criticality": "moderate", "high_stakes": true}

``id`` and ``prompt`` are required strings; ``deps`` (ids of *earlier* lines, default ``[]``),
``criticality`` (trivial / simple / moderate / critical, default simple) and ``high_stakes``
(bool) are optional. Lines that do not start with ``{`` (blank lines, code fences, a model's
chatter) are ignored. A line that is not a valid node (bad JSON, a missing field, a duplicate
id, a dependency no earlier line declared) is a *plan problem*: it is recorded, skipped, and
never fatal for a model-written plan (:func:`parse_plan` with ``strict=True`` raises
:class:`~harness.errors.ConfigError` instead, for plans a person wrote). Requiring
dependencies to come first makes cycles impossible and lets a node be scheduled the moment its
line is complete.

**Streaming extension.** The engine protocol has no streaming; an engine *may* add::

    async def stream(messages, tools, settings) -> AsyncIterator[str | Completion]

yielding text deltas as they are decoded and, last, the whole :class:`Completion` (usage and
timings). It is detected with ``hasattr(engine, "stream")``; :class:`StreamingEngine` is the
protocol. :class:`harness.testing.ScriptedEngine` implements it.

**Speculative decomposition** (CRP-SPEC-022 §5). With a streaming engine the runner adds each
node to the running fabric as soon as its line is complete, so layer-0 nodes start while the
planner is still decoding the deeper layers; such nodes share the planner's round (see
:mod:`harness.fabric.figures`). Without streaming the plan is parsed whole after the planner
call.

**Plan and execute** (:func:`plan_and_execute`): decompose (one planner call) → execute the
DAG on the fabric → compose (one call over the task and every node's output). If the plan has
no usable node, the task runs as a single node (and that is reported as a plan problem), so a
weak planner degrades to one naive pass instead of failing.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from harness._logging import get_logger
from harness.engines.base import Completion, Engine, GenerationSettings, Message, ToolSpec
from harness.errors import ConfigError
from harness.fabric.executor import Fabric, FabricConfig
from harness.fabric.figures import PEFFigures
from harness.fabric.graph import Criticality, Node, TaskGraph, llm_node
from harness.fabric.result import FabricResult, NodeResult
from harness.tools import Toolset

__all__ = (
    "COMPOSER_SYSTEM",
    "PLANNER_SYSTEM",
    "PlanParser",
    "PlanRun",
    "StreamingEngine",
    "compose_messages",
    "parse_plan",
    "plan_and_execute",
    "plan_messages",
    "plan_to_jsonl",
)

_log = get_logger("harness.fabric")

PLANNER_SYSTEM = (
    "You split a task into small steps that can run in parallel. Write only JSON Lines, one "
    'step per line: {"id": "T1", "prompt": "<what to do>", "deps": [], "criticality": '
    '"simple"}. "deps" lists the ids of earlier steps whose output the step needs; steps with '
    'no deps run first, together. "criticality" is trivial, simple, moderate or critical. '
    "Write no other text."
)

COMPOSER_SYSTEM = (
    "You combine the outputs of the steps of a task into one final answer. Use only what the "
    "steps found; say so if a step failed."
)


@runtime_checkable
class StreamingEngine(Protocol):
    """The optional streaming extension of :class:`~harness.engines.base.Engine`."""

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> AsyncIterator[str | Completion]: ...


_FIELDS = {"id", "prompt", "deps", "criticality", "high_stakes"}


class PlanParser:
    """Incremental JSON Lines plan parser: :meth:`feed` text as it arrives, get the nodes
    whose lines completed; :meth:`close` at the end. ``problems`` lists skipped lines."""

    def __init__(self) -> None:
        self._buffer = ""
        self._line = 0
        self.nodes: list[Node] = []
        self.problems: list[str] = []

    def feed(self, text: str) -> list[Node]:
        self._buffer += text
        *complete, self._buffer = self._buffer.split("\n")
        return [n for n in map(self._parse, complete) if n is not None]

    def close(self) -> list[Node]:
        rest, self._buffer = self._buffer, ""
        node = self._parse(rest) if rest.strip() else None
        return [node] if node is not None else []

    def _problem(self, message: str) -> None:
        self.problems.append(f"plan line {self._line}: {message}")

    def _parse(self, line: str) -> Node | None:
        self._line += 1
        line = line.strip()
        if not line.startswith("{"):
            return None
        try:
            raw: Any = json.loads(line)
        except json.JSONDecodeError as exc:
            self._problem(f"not valid JSON ({exc.msg} at char {exc.pos}); line skipped")
            return None
        if not isinstance(raw, dict):
            self._problem("not a JSON object; line skipped")
            return None
        node_id, prompt, deps = raw.get("id"), raw.get("prompt"), raw.get("deps", [])
        if not isinstance(node_id, str) or not node_id.strip():
            self._problem('"id" must be a non-empty string; line skipped')
            return None
        if not isinstance(prompt, str) or not prompt.strip():
            self._problem(f'step {node_id!r}: "prompt" must be a non-empty string; skipped')
            return None
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            self._problem(f'step {node_id!r}: "deps" must be a list of ids; skipped')
            return None
        known = {n.id for n in self.nodes}
        if node_id in known:
            self._problem(f"step {node_id!r} repeats an earlier id; skipped")
            return None
        unknown = [d for d in deps if d not in known]
        if unknown:
            self._problem(
                f"step {node_id!r} depends on {', '.join(map(repr, unknown))}, which no earlier "
                "line declared (or which were skipped); skipped"
            )
            return None
        high = raw.get("high_stakes")
        try:
            node = llm_node(
                node_id,
                prompt,
                dict.fromkeys(deps),
                criticality=raw.get("criticality", Criticality.SIMPLE),
                high_stakes=high if isinstance(high, bool) else None,
            )
        except ConfigError as exc:
            self._problem(f"{exc.message} Line skipped.")
            return None
        extra = sorted(set(raw) - _FIELDS)
        if extra:
            self._problem(f"step {node_id!r}: ignored unknown field(s) {', '.join(extra)}")
        self.nodes.append(node)
        return node


def parse_plan(text: str, *, strict: bool = False) -> tuple[list[Node], list[str]]:
    """All nodes of a JSON Lines plan, and its problems; ``strict`` raises ConfigError on any
    problem instead (for plans written by a person)."""
    parser = PlanParser()
    nodes = parser.feed(text) + parser.close()
    if strict and parser.problems:
        raise ConfigError(
            f"The plan has {len(parser.problems)} problem(s): {'; '.join(parser.problems)}. "
            'Write one JSON object per line: {"id": ..., "prompt": ..., "deps": [...]}.'
        )
    return nodes, parser.problems


def plan_to_jsonl(graph: TaskGraph | Sequence[Node]) -> str:
    """The JSON Lines plan of a graph of LLM nodes (in topological order)."""
    if not isinstance(graph, TaskGraph):
        graph = TaskGraph(graph)
    lines = []
    for layer in graph.layers:
        for node_id in layer:
            node = graph[node_id]
            entry: dict[str, Any] = {"id": node.id, "prompt": node.prompt, "deps": list(node.deps)}
            if node.criticality is not Criticality.SIMPLE:
                entry["criticality"] = node.criticality.value
            if node.high_stakes is not None:
                entry["high_stakes"] = node.high_stakes
            lines.append(json.dumps(entry, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def plan_messages(task: str) -> list[Message]:
    return [
        {"role": "system", "content": PLANNER_SYSTEM},
        {"role": "user", "content": f"Task: {task}"},
    ]


def compose_messages(task: str, results: Mapping[str, NodeResult]) -> list[Message]:
    shown = []
    for node_id, result in results.items():
        if result.ok:
            shown.append(f"[{node_id}] {result.text.strip()}")
        else:
            shown.append(f"[{node_id}] ({result.status}: {result.error})")
    body = f"Task: {task}\n\nStep outputs:\n" + "\n".join(shown) + "\n\nWrite the final answer."
    return [{"role": "system", "content": COMPOSER_SYSTEM}, {"role": "user", "content": body}]


@dataclass(frozen=True)
class PlanRun:
    """A plan-and-execute run: the plan (text, problems), ``speculative``: the nodes that
    started before the plan had finished (speculative decomposition), the fabric's result, the answer and the run's figures
    (planner and composer included in inferences, rounds and wall time)."""

    task: str
    plan_text: str
    problems: tuple[str, ...]
    speculative: tuple[str, ...]
    fabric: FabricResult
    planner: Completion
    composer: Completion
    figures: PEFFigures

    @property
    def answer(self) -> str:
        return self.composer.content or ""

    @property
    def ok(self) -> bool:
        return self.fabric.ok


async def plan_and_execute(
    engine: Engine,
    task: str,
    *,
    toolset: Toolset | None = None,
    config: FabricConfig | None = None,
    plan: str | None = None,
    planner_settings: GenerationSettings | None = None,
    composer_settings: GenerationSettings | None = None,
    speculative: bool = True,
) -> PlanRun:
    """Decompose ``task``, run the plan on the fabric, compose the answer (module docstring).

    ``plan`` forces the planner's output to that text (the gold-plan policy: the engine still
    prefills and decodes every token of it, as with the loop's gold calls). ``speculative``
    streams the plan and starts nodes as their lines complete when the engine can stream.
    """
    fabric = Fabric(engine, toolset=toolset, config=config)
    base = fabric.config.settings
    settings = planner_settings or replace(base, max_tokens=max(base.max_tokens, 512))
    if plan is not None:
        settings = replace(settings, forced=(), forced_answer=plan)
    parser = PlanParser()
    started = time.monotonic()
    plan_done = started
    async with fabric.open() as run:
        messages = plan_messages(task)
        streamer = getattr(engine, "stream", None) if speculative else None
        if streamer is not None:
            chunks: list[str] = []
            final: Completion | None = None
            async with contextlib.aclosing(streamer(messages, [], settings)) as deltas:
                async for delta in deltas:
                    if isinstance(delta, Completion):
                        final = delta
                        continue
                    chunks.append(delta)
                    for node in parser.feed(delta):
                        run.add(node, after_round=0, speculative=True)
            plan_done = time.monotonic()
            planner = final or Completion("".join(chunks))
            late = parser.close()
        else:
            planner = await engine.generate(messages, [], settings)
            plan_done = time.monotonic()
            late = parser.feed(planner.content or "") + parser.close()
        run.record("planner", 1, planner.usage)
        for node in late:
            run.add(node, after_round=1)
        if not parser.nodes:
            parser.problems.append("the plan had no usable step; the task ran as one step")
            run.add(llm_node("T1", task), after_round=1)
    result = run.result
    assert result is not None
    compose_round = 1 + max((i.round for i in run.inferences), default=0)
    composer = await engine.generate(
        compose_messages(task, result.nodes), [], composer_settings or base
    )
    run.record("composer", compose_round, composer.usage)
    figures = run.figures(wall_clock_ms=(time.monotonic() - started) * 1000)
    early = tuple(n for n, r in result.nodes.items() if 0 < r.started < plan_done)
    _log.info(
        "fabric.plan_run",
        nodes=len(result.nodes),
        failed=list(result.failed),
        problems=len(parser.problems),
        speculative=list(early),
        inferences=figures.inferences,
        rounds=figures.rounds,
        **figures.headers(),
    )
    return PlanRun(
        task,
        planner.content or "",
        tuple(parser.problems),
        early,
        result,
        planner,
        composer,
        figures,
    )
