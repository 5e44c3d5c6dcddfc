"""What a fabric run returns: one :class:`NodeResult` per node, the dispatch waves, the figures.

A node ends in one of four states:

- ``ok``: its output passed every verifier and was released to its consumers;
- ``contested``: a consensus vote reached no agreement (no strict majority, or less than the
  policy's declared threshold). Its plurality answer is released, *flagged*: its consumers
  run and are shown why (``note``), and the run is not ``ok``;
- ``failed``: no usable output (the repair budget ran out, its tool call returned an error,
  every engine request failed, its message builder raised, it timed out; ``error`` says which);
- ``skipped``: an input it consumes failed, so it never ran.

Failures are never silent: :attr:`FabricResult.ok` is false and
:meth:`FabricResult.raise_for_failures` raises the first failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.errors import HarnessError, NodeFailed
from harness.fabric.consensus import Vote
from harness.fabric.figures import PEFFigures
from harness.fabric.verify import Verdict
from harness.messages import Completion, Usage
from harness.tools.execute import ToolResult

__all__ = ("FabricResult", "NodeKind", "NodeResult", "NodeStatus", "Wave")

NodeKind = Literal["llm", "tool", "verify"]
NodeStatus = Literal["ok", "contested", "failed", "skipped"]


@dataclass(frozen=True)
class NodeResult:
    """One node's outcome.

    ``text``: the output as text (an LLM node's answer, a tool node's rendered result, a
    verify node's reason); ``value``: the raw output (the answer, the tool's return value,
    the verdict's ``passed``). ``round``: the node's sequential engine round (see
    :mod:`harness.fabric.figures`); ``inferences``: engine requests it made (samples, retries
    and repairs included; ``failed_requests`` of them failed). ``started``/``produced``/
    ``finished`` are ``time.monotonic()`` stamps: dispatch, output ready (before
    verification), released or failed. ``mode``: the gate of its last attempt (``single``,
    ``consensus``, ``consensus+verify``, ``tool``, ``verify``). ``speculative``: the node was
    added from a plan that was still streaming. ``agreement``: the share of the samples
    requested that gave the winning answer (consensus nodes only); ``note``: why a
    ``contested`` output is flagged (its consumers see it).
    """

    id: str
    kind: NodeKind
    status: NodeStatus
    text: str = ""
    value: Any = None
    round: int = 0
    attempts: int = 0
    inferences: int = 0
    usage: Usage = field(default_factory=Usage)
    started: float = 0.0
    produced: float = 0.0
    finished: float = 0.0
    mode: str = "single"
    wave: int | None = None
    speculative: bool = False
    vote: Vote | None = None
    verdicts: tuple[Verdict, ...] = ()
    completion: Completion | None = None
    tool_result: ToolResult | None = None
    error: HarnessError | None = None
    agreement: float | None = None
    note: str = ""
    failed_requests: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def released(self) -> bool:
        """Its output went to its consumers (``ok``, or ``contested`` and flagged)."""
        return self.status in ("ok", "contested")


@dataclass(frozen=True)
class Wave:
    """One pass of the dispatcher: the nodes it found ready together and started at once
    (their LLM requests reach the engine in the same scheduling round, so it batches them)."""

    index: int
    at: float
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class FabricResult:
    """Every node's result (in graph order), the layers, the dispatch waves and the figures."""

    nodes: Mapping[str, NodeResult]
    layers: tuple[tuple[str, ...], ...]
    waves: tuple[Wave, ...]
    figures: PEFFigures
    started: float = 0.0
    finished: float = 0.0

    @property
    def ok(self) -> bool:
        """Every node ``ok``: none failed, none skipped, no vote without agreement."""
        return all(r.ok for r in self.nodes.values())

    @property
    def failed(self) -> tuple[str, ...]:
        """Ids of the nodes that failed or were skipped."""
        return tuple(nid for nid, r in self.nodes.items() if not r.released)

    @property
    def contested(self) -> tuple[str, ...]:
        """Ids of the nodes whose consensus vote reached no agreement (flagged, released)."""
        return tuple(nid for nid, r in self.nodes.items() if r.status == "contested")

    def output(self, node_id: str) -> str:
        """A node's output text (a contested one's flagged plurality answer included); raises
        its error if it failed or was skipped."""
        result = self.nodes[node_id]
        if not result.released:
            raise result.error or NodeFailed(f"Node {node_id!r} did not succeed.", node=node_id)
        return result.text

    def raise_for_failures(self) -> None:
        """Raise the first failed (not skipped) node's error, if any node failed or was
        skipped (contested nodes are not failures: see :attr:`contested`)."""
        bad = [r for r in self.nodes.values() if not r.released]
        if not bad:
            return
        first = next((r for r in bad if r.status == "failed"), bad[0])
        raise first.error or NodeFailed(f"Node {first.id!r} did not succeed.", node=first.id)
