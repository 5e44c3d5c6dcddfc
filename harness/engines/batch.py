"""The batched sample: several generations submitted as one batch.

:func:`sample_batch` submits one request per :class:`GenerationSettings` through
:func:`harness._concurrency.gather` (the package's one concurrent-batch primitive), so a
batching engine (vLLM's continuous batching) decodes them as one batch and the wall time is
about that of the longest sample, not the sum (CRP-SPEC-022 §2.3). The fabric's consensus and
the loop's P+V batched resample both use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import cast

from harness._concurrency import gather, settled
from harness.engines.base import Engine, GenerationSettings, guarded_generate
from harness.messages import Completion, Message, ToolSpec

__all__ = ("sample_batch",)


async def sample_batch(
    engine: Engine,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    settings_list: Sequence[GenerationSettings],
) -> list[Completion]:
    """One completion per settings, submitted concurrently (one batch); results in order.

    Every request runs to its end: one failing never cancels its siblings. If any failed, the
    first failure (by position) is raised once all have finished.
    """
    outcomes = await gather(
        [
            partial(settled, partial(guarded_generate, engine, messages, tools, settings))
            for settings in settings_list
        ]
    )
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            raise outcome
    return [cast("Completion", o) for o in outcomes]
