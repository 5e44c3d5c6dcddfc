"""Decode speed of the harness's engine against raw vLLM, side by side in one invocation.

``python -m benchmarks.decode_bench [--reps 5] [--tokens 128] [--phases quiet,loaded]
[--texts free,forced,prefill] [--variant raw --variant harness ...] [--out DIR]``

Each variant is an engine in its own process, started once and kept for the whole run:

- ``raw``: vLLM's ``AsyncLLM`` with vLLM's own CPU defaults (its thread binding, its start
  method, its ``LD_PRELOAD``), the same engine arguments as the harness
  (:meth:`harness.engines.vllm.VLLMSettings.engine_args`), the same prompt token ids and the
  same structured-output constraint;
- ``harness``: :func:`harness.engines.vllm.open_default_engine` and ``engine.generate``, as a
  user's script would run it.

A variant may carry options after a colon, ``harness:threads_bind=0-1`` (a
``VLLMSettings`` field) or ``harness:VLLM_WORKER_MULTIPROC_METHOD=fork`` (an environment
variable set before the engine starts), comma separated; the label is the whole spec.

Three kinds of text: *free* (greedy, a story prompt), *forced* (the gold policy's path: a
tool call forced through vLLM's ``choice`` constraint, every token prefilled and decoded by
the model; the short and the long reply answer the same prompt) and, with ``--texts``,
*prefill* (a ~1.1k-token prompt and one token, against a tiny prompt: prompt tokens per
second). Each measurement is a pair of requests on the same prompt kind, a short one and a
long one (unique prompts, so neither hits the prefix cache): the decode rate is the extra
tokens of the long reply over the extra wall time it took, so what every request pays once
(tokenising, scheduling, prefill, the output path) cancels and what is left is the cost of a
decoded token as the caller sees it. The engine's own first-to-last-token rate is kept too.

Each engine process leads its own process group and kills it when the benchmark ends or dies
(even by SIGKILL: the kernel sends it SIGTERM), so no engine outlives a run.

The variants take turns within every repetition (the order rotates each repetition), so each
sees the same machine. The ``loaded`` phase runs beside a fixed, bounded load the benchmark
starts and stops itself: one busy-looping process per CPU. The other engines sit idle while
one is measured. Results (``decode.jsonl``, one JSON row per measured pair; not ``results.jsonl``, the name of arm runs' rows) and ``report.md`` go to ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = ("Variant", "main", "parse_variant", "summarise")

_MARK = "@@decode_bench "
_STORY = (
    "[{tag}] Write a long, detailed story about a lighthouse keeper and the ships she guides. "
    "Keep going for many paragraphs."
)
_WORDS = (
    "harbour", "lantern", "keeper", "storm", "ship", "rope", "tide", "signal", "night",
    "window", "stone", "gull", "beacon", "fog", "oil", "wick", "ledger", "anchor", "wave",
)  # fmt: skip
_WRITE_DOC = {
    "type": "function",
    "function": {
        "name": "write_doc",
        "description": "Write a document.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string"}, "body": {"type": "string"}},
            "required": ["key", "body"],
            "additionalProperties": False,
        },
    },
}


# -------------------------------------------------------------------------- the requests


def _body(words: int) -> str:
    return " ".join(_WORDS[(i * 7) % len(_WORDS)] for i in range(words))


def request(text: str, size: str, tag: str, tokens: int) -> dict[str, Any]:
    """One request both sides run the same way: the chat, tools, forced reply (or None) and
    the token cap."""
    if text == "prefill":  # a long prompt and one token: the rate is prompt tokens per second
        words = _body(int(tokens * 8) if size == "long" else 4)
        return {
            "messages": [{"role": "user", "content": f"[{tag}] Summarise: {words}"}],
            "tools": [],
            "forced": None,
            "max_tokens": 1,
        }
    if text == "free":
        return {
            "messages": [{"role": "user", "content": _STORY.format(tag=tag)}],
            "tools": [],
            "forced": None,
            "max_tokens": tokens + 1 if size == "long" else 1,
        }
    # ~1.1 tokens a word in this vocabulary: the long body makes a reply of about `tokens`.
    body = _body(int(tokens * 0.85)) if size == "long" else "ok"
    arguments = json.dumps({"key": tag, "body": body})
    return {
        "messages": [
            # The same prompt for both sizes: only the forced reply's length differs.
            {"role": "user", "content": f"[{tag}] Save a note as document {tag}."}
        ],
        "tools": [_WRITE_DOC],
        "forced": {"name": "write_doc", "arguments": arguments},
        "max_tokens": 16,
    }


# -------------------------------------------------------------------------- the engines (child)


class _Side:
    async def start(self) -> None:
        raise NotImplementedError

    async def run(self, req: dict[str, Any]) -> tuple[int, int, float]:
        """Generate; the prompt and completion tokens and the engine's first-to-last-token
        seconds."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


