"""agent-harness: run unattended tool-calling loops without the waste of serial tool calling.

The public API is re-exported here; see README.md for the tour.
"""

from __future__ import annotations

from harness.calls import ToolResult, execute_call
from harness.costmodel import (
    Regime,
    WindowCosts,
    best_arm,
    crossover_gap_tokens,
    crossover_gap_wall,
    flip_window,
    token_dividend_flattened,
    tokens_flattened,
    tokens_parallel,
    tokens_parallel_validated,
    tokens_serial,
    wall_dividend_flattened,
    wall_time_flattened,
    wall_time_parallel,
    wall_time_parallel_validated,
    wall_time_serial,
    window_costs,
)
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
    "Regime",
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
    "WindowCosts",
    "best_arm",
    "crossover_gap_tokens",
    "crossover_gap_wall",
    "execute_call",
    "flip_window",
    "load_manifest",
    "token_dividend_flattened",
    "tokens_flattened",
    "tokens_parallel",
    "tokens_parallel_validated",
    "tokens_serial",
    "tool",
    "wall_dividend_flattened",
    "wall_time_flattened",
    "wall_time_parallel",
    "wall_time_parallel_validated",
    "wall_time_serial",
    "window_costs",
)
