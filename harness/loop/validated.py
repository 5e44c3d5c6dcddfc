"""Arm P+V: P plus the deterministic validator (:mod:`harness.certify.validator`).

A message the validator rejects is *resampled*: up to ``resample.max_resamples`` candidate
messages, drawn as one batch (``resample.batched``: the fabric's batched-consensus primitive,
so the engine decodes them together) or one by one, at ``resample.temperature``. The first
candidate that passes is kept (else the last drawn); then the message is handled as in P.
"""

from __future__ import annotations

import time
from dataclasses import replace

from harness.certify.validator import validate_window
from harness.loop.parallel import ParallelArm
from harness.messages import Completion

__all__ = ("ValidatedArm",)


class ValidatedArm(ParallelArm):
    """Arm P+V."""

    def problems(self, completion: Completion) -> list[str]:
        if not completion.tool_calls:
            return []
        state = self.state
        return validate_window(
            state.toolset,
            completion.tool_calls,
            self.phase_of(completion),
            state.task.inputs,
            marker=state.config.marker,
        )

    async def review(self, completion: Completion) -> Completion:
        """Resample a window the validator rejects (bounded; batched when configured)."""
        budget = self.state.config.resample
        problems = self.problems(completion)
        tries = 0
        while problems and tries < budget.max_resamples:
            k = budget.max_resamples - tries if budget.batched else 1
            candidates = await self._resample(k, tries)
            tries += k
            self.state.count.resamples += k
            for candidate in candidates:
                problems = self.problems(candidate)
                completion = candidate
                if not problems:
                    break
        return completion

    async def _resample(self, k: int, offset: int) -> list[Completion]:
        """``k`` candidate windows submitted together, so the engine decodes them as one
        batch; each is a turn of its own."""
        state = self.state
        base = self.settings()
        seed0 = (base.seed or 0) + 1 + offset
        temperature = state.config.resample.temperature
        settings = [replace(base, temperature=temperature, seed=seed0 + i) for i in range(k)]
        state.budgets.check_resample(k)
        started = time.monotonic()
        candidates = await state.sample(settings)
        return [state.took_turn(c, "resample", started) for c in candidates]
