"""Executing one tool call, with every model mistake turned into an error result.

:func:`execute_call` never raises for anything the model or a tool did wrong: unknown tool,
invalid JSON, arguments that fail the schema, a tool that raises, a tool that times out, a
result over its size cap — each becomes a :class:`ToolResult` with ``is_error=True`` and a
message the model can act on (MCP's ``isError``). Only cancellation propagates. So one call's
failure can never cancel a sibling running in the same task group, and every call id gets
exactly one result.
"""

from __future__ import annotations

import difflib
import json
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio

from harness.engines.base import Message, ToolCall
from harness.tools import Toolset

__all__ = (
    "ErrorKind",
    "Executor",
    "ToolResult",
    "ToolsetExecutor",
    "execute_call",
    "render_result",
)

ErrorKind = Literal[
    "unknown_tool", "bad_json", "bad_arguments", "tool_raised", "timeout", "too_large"
]


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call: the text the model will see and how it was produced.

    ``value`` is the tool's raw return value (``None`` on error); ``content`` is its rendering
    (JSON for structured values). ``started``/``finished`` are ``time.monotonic()`` stamps.
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    error_kind: ErrorKind | None = None
    value: Any = None
    started: float = 0.0
    finished: float = 0.0

    @property
    def duration_s(self) -> float:
        return self.finished - self.started

    def to_message(self) -> Message:
        """The ``tool`` message that carries this result back to the model."""
        return {
            "role": "tool",
            "tool_call_id": self.call_id,
            "name": self.name,
            "content": self.content,
        }


def render_result(value: Any) -> str:
    """How a tool's return value is shown to the model: strings verbatim, everything else as
    compact, key-sorted JSON (deterministic, so S and F render identical bytes)."""
    if isinstance(value, str):
        return value
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "), default=str
    )


async def execute_call(toolset: Toolset, call: ToolCall) -> ToolResult:
    """Run one call against ``toolset``; see the module docstring for the error contract."""
    started = time.monotonic()

    def error(kind: ErrorKind, message: str) -> ToolResult:
        return ToolResult(
            call.id, call.name, f"Error: {message}", True, kind, None, started, time.monotonic()
        )

    if call.name not in toolset:
        close = difflib.get_close_matches(call.name, list(toolset), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return error(
            "unknown_tool",
            f"Unknown tool '{call.name}'.{hint} Available: {', '.join(toolset)}.",
        )
    tool = toolset[call.name]
    arguments = call.args.value
    if arguments is None:
        return error("bad_json", call.args.problem or "bad arguments")
    problems = tool.validation_errors(arguments)
    if problems:
        return error(
            "bad_arguments",
            f"Arguments for '{call.name}' do not match its schema: " + "; ".join(problems[:5]),
        )
    try:
        # move_on_after, not fail_after: a TimeoutError the tool raises itself is the tool's
        # failure, not our deadline (and must not be formatted as one when timeout_s is None).
        with anyio.move_on_after(tool.timeout_s) as deadline:
            value = await tool.invoke(arguments)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:  # a tool's failure is data for the model, never a crash
        return error("tool_raised", f"Tool '{call.name}' raised {type(exc).__name__}: {exc}")
    if deadline.cancelled_caught:
        return error(
            "timeout",
            f"Tool '{call.name}' timed out after {tool.timeout_s:.1f} s; "
            "raise its timeout or mark it idempotent so it can be retried.",
        )
    try:
        content = render_result(value)
    except Exception as exc:  # e.g. tuple keys or a cycle: the tool's mistake, not a crash
        return error(
            "tool_raised",
            f"Tool '{call.name}' returned a value that cannot be rendered as JSON "
            f"({type(exc).__name__}: {exc}); return JSON-compatible data.",
        )
    if tool.result_cap is not None and len(content) > tool.result_cap:
        return error(
            "too_large",
            f"Result of '{call.name}' is {len(content):,} characters, over its cap of "
            f"{tool.result_cap:,}; ask for less or raise the tool's result_cap.",
        )
    return ToolResult(call.id, call.name, content, False, None, value, started, time.monotonic())


class Executor(Protocol):
    """The call-execution seam: every call of every arm runs through one ``execute``.

    :class:`ToolsetExecutor` runs calls in process; a wrapper can record each call's intent
    before it starts and its outcome after (a journal), and an external executor can hand the
    call to a client and await its result (the proxy). Like :func:`execute_call`, it turns
    every model or tool mistake into an error result and raises only on cancellation.
    """

    async def execute(self, call: ToolCall) -> ToolResult: ...


class ToolsetExecutor:
    """Runs calls against a :class:`~harness.tools.Toolset` in this process."""

    def __init__(self, toolset: Toolset) -> None:
        self.toolset = toolset

    async def execute(self, call: ToolCall) -> ToolResult:
        return await execute_call(self.toolset, call)
