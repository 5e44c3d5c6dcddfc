"""agent-harness: run unattended tool-calling loops without the waste of serial tool calling.

The public API is re-exported here; see README.md for the tour.
"""

from __future__ import annotations

from harness.calls import ToolResult, execute_call
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
from harness.errors import (
    ConfigError,
    EngineDeadError,
    EngineError,
    EngineRequestError,
    HarnessError,
    ManifestError,
    ReplayDivergence,
    ToolsetError,
    UsageLimitExceeded,
)
from harness.manifest import ArgSource, Manifest, Phase, Skill, load_manifest
from harness.task import GoldCall, Task
from harness.tools import Effect, Tool, Toolset, tool

__all__ = (
    "ArgSource",
    "Completion",
    "ConfigError",
    "Effect",
    "Engine",
    "EngineDeadError",
    "EngineError",
    "EngineRequestError",
    "GenerationSettings",
    "GoldCall",
    "HarnessError",
    "Manifest",
    "ManifestError",
    "Message",
    "Phase",
    "ReplayDivergence",
    "Skill",
    "Task",
    "Timings",
    "Tool",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Toolset",
    "ToolsetError",
    "Usage",
    "UsageLimitExceeded",
    "execute_call",
    "load_manifest",
    "tool",
)
