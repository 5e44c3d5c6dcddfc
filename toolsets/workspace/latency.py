"""Injected tool latency: a fixed ``L`` or a seeded draw with spread ``σ_L``.

The paper's homogeneous case is every call taking ``L`` seconds; its heterogeneous case draws
each call's latency with spread ``σ_L`` (the concurrent window then costs about
``L + σ_L κ_n``). :class:`Latency` draws from a normal distribution ``N(L, σ_L)`` clipped at
zero, and the draw is a pure function of ``(seed, tool, arguments)``: the same call sleeps
the same time in every arm and in any execution order, so S and F compare like with like.
The time is spent in ``anyio.sleep`` (real wall time, cancellable).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

__all__ = ("Latency",)


@dataclass(frozen=True)
class Latency:
    """Per-call tool latency: ``mean_s`` (L), ``sigma_s`` (σ_L) and the draw ``seed``."""

    mean_s: float = 0.0
    sigma_s: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("mean_s", "sigma_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"Latency {name} must be a finite number >= 0, got {value!r}.")

    @classmethod
    def of(cls, value: Latency | float | None) -> Latency:
        """``None`` is no latency, a number is a fixed ``L`` in seconds."""
        if value is None:
            return cls()
        if isinstance(value, Latency):
            return value
        return cls(mean_s=float(value))

    def draw(self, tool: str, arguments: Mapping[str, Any]) -> float:
        """Seconds the call ``tool(arguments)`` sleeps: a pure function of the seed and the call."""
        if self.sigma_s == 0.0:
            return self.mean_s
        key = json.dumps(
            [self.seed, tool, dict(arguments)], sort_keys=True, separators=(",", ":"), default=str
        )
        digest = hashlib.sha256(key.encode("utf-8")).digest()
        u = (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64  # in (0, 1), never 0 or 1
        return max(0.0, NormalDist(self.mean_s, self.sigma_s).inv_cdf(u))
