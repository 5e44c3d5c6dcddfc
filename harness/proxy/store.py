"""The bounded store: what a window's minted ids cannot carry.

Most of a flattened window travels in its call ids (:mod:`harness.proxy.ids`). Two things do
not: the text of each call's assistant message when it had any, and each call's argument
string exactly as the upstream wrote it (a client may send it back re-serialised). They are
kept here under the window's key until the client sends the window's results back, at most
``capacity`` windows (least recently stored first out). The conversation the window belongs
to waits for those results itself (:mod:`harness.proxy.conversation`); the store serves the
restoration of every window a client's history holds, the conversation's or not. A window
whose entry was dropped is still restored from its ids alone: its calls then carry the
client's argument strings (the same values). Each entry also names its calls' tools, so a
window a client wrote back as text without the ids (a ReAct ``Action:`` transcript) is found
by its calls (:meth:`WindowStore.find`, :mod:`harness.proxy.text_history`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from harness.messages import CallKey, call_key

__all__ = ("Pending", "WindowStore", "call_signature")


@dataclass(frozen=True)
class Pending:
    """What one window left behind: ``contents`` (each call's assistant text, in emitted
    order; empty when only the first had any) and ``arguments`` (each call's argument string
    as the upstream wrote it, in emitted order)."""

    contents: tuple[str | None, ...] = ()
    arguments: tuple[str, ...] = ()
    #: Each call's tool, in emitted order (what finds a window written as text without ids).
    names: tuple[str, ...] = ()


class WindowStore:
    """At most ``capacity`` :class:`Pending` entries, by window key (see the module docstring)."""

    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}.")
        self.capacity = capacity
        self._entries: OrderedDict[str, Pending] = OrderedDict()
        #: Window key by :func:`call_signature` of its calls (those with ``names``), and the
        #: order they were emitted in; ``None`` when two stored windows hold the same calls in
        #: different orders (another conversation's): which one came back cannot be told.
        self._by_calls: dict[tuple[CallKey, ...], str | None] = {}
        self._orders: dict[tuple[CallKey, ...], tuple[CallKey, ...]] = {}
        #: Window key by its calls in emitted order (a client writes a window back in the
        #: order it received it, which tells two conversations' windows of one set apart).
        self._by_order: dict[tuple[CallKey, ...], str] = {}
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, window: str, pending: Pending) -> None:
        if self.capacity == 0:
            return
        self._entries[window] = pending
        self._entries.move_to_end(window)
        if pending.names:
            calls = list(zip(pending.names, pending.arguments, strict=True))
            signature = call_signature(calls)
            order = tuple(call_key(name, arguments) for name, arguments in calls)
            self._by_order[order] = window
            known = self._orders.get(signature)
            if known is not None and known != order:
                self._by_calls[signature] = None  # (ambiguous: restored by nobody)
            elif self._by_calls.get(signature, window) is not None:
                self._by_calls[signature] = window
                self._orders[signature] = order
        while len(self._entries) > self.capacity:
            key, dropped = self._entries.popitem(last=False)
            if dropped.names:
                calls = list(zip(dropped.names, dropped.arguments, strict=True))
                order = tuple(call_key(name, arguments) for name, arguments in calls)
                if self._by_order.get(order) == key:
                    del self._by_order[order]
                signature = call_signature(calls)
                if signature in self._by_calls and self._by_calls[signature] in (key, None):
                    self._by_calls.pop(signature, None)
                    self._orders.pop(signature, None)
            self.evicted += 1

    def get(self, window: str) -> Pending | None:
        return self._entries.get(window)

    def find(self, calls: Iterable[tuple[str, str]]) -> str | None:
        """The key of the stored window whose calls are ``calls`` (tool, argument string;
        in any order, arguments compared by value), if any; none when two stored windows hold
        these calls in different orders (the text cannot say whose it is: served serially)."""
        listed = list(calls)
        order = tuple(call_key(name, arguments) for name, arguments in listed)
        found = self._by_order.get(order)
        return found if found is not None else self._by_calls.get(call_signature(listed))


def call_signature(calls: Iterable[tuple[str, str]]) -> tuple[CallKey, ...]:
    """Calls as a set of (tool, canonical arguments), :func:`~harness.messages.call_key`: the
    same window in any order and spelling."""
    return tuple(sorted(call_key(name, arguments) for name, arguments in calls))
