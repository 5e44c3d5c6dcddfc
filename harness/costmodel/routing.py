"""The cost model across engine replicas: what one replica can serve, how much of each loop's
prompt a routing policy finds cached, and the throughput a fleet of replicas can reach.

:mod:`harness.costmodel` prices one window on one engine. At scale the questions change: how
many loops can ``R`` replicas carry, and how much of the prefix cache survives the routing
policy? This module answers them in closed form where they have one; the seeded discrete-event
simulation in ``benchmarks/scale_sim.py`` answers the rest (queueing, cache capacity) with the
same :class:`ReplicaProfile` and :class:`LoopShape`, and checks the closed forms.

**Workload.** A loop runs tasks back to back; a task is one conversation: a system prompt
shared by every loop, a task message of its own, then ``windows`` windows of ``n`` tool calls
(``c`` tokens each, results ``r`` tokens) each closed by an absorb turn (``a`` tokens). Arm
**S** appends each call and its result and waits ``L`` for each tool; arm **F** withholds the
results (a marker of ``m`` tokens stands in), dispatches every call at once when emitted
(eager dispatch), waits once, ``L`` after the window's last call, and shows the window verbatim
to the absorb turn — which rewrites the window's tool messages, so the absorb turn's cached
prefix ends at the first marker. Every message costs one token for its role on top of its
content (the loopback upstream counts the same way). :func:`task_turns` lists the turns.

**Replica.** :class:`ReplicaProfile`: a request waits ``overhead`` (serving overhead, not a
shared resource), then for one of ``max_batch`` sequence slots (FIFO), then for the replica's
prefill lane (FIFO, one request at a time) where it pays ``t_pf`` per uncached prompt token,
then decodes its output at ``t_dec`` per token (the inter-token latency, which the batch
shares), then frees its slot. The prefix cache holds ``cache_tokens`` in blocks of
``block_tokens`` (LRU; only whole blocks hit, and the last prompt token is always computed).

**Closed forms** (infinite cache):

* :func:`hit_fraction` — the share of prompt tokens a policy finds cached. Affine routing sends
  every turn of a loop to one replica: turn ``j`` finds turn ``j-1``'s prompt. Round-robin
  over ``R`` replicas sends it to a replica that last served this loop ``k`` turns ago with
  probability ``(1/R)(1-1/R)^(k-1)``, or never (probability ``(1-1/R)^j``; then only the shared
  system prompt hits): ``E[hit_j] = Σ_k (1/R)(1-1/R)^(k-1) C(j, j-k) + (1-1/R)^j C_sys``.
* :func:`fleet_throughput_bound` — the asymptotic bounds of operational analysis: ``C`` loops
  whose turns take at least ``D`` (overhead, prefill, decode) and think ``Z`` (tool waits) per
  turn reach at most ``C / (D + Z)`` turns/s, and ``R`` replicas at most ``R / D_max`` where
  ``D_max`` is the bottleneck demand per turn: the prefill lane ``t_pf × uncached tokens`` or
  the sequence slots, held through prefill and decode: ``(prefill + t_dec × output) /
  max_batch``.
* :func:`f_dividend_at_capacity` — a saturated fleet serves demand, not loops: F's tasks/s
  over S's is the ratio of their bottleneck demand per task.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from harness.errors import ConfigError

__all__ = (
    "Arm",
    "LoopShape",
    "ReplicaProfile",
    "Segment",
    "ThroughputBound",
    "Turn",
    "common_prefix",
    "f_dividend_at_capacity",
    "fleet_throughput_bound",
    "hit_fraction",
    "task_turns",
)

Arm = Literal["S", "F"]


@dataclass(frozen=True, slots=True)
class ReplicaProfile:
    """What one engine replica costs (see the module docstring for the queueing model).

    Defaults: SmolLM2-135M on the in-process CPU vLLM engine of this project's machine kind
    (2 cores; ENGINE-FACTS.md and ``benchmarks/results/full/regime.json``): prefill ~750 tok/s,
    inter-token latency 28 ms at 8 streams, 52 ms overhead per request, a 2 GiB KV cache
    (~93k tokens at 23 KiB per token) in blocks of 16 tokens.
    """

    prefill_ms_per_token: float = 1.33
    decode_ms_per_token: float = 28.0
    overhead_ms: float = 52.0
    max_batch: int = 8
    cache_tokens: int = 93_000
    block_tokens: int = 16

    def __post_init__(self) -> None:
        if self.prefill_ms_per_token < 0 or self.decode_ms_per_token < 0 or self.overhead_ms < 0:
            raise ConfigError(
                "Replica times must be >= 0 ms; got prefill "
                f"{self.prefill_ms_per_token}, decode {self.decode_ms_per_token}, overhead "
                f"{self.overhead_ms}."
            )
        if self.max_batch < 1 or self.block_tokens < 1 or self.cache_tokens < 0:
            raise ConfigError(
                "max_batch and block_tokens must be >= 1 and cache_tokens >= 0; got "
                f"{self.max_batch}, {self.block_tokens}, {self.cache_tokens}."
            )

    def cached(self, common: int, prompt: int) -> int:
        """Tokens served from cache when ``common`` leading tokens of a ``prompt``-token prompt
        are held: whole blocks only, and never the last prompt token."""
        usable = min(common, prompt - 1)
        return max(0, usable // self.block_tokens * self.block_tokens)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class LoopShape:
    """One task's conversation (see the module docstring). Defaults follow the measured
    benchmark regime (``benchmarks/results/full/regime.json``: a 1,163-token prefix, 33-token
    calls, 49-token results, 15-token absorb replies, 0.5 s tools) with the paper's two
    windows of six calls."""

    system_tokens: int = 1000
    task_tokens: int = 160
    windows: int = 2
    calls_per_window: int = 6
    call_tokens: int = 33
    result_tokens: int = 49
    absorb_tokens: int = 15
    marker_tokens: int = 6
    tool_latency_s: float = 0.5

    def __post_init__(self) -> None:
        counts = (self.system_tokens, self.task_tokens, self.call_tokens, self.result_tokens)
        if min(counts) < 1 or self.windows < 1 or self.calls_per_window < 1:
            raise ConfigError(
                "Token counts, windows and calls per window must be >= 1; got "
                f"{counts}, {self.windows}, {self.calls_per_window}."
            )
        if self.absorb_tokens < 1 or self.marker_tokens < 1 or self.tool_latency_s < 0:
            raise ConfigError(
                "absorb_tokens and marker_tokens must be >= 1 and tool_latency_s >= 0; got "
                f"{self.absorb_tokens}, {self.marker_tokens}, {self.tool_latency_s}."
            )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Segment:
    """One message of a prompt: its role, what it says (``key``: equal keys at equal positions
    are equal text) and its tokens (one for the role plus its content)."""

    role: str
    key: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Turn:
    """One generation: the prompt's messages, the tokens it generates, and how long the loop
    waits (tools) before its next turn."""

    prompt: tuple[Segment, ...]
    output_tokens: int
    wait_after_s: float

    @property
    def prompt_tokens(self) -> int:
        return sum(s.tokens for s in self.prompt)


def common_prefix(a: Sequence[Segment], b: Sequence[Segment]) -> int:
    """Leading tokens two prompts share: whole equal messages, plus the role token of the
    first differing message when both have the same role."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x == y:
            n += x.tokens
            continue
        if x.role == y.role:
            n += 1
        break
    return n


