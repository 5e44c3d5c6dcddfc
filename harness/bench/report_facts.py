"""The report's bookkeeping: what ran, what failed and why, what was measured and what declared.

Each function reads the job records (and the run's segments) and returns JSON-ready data for
``summary.json``; :func:`markdown` renders the sections ``report.md`` shows before the figures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness import costmodel
from harness.bench.analysis import arm_key, measured_regime_values
from harness.bench.outcomes import error_kind, outcome, outcome_counts
from harness.bench.segments import load_segments
from harness.costmodel import Regime

__all__ = ("DECLARED", "DEFAULT", "facts", "format_cell", "markdown", "regime_name")

Job = Mapping[str, Any]
_WORKLOAD = ("fan_out", "chain", "mixed")


def _errors_by_policy(jobs: Sequence[Job]) -> dict[str, dict[str, dict[str, int]]]:
    """``{policy: {error kind: {"model": n, "control": n, "harness": n}}}``: every error,
    whose it is (the model's, the phase-heuristic control's, or the harness's)."""
    out: dict[str, dict[str, Counter[str]]] = {}
    # A BFCL entry scored correct that then ran into a budget is solved; its budget is the model's.
    whose_of = {"model_failed": "model", "control_failed": "control", "solved": "model"}
    for job in jobs:
        kind = error_kind(job)
        if kind is None:
            continue
        whose = whose_of.get(outcome(job), "harness")
        out.setdefault(str(job.get("policy")), {}).setdefault(kind, Counter())[whose] += 1
    return {
        policy: {
            kind: {"model": c["model"], "control": c["control"], "harness": c["harness"]}
            for kind, c in kinds.items()
        }
        for policy, kinds in sorted(out.items())
    }


def _window_counts(jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """Certified windows (n >= 2) per detector, arm label (F, F+eager, F+spec) and policy:
    windows, jobs, false fills."""
    groups: dict[tuple[str, str, str], list[Job]] = {}
    for job in jobs:
        if job.get("arm") == "F" and job.get("kind") in _WORKLOAD:
            label = arm_key(job)
            key = (str(job.get("detector", "schema_sound")), label, str(job.get("policy")))
            groups.setdefault(key, []).append(job)
    rows = []
    for (detector, label, policy), group in sorted(groups.items()):
        windows = [w for j in group for w in j.get("windows", []) if len(w["call_ids"]) >= 2]
        rows.append({
            "detector": detector, "arm": label, "policy": policy, "jobs": len(group),
            "windows": len(windows), "per_task": len(windows) / len(group),
            "false_fills": sum(1 for w in windows if w.get("false_fill")),
        })  # fmt: skip
    return rows


def reviewed_messages(jobs: Sequence[Job]) -> int:
    """Messages of P+V ``jobs`` the validator reviewed: every generated message with a tool
    call (of any size: one message is one window of P), not counting the resamples."""
    return sum(
        1 for j in jobs for t in j.get("turns", [])
        if t.get("n_calls") and t.get("purpose") not in ("resample", "discard")
    )  # fmt: skip


def _validator(jobs: Sequence[Job]) -> dict[str, dict[str, Any]]:
    """P+V per policy: messages the validator reviewed, windows (n >= 2 messages), resamples,
    jobs that resampled, and ε̂_v = resamples per reviewed message (the measured rate at which
    the validator sent a message back; a 1-call message is reviewed too)."""
    out = {}
    for policy in ("gold", "model"):
        chosen = [j for j in jobs if j.get("arm") == "P+V" and j.get("policy") == policy]
        if not chosen:
            continue
        messages = reviewed_messages(chosen)
        resamples = sum(int(j.get("summary", {}).get("resamples", 0) or 0) for j in chosen)
        resampled = [j for j in chosen if (j.get("summary", {}).get("resamples") or 0) > 0]
        out[policy] = {
            "jobs": len(chosen),
            "messages": messages,
            "windows": sum(len(j.get("windows", [])) for j in chosen),
            "resamples": resamples,
            "jobs_resampled": len(resampled),
            "jobs_resampled_solved": sum(1 for j in resampled if j.get("success")),
            "epsilon_v": resamples / messages if messages else None,
        }
    return out


def _false_fill_rate(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """φ̂: false fills per certified window of the phase-heuristic F (gold policy, no eager)."""
    for row in rows:
        if (row["detector"], row["arm"], row["policy"]) == ("phase_heuristic", "F", "gold"):
            return row["false_fills"] / row["windows"] if row["windows"] else None
    return None


#: Regime parameters the protocol declares (a bench run never measures them, or measures g and
#: φ elsewhere: BFCL, the heuristic control): unmeasured, their value is a declaration.
DECLARED = frozenset(
    {"accuracy_budget_pp", "watts", "false_fill_fail_share", "gap_pp", "false_fill_rate"}
)
#: The label of a parameter a run could have measured but did not (no gold-policy S turn, call or
#: schema-sound F window to measure it from): the cost model's default value stands in.
DEFAULT = "default (not measured by this run)"
#: What a gold-policy S job measures: without one, the closed form is priced at the defaults.
_TIMED = ("prefill_ms_per_token", "decode_ms_per_token", "overhead_s", "prefix_tokens")


def _source(name: str, measured: set[str]) -> str:
    if name in measured:
        return "measured"
    return "declared" if name in DECLARED else DEFAULT


def regime_name(provenance: Mapping[str, str]) -> str:
    """Which regime the closed form was priced at, for a heading: ``the measured regime`` when
    every measurable parameter was measured; else it names the defaults that stood in."""
    defaults = [name for name, source in provenance.items() if source == DEFAULT]
    if not defaults:
        return "the measured regime"
    if not any(source.startswith("measured") for source in provenance.values()):
        return "the nominal regime (the cost model's defaults: this run measured none of it)"
    if all(provenance.get(n) == DEFAULT for n in _TIMED):
        return (
            "the nominal regime (the cost model's defaults: this run had no gold-policy S job "
            "to measure it from)"
        )
    return f"this run's regime ({', '.join(defaults)} at their defaults: not measured)"


def facts(
    jobs: Sequence[Job],
    out: Path,
    meta: Mapping[str, Any],
    regime: Regime,
    measured_gap_pp: float | None,
) -> dict[str, Any]:
    """Segments, outcomes, errors, window counts, the regime's provenance, the frontier
    recomputed at the measured g and φ, and the validator's ε̂_v."""
    segments = load_segments(out)
    windows = _window_counts(jobs)
    measured = set(measured_regime_values(jobs))
    phi = _false_fill_rate(windows)
    provenance = {name: _source(name, measured) for name in regime.to_json()}
    at_measured = regime
    if measured_gap_pp is not None:
        at_measured = replace(at_measured, gap_pp=min(100.0, max(0.0, measured_gap_pp)))
        provenance["gap_pp"] = "measured (BFCL simple − parallel)"
    if phi is not None:
        at_measured = replace(at_measured, false_fill_rate=phi)
        provenance["false_fill_rate"] = "measured (phase-heuristic F, gold)"
    frontier = {
        "regime": at_measured.to_json(),
        "n_star": costmodel.flip_window(at_measured),
        "g_T_star_pp": {n: costmodel.crossover_gap_wall(at_measured, n) for n in (2, 6, 10)},
        "heuristic_cost_pp": costmodel.phase_heuristic_cost_pp(at_measured),
    }
    return {
        "segments": segments,
        "bench_wall_s": sum(float(s["wall_s"]) for s in segments) or meta.get("bench_wall_s"),
        "command": (segments[0]["command"] if segments else None)
        or meta.get("plan", {}).get("command"),
        "outcomes": outcome_counts(jobs),
        "errors_by_policy": _errors_by_policy(jobs),
        "window_counts": windows,
        "regime_provenance": provenance,
        "frontier_measured": frontier,
        "validator": _validator(jobs),
    }


def format_cell(value: Any, digits: int = 2) -> str:
    """A report table's cell: ``–`` for none, a float to ``digits`` places, else ``str``."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown(f: Mapping[str, Any]) -> list[str]:
    """The report's sections on what ran and how it ended (rendered before the verdicts)."""
    segments = f["segments"]
    wall = f.get("bench_wall_s")
    if segments:
        parts = " + ".join(f"{float(s['wall_s']):.0f}" for s in segments)
        when = f"bench wall {float(wall or 0):.0f} s over {len(segments)} segment(s) ({parts} s)"
    else:
        when = (
            f"bench wall {float(wall or 0):.0f} s (this run recorded no segments.jsonl: only the "
            "last invocation's wall is known)"
        )
    lines = [when + ".", "", "Command: `" + str(f.get("command") or "") + "`", ""]
    lines += [
        "## How the jobs ended",
        "",
        "A miss under a forced policy (gold, oracle) with the schema-sound detector, or an engine "
        "error, is a harness failure; a miss or a budget under the model policy is the model's; "
        "a miss of the phase-heuristic control under a forced policy is the cost of its false "
        "fills (what R3 measures). A BFCL entry its checker scores correct is solved, even when "
        "the model then ran into a budget (R4 counts it; its budget is listed as the model's).",
        "",
        "| policy | solved | the model could not solve it | the heuristic control missed | "
        "harness failures |",
        "|---|---|---|---|---|",
    ]
    for policy, c in f["outcomes"].items():
        lines.append(
            f"| {policy} | {c['solved']} | {c['model_failed']} | {c.get('control_failed', 0)} "
            f"| {c['harness_failed']} |"
        )
    if f["errors_by_policy"]:
        lines += [
            "",
            "| policy | error kind | the model's | the heuristic control's | the harness's |",
            "|---|---|---|---|---|",
        ]
        for policy, kinds in f["errors_by_policy"].items():
            for kind, c in sorted(kinds.items()):
                lines.append(
                    f"| {policy} | {kind} | {c['model']} | {c.get('control', 0)} | {c['harness']} |"
                )
    if f["window_counts"]:
        lines += [
            "",
            "## Certified windows per detector (n ≥ 2)",
            "",
            "| detector | arm | policy | jobs | windows | per task | false fills |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in f["window_counts"]:
            lines.append(
                f"| {r['detector']} | {r['arm']} | {r['policy']} | {r['jobs']} | {r['windows']} | "
                f"{r['per_task']:.3f} | {r['false_fills']} |"
            )
    if f["validator"]:
        lines += [
            "",
            "## The P+V validator",
            "",
            "| policy | jobs | messages reviewed | windows (n ≥ 2) | resamples | jobs that "
            "resampled | of them solved | ε̂_v (resamples per message) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for policy, v in f["validator"].items():
            lines.append(
                f"| {policy} | {v['jobs']} | {v['messages']} | {v['windows']} | "
                f"{v['resamples']} | {v['jobs_resampled']} | {v['jobs_resampled_solved']} | "
                f"{format_cell(v['epsilon_v'], 3)} |"
            )
    return lines


def regime_markdown(regime: Mapping[str, Any], f: Mapping[str, Any]) -> list[str]:
    """The regime table with each parameter's provenance, and the frontier at the measured
    g and false-fill rate."""
    provenance = f["regime_provenance"]
    frontier = f["frontier_measured"]
    lines = ["| parameter | value | source |", "|---|---|---|"]
    at = frontier["regime"]
    for k, v in regime.items():
        shown = at.get(k, v) if k in ("gap_pp", "false_fill_rate") else v
        lines.append(f"| {k} | {format_cell(shown, 4)} | {provenance.get(k, 'declared')} |")
    g = frontier["g_T_star_pp"]
    lines += [
        "",
        f"Frontier at {regime_name(provenance)}, with the measured g and false-fill rate where "
        f"this run measured them: n* = {format_cell(frontier['n_star'])} "
        f"(g = {format_cell(at['gap_pp'])}pp); g_T* = {format_cell(g[2])} / {format_cell(g[6])} / {format_cell(g[10])}pp "
        f"at n = 2 / 6 / 10; the phase-heuristic detector's expected cost 100·φ·w·f = "
        f"{format_cell(frontier['heuristic_cost_pp'])}pp (φ = {format_cell(at['false_fill_rate'], 3)}, "
        f"w = {format_cell(at['windows_per_task'], 3)}, f = {format_cell(at['false_fill_fail_share'])} declared).",
    ]
    return lines
