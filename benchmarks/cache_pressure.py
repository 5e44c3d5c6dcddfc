"""``python -m benchmarks.cache_pressure``: S and F at K = 1, 4, 8, 16 with a prefix cache too
small to keep the rolling stride between turns, against a cache that keeps everything.

The paper prices F's dividend per window as ``(n-1)L + t_pf(1-h_R) r n(n-1)/2``: the second
term is the re-prefill of the results S re-sends and the cache misses (``h_R``, the rolling
stride's hit fraction), so the prefill part of the dividend should peak where the stride is
cache-cold: many loops (large K) sharing a small cache. Our other runs never reached that
regime (the default 2 GiB cache holds everything). This benchmark does, on one engine per cache
size, with the same jobs:

- **jobs**: the fan-out tasks :data:`TASKS` (one window each, n = 5..8) under arms S and F, gold
  policy (both arms generate the same text), tool latency ``--latency`` (0.1 s): 16 jobs.
- **K**: at most K loops on the engine at once. K = 1 empties the prefix cache before every job
  (otherwise F would find S's prompts cached); K > 1 empties it once before the pass, and S and
  F of one task then share the cache (either can read what the other prefilled where their
  prompts start the same: the system prompt, the task, the calls before the window). K values
  alternate in order between repetitions, so slow drift in the machine's load hits all of them.
- **cache sizes**: ``--kv-cache-gib`` (the pressure arm, default 0.09 with ``--max-model-len``
  4096) and ``--control-gib`` (default 2, the engine's default). The arithmetic: one token of
  SmolLM2-135M takes 2 x 30 layers x 3 KV heads x 64 dims x 2 bytes = 23,040 bytes, so 0.09 GiB
  holds 4,194 tokens, just above the 4,128 vLLM needs to admit one request of max_model_len
  4,096 (at 8,192 the floor is 8,224 tokens, 0.177 GiB). These jobs' first prompts are
  ~1,150 tokens, of which 1,085 (the system prompt and tool list) are the same for every task,
  so the loops share them in the cache; what each loop adds is its task (~60 tokens) and its
  window (up to ~700 more, prompts end under 1,900). The cache holds the shared prefix plus
  ~400 tokens per loop on average as 1,085 + 400 K: K = 1 and 4 fit (1.5k, 2.7k), K = 8 is at
  the edge (4.3k) and K = 16 (7.5k) does not, so a loop's turn is evicted (least recently
  used) while the other loops run, before its next turn. A first choice of 0.19 GiB (8,854
  tokens, max_model_len 8192) counted every loop's whole chat (16 x ~1,500) and forgot the
  sharing: at K = 16 the engine still served 96 % of prompt tokens from the cache (the
  committed run keeps that pass). The control's 2 GiB (93k tokens) holds everything.

Measured per cache size, K and window, from the ledger's turn records (the turns from the one
that emitted the window's first call to the absorb turn): billed tokens (prompt + completion),
prefilled tokens (prompt − cached), ``h`` (cached / prompt tokens over those turns), ``h_R``
(of the tokens a turn re-reads from earlier turns of the window, the share the cache served:
the closed form's rolling-stride hit fraction; cached tokens are always a prefix of the
prompt), and wall over the window span. Beside each dividend (S − F) the closed form's
prediction at that window's measured ``h_R`` (S's) and the pass's measured regime
(:func:`~harness.bench.analysis.estimate_regime`: ``t_pf``, ``r``, ``L``): wall
``nL − E[max L] + t_pf(1-h_R) r n(n-1)/2``, billed tokens ``r n(n-1)/2``, prefilled tokens
``(1-h_R) r n(n-1)/2``. The verdict says at which K and cache the prefill dividend peaked.

Progress on stderr. ``--out DIR`` writes ``cache_pressure.json`` (every figure, every window),
``report.md`` (the command line and the machine's load average at start and end) and
``dividend.png`` (needs matplotlib, the plot extra; skipped with a message without it). Walls
on a shared machine are noisy; token counts and hit fractions are not. ``--engine scripted``
runs the same protocol on the test double (its cache has no size: both arms of it hold all).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio

from benchmarks.r1_dividend import run_pass
from harness import costmodel
from harness.bench.analysis import estimate_regime, measure_windows
from harness.bench.workload import generate_tasks
from harness.engines.base import Engine
from harness.loop.arm_label import ArmLabel

__all__ = (
    "ARMS",
    "KS",
    "TASKS",
    "analyse_pass",
    "main",
    "run_cache_pressure",
    "summarise",
    "verdict",
    "window_tokens",
)

TASKS: tuple[str, ...] = tuple(f"fan_out-{i:02d}" for i in range(4, 12))
ARMS: tuple[str, ...] = ("S", "F")
KS: tuple[int, ...] = (1, 4, 8, 16)
PRESSURE_GIB = 0.09
CONTROL_GIB = 2.0

Job = Mapping[str, Any]
EngineOpener = Callable[[float], AbstractAsyncContextManager[Engine]]
_MARKERS = ("discard", "repair")


def window_tokens(job: Job, call_ids: Sequence[str]) -> dict[str, float]:
    """Token figures of the turns from the one that emitted the first of ``call_ids`` to the
    absorb turn after the last (see the module docstring for ``h`` and ``h_R``)."""
    wanted = set(call_ids)
    emitted = [c["turn"] for c in job.get("calls", []) if c["call_id"] in wanted]
    first, absorb = min(emitted), max(emitted) + 1
    turns = sorted(
        (t for t in job.get("turns", [])
         if first <= t["turn"] <= absorb and t.get("purpose") not in _MARKERS),
        key=lambda t: t["turn"],
    )  # fmt: skip
    prompt = sum(int(t["prompt_tokens"]) for t in turns)
    cached = sum(int(t["cached_tokens"]) for t in turns)
    completion = sum(int(t["completion_tokens"]) for t in turns)
    base = int(turns[0]["prompt_tokens"])
    reread = reread_cached = 0
    for t in turns[1:]:
        earlier = max(0, int(t["prompt_tokens"]) - base)
        reread += earlier
        reread_cached += min(earlier, max(0, int(t["cached_tokens"]) - base))
    return {
        "turns": len(turns),
        "prompt": prompt,
        "cached": cached,
        "completion": completion,
        "billed": prompt + completion,
        "prefilled": prompt - cached,
        "reread": reread,
        "reread_cached": reread_cached,
        "h": cached / prompt if prompt else 0.0,
        "h_R": reread_cached / reread if reread else 0.0,
        "max_prompt": max(int(t["prompt_tokens"]) for t in turns),
    }


def analyse_pass(jobs: Sequence[Job]) -> dict[str, Any]:
    """Per certified window of the pass: each arm's token figures and wall, the measured
    dividends (S − F) and the closed form's at S's measured ``h_R``."""
    regime = estimate_regime(jobs)
    by_key = {(j["task_id"], j["arm"]): j for j in jobs if not j.get("eager")}
    rows = []
    for w in measure_windows(jobs):
        if ArmLabel.S not in w.wall or ArmLabel.F not in w.wall:
            continue
        tokens = {arm: window_tokens(by_key[(w.task_id, arm)], w.call_ids) for arm in ARMS}
        at = dataclasses.replace(regime, stride_hit=tokens["S"]["h_R"])
        n = w.n
        tool = n * at.tool_latency_s - costmodel.expected_max_latency(at, n)
        billed = costmodel.token_dividend_flattened(at, n)
        rows.append({
            "task_id": w.task_id, "n": n, "tokens": tokens, "wall": {str(k): v for k, v in w.wall.items()},
            "dividend": {
                "wall_s": w.wall[ArmLabel.S] - w.wall[ArmLabel.F],
                "billed": tokens["S"]["billed"] - tokens["F"]["billed"],
                "prefilled": tokens["S"]["prefilled"] - tokens["F"]["prefilled"],
            },
            "predicted": {
                "wall_s": costmodel.wall_dividend_flattened(at, n),
                "tool_s": tool,
                "billed": billed,
                "prefilled": (1.0 - at.stride_hit) * billed,
            },
        })  # fmt: skip
    return {
        "regime": regime.to_json(),
        "errors": [str(j["error"]) for j in jobs if j.get("error")],
        "windows": rows,
    }


def _engine_hits(engine: Engine) -> tuple[int, int] | None:
    stats = getattr(engine, "cache_stats", None)
    if stats is None:
        return None
    s = stats()
    return int(s.queries), int(s.hits)


async def run_cache_pressure(
    open_engine: EngineOpener,
    *,
    caches: Sequence[float] = (PRESSURE_GIB, CONTROL_GIB),
    ks: Sequence[int] = KS,
    reps: int = 1,
    latency_s: float = 0.1,
    tasks: Sequence[str] = TASKS,
    progress: Callable[[str], None] = lambda line: None,
    checkpoint: Callable[[dict[str, Any]], None] = lambda partial: None,
) -> dict[str, Any]:
    """Run the protocol (see the module docstring) on one engine per cache size; after every
    pass, ``checkpoint`` gets the result so far (``complete`` false)."""
    by_id = {t.id: t for t in generate_tasks(0)}
    chosen = [by_id[i] for i in tasks]
    runs = []
    for gib in caches:
        progress(f"[{gib:g} GiB] starting the engine…")
        async with open_engine(gib) as engine:
            for rep in range(reps):
                for k in ks if rep % 2 == 0 else tuple(reversed(ks)):
                    before = _engine_hits(engine)
                    started = time.monotonic()
                    jobs = await run_pass(engine, chosen, k, latency_s, ARMS, progress)
                    wall = time.monotonic() - started
                    after = _engine_hits(engine)
                    run = {"kv_cache_gib": gib, "k": k, "rep": rep, "wall_s": wall,
                           **analyse_pass(jobs)}  # fmt: skip
                    if before is not None and after is not None:
                        queries, hits = after[0] - before[0], after[1] - before[1]
                        run["engine_hit_rate"] = hits / queries if queries else 0.0
                    runs.append(run)
                    progress(_progress_line(run, rep, reps))
                    checkpoint(_result(runs, tasks, latency_s, complete=False))
    return _result(runs, tasks, latency_s, complete=True)


def _result(
    runs: Sequence[Mapping[str, Any]], tasks: Sequence[str], latency_s: float, *, complete: bool
) -> dict[str, Any]:
    summary = summarise(runs)
    return {
        "complete": complete,
        "tasks": list(tasks),
        "arms": list(ARMS),
        "latency_s": latency_s,
        "runs": list(runs),
        "summary": summary,
        "verdict": verdict(summary),
    }


def _progress_line(run: Mapping[str, Any], rep: int, reps: int) -> str:
    windows = run["windows"]
    if not windows:
        return f"[{run['kv_cache_gib']:g} GiB] K={run['k']} rep {rep + 1}/{reps}: no window"
    h_r = statistics.fmean(w["tokens"]["S"]["h_R"] for w in windows)
    pre = statistics.fmean(w["dividend"]["prefilled"] for w in windows)
    div = statistics.fmean(w["dividend"]["wall_s"] for w in windows)
    return (
        f"[{run['kv_cache_gib']:g} GiB] K={run['k']} rep {rep + 1}/{reps}: {run['wall_s']:.0f} s, "
        f"h_R(S) {h_r:.2f}, per window: prefill dividend {pre:.0f} tok, wall dividend {div:.2f} s"
        + (f", {len(run['errors'])} errors" if run["errors"] else "")
    )


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


#: The figures :func:`summarise` gives per (cache, K): a name and how to read it off a window.
_FIGURES: dict[str, Callable[[Mapping[str, Any]], float]] = {
    "h_S": lambda w: w["tokens"]["S"]["h"],
    "h_F": lambda w: w["tokens"]["F"]["h"],
    "h_R_S": lambda w: w["tokens"]["S"]["h_R"],
    "h_R_F": lambda w: w["tokens"]["F"]["h_R"],
    "billed_S": lambda w: w["tokens"]["S"]["billed"],
    "billed_F": lambda w: w["tokens"]["F"]["billed"],
    "prefilled_S": lambda w: w["tokens"]["S"]["prefilled"],
    "prefilled_F": lambda w: w["tokens"]["F"]["prefilled"],
    "wall_S": lambda w: w["wall"]["S"],
    "wall_F": lambda w: w["wall"]["F"],
    "billed_dividend": lambda w: w["dividend"]["billed"],
    "billed_predicted": lambda w: w["predicted"]["billed"],
    "prefilled_dividend": lambda w: w["dividend"]["prefilled"],
    "prefilled_predicted": lambda w: w["predicted"]["prefilled"],
    "wall_dividend": lambda w: w["dividend"]["wall_s"],
    "wall_predicted": lambda w: w["predicted"]["wall_s"],
}


def summarise(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per cache size (GiB, as text) and K: each figure's mean over the pass's windows, as
    median, min and max over repetitions; the hit fractions pooled as token sums would give
    are the means of per-window fractions here (every window counts once)."""
    out: dict[str, dict[str, Any]] = {}
    for gib in sorted({float(r["kv_cache_gib"]) for r in runs}):
        per_k: dict[str, Any] = {}
        for k in sorted({int(r["k"]) for r in runs if r["kv_cache_gib"] == gib}):
            reps = [r for r in runs if r["kv_cache_gib"] == gib and r["k"] == k and r["windows"]]
            if not reps:
                continue
            figures = {
                name: _spread([statistics.fmean(get(w) for w in r["windows"]) for r in reps])
                for name, get in _FIGURES.items()
            }
            per_k[str(k)] = {
                "repetitions": len(reps),
                "windows": len(reps[0]["windows"]),
                "pass_wall_s": _spread([float(r["wall_s"]) for r in reps]),
                "max_prompt": max(
                    w["tokens"][a]["max_prompt"] for r in reps for w in r["windows"] for a in ARMS
                ),
                "errors": sum(len(r["errors"]) for r in reps),
                **figures,
            }
        out[f"{gib:g}"] = per_k
    return out


