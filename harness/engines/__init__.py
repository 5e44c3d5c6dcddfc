"""Model backends behind one protocol (:mod:`harness.engines.base`).

The protocol and its values load with this package; the engines themselves load on first use
(``harness.engines.OpenAIHTTPEngine`` imports httpx, ``harness.engines.VLLMEngine`` the engine
module, which imports vLLM only when an engine starts).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness.engines.base import Engine, GenerationSettings
from harness.messages import Completion, Message, Timings, ToolCall, ToolSpec, Usage

if TYPE_CHECKING:
    from harness.engines.openai_http import OpenAIHTTPEngine
    from harness.engines.router import Router
    from harness.engines.vllm import CacheStats, VLLMEngine, VLLMSettings, open_default_engine

_LAZY: dict[str, str] = {
    "OpenAIHTTPEngine": "harness.engines.openai_http",
    "Router": "harness.engines.router",
    "CacheStats": "harness.engines.vllm",
    "VLLMEngine": "harness.engines.vllm",
    "VLLMSettings": "harness.engines.vllm",
    "open_default_engine": "harness.engines.vllm",
}

__all__ = (
    "CacheStats",
    "Completion",
    "Engine",
    "GenerationSettings",
    "Message",
    "OpenAIHTTPEngine",
    "Router",
    "Timings",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "VLLMEngine",
    "VLLMSettings",
    "open_default_engine",
)


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module 'harness.engines' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
