"""Test doubles and helpers for users' own test suites.

:class:`ScriptedEngine` is an :class:`~harness.engines.base.Engine` that replays a plain
function ``(messages, tools) -> reply`` instead of running a model (cf. ``httpx.MockTransport``
and pydantic-ai's ``FunctionModel``). It is a *test double*: every user-facing command runs on
the real engine. A reply may be a final-answer string, a :class:`ToolCall`, a list of them,
a ``{"name": ..., "arguments": {...}}`` dict (or a list of such dicts), or a full
:class:`Completion`.

When the loop forces the gold call (``settings.forced``), the scripted engine returns exactly
that, as the real engine's constrained decoding would, so a gold-policy run needs no script.

It also imitates what the ledger measures on a real engine: token counts (one token per
whitespace-separated word of the rendered chat), a prefix cache (``cached_tokens`` is the
longest prefix shared with an earlier prompt), and, if asked, simulated time
(``prefill_ms_per_token``, ``decode_ms_per_token``, ``overhead_ms``) spent in ``anyio.sleep``
and reported as timings.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from harness.certkit import DEFAULT_EXAMPLES, CertificationReport, check_toolset
from harness.engines.base import ClosingContext, GenerationSettings
from harness.errors import EngineDeadError, ReplayDivergence
from harness.messages import Completion, Message, Timings, ToolCall, ToolSpec, Usage

__all__ = (
    "Reply",
    "ScriptedEngine",
    "ScriptedRequest",
    "cached_prefix",
    "certify_toolset",
    "fabric_demo_engine",
)

Reply = str | ToolCall | Mapping[str, Any] | Sequence[ToolCall | Mapping[str, Any]] | Completion
ScriptFn = Callable[[Sequence[Message], Sequence[ToolSpec]], Reply]


@dataclass
class ScriptedRequest:
    """One request the scripted engine received, for assertions in tests."""

    messages: list[Message]
    tools: list[ToolSpec]
    settings: GenerationSettings
    started: float
    finished: float = 0.0
    completion: Completion | None = None


def _tokens(text: str) -> list[str]:
    return text.split()


def cached_prefix(seen: Sequence[Sequence[str]], tokens: Sequence[str]) -> int:
    """How many leading ``tokens`` an exact-match prefix cache holding the ``seen`` prompts
    would serve: the longest common prefix with any of them."""
    best = 0
    for earlier in seen:
        n = 0
        for a, b in zip(earlier, tokens, strict=False):
            if a != b:
                break
            n += 1
        best = max(best, n)
    return best


def render_for_tokens(messages: Sequence[Message]) -> str:
    """The text the scripted engine counts tokens over (stable, order-preserving)."""
    return " ".join(json.dumps(m, sort_keys=True, ensure_ascii=False) for m in messages)


@dataclass
class ScriptedEngine(ClosingContext):
    """An engine that replays ``script`` (see the module docstring)."""

    script: ScriptFn | None = None
    prefill_ms_per_token: float = 0.0
    decode_ms_per_token: float = 0.0
    overhead_ms: float = 0.0
    name: str = "scripted"
    requests: list[ScriptedRequest] = field(default_factory=list)
    _seen: list[list[str]] = field(default_factory=list, repr=False)
    _ids: itertools.count[int] = field(default_factory=itertools.count, repr=False)
    _closed: bool = False
    _in_flight: int = 0
    max_in_flight: int = 0

    async def aclose(self) -> None:
        self._closed = True

    async def reset_prefix_cache(self) -> bool:
        """Forget every prompt seen (as the vLLM engine's method does), for measurements."""
        self._seen.clear()
        return True

    def _cached(self, tokens: list[str]) -> int:
        return cached_prefix(self._seen, tokens)

    def _reply(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> Reply:
        if settings.forced is not None:
            if settings.forced:
                return list(settings.forced)
            return settings.forced_answer or ""
        if self.script is None:
            raise ReplayDivergence(
                "ScriptedEngine has no script and the request forces no gold call; "
                "pass script=... or run the gold policy."
            )
        return self.script(messages, tools)

    def _to_completion(self, reply: Reply) -> Completion:
        if isinstance(reply, Completion):
            return reply
        if isinstance(reply, str):
            return Completion(content=reply, finish_reason="stop")
        items: Sequence[ToolCall | Mapping[str, Any]]
        items = [reply] if isinstance(reply, ToolCall | Mapping) else reply
        calls = []
        for item in items:
            if isinstance(item, ToolCall):
                calls.append(item)
                continue
            arguments = item.get("arguments", {})
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
            call_id = str(item.get("id") or f"call_{next(self._ids)}")
            calls.append(ToolCall(id=call_id, name=str(item["name"]), arguments=raw))
        return Completion(content=None, tool_calls=tuple(calls), finish_reason="tool_calls")

    async def generate(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> Completion:
        if self._closed:
            raise EngineDeadError("ScriptedEngine is closed; open a new one.")
        request = ScriptedRequest(
            copy.deepcopy(list(messages)), list(tools), settings, time.monotonic()
        )
        self.requests.append(request)
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            completion = self._to_completion(self._reply(messages, tools, settings))
            prompt = _tokens(render_for_tokens(messages))
            cached = self._cached(prompt)
            self._seen.append(prompt)
            out_text = completion.content or " ".join(
                f"{c.name} {c.arguments}" for c in completion.tool_calls
            )
            generated = max(1, len(_tokens(out_text)))
            prefill_s = (len(prompt) - cached) * self.prefill_ms_per_token / 1000
            # as vLLM measures it: the first token comes with the prefill, decode is the rest
            decode_s = (generated - 1) * self.decode_ms_per_token / 1000
            total = self.overhead_ms / 1000 + prefill_s + decode_s
            if total > 0:
                await anyio.sleep(total)
            else:  # yield once, as a real engine would: requests submitted together overlap
                await anyio.lowlevel.checkpoint()
            completion = Completion(
                content=completion.content,
                tool_calls=completion.tool_calls,
                usage=Usage(len(prompt), cached, generated),
                timings=Timings(total_s=total, prefill_s=prefill_s, decode_s=decode_s),
                finish_reason=completion.finish_reason,
            )
            request.completion = completion
            return completion
        finally:
            self._in_flight -= 1
            request.finished = time.monotonic()

    @property
    def batches(self) -> list[list[ScriptedRequest]]:
        """The requests grouped as a batching engine would have seen them: in arrival order, a
        request joins the current batch if it arrived before any request of that batch had
        finished (all were in flight together), else it opens the next batch."""
        out: list[list[ScriptedRequest]] = []
        first_finish = -math.inf
        for request in sorted(self.requests, key=lambda r: r.started):
            finish = request.finished or math.inf
            if out and request.started < first_finish:
                out[-1].append(request)
                first_finish = min(first_finish, finish)
            else:
                out.append([request])
                first_finish = finish
        return out

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> AsyncGenerator[str | Completion, None]:
        """The streaming extension (:class:`~harness.engines.base.StreamingEngine`): the reply text
        one line at a time, each after its share of the simulated decode time (at least a
        checkpoint), then the whole :class:`Completion` last. Recorded in ``requests`` like
        :meth:`generate`; the request finishes after its last line."""
        if self._closed:
            raise EngineDeadError("ScriptedEngine is closed; open a new one.")
        request = ScriptedRequest(
            copy.deepcopy(list(messages)), list(tools), settings, time.monotonic()
        )
        self.requests.append(request)
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            reply = self._to_completion(self._reply(messages, tools, settings))
            text = reply.content or ""
            prompt = _tokens(render_for_tokens(messages))
            cached = self._cached(prompt)
            self._seen.append(prompt)
            prefill_s = (len(prompt) - cached) * self.prefill_ms_per_token / 1000
            await anyio.sleep(self.overhead_ms / 1000 + prefill_s)
            for line in text.splitlines(keepends=True):
                await anyio.sleep(len(_tokens(line)) * self.decode_ms_per_token / 1000)
                yield line
            generated = max(1, len(_tokens(text)))
            decode_s = generated * self.decode_ms_per_token / 1000
            request.completion = Completion(
                content=reply.content,
                tool_calls=reply.tool_calls,
                finish_reason=reply.finish_reason,
                usage=Usage(len(prompt), cached, generated),
                timings=Timings(
                    total_s=self.overhead_ms / 1000 + prefill_s + decode_s,
                    prefill_s=prefill_s,
                    decode_s=decode_s,
                ),
            )
            yield request.completion
        finally:
            self._in_flight -= 1
            request.finished = time.monotonic()


def certify_toolset(
    toolset_factory: Any,
    *,
    manifest: Any = None,
    examples: int = DEFAULT_EXAMPLES,
    seed: int = 0,
    deadline: float | None = None,
    database: Any = None,
    max_window: int = 5,
) -> CertificationReport:
    """The certification kit as one pytest assertion: check every effect claim of a toolset
    (:func:`harness.certkit.check_toolset`) and raise :class:`AssertionError` with the report
    when any claim is false; otherwise return the report (unverified claims do not fail)::

        def test_my_tools_annotations_are_true():
            certify_toolset(my_package.tools, manifest="manifests/my.toml")

    ``toolset_factory``: a :class:`~harness.certkit.CertifiableToolset`, a module with
    ``new_state``/``make_toolset``/``fingerprint``, a zero-argument factory of either, or a
    bare :class:`~harness.tools.Toolset`. ``examples``, ``seed``, ``deadline`` (seconds),
    ``database`` (a hypothesis example database) and ``max_window`` are hypothesis settings.
    Call it from a plain ``def`` test: it runs its own event loops.
    """
    report = check_toolset(
        toolset_factory,
        manifest=manifest,
        examples=examples,
        seed=seed,
        deadline=deadline,
        database=database,
        max_window=max_window,
    )
    if not report.ok:
        raise AssertionError(report.render())
    return report


# -- the fabric's demo engine -------------------------------------------------------------------


def _fabric_demo_script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    from harness.fabric import COMPOSER_SYSTEM, PLANNER_SYSTEM, llm_node, plan_to_text

    system = str(messages[0].get("content", "")) if messages else ""
    user = str(messages[-1].get("content", "")) if messages else ""
    if system == PLANNER_SYSTEM:
        task = user.removeprefix("Task: ")
        return plan_to_text(
            [
                llm_node("T1", f"Find the facts needed for: {task}"),
                llm_node("T2", f"List the constraints of: {task}", criticality="trivial"),
                llm_node("T3", "Draft the answer from the facts and constraints.", ["T1", "T2"]),
                llm_node(
                    "T4",
                    "Check the draft against the constraints.",
                    ["T3"],
                    criticality="moderate",
                    high_stakes=True,
                ),
            ]
        )
    if system == COMPOSER_SYSTEM:
        steps = user.count("\n[")
        return f"Final answer composed from {steps} step outputs."
    step = user.split("\n", 1)[0].rstrip(".")
    return f"Done: {step.lower()}."


def fabric_demo_engine(
    *, overhead_ms: float = 40.0, decode_ms_per_token: float = 1.0
) -> ScriptedEngine:
    """A scripted engine for trying the execution fabric without a model
    (``harness fabric ... --engine scripted-demo``): the planner gets a 4-step plan (two
    independent steps, a draft, a high-stakes check), every step a one-line answer, the
    composer a summary line. Every request costs ``overhead_ms`` plus its simulated decode
    time, and concurrent requests overlap like an ideal batching engine; it streams."""
    return ScriptedEngine(
        script=_fabric_demo_script,
        overhead_ms=overhead_ms,
        decode_ms_per_token=decode_ms_per_token,
        name="scripted-demo",
    )
