"""How drafted runs are compared with undrafted ones: the signature of what was generated,
where two runs part, and when a parting is a numerical tie (``benchmarks.draft_bench``,
``benchmarks.draft_ties``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.draft_bench import _signature, first_difference
from benchmarks.draft_ties import bf16_ulp, classify, parting
from harness.messages import token_digest


def _job(digests: list[str], calls: list[tuple[str, str]], answer: str = "a") -> dict[str, Any]:
    return {
        "calls": [{"tool": t, "arguments": a} for t, a in calls],
        "answer": answer,
        "turns": [{"completion_tokens": 3, "token_digest": d} for d in digests],
    }


def test_the_token_digest_tells_token_ids_apart_not_only_their_count() -> None:
    assert token_digest([1, 2, 3]) == token_digest([1, 2, 3])
    assert token_digest([1, 2, 3]) != token_digest([1, 3, 2])
    assert token_digest([12, 3]) != token_digest([1, 23])
    assert len(token_digest([])) == 16


def test_a_signature_differs_when_a_turns_tokens_differ_with_equal_text_and_counts() -> None:
    calls = [("read_doc", '{"id": "x"}')]
    same = _signature(_job(["d1", "d2"], calls))
    assert _signature(_job(["d1", "d2"], calls)) == same
    other = _signature(_job(["d1", "XX"], calls))  # same calls and counts, other token ids
    assert other != same
    assert first_difference(other, same) == "turn 2"
    longer = _signature(_job(["d1", "d2", "d3"], calls))
    assert first_difference(longer, same) == "turn 3 (one run has more turns)"
    assert first_difference(_signature(_job(["d1", "d2"], calls, "b")), same) == "answer"


def test_parting_and_the_tie_verdict() -> None:
    assert parting([1, 2, 3], [1, 2, 3]) is None
    assert parting([1, 2, 3], [1, 5, 3]) == 1
    assert parting([1, 2], [1, 2, 3]) == 2
    assert bf16_ulp(20.0) == 0.125  # 8 significant bits: [16, 32) in steps of 1/8
    assert bf16_ulp(-3.0) == 2.0**-6
    assert classify(20.0, 19.875, 2) == (1.0, "tie")
    assert classify(20.0, 19.0, 2) == (8.0, "suspect")


class _ScriptedScorer:
    """A scripted stand-in for the undrafted scoring engine (unit test double): the raw
    logits it gives after a prompt are a table, keyed by the prompt's last token."""

    def __init__(self, logits: dict[int, dict[int, float]]) -> None:
        self.scored: list[list[int]] = []
        self._logits = logits
        outer = self

        class _LLM:
            async def generate(self, prompt: Any, params: Any, request_id: str) -> Any:
                ids = list(prompt["prompt_token_ids"])
                outer.scored.append(ids)
                table = outer._logits[ids[-1]]
                logprobs = {t: SimpleNamespace(logprob=v) for t, v in table.items()}
                yield SimpleNamespace(outputs=[SimpleNamespace(logprobs=[logprobs])])

        class _Tokenizer:
            def decode(self, ids: list[int]) -> str:
                return f"<{ids[0]}>"

        self._llm = _LLM()
        self._tokenizer = _Tokenizer()


def test_score_partings_scores_the_first_differing_token_and_tells_a_tie_from_a_suspect() -> None:
    pytest.importorskip("vllm", reason="the scoring request is built with vLLM's types")
    from benchmarks.draft_ties import score_partings

    # Three chats. Chat A: the same tokens. Chat B: parts at index 1 (tokens 7 vs 8) where
    # their logits are 1 bf16 step apart. Chat C: parts at index 0 (5 vs 6), 8 steps apart.
    # A drafted chat the undrafted run never saw is not compared.
    undrafted = [([1, 2], [3, 4]), ([1, 9], [4, 7, 2]), ([1, 10], [5, 1])]
    drafted = [([1, 2], [3, 4]), ([1, 9], [4, 8, 2]), ([1, 10], [6, 1]), ([99], [1])]
    scorer = _ScriptedScorer({4: {7: 20.0, 8: 19.875, 2: 3.0}, 10: {5: 20.0, 6: 19.0}})
    rows, same = asyncio.run(score_partings(scorer, undrafted, drafted))  # type: ignore[arg-type]
    assert same == 1
    assert scorer.scored == [[1, 9, 4], [1, 10]]  # the prompt plus the shared prefix
    assert [(r["prompt_tokens"], r["index"], r["verdict"]) for r in rows] == [
        (2, 1, "tie"),
        (2, 0, "suspect"),
    ]
    assert rows[0]["logit_undrafted"] == 20.0
    assert rows[0]["logit_drafted"] == 19.875
    assert rows[1]["ulps"] == 8.0
    assert rows[1]["argmax"] == "<5>"
    # One output a prefix of the other is never a tie (nothing to score).
    rows, _ = asyncio.run(score_partings(scorer, [([1], [3, 4])], [([1], [3])]))  # type: ignore[arg-type]
    assert [r["verdict"] for r in rows] == ["suspect"]


