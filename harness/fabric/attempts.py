"""One node's run: produce an output, verify it off the critical path, repair it (bounded).

:class:`NodeRunner` is what the executor (:mod:`harness.fabric.executor`) starts for each
node. Everything that can go wrong with *one* node ends in that node's result, never in the
run: its message or argument builder raising, its gating policy raising, the engine answering
with something that is not a completion or failing a request (each failed request is sent
again up to ``FabricConfig.request_retries`` times, as one more batched round, then counted
as failed), a verifier raising or running past ``verifier_timeout_s``, the node running past
its timeout. Only :class:`~harness.errors.EngineDeadError` (every request would fail) and
bugs in the fabric itself end the run.

**Consensus.** A gated node's N samples go to the engine as one batch
(:func:`~harness._concurrency.gather`, each request :func:`~harness._concurrency.settled`
so one failure neither cancels nor hides its siblings); the vote runs over the samples that came
back, and agrees only with a strict majority of the N requested (a failed sample is a
dissent) or the policy's declared share. Otherwise the node is ``contested``: its plurality
answer is released *flagged*, and :func:`render_messages` shows its consumers why.

**Repair.** A rejected output (a verifier said no, or a tool call returned an error result)
is re-run with the rejection reasons appended to the prompt, up to ``RepairPolicy.max_repairs``
times; with ``escalate`` a MODERATE node that ran once is re-run as an N=3 consensus (never a
TRIVIAL or SIMPLE one). Tool nodes are re-run only when their tool is read-only or
idempotent; verify nodes are not re-run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

import anyio

from harness._concurrency import gather, settled
from harness.engines.base import Engine, GenerationSettings
from harness.errors import EngineDeadError, HarnessError, NodeFailed
from harness.fabric._isolation import Isolation
from harness.fabric.config import NODE_SYSTEM, FabricConfig
from harness.fabric.consensus import Vote, completion_text, consensus_settings, vote
from harness.fabric.gating import SINGLE, Gate
from harness.fabric.graph import Node
from harness.fabric.result import NodeResult, NodeStatus
from harness.fabric.verify import Verdict, run_verifier
from harness.messages import Completion, Message, ToolCall, Usage
from harness.tools.execute import ToolResult, execute_call
from harness.tools.toolset import Toolset

__all__ = ("Account", "NodeRunner", "render_messages")

#: Records one stage of engine requests (sent together; ``None`` = a request that failed)
#: and returns the node's round after it.
Account = Callable[[Sequence[Usage | None]], int]


def render_messages(
    node: Node,
    dependencies: Mapping[str, NodeResult],
    *,
    system: str = NODE_SYSTEM,
    feedback: Sequence[str] = (),
) -> list[Message]:
    """The chat an LLM node sends: its system prompt, then its prompt followed by the outputs
    of its dependencies (``[id] text``, in ``deps`` order; a contested one is shown flagged,
    with why) and, on a repair, why the last answer was rejected. ``node.messages`` replaces
    all but the feedback."""
    note = (
        "\n\nAn earlier answer to this step was rejected: "
        + "; ".join(feedback)
        + ". Answer the step again."
        if feedback
        else ""
    )
    if node.messages is not None:
        messages = list(node.messages(dependencies))
        if note:
            messages.append({"role": "user", "content": note.strip()})
        return messages
    user = node.prompt
    if dependencies:
        shown = "\n".join(_shown(dep, dependencies[dep]) for dep in node.deps)
        user += "\n\nOutputs of the steps this one builds on:\n" + shown
    return [
        {"role": "system", "content": node.system or system},
        {"role": "user", "content": user + note},
    ]


def _shown(dep: str, result: NodeResult) -> str:
    if result.status == "contested":
        return f"[{dep}] (unconfirmed, {result.note}) {result.text.strip()}"
    return f"[{dep}] {result.text.strip()}"


def _failure(outcome: object) -> HarnessError | None:
    """Why one request's outcome is no completion (``None`` when it is one). A dead engine
    ends the run; anything else is the node's problem."""
    if isinstance(outcome, EngineDeadError):
        raise outcome
    if isinstance(outcome, HarnessError):
        return outcome
    if isinstance(outcome, Exception):  # an engine that breaks its contract
        return HarnessError(f"the engine raised {type(outcome).__name__}: {outcome}")
    if not isinstance(outcome, Completion):
        return HarnessError(f"the engine returned {type(outcome).__name__}, not a Completion")
    return None


@dataclass
class _Output:
    """One attempt's output, before verification."""

    text: str = ""
    value: object = None
    mode: str = "single"
    completion: Completion | None = None
    tool_result: ToolResult | None = None
    vote: Vote | None = None
    verdict: Verdict | None = None  # the execution's own verdict (tool error, verify check)
    error: HarnessError | None = None  # a failure that ends the node at once
    agreement: float | None = None  # the winner's share of the samples requested
    note: str = ""  # why the output is contested


