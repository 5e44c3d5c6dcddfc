"""``harness serve``: the OpenAI-compatible flattening proxy under uvicorn."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from harness._commands._engine_args import add_drafting_arguments, add_kv_cache_argument
from harness._commands._signals import until_signalled
from harness.engines.base import Engine
from harness.errors import ConfigError

__all__ = ("register", "run")

DESCRIPTION = """\
Serve POST /v1/chat/completions, POST /v1/responses (the OpenAI Responses API) and POST
/v1/messages (the Anthropic Messages API), GET /v1/models and GET /health, for an unmodified
agent loop: point its base_url at the printed URL. When the model's reply is a call the certifier admits
into a window (--effects, --manifest), the proxy keeps generating until the window closes and
returns the whole window as one assistant message with parallel tool_calls (function_call
items, tool_use blocks); the client runs
them and sends the results back, and the proxy restores the serial form before the absorb
turn. Everything else passes through (arm S). Upstream: the embedded vLLM engine (default) or
OpenAI-compatible servers (--upstream). Binds to loopback unless --api-key is set. The same
server answers POST /v1/fabric/runs, the execution fabric with the four CRP-PEF-* figures as
response headers (docs/fabric.md), unless --no-fabric.
"""

EPILOG = """\
examples:
  harness serve --effects effects.toml --manifest skills.toml
  harness serve --port 0 --ledger proxy.jsonl      # a free port; prints {"url": ...}
  harness serve --upstream http://127.0.0.1:8001/v1 --upstream http://127.0.0.1:8002/v1
  HARNESS_API_KEY=... harness serve --host 0.0.0.0 --effects effects.toml
per request: header X-Harness-Skill / X-Harness-Inputs (JSON), or the body's
harness_skill / harness_inputs (the OpenAI SDK's extra_body); X-Harness-Arm: S passes through,
and so does parallel_tool_calls: false. tool_choice: "required" is passed on (with --upstream)
and windows still flatten; "none", a named function or another object is passed on and served
serially; what the upstream cannot take is served serially and X-Harness-Warning says so.
harness -v serve logs each request and every upstream failure. Inconsistent options
(--effects without --manifest, a manifest naming a tool the effects do not declare) exit 2
before anything starts.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "serve",
        help="serve an OpenAI-compatible proxy that flattens certified windows (arm F)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)"
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help="clients must send 'Authorization: Bearer KEY' (default $HARNESS_API_KEY); "
        "required for a non-loopback --host",
    )
    parser.add_argument(
        "--effects", metavar="FILE", help="effects file (TOML or JSON): per tool name "
        "read_only, idempotent, destructive, write/read target templates, canonical",
    )  # fmt: skip
    parser.add_argument(
        "--manifest", metavar="FILE", help="skill manifest (TOML); one skill = the default"
    )
    parser.add_argument(
        "--ledger", metavar="FILE", help="append every turn, call and window (JSONL)"
    )
    add_drafting_arguments(parser)
    add_kv_cache_argument(parser)
    parser.add_argument(
        "--detector",
        choices=("schema_sound", "phase_heuristic"),
        default="schema_sound",
        help="the certifier (default schema_sound; phase_heuristic can false-fill)",
    )
    parser.add_argument(
        "--max-window",
        type=int,
        default=None,
        help="most calls in one window (default 16)",
    )
    _add_request_limits(parser)
    parser.add_argument(
        "--no-fabric",
        action="store_true",
        help="do not serve the execution fabric's POST /v1/fabric/runs (served by default, "
        "on the same engine, behind the same API key)",
    )
    parser.add_argument(
        "--model-params",
        type=float,
        default=None,
        help="the model's parameter count for the fabric's CRP-PEF-Compute-Vs-Naive header "
        "(default: 135e6 for the packaged model; none for --model or --upstream)",
    )
    _add_upstream_arguments(parser)
    parser.set_defaults(func=run)


