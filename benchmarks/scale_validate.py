"""Check the scale simulation against what this machine can run: loops through the real router
and HTTP engine to loopback upstreams, measured, next to the simulation's prediction.

It starts ``--upstreams`` scripted upstreams (:mod:`benchmarks.loopback_upstream`, each its own
process on 127.0.0.1), calibrates the HTTP round trip the simulation does not model (the
median excess of idle requests over the upstream's own modelled time, added to the profile's
overhead), then for each policy and arm runs ``--loops`` concurrent loops: each realises the
turns of :func:`harness.costmodel.routing.task_turns` as real chat messages and sends them
through one :class:`~harness.engines.openai_http.OpenAIHTTPEngine` with every upstream as a
base URL (so the :class:`~harness.engines.router.Router` picks the replica), sleeping the tool
waits between turns. Throughput, hit rate (from the upstreams' ``cached_tokens`` reports) and
turn latency are measured over the same 10–90 % window the simulation uses, and the same
configuration is simulated. Upstreams are restarted (cold caches) for every run and stopped at
the end.

    python -m benchmarks.scale_validate --out benchmarks/results/scale

Needs the ``loopback`` extra (Starlette, uvicorn). Takes a few minutes.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import anyio
import httpx

from benchmarks.scale_sim import SimConfig, SimResult, simulate
from harness.costmodel.routing import Arm, LoopShape, ReplicaProfile, Segment, task_turns
from harness.engines.base import GenerationSettings
from harness.engines.openai_http import OpenAIHTTPEngine
from harness.engines.router import Policy
from harness.messages import Message

__all__ = ("Measured", "Upstreams", "main", "measure", "segment_message", "start_upstreams")

#: The profile the validation runs on: a few minutes a run, slow enough that the loopback
#: HTTP round trip and the client's own CPU time (a few ms a request on a busy 2-core machine)
#: stay small next to a turn; a cache that holds every loop's conversation under affine
#: routing over 2 replicas but not under round-robin.
VALIDATION_PROFILE = ReplicaProfile(
    prefill_ms_per_token=1.0,
    decode_ms_per_token=20.0,
    overhead_ms=20.0,
    max_batch=8,
    cache_tokens=64_000,
    block_tokens=16,
)


@dataclass(frozen=True)
class Measured:
    """One loopback run, measured like :class:`~benchmarks.scale_sim.SimResult`."""

    policy: str
    arm: str
    turns: int
    turns_per_s: float
    p50_turn_s: float
    p99_turn_s: float
    hit_rate: float
    all_turns_hit_rate: float
    upstream_hit_rate: float
    served: list[int]
    moves: int


def segment_message(segment: Segment, conversation: int) -> Message:
    """The chat message that realises ``segment`` (one token for the role, then words)."""
    words = segment.tokens - 1
    if segment.role == "system":
        text = " ".join(f"s{i}" for i in range(words))
    elif segment.role == "user":
        text = " ".join(f"u{conversation}.{i}" for i in range(words))
    elif segment.role == "assistant":  # what the upstream generated: its filler words
        text = " ".join(f"w{i}" for i in range(words))
    elif segment.key == "marker":
        text = " ".join("withheld" for _ in range(words))
    else:
        text = " ".join(f"{segment.key}.{i}" for i in range(words))
    return {"role": segment.role, "content": text}


@dataclass(frozen=True)
class Upstreams:
    """Running loopback upstreams: their base URLs and processes, in the same order."""

    urls: list[str]
    processes: list[subprocess.Popen[str]]


@contextmanager
def start_upstreams(count: int, profile: ReplicaProfile) -> Iterator[Upstreams]:
    """Start ``count`` loopback upstreams; yield them; stop them on exit."""
    flags = [
        arg
        for f in fields(ReplicaProfile)
        for arg in (f"--{f.name.replace('_', '-')}", str(getattr(profile, f.name)))
    ]
    procs: list[subprocess.Popen[str]] = []
    try:
        urls = []
        for _ in range(count):
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.loopback_upstream",
                    "--port",
                    "0",
                    *flags,
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            procs.append(proc)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(
                    f"A loopback upstream exited with code {proc.wait()} before listening; "
                    "is the loopback extra installed (starlette, uvicorn)?"
                )
            urls.append(json.loads(line)["url"])
        yield Upstreams(urls, procs)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


async def _calibrate(urls: Sequence[str], profile: ReplicaProfile, rounds: int = 20) -> float:
    """Median seconds an idle request takes beyond the upstream's modelled time."""
    modelled = (profile.overhead_ms + 2 * profile.prefill_ms_per_token) / 1000.0
    modelled += profile.decode_ms_per_token / 1000.0
    excess = []
    async with OpenAIHTTPEngine(urls[0], "loopback") as engine:
        for i in range(rounds):
            started = time.perf_counter()
            await engine.generate(
                [{"role": "user", "content": f"ping{i}"}], [], GenerationSettings(max_tokens=1)
            )
            excess.append(time.perf_counter() - started - modelled)
    return max(0.0, statistics.median(excess[2:]))


def _window(ends: Sequence[float]) -> tuple[float, float]:
    order = sorted(ends)
    return order[int(0.1 * (len(order) - 1))], order[int(0.9 * (len(order) - 1))]


