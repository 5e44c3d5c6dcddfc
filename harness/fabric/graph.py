"""The task graph of the parallel execution fabric: nodes, criticality and topological layers.

A :class:`TaskGraph` is a DAG of :class:`Node` values. A node is one of three kinds:

- ``llm``: one generation (a prompt, plus the outputs of the nodes it depends on);
- ``tool``: one tool call, run by :func:`harness.tools.execute.execute_call` (errors are data);
- ``verify``: a deterministic check over the outputs of the nodes it depends on (no model).

Its **layers** are a report of its structure: layer 0 holds the nodes without dependencies and
a node sits one layer below its deepest dependency, so the depth is the longest path (in
nodes). The executor (:mod:`harness.fabric.executor`) does not run layer by layer: it starts
each node the moment its own inputs are ready.

A graph is validated when built: duplicate ids, unknown or self dependencies and cycles raise
:class:`~harness.errors.ConfigError` naming the nodes involved.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.errors import ConfigError
from harness.fabric.consensus import Comparator
from harness.fabric.result import NodeKind, NodeResult
from harness.fabric.verify import Verdict, Verifier
from harness.messages import Message

__all__ = (
    "Criticality",
    "InputsCheck",
    "Node",
    "TaskGraph",
    "llm_node",
    "tool_node",
    "verify_node",
)

#: The outputs a node consumes, by dependency id.
Inputs = Mapping[str, NodeResult]
#: A verify node's check over its inputs: a verdict or a bool, sync or async.
InputsCheck = Callable[[Inputs], Verdict | bool | Awaitable[Verdict | bool]]
#: Builds an LLM node's chat from its inputs (replaces the default rendering).
MessagesFn = Callable[[Inputs], Sequence[Message]]
#: Builds a tool node's arguments from its inputs.
ArgumentsFn = Callable[[Inputs], Mapping[str, Any]]


class Criticality(enum.StrEnum):
    """How much a micro-task's correctness matters (CRP-SPEC-020/021); gates extra passes."""

    TRIVIAL = "trivial"
    SIMPLE = "simple"
    MODERATE = "moderate"
    CRITICAL = "critical"

    @classmethod
    def parse(cls, value: str | Criticality, *, node: str | None = None) -> Criticality:
        """``"MODERATE"``, ``"moderate"`` or the member itself; anything else is a ConfigError."""
        if isinstance(value, Criticality):
            return value
        try:
            return cls(str(value).strip().casefold())
        except ValueError:
            where = f" of node {node!r}" if node else ""
            choices = ", ".join(c.value for c in cls)
            raise ConfigError(
                f"Unknown criticality {value!r}{where}; use one of {choices}."
            ) from None