def _add_request_limits(parser: argparse.ArgumentParser) -> None:
    """What one request and the conversations waiting for their clients may hold."""
    parser.add_argument(
        "--max-body-bytes", type=int, default=4 * 1024 * 1024, help="request body limit"
    )
    parser.add_argument("--max-messages", type=int, default=2048, help="messages per request limit")
    parser.add_argument(
        "--max-depth",
        type=int,
        default=64,
        metavar="N",
        help="how deeply a request's JSON may nest — its body, X-Harness-Inputs, a call's "
        "arguments (default 64); deeper is a 400 in the API's own error shape, as are "
        "integers over 1000 digits, NaN/Infinity and lone surrogates (\\ud800)",
    )
    parser.add_argument(
        "--max-generations",
        type=int,
        default=40,
        help="upstream generations one request may fold in (default 40)",
    )
    parser.add_argument(
        "--conversations",
        type=int,
        default=1024,
        metavar="N",
        help="conversations kept waiting for their clients' results (default 1024; one "
        "dropped costs its next request a cold start from its history, never a wrong answer)",
    )
    parser.add_argument(
        "--conversation-mib",
        type=float,
        default=64.0,
        metavar="MIB",
        help="history the waiting conversations may hold together, in MiB (default 64; "
        "the oldest is dropped first, and a conversation larger than this is not kept: "
        "its next request cold-starts). Bounds the proxy's memory by bytes, not by count",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="how long a conversation waits for its client's results (default 900)",
    )


def _add_upstream_arguments(parser: argparse.ArgumentParser) -> None:
    """The upstream server instead of the embedded engine (``--upstream`` and its options)."""
    group = parser.add_argument_group("upstream")
    group.add_argument(
        "--upstream",
        action="append",
        metavar="URL",
        default=None,
        help="an OpenAI-compatible server's base URL instead of the embedded engine; repeat "
        "it (or separate with commas) for replicas, routed prefix-affine",
    )
    group.add_argument(
        "--model",
        metavar="PATH_OR_NAME",
        default=None,
        help="embedded engine: a local Hugging Face model folder (default: the packaged "
        "SmolLM2-135M-Instruct); with --upstream: the model name every request asks the "
        "upstream for (default: each client's own 'model', forwarded)",
    )
    group.add_argument(
        "--upstream-retries",
        type=int,
        default=4,
        metavar="N",
        help="with --upstream: retries of a failed upstream request, with backoff (default 4)",
    )
    group.add_argument(
        "--upstream-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="with --upstream: seconds to wait for one upstream answer (default 300)",
    )
    group.add_argument(
        "--routing",
        choices=("affine", "round_robin"),
        default="affine",
        help="several --upstream: affine (default) or round_robin",
    )
    group.add_argument(
        "--upstream-key-env",
        metavar="VAR",
        default="OPENAI_API_KEY",
        help="environment variable holding the upstream's bearer token (default "
        "OPENAI_API_KEY; never echoed)",
    )
    group.add_argument(
        "--tool-format",
        choices=("openai", "harness"),
        default="openai",
        help="with --upstream: openai (the server parses tool calls) or harness (tools in the "
        "system prompt, as the embedded engine does; for models without tool syntax)",
    )


@asynccontextmanager
async def _engine(args: argparse.Namespace, key: str | None) -> AsyncIterator[Engine]:
    if args.upstream and (
        getattr(args, "drafting", None) not in (None, "none")
        or getattr(args, "draft_max_batch", None) is not None
    ):
        raise ConfigError(
            "--drafting and --draft-max-batch draft on the embedded engine; an --upstream "
            "server decodes on its own (vllm serve --speculative-config ...): drop one of them."
        )
    if args.upstream and getattr(args, "kv_cache_gib", None) is not None:
        raise ConfigError(
            "--kv-cache-gib sizes the embedded engine's KV cache; an --upstream server sizes "
            "its own (vllm serve --kv-cache-memory-bytes ...): drop one of them."
        )
    if args.upstream:
        from harness.engines.openai_http import HTTPEngineSettings, OpenAIHTTPEngine

        upstream = HTTPEngineSettings(
            args.upstream,
            args.model or "default",
            api_key=key or "",
            routing=args.routing,
            tool_format=args.tool_format,
            max_retries=args.upstream_retries,
            timeout_s=args.upstream_timeout,
            option_names={
                "base_url": "--upstream",
                "max_retries": "--upstream-retries",
                "timeout_s": "--upstream-timeout",
            },
        )
        async with OpenAIHTTPEngine.from_settings(upstream) as http:
            yield http
        return
    from harness._commands._engine_args import announce_engine_start, embedded_engine_overrides
    from harness.engines.vllm import open_default_engine

    overrides = embedded_engine_overrides(args)
    announce_engine_start()
    async with open_default_engine(args.model, **overrides) as engine:
        yield engine


