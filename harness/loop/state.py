"""The state of one run: the transcript, the call ids, the budgets and the ledger records.

:class:`RunState` is what every arm works on. It owns

* the transcript (:class:`~harness.loop.transcript.Transcript`: what the serial arm would
  see, markers standing in for withheld results until their window is revealed);
* generation (:meth:`RunState.generate`: one turn, its call ids renumbered run-unique and
  arm-independent, its :class:`~harness.loop.ledger.TurnRecord`; with a journal, a journaled turn is
  replayed instead of generated, a fresh one journaled — :mod:`harness.journal.turns`);
* the one call-execution seam (:meth:`RunState.execute` through an
  :class:`~harness.tools.execute.Executor`, and :meth:`RunState.record_call` for the outcome);
* the absorb turn: :meth:`RunState.reveal` puts a closed window's results in place of its
  markers and makes the next generation that window's absorb turn;
* the budgets and counters (:class:`~harness.loop.budgets.Budgets`);
* the ledger records of turns, calls and windows, built by keyword.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace

from harness.certify.speculation import SpecStats, draft_calls
from harness.certify.window import Window
from harness.engines.base import Engine, GenerationSettings, drafts_calls, guarded_generate
from harness.engines.batch import sample_batch
from harness.errors import UsageLimitExceeded
from harness.journal.turns import JournaledTurns
from harness.loop.budgets import Budgets, Counters
from harness.loop.config import LoopConfig
from harness.loop.ledger import CallMode, CallRecord, Ledger, Purpose, TurnRecord, WindowRecord
from harness.loop.levers import (
    input_enum_specs,
    open_slot_count,
    open_slot_specs,
    skill_specs,
)
from harness.loop.policy import POLICIES, PolicyStrategy
from harness.loop.task import Task
from harness.loop.transcript import Transcript
from harness.messages import Completion, Message, ToolCall
from harness.skills.manifest import Skill
from harness.tools.execute import Executor, ToolResult, ToolsetExecutor
from harness.tools.toolset import Toolset

__all__ = ("DEFAULT_LOOP_SYSTEM", "RunState")

#: The same in every arm, so the prefix (system prompt and tools) is identical across arms;
#: how many calls a reply may carry is the engine's format instruction
#: (``GenerationSettings.parallel_tool_calls``), rendered after the tools.
DEFAULT_LOOP_SYSTEM = (
    "You are a careful assistant that solves the user's task with the tools provided. "
    "When you have everything you need, reply with the final answer."
)


class RunState:
    """The state of one run; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        toolset: Toolset,
        task: Task,
        config: LoopConfig,
        *,
        executor: Executor | None = None,
        skill: Skill | None = None,
        ledger: Ledger | None = None,
        run_id: str | None = None,
        detector_name: str | None = None,
        policy: PolicyStrategy | None = None,
        turns: JournaledTurns | None = None,
    ) -> None:
        """What a run needs is the engine, the toolset, the task and the config; the rest
        says how :func:`~harness.loop.driver.run_loop` wired it (defaults: calls in process
        against ``toolset``, no skill, a fresh ledger, a generated run id, the config's
        detector and policy, no journal)."""
        self.engine = engine
        self.toolset = toolset
        self.executor = executor or ToolsetExecutor(toolset)
        self.task = task
        self.config = config
        self.skill = skill
        self.ledger = ledger or Ledger()
        self.detector_name = detector_name or config.detector
        self.policy = policy or POLICIES[config.policy](config)
        self.journaled_turns = turns
        self.run_id = run_id or f"{task.id}-{config.arm}-{uuid.uuid4().hex[:8]}"
        self.specs = toolset.specs()
        if config.skill_tools and skill is not None:
            self.specs = skill_specs(self.specs, skill)
        if (config.input_enums or config.open_slots) and skill is not None:
            self.specs = input_enum_specs(self.specs, skill, task.inputs)
        system = DEFAULT_LOOP_SYSTEM if task.system is None else task.system
        self.transcript = Transcript(system, task.prompt, task.history)
        self.budgets = Budgets(config, task.id, self.run_id, task.max_turns or config.max_turns)
        self.results: dict[str, ToolResult] = {}
        self.calls: list[ToolCall] = []
        self._ids = itertools.count()
        self._emitted_turn: dict[str, int] = {}  # the turn that emitted each call
        self._absorbing: Window | None = None  # revealed; the next turn is its absorb turn
        #: What an arm adds to the run summary's ``extra`` (F+spec: ``speculation``).
        self.extra: dict[str, object] = {}

    @property
    def messages(self) -> list[Message]:
        return self.transcript.messages

    @property
    def count(self) -> Counters:
        return self.budgets.count

    @property
    def turn(self) -> int:
        return self.count.turns

    # -- generation -----------------------------------------------------------------------------

    def steer(self, base: GenerationSettings, *, step: int | None) -> GenerationSettings:
        """``base`` steered by the run's policy (see :mod:`harness.loop.policy`)."""
        return self.policy.steer(self.task, self.transcript, base, step=step)

    async def generate(
        self, settings: GenerationSettings, *, window_open: bool = False
    ) -> Completion:
        """One generation turn (bounded by the turn budget), renumbered and recorded;
        ``window_open``: results are withheld while it is generated."""
        self.budgets.check_turns()
        started = time.monotonic()
        completion = await self.complete(self.turn, settings, "call")
        return self.took_turn(completion, "call", started, window_open=window_open)

    async def complete(
        self, turn: int, settings: GenerationSettings, purpose: Purpose
    ) -> Completion:
        """The completion of ``turn``: replayed from the journal, or generated (at the engine
        boundary: any engine failure is a typed error) and journaled."""
        settings = self.narrowed(settings)
        journaled = self.journaled_turns
        if journaled is not None:
            replayed = journaled.replay(turn, self.messages, self.specs, settings)
            if replayed is not None:
                return replayed
        completion = await guarded_generate(
            self.engine,
            self.messages,
            self.specs,
            self.drafted(settings),
            run_id=self.run_id,
            turn=turn,
        )
        if journaled is not None:
            journaled.record(turn, purpose, self.messages, self.specs, settings, completion)
        return completion

    def drafted(self, settings: GenerationSettings) -> GenerationSettings:
        """``settings`` with the calls this turn may emit as drafts, for an engine with
        drafted decoding (:func:`~harness.engines.base.drafts_calls`): predicted from the
        manifest, the task inputs and the visible results, never from the policy's gold calls
        (:func:`harness.certify.speculation.draft_calls`). The tokens generated do not change;
        the journal records the settings without them."""
        if self.skill is None or not drafts_calls(self.engine):
            return settings
        marker = self.config.marker
        messages = self.messages
        visible = [
            str(m.get("content", ""))
            for m in messages
            if m.get("role") == "tool" and str(m.get("content", "")) != marker
        ]
        made = [ToolCall.from_openai(c) for m in messages for c in m.get("tool_calls") or ()]
        drafts = draft_calls(
            self.skill.phases,
            self.toolset,
            self.task.inputs,
            visible,
            made,
            max_window=self.config.max_window,
        )
        return replace(settings, draft_calls=drafts) if drafts else settings

    def narrowed(self, settings: GenerationSettings) -> GenerationSettings:
        """``settings`` with the reply grammar narrowed to the open slots (``open_slots``;
        forced replies are left alone) and a parallel message capped at their count."""
        if not self.config.open_slots or self.skill is None or settings.forced is not None:
            return settings
        emitted = self.transcript.emitted_calls()
        grammar = open_slot_specs(self.specs, emitted)
        if grammar is not None:
            settings = replace(settings, grammar_tools=tuple(grammar))
        if settings.max_parallel_calls is not None:  # a parallel message: at most the open slots
            slots = open_slot_count(self.specs, emitted)
            if slots is not None and 0 < slots < settings.max_parallel_calls:
                settings = replace(settings, max_parallel_calls=slots)
        return settings

    async def sample(self, settings_list: Sequence[GenerationSettings]) -> list[Completion]:
        """The completions of the next ``len(settings_list)`` turns, drawn as one batch (P+V's
        batched resample); journaled ones are replayed, the others generated together."""
        out: list[Completion | None] = [None] * len(settings_list)
        if self.journaled_turns is not None:
            for i, settings in enumerate(settings_list):
                out[i] = self.journaled_turns.replay(
                    self.turn + i, self.messages, self.specs, settings
                )
        missing = [i for i, c in enumerate(out) if c is None]
        fresh = await sample_batch(
            self.engine,
            self.messages,
            self.specs,
            [self.narrowed(settings_list[i]) for i in missing],
        )
        for i, completion in zip(missing, fresh, strict=True):
            out[i] = completion
            if self.journaled_turns is not None:
                self.journaled_turns.record(
                    self.turn + i, "resample", self.messages, self.specs, settings_list[i],
                    completion,
                )  # fmt: skip
        return [c for c in out if c is not None]

    def took_turn(
        self, completion: Completion, purpose: Purpose, started: float, *, window_open: bool = False
    ) -> Completion:
        """Account for one generated completion: renumber its calls, record the turn."""
        completion = self._renumber(completion)
        self._record_turn(purpose, completion, started, window_open)
        self.count.turns += 1
        self.budgets.spent(completion.usage.billed_tokens)
        return completion

    def _renumber(self, completion: Completion) -> Completion:
        """Give every call a run-unique, arm-independent id (``call_0``, ``call_1``, ...), or
        with ``config.call_ids == "engine"`` keep the engine's own id unless it is empty or
        already taken (a proxy: the transcript is its client's)."""
        if not completion.tool_calls:
            return completion
        keep = self.config.call_ids == "engine"
        calls = []
        for c in completion.tool_calls:
            if not (
                keep
                and c.id
                and c.id not in self._emitted_turn
                and c.id not in self.transcript.taken_ids
            ):
                c = replace(c, id=self._next_id())
            self._emitted_turn[c.id] = self.turn
            calls.append(c)
        return replace(completion, tool_calls=tuple(calls))

    def emitted_turn(self, call_id: str) -> int | None:
        """The turn that emitted ``call_id`` (None for a call the model did not emit)."""
        return self._emitted_turn.get(call_id)

    def _next_id(self) -> str:
        while True:  # skip the ids a continued history already uses
            call_id = f"call_{next(self._ids)}"
            if call_id not in self.transcript.taken_ids:
                return call_id

    def _record_turn(
        self, purpose: Purpose, completion: Completion, started: float, window_open: bool
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
                token_digest=completion.token_digest,
            )
        )

    # -- calls ------------------------------------------------------------------------------

    async def execute(self, call: ToolCall) -> ToolResult:
        """Run one call through the executor (the one execution seam)."""
        return await self.executor.execute(call)

    async def run_serial(self, call: ToolCall) -> None:
        """Run ``call`` on its own, block on it and append its result."""
        result = await self.execute(call)
        self.transcript.append_result(call, result.content)
        self.record_call(result, call, "serial", None)

    def record_call(
        self, result: ToolResult, call: ToolCall, mode: CallMode, window: int | None
    ) -> None:
        """A call's outcome: kept, counted against the mistake budget, and recorded."""
        self.results[call.id] = result
        self.calls.append(call)
        self.budgets.outcome(result.is_error, result.content, result.error_kind, call.name)
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
                outcome_known=result.outcome_known,
            )
        )

    # -- windows ----------------------------------------------------------------------------

    def next_window_index(self) -> int:
        index = self.count.windows
        self.count.windows += 1
        return index

    def reach(self, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> int:
        """How many of a window's ``calls`` the serial arm is sure to reach given the results
        of the first ``len(results)`` (:meth:`~harness.loop.budgets.Budgets.reach`); all of
        them when the executor's results are never errors (``results_never_fail``: the
        proxy's client), since then no budget can stop the run inside a window."""
        if getattr(self.executor, "results_never_fail", False):
            return len(calls)
        return self.budgets.reach([self._turn_of(c) for c in calls], results)

    def _turn_of(self, call: ToolCall) -> int:
        return self._emitted_turn.get(call.id, self.turn - 1)

    async def reveal(self, window: Window) -> None:
        """Window closed: wait for its results, put each in place of its marker, record the
        calls and the window; the next generation is the window's absorb turn.

        The budgets are checked where the serial arm checks them, after each reply: after a
        call whose successor in the window came from a later turn, and after the last call
        when its turn is over (the window was closed by a later turn). So the run stops at the
        very call S stops at (:class:`~harness.errors.UsageLimitExceeded`), and the calls after
        it, which the window never ran (:meth:`reach`), are not recorded."""
        results = await window.results()
        index = self.next_window_index()
        calls = window.calls
        turns = [self._turn_of(c) for c in calls]
        stop: UsageLimitExceeded | None = None
        done = 0
        for j, (call, result) in enumerate(zip(calls, results, strict=False)):
            self.transcript.fill(call, result.content)
            self.record_call(result, call, window.mode_of(call.id), index)
            done = j + 1
            last_of_turn = (
                turns[j + 1] != turns[j] if done < len(calls) else turns[j] < self.turn - 1
            )
            if last_of_turn:
                try:
                    self.budgets.check_errors()
                except UsageLimitExceeded as exc:
                    stop = exc
                    break
        if stop is None and done < len(calls):  # reach() stopped where no check stops S
            raise RuntimeError(
                f"Window {index} ran {done} of its {len(calls)} calls but the budgets allow more."
            )
        certificate = window.certificate
        if stop is None:
            self._absorbing = window
        self.record_window(
            index,
            calls[:done],
            results[:done],
            phase=certificate.phase if certificate else None,
            closed_by=certificate.closed_by if certificate else "closed",
            evidence=certificate.evidence if certificate else (),
            opened_turn=window.opened_turn,
            closed_turn=self.turn,
            speculation=window.speculation,
        )
        if stop is not None:
            raise stop

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
        speculation: SpecStats | None = None,
    ) -> None:
        self.ledger.emit(
            WindowRecord(
                run_id=self.run_id,
                index=index,
                arm=self.config.arm,
                detector=self.detector_name,
                phase=phase,
                n=len(calls),
                call_ids=tuple(c.id for c in calls),
                tools=tuple(c.name for c in calls),
                arguments=tuple(c.arguments for c in calls),
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
                spec_predicted=speculation.predicted if speculation else None,
                spec_hits=speculation.hits if speculation else None,
                spec_misses=speculation.misses if speculation else None,
                spec_cancelled=speculation.cancelled if speculation else None,
                spec_wasted_s=speculation.wasted_s if speculation else None,
            )
        )

    # -- budgets that record ------------------------------------------------------------

    def discard(self, call: ToolCall, reason: str) -> None:
        """A call dropped under D2 (see :class:`~harness.certify.Admission`): recorded as a
        ``discard`` turn and counted against ``flatten.max_discards``."""
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
        self.budgets.discarded(call, reason)

    def cut_off(self, completion: Completion, limit: int) -> None:
        """A reply cut at ``limit`` tokens with no usable call: tell the model, count it."""
        self.transcript.append_cut_off(completion, limit)
        self.budgets.cut_off(limit)
