"""How drafted runs are compared with undrafted ones: the signature of what was generated,
where two runs part, and when a parting is a numerical tie (``benchmarks.draft_bench``,
``benchmarks.draft_ties``)."""

from __future__ import annotations

from typing import Any

from benchmarks.draft_bench import _signature, first_difference
from benchmarks.draft_ties import classify, parting
from harness.engines.base import token_digest


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
    assert classify(0.05, 0.1) == "tie"
    assert classify(0.5, 0.1) == "suspect"
    assert classify(None, 0.1) == "suspect"  # a candidate outside the scored top 20