def _fabric(args: argparse.Namespace, engine: Engine) -> list[Any]:
    """The fabric endpoint's routes on the proxy's engine (none with --no-fabric)."""
    if args.no_fabric:
        return []
    from harness._commands.fabric import DEFAULT_MODEL_PARAMS
    from harness.fabric.config import FabricConfig
    from harness.fabric.http import fabric_routes

    params = args.model_params
    if params is None and args.model is None and not args.upstream:
        params = DEFAULT_MODEL_PARAMS
    return list(fabric_routes(engine, config=FabricConfig(model_params=params)))


def run(args: argparse.Namespace) -> int:
    from harness.certify import DEFAULT_MAX_WINDOW
    from harness.loop.ledger import Ledger
    from harness.proxy import ProxyConfig, build_app, load_effects
    from harness.proxy.serve import check_bind, serve
    from harness.skills.manifest import load_manifest

    api_key = args.api_key or os.environ.get("HARNESS_API_KEY") or None
    check_bind(args.host, api_key)
    if args.port < 0 or args.port > 65535:
        raise ConfigError(f"--port must be 0-65535, got {args.port}.")
    effects = load_effects(args.effects) if args.effects else {}
    manifest = load_manifest(args.manifest) if args.manifest else None
    upstream_key = os.environ.get(args.upstream_key_env) or None
    label = ", ".join(args.upstream) if args.upstream else "the embedded engine"
    config = ProxyConfig(
        effects=effects,
        manifest=manifest,
        detector=args.detector,
        max_window=DEFAULT_MAX_WINDOW if args.max_window is None else args.max_window,
        api_key=api_key,
        max_body_bytes=args.max_body_bytes,
        max_messages=args.max_messages,
        max_depth=args.max_depth,
        max_generations=args.max_generations,
        conversations_capacity=args.conversations,
        conversations_bytes=int(args.conversation_mib * 1024 * 1024),
        idle_s=args.idle_timeout,
        secrets_to_hide=tuple(k for k in (upstream_key, api_key) if k),
        model=args.model or "harness",
        upstream=label,
        upstream_model=args.model if args.upstream else None,
    )
    config.check()
    if not args.conversation_mib >= 0:
        raise ConfigError(
            f"--conversation-mib must be >= 0 (0 keeps no conversation waiting), got "
            f"{args.conversation_mib}."
        )
    if args.max_depth < 2:
        raise ConfigError(
            f"--max-depth must be >= 2 (a request body is an object holding lists), got "
            f"{args.max_depth}."
        )
    if args.max_generations < 1 or args.conversations < 0 or args.idle_timeout <= 0:
        raise ConfigError(
            f"--max-generations must be >= 1, --conversations >= 0 and --idle-timeout > 0; "
            f"got {args.max_generations}, {args.conversations} and {args.idle_timeout}."
        )
    if args.upstream_retries < 0 or args.upstream_timeout <= 0:
        raise ConfigError(
            f"--upstream-retries must be >= 0 and --upstream-timeout > 0; got "
            f"{args.upstream_retries} and {args.upstream_timeout}."
        )
    verbose = bool(getattr(args, "verbose", False) or getattr(args, "log_json", False))
    # -v: every ledger record (turn, call, window) is logged too; the proxy's own events
    # (each request, every upstream failure) go to the logger harness.proxy.
    ledger = Ledger(args.ledger, log=verbose, keep=10_000)

    def listening(url: str) -> None:
        print(json.dumps({"url": url, "pid": os.getpid(), "upstream": label}), flush=True)
        print(f"harness serve: listening on {url} (upstream: {label})", file=sys.stderr)

    async def go() -> None:
        async with _engine(args, upstream_key) as engine:
            app = build_app(engine, config, ledger=ledger, extra_routes=_fabric(args, engine))
            # What exists now lives as long as the server: out of the cycle collector's walks
            # (the proxy runs it when dropped conversations add up, harness.proxy.conversation)
            gc.freeze()
            await serve(app, args.host, args.port, on_listen=listening)

    try:
        anyio.run(until_signalled, go, "the proxy stopped; nothing to resume.")
    finally:
        ledger.close()
    return 0