def verdict(summary: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Where the prefill dividend (prefilled tokens S − F per window, median over repetitions)
    peaked, and whether that is the paper's place: the smallest cache at its largest K, above
    every larger cache at that K."""
    cells = [
        (float(gib), int(k), float(s["prefilled_dividend"]["median"]), float(s["h_R_S"]["median"]))
        for gib, per_k in summary.items()
        for k, s in per_k.items()
    ]
    if not cells:
        return {"held": None, "summary": "no window was measured"}
    peak = max(cells, key=lambda c: c[2])
    smallest = min(c[0] for c in cells)
    largest_k = max(c[1] for c in cells if c[0] == smallest)
    at_paper = next(c for c in cells if c[0] == smallest and c[1] == largest_k)
    others = [c for c in cells if c[1] == largest_k and c[0] != smallest]
    held = peak[:2] == at_paper[:2] and all(at_paper[2] > c[2] for c in others)
    text = (
        f"The prefill dividend peaked at {peak[2]:.0f} tokens per window with a {peak[0]:g} GiB "
        f"cache at K = {peak[1]} (h_R of S {peak[3]:.2f}); at the paper's place "
        f"({smallest:g} GiB, K = {largest_k}) it was {at_paper[2]:.0f} (h_R {at_paper[3]:.2f})"
        + "".join(
            f", against {c[2]:.0f} (h_R {c[3]:.2f}) with {c[0]:g} GiB at the same K" for c in others
        )
        + (": it peaks where the paper says." if held else ": not where the paper says.")
    )
    return {
        "held": held,
        "summary": text,
        "peak": {"kv_cache_gib": peak[0], "k": peak[1], "prefilled_dividend": peak[2]},
    }


def _markdown(result: Mapping[str, Any], header: str) -> str:
    lines = [
        "# Cache pressure: S and F by K, with prefix caches of different sizes",
        "",
        header,
        "",
        f"**Verdict.** {result['verdict']['summary']}",
        "",
        "Per window (n = 5..8, one per task), mean over the pass's windows, median over "
        "repetitions [min, max when more than one]. Tokens are counts (not noisy); walls are "
        "seconds on a shared machine (noisy). Predicted: the closed form at S's measured h_R "
        "and the pass's measured t_pf, r and L.",
        "",
        "| cache GiB | K | h S / F | h_R S / F | billed S / F | billed dividend (pred) | "
        "prefilled S / F | prefill dividend (pred) | wall S / F s | wall dividend s (pred) | "
        "pass s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def m(s: Mapping[str, Any], key: str, fmt: str = ".0f") -> str:
        x = s[key]
        if x["min"] == x["max"]:
            return f"{x['median']:{fmt}}"
        return f"{x['median']:{fmt}} [{x['min']:{fmt}}, {x['max']:{fmt}}]"

    for gib, per_k in result["summary"].items():
        for k, s in per_k.items():
            lines.append(
                f"| {gib} | {k} | {m(s, 'h_S', '.2f')} / {m(s, 'h_F', '.2f')} | "
                f"{m(s, 'h_R_S', '.2f')} / {m(s, 'h_R_F', '.2f')} | "
                f"{m(s, 'billed_S')} / {m(s, 'billed_F')} | "
                f"{m(s, 'billed_dividend')} ({m(s, 'billed_predicted')}) | "
                f"{m(s, 'prefilled_S')} / {m(s, 'prefilled_F')} | "
                f"{m(s, 'prefilled_dividend')} ({m(s, 'prefilled_predicted')}) | "
                f"{m(s, 'wall_S', '.2f')} / {m(s, 'wall_F', '.2f')} | "
                f"{m(s, 'wall_dividend', '.2f')} ({m(s, 'wall_predicted', '.2f')}) | "
                f"{m(s, 'pass_wall_s')} |"
            )
    errors = sum(s["errors"] for per_k in result["summary"].values() for s in per_k.values())
    lines += [
        "",
        f"Job errors: {errors}. Longest prompt of any window turn: "
        + ", ".join(
            f"{max(s['max_prompt'] for s in per_k.values())} tokens ({gib} GiB)"
            for gib, per_k in result["summary"].items()
            if per_k
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def _plot(result: Mapping[str, Any], path: Path) -> str | None:
    """Dividend against K per cache size, measured and predicted; a message if not drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no figure: matplotlib is not installed (pip install 'agent-harness[plot]')"
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    panels = (
        ("prefilled", "prefill dividend (tokens / window)"),
        ("wall", "wall dividend (s / window)"),
        ("h_R", "h_R of S (rolling-stride hit fraction)"),
    )
    colors = ("tab:red", "tab:blue", "tab:green", "tab:purple")
    for ax, (key, title) in zip(axes, panels, strict=True):
        for color, (gib, per_k) in zip(colors, result["summary"].items(), strict=False):
            ks = [int(k) for k in per_k]
            if key == "h_R":
                ax.plot(ks, [s["h_R_S"]["median"] for s in per_k.values()], "o-", color=color,
                        label=f"{gib} GiB")  # fmt: skip
                continue
            measured = [s[f"{key}_dividend"]["median"] for s in per_k.values()]
            predicted = [s[f"{key}_predicted"]["median"] for s in per_k.values()]
            ax.plot(ks, measured, "o-", color=color, label=f"{gib} GiB measured")
            ax.plot(ks, predicted, "x--", color=color, label=f"{gib} GiB closed form")
        ax.set_xscale("log", base=2)
        ax.set_xticks(KS, [str(k) for k in KS])
        ax.set_xlabel("K (loops on the engine)")
        ax.set_title(title, fontsize=10)
        ax.axhline(0, color="grey", linewidth=0.5)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def _sessions(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The invocations that measured ``result`` (one, or more with ``--append``)."""
    if "sessions" in result:
        return list(result["sessions"])
    keys = ("command", "engine", "caches", "reps", "load_average", "wall_s", "complete")
    return [{k: result[k] for k in keys if k in result}]


def _header(result: Mapping[str, Any]) -> str:
    lines = [
        f"Tasks {', '.join(result['tasks'])} (gold policy), arms S and F, L = "
        f"{result['latency_s']} s. Machine: 2 cores, shared with other engine benchmarks "
        "(load averages below): walls are noisy, token counts and hit fractions are not.",
        "",
    ]
    for s in _sessions(result):
        load = s["load_average"]
        lines.append(
            f"- `{s['command']}`: engine {s['engine']}, caches "
            f"{', '.join(f'{g:g}' for g in s['caches'])} GiB, {s['reps']} repetition(s), "
            f"max_model_len {s.get('max_model_len', 8192)}, wall {s['wall_s']:.0f} s"
            + ("" if s["complete"] else ", stopped before every pass it planned ran")
            + "; load average (1, 5, 15 min) at start "
            f"{', '.join(f'{x:.2f}' for x in load['start'])}, at end "
            f"{', '.join(f'{x:.2f}' for x in load['end'])}."
        )
    return "\n".join(lines)


def _write(result: Mapping[str, Any], out: Path, *, figure: bool) -> str | None:
    """``cache_pressure.json`` and ``report.md`` (and ``dividend.png`` with ``figure``) in
    ``out``; a message when the figure is not drawn."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "cache_pressure.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "report.md").write_text(_markdown(result, _header(result)))
    return _plot(result, out / "dividend.png") if figure else None


def _merged(
    prior: Mapping[str, Any] | None, session: dict[str, Any], new: Mapping[str, Any]
) -> dict[str, Any]:
    """``new`` (one invocation's result) after ``prior``'s runs and sessions."""
    sessions = [*(_sessions(prior) if prior else []), session]
    runs = [
        *(prior["runs"] if prior else []),
        *({**r, "session": len(sessions) - 1} for r in new["runs"]),
    ]
    merged = _result(runs, new["tasks"], new["latency_s"], complete=new["complete"])
    merged["complete"] = all(s["complete"] for s in sessions)
    merged["sessions"] = sessions
    return merged


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cache_pressure",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--reps", type=int, default=1, help="repetitions per K (default 1)")
    parser.add_argument(
        "--k",
        type=int,
        nargs="+",
        default=list(KS),
        help="loops on the engine, run in this order (default 1 4 8 16)",
    )
    parser.add_argument(
        "--kv-cache-gib",
        type=float,
        default=PRESSURE_GIB,
        metavar="GIB",
        help=f"the small cache (default {PRESSURE_GIB}: see above for the arithmetic)",
    )
    parser.add_argument(
        "--control-gib",
        type=float,
        default=CONTROL_GIB,
        metavar="GIB",
        help=f"the large cache, the control (default {CONTROL_GIB}; 0 skips it)",
    )
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=4096,
        metavar="TOKENS",
        help="the engines' max_model_len (default 4096). vLLM needs room for one request of "
        "it, which floors the cache (8,224 tokens at 8192, 4,128 at 4096); these jobs' "
        "prompts stay under 1,900 tokens",
    )
    parser.add_argument(
        "--latency", type=float, default=0.1, help="tool latency L in seconds (default 0.1)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write cache_pressure.json and report.md here after every pass, and dividend.png "
        "at the end (an interrupted run leaves what it measured, marked incomplete)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite report.md and dividend.png in --out from its cache_pressure.json",
    )
    parser.add_argument(
        "--append",
        action="store_true",
        help="add this invocation's passes to --out's cache_pressure.json (same tasks and L): "
        "a run split over several invocations, each recorded with its command and load",
    )
    parser.add_argument(
        "--engine", choices=("vllm", "scripted"), default="vllm", help="default: vllm"
    )
    return parser