def task_turns(shape: LoopShape, arm: Arm) -> list[Turn]:
    """The turns of one task in arm S or F (see the module docstring)."""
    if arm not in ("S", "F"):
        raise ConfigError(f"The scale model covers arms S and F, not {arm!r}.")
    context: list[Segment] = [
        Segment("system", "system", 1 + shape.system_tokens),
        Segment("user", "task", 1 + shape.task_tokens),
    ]
    turns: list[Turn] = []
    n, lat = shape.calls_per_window, shape.tool_latency_s
    for w in range(shape.windows):
        start = len(context)
        for k in range(n):
            wait = lat if arm == "S" or k == n - 1 else 0.0
            turns.append(Turn(tuple(context), shape.call_tokens, wait))
            context.append(Segment("assistant", f"call{w}.{k}", 1 + shape.call_tokens))
            if arm == "S":
                context.append(Segment("tool", f"result{w}.{k}", 1 + shape.result_tokens))
            else:
                context.append(Segment("tool", "marker", 1 + shape.marker_tokens))
        if arm == "F":  # the absorb turn sees the window verbatim: results replace markers
            for k in range(n):
                context[start + 2 * k + 1] = Segment(
                    "tool", f"result{w}.{k}", 1 + shape.result_tokens
                )
        turns.append(Turn(tuple(context), shape.absorb_tokens, 0.0))
        context.append(Segment("assistant", f"absorb{w}", 1 + shape.absorb_tokens))
    return turns


