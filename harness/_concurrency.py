"""Running several awaitables as one batch: the ordered gather.

:func:`gather` starts one task per thunk in one anyio task group and returns the results in
the thunks' order, whatever order they finish in (optionally starting them in another order).
It is the one concurrent-batch primitive of the package: the loop's windows, the fabric's
verifiers and consensus, the batched sample (:func:`harness.engines.batch.sample_batch`) and
the certification kit's interleavings all use it. :func:`settled` keeps one failure from
cancelling its siblings.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

import anyio

__all__ = ("gather", "settled")

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
