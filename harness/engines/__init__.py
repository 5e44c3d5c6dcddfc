"""Model backends behind one protocol (:mod:`harness.engines.base`)."""

from __future__ import annotations

from harness.engines.base import (
    Completion,
    Engine,
    GenerationSettings,
    Message,
    Timings,
    ToolCall,
    ToolSpec,
    Usage,
)
from harness.engines.openai_http import OpenAIHTTPEngine
from harness.engines.router import Router
from harness.engines.vllm import CacheStats, VLLMEngine, VLLMSettings, open_default_engine

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
