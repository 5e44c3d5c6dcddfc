"""Drafted decoding for tool-call windows: the engine verifies predictable text in one pass.

Inside a fan-out window the text a model generates is the most predictable text of an agent
loop: the previous call with the next input value substituted, wrapped in the reply format
the harness wrote. Speculative decoding lets the engine check a *draft* of the next tokens
in one forward pass and keep the longest prefix the model itself would have produced; under
greedy decoding the output is the same tokens as without a draft (vLLM verifies every draft
token against the model's own choice), so drafting changes how fast text comes, never what
it says.

This module drafts from what a real deployment has — never from a policy's gold calls:

* **The window's predicted calls.** Before each turn the loop asks the manifest
  (:func:`harness.certify.speculation.draft_calls`): the calls of the skill's fan-out phases whose
  arguments the task inputs (or results already visible) make known and that the transcript
  has not made yet. The engine renders them in its reply format
  (:func:`harness.engines._format.serialize_calls`) — one reply per call and one reply of all
  of them (arm P's single message) — tokenises them and publishes them on a
  :class:`DraftChannel`.
* **The proposer** (:class:`WindowProposer`, loaded by vLLM in its worker process through
  ``speculative_config = {"method": "custom_class", ...}``): at every decoding step it
  matches the last tokens of each request against the published sequences (longest match
  of up to 8 tokens wins) and drafts what follows; without a match it falls back to prompt
  lookup, the continuation of the last 3 tokens earlier in the request's own context (what
  vLLM's n-gram proposer does), which covers a previous call repeated.
* **The reply's opening.** The reply grammar forces how every reply begins: the opening of
  a call of each tool the grammar offers (``{"tool_calls": [{"name": "read_doc",
  "arguments": {"key": `` for the harness's format), or of the answer when only the answer
  remains (``{"answer": "``). :func:`reply_openings` spells them; the engine publishes them
  after the prompt's last tokens, so even a turn's first step drafts (also with no manifest,
  e.g. under ``harness serve``, and for the free-text answer, whose opening prompt lookup
  cannot find).
* **Off under load, when asked.** With ``max_batch`` set
  (:attr:`~harness.engines.vllm.VLLMSettings.draft_max_batch`, carried by
  :data:`MAX_BATCH_ENV`; 0, the default, drafts at any load), it drafts nothing in a step
  where more requests decode: where such a step is compute-bound, verifying their drafts
  can cost more than the tokens it saves.

The channel is a file (the worker is a forked process): the front end rewrites it atomically
with the most recent :data:`MAX_SEQUENCES` sequences and the proposer re-reads it when it
changes. Sequences of concurrent loops share the channel; a match needs the request's own last
tokens, so one loop's drafts rarely fit another's text, and a draft that does not fit costs
one verification, never a wrong token.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = (
    "CHANNEL_ENV",
    "MAX_BATCH_ENV",
    "MAX_SEQUENCES",
    "PROMPT_TAIL",
    "DraftChannel",
    "WindowProposer",
    "reply_openings",
)

#: The environment variable through which the forked worker finds the channel file.
CHANNEL_ENV = "HARNESS_DRAFT_CHANNEL"
#: The environment variable that carries :attr:`VLLMSettings.draft_max_batch` to the worker.
MAX_BATCH_ENV = "HARNESS_DRAFT_MAX_BATCH"
#: How many published sequences the channel keeps (the most recent).
MAX_SEQUENCES = 256
#: The longest suffix of a request matched against a published sequence (tokens).
_MAX_MATCH = 8
#: The suffix prompt lookup matches in the request's own context (tokens).
_LOOKUP = 3
#: How many of the prompt's last tokens (the chat template's assistant header) the engine
#: puts before each published reply, so the reply's first step matches it.
PROMPT_TAIL = 4


def reply_openings(tool_names: Sequence[str], first_keys: Sequence[str | None]) -> list[str]:
    """The text every reply the harness's reply grammar allows begins with: for each offered
    tool (``tool_names``, each with the first argument key its schema orders first, or
    ``None`` when it takes none) the opening of its call up to that key's value, and the
    opening of the final answer when no tool is offered (the grammar then allows only the
    answer). Oldest first: the proposer prefers the newest of equal matches, so the first
    tool is published last. The harness's format
    (:func:`harness.engines._format.serialize_calls`), never a call's values."""
    from harness.engines._format import serialize_answer, serialize_calls
    from harness.messages import ToolCall

    if not tool_names:
        answer = serialize_answer("")
        return [answer[: answer.rindex('"')]]  # {"answer": "
    out = []
    for name, key in zip(tool_names, first_keys, strict=True):
        if key is None:  # no arguments: the whole call is forced
            out.append(serialize_calls([ToolCall("opening", name, "{}")]))
            continue
        full = serialize_calls([ToolCall("opening", name, "\x00")])  # where arguments go
        out.append(full[: full.index("\x00")] + "{" + json.dumps(key, ensure_ascii=False) + ": ")
    return out[::-1]


