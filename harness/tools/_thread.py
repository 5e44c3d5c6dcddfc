"""The worker thread of one sync tool call, watched past the call's own end.

A sync tool runs in a worker thread, and a timeout or a cancellation cannot stop a thread: the
caller gives up waiting (*abandons* the call) and the thread runs on. Whether such a call took
effect is unknown until its function returns. :class:`ToolThread` tells the two cases apart
without a race: :meth:`ToolThread.begin` (the worker, before calling the function) and
:meth:`ToolThread.abandon` (the caller, when it gives up) decide under one lock whether the
function started — if not, it never will.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ("ToolThread",)


class ToolThread:
    """See the module docstring. :meth:`on_end` registers a callback that runs (in the worker
    thread) when the function returns or raises — at once if it already has."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = False
        self._abandoned = False
        self._ended = False
        self._done = threading.Event()  # set once the end callbacks have run
        self._callbacks: list[Callable[[ToolThread], None]] = []
        self.value: Any = None
        self.error: BaseException | None = None
        self.finished: float = 0.0

    @property
    def done(self) -> bool:
        """The function returned or raised (its outcome is known)."""
        return self._ended

    def begin(self) -> bool:
        """The worker is about to call the function: False if the call was abandoned first
        (then the function must not run)."""
        with self._lock:
            if self._abandoned:
                return False
            self._started = True
            return True

    def abandon(self) -> bool:
        """The caller stops waiting. True when the function is running (its outcome unknown
        until it ends); False when it had not started (it never will) or already ended."""
        with self._lock:
            self._abandoned = True
            return self._started and not self._ended

    def end(self, value: Any, error: BaseException | None) -> None:
        """Called by the worker thread when the function returns (or raises)."""
        with self._lock:
            self.value, self.error, self.finished = value, error, time.monotonic()
            self._ended = True
            callbacks, self._callbacks = self._callbacks, []
        try:
            for callback in callbacks:
                callback(self)
        finally:
            self._done.set()

    def on_end(self, callback: Callable[[ToolThread], None]) -> None:
        """Run ``callback(self)`` when the function ends (now, if it already has)."""
        with self._lock:
            if not self._ended:
                self._callbacks.append(callback)
                return
        callback(self)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the function ended and the callbacks registered before then ran
        (True), or ``timeout`` passed (False)."""
        return self._done.wait(timeout)