def test_recording_feeds_nested_recorders_and_restores_the_engines_own_method() -> None:
    from benchmarks.draft_ties import recording

    class _Engine:  # a stand-in with the engine's completion hook (unit test double)
        def _completion(self, final: Any) -> str:
            return "done"

    def final(prompt: list[int], out: list[int]) -> Any:
        return SimpleNamespace(prompt_token_ids=prompt, outputs=[SimpleNamespace(token_ids=out)])

    engine = _Engine()
    with recording(engine) as outer:  # type: ignore[arg-type]
        assert engine._completion(final([1], [2])) == "done"
        with recording(engine) as inner:  # type: ignore[arg-type]
            engine._completion(final([3], [4]))
        engine._completion(final([5], [6]))
    engine._completion(final([7], [8]))
    assert outer == [([1], [2]), ([3], [4]), ([5], [6])]
    assert inner == [([3], [4])]
    assert "_completion" not in vars(engine)  # the class's method, no recorder left behind


def test_the_report_prices_f_spec_against_p_and_lists_each_mismatch() -> None:
    from benchmarks.draft_bench import summarise

    def row(
        arm: str, proposer: str, wall: float, digest: str = "d", answer: str = "b"
    ) -> dict[str, Any]:
        return {
            "policy": "gold",
            "arm": arm,
            "K": 1,
            "n": 6,
            "rep": 0,
            "task_id": "survey-n6-k0",
            "proposer": proposer,
            "wall_s": wall,
            "decode_s": 1.0,
            "generated_tokens": 10,
            "drafts": 2,
            "draft_tokens": 12,
            "accepted_tokens": 6,
            "signature": _signature(_job([digest], [("read_doc", "{}")], answer)),
        }

    rows = [
        row("P", "none", 10.0),
        row("P", "window", 8.0),
        row("F+spec", "none", 12.0),
        row("F+spec", "window", 9.0, digest="other"),
    ]
    text = summarise(rows)
    assert "- gold K=1 n=6: F+spec with window 0.90x P undrafted, 1.12x P with window" in text
    assert "2 jobs compared with the none engine's, 1 differ" in text
    assert "of these, 0 in calls or answer, 1 only in the token ids" in text
    rows[1] = row("P", "window", 8.0, digest="other", answer="another")
    assert "2 differ (calls, answer or the generated token ids of a turn); of these, 1 in " in (
        summarise(rows)
    )
    assert "- survey-n6-k0 F+spec gold K=1 rep 0 window: turn 1" in text


def test_the_report_orders_survey_sizes_by_number_then_workload_kinds() -> None:
    from benchmarks.draft_bench import summarise

    def row(n: int, task_id: str) -> dict[str, Any]:
        return _stored_row({"policy": "gold", "K": 8, "n": n, "rep": 0}, "F", "none", task_id)

    rows = [row(10, "survey-n10-k0"), row(0, "mixed-03"), row(2, "survey-n2-k0")]
    rows.append(row(0, "chain-01"))
    shapes = [line.split(" | ")[3] for line in summarise(rows).splitlines()[2:6]]
    assert shapes == ["2", "10", "chain", "mixed"]


def test_each_cell_meets_every_proposer_back_to_back_in_a_rotated_order() -> None:
    import argparse

    from benchmarks.draft_bench import _runs

    args = argparse.Namespace(
        reps=2,
        proposers=["none", "window"],
        policies=["gold"],
        arms=["F"],
        workload=None,
        concurrency=[1],
        n=[2],
    )
    order = [(cell["rep"], proposer) for cell, _, _, proposer in _runs(args)]
    assert order == [(0, "none"), (0, "window"), (1, "window"), (1, "none")]


