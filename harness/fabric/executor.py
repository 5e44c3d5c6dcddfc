"""The fabric's executor: start every node the moment its own inputs are ready.

**Dispatch.** The run keeps, for each node not yet started, how many of its dependencies are
still unresolved, and for each node the nodes that consume it. When a node is resolved
(released, contested, failed or skipped) only its consumers are looked at; those with no
unresolved dependency left join the ready queue. One dispatcher task starts *every* ready node
in one pass (a :class:`~harness.fabric.result.Wave`), each in its own task of the run's task
group, so LLM requests of one wave reach the engine in the same scheduling round and a
batching engine runs them as one batch. A node never waits for a sibling it does not consume,
nor for the rest of its layer (layers are only a report). Dispatch costs O(nodes + edges):
a 4,000-deep chain dispatches in milliseconds.

**Verification off the critical path** (:mod:`harness.fabric.attempts`): a node's verifiers
run in its own task once it has produced its output; nodes that do not consume it are
dispatched regardless, nodes that consume it wait until it is released. A node whose input
failed is *skipped*; one whose input is contested runs and is shown why.

**Limits.** At most ``FabricConfig.max_in_flight`` engine requests are in flight at once
(more queue). Each node's run is bounded by its timeout.

**Mechanisms** (:class:`~harness.fabric.config.Mechanisms`): without *layering* one node runs
at a time, in the order added (a topological order); without *batching* one engine request
runs at a time. :meth:`Mechanisms.naive` (neither, and no speculation) is the naive baseline.

**Rounds.** Every engine request is accounted to a *round*, see :mod:`harness.fabric.figures`:
requests sent together (a consensus batch, a retry batch) share one round, one more than the
highest round the node waited for (its inputs' rounds; the planner's while it came from the
plan; with layering off, every node run before it); with batching off each request is its own
round. A node added from a plan that is still streaming shares the planner's round only with
inferences that finished *before the plan did* (what speculation really saved).

``EngineDeadError`` (and any bug in the fabric) ends the run: it propagates out of
:meth:`Fabric.run`.
"""

from __future__ import annotations

import contextlib
import heapq
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace

import anyio
from anyio.abc import TaskGroup

from harness._logging import get_logger
from harness.engines.base import ClosingContext, Engine, GenerationSettings, StreamingEngine
from harness.errors import ConfigError, NodeFailed
from harness.fabric._isolation import Isolation
from harness.fabric.attempts import NodeRunner
from harness.fabric.config import FabricConfig
from harness.fabric.figures import NaiveBaseline, PEFFigures
from harness.fabric.graph import Node, TaskGraph
from harness.fabric.result import FabricResult, NodeResult, Wave
from harness.messages import Completion, Message, ToolSpec, Usage
from harness.tools.toolset import Toolset

__all__ = ("Fabric", "FabricRun", "Inference")

_log = get_logger("harness.fabric")


@dataclass(frozen=True)
class Inference:
    """One engine request as the figures count it: who made it, its round, its tokens
    (``failed``: the request failed; its tokens are unknown and count as 0)."""

    node: str
    round: int
    usage: Usage
    failed: bool = False


