"""The phase positions the proxy has replayed, cached: a request replays only the calls that
are new since the history it extends.

Each request rebuilds arm F's state from the client's history (the proxy keeps no
per-conversation state): every call the history holds is admitted, in order, through a fresh
detector tracker, so that the tracker stands at the phase position the run reached
(:func:`replay`). A client's next request is its last one plus
the calls it was just given, so replaying the whole history every time costs each request
the certification of every earlier call: most of the proxy's own time on a long run.

:class:`PositionCache` keeps the tracker as it stood after a history's calls, keyed by a hash
of everything the replay depends on — the tool list, the skill, the inputs, and each call's
id, name, arguments and place in a restored window — at every point where no window is open
(after a call outside a window, or a window's last call). A request looks up the longest such
prefix of its own history it has seen, starts from a copy of that tracker and replays only
the rest; then it keeps a copy of the tracker at its whole history for the next request.

A cached tracker is never used itself: a request gets a fork
(:meth:`~harness.certify.detector.TrackerBase.fork`: its own phase position, sharing only
what the tracker reads and its pure caches), so a cached position is never changed by the
request that uses it, and concurrent requests on one conversation cannot interfere. The cache is bounded (least recently used first out); a miss costs the full
replay, never a different answer. The cached path is tested to give the same responses as a
cold proxy (``tests/test_proxy_positions.py``).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from harness.certify import WindowTracker
from harness.certify.window import Windows
from harness.messages import Message, ToolCall

__all__ = (
    "ForkableTracker",
    "HistoryCall",
    "Place",
    "PositionCache",
    "history_calls",
    "replay",
)

#: A call's place in the history: ``serial`` (not in a restored window), ``member`` (in a
#: window, not its last call) or ``last`` (a window's last call).
Place = Literal["serial", "member", "last"]


@dataclass(frozen=True)
class HistoryCall:
    """One call of the history, in order, and its place (see :data:`Place`)."""

    call: ToolCall
    place: Place

    @property
    def closes(self) -> bool:
        """No window is open after this call."""
        return self.place != "member"


def history_calls(
    messages: Sequence[Message], windows: Sequence[Sequence[str]]
) -> list[HistoryCall]:
    """The calls of the (restored, serial) ``messages`` in order, with their places;
    ``windows``: the restored windows' call ids."""
    window_of = {call_id for ids in windows for call_id in ids}
    last = {ids[-1] for ids in windows if ids}
    out: list[HistoryCall] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for raw in message.get("tool_calls") or ():
            if not isinstance(raw, dict):
                continue
            call = ToolCall.from_openai(raw)
            place: Place = (
                "last" if call.id in last else "member" if call.id in window_of else "serial"
            )
            out.append(HistoryCall(call, place))
    return out


def replay(tracker: WindowTracker, calls: Sequence[HistoryCall]) -> WindowTracker:
    """Bring ``tracker`` to the phase position ``calls`` leave it in (a history's, or the part
    of one after a cached position, which starts where no window is open): every call
    admitted in order, the history's windows as windows, every other call on its own.
    Nothing runs and nothing is recorded (draft windows)."""
    windows = Windows(tracker)
    for item in calls:
        if item.place == "serial":
            windows.close("history")
        windows.admit(item.call)
        if item.closes:
            windows.close("history")
    windows.close("history")
    return windows.tracker


@runtime_checkable
class ForkableTracker(WindowTracker, Protocol):
    """A tracker that can be forked (both detectors' trackers can:
    :meth:`~harness.certify.detector.TrackerBase.fork`)."""

    def fork(self) -> ForkableTracker: ...


class PositionCache:
    """At most ``capacity`` replayed trackers, by history prefix (see the module docstring);
    ``capacity`` 0 turns the cache off (every request replays its whole history)."""

    def __init__(self, capacity: int = 1024) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}.")
        self.capacity = capacity
        self._entries: OrderedDict[str, ForkableTracker] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def prefix_keys(context: str, calls: Sequence[HistoryCall]) -> list[tuple[int, str]]:
        """``(calls covered, key)`` for every prefix of ``calls`` after which no window is
        open, the empty prefix first; ``context``: what else the replay depends on."""
        digest = hashlib.blake2b(context.encode("utf-8", "surrogatepass"), digest_size=16)
        out = [(0, digest.copy().hexdigest())]
        for i, item in enumerate(calls):
            call = item.call
            digest.update(
                f"\x1e{item.place}\x1f{call.id}\x1f{call.name}\x1f{call.arguments}".encode(
                    "utf-8", "surrogatepass"
                )
            )
            if item.closes:
                out.append((i + 1, digest.copy().hexdigest()))
        return out

    def resume(self, keys: Sequence[tuple[int, str]]) -> tuple[int, WindowTracker] | None:
        """The longest cached prefix among ``keys``: how many calls it covers and a fork of
        its tracker (the cached one stays as it is)."""
        for covered, key in reversed(keys):
            tracker = self._entries.get(key)
            if tracker is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return covered, tracker.fork()
        self.misses += 1
        return None

    def keep(self, key: str, tracker: WindowTracker) -> None:
        """Keep a fork of ``tracker`` as the position after the prefix ``key`` (a tracker
        that cannot fork is not kept: its requests replay)."""
        if self.capacity == 0 or key in self._entries:
            return
        if not isinstance(tracker, ForkableTracker):
            return
        self._entries[key] = tracker.fork()
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
