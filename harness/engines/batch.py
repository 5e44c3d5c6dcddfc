"""Running several awaitables as one batch: the ordered gather and the batched sample.

:func:`gather` starts one task per thunk in one anyio task group and returns the results in
the thunks' order, whatever order they finish in (optionally starting them in another order).
It is the one concurrent-batch primitive of the package: the loop's windows, the fabric's
verifiers and consensus, and the certification kit's interleavings all use it.

:func:`sample_batch` submits one request per :class:`GenerationSettings` through
:func:`gather`, so a batching engine (vLLM's continuous batching) decodes them as one batch and
the wall time is about that of the longest sample, not the sum (CRP-SPEC-022 §2.3). The
fabric's consensus and the loop's P+V batched resample both use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TypeVar, cast

import anyio

from harness.engines.base import Completion, Engine, GenerationSettings, Message, ToolSpec

__all__ = ("gather", "sample_batch", "settled")

T = TypeVar("T")


async def gather(
    thunks: Sequence[Callable[[], Awaitable[T]]], *, start_order: Sequence[int] | None = None
) -> list[T]:
    """Run every thunk concurrently in one task group; results in the order of ``thunks``.

    ``start_order`` (a permutation of the indices) is the order the tasks are started in. A
    thunk that raises cancels its siblings (structured concurrency); wrap it with
    :func:`settled` when siblings must run to their end.
    """
    out: list[T | None] = [None] * len(thunks)

    async def one(index: int) -> None:
        out[index] = await thunks[index]()

    async with anyio.create_task_group() as tg:
        for index in start_order if start_order is not None else range(len(thunks)):
            tg.start_soon(one, index)
    return cast("list[T]", out)


async def settled(thunk: Callable[[], Awaitable[T]]) -> T | Exception:
    """``await thunk()``, with an exception returned instead of raised (so one failure does not
    cancel the siblings of a :func:`gather`); cancellation still propagates."""
    try:
        return await thunk()
    except Exception as exc:
        return exc


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
            partial(settled, partial(engine.generate, messages, tools, settings))
            for settings in settings_list
        ]
    )
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            raise outcome
    return [cast("Completion", o) for o in outcomes]