def test_draft_ties_rebuilds_the_survey_task_of_the_repetition_draft_bench_ran() -> None:
    import argparse

    from benchmarks.draft_bench import _runs
    from benchmarks.draft_ties import selected_tasks

    args = argparse.Namespace(
        reps=3,
        proposers=["none"],
        policies=["gold"],
        arms=["F+spec"],
        workload=None,
        concurrency=[1],
        n=[10],
    )
    ran = {cell["rep"]: tasks[0] for cell, tasks, _, _ in _runs(args)}
    for rep in (0, 2):
        [task] = selected_tasks([10], [], seed=rep)
        assert task.task == ran[rep].task
    assert selected_tasks([10], [], seed=2)[0].task != ran[0].task  # the seed matters


def _survey_args(**over: Any) -> Any:
    import argparse

    base = {
        "reps": 1,
        "proposers": ["none", "window"],
        "policies": ["gold"],
        "arms": ["F"],
        "workload": None,
        "concurrency": [2],
        "n": [2, 4],
    }
    return argparse.Namespace(**{**base, **over})


def _stored_row(cell: dict[str, Any], arm: str, proposer: str, task_id: str) -> dict[str, Any]:
    return {
        **cell,
        "arm": arm,
        "proposer": proposer,
        "task_id": task_id,
        "wall_s": 1.0,
        "decode_s": 1.0,
        "generated_tokens": 10,
        "drafts": 0,
        "draft_tokens": 0,
        "accepted_tokens": 0,
        "signature": [[], "a", []],
    }


def test_resume_skips_only_the_cells_whose_jobs_are_all_stored() -> None:
    from benchmarks.draft_bench import _runs, pending_runs, stored_jobs

    args = _survey_args()
    runs = list(_runs(args))
    assert len(runs) == 4  # n = 2 and 4, each on none and window
    cell, tasks, arm, proposer = runs[0]
    whole = [_stored_row(cell, arm, proposer, t.id) for t in tasks]
    cell2, tasks2, arm2, proposer2 = runs[1]
    half = [_stored_row(cell2, arm2, proposer2, tasks2[0].id)]  # a cell cut short
    left = list(pending_runs(args, stored_jobs(whole + half)))
    assert [(c["n"], p) for c, _, _, p in left] == [(2, "window"), (4, "none"), (4, "window")]


def test_resume_with_nothing_left_reports_over_the_file_and_needs_no_engine(
    tmp_path: Any, capsys: Any
) -> None:
    import json

    import pytest

    from benchmarks.draft_bench import _runs, main

    argv = ["--arms", "F", "--n", "2", "--concurrency", "1", "--reps", "1"]
    args = _survey_args(n=[2], concurrency=[1])
    rows = [_stored_row(c, a, p, t.id) for c, tasks, a, p in _runs(args) for t in tasks]
    results = tmp_path / "results.jsonl"
    # the last row torn by a kill (no newline): resume ends its line before appending
    results.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    with pytest.raises(SystemExit) as refused:
        main([*argv, "--out", str(tmp_path)])
    assert refused.value.code == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*argv, "--out", str(tmp_path), "--resume"]) == 0
    out = capsys.readouterr().out
    assert "resuming: 2 stored jobs kept, 0 cell runs to go" in out
    assert "Lossless: 1 jobs compared with the none engine's, 0 differ" in out
    assert results.read_text(encoding="utf-8").endswith("\n")
    assert "Command: `python -m benchmarks.draft_bench" in (tmp_path / "report.md").read_text()


def test_draft_ties_meets_the_workload_cells_draft_bench_ran() -> None:
    import argparse

    from benchmarks.draft_bench import _cells, in_cells
    from benchmarks.draft_ties import selected_tasks

    args = argparse.Namespace(workload=["all"], concurrency=[12], n=[])
    ran = [[t.id for t in tasks] for _, _, tasks in _cells(args, 0)]
    met = [[t.id for t in cell] for cell in in_cells(selected_tasks([], ["all"]), 12)]
    assert met == ran
    assert [len(c) for c in ran] == [12, 12, 12, 12]
    assert [len(c) for c in in_cells(selected_tasks([], ["mixed"]), 12)] == [12, 4]
