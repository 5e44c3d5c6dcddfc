"""``harness bench``: run the paper's protocol on the real engine and give R1-R4 verdicts."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from harness._commands._engine_args import EngineOptions, add_engine_arguments, open_engine
from harness._commands._exit import EXIT_JOB_FAILED, EXIT_OK
from harness._commands._guide_args import add_guide_arguments, guides
from harness._commands._ray_args import add_ray_arguments, check_ray_arguments, open_ray_pool
from harness._commands._signals import until_signalled
from harness._progress import Progress
from harness.errors import ConfigError
from harness.loop.arm_label import ARM_LABEL_NAMES

__all__ = ("register", "run")

DESCRIPTION = """\
Run the paper's never-run protocol on a real engine: every arm (S, F, F+eager, F+spec, P, P+V) over the
48 seeded workload tasks under the gold policy (same tokens in S and F: the dividend at fixed
accuracy) and the model policy (the model chooses), the phase-heuristic detector as a control,
and up to 32 entries of each of BFCL's AST categories at temperature 0 (single-call categories
under S, parallel ones under P) to anchor the parallel-calling gap g per category pair.
K loops (--concurrency, default 8) share one in-process vLLM engine.

Writes to --out: results.jsonl (every turn, call and window; resumable: restart the same
command and finished jobs are skipped), plan.json, summary.json, regime.json (the measured
regime, for `harness frontier --params`), report.md and PNG plots. The report states R1-R4
and the null arm with their numbers.

Resuming: --out is locked while a bench writes it (a second one is refused); results of
another plan (seed, latency, arms, model, settings) are refused; jobs the engine failed are
run again, other errored jobs are kept as results unless --retry-failed.
Every job is one of: solved; the model could not solve it (model policy: a missed gold label or
a budget such as the stuck-loop guard, a measurement); a harness failure (an engine error, or
any miss under the gold policy, whose decoding is forced to the gold calls).
Exit status: 0 when no job is a harness failure, 1 when one is (the error kinds are printed
with their counts), 2 for a usage mistake, 130/143 when interrupted by SIGINT/SIGTERM.
"""

EPILOG = """\
examples:
  harness bench --quick                          # S vs F vs P, gold and model policy: ~1 minute
  harness bench --out runs/full                  # the full protocol (tens of minutes on 2 CPU cores)
  harness bench --out runs/full                  # ...interrupted? the same command resumes
  harness bench --out runs/full --retry-failed   # ...and run the jobs that errored again
  harness bench --tasks fan_out-10 chain-01 --arms S F --policy gold
  harness bench --policy gold oracle --arms S F  # R3 where it can fail: the oracle under false fills
  harness bench --report-only runs/full          # recompute the report from results.jsonl
  harness bench --tasks easy_fan_out --policy model --arms S F P P+V --no-heuristic --bfcl 0 0 \\
      --skill-tools --open-slots                 # the family the 135M model can solve
  harness bench --tasks easy_lookup --policy model --arms S F P P+V --no-heuristic --bfcl 0 0 \\
      --skill-tools --open-slots                 # ...and the one where it picks the answer
  harness bench --quick --ray auto --ray-workers 2   # the jobs on a local Ray cluster, same report
  harness frontier --params runs/full/regime.json --n 2 6 10   # the closed form at the measured regime
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "bench",
        help="run the 4-arm protocol on the real engine and report R1-R4 verdicts",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="S, F and P on two n = 6 fan-out tasks (gold policy) and on two easy_fan_out tasks "
        "under the model policy (with --skill-tools --open-slots): 12 jobs, no heuristic "
        "control, no BFCL",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="output directory (default runs/quick or runs/full)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="workload, BFCL selection and latency seed (default 0)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=8,
        metavar="K",
        help="loops sharing the engine (default 8)",
    )
    _add_selection_arguments(parser)
    _add_regime_arguments(parser)
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="on resume, run again the jobs that errored (engine failures always run again)",
    )
    parser.add_argument(
        "--report-only",
        type=Path,
        default=None,
        metavar="DIR",
        help="recompute the report of DIR/results.jsonl without running anything",
    )
    add_guide_arguments(parser)
    add_engine_arguments(parser)
    add_ray_arguments(parser)
    parser.set_defaults(func=run)


