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

__all__ = (
    "Completion",
    "Engine",
    "GenerationSettings",
    "Message",
    "Timings",
    "ToolCall",
    "ToolSpec",
    "Usage",
)
