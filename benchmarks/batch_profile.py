"""``python -m benchmarks.batch_profile``: where a K-prompt layer's time goes, per engine setting.

The fabric's premise (CRP-SPEC-022 §2.2) is that a layer of K independent prompts submitted
together costs about one inference. For each engine setting variant (each in its own process,
so environment switches take effect) this starts the in-process vLLM engine on the packaged
model, then, ``--runs`` times with the K values interleaved, submits K = 1, 2, 4, 8 short
prompts (the spec example's node prompts, ~50 prompt tokens, ``--max-tokens`` 32) together
and records:

- the wall time of the batch, and its ratio to K = 1 (median of the per-run ratios);
- per request (engine timings): queue (arrival to scheduled), prefill (scheduled to first
  token), decode (first to last token), and the decode time per generated token;
- the tokens generated, so a ratio is not read off different output lengths.

Prints a table and, with ``--json FILE``, writes every number. Run it under the engine lock:
``flock /tmp/engine.lock python -m benchmarks.batch_profile --json FILE``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from harness.engines.base import GenerationSettings
from harness.messages import Completion, Message

__all__ = ("VARIANTS", "main", "profile")

BATCH_SIZES = (1, 2, 4, 8)

#: name -> (VLLMSettings overrides, environment), each tried in a fresh process.
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "default": ({}, {}),
    "in-process core": ({}, {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "2"}),
    "async scheduling": ({"extra": {"async_scheduling": True}}, {}),
    "float32": ({"dtype": "float32"}, {}),
    "max_num_batched_tokens 256": ({"max_num_batched_tokens": 256}, {}),
    "torch.compile": ({"enforce_eager": False}, {"VLLM_USE_AOT_COMPILE": "0"}),
    "async scheduling + 256": (
        {"max_num_batched_tokens": 256, "extra": {"async_scheduling": True}},
        {},
    ),
}


def _prompts(k: int) -> list[list[Message]]:
    from harness.fabric import example_graph, render_messages

    return [render_messages(node, {}) for node in list(example_graph())[:k]]


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


async def profile(engine: Any, *, runs: int, max_tokens: int) -> dict[str, Any]:
    """The figures of the module docstring for one started engine."""
    settings = GenerationSettings(max_tokens=max_tokens, constrain=False)

    async def batch(k: int) -> tuple[float, list[Completion]]:
        out: list[Completion] = []

        async def one(chat: list[Message]) -> None:
            out.append(await engine.generate(chat, [], settings))

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for chat in _prompts(k):
                tg.start_soon(one, chat)
        return time.perf_counter() - started, out

    for k in BATCH_SIZES:  # warm-up: every batch shape once
        await batch(k)
    walls: dict[int, list[float]] = {k: [] for k in BATCH_SIZES}
    done: dict[int, list[Completion]] = {k: [] for k in BATCH_SIZES}
    for _ in range(runs):
        for k in BATCH_SIZES:
            await engine.reset_prefix_cache()
            wall, completions = await batch(k)
            walls[k].append(wall)
            done[k].extend(completions)
    out: dict[str, Any] = {"walls_s": walls, "per_k": {}}
    for k in BATCH_SIZES:
        cs = done[k]
        per_token = [
            c.timings.decode_s / (c.usage.completion_tokens - 1)
            for c in cs
            if c.usage.completion_tokens > 1
        ]
        out["per_k"][k] = {
            "wall_s": _median(walls[k]),
            "vs_k1": _median([w / w1 for w, w1 in zip(walls[k], walls[1], strict=True)]),
            "queue_s": _median([c.timings.queue_s for c in cs]),
            "prefill_s": _median([c.timings.prefill_s for c in cs]),
            "decode_s": _median([c.timings.decode_s for c in cs]),
            "decode_ms_per_token": 1000 * _median(per_token),
            "prompt_tokens": _median([c.usage.prompt_tokens for c in cs]),
            "completion_tokens": _median([c.usage.completion_tokens for c in cs]),
        }
    return out


def _one(name: str, runs: int, max_tokens: int) -> dict[str, Any]:
    """Run one variant in this process (the environment is already set)."""
    from harness.engines.vllm import open_default_engine

    overrides, _ = VARIANTS[name]

    async def go() -> dict[str, Any]:
        started = time.perf_counter()
        async with open_default_engine(**overrides) as engine:
            start_s = time.perf_counter() - started
            doc = await profile(engine, runs=runs, max_tokens=max_tokens)
        doc["start_s"] = start_s
        return doc

    return anyio.run(go)


def _spawn(name: str, runs: int, max_tokens: int) -> dict[str, Any]:
    _, env = VARIANTS[name]
    argv = [sys.executable, "-m", "benchmarks.batch_profile", "--variant", name]
    argv += ["--runs", str(runs), "--max-tokens", str(max_tokens), "--child"]
    done = subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-5:]}
    doc: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return doc


def report(doc: dict[str, Any]) -> str:
    lines = [
        f"max_tokens {doc['max_tokens']}, medians of {doc['runs']} runs; per request: queue / "
        "prefill / decode (s), decode ms per token",
    ]
    for name, variant in doc["variants"].items():
        if "error" in variant:
            lines.append(f"\n{name}: failed: {' | '.join(variant['error'])}")
            continue
        lines.append(f"\n{name} (engine start {variant['start_s']:.1f} s):")
        for k, row in variant["per_k"].items():
            lines.append(
                f"  K={k}: {row['wall_s']:.2f} s = {row['vs_k1']:.2f}x K=1 | "
                f"{row['queue_s']:.3f} / {row['prefill_s']:.3f} / {row['decode_s']:.3f} | "
                f"{row['decode_ms_per_token']:.1f} ms/token | "
                f"{row['completion_tokens']:.0f} tokens out, {row['prompt_tokens']:.0f} in"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.batch_profile", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument(
        "--variant",
        action="append",
        choices=sorted(VARIANTS),
        help="only these variants (repeatable; default: all)",
    )
    parser.add_argument("--json", metavar="FILE", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        (name,) = args.variant
        print(json.dumps(_one(name, args.runs, args.max_tokens), default=str))
        return 0
    doc: dict[str, Any] = {"runs": args.runs, "max_tokens": args.max_tokens, "variants": {}}
    for name in args.variant or list(VARIANTS):
        doc["variants"][name] = _spawn(name, args.runs, args.max_tokens)
        print(f"{name}: done", file=sys.stderr)
    print(report(doc))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
