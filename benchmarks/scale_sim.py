"""Scale on paper: a seeded discrete-event simulation of many agent loops over many engine
replicas, affine vs round-robin routing, arms S vs F.

Each of ``loops`` loops runs ``tasks`` tasks back to back (:func:`harness.costmodel.routing.
task_turns`: the shape's turns, tool waits between them); each turn is routed by the real
:class:`~harness.engines.router.Router` (same hashing, bounded loads and stickiness as the
HTTP engine; its clock is the simulation's) to one of ``replicas`` replicas, each the queueing
model of :mod:`harness.costmodel.routing` — overhead, ``max_batch`` FIFO slots, one FIFO
prefill lane paying per uncached token, decode per output token — with a prefix cache of
``cache_tokens`` in ``block_tokens`` blocks, LRU, trimmed from conversations' tails (what the
loopback upstream does block by block, here per conversation). Loops start spread over
``stagger_s`` seconds; the figures are measured over the turns that end between the 10 % and
90 % points of the run (warm-up and drain excluded).

Output per configuration: throughput (turns/s, tasks/s), p50/p99 turn latency (request
sent to reply), cache hit rate (cached / prompt tokens), the load balance (busiest replica's
turns over the mean) and the closed-form bound. Same arguments and seed, same table.

Regenerate the committed table (``benchmarks/results/scale/``)::

    python -m benchmarks.scale_sim --out benchmarks/results/scale

(1 → 64 replicas with 1,563 loops per replica, i.e. 1,563 → 100,032 loops; a few minutes).
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
from array import array
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.costmodel.routing import (
    Arm,
    LoopShape,
    ReplicaProfile,
    common_prefix,
    fleet_throughput_bound,
    task_turns,
)
from harness.engines.router import POLICIES, Policy, Router
from harness.errors import ConfigError

__all__ = ("SimConfig", "SimResult", "main", "simulate", "table_markdown")

_ARRIVE, _PREFILLED, _DECODED, _WAKE = 0, 1, 2, 3


@dataclass(frozen=True)
class SimConfig:
    """One simulated configuration."""

    loops: int
    replicas: int
    policy: Policy = "affine"
    arm: Arm = "S"
    tasks: int = 2
    seed: int = 0
    stagger_s: float = 2.0
    load_factor: float = 1.25
    shape: LoopShape = field(default_factory=LoopShape)
    profile: ReplicaProfile = field(default_factory=ReplicaProfile)

    def __post_init__(self) -> None:
        if self.loops < 1 or self.replicas < 1 or self.tasks < 1 or self.stagger_s < 0:
            raise ConfigError(
                "loops, replicas and tasks must be >= 1 and stagger_s >= 0; got "
                f"{self.loops}, {self.replicas}, {self.tasks}, {self.stagger_s}."
            )
        if self.policy not in POLICIES:
            raise ConfigError(f"policy must be one of {', '.join(POLICIES)}, not {self.policy!r}.")


@dataclass(frozen=True)
class SimResult:
    """What one configuration gave (see the module docstring)."""

    loops: int
    replicas: int
    policy: str
    arm: str
    turns: int
    turns_per_s: float
    tasks_per_s: float
    p50_turn_s: float
    p99_turn_s: float
    hit_rate: float
    busiest_over_mean: float
    moves: int
    bound_turns_per_s: float
    sim_seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class _Replica:
    __slots__ = (
        "cache",
        "free_slots",
        "held",
        "lane",
        "lane_busy",
        "shared_seen",
        "slot_queue",
    )

    def __init__(self, max_batch: int) -> None:
        self.free_slots = max_batch
        self.slot_queue: deque[int] = deque()
        self.lane: deque[int] = deque()
        self.lane_busy = False
        # conversation -> [turn index of the prompt held, tokens held (block-aligned)];
        # orphans (an F absorb's rewritten tail) are keyed by negative numbers.
        self.cache: OrderedDict[int, list[int]] = OrderedDict()
        self.held = 0
        self.shared_seen = False


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def simulate(config: SimConfig) -> SimResult:  # noqa: C901 - one event loop, kept whole
    """Run one configuration (deterministic for a given config and seed)."""
    shape, prof = config.shape, config.profile
    turns = task_turns(shape, config.arm)
    n_turns = len(turns)
    sizes = [t.prompt_tokens for t in turns]
    outs = [t.output_tokens for t in turns]
    waits = [t.wait_after_s for t in turns]
    common = [[common_prefix(a.prompt, b.prompt) for b in turns] for a in turns]
    block = prof.block_tokens
    shared = common_prefix(turns[0].prompt[:1], turns[0].prompt)  # system message
    shared = (shared + 1) // block * block  # + the role token of the next (user) message
    capacity = prof.cache_tokens // block * block
    t_pf, t_dec = prof.prefill_ms_per_token / 1000.0, prof.decode_ms_per_token / 1000.0
    overhead = prof.overhead_ms / 1000.0

    now = 0.0
    router = Router(
        [f"sim://replica{i}" for i in range(config.replicas)],
        policy=config.policy,
        load_factor=config.load_factor,
        memory=max(65536, 2 * config.loops),
        clock=lambda: now,
    )
    replicas = [_Replica(prof.max_batch) for _ in range(config.replicas)]
    rng = random.Random(config.seed)

    # Per loop: conversation id, turn index, issue time, chosen replica.
    conv = list(range(config.loops))
    step = [0] * config.loops
    issued = [0.0] * config.loops
    where = [0] * config.loops
    done_tasks = [0] * config.loops
    next_conv = config.loops
    orphan_ids = -1

    ends, lats, prompts, hits = array("d"), array("d"), array("d"), array("d")
    served_by = array("l")
    heap: list[tuple[float, int, int, int]] = []
    seq = 0

    def push(t: float, kind: int, loop: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, seq, kind, loop))
        seq += 1

    def issue(loop: int) -> None:
        issued[loop] = now
        replica = router.acquire(str(conv[loop]))
        where[loop] = replica.index
        push(now + overhead, _ARRIVE, loop)

    def evict(rep: _Replica) -> None:
        while rep.held > capacity and rep.cache:
            key, entry = next(iter(rep.cache.items()))
            floor = shared if key >= 0 else 0
            excess = min(rep.held - capacity, entry[1] - floor)
            excess = -(-excess // block) * block
            entry[1] -= excess
            rep.held -= excess
            if entry[1] <= floor:
                del rep.cache[key]

    def prefill_time(loop: int, rep: _Replica) -> float:
        nonlocal orphan_ids
        j, c = step[loop], conv[loop]
        size = sizes[j]
        entry = rep.cache.get(c)
        if entry is not None:
            seen = min(common[entry[0]][j], entry[1])
        else:
            seen = shared if rep.shared_seen else 0
        cached = max(0, min(seen, size - 1) // block * block)
        prompts.append(size)
        hits.append(cached)
        # Hold the prompt's full blocks; an old tail the prompt rewrote becomes an orphan.
        new_held = size // block * block
        if not rep.shared_seen:
            rep.shared_seen = True
            rep.held += shared
        if entry is not None:
            kept = seen // block * block
            orphan = entry[1] - kept
            rep.held += new_held - entry[1]
            if orphan > 0:
                rep.cache[orphan_ids] = [0, orphan]
                rep.held += orphan
                orphan_ids -= 1
            entry[0], entry[1] = j, new_held
            rep.cache.move_to_end(c)
        else:
            rep.cache[c] = [j, new_held]
            rep.held += new_held - shared
        evict(rep)
        return t_pf * (size - cached)

    def start_lane(rep: _Replica) -> None:
        if rep.lane_busy or not rep.lane:
            return
        loop = rep.lane.popleft()
        rep.lane_busy = True
        push(now + prefill_time(loop, rep), _PREFILLED, loop)

    for loop in range(config.loops):
        push(rng.uniform(0.0, config.stagger_s), _WAKE, loop)

    while heap:
        now, _, kind, loop = heapq.heappop(heap)
        if kind == _WAKE:
            issue(loop)
        elif kind == _ARRIVE:
            rep = replicas[where[loop]]
            if rep.free_slots:
                rep.free_slots -= 1
                rep.lane.append(loop)
                start_lane(rep)
            else:
                rep.slot_queue.append(loop)
        elif kind == _PREFILLED:
            rep = replicas[where[loop]]
            rep.lane_busy = False
            start_lane(rep)
            push(now + t_dec * outs[step[loop]], _DECODED, loop)
        else:  # _DECODED
            rep = replicas[where[loop]]
            if rep.slot_queue:
                rep.lane.append(rep.slot_queue.popleft())
                start_lane(rep)
            else:
                rep.free_slots += 1
            router.release(str(conv[loop]), router.replicas[where[loop]])
            ends.append(now)
            lats.append(now - issued[loop])
            served_by.append(where[loop])
            j = step[loop]
            if j + 1 < n_turns:
                step[loop] = j + 1
            else:
                done_tasks[loop] += 1
                if done_tasks[loop] >= config.tasks:
                    continue
                step[loop] = 0
                conv[loop] = next_conv
                next_conv += 1
            if waits[j] > 0:
                push(now + waits[j], _WAKE, loop)
            else:
                issue(loop)

    total = len(ends)
    order = sorted(ends)
    lo, hi = order[int(0.1 * (total - 1))], order[int(0.9 * (total - 1))]
    span = max(hi - lo, 1e-9)
    picked = [i for i in range(total) if lo < ends[i] <= hi]
    measured_prompt = sum(prompts[i] for i in picked)
    measured_hits = sum(hits[i] for i in picked)
    hit_rate = measured_hits / measured_prompt if measured_prompt else 0.0
    served = [0] * config.replicas
    for i in picked:
        served[served_by[i]] += 1
    bound = fleet_throughput_bound(
        shape,
        config.arm,
        prof,
        loops=config.loops,
        replicas=config.replicas,
        hit=hit_rate,
    )
    turns_per_s = len(picked) / span
    return SimResult(
        loops=config.loops,
        replicas=config.replicas,
        policy=config.policy,
        arm=config.arm,
        turns=total,
        turns_per_s=turns_per_s,
        tasks_per_s=turns_per_s / n_turns,
        p50_turn_s=_percentile([lats[i] for i in picked], 0.50),
        p99_turn_s=_percentile([lats[i] for i in picked], 0.99),
        hit_rate=hit_rate,
        busiest_over_mean=max(served) * len(served) / max(1, sum(served)),
        moves=router.moves,
        bound_turns_per_s=bound.turns_per_s,
        sim_seconds=now,
    )


# ---------------------------------------------------------------------------------------- CLI


def table_markdown(results: Sequence[SimResult]) -> str:
    """The results as a Markdown table, one row per configuration."""
    head = (
        "| replicas | loops | arm | policy | turns/s | tasks/s | p50 turn s | p99 turn s "
        "| hit rate | busiest/mean | bound turns/s |\n"
        "|---:|---:|:-:|:--|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    rows = [
        f"| {r.replicas} | {r.loops:,} | {r.arm} | {r.policy} | {r.turns_per_s:,.1f} "
        f"| {r.tasks_per_s:,.2f} | {r.p50_turn_s:,.2f} | {r.p99_turn_s:,.2f} "
        f"| {r.hit_rate:.1%} | {r.busiest_over_mean:.2f} | {r.bound_turns_per_s:,.1f} |"
        for r in results
    ]
    return head + "\n".join(rows) + "\n"


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale_sim",
        description="Simulate many agent loops over many engine replicas (seeded).",
    )
    parser.add_argument("--replicas", type=_ints, default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument(
        "--loops-per-replica",
        type=int,
        default=1563,
        help="loops = this × replicas (default 1,563: 1 → 64 replicas is 1,563 → 100,032 loops)",
    )
    parser.add_argument("--loops", type=int, default=None, help="a fixed loop count instead")
    parser.add_argument("--policies", default="affine,round_robin")
    parser.add_argument("--arms", default="S,F")
    parser.add_argument("--tasks", type=int, default=2, help="tasks per loop (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write table.md and table.json here")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    for f in fields(ReplicaProfile):
        default = getattr(ReplicaProfile(), f.name)
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(default), default=default)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        profile = ReplicaProfile(**{f.name: getattr(args, f.name) for f in fields(ReplicaProfile)})
        results = []
        for replicas in args.replicas:
            loops = args.loops or args.loops_per_replica * replicas
            for arm in args.arms.split(","):
                for policy in args.policies.split(","):
                    config = SimConfig(
                        loops=loops,
                        replicas=replicas,
                        policy=policy.strip(),
                        arm=arm.strip(),
                        tasks=args.tasks,
                        seed=args.seed,
                        profile=profile,
                    )
                    results.append(simulate(config))
                    print(f"simulated {replicas} × {arm} × {policy}", file=sys.stderr)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    payload = {
        "command": "python -m benchmarks.scale_sim " + " ".join(argv or sys.argv[1:]),
        "profile": profile.to_json(),
        "shape": LoopShape().to_json(),
        "results": [r.to_json() for r in results],
    }
    markdown = table_markdown(results)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "table.json").write_text(json.dumps(payload, indent=2) + "\n")
        (args.out / "table.md").write_text(markdown)
    print(json.dumps(payload, indent=2) if args.json else markdown, end="")
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