class _Harness(_Side):
    def __init__(self, model: str | None, settings: dict[str, str]) -> None:
        self.model, self.settings = model, settings
        self.stack = contextlib.AsyncExitStack()
        self.engine: Any = None

    async def start(self) -> None:
        from harness.engines.vllm import VLLMSettings, open_default_engine

        overrides: dict[str, Any] = {}
        for key, value in self.settings.items():
            default = getattr(VLLMSettings(), key)
            overrides[key] = type(default)(value) if default is not None else value
        self.engine = await self.stack.enter_async_context(
            open_default_engine(self.model, **overrides)
        )

    async def run(self, req: dict[str, Any]) -> tuple[int, int, float]:
        from harness.engines.base import GenerationSettings
        from harness.messages import ToolCall

        forced = req["forced"]
        settings = GenerationSettings(
            max_tokens=req["max_tokens"],
            forced=None if forced is None else (ToolCall("call_0", **forced),),
        )
        done = await self.engine.generate(req["messages"], req["tools"], settings)
        usage = done.usage
        return usage.prompt_tokens, usage.completion_tokens, done.timings.decode_s

    async def close(self) -> None:
        await self.stack.aclose()


class _Raw(_Side):
    def __init__(self, model: str | None, settings: dict[str, str]) -> None:
        self.model = model
        if settings:
            raise SystemExit(f"raw takes environment variables only, not {sorted(settings)}")
        self.llm: Any = None
        self.count = 0

    async def start(self) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        from harness.engines.vllm import VLLMSettings

        folder = self.model
        if folder is None:
            from harness.engines.model import prepare_model

            folder = str(prepare_model(None))
        args = VLLMSettings().engine_args(folder)
        self.llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
        self.tokenizer = self.llm.get_tokenizer()

    async def run(self, req: dict[str, Any]) -> tuple[int, int, float]:
        from vllm import SamplingParams
        from vllm.inputs.engine import tokens_input
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        from harness.engines import _format
        from harness.messages import ToolCall

        rendered = _format.render_messages(req["messages"], req["tools"], False)
        prompt = self.tokenizer.apply_chat_template(
            rendered, tokenize=False, add_generation_prompt=True
        )
        ids = self.tokenizer.encode(prompt, add_special_tokens=False)
        structured, max_tokens = None, req["max_tokens"]
        if req["forced"] is not None:
            text = _format.serialize_calls([ToolCall("call_0", **req["forced"])])
            structured = StructuredOutputsParams(choice=[text])
            max_tokens = len(text.encode()) + 8  # as the harness does
        params = SamplingParams(
            temperature=0.0,
            max_tokens=max_tokens,
            structured_outputs=structured,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        self.count += 1
        final: Any = None
        async for output in self.llm.generate(tokens_input(ids), params, f"raw-{self.count}"):
            final = output
        metrics = final.metrics
        decode = max(0.0, float(metrics.last_token_ts) - float(metrics.first_token_ts))
        return len(ids), len(final.outputs[0].token_ids), decode

    async def close(self) -> None:
        llm, self.llm = self.llm, None
        llm.shutdown()


def _end_engine_group(signum: int, frame: object) -> None:
    os.killpg(0, signal.SIGKILL)  # this process and every engine process below it


def _die_with_parent() -> None:
    """When the benchmark that started this process dies, even by SIGKILL, end this process
    and its engine's (Linux): the kernel sends SIGTERM, which kills the process group this
    child leads (vLLM's spawned engine core would otherwise outlive it)."""
    signal.signal(signal.SIGTERM, _end_engine_group)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() == 1:  # the benchmark died before the signal was armed
        _end_engine_group(signal.SIGTERM, None)


def _emit(payload: dict[str, Any]) -> None:
    sys.stdout.write(_MARK + json.dumps(payload) + "\n")
    sys.stdout.flush()


async def _serve(kind: str, model: str | None, settings: dict[str, str]) -> None:
    import anyio

    side: _Side = _Raw(model, settings) if kind == "raw" else _Harness(model, settings)
    await side.start()
    _emit({"ready": True})
    try:
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            req = json.loads(line)
            started = time.perf_counter()
            prompt, tokens, decode_s = await side.run(req)
            wall = time.perf_counter() - started
            _emit({"wall_s": wall, "prompt": prompt, "tokens": tokens, "decode_s": decode_s})
    finally:
        await side.close()


def _serve_main(spec: str, model: str | None) -> int:
    import anyio

    _die_with_parent()
    variant = parse_variant(spec)
    os.environ.update(variant.environment)
    anyio.run(_serve, variant.kind, model, variant.settings)
    return 0


# -------------------------------------------------------------------------- the benchmark (parent)


@dataclass(frozen=True)
class Variant:
    """``raw`` or ``harness``, with environment variables (upper case) and, for the harness,
    ``VLLMSettings`` fields (lower case)."""

    spec: str
    kind: str
    environment: dict[str, str]
    settings: dict[str, str]


def parse_variant(spec: str) -> Variant:
    kind, _, rest = spec.partition(":")
    if kind not in ("raw", "harness"):
        raise SystemExit(f"variant {spec!r}: starts with raw or harness")
    environment: dict[str, str] = {}
    settings: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(f"variant {spec!r}: {item!r} is not KEY=VALUE")
        (environment if key.isupper() else settings)[key] = value
    return Variant(spec, kind, environment, settings)


class _Child:
    def __init__(self, variant: Variant, model: str | None, log: IO[str]) -> None:
        self.variant = variant
        command = [sys.executable, "-m", "benchmarks.decode_bench", "--serve", variant.spec]
        if model:
            command += ["--model", model]
        self.started = time.perf_counter()
        # A session of its own, so close() can end the engine processes vLLM starts below it
        # (a spawned engine core outlives a killed parent).
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
            start_new_session=True,
        )  # fmt: skip
        self.ready_s = 0.0

    def wait_ready(self) -> None:
        self._read()
        self.ready_s = time.perf_counter() - self.started

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(_MARK):
                reply: dict[str, Any] = json.loads(line[len(_MARK) :])
                return reply
        raise SystemExit(f"{self.variant.spec}: the engine process ended (see its log)")

    def run(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(req) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # whatever is left of its engine
        self.process.wait()


@contextlib.contextmanager
def busy_load(processes: int) -> Iterator[None]:
    """``processes`` busy-looping Python processes for the duration of the block."""
    code = (
        "import ctypes, signal\n"
        "ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)\n"
        "while True:\n    pass\n"
    )
    hogs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(processes)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


def _pair(child: _Child, text: str, tag: str, tokens: int) -> dict[str, Any]:
    short = child.run(request(text, "short", f"{tag}s", tokens))
    long = child.run(request(text, "long", f"{tag}l", tokens))
    counted = "prompt" if text == "prefill" else "tokens"
    extra_tokens = long[counted] - short[counted]
    extra_s = long["wall_s"] - short["wall_s"]
    decoded = long["decode_s"] and text != "prefill"
    return {
        "rate": extra_tokens / extra_s if extra_s > 0 else 0.0,
        "engine_rate": (long["tokens"] - 1) / long["decode_s"] if decoded else 0.0,
        "prompt_tokens": long["prompt"],
        "tokens": long["tokens"],
        "short_tokens": short["tokens"],
        "long_wall_s": long["wall_s"],
        "short_wall_s": short["wall_s"],
    }


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    variants = [parse_variant(spec) for spec in args.variants or ("raw", "harness")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    texts = args.texts.split(",")
    rows: list[dict[str, Any]] = []
    children: list[_Child] = []
    with (out / "engines.log").open("w") as log, contextlib.ExitStack() as stack:
        for variant in variants:
            print(f"starting {variant.spec} ...", flush=True)
            child = _Child(variant, args.model, log)
            stack.callback(child.close)
            child.wait_ready()
            children.append(child)
            print(f"  ready in {child.ready_s:.1f} s", flush=True)
            rows.append({"phase": "start", "variant": variant.spec, "ready_s": child.ready_s})
        for child in children:  # warm up both paths (first-request costs are not decode)
            for text in texts:
                _pair(child, text, "warm", args.tokens)
        for phase in args.phases.split(","):
            load = busy_load(os.cpu_count() or 1) if phase == "loaded" else contextlib.nullcontext()
            with load:
                time.sleep(1.0 if phase == "loaded" else 0.0)
                for rep in range(args.reps):
                    shift = rep % len(children)
                    for text in texts:
                        for child in children[shift:] + children[:shift]:
                            row = _pair(child, text, f"{phase[0]}{rep}{text[:2]}", args.tokens)
                            row |= {"phase": phase, "variant": child.variant.spec}
                            row |= {"text": text, "rep": rep, "loadavg": os.getloadavg()[0]}
                            rows.append(row)
                            print(
                                f"  {phase:<7} rep {rep} {text:<6} {child.variant.spec:<40} "
                                f"{row['rate']:6.1f} tok/s  (engine {row['engine_rate']:.1f})",
                                flush=True,
                            )
    return rows


def summarise(rows: Sequence[dict[str, Any]], baseline: str) -> list[dict[str, Any]]:
    """Per phase, text and variant: median rates, and the ratio to ``baseline``'s median."""
    measured = [r for r in rows if r.get("phase") != "start"]
    keys = sorted({(r["phase"], r["text"]) for r in measured}, key=lambda k: (k[0] != "quiet", k))
    variants = list(dict.fromkeys(r["variant"] for r in measured))
    table = []
    for phase, text in keys:
        medians: dict[str, tuple[float, float, int]] = {}
        for variant in variants:
            mine = [
                r
                for r in measured
                if (r["phase"], r["text"], r["variant"]) == (phase, text, variant)
            ]
            if mine:
                rate = statistics.median(r["rate"] for r in mine)
                engine_rate = statistics.median(r["engine_rate"] for r in mine)
                medians[variant] = (rate, engine_rate, len(mine))
        base = medians.get(baseline, (0.0, 0.0, 0))[0]
        for variant, (rate, engine_rate, n) in medians.items():
            table.append(
                {
                    "phase": phase, "text": text, "variant": variant, "rate": rate,
                    "engine_rate": engine_rate, "n": n, "ratio": rate / base if base else None,
                }
            )  # fmt: skip
    return table


def _loads(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    phases = dict.fromkeys(r["phase"] for r in rows if r.get("phase") != "start")
    return {p: statistics.median(r["loadavg"] for r in rows if r["phase"] == p) for p in phases}


def report(rows: Sequence[dict[str, Any]], command: str) -> str:
    variants = [r["variant"] for r in rows if r.get("phase") == "start"]
    table = summarise(rows, variants[0])
    lines = [
        "# Decode speed: the harness's engine beside raw vLLM",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {os.cpu_count()} CPUs. Decode rate = extra tokens of a long reply over its "
        "extra wall time against a short reply (median over repetitions); *engine* = vLLM's "
        f"first-to-last-token rate of the long reply; ratio = rate / {variants[0]}'s rate in "
        "the same phase of the same run. *loaded*: one busy-looping process per CPU beside the "
        "engine, started and stopped by the benchmark; *quiet*: no load of the benchmark's "
        "own (other jobs on the machine ran as they did: median load average "
        + ", ".join(f"{phase} {avg:.1f}" for phase, avg in _loads(rows).items())
        + "). *prefill* rows are prompt tokens per second (a ~1k-token prompt, one token).",
        "",
        "| phase | text | variant | tok/s | engine tok/s | ratio | n |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table:
        ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "—"
        lines.append(
            f"| {row['phase']} | {row['text']} | `{row['variant']}` | {row['rate']:.1f} | "
            f"{row['engine_rate']:.1f} | {ratio} | {row['n']} |"
        )
    lines += ["", "Engine ready (process start to first request accepted):", ""]
    lines += [
        f"- `{r['variant']}`: {r['ready_s']:.1f} s" for r in rows if r.get("phase") == "start"
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.decode_bench",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--variant", action="append", dest="variants", metavar="SPEC",
                        help="an engine to measure (repeat the option; default raw and "
                        "harness); the first is the baseline of the ratio")  # fmt: skip
    parser.add_argument("--phases", default="quiet,loaded", help="quiet and/or loaded")
    parser.add_argument("--texts", default="free,forced", help="free, forced and/or prefill "
                        "(a ~1k-token prompt, one token: prompt tokens per second)")  # fmt: skip
    parser.add_argument("--reps", type=int, default=5, help="pairs per variant, text, phase")
    parser.add_argument("--tokens", type=int, default=128, help="tokens of a long reply")
    parser.add_argument("--model", default=None, help="a local Hugging Face model folder")
    parser.add_argument("--out", default="benchmarks/results/decode/latest", help="output dir")
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return _serve_main(args.serve, args.model)
    if any(p not in ("quiet", "loaded") for p in args.phases.split(",")):
        parser.error("--phases takes quiet and/or loaded")
    if any(t not in ("free", "forced", "prefill") for t in args.texts.split(",")):
        parser.error("--texts takes free, forced and/or prefill")
    rows = run(args)
    out = Path(args.out)
    (out / "decode.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    command = "python -m benchmarks.decode_bench " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:])
    )
    text = report(rows, command.strip())
    (out / "report.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