def _add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """Which jobs run: the arms, the policies, the tasks, the heuristic control and BFCL."""
    parser.add_argument(
        "--arms",
        nargs="+",
        default=None,
        metavar="ARM",
        help=f"subset of {' '.join(ARM_LABEL_NAMES)} (default all)",
    )
    parser.add_argument(
        "--policy",
        nargs="+",
        choices=("gold", "oracle", "model"),
        default=None,
        help="default: gold and model (oracle: the context-bound oracle, under which a false "
        "fill can fail R3)",
    )
    parser.add_argument(
        "--model-arms",
        nargs="+",
        default=None,
        metavar="ARM",
        help="arms run under the model policy (default: all); BFCL parallel entries always run under P",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        metavar="ID",
        help="only these task ids, or a kind for all of its tasks (e.g. easy_fan_out or "
        "easy_lookup, the families sized for a 135M model)",
    )
    parser.add_argument(
        "--no-heuristic", action="store_true", help="skip the phase-heuristic control runs"
    )
    parser.add_argument(
        "--bfcl",
        type=int,
        nargs=2,
        default=(32, 32),
        metavar=("SINGLE", "PARALLEL"),
        help="BFCL entries per single-call category and per parallel category (default 32 32, "
        "a smaller category taken whole; 0 0 skips)",
    )
    parser.add_argument(
        "--bfcl-categories",
        nargs="+",
        default=None,
        metavar="NAME",
        help="BFCL AST categories to run (default all: simple multiple parallel "
        "parallel_multiple live_simple live_multiple live_parallel live_parallel_multiple)",
    )


def _add_regime_arguments(parser: argparse.ArgumentParser) -> None:
    """The regime the jobs run at: tool latency and its spread, the turn budget, the
    declared gap g."""
    parser.add_argument(
        "--latency", type=float, default=0.5, metavar="S", help="tool latency L (default 0.5 s)"
    )
    parser.add_argument(
        "--sigma", type=float, default=0.0, metavar="S", help="tool latency spread σ_L (default 0)"
    )
    parser.add_argument(
        "--max-tokens", type=int, default=160, help="generation budget per turn (default 160)"
    )
    parser.add_argument(
        "--gap", type=float, default=2.8, metavar="PP", help="declared gap g for R4 (default 2.8pp)"
    )


def run(args: argparse.Namespace) -> int:
    from harness.bench.bfcl import CATEGORIES
    from harness.bench.report import write_report
    from harness.bench.runner import ARM_LABELS, BenchPlan, run_bench, versions
    from harness.runs.resume import load_results

    if args.report_only is not None:
        path = args.report_only / "results.jsonl"
        jobs = load_results(path)
        if not jobs:
            raise ConfigError(
                f"No jobs in {str(path)!r}; run `harness bench --out {args.report_only}` first."
            )
        summary = write_report(
            jobs, args.report_only, _stored_meta(args.report_only, versions()),
            declared_gap_pp=args.gap,
        )  # fmt: skip
        _print_summary(summary, args.report_only)
        return _exit_status(jobs, args.report_only)
    if args.latency < 0 or args.sigma < 0:
        raise ConfigError("--latency and --sigma must be zero or more seconds.")
    check_ray_arguments(args)
    out = args.out or Path("runs/quick" if args.quick else "runs/full")
    levers = guides(args)
    plan = BenchPlan(
        out=out, quick=args.quick, seed=args.seed, concurrency=args.concurrency,
        arms=tuple(args.arms or ARM_LABELS), policies=tuple(args.policy or ("gold", "model")),
        heuristic=not args.no_heuristic, model_arms=tuple(args.model_arms or ARM_LABELS), bfcl_simple=args.bfcl[0], bfcl_parallel=args.bfcl[1],
        bfcl_categories=tuple(args.bfcl_categories or CATEGORIES),
        latency_s=args.latency, latency_sigma_s=args.sigma, max_tokens=args.max_tokens,
        task_ids=tuple(args.tasks or ()), declared_gap_pp=args.gap, engine_label=args.engine, model=args.model,
        command=_command_line(), input_enums=levers["input_enums"],
        skill_tools=levers["skill_tools"], open_slots=levers["open_slots"],
    )  # fmt: skip

    if plan.quick and not plan.task_ids:  # said before the engine's minute of start-up
        from harness.bench.runner import quick_description

        print(
            quick_description(
                plan, distributed=args.ray is not None, scripted=args.engine == "scripted"
            ),
            flush=True,
        )

    async def go() -> dict[str, Any]:
        if args.ray is not None:
            from harness.bench.runner import BenchJobRunner

            runner = BenchJobRunner(plan)
            async with open_ray_pool(args, runner, out, plan.concurrency) as pool:
                return await run_bench(
                    None, plan, scripted=args.engine == "scripted",
                    retry_failed=args.retry_failed, executor=pool,
                    progress=_bar(), say=print,
                )  # fmt: skip
        async with open_engine(EngineOptions.from_args(args)) as engine:
            return await run_bench(
                engine, plan, scripted=args.engine == "scripted",
                retry_failed=args.retry_failed, progress=_bar(), say=print,
            )  # fmt: skip

    summary = anyio.run(
        until_signalled,
        go,
        f"finished jobs are in {out / 'results.jsonl'}: rerun the same command to resume.",
    )
    _print_summary(summary, out)
    return _exit_status(load_results(out / "results.jsonl"), out)


#: What a re-report keeps of the run's own meta: how and where it ran, not what it found.
_KEPT_META = ("engine", "plan", "bench_wall_s", "segment_wall_s", "executor", "versions")


def _bar() -> Progress:
    """The jobs' progress bar on stderr (the runner sets its total)."""
    return Progress(0, "jobs", failed_label="harness failure(s)")