def hit_fraction(
    shape: LoopShape, arm: Arm, profile: ReplicaProfile, *, replicas: int, policy: str
) -> float:
    """The share of prompt tokens found cached with an unbounded cache (closed form; see the
    module docstring). ``policy`` is ``"affine"`` or ``"round_robin"``."""
    if replicas < 1:
        raise ConfigError(f"replicas must be >= 1, got {replicas}.")
    if policy not in ("affine", "round_robin"):
        raise ConfigError(f"policy must be 'affine' or 'round_robin', not {policy!r}.")
    turns = task_turns(shape, arm)
    system = turns[0].prompt[:1]
    q = 1.0 / replicas if policy == "round_robin" else 1.0
    hits = prompt = 0.0
    for j, turn in enumerate(turns):
        size = turn.prompt_tokens
        prompt += size
        cold = profile.cached(common_prefix(system, turn.prompt), size)
        expected = (1.0 - q) ** j * cold
        for k in range(1, j + 1):
            seen = profile.cached(common_prefix(turns[j - k].prompt, turn.prompt), size)
            expected += q * (1.0 - q) ** (k - 1) * seen
        hits += expected
    return hits / prompt


@dataclass(frozen=True, slots=True)
class ThroughputBound:
    """Asymptotic throughput bounds in turns per second (see :func:`fleet_throughput_bound`)."""

    loops_bound: float
    replicas_bound: float
    min_turn_s: float
    think_s: float
    bottleneck: Literal["prefill", "slots"]

    @property
    def turns_per_s(self) -> float:
        return min(self.loops_bound, self.replicas_bound)

    @property
    def saturation_loops(self) -> float:
        """``C*``: the loop count where the two bounds meet (more loops only queue)."""
        return self.replicas_bound * (self.min_turn_s + self.think_s)


def fleet_throughput_bound(
    shape: LoopShape,
    arm: Arm,
    profile: ReplicaProfile,
    *,
    loops: int,
    replicas: int,
    hit: float,
) -> ThroughputBound:
    """``X <= min(C / (D + Z), R / D_max)`` turns/s for ``loops`` loops on ``replicas``
    replicas when a share ``hit`` of prompt tokens is cached (see the module docstring)."""
    if loops < 1 or replicas < 1 or not 0.0 <= hit <= 1.0:
        raise ConfigError(
            f"loops and replicas must be >= 1 and hit in [0, 1]; got {loops}, {replicas}, {hit}."
        )
    turns = task_turns(shape, arm)
    count = len(turns)
    uncached = (1.0 - hit) * sum(t.prompt_tokens for t in turns) / count
    output = sum(t.output_tokens for t in turns) / count
    think = sum(t.wait_after_s for t in turns) / count
    prefill = profile.prefill_ms_per_token / 1000.0 * uncached
    decode = profile.decode_ms_per_token / 1000.0 * output
    minimum = profile.overhead_ms / 1000.0 + prefill + decode
    slot_share = (prefill + decode) / profile.max_batch
    bottleneck: Literal["prefill", "slots"] = "prefill" if prefill >= slot_share else "slots"
    demand = max(prefill, slot_share)
    replicas_bound = math.inf if demand == 0 else replicas / demand
    return ThroughputBound(loops / (minimum + think), replicas_bound, minimum, think, bottleneck)


def f_dividend_at_capacity(
    shape: LoopShape, profile: ReplicaProfile, *, hit_s: float, hit_f: float
) -> float:
    """Tasks per second of F over S in a saturated fleet: S's bottleneck demand per task over
    F's (same turn count, so the replica-side saving is all F buys once tools hide behind
    queueing). ``hit_s`` / ``hit_f``: each arm's cached share of prompt tokens."""
    demands = []
    for arm, hit in (("S", hit_s), ("F", hit_f)):
        turns = task_turns(shape, arm)  # type: ignore[arg-type]
        prefill = profile.prefill_ms_per_token * (1.0 - hit) * sum(t.prompt_tokens for t in turns)
        decode = profile.decode_ms_per_token * sum(t.output_tokens for t in turns)
        demands.append(max(prefill, (prefill + decode) / profile.max_batch))
    return demands[0] / demands[1]
