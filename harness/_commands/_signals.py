"""SIGINT and SIGTERM stop a command the structured way: cancel, clean up, say so.

:func:`until_signalled` runs a command's async body in a task group that also listens for
SIGINT and SIGTERM. A signal cancels the body — runs record that they were stopped (their
journals flushed), ``async with`` blocks close (the engine shuts down, no worker left behind) —
and then :class:`~harness.errors.Interrupted` says what happened and how to resume. The CLI
turns it into exit status 128 + the signal number (130, 143).
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from harness.errors import Interrupted

__all__ = ("until_signalled",)

T = TypeVar("T")


async def until_signalled(body: Callable[[], Awaitable[T]], resume_hint: str) -> T:
    """``await body()``, unless SIGINT/SIGTERM arrives first: then cancel it and raise
    :class:`Interrupted` (``resume_hint`` says how to carry on)."""
    received: list[int] = []
    out: list[T] = []
    failed: list[BaseException] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    received.append(signum)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch)
        try:
            out.append(await body())
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # raised after the group, not wrapped in an exception group
            failed.append(exc)
        tg.cancel_scope.cancel()
    if failed:
        raise failed[0]
    if received:
        name = signal.Signals(received[0]).name
        raise Interrupted(f"Stopped by {name}; {resume_hint}", signum=received[0])
    return out[0]
