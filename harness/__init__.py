"""agent-harness: run unattended tool-calling loops without the waste of serial tool calling.

The names a user needs to write and run a loop are re-exported here: the loop
(:func:`run_loop`, :class:`LoopConfig`, :class:`LoopResult`), tools and manifests, tasks, the
engines' entry points and every error. Everything else stays under its module:
:mod:`harness.costmodel` (the closed forms), :mod:`harness.fabric` (the execution fabric),
:mod:`harness.certkit` (the certification kit), :mod:`harness.testing` (test doubles).

``import harness`` is light: it loads :mod:`harness.errors` and nothing else; each name below
is imported from its module the first time it is used (PEP 562 module ``__getattr__``), so a
script that never touches an engine never imports httpx or vLLM.

The library logs through structlog and is silent unless the application configures logging
(see :mod:`harness.loop.ledger`); the ``harness`` CLI turns it on with ``-v``.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import TYPE_CHECKING, Any

from harness.errors import (
    ConfigError,
    ContextWindowExceeded,
    EngineDeadError,
    EngineError,
    EngineRequestError,
    HarnessError,
    Interrupted,
    JournalError,
    ManifestError,
    NodeFailed,
    ReplayDivergence,
    ToolsetError,
    UsageLimitExceeded,
)

if TYPE_CHECKING:
    from harness.engines.base import Engine, GenerationSettings
    from harness.engines.model import prepare_model
    from harness.engines.openai_http import OpenAIHTTPEngine
    from harness.engines.vllm import VLLMEngine, VLLMSettings, open_default_engine
    from harness.loop import LoopConfig, LoopResult, run_loop
    from harness.loop.task import GoldCall, Task
    from harness.messages import Completion, Message, Timings, ToolCall, ToolSpec, Usage
    from harness.skills.manifest import Manifest, load_manifest
    from harness.tools.execute import ToolResult
    from harness.tools.toolset import Effect, Tool, Toolset, tool

__version__ = "0.1.0"


def _honour_vllm_log_level() -> None:
    """vLLM 0.32 applies ``VLLM_LOGGING_LEVEL`` only once it configures its logging, after its
    import has already logged start-up warnings through Python's last-resort handler (three
    copies of "Triton is installed, but doesn't include CPU backend" in a quiet run: the front
    end, the engine core and the worker). Setting the ``vllm`` logger's level from the
    variable (the quiet engine sets it before importing vLLM) drops the front end's copy; the
    engine core and worker processes, which vLLM spawns, still print theirs. Nothing happens
    unless the variable is set."""
    level = os.environ.get("VLLM_LOGGING_LEVEL", "").upper()
    if level in ("ERROR", "CRITICAL"):
        logging.getLogger("vllm").setLevel(level)


_honour_vllm_log_level()

#: Where each lazily exported name lives.
_LAZY: dict[str, str] = {
    # the loop
    "LoopConfig": "harness.loop",
    "LoopResult": "harness.loop",
    "run_loop": "harness.loop",
    # tools, manifests, tasks
    "Effect": "harness.tools",
    "Tool": "harness.tools",
    "ToolResult": "harness.tools.execute",
    "Toolset": "harness.tools",
    "tool": "harness.tools",
    "Manifest": "harness.skills.manifest",
    "load_manifest": "harness.skills.manifest",
    "GoldCall": "harness.loop.task",
    "Task": "harness.loop.task",
    # the chat vocabulary
    "Completion": "harness.messages",
    "Message": "harness.messages",
    "Timings": "harness.messages",
    "ToolCall": "harness.messages",
    "ToolSpec": "harness.messages",
    "Usage": "harness.messages",
    # engines: the protocol, the two engines, the packaged model
    "Engine": "harness.engines.base",
    "GenerationSettings": "harness.engines.base",
    "OpenAIHTTPEngine": "harness.engines.openai_http",
    "VLLMEngine": "harness.engines.vllm",
    "VLLMSettings": "harness.engines.vllm",
    "open_default_engine": "harness.engines.vllm",
    "prepare_model": "harness.engines.model",
}

__all__ = (
    "Completion",
    "ConfigError",
    "ContextWindowExceeded",
    "Effect",
    "Engine",
    "EngineDeadError",
    "EngineError",
    "EngineRequestError",
    "GenerationSettings",
    "GoldCall",
    "HarnessError",
    "Interrupted",
    "JournalError",
    "LoopConfig",
    "LoopResult",
    "Manifest",
    "ManifestError",
    "Message",
    "NodeFailed",
    "OpenAIHTTPEngine",
    "ReplayDivergence",
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
    "VLLMEngine",
    "VLLMSettings",
    "load_manifest",
    "open_default_engine",
    "prepare_model",
    "run_loop",
    "tool",
)


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
