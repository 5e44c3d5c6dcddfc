"""``harness frontier``: the closed-form cost model as a calculator for your own regime.

Prints, per window length n, every arm's wall time and billed tokens, F's dividends, the
crossover gaps g_T*/g_B*, the flip window n* and the recommended arm at the declared gap.
The arithmetic is all in :mod:`harness.costmodel`; this module reads options, formats and
plots.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.costmodel import (
    PARAMETERS,
    Regime,
    WindowCosts,
    energy_per_task_wh,
    energy_per_window_j,
    flip_window,
    phase_heuristic_cost_pp,
    wall_time_flattened,
    wall_time_parallel,
    wall_time_parallel_validated,
    wall_time_serial,
    window_costs,
)
from harness.costmodel.drafting import (
    Drafting,
    break_even_acceptance,
    drafted_saving,
    wall_time_flattened_drafted,
    wall_time_parallel_drafted,
    wall_time_serial_drafted,
    wall_time_speculative_drafted,
)
from harness.costmodel.speculation import (
    crossover_latency,
    wall_dividend_speculative,
    wall_time_speculative,
)
from harness.errors import ConfigError

__all__ = ("register", "run")

DEFAULT_WINDOWS = tuple(range(2, 11))
PLOT_EXTRA_HINT = "install the plot extra: pip install 'agent-harness[plot]'"

DESCRIPTION = """\
Price harness flattening in closed form for a regime (the paper's nominal one by default):
per certified window of n calls, the wall time and billed tokens of each arm (S serial,
F harness-flattened, P native parallel, P+V parallel plus validator), F's wall-time and
token dividends, the crossover gaps g_T*(n) and g_B*(n) below which P+V beats F, the flip
window n* where that happens at the declared gap g, and the arm to use per window:
flatten what the model cannot afford to emit in parallel. Beside them, F+spec (certified
speculation: the window's calls start when its phase starts, harness.costmodel.speculation):
its wall time, what it saves over F, and the tool latency L* above which it beats P. With
--draft-acceptance, drafted decoding (harness.costmodel.drafting: the engine verifies k
drafted tokens per step; --drafting on the embedded engine) prices every arm's window again.

Every regime parameter has an option; --params FILE reads a JSON object of them (the
format `Regime.to_json` writes and the benchmark emits), and options override the file.
This is an analytical model, not a measurement.
"""

EPILOG = """\
examples:
  harness frontier                              # nominal regime, windows 2..10
  harness frontier --n 2 6 8 10                 # the paper's windows
  harness frontier --gap 1.0 --tool-latency 2   # a stronger parallel caller, slower tools
  harness frontier --params measured.json --json > frontier.json
  harness frontier --tool-latency-sigma 0.15 --plot frontier.png
  harness frontier --draft-acceptance 0.93 --draft-tokens 6 --verify-cost 3   # this CPU's drafting

JSON (--json): {"regime": {...parameters...}, "windows": [{"n", "T_S", "T_F", "T_P",
"dividend_T_F", "dividend_T_F_fraction", "tokens_S", "tokens_F", "tokens_P",
"token_dividend_F", "token_dividend_F_fraction", "g_T_star", "g_B_star", "best_arm"}, ...],
"n_star": float or null, "speculation": [{"n", "T_F_spec", "dividend_T_spec",
"crossover_latency"}, ...], "drafting": null or {"acceptance", "tokens", "verify_cost",
"tokens_per_step", "speedup", "break_even_acceptance", "windows": [{"n", "T_S_draft",
"T_F_draft", "T_P_draft", "T_F_spec_draft", "saving"}, ...]}}; times in seconds, tokens per
window, gaps in pp, fractions 0..1.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``harness frontier`` to the CLI."""
    parser = sub.add_parser(
        "frontier",
        help="closed-form wall time, tokens and crossover gaps per window (the cost model)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--n",
        dest="windows",
        metavar="N",
        type=int,
        nargs="+",
        default=list(DEFAULT_WINDOWS),
        help="window sizes to price (default: 2 3 … 10)",
    )
    parser.add_argument(
        "--params",
        metavar="FILE",
        type=Path,
        help="JSON object of regime parameters; missing keys take the nominal values",
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        type=Path,
        help="draw wall time per window against n for the four arms (needs matplotlib)",
    )
    drafting = parser.add_argument_group("drafted decoding (harness.costmodel.drafting)")
    drafting.add_argument(
        "--draft-acceptance",
        metavar="α",
        type=float,
        default=None,
        help="a drafted token's chance to be kept (0-1); prices every arm with drafting",
    )
    drafting.add_argument(
        "--draft-tokens",
        metavar="k",
        type=int,
        default=6,
        help="tokens drafted per verification step [default 6, the engine's]",
    )
    drafting.add_argument(
        "--verify-cost",
        metavar="ρ",
        type=float,
        default=1.0,
        help="one verification step's time in plain decode steps [default 1; ~3 measured on "
        "a 2-core CPU at k = 6]",
    )
    nominal = Regime()
    group = parser.add_argument_group("regime parameters (override --params)")
    for param in PARAMETERS:
        group.add_argument(
            param.flag,
            dest=param.name,
            metavar=param.symbol,
            type=float,
            default=None,
            help=f"{param.help} [{param.unit}; nominal {getattr(nominal, param.name):g}]",
        )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Price the windows asked for and print a table, or JSON; optionally plot."""
    regime = _regime(args)
    drafting = (
        Drafting(args.draft_acceptance, args.draft_tokens, args.verify_cost)
        if args.draft_acceptance is not None
        else None
    )
    windows = [_window_size(n) for n in args.windows]
    costs = [window_costs(regime, n) for n in windows]
    n_star = flip_window(regime)
    if args.plot is not None:
        _plot(regime, windows, n_star, args.plot)
    if args.json:
        document = {
            "regime": regime.to_json(),
            "windows": [c.to_json() for c in costs],
            "n_star": n_star,
            "speculation": [_speculation(regime, n) for n in windows],
            "drafting": _drafting(regime, drafting, windows) if drafting else None,
        }
        print(json.dumps(document, indent=2))
    else:
        print(_table(regime, costs, n_star))
        if drafting is not None:
            print(_drafting_table(regime, drafting, windows))
        if args.plot is not None:
            print(f"\nplot written to {args.plot}")
    return 0


def _speculation(regime: Regime, n: float) -> dict[str, float]:
    return {
        "n": n,
        "T_F_spec": wall_time_speculative(regime, n),
        "dividend_T_spec": wall_dividend_speculative(regime, n),
        "crossover_latency": crossover_latency(regime, n),
    }


def _drafting(regime: Regime, drafting: Drafting, windows: Sequence[int]) -> dict[str, object]:
    return {
        "acceptance": drafting.acceptance,
        "tokens": drafting.tokens,
        "verify_cost": drafting.verify_cost,
        "tokens_per_step": drafting.tokens_per_step,
        "speedup": drafting.speedup,
        "break_even_acceptance": break_even_acceptance(drafting.tokens, drafting.verify_cost),
        "windows": [
            {
                "n": n,
                "T_S_draft": wall_time_serial_drafted(regime, n, drafting),
                "T_F_draft": wall_time_flattened_drafted(regime, n, drafting),
                "T_P_draft": wall_time_parallel_drafted(regime, n, drafting),
                "T_F_spec_draft": wall_time_speculative_drafted(regime, n, drafting),
                "saving": drafted_saving(regime, n, drafting),
            }
            for n in windows
        ],
    }


def _drafting_table(regime: Regime, drafting: Drafting, windows: Sequence[int]) -> str:
    facts = _drafting(regime, drafting, windows)
    out = [
        "",
        f"Drafted decoding: α = {drafting.acceptance:g}, k = {drafting.tokens}, ρ = "
        f"{drafting.verify_cost:g}: {drafting.tokens_per_step:.2f} tokens per verification "
        f"step, call decode {drafting.speedup:.2f}x (pays above α = "
        f"{facts['break_even_acceptance']:.2f}); wall time per window, seconds",
    ]
    rows = [
        (
            str(n),
            f"{wall_time_serial_drafted(regime, n, drafting):.2f}",
            f"{wall_time_flattened_drafted(regime, n, drafting):.2f}",
            f"{wall_time_parallel_drafted(regime, n, drafting):.2f}",
            f"{wall_time_speculative_drafted(regime, n, drafting):.2f}",
            f"{drafted_saving(regime, n, drafting):.2f}",
        )
        for n in windows
    ]
    out += _render(("n", "T_S^d", "T_F^d", "T_P^d", "T_F+spec^d", "saved"), rows)
    return "\n".join(out)


def _window_size(n: int) -> int:
    if n < 1:
        raise ConfigError(
            f"Window size --n {n} is below 1; a window holds at least one call (try --n 2 6 8 10)."
        )
    return n


def _regime(args: argparse.Namespace) -> Regime:
    regime = Regime() if args.params is None else _read_params(args.params)
    overrides = {p.name: getattr(args, p.name) for p in PARAMETERS}
    given = {name: value for name, value in overrides.items() if value is not None}
    return dataclasses.replace(regime, **given) if given else regime


def _read_params(path: Path) -> Regime:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"Cannot read the regime file '{path}': {reason}. Pass an existing JSON file to --params."
        ) from None
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"The regime file '{path}' is not valid JSON (line {exc.lineno}, column {exc.colno}: "
            f'{exc.msg}). Write one JSON object of parameters, e.g. {{"gap_pp": 1.5}}.'
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"The regime file '{path}' holds a JSON {type(data).__name__}, not an object of "
            f'parameters. Write e.g. {{"gap_pp": 1.5, "tool_latency_s": 0.8}}.'
        )
    return Regime.from_json(data)


