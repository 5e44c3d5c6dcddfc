"""The policy seam: who chooses the calls.

A policy steers each generation's settings. ``model`` leaves the choice to the model. ``gold``
forces the task's gold calls through the engine's constrained decoding (every token still
prefilled and decoded), so S and F generate identical tokens and the dividend is measured at
fixed accuracy: with serial prompting (S, F) the next gold call, counted by the tool messages
so far (withheld ones included); with parallel prompting (P, P+V) the next gold step, one per
message; then the gold answer. ``oracle`` (:mod:`harness.loop.oracle`) follows the same plan
but may use only what the context shows: a value a withheld result holds is replaced by the
last value it used (the stale rule), so a false fill costs it the task.

Adding a policy is one class with :meth:`PolicyStrategy.steer` and one entry in
:data:`POLICIES` (built from the run's :class:`~harness.loop.config.LoopConfig`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from harness.engines.base import GenerationSettings
from harness.loop.config import LoopConfig, Policy
from harness.loop.oracle import OraclePolicy
from harness.loop.task import Task
from harness.loop.transcript import Transcript

__all__ = (
    "POLICIES",
    "GoldPolicy",
    "ModelPolicy",
    "OraclePolicy",
    "PolicyStrategy",
    "with_room_for_forced",
)


class PolicyStrategy(Protocol):
    def steer(
        self, task: Task, transcript: Transcript, base: GenerationSettings, *, step: int | None
    ) -> GenerationSettings:
        """The settings of the next generation of ``task``, whose context so far is
        ``transcript``. ``step``: with parallel prompting, how many messages of calls were
        handled so far; ``None`` with serial prompting."""
        ...


class ModelPolicy:
    """The model chooses."""

    def steer(
        self, task: Task, transcript: Transcript, base: GenerationSettings, *, step: int | None
    ) -> GenerationSettings:
        return base


class GoldPolicy:
    """The task's gold calls, then its gold answer, are forced."""

    def steer(
        self, task: Task, transcript: Transcript, base: GenerationSettings, *, step: int | None
    ) -> GenerationSettings:
        if step is None:
            flat = task.gold_calls
            done = transcript.tool_messages
            if done < len(flat):
                return replace(base, forced=(flat[done].to_tool_call(f"gold_{done}"),))
        elif step < len(task.gold_steps):
            gold = task.gold_steps[step]
            return replace(
                base, forced=tuple(g.to_tool_call(f"gold_{i}") for i, g in enumerate(gold))
            )
        return replace(base, forced=(), forced_answer=task.gold_answer or "Done.")


#: Each policy's strategy, by the name ``LoopConfig.policy`` gives, built from the run's config.
POLICIES: dict[Policy, Callable[[LoopConfig], PolicyStrategy]] = {
    "model": lambda config: ModelPolicy(),
    "gold": lambda config: GoldPolicy(),
    "oracle": lambda config: OraclePolicy(marker=config.marker),
}


def with_room_for_forced(settings: GenerationSettings) -> GenerationSettings:
    """Room for the whole forced reply, whatever ``max_tokens`` says."""
    if not settings.forced:
        return settings
    text = sum(len(c.name) + len(c.arguments) + 24 for c in settings.forced)
    return replace(settings, max_tokens=max(settings.max_tokens, text // 2 + 16))
