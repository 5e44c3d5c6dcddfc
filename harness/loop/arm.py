"""The arm seam: what the driver hands each completion to.

An arm is a strategy object; the driver never compares arm names. Each arm says how it
prompts (:meth:`ArmStrategy.settings`: one call per reply, or a whole window per message, and
under the gold policy which calls are forced), whether results are withheld right now
(:attr:`ArmStrategy.window_open`), how it reviews a completion before handling it (P+V
resamples a rejected window; the others keep it), and how it handles it
(:meth:`ArmStrategy.handle`: True when the run is finished).

Every arm is constructed as ``Arm(state, detector, group)`` (``group``: the run's task group,
where eager dispatch starts calls). Adding an arm (e.g. F with speculation) is one new module
implementing this protocol and one entry in :data:`harness.loop.driver.STRATEGIES`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from harness.engines.base import Completion, GenerationSettings
from harness.loop.state import RunState

__all__ = ("ArmStrategy", "gold_answer", "with_room_for_forced")


class ArmStrategy(Protocol):
    @property
    def window_open(self) -> bool: ...

    def settings(self) -> GenerationSettings: ...

    async def review(self, completion: Completion) -> Completion: ...

    async def handle(self, completion: Completion) -> bool: ...


def with_room_for_forced(settings: GenerationSettings) -> GenerationSettings:
    """Room for the whole forced reply, whatever ``max_tokens`` says."""
    if not settings.forced:
        return settings
    text = sum(len(c.name) + len(c.arguments) + 24 for c in settings.forced)
    return replace(settings, max_tokens=max(settings.max_tokens, text // 2 + 16))


def gold_answer(state: RunState, base: GenerationSettings) -> GenerationSettings:
    """The gold policy once the gold calls are done: force the gold final answer."""
    return replace(base, forced=(), forced_answer=state.task.gold_answer or "Done.")