def _report_only(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.out is None or not (args.out / "cache_pressure.json").is_file():
        parser.error("--report-only needs --out DIR holding cache_pressure.json")
    stored = json.loads((args.out / "cache_pressure.json").read_text())
    result = {
        **_result(stored["runs"], stored["tasks"], stored["latency_s"], complete=True),
        "complete": stored["complete"],
        "sessions": _sessions(stored),
    }
    message = _write(result, args.out, figure=True)
    print(_markdown(result, _header(result)))
    if message:
        print(message, file=sys.stderr)
    return 0


def _prior(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any] | None:
    """With ``--append``: the stored result this invocation adds to."""
    if not args.append:
        return None
    stored = None if args.out is None else args.out / "cache_pressure.json"
    if stored is None or not stored.is_file():
        parser.error("--append needs --out DIR holding cache_pressure.json")
    prior: dict[str, Any] = json.loads(stored.read_text())
    if list(prior["tasks"]) != list(TASKS) or prior["latency_s"] != args.latency:
        parser.error(
            f"--append: {stored} measured tasks {prior['tasks']} at L = "
            f"{prior['latency_s']} s; this run would measure {list(TASKS)} at {args.latency}"
        )
    return prior


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.reps < 1 or min(args.k) < 1 or args.kv_cache_gib <= 0 or args.control_gib < 0:
        parser.error("--reps and --k must be at least 1, --kv-cache-gib more than 0")
    if args.report_only:
        return _report_only(args, parser)
    caches = [args.kv_cache_gib] + ([args.control_gib] if args.control_gib else [])
    prior = _prior(args, parser)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def opener(gib: float) -> AbstractAsyncContextManager[Engine]:
        if args.engine == "scripted":
            from harness.testing import ScriptedEngine

            return ScriptedEngine(prefill_ms_per_token=0.2, decode_ms_per_token=1.0)
        from harness.engines.vllm import open_default_engine

        return open_default_engine(kv_cache_gib=gib, max_model_len=args.max_model_len)

    load_start = os.getloadavg()
    started = time.monotonic()
    command = [
        "python",
        "-m",
        "benchmarks.cache_pressure",
        *(sys.argv[1:] if argv is None else argv),
    ]

    def finished(result: Mapping[str, Any]) -> dict[str, Any]:
        session = {
            "command": shlex.join(command),
            "engine": args.engine,
            "caches": caches,
            "k": list(args.k),
            "reps": args.reps,
            "max_model_len": args.max_model_len,
            "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
            "wall_s": time.monotonic() - started,
            "complete": bool(result["complete"]),
        }
        return _merged(prior, session, result)

    def checkpoint(partial: dict[str, Any]) -> None:
        if args.out is not None:
            _write(finished(partial), args.out, figure=False)

    async def go() -> dict[str, Any]:
        return await run_cache_pressure(
            opener, caches=caches, ks=args.k, reps=args.reps, latency_s=args.latency,
            progress=say, checkpoint=checkpoint,
        )  # fmt: skip

    result = finished(anyio.run(go, backend="asyncio"))
    print(_markdown(result, _header(result)))
    if args.out is not None:
        message = _write(result, args.out, figure=True)
        if message:
            say(message)
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