@dataclass(frozen=True)
class Node:
    """One micro-task. Build with :func:`llm_node`, :func:`tool_node` or :func:`verify_node`.

    ``deps``: ids of the nodes whose outputs this one consumes (it starts when all of them are
    done and verified). ``criticality`` and ``high_stakes`` gate consensus for LLM nodes
    (:mod:`harness.fabric.gating`); ``high_stakes=None`` asks the gating policy.
    ``verifiers`` check this node's own output off the critical path; a rejection triggers
    the repair policy. ``same`` is this node's consensus comparator (when its answers need
    their own notion of agreement, e.g. the integer a reply names); default: the gating
    policy's. ``max_tokens`` overrides the run's generation budget for this node;
    ``timeout_s`` bounds the node's whole run (every attempt, its verification and repairs;
    default: ``FabricConfig.node_timeout_s``): past it the node fails and its requests are
    cancelled.
    """

    id: str
    kind: NodeKind = "llm"
    deps: tuple[str, ...] = ()
    prompt: str = ""
    system: str | None = None
    messages: MessagesFn | None = field(default=None, compare=False)
    tool: str | None = None
    arguments: Mapping[str, Any] | ArgumentsFn = field(default_factory=dict, compare=False)
    check: InputsCheck | None = field(default=None, compare=False)
    criticality: Criticality = Criticality.SIMPLE
    high_stakes: bool | None = None
    verifiers: tuple[Verifier, ...] = field(default=(), compare=False)
    max_tokens: int | None = None
    timeout_s: float | None = None
    same: Comparator | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise ConfigError(f"A node id must be a non-empty string, got {self.id!r}.")
        object.__setattr__(self, "deps", tuple(self.deps))
        object.__setattr__(self, "verifiers", tuple(self.verifiers))
        object.__setattr__(self, "criticality", Criticality.parse(self.criticality, node=self.id))
        if self.kind == "llm" and not self.prompt and self.messages is None:
            raise ConfigError(f"LLM node {self.id!r} has neither a prompt nor a messages builder.")
        if self.kind == "tool" and not self.tool:
            raise ConfigError(f"Tool node {self.id!r} names no tool; pass tool='name'.")
        if self.kind == "verify" and self.check is None:
            raise ConfigError(f"Verify node {self.id!r} has no check; pass check=fn.")
        if self.kind not in ("llm", "tool", "verify"):
            raise ConfigError(
                f"Node {self.id!r} has kind {self.kind!r}; use 'llm', 'tool' or 'verify'."
            )
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError(f"Node {self.id!r} has max_tokens {self.max_tokens}; use 1 or more.")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ConfigError(
                f"Node {self.id!r} has timeout_s {self.timeout_s}; use a positive number of "
                "seconds (or None for no timeout)."
            )


def llm_node(
    id: str,
    prompt: str,
    deps: Iterable[str] = (),
    *,
    criticality: Criticality | str = Criticality.SIMPLE,
    high_stakes: bool | None = None,
    verifiers: Iterable[Verifier] = (),
    system: str | None = None,
    messages: MessagesFn | None = None,
    max_tokens: int | None = None,
    timeout_s: float | None = None,
    same: Comparator | None = None,
) -> Node:
    """One generation: ``prompt`` plus the outputs of ``deps``; ``same``: its consensus
    comparator (default: the gating policy's)."""
    return Node(
        id,
        "llm",
        tuple(deps),
        prompt,
        system,
        messages,
        criticality=Criticality.parse(criticality, node=id),
        high_stakes=high_stakes,
        verifiers=tuple(verifiers),
        max_tokens=max_tokens,
        timeout_s=timeout_s,
        same=same,
    )


def tool_node(
    id: str,
    tool: str,
    arguments: Mapping[str, Any] | ArgumentsFn | None = None,
    deps: Iterable[str] = (),
    *,
    verifiers: Iterable[Verifier] = (),
    timeout_s: float | None = None,
) -> Node:
    """One tool call; ``arguments`` is a mapping or a function of the inputs."""
    return Node(
        id,
        "tool",
        tuple(deps),
        tool=tool,
        arguments=arguments if arguments is not None else {},
        verifiers=tuple(verifiers),
        timeout_s=timeout_s,
    )


def verify_node(
    id: str, check: InputsCheck, deps: Iterable[str], *, timeout_s: float | None = None
) -> Node:
    """A deterministic check over the outputs of ``deps`` (fails the node when it rejects)."""
    return Node(id, "verify", tuple(deps), check=check, timeout_s=timeout_s)


#: How many nodes of a cycle its error message names (then the cycle's length).
_CYCLE_SHOWN = 8


