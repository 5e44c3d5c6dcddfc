"""A scripted OpenAI-compatible upstream for loopback: a replica with a prefix cache and a
clock, no model. A test double for routing and scale runs, started as its own process.

It serves ``POST /v1/chat/completions`` and ``GET /v1/models`` (plus ``GET /v1/stats``: its
counters) with Starlette on uvicorn, and behaves like one engine replica of the queueing model
in :mod:`harness.costmodel.routing` (the same :class:`~harness.costmodel.routing.ReplicaProfile`
the simulation uses):

* **Tokens.** A message is one token for its role plus its content's whitespace-separated
  words; the prompt is the messages in order.
* **Prefix cache.** Blocks of ``block_tokens`` tokens, each identified by a hash chained over
  every earlier block (as vLLM's automatic prefix caching does), held in an LRU of
  ``cache_tokens // block_tokens`` blocks. A prompt hits its longest run of held leading
  blocks (never its last token); it then holds all its full blocks, the leading ones most
  recently used, so eviction trims conversations from their tails. Usage reports
  ``prompt_tokens_details.cached_tokens``.
* **Time.** Each request sleeps ``overhead_ms``, waits for one of ``max_batch`` slots (FIFO),
  takes the prefill lane (FIFO, one at a time) for ``prefill_ms_per_token`` × uncached
  tokens, then decodes ``max_tokens`` words at ``decode_ms_per_token`` each and frees its slot.
* **Replies.** ``max_tokens`` filler words; a request carrying vLLM's ``structured_outputs``
  ``{"choice": [text]}`` with one choice gets exactly that text (what constrained decoding to
  one choice gives), so the harness's gold policy runs against it.

Run it::

    python -m benchmarks.loopback_upstream --port 0 --prefill-ms-per-token 0.5

It prints one JSON line ``{"url": "http://127.0.0.1:PORT/v1", "pid": ...}`` when it listens
and serves until killed. It binds loopback only. Needs the ``loopback`` extra (Starlette,
uvicorn).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import socket
import sys
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import anyio

from harness.costmodel.routing import ReplicaProfile

__all__ = ("PrefixCache", "ReplicaState", "build_app", "main", "prompt_tokens")


def prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The prompt as tokens: per message, ``<role>`` then its content's words."""
    tokens: list[str] = []
    for message in messages:
        tokens.append(f"<{message.get('role', '')}>")
        content = message.get("content")
        if isinstance(content, list):  # OpenAI content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        tokens.extend(str(content or "").split())
    return tokens


class PrefixCache:
    """Hash-chained token blocks in an LRU (see the module docstring)."""

    def __init__(self, capacity_tokens: int, block_tokens: int) -> None:
        self.block_tokens = block_tokens
        self.capacity_blocks = capacity_tokens // block_tokens
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

    def _hashes(self, tokens: Sequence[str]) -> list[bytes]:
        out: list[bytes] = []
        parent = b""
        b = self.block_tokens
        for start in range(0, len(tokens) - b + 1, b):
            text = "\x1f".join(tokens[start : start + b]).encode("utf-8")
            parent = hashlib.blake2b(parent + text, digest_size=16).digest()
            out.append(parent)
        return out

    def serve(self, tokens: Sequence[str]) -> int:
        """Look ``tokens`` up (cached leading tokens, returned) and hold its full blocks."""
        hashes = self._hashes(tokens)
        hit = 0
        for h in hashes:
            if h not in self._blocks:
                break
            hit += 1
        cached = min(
            hit * self.block_tokens, (len(tokens) - 1) // self.block_tokens * self.block_tokens
        )
        if self.capacity_blocks:
            for h in reversed(hashes):  # the leading blocks end up most recently used
                self._blocks[h] = None
                self._blocks.move_to_end(h)
            while len(self._blocks) > self.capacity_blocks:
                self._blocks.popitem(last=False)
        return max(0, cached)


@dataclass
class ReplicaState:
    """One upstream's cache, lanes and counters."""

    profile: ReplicaProfile
    model: str = "loopback"
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    cache: PrefixCache = field(init=False)
    slots: anyio.Semaphore = field(init=False)
    prefill_lane: anyio.Lock = field(init=False)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.cache = PrefixCache(self.profile.cache_tokens, self.profile.block_tokens)
        self.slots = anyio.Semaphore(self.profile.max_batch, fast_acquire=False)
        self.prefill_lane = anyio.Lock(fast_acquire=False)

    async def complete(self, body: Mapping[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        tokens = prompt_tokens(messages)
        forced = _single_choice(body)
        max_tokens = int(body.get("max_tokens") or 16)
        text = forced if forced is not None else " ".join(f"w{i}" for i in range(max_tokens))
        output = len(text.split())
        p = self.profile
        await anyio.sleep(p.overhead_ms / 1000.0)
        async with self.slots:
            async with self.prefill_lane:
                cached = self.cache.serve(tokens)
                await anyio.sleep(p.prefill_ms_per_token / 1000.0 * (len(tokens) - cached))
            await anyio.sleep(p.decode_ms_per_token / 1000.0 * output)
        self.requests += 1
        self.prompt_tokens += len(tokens)
        self.cached_tokens += cached
        self.completion_tokens += output
        return {
            "id": f"loopback-{os.getpid()}-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop" if forced is not None else "length",
                }
            ],
            "usage": {
                "prompt_tokens": len(tokens),
                "completion_tokens": output,
                "total_tokens": len(tokens) + output,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "completion_tokens": self.completion_tokens,
            "profile": self.profile.to_json(),
        }


def _single_choice(body: Mapping[str, Any]) -> str | None:
    constraint = body.get("structured_outputs")
    if isinstance(constraint, Mapping):
        choice = constraint.get("choice")
        if isinstance(choice, list) and len(choice) == 1 and isinstance(choice[0], str):
            return choice[0]
    return None


def build_app(state: ReplicaState) -> Any:
    """The Starlette app serving ``state``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": {"message": "body is not JSON"}}, status_code=400)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return JSONResponse({"error": {"message": "messages must be a list"}}, status_code=400)
        return JSONResponse(await state.complete(body))

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": state.model, "object": "model"}]})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(state.stats())

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/stats", stats, methods=["GET"]),
        ]
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.loopback_upstream",
        description="A scripted OpenAI-compatible upstream on loopback with a prefix cache.",
    )
    parser.add_argument("--port", type=int, default=0, help="0 (default): any free port")
    parser.add_argument("--model", default="loopback")
    defaults = ReplicaProfile()
    for f in fields(ReplicaProfile):
        parser.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=type(getattr(defaults, f.name)),
            default=getattr(defaults, f.name),
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        import uvicorn
    except ImportError:
        print(
            "The loopback upstream needs Starlette and uvicorn: "
            "pip install 'agent-harness[loopback]'.",
            file=sys.stderr,
        )
        return 2
    profile = ReplicaProfile(**{f.name: getattr(args, f.name) for f in fields(ReplicaProfile)})
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(4096)  # listening before the URL is printed: connects queue until it serves
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        build_app(ReplicaState(profile, model=args.model)),
        log_level="warning",
        access_log=False,
        timeout_keep_alive=30,
        backlog=4096,
    )
    server = uvicorn.Server(config)
    print(json.dumps({"url": f"http://127.0.0.1:{port}/v1", "pid": os.getpid()}), flush=True)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
