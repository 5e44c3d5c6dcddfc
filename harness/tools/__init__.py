"""Tools and toolsets: what a tool is, what its calls do to the world, and how calls run.

A :class:`Tool` is a name, a JSON Schema for its arguments, a callable (async or sync) and an
:class:`Effect`: what the call does to the world. A :class:`Toolset` holds named tools, loaded
from Python (:func:`tool`), from OpenAI-style function specs (:meth:`Toolset.from_openai`) or
from an MCP server (:meth:`Toolset.from_mcp`).

Layout: :mod:`~harness.tools.toolset` (:class:`Tool`, :class:`Toolset`, :func:`tool`),
:mod:`~harness.tools.effects` (:class:`Effect`, write and read targets, canonical arguments),
:mod:`~harness.tools.identity` (the canonical text of a value: when two arguments name the same
thing), :mod:`~harness.tools.execute` (running calls: results, timeouts, tool mistakes),
:mod:`~harness.tools.mcp` (tools from an MCP server; the ``mcp`` extra),
:mod:`~harness.tools.ref` (a toolset named on the command line, ``module:attribute``).

The names below are those ``harness.tools`` exported when it was one module, so
``from harness.tools import Toolset`` keeps working.
"""

from __future__ import annotations

from harness.tools.toolset import (
    IDEMPOTENCY_KEY_ARG,
    Effect,
    Fold,
    Tool,
    Toolset,
    ToolThread,
    WriteTargets,
    tool,
)

__all__ = (
    "IDEMPOTENCY_KEY_ARG",
    "Effect",
    "Fold",
    "Tool",
    "ToolThread",
    "Toolset",
    "WriteTargets",
    "tool",
)
