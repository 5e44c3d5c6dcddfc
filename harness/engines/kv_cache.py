"""The KV cache's size in tokens: the arithmetic behind ``kv_cache_gib`` (``--kv-cache-gib``).

For every token of every request the engine holds, each layer keeps a key and a value vector
per KV head: ``2 × layers × kv_heads × head_dim × bytes`` per token. SmolLM2-135M in bf16
(30 layers, 3 KV heads of 64 dimensions) takes 2 × 30 × 3 × 64 × 2 = 23,040 bytes (~23 KB)
per token, so the default 2 GiB holds ~93k tokens.

vLLM carves the KV cache into blocks of ``block_size`` tokens and keeps one block back. The
running requests hold the blocks of their tokens; every other block is the **prefix cache**:
blocks of earlier requests, kept so a later prompt that starts with the same tokens skips
their prefill, and evicted least recently used first when a running request needs room. So a
cache sized for the running requests alone leaves no room for prefixes: a loop's next turn
re-prefills its whole chat (the paper's cache-cold regime, ``h_R`` → 0). A cache smaller than
one request of ``max_model_len`` cannot run at all; :func:`check_fits` says so before vLLM
starts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from harness.errors import ConfigError

__all__ = (
    "GIB",
    "CacheSizing",
    "check_fits",
    "kv_bytes_per_token",
    "min_kv_cache_bytes",
    "model_kv_bytes",
)

GIB = 1 << 30

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}


class CacheSizing(Protocol):
    """What :func:`check_fits` reads of :class:`~harness.engines.vllm.VLLMSettings`."""

    @property
    def kv_cache_gib(self) -> float: ...
    @property
    def max_model_len(self) -> int: ...
    @property
    def block_size(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def extra(self) -> Mapping[str, Any]: ...


def kv_bytes_per_token(config: Mapping[str, Any], dtype: str = "auto") -> int | None:
    """``2 × layers × kv_heads × head_dim × bytes``: the KV cache one token takes, from a
    Hugging Face ``config.json``; ``None`` for a layout this arithmetic does not know
    (a nested text config, latent attention, sliding windows)."""
    if "text_config" in config or "kv_lora_rank" in config or config.get("sliding_window"):
        return None
    try:
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    if dtype == "auto":
        dtype = str(config.get("dtype") or config.get("torch_dtype") or "float32")
    width = _DTYPE_BYTES.get(dtype)
    if width is None:
        return None
    return 2 * layers * kv_heads * head_dim * width


def min_kv_cache_bytes(bytes_per_token: int, max_model_len: int, block_size: int) -> int:
    """The smallest KV cache vLLM starts with: the blocks of one ``max_model_len`` request
    plus the one block it keeps back."""
    return (math.ceil(max_model_len / block_size) + 1) * block_size * bytes_per_token


def model_kv_bytes(folder: Path, dtype: str = "auto") -> int | None:
    """:func:`kv_bytes_per_token` of the model folder's ``config.json`` (``None`` if unknown)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return kv_bytes_per_token(config, dtype) if isinstance(config, dict) else None


def check_fits(folder: Path, settings: CacheSizing) -> None:
    """Raise :class:`ConfigError` if ``settings.kv_cache_gib`` cannot hold one request of
    ``settings.max_model_len`` tokens of the model in ``folder`` (nothing to check when the
    per-token size is unknown or the KV cache's dtype is overridden)."""
    if settings.extra.get("kv_cache_dtype", "auto") != "auto":
        return
    per_token = model_kv_bytes(folder, settings.dtype)
    if per_token is None:
        return
    given = int(settings.kv_cache_gib * GIB)
    needed = min_kv_cache_bytes(per_token, settings.max_model_len, settings.block_size)
    if given >= needed:
        return
    at_least = math.ceil(needed / GIB * 1000) / 1000
    raise ConfigError(
        f"kv_cache_gib {settings.kv_cache_gib:g} (--kv-cache-gib) holds {given // per_token:,} "
        f"tokens of {folder.name} ({per_token:,} bytes each); one request of max_model_len "
        f"{settings.max_model_len:,} needs {needed // per_token:,} (whole blocks of "
        f"{settings.block_size} and the one vLLM keeps back): give at least {at_least:g} GiB, "
        "or lower max_model_len."
    )
