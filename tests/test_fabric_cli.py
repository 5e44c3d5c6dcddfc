"""``harness fabric``: the fabric at the command line (on the scripted demo engine; the real
engine is the default for users)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness._commands.cli import main
from harness.fabric import example_plan


def test_demo_prints_every_step_and_the_pef_headers(capsys):
    assert main(["fabric", "demo", "--engine", "scripted-demo"]) == 0
    out = capsys.readouterr().out
    assert "graph: 14 steps, depth 4, layers 4/5/3/2" in out
    for header in ("CRP-PEF-Layers: 4/14", "CRP-PEF-Batch-Efficiency:", "CRP-PEF-Wall-Clock-Ms:"):
        assert header in out
    assert "CRP-PEF-Compute-Vs-Naive:" in out
    assert out.count(" consensus ") == 6


def test_demo_json_counts_the_planner_and_composer(capsys):
    assert main(["fabric", "demo", "--engine", "scripted-demo", "--json", "--no-speculative"]) == 0
    doc = json.loads(capsys.readouterr().out)
    figures = doc["figures"]
    assert (figures["depth"], figures["total"], figures["inferences"]) == (4, 14, 28)
    assert figures["rounds"] == 6 == figures["budget_rounds"]
    assert figures["headers"]["CRP-PEF-Batch-Efficiency"] == "4.7x"
    assert doc["plan"] == example_plan()
    assert [n["layer"] for n in doc["nodes"]].count(0) == 4


def test_naive_graph_only_demo_is_one_round_per_inference(capsys):
    argv = ["fabric", "demo", "--engine", "scripted-demo", "--graph-only", "--naive", "--json"]
    assert main([*argv, "--no-consensus"]) == 0
    figures = json.loads(capsys.readouterr().out)["figures"]
    assert figures["inferences"] == figures["rounds"] == 14
    assert figures["headers"]["CRP-PEF-Batch-Efficiency"] == "1.0x"


def test_run_follows_a_plan_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.jsonl"
    plan.write_text(
        '{"id": "a", "prompt": "Find x."}\n{"id": "b", "prompt": "Use x.", "deps": ["a"]}\n'
    )
    argv = ["fabric", "run", "--engine", "scripted-demo", "--prompt", "t", "--plan", str(plan)]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["id"] for n in doc["nodes"]] == ["a", "b"]
    assert doc["figures"]["headers"]["CRP-PEF-Layers"] == "2/2"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--plan", "/nonexistent/plan.jsonl"], "Cannot read the plan"),
        (["--max-tokens", "0"], "--max-tokens 0 is below 1"),
        (["--max-repairs", "-1"], "--max-repairs -1 is negative"),
    ],
)
def test_user_mistakes_are_one_line_errors_not_tracebacks(extra, message, capsys):
    argv = ["fabric", "run", "--engine", "scripted-demo", "--prompt", "t", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert message in err


def test_a_plan_file_with_a_bad_line_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.jsonl"
    plan.write_text('{"id": "a", "prompt": "Find x.", "deps": ["zz"]}\n')
    argv = ["fabric", "run", "--engine", "scripted-demo", "--prompt", "t", "--plan", str(plan)]
    assert main(argv) == 2
    assert "plan line 1: step 'a' depends on 'zz'" in capsys.readouterr().err


def test_fabric_without_a_verb_prints_help(capsys):
    assert main(["fabric"]) == 2
    assert "harness fabric demo" in capsys.readouterr().out
