"""The closed form of drafted decoding (speculative decoding) beside the paper's arms.

:mod:`harness.costmodel` decodes every token of a call at ``t_dec`` seconds. With drafted
decoding (``--drafting``: vLLM's n-gram or suffix proposer, or the harness's window proposer,
:mod:`harness.engines.window_drafts`) the engine proposes ``k`` tokens and the model verifies
them in one forward pass: it keeps the longest accepted prefix and adds one token of its own.
Under greedy decoding the tokens are the model's own (lossless); only the time changes.

Derivation (symbols as in :mod:`harness.costmodel`; the standard analysis of speculative
decoding, Leviathan et al. 2023). If each drafted token is accepted with probability ``α``
(independently, given its predecessors were), one verification step yields

    E[a] = (1 - α^(k+1)) / (1 - α)      tokens   (k + 1 when α = 1)

and costs ``ρ`` plain decode steps (``ρ >= 1``: on a GPU a step that verifies ``k + 1``
tokens costs little more than one, ``ρ ≈ 1``; on a CPU decode is compute-bound and the step
costs more: measured ``ρ ≈ 3`` at ``k = 6`` on the 2-core machine of
``benchmarks/results/draft/quiet-k1``: 5.5 tokens per step, 13.8 → 25.2 tokens/s). A call's
``c`` tokens then take

    t_dec c ρ / E[a]       instead of     t_dec c

so decoding a call speeds up by ``s = E[a] / ρ`` (drafting pays exactly when ``E[a] > ρ``;
:func:`break_even_acceptance`). The drafts cover the calls of a window (``c`` tokens per
call; the absorb turn's reply is not predictable and is priced undrafted), so every arm's
window changes by its decoded call tokens:

    T_F^d(n) = T_F(n) - n t_dec c (1 - ρ/E[a])
    T_P^d(n) = T_P(n) - n t_dec c (1 - ρ/E[a])
    T_S^d(n) = T_S(n) - n t_dec c (1 - ρ/E[a])

The same saving for every arm: drafting does not change which arm wins on decode alone, it
shrinks the decode share that F's extra turns stand beside. For F+spec
(:mod:`harness.costmodel.speculation`) the window's generation ``G(n)`` shrinks by the same
term, so speculation hides less tool time behind it:
``T_F+spec^d = max(G(n) - n t_dec c (1 - ρ/E[a]), λ + E_n) + T_abs(n)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.costmodel.closed_form import (
    Regime,
    _check_n,
    absorb_time,
    expected_max_latency,
    turn_time,
    wall_time_flattened,
    wall_time_parallel,
    wall_time_serial,
)
from harness.costmodel.speculation import window_generation_time
from harness.errors import ConfigError

__all__ = (
    "Drafting",
    "break_even_acceptance",
    "drafted_saving",
    "wall_time_flattened_drafted",
    "wall_time_parallel_drafted",
    "wall_time_serial_drafted",
    "wall_time_speculative_drafted",
)


@dataclass(frozen=True)
class Drafting:
    """Drafted decoding: ``acceptance`` α (a drafted token's chance to be kept), ``tokens`` k
    (drafted per step) and ``verify_cost`` ρ (one verification step's time in plain decode
    steps, ``>= 1``)."""

    acceptance: float
    tokens: int = 6
    verify_cost: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.acceptance <= 1.0:
            raise ConfigError(f"The draft acceptance must be in [0, 1], not {self.acceptance}.")
        if not 1 <= self.tokens <= 64:
            raise ConfigError(f"The drafted tokens per step must be 1-64, not {self.tokens}.")
        if not 1.0 <= self.verify_cost <= 100.0:
            raise ConfigError(
                f"The verify cost (one verification step in plain decode steps) must be in "
                f"[1, 100], not {self.verify_cost}."
            )

    @property
    def tokens_per_step(self) -> float:
        """``E[a] = (1 - α^(k+1)) / (1 - α)``: tokens one verification step yields."""
        alpha, k = self.acceptance, self.tokens
        if alpha >= 1.0:
            return float(k + 1)
        return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)

    @property
    def speedup(self) -> float:
        """``s = E[a] / ρ``: how much faster a drafted call decodes (< 1: drafting costs)."""
        return self.tokens_per_step / self.verify_cost


def drafted_saving(regime: Regime, n: float, drafting: Drafting) -> float:
    """``n t_dec c (1 - ρ/E[a])``: the decode seconds drafting saves on a window's ``n``
    calls (negative when verification costs more than it yields)."""
    n = _check_n(n)
    return n * regime.decode_s_per_token * regime.call_tokens * (1.0 - 1.0 / drafting.speedup)


def wall_time_serial_drafted(regime: Regime, n: float, drafting: Drafting) -> float:
    """``T_S^d(n) = T_S(n) - n t_dec c (1 - ρ/E[a])``."""
    return wall_time_serial(regime, n) - drafted_saving(regime, n, drafting)


def wall_time_flattened_drafted(regime: Regime, n: float, drafting: Drafting) -> float:
    """``T_F^d(n) = T_F(n) - n t_dec c (1 - ρ/E[a])``."""
    return wall_time_flattened(regime, n) - drafted_saving(regime, n, drafting)


def wall_time_parallel_drafted(regime: Regime, n: float, drafting: Drafting) -> float:
    """``T_P^d(n) = T_P(n) - n t_dec c (1 - ρ/E[a])``."""
    return wall_time_parallel(regime, n) - drafted_saving(regime, n, drafting)


def wall_time_speculative_drafted(
    regime: Regime, n: float, drafting: Drafting, *, prefetched: bool = True
) -> float:
    """``T_F+spec^d(n) = max(G(n) - n t_dec c (1 - ρ/E[a]), λ + E_n) + T_abs(n)``."""
    n = _check_n(n)
    lead = 0.0 if prefetched else turn_time(regime)
    generation = window_generation_time(regime, n) - drafted_saving(regime, n, drafting)
    return max(generation, lead + expected_max_latency(regime, n)) + absorb_time(regime, n)


def break_even_acceptance(tokens: int, verify_cost: float) -> float:
    """The acceptance α at which ``E[a] = ρ``: drafting ``tokens`` per step saves decode time
    only above it (bisection; 0 when ``ρ <= 1``, 1 when even full acceptance, ``k + 1``
    tokens per step, does not pay for a step of cost ``ρ``)."""
    if verify_cost <= 1.0:
        return 0.0
    if tokens + 1 <= verify_cost:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2.0
        if Drafting(mid, tokens, verify_cost).tokens_per_step < verify_cost:
            low = mid
        else:
            high = mid
    return high
