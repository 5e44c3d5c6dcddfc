"""Engine options shared by every command that talks to a model (run, bench, fabric)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.engines.base import Engine
from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.engines.openai_http import HTTPEngineSettings
    from harness.engines.router import Policy

__all__ = (
    "EngineOptions",
    "add_engine_arguments",
    "add_kv_cache_argument",
    "announce_engine_start",
    "open_engine",
)

ENGINES = ("vllm", "http", "scripted")
#: The values of ``--drafting`` (``harness.engines.vllm.DRAFTING``, not imported: it loads vLLM).
DRAFTING_CHOICES = ("none", "ngram", "suffix", "window")
DTYPES = ("bfloat16", "float16", "float32")
#: ``--drafting`` when not given: drafting is on by default on the in-process engine of
#: ``run``, ``bench`` and ``serve`` (``benchmarks/results/draft/``: it lowered the wall at one
#: loop and at 8; ``--drafting none`` turns it off).
DEFAULT_DRAFTING = "window"
#: The old name of :data:`DEFAULT_DRAFTING`.
DEFAULT_SPECULATE = DEFAULT_DRAFTING
#: ``--draft-max-batch`` when not given with the window proposer: it drafts nothing in a step
#: where more than 8 requests decode (at 12 and 16 loops drafting did not lower the wall:
#: docs/engines.md, Under load).
DEFAULT_DRAFT_MAX_BATCH = 8


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engine")
    group.add_argument(
        "--engine",
        choices=ENGINES,
        default="vllm",
        help=(
            "vllm (default): the in-process vLLM engine with prefix caching; "
            "http: an OpenAI-compatible server (--base-url); "
            "scripted: a test double that only replays forced gold calls (no model)"
        ),
    )
    group.add_argument(
        "--model",
        metavar="PATH",
        default=None,
        help="a local Hugging Face model folder (default: the packaged SmolLM2-135M-Instruct, "
        "prepared by `harness engine prepare`); for --engine http, the served model name",
    )
    group.add_argument(
        "--base-url",
        action="append",
        default=None,
        help="for --engine http: the server's base URL, e.g. http://127.0.0.1:8000/v1; "
        "repeat it (or separate URLs with commas) for several replicas of one model",
    )
    group.add_argument(
        "--routing",
        choices=("affine", "round_robin"),
        default="affine",
        help="for several --base-url: affine (default) keeps each loop on the replica that "
        "holds its prefix; round_robin is the control",
    )
    group.add_argument(
        "--api-key", default=None, help="for --engine http: bearer token (or OPENAI_API_KEY)"
    )
    group.add_argument(
        "--dtype",
        choices=DTYPES,
        default=None,
        help="for --engine vllm: the weights' dtype (default bfloat16). On a CPU without "
        "native bf16 (AVX2 only) float32 prefills faster and decodes slower (twice the bytes)",
    )
    add_kv_cache_argument(group)
    add_drafting_arguments(group)


def add_drafting_arguments(group: argparse._ActionsContainer) -> None:
    """``--drafting`` (and its deprecated spelling ``--speculate``) and ``--draft-max-batch``:
    shared by the engine options and ``harness serve``."""
    group.add_argument(
        "--drafting",
        choices=DRAFTING_CHOICES,
        default=None,
        help="for the in-process vLLM engine: drafted decoding, the same tokens under greedy "
        "decoding up to numerical ties, verified in one pass: window (default): the harness "
        "drafts the window's predicted calls (from the manifest and the task inputs) and the "
        "reply's opening the grammar forces, then falls back to prompt lookup; none: no "
        "drafting (the tokens of an undrafted engine exactly); ngram: vLLM's prompt-lookup "
        "proposer drafts from earlier in the prompt (the previous tool call); suffix: vLLM's "
        "suffix-tree proposer (needs arctic-inference: make suffix). See docs/engines.md, "
        "Drafted decoding. Not --arm F+spec (certified speculation of calls)",
    )
    group.add_argument(
        "--speculate",
        choices=DRAFTING_CHOICES,
        dest="drafting",
        action=_DeprecatedSpelling,
        metavar="{" + ",".join(DRAFTING_CHOICES) + "}",
        help="deprecated: the old spelling of --drafting (removed in the next release)",
    )
    group.add_argument(
        "--draft-max-batch",
        type=_count,
        default=None,
        metavar="N",
        help="with the window proposer: draft nothing in a step where more than N requests "
        f"decode (default {DEFAULT_DRAFT_MAX_BATCH}; 0: draft at any load). Verifying "
        "drafts for many loops at once can cost more than it saves (measure with python -m "
        "benchmarks.draft_bench --concurrency 8)",
    )


class _DeprecatedSpelling(argparse.Action):
    """An option's old spelling: stores its value under the new one's ``dest`` and says on
    stderr, once per use, which spelling to use instead."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        new = "--" + self.dest.replace("_", "-")
        print(
            f"harness: warning: {option_string} is deprecated, use {new} (the old spelling "
            "goes in the next release)",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


@dataclass(frozen=True)
class EngineOptions:
    """The engine a command's options name, read from the argparse namespace once
    (:meth:`from_args`): which engine (``vllm``, ``http``, ``scripted``), the model, the HTTP
    engine's servers, key and routing, and the in-process engine's dtype, KV cache size and
    drafting. Plain values, so a Ray worker opens its engine from the same object."""

    engine: str = "vllm"
    model: str | None = None
    base_url: Sequence[str] | None = None
    api_key: str | None = None
    routing: Policy = "affine"
    dtype: str | None = None
    kv_cache_gib: float | None = None
    drafting: str | None = None
    draft_max_batch: int | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EngineOptions:
        """The engine options on ``args`` (a command without one of them leaves its default)."""
        return cls(
            engine=getattr(args, "engine", "vllm"),
            model=getattr(args, "model", None),
            base_url=getattr(args, "base_url", None),
            api_key=getattr(args, "api_key", None),
            routing=getattr(args, "routing", "affine"),
            dtype=getattr(args, "dtype", None),
            kv_cache_gib=getattr(args, "kv_cache_gib", None),
            drafting=getattr(args, "drafting", None),
            draft_max_batch=getattr(args, "draft_max_batch", None),
        )

    def http_settings(self) -> HTTPEngineSettings:
        """The HTTP engine's settings these options name (``--engine http``)."""
        from harness.engines.openai_http import HTTPEngineSettings

        assert self.base_url
        return HTTPEngineSettings(
            self.base_url, self.model or "default", api_key=self.api_key, routing=self.routing
        )

    def embedded_overrides(self) -> dict[str, Any]:
        """The in-process engine's settings the options name (``--dtype``,
        ``--kv-cache-gib``, ``--drafting``, ``--draft-max-batch``; a command without one
        leaves its default, but drafting is on unless ``--drafting none``:
        :data:`DEFAULT_DRAFTING`, :data:`DEFAULT_DRAFT_MAX_BATCH`), checked now: a missing
        extra is a one-line ConfigError before the engine starts."""
        overrides: dict[str, Any] = {
            name: value
            for name, value in (("dtype", self.dtype), ("kv_cache_gib", self.kv_cache_gib))
            if value is not None
        }
        return overrides | _drafting_overrides(self.drafting, self.draft_max_batch)


def embedded_engine_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """:meth:`EngineOptions.embedded_overrides` of the options on ``args``."""
    return EngineOptions.from_args(args).embedded_overrides()


def _drafting_overrides(drafting: str | None, draft_max_batch: int | None) -> dict[str, Any]:
    drafting = drafting or DEFAULT_DRAFTING
    if draft_max_batch is not None and drafting != "window":
        raise ConfigError(
            f"--draft-max-batch is the window proposer's, not {drafting}'s: drop one of "
            "--drafting and --draft-max-batch."
        )
    if drafting == "none":
        return {}
    from harness.engines.vllm import speculative_config

    speculative_config(drafting)
    overrides: dict[str, Any] = {"drafting": drafting}
    if drafting == "window":
        overrides["draft_max_batch"] = (
            DEFAULT_DRAFT_MAX_BATCH if draft_max_batch is None else draft_max_batch
        )
    return overrides


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _gib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of GiB: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 GiB, not {text}")
    return value


def add_kv_cache_argument(group: argparse._ActionsContainer) -> None:
    """``--kv-cache-gib``: shared by the engine options and ``harness serve``."""
    group.add_argument(
        "--kv-cache-gib",
        metavar="GIB",
        type=_gib,
        default=None,
        help="for the in-process vLLM engine: the KV cache's size (default 2). It holds the "
        "tokens of the running requests, and what they leave is the prefix cache, which "
        "spares a loop's next turn the prefill of its chat so far. One token of SmolLM2-135M "
        "takes 23,040 bytes in bf16 (2 x 30 layers x 3 KV heads x 64 dims x 2 bytes; twice "
        "that in float32), so 2 GiB holds ~93k tokens. Too small and prefixes are evicted "
        "before their next turn (more prefill, slower turns, the same text); below one "
        "request of 8,192 tokens (~0.18 GiB) the engine cannot start (a usage error)",
    )


def announce_engine_start() -> None:
    """Say on stderr that the in-process engine is starting (it is silent for 10-50 s)."""
    print("starting the engine… (vLLM, in-process: 10-50 s)", file=sys.stderr, flush=True)


@asynccontextmanager
async def open_engine(options: EngineOptions) -> AsyncIterator[Engine]:
    """Open the engine ``options`` name; closes it on exit."""
    kind = options.engine
    if kind == "scripted":
        from harness.testing import ScriptedEngine

        async with ScriptedEngine() as scripted:
            yield scripted
        return
    if kind == "http":
        if not options.base_url:
            raise ConfigError("--engine http needs --base-url, e.g. http://127.0.0.1:8000/v1.")
        from harness.engines.openai_http import OpenAIHTTPEngine

        async with OpenAIHTTPEngine.from_settings(options.http_settings()) as http:
            yield http
        return
    from harness.engines.vllm import open_default_engine

    overrides = options.embedded_overrides()
    announce_engine_start()
    async with open_default_engine(options.model, **overrides) as engine:
        yield engine