async def measure(
    urls: Sequence[str],
    *,
    loops: int,
    policy: Policy,
    arm: Arm,
    tasks: int,
    shape: LoopShape,
    seed: int = 0,
    stagger_s: float = 2.0,
) -> Measured:
    """Run ``loops`` loops of ``tasks`` tasks each through one routed HTTP engine."""
    turns = task_turns(shape, arm)
    rng = random.Random(seed)
    starts = [rng.uniform(0.0, stagger_s) for _ in range(loops)]
    records: list[tuple[float, float, int, int]] = []  # end, latency, prompt, cached
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=loops + 8)
    async with (
        httpx.AsyncClient(limits=limits, timeout=120.0) as client,
        OpenAIHTTPEngine(list(urls), "loopback", client=client, routing=policy) as engine,
    ):
        t0 = time.perf_counter()

        async def one_loop(index: int) -> None:
            await anyio.sleep(starts[index])
            for task in range(tasks):
                conversation = index * tasks + task
                for turn in turns:
                    messages = [segment_message(s, conversation) for s in turn.prompt]
                    started = time.perf_counter()
                    completion = await engine.generate(
                        messages, [], GenerationSettings(max_tokens=turn.output_tokens)
                    )
                    ended = time.perf_counter()
                    usage = completion.usage
                    records.append(
                        (ended - t0, ended - started, usage.prompt_tokens, usage.cached_tokens)
                    )
                    if turn.wait_after_s:
                        await anyio.sleep(turn.wait_after_s)

        async with anyio.create_task_group() as tg:
            for index in range(loops):
                tg.start_soon(one_loop, index)
        upstream = [(await client.get(f"{url}/stats")).json() for url in urls]
        moves = engine.router.moves if engine.router is not None else 0  # one URL: no router
    lo, hi = _window([r[0] for r in records])
    picked = [r for r in records if lo < r[0] <= hi]
    latencies = sorted(r[1] for r in picked)
    prompt = sum(r[2] for r in picked)
    return Measured(
        policy=policy,
        arm=arm,
        turns=len(records),
        turns_per_s=len(picked) / max(hi - lo, 1e-9),
        p50_turn_s=latencies[int(0.5 * (len(latencies) - 1) + 0.5)],
        p99_turn_s=latencies[int(0.99 * (len(latencies) - 1) + 0.5)],
        hit_rate=sum(r[3] for r in picked) / prompt if prompt else 0.0,
        all_turns_hit_rate=sum(r[3] for r in records) / max(1, sum(r[2] for r in records)),
        upstream_hit_rate=sum(u["cached_tokens"] for u in upstream)
        / max(1, sum(u["prompt_tokens"] for u in upstream)),
        served=[int(u["requests"]) for u in upstream],
        moves=moves,
    )


def _error(predicted: float, measured: float) -> float:
    return predicted / measured - 1.0 if measured else float("inf")


def _markdown(rows: Sequence[dict[str, Any]], upstreams: int, loops: int) -> str:
    lines = [
        f"Loopback validation: {upstreams} upstreams, {loops} concurrent loops.\n",
        "| arm | policy | measured turns/s | simulated | error | measured hit rate "
        "| simulated | error | measured p50 s | simulated p50 s |",
        "|:-:|:--|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        m, s = row["measured"], row["simulated"]
        lines.append(
            f"| {m['arm']} | {m['policy']} | {m['turns_per_s']:.2f} | {s['turns_per_s']:.2f} "
            f"| {row['throughput_error']:+.1%} | {m['hit_rate']:.1%} | {s['hit_rate']:.1%} "
            f"| {row['hit_rate_error']:+.1%} | {m['p50_turn_s']:.3f} | {s['p50_turn_s']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale_validate",
        description="Measure routed loops on loopback upstreams next to the simulation.",
    )
    parser.add_argument("--upstreams", type=int, default=2)
    parser.add_argument("--loops", type=int, default=48)
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--policies", default="affine,round_robin")
    parser.add_argument("--arms", default="S,F")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    return parser


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds, so the upstreams are stopped


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    shape, profile = LoopShape(), VALIDATION_PROFILE
    rows: list[dict[str, Any]] = []
    with start_upstreams(1, profile) as single:
        calibration = anyio.run(_calibrate, single.urls, profile)
    for arm in args.arms.split(","):
        for policy in args.policies.split(","):
            with start_upstreams(args.upstreams, profile) as upstreams:
                run = functools.partial(
                    measure,
                    upstreams.urls,
                    loops=args.loops,
                    policy=policy,
                    arm=arm,
                    tasks=args.tasks,
                    shape=shape,
                    seed=args.seed,
                )
                measured = anyio.run(run)
            simulated: SimResult = simulate(
                SimConfig(
                    loops=args.loops,
                    replicas=args.upstreams,
                    policy=policy,
                    arm=arm,
                    tasks=args.tasks,
                    seed=args.seed,
                    shape=shape,
                    profile=replace(
                        profile, overhead_ms=profile.overhead_ms + 1000.0 * calibration
                    ),
                )
            )
            row = {
                "measured": asdict(measured),
                "simulated": simulated.to_json(),
                "throughput_error": _error(simulated.turns_per_s, measured.turns_per_s),
                "hit_rate_error": _error(simulated.hit_rate, measured.hit_rate),
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    payload = {
        "command": "python -m benchmarks.scale_validate " + " ".join(argv or sys.argv[1:]),
        "upstreams": args.upstreams,
        "loops": args.loops,
        "tasks": args.tasks,
        "calibrated_round_trip_ms": 1000.0 * calibration,
        "profile": profile.to_json(),
        "shape": shape.to_json(),
        "rows": rows,
    }
    markdown = _markdown(rows, args.upstreams, args.loops)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "validation.json").write_text(json.dumps(payload, indent=2) + "\n")
        (args.out / "validation.md").write_text(markdown)
    print(markdown, end="")
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
