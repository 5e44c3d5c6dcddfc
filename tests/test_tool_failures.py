"""A tool that raises or times out spends its own budget (max_tool_failures), named by the
tool and its timeout, never the model's mistake budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from harness import Task, Toolset, UsageLimitExceeded, tool
from harness.loop import LoopConfig, run_loop
from harness.testing import ScriptedEngine

pytestmark = pytest.mark.anyio


def _script(replies: list[Any]) -> Any:
    it = iter(replies)

    def script(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Any:
        return next(it)

    return script


def _slow_toolset(slow_for: int) -> Toolset:
    calls = []

    @tool(read_only=True, timeout_s=0.01)
    async def fetch(key: str) -> str:
        """Fetch a page (slow for its first calls)."""
        calls.append(key)
        if len(calls) <= slow_for:
            await anyio.sleep(5)
        return f"page {key}"

    return Toolset([fetch])


async def test_a_tool_that_keeps_timing_out_ends_the_run_naming_the_tool_not_the_prompt():
    replies = [{"name": "fetch", "arguments": {"key": str(i)}} for i in range(10)]
    with pytest.raises(UsageLimitExceeded) as caught:
        await run_loop(
            ScriptedEngine(_script(replies)), _slow_toolset(10), Task(id="t", prompt="p"),
            LoopConfig(max_model_errors=0, max_tool_failures=3),
        )  # fmt: skip
    message = str(caught.value)
    assert message.startswith("Tool 'fetch' failed: 4 tool calls in a row raised or timed out")
    assert "timed out after 0.0 s" in message
    assert "max_tool_failures=3" in message
    assert "prompt" not in message
    assert caught.value.tool == "fetch"


async def test_tool_failures_do_not_spend_the_model_mistake_budget():
    replies = [{"name": "fetch", "arguments": {"key": str(i)}} for i in range(3)] + ["done"]
    result = await run_loop(
        ScriptedEngine(_script(replies)), _slow_toolset(2), Task(id="t", prompt="p"),
        LoopConfig(max_model_errors=0, max_tool_failures=2),
    )  # fmt: skip
    assert result.answer == "done"
    assert result.summary.model_errors == 0
    assert result.summary.extra["tool_failures"] == 2
    assert [r.error_kind for r in result.call_records] == ["timeout", "timeout", None]
