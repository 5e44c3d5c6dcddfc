"""Batched consensus: N samples of one prompt submitted as one batch, and a deterministic vote.

:func:`~harness.engines.batch.sample_batch` is the primitive (re-exported here): it submits
one request per :class:`GenerationSettings` concurrently, in one task group, so a batching
engine (vLLM's continuous batching) runs them as one batch and the wall time is about that of
the longest sample, not the sum (CRP-SPEC-022 §2.3). The fabric's consensus and the loop's P+V
batched resample both use it.

:func:`vote` picks the answer deterministically:

- two samples *agree* when, after normalisation, they are equal: if both parse as JSON, their
  canonical JSON (sorted keys, no whitespace) is compared; otherwise their text, stripped,
  casefolded and with whitespace runs collapsed to one space. A caller may pass its own
  comparator ``same(a, b) -> bool`` instead;
- samples are taken in order of temperature (then index) and each joins the first group whose
  first member it agrees with (so the result does not depend on submission order);
- the largest group wins; **a tie goes to the group holding the lowest-temperature sample**
  (the most conservative draw), and the winner is that group's lowest-temperature sample.

Tool-call completions vote on their calls (names and parsed arguments; call ids ignored).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from harness.engines.base import Engine, GenerationSettings
from harness.engines.batch import sample_batch
from harness.errors import ConfigError
from harness.messages import Completion, Message, ToolSpec

__all__ = (
    "DEFAULT_TEMPERATURES",
    "Comparator",
    "Consensus",
    "Vote",
    "completion_text",
    "consensus",
    "consensus_settings",
    "equivalent",
    "normalise",
    "sample_batch",
    "spread_temperatures",
    "vote",
)

#: The spec's consensus temperatures for N=3 (CRP-SPEC-022 §2.3).
DEFAULT_TEMPERATURES: tuple[float, ...] = (0.3, 0.6, 0.9)

Comparator = Callable[[str, str], bool]


def spread_temperatures(n: int, low: float = 0.3, high: float = 0.9) -> tuple[float, ...]:
    """``n`` temperatures evenly spread over ``[low, high]``; n=3 gives the spec's 0.3/0.6/0.9."""
    if n < 1:
        raise ConfigError(f"A consensus needs at least 1 sample, got {n}.")
    if n == 1:
        return (low,)
    step = (high - low) / (n - 1)
    return tuple(round(low + i * step, 6) for i in range(n))


def normalise(text: str) -> str:
    """Stripped, casefolded, whitespace runs collapsed to one space."""
    return " ".join(text.casefold().split())


def _canonical_json(text: str) -> str | None:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def equivalent(a: str, b: str) -> bool:
    """The default comparator: canonical JSON when both parse, else normalised text."""
    ja, jb = _canonical_json(a), _canonical_json(b)
    if ja is not None and jb is not None:
        return ja == jb
    return normalise(a) == normalise(b)


def completion_text(completion: Completion) -> str:
    """What a completion votes with: its calls as canonical JSON, else its text."""
    if completion.tool_calls:
        calls = []
        for call in completion.tool_calls:
            try:
                arguments = call.parsed_arguments()
            except ValueError:  # bad JSON, or JSON past the parse limits
                arguments = call.arguments
            calls.append({"name": call.name, "arguments": arguments})
        return json.dumps(calls, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return completion.content or ""


@dataclass(frozen=True)
class Vote:
    """The outcome of :func:`vote`. ``groups``: sample indices per agreeing group, in the order
    the groups formed (by their lowest temperature); ``winner``: the chosen sample's index."""

    winner: int
    text: str
    groups: tuple[tuple[int, ...], ...]
    n: int

    @property
    def support(self) -> int:
        """How many samples agree with the winner (itself included)."""
        return next(len(g) for g in self.groups if self.winner in g)

    @property
    def agreement(self) -> float:
        return self.support / self.n

    @property
    def unanimous(self) -> bool:
        return len(self.groups) == 1


def vote(
    samples: Sequence[str | Completion],
    temperatures: Sequence[float] | None = None,
    *,
    same: Comparator | None = None,
) -> Vote:
    """Pick the majority answer; see the module docstring for the rules and the tie-break."""
    if not samples:
        raise ConfigError("vote() needs at least one sample; got none.")
    if temperatures is not None and len(temperatures) != len(samples):
        raise ConfigError(
            f"vote() got {len(samples)} samples but {len(temperatures)} temperatures; "
            "pass one temperature per sample (or none)."
        )
    texts = [s if isinstance(s, str) else completion_text(s) for s in samples]
    agree = same or equivalent
    temps = list(temperatures) if temperatures is not None else [0.0] * len(texts)
    groups: list[list[int]] = []
    for i in sorted(range(len(texts)), key=lambda i: (temps[i], i)):
        for group in groups:
            if agree(texts[group[0]], texts[i]):
                group.append(i)
                break
        else:
            groups.append([i])
    best = max(groups, key=len)  # max keeps the first of equals: the lowest-temperature group
    return Vote(best[0], texts[best[0]], tuple(tuple(g) for g in groups), len(texts))


def consensus_settings(
    base: GenerationSettings, temperatures: Sequence[float] = DEFAULT_TEMPERATURES
) -> list[GenerationSettings]:
    """``base`` once per temperature, with seeds ``base.seed + i`` (0 + i when unset), so a
    consensus is reproducible on engines that honour seeds."""
    seed0 = base.seed if base.seed is not None else 0
    return [replace(base, temperature=t, seed=seed0 + i) for i, t in enumerate(temperatures)]


@dataclass(frozen=True)
class Consensus:
    """N samples, their vote and the winning completion."""

    samples: tuple[Completion, ...]
    temperatures: tuple[float, ...]
    vote: Vote

    @property
    def completion(self) -> Completion:
        return self.samples[self.vote.winner]


async def consensus(
    engine: Engine,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    base: GenerationSettings,
    temperatures: Sequence[float] = DEFAULT_TEMPERATURES,
    *,
    same: Comparator | None = None,
) -> Consensus:
    """Sample once per temperature in one batch and vote (mode 1 of CRP-SPEC-021)."""
    temps = tuple(temperatures)
    samples = await sample_batch(engine, messages, tools, consensus_settings(base, temps))
    return Consensus(tuple(samples), temps, vote(samples, temps, same=same))
