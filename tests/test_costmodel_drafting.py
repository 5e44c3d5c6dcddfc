"""Claims about the drafted-decoding term of the cost model (harness.costmodel.drafting): the
tokens per verification step of speculative decoding, the same saving for every arm, the
break-even acceptance, the measured speed-up of the committed draft run reproduced, and
``harness frontier --draft-acceptance``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness._commands.cli import main
from harness.costmodel import Regime, wall_time_flattened, wall_time_parallel, wall_time_serial
from harness.costmodel.drafting import (
    Drafting,
    break_even_acceptance,
    drafted_saving,
    wall_time_flattened_drafted,
    wall_time_parallel_drafted,
    wall_time_serial_drafted,
    wall_time_speculative_drafted,
)
from harness.costmodel.speculation import wall_time_speculative
from harness.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DRAFT_REPORT = ROOT / "benchmarks" / "results" / "draft" / "quiet-k1" / "report.md"


def test_tokens_per_step_run_from_one_to_k_plus_one() -> None:
    assert Drafting(0.0, 6).tokens_per_step == 1.0
    assert Drafting(1.0, 6).tokens_per_step == 7.0
    assert Drafting(0.5, 2).tokens_per_step == pytest.approx(1 + 0.5 + 0.25)
    steps = [Drafting(a / 10, 6).tokens_per_step for a in range(11)]
    assert steps == sorted(steps)  # more acceptance, more tokens per step


def test_no_drafting_gain_leaves_every_arm_as_it_was_and_a_gain_saves_every_arm_alike() -> None:
    regime = Regime()
    none = Drafting(0.0, 6, 1.0)  # one token per step at the cost of one step
    for n in (1, 2, 6, 10):
        assert drafted_saving(regime, n, none) == 0.0
        assert wall_time_flattened_drafted(regime, n, none) == wall_time_flattened(regime, n)
    gain = Drafting(0.9, 6, 2.0)
    for n in (2, 6, 10):
        saved = drafted_saving(regime, n, gain)
        assert saved > 0
        assert wall_time_serial(regime, n) - wall_time_serial_drafted(
            regime, n, gain
        ) == pytest.approx(saved)
        assert wall_time_flattened(regime, n) - wall_time_flattened_drafted(
            regime, n, gain
        ) == pytest.approx(saved)
        assert wall_time_parallel(regime, n) - wall_time_parallel_drafted(
            regime, n, gain
        ) == pytest.approx(saved)
        assert wall_time_speculative_drafted(regime, n, gain) <= wall_time_speculative(regime, n)
    costly = Drafting(0.2, 6, 3.0)  # 1.25 tokens per step cannot pay for a step of 3
    assert drafted_saving(regime, 6, costly) < 0


def test_the_break_even_acceptance_is_where_a_step_yields_what_it_costs() -> None:
    assert break_even_acceptance(6, 1.0) == 0.0
    assert break_even_acceptance(2, 3.0) == 1.0  # at most 3 tokens per step: never ahead
    alpha = break_even_acceptance(6, 3.0)
    assert Drafting(alpha, 6, 3.0).tokens_per_step == pytest.approx(3.0, abs=1e-6)
    assert Drafting(alpha + 0.01, 6, 3.0).speedup > 1.0 > Drafting(alpha - 0.01, 6, 3.0).speedup


@pytest.mark.parametrize(
    ("alpha", "k", "rho"), [(-0.1, 6, 1.0), (1.1, 6, 1.0), (0.5, 0, 1.0), (0.5, 6, 0.5)]
)
def test_a_drafting_outside_its_range_is_a_config_error(alpha: float, k: int, rho: float) -> None:
    with pytest.raises(ConfigError):
        Drafting(alpha, k, rho)


def _row(text: str, proposer: str) -> list[str]:
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[:5] == ["gold", "F", "1", "6", proposer]:
            return cells
    raise AssertionError(f"no F n=6 {proposer} row in {DRAFT_REPORT}")


def test_the_term_reproduces_the_committed_draft_runs_decode_speedup() -> None:
    # The committed run (F, n = 6, K = 1, window proposer, k = 6): acceptance 0.93, 5.52 tokens
    # per step, decode 13.8 -> 25.2 tokens/s. A verification step then costs rho = 5.52 / 1.83
    # ~ 3 plain steps; the closed form with alpha = 0.93, rho = 3 predicts the speed-up within 5%.
    text = DRAFT_REPORT.read_text(encoding="utf-8")
    none, window = _row(text, "none"), _row(text, "window")
    measured = float(window[6]) / float(none[6])
    alpha, per_step = float(window[8]), float(window[9])
    model = Drafting(alpha, 6, 3.0)
    assert model.tokens_per_step == pytest.approx(per_step, rel=0.05)
    assert model.speedup == pytest.approx(measured, rel=0.05)
    assert 2.7 < per_step / measured < 3.3  # the verify cost the figures imply


def test_frontier_prices_drafting_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["frontier", "--n", "2", "6", "--draft-acceptance", "0.93", "--verify-cost", "3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Drafted decoding: α = 0.93, k = 6, ρ = 3: 5.69 tokens per verification step" in out
    assert re.search(r"^ *6 +\d+\.\d\d +\d+\.\d\d", out, re.M)
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    drafting = doc["drafting"]
    assert drafting["speedup"] == pytest.approx(5.69 / 3, abs=0.01)
    assert [w["n"] for w in drafting["windows"]] == [2, 6]
    assert main(["frontier", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["drafting"] is None


def test_frontier_refuses_a_drafting_outside_its_range_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["frontier", "--draft-acceptance", "1.5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
