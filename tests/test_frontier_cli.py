"""``harness frontier``: the cost model's calculator at the command line."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from harness._commands.cli import main
from harness.costmodel import PARAMETERS, Regime

WINDOW_KEYS = [
    "n", "T_S", "T_F", "T_P", "dividend_T_F", "dividend_T_F_fraction", "tokens_S", "tokens_F",
    "tokens_P", "token_dividend_F", "token_dividend_F_fraction", "g_T_star", "g_B_star",
    "best_arm",
]  # fmt: skip


def frontier_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["frontier", "--json", *args]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_table_for_the_papers_windows_prints_the_papers_figures(capsys):
    assert main(["frontier", "--n", "2", "6", "8", "10"]) == 0
    out = capsys.readouterr().out
    for figure in ("18.89", "4.66", "24.7%", "10.98", "32.3%", "12.02", "63.6%", "73.8%"):
        assert figure in out
    for gap in ("0.74pp", "2.34pp", "2.81pp", "4.39pp", "17.82pp"):
        assert gap in out
    assert "8.3%" in out  # token dividend at n = 6
    assert "3.50" in out
    assert "1.94" in out
    assert "n* = 7.95" in out
    assert "flatten what the model cannot afford to emit in parallel" in out


def test_default_windows_are_two_to_ten(capsys):
    doc = frontier_json(capsys)
    assert [w["n"] for w in doc["windows"]] == list(range(2, 11))


def test_json_output_has_exactly_the_documented_keys(capsys):
    doc = frontier_json(capsys, "--n", "2", "6", "8", "10")
    assert list(doc) == ["regime", "windows", "n_star", "speculation", "drafting"]
    assert doc["regime"] == Regime().to_json()
    assert all(list(w) == WINDOW_KEYS for w in doc["windows"])
    six = doc["windows"][1]
    assert six["n"] == 6
    assert round(six["T_S"], 2) == 18.89
    assert round(six["dividend_T_F"], 2) == 4.66
    assert round(six["dividend_T_F_fraction"], 3) == 0.247
    assert round(six["token_dividend_F_fraction"], 3) == 0.083
    assert round(six["g_T_star"], 2) == 2.34
    assert round(six["g_B_star"], 1) == 17.8
    assert [w["best_arm"] for w in doc["windows"]] == ["F", "F", "P+V", "P+V"]
    assert round(doc["n_star"]) == 8


def test_every_regime_parameter_has_an_option_that_overrides_it(capsys):
    for param in PARAMETERS:
        value = 0.5 if param.kind in ("fraction", "nonnegative") else 3.0
        doc = frontier_json(capsys, "--n", "4", param.flag, str(value))
        assert doc["regime"][param.name] == value


def test_params_file_is_read_and_options_override_it(capsys, tmp_path):
    path = tmp_path / "measured.json"
    path.write_text(json.dumps({"gap_pp": 1.5, "tool_latency_s": 0.8}))
    doc = frontier_json(capsys, "--params", str(path), "--tool-latency", "0.9")
    assert doc["regime"]["gap_pp"] == 1.5
    assert doc["regime"]["tool_latency_s"] == 0.9
    assert doc["regime"]["prefix_tokens"] == 4096  # missing key: nominal default


def test_a_gap_never_reached_gives_a_null_flip_window(capsys):
    doc = frontier_json(capsys, "--stride-hit", "1", "--gap", "50")
    assert doc["n_star"] is None
    assert {w["best_arm"] for w in doc["windows"]} == {"F"}


def user_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["frontier", *args]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.err.startswith("error: ")
    err: str = captured.err
    return err


def test_missing_params_file_is_exit_2_with_a_message(capsys, tmp_path):
    err = user_error(capsys, "--params", str(tmp_path / "nope.json"))
    assert "nope.json" in err
    assert "--params" in err


def test_params_file_that_is_not_json_is_exit_2_with_a_message(capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{gap_pp: 1")
    assert "not valid JSON" in user_error(capsys, "--params", str(path))


def test_params_file_that_is_not_an_object_is_exit_2(capsys, tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    assert "not an object" in user_error(capsys, "--params", str(path))


def test_unknown_key_in_params_file_is_exit_2_naming_it(capsys, tmp_path):
    path = tmp_path / "typo.json"
    path.write_text(json.dumps({"tool_latency": 0.5}))
    err = user_error(capsys, "--params", str(path))
    assert "'tool_latency'" in err
    assert "'tool_latency_s'" in err


def test_out_of_range_option_is_exit_2_naming_the_parameter(capsys):
    assert "prefix_hit" in user_error(capsys, "--prefix-hit", "1.5")


def test_window_below_one_is_exit_2(capsys):
    assert "at least one call" in user_error(capsys, "--n", "0", "4")


def test_plot_writes_a_png(capsys, tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra: pip install 'agent-harness[plot]'")
    path = tmp_path / "frontier.png"
    assert main(["frontier", "--n", "2", "6", "8", "10", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(path) in capsys.readouterr().out


def test_plot_without_matplotlib_says_how_to_install_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    err = user_error(capsys, "--plot", str(tmp_path / "f.png"))
    assert "install the plot extra: pip install 'agent-harness[plot]'" in err


def test_help_teaches_every_option(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frontier", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--n", "--params", "--json", "--plot", *(p.flag for p in PARAMETERS)):
        assert flag in out
    assert "examples:" in out