# --------------------------------------------------------------------------------------------
# Text output


def _pct(fraction: float) -> str:
    return f"{100.0 * fraction:.1f}%"


def _regime_line(regime: Regime) -> str:
    r = regime
    return (
        f"regime: P={r.prefix_tokens:g} c={r.call_tokens:g} r={r.result_tokens:g} "
        f"a={r.absorb_tokens:g} tok | t_pf={r.prefill_ms_per_token:g} "
        f"t_dec={r.decode_ms_per_token:g} ms/tok | o={r.overhead_s:g} s L={r.tool_latency_s:g} s "
        f"σ_L={r.tool_latency_sigma_s:g} s | h={r.prefix_hit:g} h_R={r.stride_hit:g} | "
        f"g={r.gap_pp:g}pp ε={r.accuracy_budget_pp:g}pp w={r.windows_per_task:g} "
        f"W={r.watts:g} φ={r.false_fill_rate:g}"
    )


def _render(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in rows]
    return lines


def _table(regime: Regime, costs: list[WindowCosts], n_star: float | None) -> str:
    g = regime.gap_pp
    out = [
        "Closed-form cost per certified window (analytical model, not a measurement)",
        _regime_line(regime),
        "",
        "Wall time per window, seconds (ΔT = saving against S; best = arm to run at gap g)",
    ]
    wall_header = ("n", "T_S", "T_F", "ΔT_F", "ΔT_F%", "T_P", "ΔT_P", "ΔT_P%", "T_P+V", "g_T*", "best")  # fmt: skip
    wall_rows = [
        (
            str(c.n),
            f"{c.T_S:.2f}",
            f"{c.T_F:.2f}",
            f"{c.dividend_T_F:.2f}",
            _pct(c.dividend_T_F_fraction),
            f"{c.T_P:.2f}",
            f"{c.dividend_T_P:.2f}",
            _pct(c.dividend_T_P_fraction),
            f"{c.T_PV:.2f}",
            f"{c.g_T_star:.2f}pp",
            c.best_arm,
        )
        for c in costs
    ]
    out += _render(wall_header, wall_rows)
    out += [
        "",
        "F+spec, certified speculation (calls start when the phase starts; hit rate 1): wall "
        "time, saving against F, and the tool latency L* above which it beats P",
    ]
    spec_rows = [
        (
            str(row["n"]),
            f"{row['T_F_spec']:.2f}",
            f"{row['dividend_T_spec']:.2f}",
            f"{row['crossover_latency']:.2f}",
            "F+spec" if row["T_F_spec"] <= c.T_P else "P",
        )
        for c in costs
        for row in [_speculation(regime, c.n)]
    ]
    out += _render(("n", "T_F+spec", "ΔT_spec", "L*", "F+spec vs P"), spec_rows)
    out += ["", "Billed tokens per window (D_tok = F's saving against S)"]
    token_header = ("n", "B_S", "B_F", "D_tok_F", "D_tok_F%", "B_P", "B_P+V", "g_B*", "P+V cheaper")
    token_rows = [
        (
            str(c.n),
            f"{c.tokens_S:.0f}",
            f"{c.tokens_F:.0f}",
            f"{c.token_dividend_F:.0f}",
            _pct(c.token_dividend_F_fraction),
            f"{c.tokens_P:.0f}",
            f"{c.tokens_PV:.0f}",
            f"{c.g_B_star:.2f}pp",
            "yes" if g < c.g_B_star else "no",
        )
        for c in costs
    ]
    out += _render(token_header, token_rows)
    out += ["", f"Energy of F's wall-time dividend at {regime.watts:g} W"]
    energy_rows = [
        (
            str(c.n),
            f"{energy_per_window_j(regime, c.dividend_T_F) / 1000.0:.2f}",
            f"{energy_per_task_wh(regime, c.dividend_T_F):.2f}",
        )
        for c in costs
    ]
    out += _render(("n", "kJ/window", f"Wh/task (w={regime.windows_per_task:g})"), energy_rows)
    out += ["", *_verdict_lines(regime, n_star)]
    return "\n".join(out)


