"""Tool nodes run beside each other only when their calls commute (D1, as in a window).

Before a tool node's call runs, it is checked with :func:`harness.certify.check_d1` against
every call still running; if any pair may not commute (overlapping or unknown write targets,
a read of something being written), it waits until those calls finish. Calls to unknown tools
skip the check: :func:`harness.tools.execute.execute_call` turns them into error results at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from harness.certify import check_d1
from harness.messages import ToolCall
from harness.tools.toolset import Toolset

__all__ = ("Isolation",)


class Isolation:
    """Tool nodes run beside each other only when their calls commute (D1)."""

    def __init__(self, toolset: Toolset | None) -> None:
        self._toolset = toolset
        self._running: list[ToolCall] = []
        self._changed = anyio.Event()

    def _conflicts(self, call: ToolCall) -> bool:
        if self._toolset is None or call.name not in self._toolset:
            return False
        return any(check_d1(self._toolset, [other, call]) for other in self._running)

    @asynccontextmanager
    async def slot(self, call: ToolCall) -> AsyncIterator[None]:
        while self._conflicts(call):
            await self._changed.wait()
        self._running.append(call)
        try:
            yield
        finally:
            self._running.remove(call)
            self._changed.set()
            self._changed = anyio.Event()