class TaskGraph:
    """A validated DAG of nodes, in the order given (see the module docstring)."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        ordered = list(nodes)
        self._nodes: dict[str, Node] = {}
        counts = collections.Counter(n.id for n in ordered)
        duplicates = sorted(nid for nid, count in counts.items() if count > 1)
        if duplicates:
            raise ConfigError(
                f"The task graph has {len(duplicates)} duplicate node id(s): "
                f"{', '.join(map(repr, duplicates))}; give every node its own id."
            )
        self._nodes = {n.id: n for n in ordered}
        self._check_deps()
        self._layers = self._layer()
        self._layer_of = {nid: i for i, layer in enumerate(self._layers) for nid in layer}
        dependants: dict[str, list[str]] = {nid: [] for nid in self._nodes}
        for node in ordered:
            for dep in dict.fromkeys(node.deps):
                dependants[dep].append(node.id)
        self._dependants = {k: tuple(v) for k, v in dependants.items()}

    def _check_deps(self) -> None:
        unknown = [
            f"{n.id!r} -> {d!r}"
            for n in self._nodes.values()
            for d in n.deps
            if d not in self._nodes
        ]
        if unknown:
            raise ConfigError(
                f"The task graph has {len(unknown)} dependency(ies) on unknown nodes: "
                f"{', '.join(unknown)}; add those nodes or fix the ids."
            )
        selfish = [n.id for n in self._nodes.values() if n.id in n.deps]
        if selfish:
            raise ConfigError(
                f"Node(s) {', '.join(map(repr, selfish))} depend on themselves; remove the "
                "self-dependency."
            )

    def _layer(self) -> tuple[tuple[str, ...], ...]:
        """Kahn's algorithm with the longest-path layer of each node."""
        remaining = {nid: len(set(n.deps)) for nid, n in self._nodes.items()}
        users: dict[str, list[str]] = {nid: [] for nid in self._nodes}
        for n in self._nodes.values():
            for dep in set(n.deps):
                users[dep].append(n.id)
        layer = dict.fromkeys(self._nodes, 0)
        frontier = [nid for nid, count in remaining.items() if count == 0]
        ordered = len(frontier)
        while frontier:
            nxt = []
            for nid in frontier:
                for user in users[nid]:
                    remaining[user] -= 1
                    layer[user] = max(layer[user], layer[nid] + 1)
                    if remaining[user] == 0:
                        nxt.append(user)
            ordered += len(nxt)
            frontier = nxt
        if ordered < len(self._nodes):
            cycle = self._find_cycle({nid for nid, count in remaining.items() if count})
            nodes = cycle[:-1]
            shown = " -> ".join(map(repr, nodes[:_CYCLE_SHOWN]))
            if len(nodes) > _CYCLE_SHOWN:
                shown += f" -> ... ({len(nodes) - _CYCLE_SHOWN} more)"
            shown += f" -> {cycle[-1]!r}"
            raise ConfigError(
                f"The task graph has a cycle of {len(nodes)} node(s): {shown}; a node "
                "cannot depend, directly or through others, on itself. Remove one of those "
                "dependencies."
            )
        grouped: list[list[str]] = [[] for _ in range(1 + max(layer.values(), default=-1))]
        for nid in self._nodes:
            grouped[layer[nid]].append(nid)
        return tuple(map(tuple, grouped))

    def _find_cycle(self, stuck: set[str]) -> list[str]:
        """A cycle among the nodes Kahn's algorithm could not order (every one has a stuck dep),
        from its first node in graph order back to it; linear in the graph's size."""
        start = next(nid for nid in self._nodes if nid in stuck)
        path: list[str] = []
        seen: dict[str, int] = {}
        nid = start
        while nid not in seen:
            seen[nid] = len(path)
            path.append(nid)
            nid = next(d for d in self._nodes[nid].deps if d in stuck)
        return [*path[seen[nid] :], nid]

    # ------------------------------------------------------------------ views

    def __iter__(self) -> Iterator[Node]:
        return iter(self._nodes.values())

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __getitem__(self, node_id: str) -> Node:
        return self._nodes[node_id]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._nodes)

    @property
    def layers(self) -> tuple[tuple[str, ...], ...]:
        """Node ids per topological layer (longest-path layering), in graph order."""
        return self._layers

    @property
    def depth(self) -> int:
        """The number of layers: the longest dependency chain, in nodes."""
        return len(self._layers)

    def layer_of(self, node_id: str) -> int:
        return self._layer_of[node_id]

    def dependants(self, node_id: str) -> tuple[str, ...]:
        """The nodes that consume ``node_id``'s output directly."""
        return self._dependants[node_id]

    def __repr__(self) -> str:
        shape = "/".join(str(len(layer)) for layer in self._layers)
        return f"TaskGraph({len(self)} nodes, depth {self.depth}, layers {shape})"
