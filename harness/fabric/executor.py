"""The fabric's executor: start every node the moment its own inputs are ready.

**Dispatch.** One dispatcher task keeps the nodes not yet started. Whenever something changes
(a node released or failed, a node added), it starts *every* node whose dependencies have all
been released, in one pass (a :class:`~harness.fabric.result.Wave`), each in its own task of
the run's task group. LLM requests of one wave therefore reach the engine in the same
scheduling round and a batching engine runs them as one batch; a node never waits for a
sibling it does not consume, nor for the rest of its layer (layers are only a report).

**Verification off the critical path.** A node's output is first *produced*, then its
verifiers run in the node's own task. Nodes that do not consume it are dispatched regardless.
Nodes that consume it (``deps`` names it) wait until every verifier has passed and the output
is *released*: an unverified output never flows downstream.

**Repair.** A rejected output (a verifier said no, or a tool call returned an error result)
is re-run with the rejection reasons appended to the prompt, up to ``RepairPolicy.max_repairs``
times; with ``escalate`` a MODERATE node that ran once is re-run as an N=3 consensus (never a
TRIVIAL or SIMPLE one). Tool nodes are re-run only when their tool is read-only or
idempotent; verify nodes are not re-run (attach the check to the node as a verifier to get
repairs). When the budget is spent the node *fails* with :class:`~harness.errors.NodeFailed`
and its consumers are *skipped*; the run still finishes every independent node.

**Tools.** A tool node runs through :func:`harness.calls.execute_call` (every failure is an
error result, never a sibling's cancellation) and, like a certified window, only beside tool
calls it commutes with (D1, :func:`harness.certify.check_d1`): a call that conflicts with a
running one waits for it.

**Naive mode** (``FabricConfig.naive``): one node at a time in topological order, consensus
samples one after another: the sequential baseline the figures compare against (every
inference is then its own round).

``EngineDeadError`` (and any bug) ends the run: it propagates out of :meth:`Fabric.run`.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from functools import partial

import anyio
from anyio.abc import TaskGroup

from harness._logging import get_logger
from harness.calls import ToolResult, execute_call
from harness.engines.base import Completion, Engine, GenerationSettings, Message, ToolCall, Usage
from harness.engines.batch import gather, sample_batch
from harness.errors import ConfigError, EngineRequestError, HarnessError, NodeFailed
from harness.fabric._isolation import Isolation
from harness.fabric.consensus import (
    Vote,
    completion_text,
    consensus_settings,
    vote,
)
from harness.fabric.figures import NaiveBaseline, PEFFigures
from harness.fabric.gating import Gate, GatingPolicy
from harness.fabric.graph import Node, TaskGraph
from harness.fabric.result import FabricResult, NodeResult, Wave
from harness.fabric.verify import Verdict, run_verifier
from harness.tools import Toolset

__all__ = (
    "DEFAULT_SYSTEM",
    "Execution",
    "Fabric",
    "FabricConfig",
    "Inference",
    "RepairPolicy",
    "render_messages",
)

_log = get_logger("harness.fabric")

DEFAULT_SYSTEM = (
    "You are one step of a larger task. Do only the step you are given, using the outputs of "
    "earlier steps when they are shown, and answer briefly."
)


@dataclass(frozen=True)
class RepairPolicy:
    """What a rejected output gets: up to ``max_repairs`` re-runs (0 = surface at once).
    A single-pass re-run samples at ``temperature`` (a fresh seed per attempt) so it can
    differ; ``escalate`` re-runs a MODERATE node as a batched N=3 consensus."""

    max_repairs: int = 2
    escalate: bool = True
    temperature: float = 0.7

    def __post_init__(self) -> None:
        if self.max_repairs < 0:
            raise ConfigError(
                f"RepairPolicy.max_repairs is {self.max_repairs}; use 0 (no repair) or more."
            )


@dataclass(frozen=True)
class FabricConfig:
    """How a fabric run generates, gates, repairs and accounts.

    ``settings``: the base generation settings of every LLM node (``constrain`` off: nodes
    answer in free text). ``system``: the system prompt of nodes that set none.
    ``model_params`` / ``baseline``: for the compute figure (:mod:`harness.fabric.figures`).
    """

    settings: GenerationSettings = field(
        default_factory=lambda: GenerationSettings(max_tokens=256, constrain=False)
    )
    gating: GatingPolicy = field(default_factory=GatingPolicy)
    repair: RepairPolicy = field(default_factory=RepairPolicy)
    naive: bool = False
    system: str = DEFAULT_SYSTEM
    model_params: float | None = None
    baseline: NaiveBaseline = field(default_factory=NaiveBaseline)


@dataclass(frozen=True)
class Inference:
    """One engine request as the figures count it: who made it, its round, its tokens."""

    node: str
    round: int
    usage: Usage


def render_messages(
    node: Node,
    inputs: Mapping[str, NodeResult],
    *,
    system: str = DEFAULT_SYSTEM,
    feedback: Sequence[str] = (),
) -> list[Message]:
    """The chat an LLM node sends: its system prompt, then its prompt followed by the outputs
    of its dependencies (``[id] text``, in ``deps`` order) and, on a repair, why the last
    answer was rejected. ``node.messages`` replaces all but the feedback."""
    note = (
        "\n\nAn earlier answer to this step was rejected: "
        + "; ".join(feedback)
        + ". Answer the step again."
        if feedback
        else ""
    )
    if node.messages is not None:
        messages = list(node.messages(inputs))
        if note:
            messages.append({"role": "user", "content": note.strip()})
        return messages
    user = node.prompt
    if inputs:
        shown = "\n".join(f"[{dep}] {inputs[dep].text.strip()}" for dep in node.deps)
        user += "\n\nOutputs of the steps this one builds on:\n" + shown
    return [
        {"role": "system", "content": node.system or system},
        {"role": "user", "content": user + note},
    ]


@dataclass
class _Pending:
    node: Node
    after_round: int
    speculative: bool


@dataclass
class _Output:
    """One attempt's output, before verification."""

    text: str = ""
    value: object = None
    mode: str = "single"
    usages: tuple[Usage, ...] = ()
    completion: Completion | None = None
    tool_result: ToolResult | None = None
    vote: Vote | None = None
    verdict: Verdict | None = None  # the execution's own verdict (tool error, verify check)
    error: HarnessError | None = None  # a failure that ends the node at once


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

    async def run(self, graph: TaskGraph | Iterable[Node]) -> FabricResult:
        """Run every node of ``graph``; returns when all are released, failed or skipped."""
        graph = graph if isinstance(graph, TaskGraph) else TaskGraph(graph)
        async with self.open() as execution:
            for layer in graph.layers:
                for node_id in layer:
                    execution.add(graph[node_id])
        assert execution.result is not None
        return execution.result

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Execution]:
        """An :class:`Execution` that accepts nodes while it runs (e.g. from a streamed plan).
        Leaving the block seals it and waits for every node; ``execution.result`` is then set."""
        execution = Execution(self)
        try:
            async with anyio.create_task_group() as tg:
                execution._start(tg)
                yield execution
                execution.seal()
        except BaseExceptionGroup as group:
            raise _first(group) from None
        execution._finish()


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error of a task group (not a cancellation caused by it)."""
    cancelled = anyio.get_cancelled_exc_class()
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first(exc)
        if not isinstance(exc, cancelled):
            return exc
    return group.exceptions[0]


class Execution:
    """One live run of a :class:`Fabric`. Add nodes with :meth:`add` (dependencies first);
    :meth:`seal` says no more are coming. Create it with :meth:`Fabric.open`."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.started = time.monotonic()
        self.result: FabricResult | None = None
        self.inferences: list[Inference] = []
        self._nodes: dict[str, Node] = {}
        self._pending: dict[str, _Pending] = {}
        self._results: dict[str, NodeResult] = {}
        self._running: set[str] = set()
        self._waves: list[Wave] = []
        self._sealed = False
        self._changed = anyio.Event()
        self._group: TaskGroup | None = None
        self._isolation = Isolation(fabric.toolset)

    # ------------------------------------------------------------------ public surface

    def add(self, node: Node, *, after_round: int = 0, speculative: bool = False) -> None:
        """Add ``node``; it starts as soon as its dependencies are released. ``after_round``:
        the round of whatever produced it (a plan: the planner's round, or one less when the
        node comes from a plan still streaming, see :mod:`harness.fabric.figures`);
        ``speculative`` marks such a node in its result and the logs."""
        if self._sealed:
            raise ConfigError(f"Cannot add node {node.id!r}: the execution is sealed.")
        if node.id in self._nodes:
            raise ConfigError(
                f"The task graph has a duplicate node id: {node.id!r}; give every node its own id."
            )
        unknown = [d for d in node.deps if d not in self._nodes]
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
        self._nodes[node.id] = node
        self._pending[node.id] = _Pending(node, after_round, speculative)
        self._changed.set()

    def seal(self) -> None:
        """No more nodes: the run ends when every added node is done."""
        self._sealed = True
        self._changed.set()

    def record(self, node: str, round: int, usage: Usage) -> None:
        """Account an inference made outside the graph (a planner or composer call)."""
        self.inferences.append(Inference(node, round, usage))

    def results(self) -> dict[str, NodeResult]:
        """The nodes finished so far (released, failed or skipped)."""
        return dict(self._results)

    def figures(self, *, wall_clock_ms: float | None = None) -> PEFFigures:
        """The PEF figures over the nodes added and the inferences recorded so far."""
        graph = TaskGraph(self._nodes.values())
        config = self.fabric.config
        wall = (time.monotonic() - self.started) * 1000 if wall_clock_ms is None else wall_clock_ms
        return PEFFigures(
            depth=graph.depth,
            total=len(graph),
            inferences=len(self.inferences),
            rounds=max((i.round for i in self.inferences), default=0),
            wall_clock_ms=wall,
            tokens=sum(i.usage.billed_tokens for i in self.inferences),
            model_params=config.model_params,
            baseline=config.baseline,
        )

    # ------------------------------------------------------------------ lifecycle

    def _start(self, group: TaskGroup) -> None:
        self._group = group
        group.start_soon(self._dispatcher)

    def _finish(self) -> None:
        finished = time.monotonic()
        graph = TaskGraph(self._nodes.values())
        figures = self.figures(wall_clock_ms=(finished - self.started) * 1000)
        self.result = FabricResult(
            {nid: self._results[nid] for nid in self._nodes},
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
            inferences=figures.inferences,
            rounds=figures.rounds,
            waves=len(self._waves),
            **figures.headers(),
        )

    async def _dispatcher(self) -> None:
        while True:
            self._changed = anyio.Event()
            self._dispatch_ready()
            if self._sealed and not self._pending and not self._running:
                return
            await self._changed.wait()

    def _dispatch_ready(self) -> None:
        assert self._group is not None
        naive = self.fabric.config.naive
        wave: list[_Pending] = []
        for node_id, pending in list(self._pending.items()):
            if naive and (self._running or wave):
                break
            deps = pending.node.deps
            if any(d not in self._results for d in deps):
                continue
            del self._pending[node_id]
            bad = [d for d in deps if not self._results[d].ok]
            if bad:
                self._skip(pending.node, bad)
                continue
            wave.append(pending)
        if not wave:
            return
        index = len(self._waves)
        self._waves.append(Wave(index, time.monotonic(), tuple(p.node.id for p in wave)))
        for pending in wave:
            self._running.add(pending.node.id)
        for pending in wave:
            self._group.start_soon(self._run_node, pending, index)

    def _skip(self, node: Node, bad: list[str]) -> None:
        why = ", ".join(f"{d!r} ({self._results[d].status})" for d in bad)
        error = NodeFailed(
            f"Node {node.id!r} did not run: input(s) {why} gave no usable output; fix or "
            "repair those first.",
            node=node.id,
        )
        self._results[node.id] = NodeResult(node.id, node.kind, "skipped", error=error)
        _log.debug("fabric.node", node=node.id, status="skipped", inputs=bad)
        self._changed.set()

    # ------------------------------------------------------------------ one node

    async def _run_node(self, pending: _Pending, wave: int) -> None:
        node = pending.node
        inputs = {d: self._results[d] for d in node.deps}
        base = max([pending.after_round, *(r.round for r in inputs.values())])
        result = await self._attempts(node, inputs, base, wave, pending.speculative)
        self._results[node.id] = result
        self._running.discard(node.id)
        self._changed.set()
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
            speculative=pending.speculative,
            ms=round((result.finished - result.started) * 1000, 1),
            error=str(result.error) if result.error else None,
        )

    def _repairable(self, node: Node) -> bool:
        if node.kind == "llm":
            return True
        if node.kind == "tool" and self.fabric.toolset is not None and node.tool:
            tool = self.fabric.toolset.get(node.tool)
            return tool is not None and (tool.effect.read_only or tool.effect.idempotent)
        return False

    async def _attempts(
        self,
        node: Node,
        inputs: Mapping[str, NodeResult],
        base: int,
        wave: int,
        speculative: bool,
    ) -> NodeResult:
        """Produce, verify, repair (bounded); the node's final result."""
        config = self.fabric.config
        gate = config.gating.gate(node)
        limit = 1 + (config.repair.max_repairs if self._repairable(node) else 0)
        started = time.monotonic()
        feedback: list[str] = []
        usage, inferences, round_, attempt = Usage(), 0, base, 0
        while True:
            attempt += 1
            out = await self._produce(node, inputs, gate, feedback, attempt)
            if out.usages:
                round_ = self._account(node.id, round_, out.usages)
                usage = sum(out.usages, usage)
                inferences += len(out.usages)
            produced = time.monotonic()
            result = NodeResult(
                node.id, node.kind, "ok", out.text, out.value, round_, attempt, inferences,
                usage, started, produced, produced, out.mode, wave, speculative, out.vote,
                completion=out.completion, tool_result=out.tool_result,
            )  # fmt: skip
            if out.error is not None:
                return replace(result, status="failed", error=out.error)
            if out.verdict is not None and not out.verdict.passed:
                verdicts: tuple[Verdict, ...] = (out.verdict,)
            else:
                own = (out.verdict,) if out.verdict is not None else ()
                verdicts = own + await self._verify(node, gate, result)
            finished = time.monotonic()
            if all(v.passed for v in verdicts):
                return replace(result, verdicts=verdicts, finished=finished)
            reasons = [v.reason for v in verdicts if not v.passed]
            if attempt >= limit:
                error = NodeFailed(
                    f"Node {node.id!r} was rejected {attempt} time(s); last: "
                    f"{'; '.join(reasons)}. {self._fix_hint(node, limit)}",
                    node=node.id,
                    tool=node.tool,
                )
                return replace(
                    result, status="failed", verdicts=verdicts, finished=finished, error=error
                )
            _log.debug("fabric.repair", node=node.id, attempt=attempt, reasons=reasons)
            feedback = reasons
            gate = config.gating.repair_gate(node, config.repair.escalate)

    def _account(self, node_id: str, round_: int, usages: Sequence[Usage]) -> int:
        """Record an attempt's inferences; returns the node's round after it. Batched: the
        attempt's samples share one round. Naive: each request waited for every earlier one."""
        if not self.fabric.config.naive:
            round_ += 1
            self.inferences.extend(Inference(node_id, round_, u) for u in usages)
            return round_
        for usage in usages:
            round_ = 1 + max([round_, *(i.round for i in self.inferences)])
            self.inferences.append(Inference(node_id, round_, usage))
        return round_

    def _fix_hint(self, node: Node, limit: int) -> str:
        if node.kind == "verify":
            return (
                "Verify nodes are not re-run; attach the check to the node it checks "
                "(verifiers=...) to have that node repaired."
            )
        if node.kind == "tool" and limit == 1:
            return (
                f"Tool {node.tool!r} is neither read-only nor idempotent, so it is not re-run; "
                "fix the call or declare the tool idempotent."
            )
        return (
            f"The repair budget is {limit - 1}; raise RepairPolicy.max_repairs, make the "
            "prompt clearer or relax the verifier."
        )

    async def _verify(self, node: Node, gate: Gate, result: NodeResult) -> tuple[Verdict, ...]:
        """Every verifier of the node (and the gate's mandatory ones), concurrently."""
        verifiers = (*node.verifiers, *gate.verifiers)
        return tuple(await gather([partial(run_verifier, v, result) for v in verifiers]))

    async def _produce(
        self,
        node: Node,
        inputs: Mapping[str, NodeResult],
        gate: Gate,
        feedback: Sequence[str],
        attempt: int,
    ) -> _Output:
        if node.kind == "tool":
            return await self._produce_tool(node, inputs, attempt)
        if node.kind == "verify":
            assert node.check is not None
            verdict = await run_verifier(node.check, inputs)
            return _Output(verdict.reason or "passed", verdict.passed, "verify", verdict=verdict)
        return await self._produce_llm(node, inputs, gate, feedback, attempt)

    async def _produce_llm(
        self,
        node: Node,
        inputs: Mapping[str, NodeResult],
        gate: Gate,
        feedback: Sequence[str],
        attempt: int,
    ) -> _Output:
        config = self.fabric.config
        engine = self.fabric.engine
        messages = render_messages(node, inputs, system=config.system, feedback=feedback)
        settings = config.settings
        if node.max_tokens is not None:
            settings = replace(settings, max_tokens=node.max_tokens)
        seed = (settings.seed or 0) + 100 * (attempt - 1)
        ballot: Vote | None = None
        try:
            if gate.temperatures:
                batch = consensus_settings(replace(settings, seed=seed), gate.temperatures)
                if config.naive:
                    samples = [await engine.generate(messages, [], s) for s in batch]
                else:
                    samples = await sample_batch(engine, messages, [], batch)
                ballot = vote(samples, gate.temperatures, same=config.gating.same)
                winner = samples[ballot.winner]
                usages = tuple(c.usage for c in samples)
            else:
                if attempt > 1:
                    settings = replace(settings, temperature=config.repair.temperature, seed=seed)
                winner = await engine.generate(messages, [], settings)
                usages = (winner.usage,)
        except EngineRequestError as exc:
            return _Output(
                mode=gate.mode,
                error=NodeFailed(
                    f"Node {node.id!r}: the engine request failed on attempt {attempt}: {exc}",
                    node=node.id,
                ),
            )
        text = winner.content if winner.content is not None else completion_text(winner)
        return _Output(text, text, gate.mode, usages, winner, vote=ballot)

    async def _produce_tool(
        self, node: Node, inputs: Mapping[str, NodeResult], attempt: int
    ) -> _Output:
        toolset = self.fabric.toolset
        assert toolset is not None
        assert node.tool is not None
        try:
            arguments = node.arguments(inputs) if callable(node.arguments) else node.arguments
            raw = json.dumps(dict(arguments), sort_keys=True, ensure_ascii=False)
        except Exception as exc:  # the caller's arguments builder is broken: say so, per node
            return _Output(
                mode="tool",
                error=NodeFailed(
                    f"Tool node {node.id!r}: its arguments could not be built "
                    f"({type(exc).__name__}: {exc}); fix the arguments function.",
                    node=node.id,
                    tool=node.tool,
                ),
            )
        call = ToolCall(node.id if attempt == 1 else f"{node.id}#{attempt}", node.tool, raw)
        async with self._isolation.slot(call):
            result = await execute_call(toolset, call)
        verdict = Verdict(False, result.content, "tool") if result.is_error else None
        return _Output(result.content, result.value, "tool", tool_result=result, verdict=verdict)
