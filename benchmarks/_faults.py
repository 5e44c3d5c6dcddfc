"""Faults for the crash-resume benchmark: where to SIGKILL a run.

The runs it kills work on :mod:`harness.toolsets.workspace.durable` (the workspace store on disk,
whose application log is the ground truth for repeated and lost writes).

:class:`Faults` kills the process (SIGKILL: no cleanup, no flush) at the ``k``-th occurrence
of a chosen point: ``before_write`` (the call's intent is journaled and the tool is running,
its write not done), ``after_write`` (the write is committed, its outcome not journaled),
``window`` (a generation while a window's results are withheld), ``absorb`` (the generation
right after a window closed).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.certify import DEFAULT_MARKER
from harness.engines.base import GenerationSettings
from harness.messages import Completion, Message, ToolSpec
from harness.testing import ScriptedEngine

__all__ = ("POINTS", "Faults", "FaultyEngine")

#: Where :class:`Faults` can kill a run.
POINTS: tuple[str, ...] = ("before_write", "after_write", "window", "absorb")


@dataclass
class Faults:
    """Counts the occurrences of each point; SIGKILLs this process at ``target``'s ``k``-th
    (1-based). With no target it only counts (the reference run)."""

    target: str | None = None
    k: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(POINTS, 0))

    def __call__(self, point: str) -> None:
        self.hit(point)

    def hit(self, point: str) -> None:
        self.counts[point] += 1
        if point == self.target and self.counts[point] == self.k:
            os.kill(os.getpid(), signal.SIGKILL)


class FaultyEngine(ScriptedEngine):
    """The scripted engine (gold replies) that reports ``window`` and ``absorb`` points: a
    request whose chat holds withheld results, or the first one after such a request."""

    def __init__(self, faults: Faults, marker: str = DEFAULT_MARKER) -> None:
        super().__init__()
        self.faults = faults
        self.marker = marker
        self._withheld = 0

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> Completion:
        withheld = sum(
            1 for m in messages if m.get("role") == "tool" and m.get("content") == self.marker
        )
        if withheld:
            self.faults.hit("window")
        elif self._withheld:
            self.faults.hit("absorb")
        self._withheld = withheld
        return await super().generate(messages, tools, settings)
