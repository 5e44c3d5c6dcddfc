"""Claims about F+spec's closed form (harness.costmodel.speculation)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.costmodel import (
    Regime,
    absorb_time,
    expected_max_latency,
    turn_time,
    wall_time_flattened,
    wall_time_parallel,
)
from harness.costmodel.speculation import (
    crossover_latency,
    wall_dividend_speculative,
    wall_time_speculative,
    window_generation_time,
)
from tests.strategies import regimes


def test_speculation_hides_the_whole_latency_when_the_window_generates_longer() -> None:
    nominal = Regime()
    assert wall_dividend_speculative(nominal, 6) == pytest.approx(nominal.tool_latency_s)
    assert wall_time_speculative(nominal, 6) == pytest.approx(
        window_generation_time(nominal, 6) + absorb_time(nominal, 6)
    )


def test_speculation_hides_latency_only_up_to_the_window_generation_time() -> None:
    slow_tools = dataclasses.replace(Regime(), tool_latency_s=60.0)
    g = window_generation_time(slow_tools, 4)
    assert wall_dividend_speculative(slow_tools, 4) == pytest.approx(g)
    at_open = wall_dividend_speculative(slow_tools, 4, prefetched=False)
    assert at_open == pytest.approx(g - turn_time(slow_tools))


def test_the_crossover_latency_is_where_F_spec_and_P_cost_the_same() -> None:
    for n in (2, 4, 6, 10):
        star = crossover_latency(Regime(), n)
        at = dataclasses.replace(Regime(), tool_latency_s=star)
        assert wall_time_speculative(at, n) == pytest.approx(wall_time_parallel(at, n))
        above = dataclasses.replace(Regime(), tool_latency_s=star * 1.1)
        below = dataclasses.replace(Regime(), tool_latency_s=star * 0.9)
        assert wall_time_speculative(above, n) < wall_time_parallel(above, n)
        assert wall_time_speculative(below, n) > wall_time_parallel(below, n)


def test_at_the_nominal_regime_P_wins_every_window_at_half_a_second() -> None:
    assert crossover_latency(Regime(), 6) == pytest.approx(7.364)
    assert all(
        wall_time_speculative(Regime(), n) > wall_time_parallel(Regime(), n) for n in range(2, 11)
    )


@given(regimes(), st.integers(min_value=1, max_value=16), st.booleans())
def test_F_spec_is_never_slower_than_F_and_saves_at_most_one_wait(
    regime: Regime, n: int, prefetched: bool
) -> None:
    saved = wall_dividend_speculative(regime, n, prefetched=prefetched)
    rounding = 1e-9 * wall_time_flattened(regime, n)  # a difference of two wall times
    assert saved >= -rounding
    assert saved <= expected_max_latency(regime, n) + rounding
