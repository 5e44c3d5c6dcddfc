"""Window mechanics of arm F: withhold, run concurrently, reveal at the absorb turn.

An :class:`OpenWindow` holds the calls certified into the current window. Each call's result
is *withheld*: the loop puts a short constant marker in its tool message. With eager dispatch
a call starts the moment it joins (its latency hides behind the window's remaining generation
turns); otherwise all calls start together when the window closes. :meth:`OpenWindow.close`
waits for every call and returns the results in emitted order, so the absorb turn sees every
call and result verbatim, exactly where the serial arm would have put them.

:func:`run_concurrently` runs a batch of calls in one task group; each call is isolated
(:func:`harness.calls.execute_call` turns every failure into an error result), so one failure
cannot cancel its siblings.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
from anyio.abc import TaskGroup

from harness.calls import ToolResult, execute_call
from harness.engines.base import ToolCall
from harness.tools import Toolset

__all__ = ("OpenWindow", "run_concurrently")


async def run_concurrently(toolset: Toolset, calls: Sequence[ToolCall]) -> list[ToolResult]:
    """Run ``calls`` concurrently; results in the order of ``calls``."""
    results: dict[str, ToolResult] = {}

    async def one(call: ToolCall) -> None:
        results[call.id] = await execute_call(toolset, call)

    async with anyio.create_task_group() as tg:
        for call in calls:
            tg.start_soon(one, call)
    return [results[c.id] for c in calls]


class OpenWindow:
    """The calls of the open window and (with eager dispatch) their running executions."""

    def __init__(self, toolset: Toolset, opened_turn: int, eager_group: TaskGroup | None) -> None:
        self.toolset = toolset
        self.opened_turn = opened_turn
        self.calls: list[ToolCall] = []
        self._eager = eager_group
        self._results: dict[str, ToolResult] = {}
        self._done: dict[str, anyio.Event] = {}

    def add(self, call: ToolCall) -> None:
        """Withhold ``call``; with eager dispatch, start it now."""
        self.calls.append(call)
        if self._eager is not None:
            self._done[call.id] = anyio.Event()
            self._eager.start_soon(self._run, call)

    async def _run(self, call: ToolCall) -> None:
        try:
            self._results[call.id] = await execute_call(self.toolset, call)
        finally:
            self._done[call.id].set()

    def finished_texts(self) -> tuple[str, ...]:
        """The result texts of the calls that have already finished (eager dispatch): what
        would leak if a later call of the window quoted them."""
        return tuple(r.content for r in self._results.values())

    async def close(self) -> list[ToolResult]:
        """Run (or finish running) every call; results in emitted order."""
        if self._eager is None:
            return await run_concurrently(self.toolset, self.calls)
        for call in self.calls:
            await self._done[call.id].wait()
        return [self._results[c.id] for c in self.calls]
