"""The PEF figures of a fabric run (CRP-SPEC-022 §7), as numbers and as the spec's headers.

=============================  ===============================================================
header                         definition here
=============================  ===============================================================
``CRP-PEF-Layers``             ``depth/total`` of the task graph executed (its micro-tasks; a
                               plan-and-execute run's planner and composer are not nodes)
``CRP-PEF-Batch-Efficiency``   inferences / sequential batched rounds, e.g. ``5.7x``
``CRP-PEF-Wall-Clock-Ms``      wall time of the whole run, integer milliseconds
``CRP-PEF-Compute-Vs-Naive``   ``model_params × tokens`` over ``baseline.params ×
                               baseline.tokens``, the baseline being a naive single pass of
                               *the same task* (measured); below 1 the amplified run used
                               less compute
=============================  ===============================================================

**Inferences** are engine requests: every consensus sample, repair and planner/composer call
counts once. A **round** is one sequential engine wave on the critical path: an inference's
round is one more than the highest round among the inferences whose *finished* output it
waited for (through any chain of tool and verify nodes, which add no round); a consensus
batch is one round; a repair is one round after the attempt it repairs; a node dispatched
speculatively while the planner is still streaming shares the planner's round. ``rounds`` is
the highest round of the run, so the budget of §4.1 reads ``rounds ≤ depth + 2``.

**Tokens** are every inference's prompt plus completion tokens as the engine reported them
(the spec's "params × tokens (in+out)"). The **baseline** is a naive single pass of the same
task (the task as one prompt, answered in one generation; §7.4 "a naive large-model single
pass for the same task"): its tokens are measured by running it
(:func:`harness.fabric.decompose.naive_pass`), its parameter count is the large model's
(``FabricConfig.baseline_params``, e.g. 70e9; default the run's own model). Without the
model's parameter count or a measured baseline the compute header is left out.

Beyond the four headers the figures carry **agreement**: how many consensus votes ran, their
mean agreement (the winner's share of the samples requested) and how many reached no
consensus (``contested``), and how many engine requests failed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError

__all__ = ("NaiveBaseline", "PEFFigures")


@dataclass(frozen=True)
class NaiveBaseline:
    """The naive alternative for the same task: one pass of a ``params``-parameter model over
    ``tokens`` tokens (the task's prompt plus the answer), as measured by running that pass
    (``engine`` names what ran it)."""

    params: float
    tokens: int
    engine: str = ""

    def __post_init__(self) -> None:
        if not (self.params > 0 and self.tokens > 0):
            raise ConfigError(
                f"NaiveBaseline needs positive params and tokens, got {self.params:g} and "
                f"{self.tokens}; measure it with harness.fabric.decompose.naive_pass."
            )

    @property
    def compute(self) -> float:
        return self.params * self.tokens


def _two_significant(x: float) -> str:
    if x == 0 or x >= 0.1 or not math.isfinite(x):
        return f"{x:.2f}"
    return f"{x:.{1 - math.floor(math.log10(x))}f}"


@dataclass(frozen=True)
class PEFFigures:
    """The figures of one run; :meth:`headers` renders them as the spec's response headers."""

    depth: int
    total: int
    inferences: int
    rounds: int
    wall_clock_ms: float
    tokens: int = 0
    model_params: float | None = None
    baseline: NaiveBaseline | None = None
    votes: int = 0
    agreement: float | None = None
    contested: int = 0
    failed_requests: int = 0

    @property
    def batch_efficiency(self) -> float:
        """Inferences per sequential batched round (0.0 when the run made no inference)."""
        return self.inferences / self.rounds if self.rounds else 0.0

    @property
    def compute(self) -> float | None:
        """Estimated compute: ``model_params × tokens`` (``None`` without ``model_params``)."""
        return None if self.model_params is None else self.model_params * self.tokens

    @property
    def compute_vs_naive(self) -> float | None:
        compute = self.compute
        if compute is None or self.baseline is None:
            return None
        return compute / self.baseline.compute

    @property
    def budget_rounds(self) -> int:
        """The spec's latency budget in rounds for this depth: D + 2 (§4.1)."""
        return self.depth + 2

    def headers(self) -> dict[str, str]:
        """``{"CRP-PEF-Layers": "4/14", "CRP-PEF-Batch-Efficiency": "5.7x", ...}``; the
        compute header is left out without ``model_params`` or a measured baseline."""
        out = {
            "CRP-PEF-Layers": f"{self.depth}/{self.total}",
            "CRP-PEF-Batch-Efficiency": f"{self.batch_efficiency:.1f}x",
            "CRP-PEF-Wall-Clock-Ms": str(round(self.wall_clock_ms)),
        }
        ratio = self.compute_vs_naive
        if ratio is not None:
            out["CRP-PEF-Compute-Vs-Naive"] = _two_significant(ratio)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "depth": self.depth,
            "total": self.total,
            "inferences": self.inferences,
            "rounds": self.rounds,
            "budget_rounds": self.budget_rounds,
            "batch_efficiency": self.batch_efficiency,
            "wall_clock_ms": self.wall_clock_ms,
            "tokens": self.tokens,
            "model_params": self.model_params,
            "baseline_params": self.baseline.params if self.baseline else None,
            "baseline_tokens": self.baseline.tokens if self.baseline else None,
            "compute_vs_naive": self.compute_vs_naive,
            "votes": self.votes,
            "agreement": self.agreement,
            "contested": self.contested,
            "failed_requests": self.failed_requests,
            "headers": self.headers(),
        }
