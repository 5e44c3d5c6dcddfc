"""The arm seam: what the driver hands each completion to.

An arm is a strategy object; the driver never compares arm names. Each arm says how it
prompts (:meth:`ArmStrategy.settings`: one call per reply, or a whole window per message,
steered by the run's policy, :mod:`harness.loop.policy`), whether results are withheld right now
(:attr:`ArmStrategy.window_open`), how it reviews a completion before handling it (P+V
resamples a rejected window; the others keep it), and how it handles it
(:meth:`ArmStrategy.handle`: True when the run is finished), and what it leaves on record when
the run ends early (:meth:`ArmStrategy.abandon`: F records the window a budget, an error or a
cancel left open, so a false fill the run died of is still counted).

Every arm is constructed as ``Arm(state, detector, group)`` (``group``: the run's task group,
where eager dispatch starts calls). Adding an arm (e.g. F with speculation) is one new module
implementing this protocol and one entry in :data:`harness.loop.driver.STRATEGIES`.
"""

from __future__ import annotations

from typing import Protocol

from harness.engines.base import GenerationSettings
from harness.messages import Completion

__all__ = ("ArmStrategy",)


class ArmStrategy(Protocol):
    @property
    def window_open(self) -> bool: ...

    def settings(self) -> GenerationSettings: ...

    async def review(self, completion: Completion) -> Completion: ...

    async def handle(self, completion: Completion) -> bool: ...

    def abandon(self) -> None: ...
