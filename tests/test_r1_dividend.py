"""Claims about the R1 benchmark: K = 1 against K = 8, and the residual decomposed by term."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from benchmarks.r1_dividend import ARMS, main, run_r1, summarise
from harness.testing import ScriptedEngine


def test_one_loop_alone_measures_the_tool_term_the_closed_form_prices() -> None:
    engine = ScriptedEngine(prefill_ms_per_token=1.0, decode_ms_per_token=2.0, overhead_ms=10.0)
    result = anyio.run(lambda: run_r1(engine, reps=1, ks=(1,), latency_s=0.3))
    (run,) = result["runs"]
    assert run["errors"] == []
    assert [w["n"] for w in run["windows"]] == [6, 6]
    for w in run["windows"]:
        # S waits 6 x 0.3 s one by one. F's window is six writes: under the default budgets
        # (S stops after 4 failures in a row) F runs the first 4 together, then the last 2
        # once their results show S reaches them (docs/arms.md, "No window call runs that S
        # would not have reached"): 4 x 0.3 s hidden, one latency less than the closed form
        # prices for one concurrent run
        assert w["tool_hidden"] == pytest.approx(w["tool_hidden_predicted"] - 0.3, abs=0.1)
        assert w["dividend"] == pytest.approx(w["tool_hidden"] + w["prefill_saved"] + w["rest"])
        assert set(w["wall"]) == set(ARMS)


def test_the_summary_gives_median_and_spread_over_repetitions_per_k() -> None:
    def window(dividend: float) -> dict[str, object]:
        keys = ("tool_hidden", "tool_hidden_predicted", "prefill_saved",
                "prefill_saved_predicted", "rest")  # fmt: skip
        return {"dividend": dividend, "predicted": 2.0, "wall": {"S": 5.0, "F": 5.0 - dividend},
                **dict.fromkeys(keys, 0.0)}  # fmt: skip

    runs = [{"k": 1, "windows": [window(d)]} for d in (1.0, 1.8, 1.9)]
    runs.append({"k": 8, "windows": [window(1.0)]})
    summary = summarise(runs)
    assert summary["1"]["ratio"] == {"median": 0.9, "min": 0.5, "max": 0.95}
    assert summary["1"]["repetitions"] == 3
    assert summary["8"]["ratio"]["median"] == pytest.approx(0.5)
    assert set(summary["1"]["wall"]) == {"S", "F"}


def test_the_command_writes_its_figures_on_the_scripted_engine(tmp_path: Path) -> None:
    assert main(["--engine", "scripted", "--reps", "1", "--k", "2", "--latency", "0.05",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    assert (tmp_path / "r1.json").exists()
    assert "| 2 | 1 |" in (tmp_path / "r1.md").read_text()


@pytest.mark.parametrize(("k", "resets"), [(1, 8), (8, 1)])
def test_every_job_at_k1_and_every_pass_at_k8_starts_from_an_empty_prefix_cache(
    k: int, resets: int
) -> None:
    """Otherwise F, run after S on the same task, finds S's prompts cached (a dividend that is
    the cache's, not the harness's)."""

    class Counting(ScriptedEngine):
        resets = 0

        async def reset_prefix_cache(self) -> bool:
            type(self).resets += 1
            return await super().reset_prefix_cache()

    engine = Counting()
    anyio.run(lambda: run_r1(engine, reps=1, ks=(k,), latency_s=0.0))
    assert Counting.resets == resets  # 2 tasks x 4 arms = 8 jobs