class DraftChannel:
    """The front end's side: publish token sequences the proposer may draft from."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        if path is None:
            handle, name = tempfile.mkstemp(prefix="harness-drafts-", suffix=".jsonl")
            os.close(handle)
            path = name
        self.path = Path(path)
        self._sequences: list[tuple[int, ...]] = []
        self._lock = threading.Lock()

    def publish(self, sequences: Sequence[Sequence[int]]) -> None:
        """Add ``sequences`` (newest last; a sequence already published moves to the end) and
        rewrite the channel file atomically."""
        fresh = [tuple(int(t) for t in s) for s in sequences if len(s) >= 2]
        if not fresh:
            return
        with self._lock:
            if self._sequences[-len(fresh) :] == list(dict.fromkeys(fresh)):
                return  # the same drafts as the last turn: nothing to rewrite
            kept = [s for s in self._sequences if s not in set(fresh)]
            self._sequences = (kept + list(dict.fromkeys(fresh)))[-MAX_SEQUENCES:]
            text = "".join(json.dumps(list(s)) + "\n" for s in self._sequences)
            partial = self.path.with_suffix(".tmp")
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, self.path)

    def close(self) -> None:
        for path in (self.path, self.path.with_suffix(".tmp")):
            path.unlink(missing_ok=True)


class WindowProposer:
    """vLLM's custom proposer (``method="custom_class"``): drafts from the sequences on the
    channel named by :data:`CHANNEL_ENV`, else by prompt lookup (see the module docstring).
    Runs in vLLM's worker process."""

    def __init__(self, vllm_config: Any) -> None:
        spec = vllm_config.speculative_config
        self.k = int(spec.num_speculative_tokens)
        self.max_model_len = int(vllm_config.model_config.max_model_len)
        self.path = os.environ.get(CHANNEL_ENV)
        self.max_batch = int(os.environ.get(MAX_BATCH_ENV) or 0)
        self._stamp: tuple[int, int, int] | None = None
        self._sequences: list[list[int]] = []
        self._index: dict[tuple[int, int], list[tuple[int, int]]] = {}

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """No model: drafts come from text the harness published."""

    def _refresh(self) -> None:
        if not self.path:
            return
        try:
            stat = os.stat(self.path)
        except OSError:
            return
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            lines = Path(self.path).read_text(encoding="utf-8").splitlines()
            sequences = [list(map(int, json.loads(line))) for line in lines if line]
        except (OSError, ValueError, TypeError):
            return
        index: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for s, tokens in enumerate(reversed(sequences)):  # the newest first
            for pos in range(1, len(tokens) - 1):
                index.setdefault((tokens[pos - 1], tokens[pos]), []).append((s, pos))
        self._sequences = list(reversed(sequences))
        self._index = index

    def _from_sequences(self, context: Sequence[int]) -> list[int]:
        if len(context) < 2:
            return []
        hits = self._index.get((context[-2], context[-1]))
        if not hits:
            return []
        best: tuple[int, int, int] | None = None  # (match length, sequence, position)
        for s, pos in hits[:64]:
            tokens = self._sequences[s]
            length = 2
            while (
                length < _MAX_MATCH
                and pos - length >= 0
                and length < len(context)
                and tokens[pos - length] == context[-1 - length]
            ):
                length += 1
            if best is None or length > best[0]:
                best = (length, s, pos)
                if length == _MAX_MATCH:
                    break
        assert best is not None
        _, s, pos = best
        return self._sequences[s][pos + 1 : pos + 1 + self.k]

    def _from_context(self, row: Any, n: int) -> list[int]:
        if n <= _LOOKUP:
            return []
        import numpy as np

        tokens = row[:n]
        tail = tokens[n - _LOOKUP :]
        span = n - _LOOKUP  # candidate starts 0 .. span-1 (a match must leave a token after)
        hit = np.ones(span, dtype=bool)
        for j in range(_LOOKUP):
            hit &= tokens[j : j + span] == tail[j]
        found = np.flatnonzero(hit)
        if found.size == 0:
            return []
        start = int(found[-1]) + _LOOKUP
        return [int(t) for t in tokens[start : start + self.k]]

    def propose(
        self,
        sampled_token_ids: list[list[int]],
        num_tokens_no_spec: Any,
        token_ids_cpu: Any,
        slot_mappings: Any = None,
        **_: Any,
    ) -> list[list[int]]:
        """One draft per request of the batch (empty where there is none)."""
        if self.max_batch and sum(1 for s in sampled_token_ids if s) > self.max_batch:
            # Under load a step is compute-bound: verifying k drafted tokens per request
            # costs more than the tokens it saves (see VLLMSettings.draft_max_batch).
            return [[] for _ in sampled_token_ids]
        self._refresh()
        drafts: list[list[int]] = []
        for i, sampled in enumerate(sampled_token_ids):
            n = int(num_tokens_no_spec[i])
            room = self.max_model_len - n - 1
            if not sampled or room <= 0:
                drafts.append([])
                continue
            row = token_ids_cpu[i]
            context = [int(t) for t in row[max(0, n - _MAX_MATCH - 1) : n]]
            draft = self._from_sequences(context) or self._from_context(row, n)
            drafts.append(draft[: min(self.k, room)])
        return drafts
