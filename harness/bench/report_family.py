"""Accuracy per task family with confidence intervals, and what P+V's resamples bought.

For each task kind that ran (``fan_out``, ``chain``, ``mixed`` and the families), each
policy and each arm (schema-sound detector): tasks solved out of run, with the 95% Wilson
score interval, and each arm's difference to S with Newcombe's hybrid score interval
(:func:`harness.bench.analysis.gap_pp`, the interval R4 uses). For P+V per kind and
policy: windows, resamples, resamples per window (ε̂_v), the jobs that resampled and how many
of them were solved, and against P on the same tasks (P+V's first draw is P's, at the same
temperature and seed, so a difference is what the resamples made) the tasks P+V solved that P
did not and the reverse. For ``easy_lookup``, whose answer the model picks from its results,
what two answerers without a model would score on the tasks that ran (:func:`answer_baselines`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.bench.analysis import gap_pp, job_label, wilson_interval
from harness.bench.report_facts import reviewed_messages
from harness.bench.workload import ALL_KINDS, generate_family
from harness.loop.arm_label import ARM_LABELS, ArmLabel

__all__ = ("answer_baselines", "family_accuracy", "family_markdown", "validator_by_family")

Job = Mapping[str, Any]
POLICIES = ("gold", "oracle", "model")


def _chosen(jobs: Sequence[Job], kind: str, policy: str, label: ArmLabel) -> list[Job]:
    return [
        j for j in jobs
        if j.get("kind") == kind and j.get("policy") == policy and job_label(j) == label
        and j.get("detector", "schema_sound") == "schema_sound"
    ]  # fmt: skip


def family_accuracy(jobs: Sequence[Job]) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """``{kind: {policy: {arm: {"solved", "n", "ci", "minus_S_pp", "minus_S_ci_pp"}}}}``
    (proportions and intervals in [0, 1]; differences in percentage points)."""
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for kind in ALL_KINDS:
        for policy in POLICIES:
            rows: dict[ArmLabel, dict[str, Any]] = {}
            for label in ARM_LABELS:
                chosen = _chosen(jobs, kind, policy, label)
                if not chosen:
                    continue
                ok = sum(1 for j in chosen if j.get("success"))
                low, high = wilson_interval(ok, len(chosen))
                rows[label] = {"solved": ok, "n": len(chosen), "ci": [low, high]}
            s = rows.get(ArmLabel.S)
            for label, row in rows.items():
                if s is not None and label != ArmLabel.S:
                    gap, low, high = gap_pp((s["solved"], s["n"]), (row["solved"], row["n"]))
                    row["minus_S_pp"] = 0.0 - gap  # never -0.0
                    row["minus_S_ci_pp"] = [0.0 - high, 0.0 - low]
            if rows:
                out.setdefault(kind, {})[policy] = {str(label): row for label, row in rows.items()}
    return out


def validator_by_family(jobs: Sequence[Job]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{kind: {policy: {...}}}``: what P+V's validator did and bought (module docstring)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in ALL_KINDS:
        for policy in POLICIES:
            pv = _chosen(jobs, kind, policy, ArmLabel.P_V)
            if not pv:
                continue
            p_solved = {
                j["task_id"]: bool(j.get("success"))
                for j in _chosen(jobs, kind, policy, ArmLabel.P)
            }
            windows = sum(len(j.get("windows", [])) for j in pv)
            reviewed = reviewed_messages(pv)
            resamples = [int((j.get("summary") or {}).get("resamples") or 0) for j in pv]
            resampled = [j for j, r in zip(pv, resamples, strict=True) if r > 0]
            paired = [j for j in pv if j["task_id"] in p_solved]
            out.setdefault(kind, {})[policy] = {
                "jobs": len(pv),
                "windows": windows,
                "resamples": sum(resamples),
                "messages": reviewed,
                "epsilon_v": sum(resamples) / windows if windows else None,
                "per_message": sum(resamples) / reviewed if reviewed else None,
                "jobs_resampled": len(resampled),
                "resampled_solved": sum(1 for j in resampled if j.get("success")),
                "paired_with_P": len(paired),
                "solved_not_by_P": sum(
                    1 for j in paired if j.get("success") and not p_solved[j["task_id"]]
                ),
                "solved_by_P_only": sum(
                    1 for j in paired if not j.get("success") and p_solved[j["task_id"]]
                ),
            }
    return out


def answer_baselines(jobs: Sequence[Job], *, seed: int = 0) -> dict[str, float] | None:
    """For the ``easy_lookup`` tasks (workload ``seed``) that ran under the model policy: how many an
    answerer with no model would solve — ``last`` gives the last result's owner (the
    recency a small model falls back on), ``uniform`` picks one listed owner at random
    (expected count). ``None`` when none ran."""
    ran = {
        j["task_id"] for j in jobs if j.get("kind") == "easy_lookup" and j.get("policy") == "model"
    }
    tasks = [t for t in generate_family("easy_lookup", seed) if t.id in ran]
    if not tasks:
        return None
    last = uniform = 0.0
    for task in tasks:
        keys = list(task.task.inputs["keys"])
        owners = [task.initial_state().get(k).owner for k in keys]
        last += owners[-1] in task.gold.answer_expect
        uniform += 1 / len(keys)
    return {"tasks": len(tasks), "last": last, "uniform": uniform}


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def family_markdown(
    accuracy: Mapping[str, Any],
    validator: Mapping[str, Any],
    baselines: Mapping[str, float] | None = None,
) -> list[str]:
    """The report's section: accuracy per kind, policy and arm with intervals; the
    ``easy_lookup`` baselines (:func:`answer_baselines`); P+V's table."""
    if not accuracy:
        return []
    lines = [
        "## Task accuracy per kind, with 95% confidence intervals",
        "",
        "Wilson score intervals; the difference to S with Newcombe's hybrid score interval "
        "(schema-sound detector).",
        "",
        "| kind | policy | arm | solved | 95% CI | arm − S (pp) | 95% CI (pp) |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, policies in accuracy.items():
        for policy, arms in policies.items():
            for arm, r in arms.items():
                low, high = r["ci"]
                diff = r.get("minus_S_pp")
                diff_ci = r.get("minus_S_ci_pp")
                lines.append(
                    f"| {kind} | {policy} | {arm} | {r['solved']}/{r['n']} "
                    f"({_pct(r['solved'] / r['n'])}) | {_pct(low)}–{_pct(high)} | "
                    + ("–" if diff is None else f"{diff:+.1f}")
                    + " | "
                    + ("–" if diff_ci is None else f"[{diff_ci[0]:+.1f}, {diff_ci[1]:+.1f}]")
                    + " |"
                )
    if baselines:
        lines += [
            "",
            f"easy_lookup without a model, on the same {baselines['tasks']:.0f} tasks: answering "
            f"with the last result's owner solves {baselines['last']:.0f}; a uniform pick among "
            f"the listed owners solves {baselines['uniform']:.1f} on average. A model-policy arm "
            "above these picks by the key asked, not by position or luck.",
        ]
    if validator:
        lines += [
            "",
            "## What P+V's resamples bought, per kind",
            "",
            "P+V's first draw is P's (same prompt, temperature and seed), so the tasks one "
            "solves and the other does not are what the validator's resamples changed.",
            "",
            "| kind | policy | P+V jobs | messages with calls | certified windows | resamples | "
            "per message | ε̂_v (per window) | jobs that resampled | of them solved | solved by "
            "P+V, not P | solved by P, not P+V |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for kind, policies in validator.items():
            for policy, v in policies.items():
                eps = "–" if v["epsilon_v"] is None else f"{v['epsilon_v']:.2f}"
                per = "–" if v["per_message"] is None else f"{v['per_message']:.2f}"
                lines.append(
                    f"| {kind} | {policy} | {v['jobs']} | {v['messages']} | {v['windows']} | "
                    f"{v['resamples']} | {per} | {eps} | {v['jobs_resampled']} | "
                    f"{v['resampled_solved']} | "
                    f"{v['solved_not_by_P']} | {v['solved_by_P_only']} |"
                )
    return lines
