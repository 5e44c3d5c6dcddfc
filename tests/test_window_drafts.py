"""The window proposer drafts from published sequences, else from the request's own context;
drafts come from the manifest and the inputs, never from the gold calls."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from harness.engines._format import serialize_answer, serialize_calls
from harness.engines.window_drafts import (
    CHANNEL_ENV,
    MAX_BATCH_ENV,
    DraftChannel,
    WindowProposer,
    reply_openings,
)
from harness.messages import ToolCall

# vLLM hands the proposer numpy arrays (numpy comes with the cpu/gpu extras).
np = pytest.importorskip("numpy", reason="the window proposer reads numpy arrays (cpu extra)")


def _proposer(
    monkeypatch: pytest.MonkeyPatch, channel: DraftChannel, k: int = 4, max_batch: int = 0
) -> WindowProposer:
    monkeypatch.setenv(CHANNEL_ENV, str(channel.path))
    monkeypatch.setenv(MAX_BATCH_ENV, str(max_batch))
    config = SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=k),
        model_config=SimpleNamespace(max_model_len=64),
    )
    return WindowProposer(config)


def _batch(*rows: list[int]) -> tuple[Any, Any]:
    table = np.zeros((len(rows), 64), dtype=np.int32)
    for i, row in enumerate(rows):
        table[i, : len(row)] = row
    return np.array([len(r) for r in rows]), table


def test_a_published_sequence_drafts_what_follows_the_requests_last_tokens(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = DraftChannel(tmp_path / "drafts.jsonl")
    channel.publish([[1, 2, 3, 4, 5, 6, 7, 8]])
    proposer = _proposer(monkeypatch, channel)
    lengths, table = _batch([9, 9, 2, 3], [7, 8, 9, 1, 7, 8, 9])
    drafts = proposer.propose([[3], [9]], lengths, table)
    assert drafts[0] == [4, 5, 6, 7]
    assert drafts[1] == [1, 7, 8, 9]  # no published match: prompt lookup in its own context


def test_the_longest_match_wins_and_new_sequences_are_read(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = DraftChannel(tmp_path / "drafts.jsonl")
    channel.publish([[5, 2, 3, 40, 41], [7, 1, 2, 3, 50, 51]])
    proposer = _proposer(monkeypatch, channel, k=2)
    lengths, table = _batch([1, 2, 3])
    assert proposer.propose([[3]], lengths, table) == [[50, 51]]
    channel.publish([[0, 1, 2, 3, 60, 61]])  # the newest of two equal matches wins
    assert proposer.propose([[3]], lengths, table) == [[60, 61]]
    channel.close()
    assert not channel.path.exists()


def test_reply_openings_are_what_every_reply_of_the_grammar_begins_with() -> None:
    read, listing = reply_openings(["list_docs", "read_doc"], [None, "key"])
    for value in ('{"key": "d1"}', '{"key": 7}'):
        assert serialize_calls([ToolCall("c", "read_doc", value)]).startswith(read)
    assert read.endswith('"arguments": {"key": ')  # up to the first value, never a value
    assert listing == serialize_calls([ToolCall("c", "list_docs", "{}")])  # all forced
    # The proposer prefers the newest of equal matches: the first tool is published last.
    assert reply_openings(["a", "b"], ["x", "y"])[-1].startswith('{"tool_calls": [{"name": "a"')
    (answer,) = reply_openings([], [])  # no tool offered: only the answer remains
    for text in ("", "d1", 'say "hi"'):
        assert serialize_answer(text).startswith(answer)
    assert answer == '{"answer": "'


def test_an_opening_published_after_the_prompt_tail_drafts_a_replys_first_step(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = DraftChannel(tmp_path / "drafts.jsonl")
    tail = [90, 91, 92, 93]  # the prompt's last tokens (the assistant header)
    channel.publish([[*tail, 10, 11, 12, 13, 14]])
    proposer = _proposer(monkeypatch, channel)
    # A fresh reply: the request's tokens are only its prompt, ending in the tail; the
    # header seen earlier in the context is followed by other text, which loses to it.
    lengths, table = _batch([5, 90, 91, 92, 93, 40, 41, 42, 90, 91, 92, 93])
    assert proposer.propose([[93]], lengths, table) == [[10, 11, 12, 13]]


def test_a_request_that_sampled_nothing_gets_no_draft(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = DraftChannel(tmp_path / "drafts.jsonl")
    proposer = _proposer(monkeypatch, channel)
    lengths, table = _batch([1, 2, 3, 1, 2, 3])
    assert proposer.propose([[]], lengths, table) == [[]]


def test_under_load_the_proposer_drafts_nothing(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = DraftChannel(tmp_path / "drafts.jsonl")
    channel.publish([[1, 2, 3, 4, 5, 6, 7, 8]])
    proposer = _proposer(monkeypatch, channel, max_batch=2)
    two = _batch([9, 2, 3], [9, 9, 2, 3])
    assert proposer.propose([[3], [3]], *two) == [[4, 5, 6, 7], [4, 5, 6, 7]]
    # A request still prefilling (it sampled nothing) is not decoding: two decode, as above.
    three = _batch([9, 2, 3], [9, 9, 2, 3], [1, 2])
    assert proposer.propose([[3], [3], []], *three) == [[4, 5, 6, 7], [4, 5, 6, 7], []]
    # Three decode: more than max_batch, so no request gets a draft.
    assert proposer.propose([[3], [3], [2]], *three) == [[], [], []]


def test_each_proposer_has_its_speculative_config_and_a_missing_extra_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from harness.engines.vllm import VLLMSettings, speculative_config
    from harness.errors import ConfigError

    assert speculative_config("none") is None
    assert speculative_config("ngram", 4) == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 4,
    }
    window = speculative_config("window")
    assert window is not None
    assert window["model"] == "harness.engines.window_drafts.WindowProposer"
    with pytest.raises(ConfigError, match="1-16"):
        speculative_config("ngram", 0)
    with pytest.raises(ConfigError, match="draft_max_batch"):
        VLLMSettings(drafting="window", draft_max_batch=-1).engine_args("m")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "arctic_inference" else real(name, *a),
    )
    with pytest.raises(ConfigError, match="make suffix") as caught:
        speculative_config("suffix")
    assert "\n" not in str(caught.value)
