"""The proxy's own time per request, by kind of request.

A request's *overhead* is its wall time in the proxy's handler — from the first byte of its
body read to its response rendered (or, streamed, to its last chunk) — less the time spent
awaiting the upstream: parsing and checking, serial restoration, replaying the history's
calls to the tracker's phase position, certification, minting ids, the ledger, and rendering
the response. The kinds:

* ``pass_through``: arm S (asked for, native parallel calls, or no tools): one generation,
  returned as it came;
* ``flattening``: arm F, the response is a window (one message with parallel calls);
* ``absorb``: arm F, the request brought back a window's results (it was put back in
  serial form and the absorb turn generated), whatever it returned;
* ``serial``: arm F, neither (a call that did not certify, or a final answer).

Each request gives two figures: its *wall* overhead (what a client waits for the proxy, on
a loaded machine including the time other processes hold the CPU) and its *CPU* overhead
(the CPU time the proxy's own work took, this thread, less the CPU spent while awaiting the
upstream: what the proxy costs whatever the load; with the scripted engine in process its
CPU is the upstream's). At most ``keep`` figures per kind are kept (the newest), so a long-running server does not
grow; ``python -m benchmarks.proxy_bench`` prints :meth:`Overheads.summary`.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Sequence
from typing import Literal

__all__ = ("KINDS", "Kind", "Overheads", "percentile")

Kind = Literal["pass_through", "flattening", "absorb", "serial"]
KINDS: tuple[Kind, ...] = ("pass_through", "flattening", "absorb", "serial")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; 0.0 for none)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Overheads:
    """Seconds of the proxy's own time per request, by :data:`Kind` (see the module
    docstring)."""

    def __init__(self, keep: int = 10_000) -> None:
        self.keep = keep
        self.by_kind: dict[str, deque[tuple[float, float]]] = {
            kind: deque(maxlen=keep) for kind in KINDS
        }

    def add(self, kind: Kind, wall_s: float, cpu_s: float) -> None:
        self.by_kind[kind].append((max(0.0, wall_s), max(0.0, cpu_s)))

    def clear(self) -> None:
        for values in self.by_kind.values():
            values.clear()

    def all(self) -> list[tuple[float, float]]:
        """Every kept ``(wall, cpu)`` pair, of every kind."""
        return [s for values in self.by_kind.values() for s in values]

    def summary(self) -> dict[str, dict[str, float]]:
        """Per kind with figures, and ``all``: ``requests``, ``median_ms`` and ``p95_ms``
        (wall), ``cpu_median_ms`` and ``cpu_p95_ms``."""
        groups = {kind: list(values) for kind, values in self.by_kind.items() if values}
        groups["all"] = self.all()
        out = {}
        for kind, pairs in groups.items():
            wall = [w for w, _ in pairs]
            cpu = [c for _, c in pairs]
            out[kind] = {
                "requests": len(pairs),
                "median_ms": statistics.median(wall) * 1000 if wall else 0.0,
                "p95_ms": percentile(wall, 0.95) * 1000,
                "cpu_median_ms": statistics.median(cpu) * 1000 if cpu else 0.0,
                "cpu_p95_ms": percentile(cpu, 0.95) * 1000,
            }
        return out