def _verdict_lines(regime: Regime, n_star: float | None) -> list[str]:
    """What the table concludes: the flip window n*, the phase-heuristic detector's accuracy
    cost against the budget, and the rule."""
    g = regime.gap_pp
    out: list[str] = []
    if n_star is None:
        out.append(
            f"n*: none — at g = {g:g}pp P+V never beats F in wall time; flatten every window."
        )
    else:
        first = max(2, math.floor(n_star) + 1)
        out.append(
            f"n* = {n_star:.2f}: at g = {g:g}pp P+V beats F in wall time for windows n >= {first}; "
            f"flatten shorter ones."
        )
    heuristic = phase_heuristic_cost_pp(regime)
    verdict = "within" if heuristic <= regime.accuracy_budget_pp else "OUTSIDE"
    out.append(
        f"Phase-heuristic detector: φ·w·f = {heuristic:.2f}pp of accuracy, {verdict} the "
        f"ε = {regime.accuracy_budget_pp:g}pp budget (schema-sound detector: 0pp)."
    )
    if regime.tool_latency_sigma_s > 0:
        out.append(
            "Concurrent waits use E[max of n] = L + σ_L κ_n with κ_n exact (numeric "
            "integration), capped at n L."
        )
    out.append("Rule: flatten what the model cannot afford to emit in parallel.")
    return out


# --------------------------------------------------------------------------------------------
# Plot


def _plot(regime: Regime, windows: list[int], n_star: float | None, path: Path) -> None:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(
            f"--plot needs matplotlib, which is not installed; {PLOT_EXTRA_HINT}"
        ) from None
    top = max(max(windows), 2)
    ns = [1 + (top - 1) * i / 200 for i in range(201)]
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.add_subplot()
    arms = (
        ("S serial", wall_time_serial),
        ("F harness-flattened", wall_time_flattened),
        ("P native parallel", wall_time_parallel),
        (f"P+V (g = {regime.gap_pp:g}pp)", wall_time_parallel_validated),
    )
    for label, curve in arms:
        ax.plot(ns, [curve(regime, n) for n in ns], label=label)
    if n_star is not None and n_star <= top:
        ax.axvline(n_star, color="grey", linestyle=":", label=f"n* = {n_star:.2f}")
    ax.set_xlabel("window length n (certified calls)")
    ax.set_ylabel("wall time per window (s)")
    ax.set_title("Wall time per certified window (closed form, not a measurement)")
    ax.grid(alpha=0.3)
    ax.legend()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise ConfigError(
            f"Cannot write the plot to '{path}': {exc.strerror or exc}. Pick a writable path."
        ) from None
