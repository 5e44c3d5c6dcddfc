"""Engine-level figures of the in-process vLLM engine on this machine.

``python -m benchmarks.engine_figures [--model PATH] [--k 8] [--json]`` prints:

- load time (engine start, model already prepared);
- prefill speed (a ~2k-token prompt, cold cache; engine-side prefill time);
- decode speed of one stream, and per stream / aggregate with K concurrent streams;
- cached tokens when the same long prompt comes again (and its prefill time then);
- wall time of K concurrent generations vs the same K one after another.

Timings are vLLM's own per-request timestamps (queue, prefill, decode) except the walls,
which are measured around the calls. Loop-level figures live in ``harness bench``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Sequence
from typing import Any

import anyio

from harness.engines.base import GenerationSettings
from harness.engines.vllm import VLLMEngine, open_default_engine
from harness.messages import Completion, Message

__all__ = ("main", "measure")

_WORDS = (
    "agent", "loop", "tool", "call", "result", "window", "prefix", "cache", "batch", "stream",
    "token", "engine", "harness", "document", "read", "write", "serial", "parallel", "flatten",
    "absorb", "certify", "schema", "manifest", "phase",
)  # fmt: skip


def _long_prompt(engine: VLLMEngine, tag: str, tokens: int) -> list[Message]:
    """A user message of about ``tokens`` prompt tokens that starts with a unique ``tag``
    (so different prompts share no cache block)."""
    words = [_WORDS[(i * 7 + len(tag)) % len(_WORDS)] for i in range(tokens)]
    text = f"[{tag}] Summarise these notes in one line: " + " ".join(words)
    while engine.count_tokens(text) > tokens and len(words) > 10:
        words = words[: int(len(words) * 0.95)]
        text = f"[{tag}] Summarise these notes in one line: " + " ".join(words)
    return [{"role": "user", "content": text}]


def _story(i: int) -> list[Message]:
    return [
        {
            "role": "user",
            "content": f"Story {i}: write a long, detailed story about a lighthouse keeper "
            f"number {i} and the ships she guides. Keep going for many paragraphs.",
        }
    ]


def _rate(tokens: float, seconds: float) -> float:
    return tokens / seconds if seconds > 0 else 0.0


async def _concurrently(
    engine: VLLMEngine, chats: Sequence[list[Message]], settings: GenerationSettings
) -> tuple[list[Completion], float]:
    results: dict[int, Completion] = {}

    async def one(i: int, chat: list[Message]) -> None:
        results[i] = await engine.generate(chat, [], settings)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i, chat in enumerate(chats):
            tg.start_soon(one, i, chat)
    return [results[i] for i in range(len(chats))], time.perf_counter() - started


async def measure(
    model: str | None = None, k: int = 8, max_tokens: int = 128, prompt_tokens: int = 2000
) -> dict[str, Any]:
    """Run every measurement once and return the figures."""
    figures: dict[str, Any] = {"k": k, "max_tokens": max_tokens, "machine": platform.machine()}
    started = time.perf_counter()
    async with open_default_engine(model) as engine:
        figures["load_s"] = time.perf_counter() - started
        figures["block_size"] = engine.settings.block_size
        figures["model"] = engine.name
        greedy = GenerationSettings(max_tokens=max_tokens, temperature=0.0)
        one_token = GenerationSettings(max_tokens=1, temperature=0.0)

        # Warm-up (first request compiles nothing in eager mode, but allocates buffers).
        await engine.generate(_story(-1), [], GenerationSettings(max_tokens=4))

        # Prefill: a long prompt, cold; then the same prompt again (prefix cache).
        long = _long_prompt(engine, "prefill", prompt_tokens)
        cold = await engine.generate(long, [], one_token)
        warm = await engine.generate(long, [], one_token)
        figures["prefill"] = {
            "prompt_tokens": cold.usage.prompt_tokens,
            "prefill_s": cold.timings.prefill_s,
            "tok_per_s": _rate(
                cold.usage.prompt_tokens - cold.usage.cached_tokens, cold.timings.prefill_s
            ),
        }
        figures["repeat"] = {
            "prompt_tokens": warm.usage.prompt_tokens,
            "cached_tokens": warm.usage.cached_tokens,
            "cached_fraction": _rate(warm.usage.cached_tokens, warm.usage.prompt_tokens),
            "prefill_s": warm.timings.prefill_s,
        }

        # Decode: one stream alone.
        single = await engine.generate(_story(0), [], greedy)
        figures["decode_1"] = {
            "tokens": single.usage.completion_tokens,
            "decode_s": single.timings.decode_s,
            "tok_per_s": _rate(single.usage.completion_tokens - 1, single.timings.decode_s),
        }

        # K concurrent streams, then the same K requests one after another.
        chats = [_story(i) for i in range(1, k + 1)]
        together, wall_k = await _concurrently(engine, chats, greedy)
        per_stream = [_rate(c.usage.completion_tokens - 1, c.timings.decode_s) for c in together]
        figures["decode_k"] = {
            "tokens": sum(c.usage.completion_tokens for c in together),
            "wall_s": wall_k,
            "per_stream_tok_per_s": statistics.mean(per_stream),
            "aggregate_tok_per_s": _rate(sum(c.usage.completion_tokens for c in together), wall_k),
        }
        await engine.reset_prefix_cache()
        started = time.perf_counter()
        alone = [await engine.generate(chat, [], greedy) for chat in chats]
        wall_seq = time.perf_counter() - started
        figures["k_concurrent_vs_sequential"] = {
            "concurrent_wall_s": wall_k,
            "sequential_wall_s": wall_seq,
            "speedup": _rate(wall_seq, wall_k) if wall_k else 0.0,
            # Greedy replies need not match: bf16 kernels round differently at other batch
            # shapes, and one flipped argmax changes the rest of the reply.
            "same_replies": sum(
                a.content == b.content for a, b in zip(together, alone, strict=True)
            ),
        }
        stats = engine.cache_stats()
        figures["cache"] = {
            "queries": stats.queries,
            "hits": stats.hits,
            "hit_rate": stats.hit_rate,
        }
    return figures


def _print(figures: dict[str, Any]) -> None:
    k = figures["k"]
    p, r = figures["prefill"], figures["repeat"]
    d1, dk = figures["decode_1"], figures["decode_k"]
    cmp = figures["k_concurrent_vs_sequential"]
    print(f"engine                 {figures['model']}  (block size {figures['block_size']})")
    print(f"load                   {figures['load_s']:.1f} s")
    print(
        f"prefill                {p['tok_per_s']:.0f} tok/s  "
        f"({p['prompt_tokens']} tokens in {p['prefill_s']:.2f} s, cold cache)"
    )
    print(
        f"repeated prompt        {r['cached_tokens']}/{r['prompt_tokens']} tokens cached "
        f"({r['cached_fraction']:.0%}), prefill {r['prefill_s']:.2f} s"
    )
    print(f"decode, 1 stream       {d1['tok_per_s']:.1f} tok/s  ({d1['tokens']} tokens)")
    print(
        f"decode, {k} streams      {dk['per_stream_tok_per_s']:.1f} tok/s per stream, "
        f"{dk['aggregate_tok_per_s']:.0f} tok/s aggregate ({dk['tokens']} tokens)"
    )
    print(
        f"{k} generations        {cmp['concurrent_wall_s']:.1f} s concurrent vs "
        f"{cmp['sequential_wall_s']:.1f} s sequential ({cmp['speedup']:.1f}x); "
        f"identical greedy replies: {cmp['same_replies']}/{k}"
    )
    c = figures["cache"]
    print(
        f"prefix cache           {c['hits']}/{c['queries']} prompt tokens hit ({c['hit_rate']:.0%})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.engine_figures",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--model", default=None, help="a local Hugging Face model folder")
    parser.add_argument("--k", type=int, default=8, help="concurrent streams (default 8)")
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens per stream")
    parser.add_argument("--prompt-tokens", type=int, default=2000, help="prefill prompt size")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    figures = anyio.run(measure, args.model, args.k, args.max_tokens, args.prompt_tokens)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        _print(figures)
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
