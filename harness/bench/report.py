"""The benchmark report: summary.json, regime.json, report.md and PNG plots.

Everything here is computed from the job records (:mod:`harness.bench.analysis`), so a committed
``results.jsonl`` can be re-reported without an engine: ``harness bench --report-only DIR``.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness import costmodel
from harness.bench.analysis import (
    WindowMeasure,
    bfcl_gaps,
    estimate_regime,
    job_label,
    measure_windows,
    verdict_null,
    verdict_r1,
    verdict_r2,
    verdict_r3,
    verdict_r4,
)
from harness.bench.bfcl import CATEGORIES, BFCLDataError, data_quirks
from harness.bench.report_facts import facts, format_cell, markdown, regime_markdown, regime_name
from harness.bench.report_family import (
    answer_baselines,
    family_accuracy,
    family_markdown,
    validator_by_family,
)
from harness.bench.workload import ALL_KINDS
from harness.costmodel import Regime
from harness.costmodel.speculation import wall_time_speculative
from harness.loop.arm_label import ARM_LABEL_NAMES, ARM_LABELS, ArmLabel

__all__ = ("write_report",)

#: The closed form of each arm label that has one: the wall time of a window of n calls.
CLOSED_FORMS: dict[ArmLabel, Callable[[Regime, int], float]] = {
    ArmLabel.S: costmodel.wall_time_serial,
    ArmLabel.F: costmodel.wall_time_flattened,
    ArmLabel.P: costmodel.wall_time_parallel,
    ArmLabel.P_V: costmodel.wall_time_parallel_validated,
    ArmLabel.F_SPEC: wall_time_speculative,
}


def _per_n(windows: Sequence[WindowMeasure], regime: Regime) -> list[dict[str, Any]]:
    by_n: dict[int, list[WindowMeasure]] = defaultdict(list)
    for w in windows:
        by_n[w.n].append(w)
    rows = []
    for n in sorted(by_n):
        group = by_n[n]
        measured = {
            str(label): statistics.median([w.wall[label] for w in group if label in w.wall])
            for label in ARM_LABELS
            if any(label in w.wall for w in group)
        }
        dividends = [
            w.wall[ArmLabel.S] - w.wall[ArmLabel.F]
            for w in group
            if ArmLabel.S in w.wall and ArmLabel.F in w.wall
        ]
        eager = [
            w.wall[ArmLabel.F] - w.wall[ArmLabel.F_EAGER]
            for w in group
            if ArmLabel.F in w.wall and ArmLabel.F_EAGER in w.wall
        ]
        rows.append(
            {
                "n": n,
                "windows": len(group),
                "measured": measured,
                "predicted": {str(label): wall(regime, n) for label, wall in CLOSED_FORMS.items()},
                "dividend_F_measured": statistics.median(dividends) if dividends else None,
                "dividend_F_predicted": costmodel.wall_dividend_flattened(regime, n),
                "eager_extra_saving": statistics.median(eager) if eager else None,
            }
        )
    return rows


def _tokens_by_arm(jobs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for kind in ALL_KINDS:
        for label in ARM_LABELS:
            bills = [
                j["summary"]["billed_tokens"]
                for j in jobs
                if j.get("kind") == kind and job_label(j) == label and j.get("policy") == "gold"
                and j.get("detector") == "schema_sound" and j.get("summary")
            ]  # fmt: skip
            if bills:
                out[kind][str(label)] = statistics.fmean(bills)
    return dict(out)


def _accuracy(jobs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for policy in ("gold", "oracle", "model"):
        for label in ARM_LABELS:
            chosen = [
                j for j in jobs
                if j.get("kind") in ("fan_out", "chain", "mixed") and job_label(j) == label
                and j.get("policy") == policy and j.get("detector") == "schema_sound"
            ]  # fmt: skip
            if chosen:
                out[policy][str(label)] = [sum(1 for j in chosen if j["success"]), len(chosen)]
        heuristic = [
            j for j in jobs
            if j.get("detector") == "phase_heuristic" and j.get("policy") == policy
        ]  # fmt: skip
        if heuristic:
            out[policy]["F/phase_heuristic"] = [
                sum(1 for j in heuristic if j["success"]),
                len(heuristic),
            ]
    return dict(out)


def _bfcl(jobs: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """``{"<category>/<arm>": [correct, run]}`` for every BFCL category and arm that ran."""
    out = {}
    for category in CATEGORIES:
        for arm in ("S", "P", "P+V"):
            chosen = [
                j for j in jobs if j.get("kind") == f"bfcl_{category}" and j.get("arm") == arm
            ]
            if chosen:
                out[f"{category}/{arm}"] = [sum(1 for j in chosen if j["success"]), len(chosen)]
    return out


def _bfcl_quirks(bfcl: Mapping[str, Any]) -> dict[str, list[str]]:
    """The data quirks (left out of model scoring) of every BFCL category that ran."""
    ran = [c for c in CATEGORIES if any(k.startswith(f"{c}/") for k in bfcl)]
    try:
        return {c: [q.id for q in data_quirks(c)] for c in ran}
    except BFCLDataError:  # re-reporting without the bfcl-eval package
        return {}


def _loops(meta: Mapping[str, Any]) -> int:
    """How many loops shared one engine in the run (the plan's concurrency; 1 if unknown)."""
    plan = meta.get("plan")
    value = plan.get("concurrency") if isinstance(plan, Mapping) else None
    return int(value) if isinstance(value, int) and value > 0 else 1


def write_report(
    jobs: Sequence[Mapping[str, Any]],
    out: Path,
    meta: Mapping[str, Any],
    *,
    declared_gap_pp: float = 2.8,
) -> dict[str, Any]:
    """Compute everything, write summary.json, regime.json, report.md and plots; return the summary."""
    regime = estimate_regime(jobs, base=Regime(gap_pp=declared_gap_pp))
    windows = measure_windows(jobs)
    bfcl = _bfcl(jobs)
    simple = tuple(bfcl.get("simple/S", [0, 0]))
    parallel = tuple(bfcl.get("parallel/P", [0, 0]))
    verdicts = [
        verdict_r1(windows, regime, loops=_loops(meta)),
        verdict_r2(jobs),
        verdict_r3(jobs, budget_pp=regime.accuracy_budget_pp),
        verdict_r4((simple[0], simple[1]), (parallel[0], parallel[1]), declared_pp=declared_gap_pp),
        verdict_null(jobs),
    ]
    measured_gap = verdicts[3].figures.get("gap_pp")
    recomputed = None
    if verdicts[3].held is False and measured_gap is not None:
        g = min(100.0, max(0.0, float(measured_gap)))
        regime_g = replace(regime, gap_pp=g)
        recomputed = {"gap_pp": g, "n_star": costmodel.flip_window(regime_g)}
    report_facts = facts(jobs, out, meta, regime, measured_gap)
    summary = {
        "meta": dict(meta),
        "jobs": len(jobs),
        "failed_jobs": sum(1 for j in jobs if j.get("error")),
        "facts": report_facts,
        "regime": regime.to_json(),
        "n_star_measured_regime": costmodel.flip_window(regime),
        "recomputed_with_measured_gap": recomputed,
        "per_n": _per_n(windows, regime),
        "tokens_by_arm": _tokens_by_arm(jobs),
        "accuracy": _accuracy(jobs),
        "family_accuracy": family_accuracy(jobs),
        "validator_by_family": validator_by_family(jobs),
        "answer_baselines": answer_baselines(jobs, seed=int(meta.get("plan", {}).get("seed", 0))),
        "bfcl": bfcl,
        "bfcl_gaps": bfcl_gaps(bfcl),
        "bfcl_quirks": _bfcl_quirks(bfcl),
        "verdicts": [v.to_json() for v in verdicts],
        "speculation": _speculation(jobs),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(
        json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n"
    )
    (out / "regime.json").write_text(json.dumps(regime_file(report_facts), indent=2) + "\n")
    plots = _plots(summary, regime, out)
    (out / "report.md").write_text(_markdown(summary, plots))
    return summary


def regime_file(report_facts: Mapping[str, Any]) -> dict[str, Any]:
    """``regime.json``: the regime the report's frontier is priced at (the measured g and φ where
    the run measured them) and, under ``source``, what each value is: measured, declared or
    default (``harness frontier --params`` reads it; ``source`` is ignored there)."""
    return {
        **report_facts["frontier_measured"]["regime"],
        "source": dict(report_facts["regime_provenance"]),
    }


def _speculation(jobs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """What F+spec's speculation did per task kind (gold policy): windows and those where
    prediction was possible, hits, misses, cancelled speculations and wasted tool seconds."""
    out: dict[str, dict[str, float]] = {}
    for kind in ("fan_out", "chain", "mixed"):
        windows = [
            w for j in jobs
            if j.get("kind") == kind and job_label(j) == ArmLabel.F_SPEC and j.get("policy") == "gold"
            for w in j.get("windows", [])
        ]  # fmt: skip
        if not windows:
            continue
        totals = {k: float(sum(w.get(f"spec_{k}") or 0 for w in windows))
                  for k in ("predicted", "hits", "misses", "cancelled", "wasted_s")}  # fmt: skip
        totals["windows"] = float(len(windows))
        totals["windows_predicted"] = float(sum(1 for w in windows if w.get("spec_predicted")))
        emitted = totals["hits"] + totals["misses"]
        totals["hit_rate"] = totals["hits"] / emitted if emitted else 0.0
        out[kind] = totals
    return out


def _executor_lines(executor: Mapping[str, Any] | None) -> list[str]:
    """Where the jobs ran, when not in this process (a Ray pool's :meth:`describe`)."""
    if not executor:
        return []
    lost = executor.get("jobs_resumed_after_lost_worker", {})
    return [
        f"Ran on Ray: {len(executor.get('workers', []))} worker(s) on {executor.get('nodes')} "
        f"node(s), {executor.get('concurrency_per_worker')} job(s) at a time each; "
        f"{len(lost)} job(s) resumed from their journal after losing a worker.",
        "",
    ]


def _markdown(summary: Mapping[str, Any], plots: Sequence[str]) -> str:
    meta = summary["meta"]
    lines = ["# Benchmark report: the parallelism dividend, measured", ""]
    outcomes = summary["facts"]["outcomes"]
    harness_failed = sum(c["harness_failed"] for c in outcomes.values())
    model_failed = sum(c["model_failed"] for c in outcomes.values())
    control_failed = sum(c.get("control_failed", 0) for c in outcomes.values())
    control = f", {control_failed} the heuristic control missed" if control_failed else ""
    lines += [
        f"Engine: **{meta.get('engine')}**; jobs: {summary['jobs']} ({summary['failed_jobs']} ended "
        f"in an error; {model_failed} the model could not solve{control}, {harness_failed} "
        "harness failures: see below);",
        *markdown(summary["facts"]),
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(meta.get("versions", {}).items())),
        "",
        *_executor_lines(meta.get("executor")),
        "## Verdicts",
        "",
        "| criterion | verdict | numbers |",
        "|---|---|---|",
    ]
    for v in summary["verdicts"]:
        held = {True: "held", False: "**violated**", None: "not judged"}[v["held"]]
        lines.append(f"| {v['name']} | {held} | {v['summary']} |")
    if summary.get("recomputed_with_measured_gap"):
        rec = summary["recomputed_with_measured_gap"]
        lines += [
            "",
            f"R4 outside its band: with the measured g = {rec['gap_pp']:.1f}pp the flip window is n* = {format_cell(rec['n_star'])}.",
        ]
    lines += ["", "## Regime: measured or declared", ""]
    lines += regime_markdown(summary["regime"], summary["facts"])
    lines += [
        "",
        f"Flip window n* at {regime_name(summary['facts']['regime_provenance'])} and the declared g: {format_cell(summary['n_star_measured_regime'])}.",
        "",
    ]
    lines += _window_lines(summary)
    lines += [
        "",
        "## Billed tokens per task (gold policy, mean)",
        "",
        "| kind | " + " | ".join(ARM_LABEL_NAMES) + " |",
        "|---" * (len(ARM_LABEL_NAMES) + 1) + "|",
    ]
    for kind, arms in summary["tokens_by_arm"].items():
        lines.append(
            f"| {kind} | " + " | ".join(format_cell(arms.get(a), 0) for a in ARM_LABEL_NAMES) + " |"
        )
    lines += [
        "",
        "## Task accuracy (gold label met)",
        "",
        "| policy | arm | succeeded |",
        "|---|---|---|",
    ]
    for policy, arms in summary["accuracy"].items():
        for arm, (ok, n) in arms.items():
            lines.append(f"| {policy} | {arm} | {ok}/{n} ({100 * ok / n:.0f}%) |")
    lines += ["", *family_markdown(
        summary.get("family_accuracy", {}), summary.get("validator_by_family", {}),
        summary.get("answer_baselines"),
    )]  # fmt: skip
    if summary["bfcl"]:
        lines += ["", "## BFCL at temperature 0", "", "| category/arm | correct |", "|---|---|"]
        for key, (ok, n) in summary["bfcl"].items():
            lines.append(f"| {key} | {ok}/{n} ({100 * ok / n:.0f}%) |")
        lines += _bfcl_gap_lines(summary)
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    lines += ["", "## Reading these numbers", "", CAVEATS, ""]
    return "\n".join(lines)


def _window_lines(summary: Mapping[str, Any]) -> list[str]:
    """The report's per-window sections: wall time per certified window, measured beside the
    closed form, and certified speculation's hits and misses (when F+spec ran)."""
    lines = [
        "## Wall time per certified window: measured (median) vs closed form at "
        + regime_name(summary["facts"]["regime_provenance"]),
        "",
        "| n | windows | S meas | S pred | F meas | F pred | F+eager meas | F+spec meas | F+spec pred | P meas | P pred | P+V meas | F dividend meas | F dividend pred | eager extra |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in summary["per_n"]:
        m, p = row["measured"], row["predicted"]
        lines.append(
            f"| {row['n']} | {row['windows']} | {format_cell(m.get('S'))} | {format_cell(p['S'])} | {format_cell(m.get('F'))} | "
            f"{format_cell(p['F'])} | {format_cell(m.get('F+eager'))} | {format_cell(m.get('F+spec'))} | {format_cell(p.get('F+spec'))} | "
            f"{format_cell(m.get('P'))} | {format_cell(p['P'])} | "
            f"{format_cell(m.get('P+V'))} | {format_cell(row['dividend_F_measured'])} | {format_cell(row['dividend_F_predicted'])} | "
            f"{format_cell(row['eager_extra_saving'])} |"
        )
    if summary.get("speculation"):
        lines += [
            "",
            "## Certified speculation (F+spec, gold policy)",
            "",
            "| kind | windows | prediction possible | predicted | hits | misses | hit rate | cancelled | wasted tool s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for kind, t in summary["speculation"].items():
            lines.append(
                f"| {kind} | {t['windows']:.0f} | {t['windows_predicted']:.0f} | {t['predicted']:.0f} | "
                f"{t['hits']:.0f} | {t['misses']:.0f} | {format_cell(t['hit_rate'])} | {t['cancelled']:.0f} | "
                f"{format_cell(t['wasted_s'], 3)} |"
            )
    return lines


def _bfcl_gap_lines(summary: Mapping[str, Any]) -> list[str]:
    lines = []
    if summary.get("bfcl_gaps"):
        lines += [
            "",
            "g per category pair (single-call under S − parallel under P; R4 judges simple/parallel):",
            "",
            "| pair | single-call S | parallel P | g (pp) | 95% CI (pp) |",
            "|---|---|---|---|---|",
        ]
        for row in summary["bfcl_gaps"]:
            (s_ok, s_n), (p_ok, p_n) = row["single"], row["parallel"]
            low, high = row["ci_pp"]
            lines.append(
                f"| {row['pair']} | {s_ok}/{s_n} | {p_ok}/{p_n} | {row['gap_pp']:+.1f} | "
                f"[{low:+.1f}, {high:+.1f}] |"
            )
    quirks = summary.get("bfcl_quirks") or {}
    if any(quirks.values()):
        lines += ["", "Data quirks (gold fails BFCL's checker or the tool schema; not scored):", ""]
        lines += [f"* {c}: {', '.join(ids)}" for c, ids in quirks.items() if ids]
    return lines


CAVEATS = """\
* Spans: a window's wall time runs from the turn that emitted its first call to the end of its
  absorb turn, in every arm (call ids are identical across arms under the gold policy).
* Concurrency: the arms of a task run side by side with other tasks' loops on one engine
  (continuous batching), so a turn's time includes queueing behind other loops; the closed form
  prices one loop alone. Compare arms within this run, not with another machine.
* The gold policy constrains decoding to the gold calls, so S and F generate the same tokens:
  the F dividend is measured at fixed accuracy. The model policy measures what a 135M model
  actually does: low accuracy there is the model's, not the harness's.
* BFCL runs SmolLM2-135M at temperature 0 on 2 CPU cores: absolute scores are low, and with
  at most 32 entries per category each gap's confidence interval is wide."""


def _plots(summary: Mapping[str, Any], regime: Regime, out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    names = []
    if summary["per_n"]:
        names.append(_plot_wall(plt, summary["per_n"], regime, out))
    if summary["tokens_by_arm"]:
        names.append(_plot_tokens(plt, summary["tokens_by_arm"], out))
    if summary["accuracy"]:
        names.append(_plot_accuracy(plt, summary["accuracy"], out))
    return names


def _plot_wall(plt: Any, rows: Sequence[Mapping[str, Any]], regime: Regime, out: Path) -> str:
    """wall_vs_n.png: wall time per certified window, measured beside the closed forms."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ns = list(range(2, max(r["n"] for r in rows) + 1))
    colors = {
        ArmLabel.S: "tab:red",
        ArmLabel.F: "tab:blue",
        ArmLabel.F_EAGER: "tab:cyan",
        ArmLabel.F_SPEC: "tab:purple",
        ArmLabel.P: "tab:green",
        ArmLabel.P_V: "tab:olive",
    }
    ran = {arm for r in rows for arm in r["measured"]}  # the legend lists only arms that ran
    for label, fn in CLOSED_FORMS.items():
        if str(label) in ran:
            ax.plot(
                ns,
                [fn(regime, n) for n in ns],
                color=colors[label],
                label=f"{label} closed form",
            )
    for label in ARM_LABELS:
        arm = str(label)
        pts = [(r["n"], r["measured"][arm]) for r in rows if arm in r["measured"]]
        if pts:
            ax.scatter(
                *zip(*pts, strict=True),
                color=colors[label],
                marker="o",
                label=f"{arm} measured",
            )
    ax.set_xlabel("window size n")
    ax.set_ylabel("wall time per window (s)")
    ax.set_title("Wall time per certified window: measured vs closed form")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "wall_vs_n.png", dpi=110)
    plt.close(fig)
    return "wall_vs_n.png"


def _plot_tokens(plt: Any, tokens: Mapping[str, Mapping[str, float]], out: Path) -> str:
    """tokens.png: the token bill per arm and task kind (gold policy)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    kinds = list(tokens)
    arms = [
        arm for arm in ARM_LABEL_NAMES if any(arm in tokens[k] for k in kinds)
    ]  # only arms that ran
    width = 0.8 / max(1, len(arms))
    for i, arm in enumerate(arms):
        ax.bar(
            [k + i * width for k in range(len(kinds))],
            [tokens[k].get(arm, 0) for k in kinds],
            width,
            label=arm,
        )
    ax.set_xticks([k + (len(arms) - 1) * width / 2 for k in range(len(kinds))], kinds)
    ax.set_ylabel("billed tokens per task (mean)")
    ax.set_title("Token bill per arm (gold policy)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "tokens.png", dpi=110)
    plt.close(fig)
    return "tokens.png"


def _plot_accuracy(plt: Any, accuracy: Mapping[str, Mapping[str, Any]], out: Path) -> str:
    """accuracy.png: the tasks meeting their gold label, by policy and arm."""
    labels, values = [], []
    for policy, by_arm in accuracy.items():
        for arm, (ok, n) in by_arm.items():
            labels.append(f"{policy} {arm}")
            values.append(100 * ok / n)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.45 * len(values)), 4.5))
    ax.bar(range(len(values)), values, color="tab:purple")
    # Rotated, anchored at their right end: long labels never overlap their neighbours.
    ax.set_xticks(range(len(values)), labels, fontsize=7, rotation=45, ha="right")
    ax.set_ylabel("tasks meeting the gold label (%)")
    ax.set_title("Task accuracy by arm and policy")
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=110)
    plt.close(fig)
    return "accuracy.png"