class Fabric:
    """Runs task graphs on ``engine`` (and tool nodes on ``toolset``); see the module docstring.

    >>> result = await Fabric(engine).run(graph)        # doctest: +SKIP
    >>> result.figures.headers()["CRP-PEF-Layers"]      # doctest: +SKIP
    '4/14'
    """

    def __init__(
        self,
        engine: Engine,
        *,
        toolset: Toolset | None = None,
        config: FabricConfig | None = None,
    ) -> None:
        self.engine = engine
        self.toolset = toolset
        self.config = config or FabricConfig()

    async def run(
        self, graph: TaskGraph | Iterable[Node], *, baseline: NaiveBaseline | None = None
    ) -> FabricResult:
        """Run every node of ``graph``; returns when all are resolved. ``baseline``: a naive
        pass of the same task, for the compute figure."""
        graph = graph if isinstance(graph, TaskGraph) else TaskGraph(graph)
        async with self.open(baseline=baseline) as run:
            for layer in graph.layers:
                for node_id in layer:
                    run.add(graph[node_id])
        assert run.result is not None
        return run.result

    @asynccontextmanager
    async def open(self, *, baseline: NaiveBaseline | None = None) -> AsyncIterator[FabricRun]:
        """A :class:`FabricRun` that accepts nodes while it runs (e.g. from a streamed plan).
        Leaving the block seals it and waits for every node; ``run.result`` is then set."""
        run = FabricRun(self, baseline=baseline)
        try:
            async with anyio.create_task_group() as tg:
                run._start(tg)
                yield run
                run.seal()
        except BaseExceptionGroup as group:
            raise _first(group) from None
        run._finish()


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error of a task group (not a cancellation caused by it)."""
    cancelled = anyio.get_cancelled_exc_class()
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first(exc)
        if not isinstance(exc, cancelled):
            return exc
    return group.exceptions[0]


class _Limited(ClosingContext):
    """The run's engine: every request (and stream) holds one of ``limiter``'s slots."""

    def __init__(self, engine: Engine, limiter: anyio.CapacityLimiter | None) -> None:
        self.engine = engine
        self.name = engine.name
        self.limiter = limiter

    async def generate(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> Completion:
        if self.limiter is None:
            return await self.engine.generate(messages, tools, settings)
        async with self.limiter:
            return await self.engine.generate(messages, tools, settings)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> AsyncGenerator[str | Completion, None]:
        assert isinstance(self.engine, StreamingEngine)
        if self.limiter is not None:
            await self.limiter.acquire()
        try:
            async with contextlib.aclosing(self.engine.stream(messages, tools, settings)) as items:
                async for item in items:
                    yield item
        finally:
            if self.limiter is not None:
                self.limiter.release()

    async def aclose(self) -> None:
        return None  # the caller owns the engine


@dataclass
class _Entry:
    """A node added to the run: where it came from, and what it still waits for."""

    node: Node
    order: int
    after_round: int
    speculative: bool
    waiting: int = 0
    users: list[str] = field(default_factory=list)
    floor: int = 0  # the highest round of everything that ran before it (layering off)


class FabricRun:
    """One live run of a :class:`Fabric`. Add nodes with :meth:`add` (dependencies first);
    :meth:`seal` says no more are coming. Create it with :meth:`Fabric.open`."""

    def __init__(self, fabric: Fabric, *, baseline: NaiveBaseline | None = None) -> None:
        self.fabric = fabric
        self.baseline = baseline
        config = fabric.config
        self.started = time.monotonic()
        self.result: FabricResult | None = None
        self.inferences: list[Inference] = []
        cap = config.max_in_flight if config.mechanisms.batching else 1
        self.engine = _Limited(
            fabric.engine, anyio.CapacityLimiter(cap) if cap is not None else None
        )
        self._max_round = 0
        self._entries: dict[str, _Entry] = {}
        self._ready: list[tuple[int, str]] = []
        self._results: dict[str, NodeResult] = {}
        self._running = 0
        self._waves: list[Wave] = []
        self._sealed = False
        self._streaming = False
        self._changed = anyio.Event()
        self._group: TaskGroup | None = None
        self._isolation = Isolation(fabric.toolset)
        self._visits = 0  # readiness checks, for the O(nodes + edges) claim

    # ------------------------------------------------------------------ public surface

    def add(self, node: Node, *, after_round: int = 0, speculative: bool = False) -> None:
        """Add ``node``; it starts as soon as its dependencies are released. ``after_round``:
        the round of whatever produced it (a plan: the planner's round). ``speculative``: it
        comes from a plan still streaming (see :meth:`streaming_plan`)."""
        if self._sealed:
            raise ConfigError(f"Cannot add node {node.id!r}: the run is sealed.")
        if node.id in self._entries:
            raise ConfigError(
                f"The task graph has a duplicate node id: {node.id!r}; give every node its own id."
            )
        unknown = [d for d in node.deps if d not in self._entries]
        if unknown:
            raise ConfigError(
                f"Node {node.id!r} depends on unknown node(s) {', '.join(map(repr, unknown))}; "
                "add a node's dependencies before the node (this also rules out cycles)."
            )
        if node.kind == "tool" and self.fabric.toolset is None:
            raise ConfigError(
                f"Tool node {node.id!r} calls {node.tool!r} but the fabric has no toolset; "
                "pass Fabric(engine, toolset=...)."
            )
        entry = _Entry(node, len(self._entries), after_round, speculative)
        self._entries[node.id] = entry
        for dep in dict.fromkeys(node.deps):
            if dep not in self._results:
                self._entries[dep].users.append(node.id)
                entry.waiting += 1
        self._visits += 1
        if entry.waiting == 0:
            heapq.heappush(self._ready, (entry.order, node.id))
        self._changed.set()

    def __contains__(self, node_id: object) -> bool:
        """Whether a node of that id was added."""
        return node_id in self._entries

    def seal(self) -> None:
        """No more nodes: the run ends when every added node is resolved."""
        self._sealed = True
        self._changed.set()

    @contextmanager
    def streaming_plan(self) -> Iterator[None]:
        """While inside, a plan is still being decoded: an inference of a speculative node
        that finishes now shares the planner's round (``after_round - 1``); after, it comes
        after the planner's round."""
        self._streaming = True
        try:
            yield
        finally:
            self._streaming = False

    def record(self, node: str, round: int, usage: Usage) -> None:
        """Account an inference made outside the graph (a planner or composer call)."""
        self.inferences.append(Inference(node, round, usage))
        self._max_round = max(self._max_round, round)

    @property
    def max_round(self) -> int:
        """The highest round accounted so far."""
        return self._max_round

    def results(self) -> dict[str, NodeResult]:
        """The nodes resolved so far (released, contested, failed or skipped)."""
        return dict(self._results)

    def figures(self, *, wall_clock_ms: float | None = None) -> PEFFigures:
        """The PEF figures over the nodes added and the inferences recorded so far."""
        graph = TaskGraph(e.node for e in self._entries.values())
        config = self.fabric.config
        wall = (time.monotonic() - self.started) * 1000 if wall_clock_ms is None else wall_clock_ms
        shares = [r.agreement for r in self._results.values() if r.agreement is not None]
        return PEFFigures(
            depth=graph.depth,
            total=len(graph),
            inferences=len(self.inferences),
            rounds=self._max_round,
            wall_clock_ms=wall,
            tokens=sum(i.usage.billed_tokens for i in self.inferences),
            model_params=config.model_params,
            baseline=self.baseline,
            votes=len(shares),
            agreement=sum(shares) / len(shares) if shares else None,
            contested=sum(1 for r in self._results.values() if r.status == "contested"),
            failed_requests=sum(1 for i in self.inferences if i.failed),
        )

    # ------------------------------------------------------------------ lifecycle

    def _start(self, group: TaskGroup) -> None:
        self._group = group
        group.start_soon(self._dispatcher)

    def _finish(self) -> None:
        finished = time.monotonic()
        graph = TaskGraph(e.node for e in self._entries.values())
        figures = self.figures(wall_clock_ms=(finished - self.started) * 1000)
        self.result = FabricResult(
            {nid: self._results[nid] for nid in self._entries},
            graph.layers,
            tuple(self._waves),
            figures,
            self.started,
            finished,
        )
        _log.info(
            "fabric.run",
            nodes=len(graph),
            failed=list(self.result.failed),
            contested=list(self.result.contested),
            inferences=figures.inferences,
            rounds=figures.rounds,
            waves=len(self._waves),
            **figures.headers(),
        )

    async def _dispatcher(self) -> None:
        while True:
            self._changed = anyio.Event()
            self._dispatch_ready()
            if self._sealed and not self._ready and not self._running:
                if len(self._results) < len(self._entries):  # pragma: no cover - a bug
                    raise RuntimeError("fabric: nodes left unresolved with nothing running")
                return
            await self._changed.wait()

    def _dispatch_ready(self) -> None:
        assert self._group is not None
        layering = self.fabric.config.mechanisms.layering
        wave: list[_Entry] = []
        while self._ready:
            if not layering and (self._running or wave):
                break
            _, node_id = heapq.heappop(self._ready)
            entry = self._entries[node_id]
            bad = [d for d in entry.node.deps if not self._results[d].released]
            if bad:
                self._skip(entry.node, bad)
                continue
            entry.floor = 0 if layering else self._max_round
            wave.append(entry)
        if not wave:
            return
        index = len(self._waves)
        self._waves.append(Wave(index, time.monotonic(), tuple(e.node.id for e in wave)))
        self._running += len(wave)
        for entry in wave:
            self._group.start_soon(self._run_node, entry, index)

    def _resolve(self, node_id: str, result: NodeResult) -> None:
        self._results[node_id] = result
        entry = self._entries[node_id]
        for user in entry.users:
            self._visits += 1
            waiting = self._entries[user]
            waiting.waiting -= 1
            if waiting.waiting == 0:
                heapq.heappush(self._ready, (waiting.order, user))
        entry.users = []
        self._changed.set()

    def _skip(self, node: Node, bad: list[str]) -> None:
        why = ", ".join(f"{d!r} ({self._results[d].status})" for d in bad)
        error = NodeFailed(
            f"Node {node.id!r} did not run: input(s) {why} gave no usable output; fix or "
            "repair those first.",
            node=node.id,
        )
        self._resolve(node.id, NodeResult(node.id, node.kind, "skipped", error=error))
        _log.debug("fabric.node", node=node.id, status="skipped", inputs=bad)

    # ------------------------------------------------------------------ one node

    def _floor(self, entry: _Entry) -> int:
        """The highest round ``entry``'s next requests waited for (see the module docstring)."""
        after = entry.after_round
        if entry.speculative and self._streaming:
            after -= 1
        deps = (self._results[d].round for d in entry.node.deps)
        return max(after, entry.floor, *deps, 0)

    def _account(self, entry: _Entry, base: int | None, stage: Sequence[Usage | None]) -> int:
        """Record one stage of ``entry``'s requests; returns the node's round after it."""
        floor = max(self._floor(entry), base or 0)
        if self.fabric.config.mechanisms.batching:
            rounds = [floor + 1] * len(stage)
        else:  # every request waited for every earlier one
            first = max(self._max_round, floor) + 1
            rounds = list(range(first, first + len(stage)))
        for round_, usage in zip(rounds, stage, strict=True):
            self.inferences.append(
                Inference(entry.node.id, round_, usage or Usage(), usage is None)
            )
        self._max_round = max(self._max_round, *rounds)
        return rounds[-1]

    async def _run_node(self, entry: _Entry, wave: int) -> None:
        node = entry.node
        dependencies = {d: self._results[d] for d in node.deps}
        last: list[int | None] = [None]

        def account(stage: Sequence[Usage | None]) -> int:
            round_ = self._account(entry, last[0], stage)
            last[0] = round_
            return round_

        runner = NodeRunner(
            node,
            dependencies,
            config=self.fabric.config,
            engine=self.engine,
            toolset=self.fabric.toolset,
            isolation=self._isolation,
            account=account,
            wave=wave,
            speculative=entry.speculative,
        )
        result = await runner.run()
        if last[0] is None:  # no inference: a tool or verify node adds no round
            result = replace(result, round=self._floor(entry))
        self._running -= 1
        self._resolve(node.id, result)
        _log.debug(
            "fabric.node",
            node=node.id,
            kind=node.kind,
            status=result.status,
            mode=result.mode,
            round=result.round,
            attempts=result.attempts,
            inferences=result.inferences,
            wave=wave,
            speculative=entry.speculative,
            ms=round((result.finished - result.started) * 1000, 1),
            error=str(result.error) if result.error else None,
            note=result.note or None,
        )