class NodeRunner:
    """Runs one node to its result (see the module docstring)."""

    def __init__(
        self,
        node: Node,
        dependencies: Mapping[str, NodeResult],
        *,
        config: FabricConfig,
        engine: Engine,
        toolset: Toolset | None,
        isolation: Isolation,
        account: Account,
        wave: int,
        speculative: bool,
    ) -> None:
        self.node = node
        self.dependencies = dependencies
        self.config = config
        self.engine = engine
        self.toolset = toolset
        self.isolation = isolation
        self.account = account
        self.wave = wave
        self.speculative = speculative
        self.round: int | None = None
        self.usage = Usage()
        self.inferences = 0
        self.failed_requests = 0
        self.attempt = 0
        self.started = 0.0

    # ------------------------------------------------------------------ the node

    async def run(self) -> NodeResult:
        """The node's final result; a timeout fails it (its requests are cancelled)."""
        node = self.node
        self.started = time.monotonic()
        timeout = node.timeout_s if node.timeout_s is not None else self.config.node_timeout_s
        result: NodeResult | None = None
        with anyio.move_on_after(timeout):
            result = await self._attempts()
        if result is not None:
            return result
        now = time.monotonic()
        error = NodeFailed(
            f"Node {node.id!r} timed out after {timeout:g} s (attempt {self.attempt}); raise "
            "its timeout_s (or FabricConfig.node_timeout_s) or make it cheaper.",
            node=node.id,
            tool=node.tool,
        )
        return self._result("failed", _Output(error=error), now, now)

    def _result(
        self, status: NodeStatus, out: _Output, produced: float, finished: float
    ) -> NodeResult:
        return NodeResult(
            self.node.id, self.node.kind, status, out.text, out.value, self.round or 0,
            self.attempt, self.inferences, self.usage, self.started, produced, finished,
            out.mode, self.wave, self.speculative, out.vote, completion=out.completion,
            tool_result=out.tool_result, error=out.error, agreement=out.agreement,
            note=out.note, failed_requests=self.failed_requests,
        )  # fmt: skip

    def _gate(self) -> Gate:
        gate = self.config.gating.gate(self.node)
        if gate.temperatures and not self.config.mechanisms.consensus:
            return replace(SINGLE, verifiers=gate.verifiers)
        return gate

    def _repair_gate(self) -> Gate:
        gate = self.config.gating.repair_gate(self.node, self.config.repair.escalate)
        if gate.temperatures and not self.config.mechanisms.consensus:
            return replace(SINGLE, verifiers=gate.verifiers)
        return gate

    def _repairable(self) -> bool:
        node = self.node
        if node.kind == "llm":
            return True
        if node.kind == "tool" and self.toolset is not None and node.tool:
            tool = self.toolset.get(node.tool)
            return tool is not None and (tool.effect.read_only or tool.effect.idempotent)
        return False

    async def _attempts(self) -> NodeResult:
        """Produce, verify, repair (bounded); the node's final result."""
        node, config = self.node, self.config
        limit = 1 + (config.repair.max_repairs if self._repairable() else 0)
        feedback: list[str] = []
        try:
            gate = self._gate()
        except Exception as exc:  # the caller's high-stakes policy is broken
            error = _builder_error(node, "its gating policy (high_stakes)", exc)
            return self._result("failed", _Output(error=error), self.started, self.started)
        while True:
            self.attempt += 1
            out = await self._produce(gate, feedback)
            produced = time.monotonic()
            if out.error is not None:
                return self._result("failed", replace(out, mode=gate.mode), produced, produced)
            result = self._result("ok", out, produced, produced)
            if out.verdict is not None and not out.verdict.passed:
                verdicts: tuple[Verdict, ...] = (out.verdict,)
            else:
                own = (out.verdict,) if out.verdict is not None else ()
                verdicts = own + await self._verify(gate, result)
            finished = time.monotonic()
            if all(v.passed for v in verdicts):
                status: NodeStatus = "contested" if out.note else "ok"
                return replace(result, status=status, verdicts=verdicts, finished=finished)
            reasons = [v.reason for v in verdicts if not v.passed]
            if self.attempt >= limit:
                error = NodeFailed(
                    f"Node {node.id!r} was rejected {self.attempt} time(s); last: "
                    f"{'; '.join(reasons)}. {self._fix_hint(limit)}",
                    node=node.id,
                    tool=node.tool,
                )
                return replace(
                    result, status="failed", verdicts=verdicts, finished=finished, error=error
                )
            feedback = reasons
            gate = self._repair_gate()

    def _fix_hint(self, limit: int) -> str:
        node = self.node
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

    async def _verify(self, gate: Gate, result: NodeResult) -> tuple[Verdict, ...]:
        """Every verifier of the node, the gate's and the run's, concurrently."""
        config = self.config
        if not config.mechanisms.verification:
            return ()
        extra = config.verifiers if self.node.kind == "llm" else ()
        verifiers = (*self.node.verifiers, *gate.verifiers, *extra)
        if not verifiers:
            return ()
        timeout = config.verifier_timeout_s
        return tuple(
            await gather([partial(run_verifier, v, result, timeout_s=timeout) for v in verifiers])
        )

    # ------------------------------------------------------------------ one attempt

    async def _produce(self, gate: Gate, feedback: Sequence[str]) -> _Output:
        node = self.node
        if node.kind == "tool":
            return await self._produce_tool()
        if node.kind == "verify":
            assert node.check is not None
            verdict = await run_verifier(
                node.check, self.dependencies, timeout_s=self.config.verifier_timeout_s
            )
            return _Output(verdict.reason or "passed", verdict.passed, "verify", verdict=verdict)
        return await self._produce_llm(gate, feedback)

    async def _requests(
        self, messages: Sequence[Message], batch: Sequence[GenerationSettings]
    ) -> tuple[list[Completion | None], HarnessError | None]:
        """Send ``batch`` as one batch; failed requests again (batched) up to the retry
        budget. Every stage is accounted; returns each request's completion (``None`` if it
        failed every time) and the last failure."""
        out: list[Completion | None] = [None] * len(batch)
        last: HarnessError | None = None
        todo = list(range(len(batch)))
        for _ in range(1 + self.config.request_retries):
            thunks = [
                partial(settled, partial(self.engine.generate, messages, [], batch[i]))
                for i in todo
            ]
            # one request needs no task group (a long chain of single passes stays cheap)
            outcomes: list[object] = (
                [await thunks[0]()] if len(thunks) == 1 else await gather(thunks)
            )
            stage: list[Usage | None] = []
            for i, outcome in zip(todo, outcomes, strict=True):
                failure = _failure(outcome)
                if failure is not None:
                    last = failure
                    stage.append(None)
                else:
                    assert isinstance(outcome, Completion)
                    out[i] = outcome
                    stage.append(outcome.usage)
            self._record(stage)
            todo = [i for i in todo if out[i] is None]
            if not todo:
                break
        return out, last

    def _record(self, stage: Sequence[Usage | None]) -> None:
        self.round = self.account(stage)
        self.inferences += len(stage)
        self.failed_requests += sum(1 for u in stage if u is None)
        self.usage = sum((u for u in stage if u is not None), self.usage)

    async def _produce_llm(self, gate: Gate, feedback: Sequence[str]) -> _Output:
        node, config = self.node, self.config
        try:
            messages = render_messages(
                node, self.dependencies, system=config.system, feedback=feedback
            )
        except Exception as exc:  # the caller's message builder is broken: say so, per node
            return _Output(mode=gate.mode, error=_builder_error(node, "its messages builder", exc))
        settings = config.settings
        if node.max_tokens is not None:
            settings = replace(settings, max_tokens=node.max_tokens)
        seed = (settings.seed or 0) + 100 * (self.attempt - 1)
        if gate.temperatures:
            batch = consensus_settings(replace(settings, seed=seed), gate.temperatures)
        elif self.attempt > 1:
            batch = [replace(settings, temperature=config.repair.temperature, seed=seed)]
        else:
            batch = [settings]
        replies, last = await self._requests(messages, batch)
        came = [(i, c) for i, c in enumerate(replies) if c is not None]
        if not came:
            error = NodeFailed(
                f"Node {node.id!r}: all {len(batch)} engine request(s) of attempt "
                f"{self.attempt} failed ({1 + config.request_retries} tries each); last: "
                f"{last}",
                node=node.id,
            )
            return _Output(mode=gate.mode, error=error)
        if not gate.temperatures:
            winner = came[0][1]
            text = winner.content if winner.content is not None else completion_text(winner)
            return _Output(text, text, gate.mode, winner)
        temps = [batch[i].temperature for i, _ in came]
        samples = [c for _, c in came]
        ballot = vote(samples, temps, same=node.same or config.gating.same)
        winner = samples[ballot.winner]
        text = winner.content if winner.content is not None else completion_text(winner)
        note = config.gating.disagreement(ballot, requested=len(batch)) or ""
        share = ballot.support / len(batch)
        return _Output(text, text, gate.mode, winner, vote=ballot, agreement=share, note=note)

    async def _produce_tool(self) -> _Output:
        node, toolset = self.node, self.toolset
        assert toolset is not None
        assert node.tool is not None
        try:
            arguments = (
                node.arguments(self.dependencies) if callable(node.arguments) else node.arguments
            )
            raw = json.dumps(dict(arguments), sort_keys=True, ensure_ascii=False)
        except Exception as exc:  # the caller's arguments builder is broken: say so, per node
            return _Output(mode="tool", error=_builder_error(node, "its arguments builder", exc))
        call_id = node.id if self.attempt == 1 else f"{node.id}#{self.attempt}"
        call = ToolCall(call_id, node.tool, raw)
        async with self.isolation.slot(call):
            result = await execute_call(toolset, call)
        verdict = Verdict(False, result.content, "tool") if result.is_error else None
        return _Output(result.content, result.value, "tool", tool_result=result, verdict=verdict)


def _builder_error(node: Node, what: str, exc: Exception) -> NodeFailed:
    """A caller's function for this node raised: the node fails, naming it and the error."""
    kind = "Tool node" if node.kind == "tool" else "Node"
    return NodeFailed(
        f"{kind} {node.id!r}: {what} raised {type(exc).__name__}: {exc}; fix "
        f"{what.removeprefix('its ')}.",
        node=node.id,
        tool=node.tool,
    )
