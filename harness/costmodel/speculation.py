"""The closed form of arm F+spec (certified speculation) beside the paper's arms.

:mod:`harness.costmodel` prices S, F, P and P+V over one window of ``n`` calls. F+spec
(:mod:`harness.certify.speculation`) is F whose calls the manifest makes known in advance: they start
when the phase starts instead of when the model names them. Nothing the model generates
changes, so its generation time is exactly F's; only the wait for the tools moves.

Derivation (symbols as in :mod:`harness.costmodel`). F's window is ``n`` turns of generation,

    G(n) = n T_0 + t_pf (1-h_R) c n(n-1)/2

(each turn re-prefills the earlier calls, never a withheld result), then one concurrent wait
``E_n`` for the slowest tool, then the absorb turn: ``T_F = G(n) + E_n + T_abs(n)``. Eager
dispatch starts call ``k`` at the end of turn ``k``; the last call is named at the end of turn
``n``, so F+eager still waits a whole latency after the window's last turn (the "F+eager adds
nothing measurable" of issue 13).

With speculation every predicted call starts ``λ`` seconds into the window (``λ = 0`` when the
phase's calls are prefetched before its first turn — a first phase, or a phase whose sources
were visible at the previous absorb turn; ``λ = T_0`` when they start as the window opens,
after the first call was generated). The tools are then done at ``λ + E_n`` and the absorb
turn can start when both the generation and the tools are done::

    T_F+spec(n) = max(G(n), λ + E_n) + T_abs(n)

so the tool latency is hidden up to the window's generation time: the dividend over F is

    Δ_T^spec = T_F - T_F+spec = min(E_n, G(n) - λ)

and every call predicted is assumed to be emitted (hit rate 1; a miss is an F+eager call).

Against P (``T_P = o + P̂ + t_dec n c + E_n + T_abs(n)``): when the tools outlast the
generation, ``T_F+spec = λ + E_n + T_abs < T_P``; otherwise F+spec wins exactly when

    G(n) - (o + P̂ + t_dec n c) <= E_n,  i.e.  (n-1)(o + P̂) + t_pf (1-h_R) c n(n-1)/2 <= E_n

(the ``n c`` decode terms cancel). The left side is the serial arms' extra-turn cost, the same
numerator as the paper's ``g_T*``: F+spec beats P once one tool latency pays for the ``n-1``
extra turns' overhead and prefix prefill. :func:`crossover_latency` is that ``L*(n)`` (σ_L =
0). At the paper's nominal regime ``o + P̂ = 1.33 s`` per turn, so ``L*(6) = 7.4 s``: P wins
every window at L = 0.5 s; on an engine whose extra turns are cheap (a warm prefix cache,
``h → 1``) the crossover falls towards ``(n-1) o``.
"""

from __future__ import annotations

from harness.costmodel.closed_form import (
    Regime,
    _check_n,
    _rolling,
    absorb_time,
    expected_max_latency,
    prefix_prefill_time,
    turn_time,
    wall_time_flattened,
)

__all__ = (
    "crossover_latency",
    "wall_dividend_speculative",
    "wall_time_speculative",
    "window_generation_time",
)


def window_generation_time(regime: Regime, n: float) -> float:
    """``G(n) = n T_0 + t_pf (1-h_R) c n(n-1)/2``: F's (and F+spec's) generation in a window."""
    n = _check_n(n)
    return n * turn_time(regime) + _rolling(regime, n, regime.call_tokens)


def wall_time_speculative(regime: Regime, n: float, *, prefetched: bool = True) -> float:
    """``T_F+spec(n) = max(G(n), λ + E_n) + T_abs(n)``, ``λ`` = 0 when ``prefetched`` (the
    calls start before the window's first turn) else ``T_0`` (at window open)."""
    n = _check_n(n)
    lead = 0.0 if prefetched else turn_time(regime)
    wait_done = lead + expected_max_latency(regime, n)
    return max(window_generation_time(regime, n), wait_done) + absorb_time(regime, n)


def wall_dividend_speculative(regime: Regime, n: float, *, prefetched: bool = True) -> float:
    """``Δ_T^spec = T_F - T_F+spec = min(E_n, G(n) - λ)``: the tool latency speculation hides."""
    return wall_time_flattened(regime, n) - wall_time_speculative(regime, n, prefetched=prefetched)


def crossover_latency(regime: Regime, n: float) -> float:
    """``L*(n) = (n-1)(o + P̂) + t_pf (1-h_R) c n(n-1)/2``: with σ_L = 0, F+spec's wall is at
    most P's exactly when the tool latency is at least this (see the module docstring)."""
    n = _check_n(n)
    return (n - 1) * (regime.overhead_s + prefix_prefill_time(regime)) + _rolling(
        regime, n, regime.call_tokens
    )