def _stored_meta(out: Path, current_versions: dict[str, str]) -> dict[str, Any]:
    """The meta of the run's own files: its plan from ``plan.json``; engine, command, walls,
    executor and versions from its ``summary.json`` when there is one, so a re-report keeps
    them; an older run recorded its command without ``bench``
    (a bug since fixed): it is put back."""
    import json

    meta: dict[str, Any] = {"engine": "(from results)", "versions": current_versions}
    try:
        stored = json.loads((out / "summary.json").read_text(encoding="utf-8")).get("meta", {})
    except (OSError, ValueError):
        stored = {}
    meta.update({k: v for k, v in stored.items() if k in _KEPT_META})
    # The plan is the run's own plan.json (the loops that shared the engine decide R1's
    # verdict), whether or not an old summary.json is there.
    try:
        settings = json.loads((out / "plan.json").read_text(encoding="utf-8")).get("settings")
    except (OSError, ValueError):
        settings = None
    if isinstance(settings, dict):
        meta["plan"] = {**meta.get("plan", {}), **settings}
        if "engine" not in stored and settings.get("engine_label"):
            meta["engine"] = settings["engine_label"]
    if "plan" not in meta:
        return meta
    command = str(meta.get("plan", {}).get("command", ""))
    if command.startswith("harness ") and not command.startswith("harness bench"):
        meta["plan"] = {**meta["plan"], "command": "harness bench " + command[len("harness ") :]}
    return meta


def _command_line() -> str:
    """The command as typed, ``harness bench ...`` (however the program was started)."""
    return "harness " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _exit_status(jobs: Sequence[Mapping[str, Any]], out: Path) -> int:
    """0 when no job is a harness failure (a model that could not solve its task is a
    result); else 1, after saying which kinds of error and how many."""
    from harness.bench.outcomes import error_kind, outcome, outcome_line
    from harness.runs.jobs import errored_summary

    print(outcome_line(jobs))
    failed = [j for j in jobs if outcome(j) == "harness_failed"]
    if not failed:
        model = [j for j in jobs if error_kind(j) and outcome(j) == "model_failed"]
        if model:
            print(
                f"note: {len(model)} model-policy job(s) ended in a budget (the stuck-loop guard, "
                "turns or model mistakes): the model could not solve them; not a harness failure."
            )
        control = [j for j in jobs if error_kind(j) and outcome(j) == "control_failed"]
        if control:
            print(
                f"note: {len(control)} job(s) of the phase-heuristic control ended in a budget "
                "(the context-bound oracle re-read what it could see until the stuck-loop guard): "
                "the cost of its false fills; not a harness failure."
            )
        return EXIT_OK
    print(
        f"error: harness failure(s) in {len(failed)} of {len(jobs)} job(s) "
        f"({errored_summary(jobs) or 'no error raised: a gold-policy run missed its label'}); "
        f"see the 'error' and 'failures' fields in {out / 'results.jsonl'}, then rerun the same "
        "command (add --retry-failed to run errors other than the engine's again)",
        file=sys.stderr,
    )
    return EXIT_JOB_FAILED


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    print()
    from harness.bench.report_facts import regime_name

    at = regime_name(summary["facts"]["regime_provenance"])
    print(f"per window size n (seconds, median; measured | closed form at {at}):")
    print(f"{'n':>3} {'S':>13} {'F':>13} {'F+eager':>8} {'F+spec':>8} {'P':>13} {'F dividend':>17}")
    for row in summary["per_n"]:
        m, p = row["measured"], row["predicted"]
        pair = {arm: _pair(m.get(arm), p[arm]) for arm in ("S", "F", "P")}
        eager, spec = m.get("F+eager"), m.get("F+spec")
        div = row["dividend_F_measured"]
        print(
            f"{row['n']:>3} {pair['S']:>13} {pair['F']:>13} {'–' if eager is None else f'{eager:8.2f}':>8} "
            f"{'–' if spec is None else f'{spec:8.2f}':>8} "
            f"{pair['P']:>13} {'–' if div is None else f'{div:5.2f}':>7} | {row['dividend_F_predicted']:5.2f}"
        )
    print()
    for verdict in summary["verdicts"]:
        held = {True: "held", False: "VIOLATED", None: "not judged"}[verdict["held"]]
        print(f"{verdict['name']:>4}: {held:<12} {verdict['summary']}")
    for row in summary.get("bfcl_gaps", []):
        (s_ok, s_n), (p_ok, p_n), (low, high) = row["single"], row["parallel"], row["ci_pp"]
        print(
            f"   g {row['pair']}: {s_ok}/{s_n} under S vs {p_ok}/{p_n} under P: "
            f"{row['gap_pp']:+.1f}pp (95% CI [{low:+.1f}, {high:+.1f}]pp)"
        )
    print(
        f"\nreport: {out / 'report.md'}  (results.jsonl, summary.json, regime.json, plots beside it)"
    )


def _pair(measured: float | None, predicted: float) -> str:
    got = "  –  " if measured is None else f"{measured:5.2f}"
    return f"{got} | {predicted:5.2f}"
