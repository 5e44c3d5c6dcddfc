"""Claims about the cache-pressure benchmark: the hit fractions and dividends it reads off the
ledger, the closed form it prices at the measured h_R, and its verdict (scripted engine)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from benchmarks.cache_pressure import (
    analyse_pass,
    main,
    run_cache_pressure,
    verdict,
    window_tokens,
)
from harness.testing import ScriptedEngine


def _turn(
    turn: int, prompt: int, cached: int, completion: int = 10, **extra: Any
) -> dict[str, Any]:
    return {"turn": turn, "prompt_tokens": prompt, "cached_tokens": cached,
            "completion_tokens": completion, "n_calls": 1, **extra}  # fmt: skip


def test_h_R_counts_only_what_a_turn_rereads_from_earlier_turns_of_the_window() -> None:
    job = {
        "calls": [{"call_id": f"call_{i}", "turn": i} for i in range(3)],
        "turns": [
            _turn(0, 100, 0),
            _turn(1, 150, 96),  # rereads 50; the cache served part of the prefix only: 0
            _turn(1, 150, 0, purpose="discard"),  # a marker, not a generation: left out
            _turn(2, 200, 160),  # rereads 100, 60 of them cached
            _turn(3, 250, 0, completion=5),  # the absorb: rereads 150, evicted
            _turn(4, 300, 250),  # after the window: not counted
        ],
    }
    t = window_tokens(job, ["call_0", "call_1", "call_2"])
    assert t["turns"] == 4
    assert t["reread"] == 300
    assert t["reread_cached"] == 60
    assert t["h_R"] == pytest.approx(0.2)
    assert t["h"] == pytest.approx(256 / 700)
    assert t["billed"] == 700 + 35
    assert t["prefilled"] == 700 - 256
    assert t["max_prompt"] == 250


def _scripted(gib: float) -> ScriptedEngine:
    return ScriptedEngine(prefill_ms_per_token=0.1, decode_ms_per_token=0.1)


def _run(**kwargs: Any) -> dict[str, Any]:
    options: dict[str, Any] = {"caches": (0.19,), "ks": (2,), "latency_s": 0.0,
                               "tasks": ("fan_out-04", "fan_out-05"), **kwargs}  # fmt: skip
    return anyio.run(lambda: run_cache_pressure(_scripted, **options))


def test_each_window_is_priced_at_the_h_R_its_serial_run_measured() -> None:
    result = _run()
    (run,) = result["runs"]
    assert run["errors"] == []
    assert [w["n"] for w in run["windows"]] == [5, 5]
    r = run["regime"]["result_tokens"]
    for w in run["windows"]:
        s, f = w["tokens"]["S"], w["tokens"]["F"]
        n, h_r = w["n"], s["h_R"]
        assert w["predicted"]["billed"] == pytest.approx(r * n * (n - 1) / 2)
        assert w["predicted"]["prefilled"] == pytest.approx((1 - h_r) * r * n * (n - 1) / 2)
        assert w["dividend"]["billed"] == s["billed"] - f["billed"]
        assert w["dividend"]["prefilled"] == s["prefilled"] - f["prefilled"]
        assert w["dividend"]["wall_s"] == pytest.approx(w["wall"]["S"] - w["wall"]["F"])


def test_a_cache_cold_serial_run_is_priced_the_whole_rolling_stride() -> None:
    """Every prompt served from nothing: h_R = 0, so the closed form prices the prefilled
    dividend as the billed one, r n(n-1)/2."""

    class Cold(ScriptedEngine):
        def _cached(self, tokens: list[str]) -> int:
            return 0

    jobs = []

    async def go() -> None:
        from benchmarks.cache_pressure import ARMS
        from benchmarks.r1_dividend import run_pass
        from harness.bench.workload import generate_tasks

        tasks = [t for t in generate_tasks(0) if t.id == "fan_out-06"]
        async with Cold() as engine:
            jobs.extend(await run_pass(engine, tasks, 2, 0.0, ARMS))

    anyio.run(go)
    (w,) = analyse_pass(jobs)["windows"]
    assert w["tokens"]["S"]["h_R"] == 0.0
    assert w["predicted"]["prefilled"] == pytest.approx(w["predicted"]["billed"])
    assert w["dividend"]["prefilled"] == w["dividend"]["billed"]  # nothing cached either way


@pytest.mark.parametrize(("k", "resets"), [(1, 4), (2, 1)])
def test_every_job_at_k1_and_every_pass_above_starts_from_an_empty_prefix_cache(
    k: int, resets: int
) -> None:
    class Counting(ScriptedEngine):
        resets = 0

        async def reset_prefix_cache(self) -> bool:
            type(self).resets += 1
            return await super().reset_prefix_cache()

    anyio.run(
        lambda: run_cache_pressure(
            lambda gib: Counting(), caches=(1.0,), ks=(k,), latency_s=0.0,
            tasks=("fan_out-04", "fan_out-05"),
        )
    )  # fmt: skip
    assert Counting.resets == resets  # 2 tasks x 2 arms = 4 jobs


def test_every_pass_is_checkpointed_and_only_the_last_result_is_complete() -> None:
    seen: list[Mapping[str, Any]] = []
    result = _run(caches=(0.19, 2.0), ks=(2, 1), checkpoint=seen.append)
    assert [len(p["runs"]) for p in seen] == [1, 2, 3, 4]
    assert not any(p["complete"] for p in seen)
    assert result["complete"]
    assert set(result["summary"]) == {"0.19", "2"}
    assert set(result["summary"]["2"]) == {"1", "2"}


def _summary(cells: Mapping[tuple[str, str], tuple[float, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (gib, k), (dividend, h_r) in cells.items():
        out.setdefault(gib, {})[k] = {
            "prefilled_dividend": {"median": dividend},
            "h_R_S": {"median": h_r},
        }
    return out


def test_the_verdict_holds_when_the_small_cache_at_the_largest_k_gives_the_most() -> None:
    held = verdict(_summary({("0.19", "1"): (-40, 0.9), ("0.19", "16"): (300, 0.1),
                             ("2", "1"): (-40, 0.9), ("2", "16"): (-50, 0.9)}))  # fmt: skip
    assert held["held"] is True
    assert (
        "300 tokens per window with a 0.19 GiB cache at K = 16 (h_R of S 0.10)" in (held["summary"])
    )
    assert "against -50 (h_R 0.90) with 2 GiB at the same K" in held["summary"]


@pytest.mark.parametrize(
    "cells",
    [
        # the peak is at a smaller K
        {("0.19", "4"): (400, 0.2), ("0.19", "16"): (300, 0.1), ("2", "16"): (-50, 0.9)},
        # the large cache gives as much at the same K
        {("0.19", "16"): (300, 0.1), ("2", "16"): (300, 0.9)},
    ],
)
def test_the_verdict_fails_when_the_dividend_peaks_elsewhere(
    cells: Mapping[tuple[str, str], tuple[float, float]],
) -> None:
    result = verdict(_summary(cells))
    assert result["held"] is False
    assert result["summary"].endswith("not where the paper says.")


def test_the_command_writes_its_figures_and_rewrites_its_report(tmp_path: Path) -> None:
    argv = ["--engine", "scripted", "--k", "2", "--latency", "0", "--out", str(tmp_path)]
    assert main(argv) == 0
    result = json.loads((tmp_path / "cache_pressure.json").read_text())
    assert result["complete"] is True
    (session,) = result["sessions"]
    assert session["command"].startswith("python -m benchmarks.cache_pressure --engine scripted")
    assert len(session["load_average"]["start"]) == 3
    report = (tmp_path / "report.md").read_text()
    assert "| 0.09 | 2 |" in report
    assert "| 2 | 2 |" in report
    (tmp_path / "report.md").unlink()
    assert main(["--report-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").read_text() == report


def test_an_appended_invocation_adds_its_passes_and_its_command(tmp_path: Path) -> None:
    first = ["--engine", "scripted", "--k", "2", "--latency", "0", "--control-gib", "0"]
    assert main([*first, "--out", str(tmp_path)]) == 0
    second = ["--engine", "scripted", "--k", "1", "2", "--latency", "0", "--kv-cache-gib", "2",
              "--control-gib", "0", "--append", "--out", str(tmp_path)]  # fmt: skip
    assert main(second) == 0
    result = json.loads((tmp_path / "cache_pressure.json").read_text())
    assert [s["caches"] for s in result["sessions"]] == [[0.09], [2.0]]
    assert [(r["session"], r["kv_cache_gib"], r["k"]) for r in result["runs"]] == [
        (0, 0.09, 2), (1, 2.0, 1), (1, 2.0, 2)
    ]  # fmt: skip
    assert set(result["summary"]) == {"0.09", "2"}
    report = (tmp_path / "report.md").read_text()
    assert report.count("- `python -m benchmarks.cache_pressure --engine scripted") == 2


def test_appending_a_run_of_other_settings_is_refused(tmp_path: Path) -> None:
    assert main(["--engine", "scripted", "--k", "2", "--latency", "0", "--control-gib", "0",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    with pytest.raises(SystemExit) as stopped:
        main(["--engine", "scripted", "--k", "2", "--latency", "0.5", "--append",
              "--out", str(tmp_path)])  # fmt: skip
    assert stopped.value.code == 2
