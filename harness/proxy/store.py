"""The bounded store: what a window's minted ids cannot carry.

Most of a flattened window travels in its call ids (:mod:`harness.proxy.ids`). Three things
do not: the call that closed the window by not joining it (generated while the window's
results were withheld; arm F keeps it and handles it after the absorb, so the proxy must too)
with any calls after it in the same reply, the text of each call's assistant message when it
had any, and each call's argument string exactly as the upstream wrote it (a client may send
it back re-serialised). They are kept here under the window's key until the client sends the
window's results back, at most ``capacity`` windows (least recently stored first out). A
window whose entry was dropped is still restored from its ids alone: its calls then carry the
client's argument strings (the same values), and its closing call is regenerated after the
absorb turn (one more generation, never a wrong transcript).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from harness.engines.base import ToolCall

__all__ = ("Pending", "WindowStore")


@dataclass(frozen=True)
class Pending:
    """What one window left behind: ``contents`` (each call's assistant text, in emitted
    order), ``remainder`` (calls generated after the window closed, still to handle, with
    their reply's text ``remainder_content``) and ``arguments`` (each call's argument string
    as the upstream wrote it, in emitted order)."""

    contents: tuple[str | None, ...] = ()
    remainder: tuple[ToolCall, ...] = ()
    remainder_content: str | None = None
    #: The first remainder call closed the window by failing to certify: it runs on its own
    #: (arm F decided so as it was generated; it is not certified a second time).
    remainder_serial: bool = False
    arguments: tuple[str, ...] = ()


class WindowStore:
    """At most ``capacity`` :class:`Pending` entries, by window key (see the module docstring)."""

    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}.")
        self.capacity = capacity
        self._entries: OrderedDict[str, Pending] = OrderedDict()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, window: str, pending: Pending) -> None:
        if self.capacity == 0:
            return
        self._entries[window] = pending
        self._entries.move_to_end(window)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
            self.evicted += 1

    def get(self, window: str) -> Pending | None:
        return self._entries.get(window)
