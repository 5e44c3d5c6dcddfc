"""The cost model: the paper's closed forms and what this project adds to them.

- :mod:`harness.costmodel.closed_form` — the paper's closed forms: wall time and tokens per
  arm, the dividends, the crossover gaps, energy (its names are re-exported here);
- :mod:`harness.costmodel.speculation` — certified speculation (F+spec);
- :mod:`harness.costmodel.drafting` — drafted window decoding;
- :mod:`harness.costmodel.routing` — prefix-affine routing over engine replicas.
"""

from __future__ import annotations

from harness.costmodel.closed_form import (
    FLIP_SEARCH_MAX,
    PARAMETERS,
    Arm,
    Parameter,
    Regime,
    WindowCosts,
    absorb_time,
    best_arm,
    crossover_gap_tokens,
    crossover_gap_wall,
    energy_per_task_wh,
    energy_per_window_j,
    expected_max_latency,
    flip_window,
    kappa,
    kappa_limit,
    phase_heuristic_cost_pp,
    prefix_prefill_time,
    redo_tokens,
    redo_wall_time,
    token_dividend_flattened,
    tokens_flattened,
    tokens_parallel,
    tokens_parallel_validated,
    tokens_serial,
    turn_time,
    wall_dividend_flattened,
    wall_time_flattened,
    wall_time_parallel,
    wall_time_parallel_validated,
    wall_time_serial,
    window_costs,
)

__all__ = (
    "FLIP_SEARCH_MAX",
    "PARAMETERS",
    "Arm",
    "Parameter",
    "Regime",
    "WindowCosts",
    "absorb_time",
    "best_arm",
    "crossover_gap_tokens",
    "crossover_gap_wall",
    "energy_per_task_wh",
    "energy_per_window_j",
    "expected_max_latency",
    "flip_window",
    "kappa",
    "kappa_limit",
    "phase_heuristic_cost_pp",
    "prefix_prefill_time",
    "redo_tokens",
    "redo_wall_time",
    "token_dividend_flattened",
    "tokens_flattened",
    "tokens_parallel",
    "tokens_parallel_validated",
    "tokens_serial",
    "turn_time",
    "wall_dividend_flattened",
    "wall_time_flattened",
    "wall_time_parallel",
    "wall_time_parallel_validated",
    "wall_time_serial",
    "window_costs",
)
