"""The state of one run: the transcript, the call ids, the budgets and the ledger records.

:class:`RunState` is what every arm works on. It owns

* the transcript (``messages``: what the serial arm would see, markers standing in for
  withheld results until their window is revealed) and where each call's result sits in it;
* generation (:meth:`RunState.generate`: one turn, its call ids renumbered run-unique and
  arm-independent, its :class:`~harness.ledger.TurnRecord`);
* the one call-execution seam (:meth:`RunState.execute` through an
  :class:`~harness.calls.Executor`, and :meth:`RunState.record_call` for the outcome);
* the absorb turn: :meth:`RunState.reveal` puts a closed window's results in place of its
  markers and makes the next generation that window's absorb turn;
* the budgets (turns, consecutive model mistakes, identical calls, D2 discards, resamples),
  each ending in :class:`~harness.errors.UsageLimitExceeded` with the number and the fix.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

from harness.calls import Executor, ToolResult
from harness.engines.base import Completion, Engine, GenerationSettings, Message, ToolCall
from harness.errors import UsageLimitExceeded
from harness.ledger import CallRecord, Ledger, TurnRecord, WindowRecord
from harness.loop.config import LoopConfig
from harness.manifest import Skill
from harness.task import Task
from harness.tools import Toolset
from harness.window import Window

__all__ = ("DEFAULT_LOOP_SYSTEM", "Counters", "RunState")

#: The same in every arm, so the prefix (system prompt and tools) is identical across arms;
#: how many calls a reply may carry is the engine's format instruction
#: (``GenerationSettings.parallel_tool_calls``), rendered after the tools.
DEFAULT_LOOP_SYSTEM = (
    "You are a careful assistant that solves the user's task with the tools provided. "
    "When you have everything you need, reply with the final answer."
)


@dataclass
class Counters:
    """What the run summary counts."""

    turns: int = 0
    windows: int = 0
    discards: int = 0
    resamples: int = 0
    model_errors: int = 0
    consecutive_errors: int = 0


class RunState:
    """The state of one run; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        toolset: Toolset,
        executor: Executor,
        task: Task,
        config: LoopConfig,
        skill: Skill | None,
        ledger: Ledger,
        run_id: str | None,
        *,
        detector_name: str,
    ) -> None:
        self.engine = engine
        self.toolset = toolset
        self.executor = executor
        self.task = task
        self.config = config
        self.skill = skill
        self.ledger = ledger
        self.detector_name = detector_name
        self.run_id = run_id or f"{task.id}-{config.arm}-{uuid.uuid4().hex[:8]}"
        self.specs = toolset.specs()
        self.messages: list[Message] = [
            {"role": "system", "content": task.system or DEFAULT_LOOP_SYSTEM},
            {"role": "user", "content": task.prompt},
        ]
        self.results: dict[str, ToolResult] = {}
        self.calls: list[ToolCall] = []
        self.count = Counters()
        self.max_turns = task.max_turns or config.max_turns
        self._ids = itertools.count()
        self._emitted_turn: dict[str, int] = {}  # the turn that emitted each call
        self._result_at: dict[str, int] = {}  # where each call's result sits in messages
        self._absorbing: Window | None = None  # revealed; the next turn is its absorb turn
        self._last_mistake = ""
        self._last_call: tuple[str, str] | None = None
        self._repeats = 0

    @property
    def turn(self) -> int:
        return self.count.turns

    # -- generation -----------------------------------------------------------------------------

    async def generate(
        self, settings: GenerationSettings, *, window_open: bool = False
    ) -> Completion:
        """One generation turn (bounded by the turn budget), renumbered and recorded;
        ``window_open``: results are withheld while it is generated."""
        if self.turn >= self.max_turns:
            raise UsageLimitExceeded(
                f"Task {self.task.id!r} reached its limit of {self.max_turns} turns without a "
                "final answer; raise max_turns or check the prompt.",
                run_id=self.run_id,
                turn=self.turn,
            )
        started = time.monotonic()
        completion = await self.engine.generate(self.messages, self.specs, settings)
        return self.took_turn(completion, "call", started, window_open=window_open)

    def took_turn(
        self, completion: Completion, purpose: str, started: float, *, window_open: bool = False
    ) -> Completion:
        """Account for one generated completion: renumber its calls, record the turn."""
        completion = self._renumber(completion)
        self._record_turn(purpose, completion, started, window_open)
        self.count.turns += 1
        return completion

    def _renumber(self, completion: Completion) -> Completion:
        """Give every call a run-unique, arm-independent id (``call_0``, ``call_1``, ...)."""
        if not completion.tool_calls:
            return completion
        calls = tuple(replace(c, id=f"call_{next(self._ids)}") for c in completion.tool_calls)
        for c in calls:
            self._emitted_turn[c.id] = self.turn
        return replace(completion, tool_calls=calls)

    def _record_turn(
        self, purpose: str, completion: Completion, started: float, window_open: bool
    ) -> None:
        usage, timings = completion.usage, completion.timings
        if self._absorbing is not None and purpose == "call":
            purpose = "absorb"
        self._absorbing = None
        if purpose == "call" and not completion.tool_calls:
            purpose = "answer"
        self.ledger.emit(
            TurnRecord(
                run_id=self.run_id,
                turn=self.turn,
                arm=self.config.arm,
                purpose=purpose,
                n_calls=len(completion.tool_calls),
                prompt_tokens=usage.prompt_tokens,
                cached_tokens=usage.cached_tokens,
                completion_tokens=usage.completion_tokens,
                engine_s=timings.total_s,
                queue_s=timings.queue_s,
                prefill_s=timings.prefill_s,
                decode_s=timings.decode_s,
                wall_s=time.monotonic() - started,
                started=started,
                window_open=window_open,
            )
        )

    # -- the transcript ---------------------------------------------------------------------

    def append_calls(self, completion: Completion, calls: Sequence[ToolCall]) -> None:
        """The assistant message carrying ``calls`` (of ``completion``)."""
        message = completion.to_message()
        message["tool_calls"] = [c.to_openai() for c in calls]
        self.messages.append(message)

    def append_result(self, call: ToolCall, content: str) -> None:
        self._result_at[call.id] = len(self.messages)
        self.messages.append(
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
        )

    def answer(self, completion: Completion) -> None:
        self.messages.append(completion.to_message())

    # -- calls ------------------------------------------------------------------------------

    async def execute(self, call: ToolCall) -> ToolResult:
        """Run one call through the executor (the one execution seam)."""
        return await self.executor.execute(call)

    async def run_serial(self, call: ToolCall) -> None:
        """Run ``call`` on its own, block on it and append its result."""
        result = await self.execute(call)
        self.append_result(call, result.content)
        self.record_call(result, call, "serial", None)

    def record_call(
        self, result: ToolResult, call: ToolCall, mode: str, window: int | None
    ) -> None:
        """A call's outcome: kept, counted against the mistake budget, and recorded."""
        self.results[call.id] = result
        self.calls.append(call)
        if result.is_error:
            self.count.model_errors += 1
            self.count.consecutive_errors += 1
            self._last_mistake = result.content
        else:
            self.count.consecutive_errors = 0
        self.ledger.emit(
            CallRecord(
                run_id=self.run_id,
                call_id=call.id,
                tool=call.name,
                arguments=call.arguments,
                turn=self._emitted_turn.get(call.id, self.turn - 1),
                mode=mode,
                window=window,
                is_error=result.is_error,
                error_kind=result.error_kind,
                started=result.started,
                finished=result.finished,
                result_chars=len(result.content),
            )
        )

    # -- windows ----------------------------------------------------------------------------

    def next_window_index(self) -> int:
        index = self.count.windows
        self.count.windows += 1
        return index

    async def reveal(self, window: Window) -> None:
        """Window closed: wait for its results, put each in place of its marker, record the
        calls and the window; the next generation is the window's absorb turn."""
        results = await window.results()
        index = self.next_window_index()
        for call, result in zip(window.calls, results, strict=True):
            at = self._result_at[call.id]  # a new dict: never mutate a message an engine holds
            self.messages[at] = {**self.messages[at], "content": result.content}
            self.record_call(result, call, window.mode, index)
        self._absorbing = window
        certificate = window.certificate
        self.record_window(
            index,
            window.calls,
            results,
            phase=certificate.phase if certificate else None,
            closed_by=certificate.closed_by if certificate else "closed",
            evidence=certificate.evidence if certificate else (),
            opened_turn=window.opened_turn,
            closed_turn=self.turn,
        )

    def record_window(
        self,
        index: int,
        calls: Sequence[ToolCall],
        results: Sequence[ToolResult],
        *,
        phase: str | None,
        closed_by: str,
        evidence: tuple[str, ...],
        opened_turn: int,
        closed_turn: int,
    ) -> None:
        self.ledger.emit(
            WindowRecord(
                run_id=self.run_id,
                index=index,
                arm=self.config.arm,
                detector=self.detector_name,
                phase=phase,
                n=len(results),
                call_ids=tuple(c.id for c in calls),
                closed_by=closed_by,
                evidence=evidence,
                opened_turn=opened_turn,
                closed_turn=closed_turn,
                tool_wall_s=(
                    max(r.finished for r in results) - min(r.started for r in results)
                    if results
                    else 0.0
                ),
                tool_serial_s=sum(r.duration_s for r in results),
            )
        )

    # -- budgets ----------------------------------------------------------------------------

    def discard(self, call: ToolCall, reason: str) -> None:
        """A call dropped under D2 (see :class:`~harness.certify.Admission`): recorded as a
        ``discard`` turn and counted against ``flatten.max_discards``."""
        self.count.discards += 1
        self.ledger.emit(
            TurnRecord(
                run_id=self.run_id,
                turn=self.turn - 1,
                arm=self.config.arm,
                purpose="discard",
                n_calls=1,
                started=time.monotonic(),
            )
        )
        limit = self.config.flatten.max_discards
        if self.count.discards > limit:
            raise UsageLimitExceeded(
                f"{self.count.discards} calls were discarded under D2 (last: {reason}); the "
                f"budget is {limit}. Declare slot counts in the manifest so windows "
                "close before dependent calls are generated.",
                run_id=self.run_id,
                call_id=call.id,
                tool=call.name,
                turn=self.turn,
            )

    def check_error_budget(self) -> None:
        if self.count.consecutive_errors > self.config.max_model_errors:
            last = self._last_mistake
            raise UsageLimitExceeded(
                f"The model made {self.count.consecutive_errors} mistakes in a row (last: "
                f"{last[:160]}); the budget is {self.config.max_model_errors}. Check the prompt "
                "and tool descriptions, or raise max_model_errors.",
                run_id=self.run_id,
                turn=self.turn,
            )

    def check_stuck(self, completion: Completion) -> None:
        """A model that emits the very same call ``max_identical_calls`` turns in a row is stuck
        in a loop: end the run with a typed error instead of burning the turn budget."""
        if len(completion.tool_calls) != 1:
            self._last_call, self._repeats = None, 0
            return
        call = completion.tool_calls[0]
        key = (call.name, call.arguments)
        self._repeats = self._repeats + 1 if key == self._last_call else 1
        self._last_call = key
        if self._repeats >= self.config.max_identical_calls:
            raise UsageLimitExceeded(
                f"The model emitted the same call {call.name}({call.arguments[:120]}) "
                f"{self._repeats} turns in a row: it is stuck. Improve the prompt or the tool's "
                "result, or raise max_identical_calls.",
                run_id=self.run_id,
                call_id=call.id,
                tool=call.name,
                turn=self.turn,
            )

    def mistake(self, completion: Completion, limit: int) -> None:
        """A reply cut at ``limit`` tokens with no usable call: tell the model, count it."""
        self.count.model_errors += 1
        self.count.consecutive_errors += 1
        self._last_mistake = f"a reply cut off at {limit} tokens with no usable call"
        self.messages.append(completion.to_message())
        self.messages.append(
            {
                "role": "user",
                "content": (
                    f"Your reply was cut off at {limit} tokens. "
                    "Reply with one tool call or a short final answer."
                ),
            }
        )
        self.check_error_budget()

    def resample_budget(self, k: int) -> None:
        """P+V is about to draw ``k`` candidates: they must fit in the turn budget."""
        if self.turn + k > self.max_turns:
            raise UsageLimitExceeded(
                f"Task {self.task.id!r} would pass its limit of {self.max_turns} turns while "
                f"resampling a rejected window ({k} candidates); raise max_turns or lower "
                "max_resamples.",
                run_id=self.run_id,
                turn=self.turn,
            )
