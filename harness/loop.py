"""The ReAct loop runner: one loop, four arms.

``S``   serial: one call per turn; block on its result; append it; generate again.
``F``   harness-flattened: the same prompting and the same generation calls as S. Calls the
        certifier admits into a fan-out window are *withheld* (a constant marker stands in for
        each result), run concurrently (at window close, or from the moment they are emitted
        with ``eager=True``), and the whole window — every call and result, verbatim, in
        emitted order — enters the context at the absorb turn.
``P``   native parallel: the model is asked to emit all independent calls of a step in one
        message; certified messages run concurrently, others in emitted order.
``P+V`` P plus the deterministic validator (:mod:`harness.validator`); a rejected window is
        resampled, as one batch of ``repair_k`` candidates (batched repair) or one by one.

Policies: ``model`` lets the model choose its calls; ``gold`` forces the task's gold calls
through the engine's constrained decoding (every token still prefilled and decoded), so S and
F generate identical tokens and the dividend is measured at fixed accuracy.

Model mistakes (unknown tool, bad JSON, schema failures, tool errors, a reply cut at
``max_tokens``) are shown to the model as error results and bounded by ``max_model_errors``
consecutive mistakes, then :class:`~harness.errors.UsageLimitExceeded`. Every call id gets
exactly one result; cancelling the run cancels every tool still running, and the run is
recorded as not finished (``error`` says it was cancelled).

Budgets per run: ``max_turns``, ``max_wall_s`` (a wall-clock deadline) and
``max_billed_tokens``; each ends in :class:`~harness.errors.UsageLimitExceeded` saying what to
change.

Durable runs: with ``journal=`` (:class:`harness.journal.Journal`) every turn and call is
journaled as it happens (a call's intent before it starts), and a journal of a killed run
resumes it: journaled turns are not generated again, journaled outcomes are replayed and never
executed again, and calls in doubt are retried with the same idempotency key only when that is
safe, otherwise surfaced as ``outcome_unknown`` (:mod:`harness.journal.execution`).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import anyio
from anyio.abc import TaskGroup

from harness._tool_thread import ToolThread
from harness.calls import ToolResult, execute_call
from harness.certify import (
    DEFAULT_MARKER,
    Admission,
    Certificate,
    Detector,
    WindowTracker,
    make_detector,
)
from harness.engines.base import (
    Completion,
    Engine,
    GenerationSettings,
    Message,
    ToolCall,
    guarded_generate,
)
from harness.errors import ConfigError, ReplayDivergence, UsageLimitExceeded
from harness.journal import Journal, completion_from_entry, prompt_hash
from harness.journal.execution import JournaledCalls
from harness.ledger import (
    CallRecord,
    Ledger,
    RunRecord,
    SettledRecord,
    TurnRecord,
    WindowRecord,
)
from harness.manifest import Manifest, Skill
from harness.task import Task
from harness.tools import Toolset
from harness.validator import validate_window
from harness.window import OpenWindow, run_concurrently

__all__ = ("ARMS", "Arm", "LoopConfig", "LoopResult", "Policy", "run_loop")

Arm = Literal["S", "F", "P", "P+V"]
Policy = Literal["model", "gold"]
ARMS: tuple[Arm, ...] = ("S", "F", "P", "P+V")

#: The same in every arm, so the prefix (system prompt and tools) is identical across arms;
#: how many calls a reply may carry is the engine's format instruction
#: (``GenerationSettings.parallel_tool_calls``), rendered after the tools.
DEFAULT_SYSTEM = (
    "You are a careful assistant that solves the user's task with the tools provided. "
    "When you have everything you need, reply with the final answer."
)


@dataclass(frozen=True)
class LoopConfig:
    """How to run a loop. Every budget ends in a typed error, never a silent stop."""

    arm: Arm = "S"
    policy: Policy = "model"
    detector: str = "schema_sound"
    eager: bool = False
    max_turns: int = 40
    max_model_errors: int = 3
    max_repairs: int = 8
    max_resamples: int = 3
    max_identical_calls: int = 3
    parallel_token_factor: int = 4
    batched_repair: bool = True
    resample_temperature: float = 0.7
    max_window: int = 16
    marker: str = DEFAULT_MARKER
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    #: Wall-clock deadline of one run (one attempt, when resumed), in seconds; None: none.
    max_wall_s: float | None = None
    #: Billed tokens (input + output of every turn) one run may spend; None: no budget.
    max_billed_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ConfigError(f"Unknown arm {self.arm!r}; choose one of {', '.join(ARMS)}.")
        if self.policy not in ("model", "gold"):
            raise ConfigError(f"Unknown policy {self.policy!r}; choose 'model' or 'gold'.")
        if self.max_turns < 1 or self.max_window < 1:
            raise ConfigError("max_turns and max_window must be at least 1.")
        if self.max_wall_s is not None and self.max_wall_s <= 0:
            raise ConfigError(f"max_wall_s must be more than 0 seconds, got {self.max_wall_s}.")
        if self.max_billed_tokens is not None and self.max_billed_tokens < 1:
            raise ConfigError(
                f"max_billed_tokens must be at least 1, got {self.max_billed_tokens}."
            )


@dataclass
class LoopResult:
    """What a run did: the final transcript (what the serial arm would see), the answer and
    the ledger records."""

    run_id: str
    task_id: str
    arm: Arm
    policy: Policy
    messages: list[Message]
    answer: str | None
    results: dict[str, ToolResult]
    calls: list[ToolCall]
    ledger: Ledger
    summary: RunRecord

    @property
    def turns(self) -> list[TurnRecord]:
        return [r for r in self.ledger.records if isinstance(r, TurnRecord)]

    @property
    def windows(self) -> list[WindowRecord]:
        return [r for r in self.ledger.records if isinstance(r, WindowRecord)]

    @property
    def call_records(self) -> list[CallRecord]:
        return [r for r in self.ledger.records if isinstance(r, CallRecord)]


async def run_loop(
    engine: Engine,
    toolset: Toolset,
    task: Task,
    config: LoopConfig | None = None,
    *,
    manifest: Manifest | Skill | None = None,
    ledger: Ledger | None = None,
    run_id: str | None = None,
    journal: Journal | None = None,
) -> LoopResult:
    """Run ``task`` to its final answer with ``config.arm``; see the module docstring.

    ``journal``: journal the run as it happens, or resume the run it holds (the run id is the
    journal's)."""
    config = config or LoopConfig()
    skill = _resolve_skill(manifest, task)
    if skill is not None and isinstance(manifest, Manifest):
        manifest.check_tools(toolset)
    if journal is not None:
        if run_id is not None and run_id != journal.run_id:
            raise ConfigError(
                f"run_id {run_id!r} differs from the journal's run {journal.run_id!r} in "
                f"{journal.directory}; pass no run_id with a journal."
            )
        run_id = journal.run_id
    run = _Run(engine, toolset, task, config, skill, ledger or Ledger(), run_id, journal)
    return await run.execute()


def _resolve_skill(manifest: Manifest | Skill | None, task: Task) -> Skill | None:
    if manifest is None:
        return None
    if isinstance(manifest, Skill):
        return manifest
    if task.skill is None:
        raise ConfigError(
            f"Task {task.id!r} names no skill, so manifest {manifest.source!r} cannot be applied; "
            "set Task.skill or pass the Skill itself."
        )
    return manifest.skill(task.skill)


class _Run:
    """The state of one run. Private: :func:`run_loop` is the interface."""

    def __init__(
        self,
        engine: Engine,
        toolset: Toolset,
        task: Task,
        config: LoopConfig,
        skill: Skill | None,
        ledger: Ledger,
        run_id: str | None,
        journal: Journal | None = None,
    ) -> None:
        self.engine = engine
        self.toolset = toolset
        self.task = task
        self.config = config
        self.skill = skill
        self.ledger = ledger
        self.run_id = run_id or f"{task.id}-{config.arm}-{uuid.uuid4().hex[:8]}"
        self.detector: Detector = make_detector(
            config.detector, max_window=config.max_window, marker=config.marker
        )
        self.tracker: WindowTracker = self.detector.tracker(toolset, skill, task.inputs)
        self.specs = toolset.specs()
        self.messages: list[Message] = self._initial_messages()
        self.results: dict[str, ToolResult] = {}
        self.calls: list[ToolCall] = []
        self.ids = itertools.count()
        self.turn = 0
        self.repairs = 0
        self.resamples = 0
        self.model_errors = 0
        self.consecutive_errors = 0
        self.window: OpenWindow | None = None
        self.windows_closed = 0
        self.tool_index: dict[str, int] = {}
        self.emitted_turn: dict[str, int] = {}  # the turn that emitted each call
        self.last_mistake = ""
        self.last_call: tuple[str, str] | None = None
        self.repeats = 0
        self.absorb_pending = False
        self.gold_group = 0
        self.max_turns = task.max_turns or config.max_turns
        self.billed_tokens = 0
        self.journal = journal
        self.turns_replayed = 0
        self.abandoned: dict[str, ToolThread] = {}
        self.journaled = (
            JournaledCalls(journal, toolset, on_abandon=self._abandoned)
            if journal is not None
            else None
        )

    def _initial_messages(self) -> list[Message]:
        system = self.task.system or DEFAULT_SYSTEM
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": self.task.prompt},
        ]

    # -- generation ---------------------------------------------------------------------------

    def _settings(self) -> GenerationSettings:
        settings = self._policy_settings()
        if settings.forced:  # room for the whole forced reply, whatever max_tokens says
            text = sum(len(c.name) + len(c.arguments) + 24 for c in settings.forced)
            settings = replace(settings, max_tokens=max(settings.max_tokens, text // 2 + 16))
        return settings

    def _policy_settings(self) -> GenerationSettings:
        parallel = self.config.arm in ("P", "P+V")
        base = replace(self.config.generation, parallel_tool_calls=parallel)
        if parallel:  # one message carries a whole window of calls
            base = replace(
                base,
                max_tokens=base.max_tokens * self.config.parallel_token_factor,
                max_parallel_calls=self.config.max_window,
            )
        if self.config.policy != "gold":
            return base
        gold = self.task.gold_steps
        if self.config.arm in ("P", "P+V"):
            if self.gold_group < len(gold):
                step = gold[self.gold_group]
                forced = tuple(g.to_tool_call(f"gold_{i}") for i, g in enumerate(step))
                return replace(base, forced=forced)
        else:
            flat = self.task.gold_calls
            done = sum(1 for m in self.messages if m["role"] == "tool")  # emitted, incl. withheld
            if done < len(flat):
                return replace(base, forced=(flat[done].to_tool_call(f"gold_{done}"),))
        return replace(base, forced=(), forced_answer=self.task.gold_answer or "Done.")

    async def _generate(
        self, purpose: str, settings: GenerationSettings | None = None
    ) -> Completion:
        if self.turn >= self.max_turns:
            raise UsageLimitExceeded(
                f"Task {self.task.id!r} reached its limit of {self.max_turns} turns without a "
                "final answer; raise max_turns or check the prompt.",
                run_id=self.run_id,
                turn=self.turn,
            )
        started = time.monotonic()
        settings = settings or self._settings()
        completion = self._replayed_turn(self.turn, settings)
        if completion is None:
            completion = await guarded_generate(
                self.engine, self.messages, self.specs, settings, run_id=self.run_id,
                turn=self.turn,
            )  # fmt: skip
            self._journal_turn(self.turn, purpose, settings, completion)
        completion = self._renumber(completion)
        self._record_turn(purpose, completion, started)
        self.turn += 1
        self._check_token_budget()
        return completion

    # -- the journal ----------------------------------------------------------------------------

    def _replayed_turn(self, turn: int, settings: GenerationSettings) -> Completion | None:
        """A turn the journal holds: its completion, if the request is the journaled one."""
        if self.journal is None:
            return None
        entry = self.journal.replay.turns.get(turn)
        if entry is None:
            return None
        if entry.get("prompt") != prompt_hash(self.messages, self.specs, settings):
            raise ReplayDivergence(
                f"Turn {turn} of run {self.run_id!r} asks the engine something else than the "
                f"journal in {self.journal.directory} recorded: the task, the toolset, the "
                "manifest or the settings changed since the run started. Resume with the same "
                "ones, or start a new run.",
                run_id=self.run_id,
                turn=turn,
            )
        self.turns_replayed += 1
        return completion_from_entry(entry["completion"])

    def _journal_turn(
        self, turn: int, purpose: str, settings: GenerationSettings, completion: Completion
    ) -> None:
        if self.journal is not None:
            prompt = prompt_hash(self.messages, self.specs, settings)
            self.journal.record_turn(turn, purpose, prompt, completion)

    async def _execute(self, call: ToolCall, mode: str, window: int | None = None) -> ToolResult:
        """Run one call: through the journal when the run keeps one."""
        if self.journaled is not None:
            turn = self.emitted_turn.get(call.id, self.turn - 1)
            return await self.journaled.execute(call, turn=turn, mode=mode, window=window)
        return await execute_call(self.toolset, call, on_abandon=self._abandoned)

    def _abandoned(self, call: ToolCall, thread: ToolThread) -> None:
        """A sync call's thread outlived it: record its real outcome when the thread ends."""
        self.abandoned[call.id] = thread

        def settled(ended: ToolThread) -> None:
            error = ended.error
            self.ledger.emit(
                SettledRecord(
                    self.run_id, call.id, call.name, "raised" if error else "returned",
                    None if error is None else f"{type(error).__name__}: {error}",
                    ended.finished,
                )
            )  # fmt: skip

        thread.on_end(settled)

    def _renumber(self, completion: Completion) -> Completion:
        """Give every call a run-unique, arm-independent id (``call_0``, ``call_1``, ...)."""
        if not completion.tool_calls:
            return completion
        calls = tuple(replace(c, id=f"call_{next(self.ids)}") for c in completion.tool_calls)
        for c in calls:
            self.emitted_turn[c.id] = self.turn
        return replace(completion, tool_calls=calls)

    def _record_turn(self, purpose: str, completion: Completion, started: float) -> None:
        usage, timings = completion.usage, completion.timings
        self.billed_tokens += usage.billed_tokens
        if self.absorb_pending and purpose == "call":
            purpose = "absorb"
        self.absorb_pending = False
        self.ledger.emit(
            TurnRecord(
                self.run_id,
                self.turn,
                self.config.arm,
                purpose if completion.tool_calls or purpose != "call" else "answer",
                len(completion.tool_calls),
                usage.prompt_tokens,
                usage.cached_tokens,
                usage.completion_tokens,
                timings.total_s,
                timings.queue_s,
                timings.prefill_s,
                timings.decode_s,
                time.monotonic() - started,
                started,
                self.window is not None,
            )
        )

    # -- calls --------------------------------------------------------------------------------

    def _append_call_message(self, completion: Completion, calls: Sequence[ToolCall]) -> None:
        message = completion.to_message()
        message["tool_calls"] = [c.to_openai() for c in calls]
        self.messages.append(message)

    def _append_result(self, call: ToolCall, content: str) -> None:
        self.tool_index[call.id] = len(self.messages)
        self.messages.append(
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
        )

    def _record_call(
        self, result: ToolResult, call: ToolCall, mode: str, window: int | None
    ) -> None:
        self.results[call.id] = result
        self.calls.append(call)
        if result.error_kind == "outcome_unknown":
            pass  # the run was interrupted, not the model mistaken: no mistake budget spent
        elif result.is_error:
            self.model_errors += 1
            self.consecutive_errors += 1
            self.last_mistake = result.content
        else:
            self.consecutive_errors = 0
        self.ledger.emit(
            CallRecord(
                self.run_id,
                call.id,
                call.name,
                call.arguments,
                self.emitted_turn.get(call.id, self.turn - 1),
                mode,
                window,
                result.is_error,
                result.error_kind,
                result.started,
                result.finished,
                len(result.content),
                result.outcome_known,
            )
        )

    def _check_token_budget(self) -> None:
        budget = self.config.max_billed_tokens
        if budget is not None and self.billed_tokens > budget:
            raise UsageLimitExceeded(
                f"Run {self.run_id!r} billed {self.billed_tokens:,} tokens by turn {self.turn}, "
                f"over its budget of {budget:,}; raise LoopConfig.max_billed_tokens, or lower "
                "max_tokens per turn or max_turns.",
                run_id=self.run_id,
                turn=self.turn,
            )

    def _check_error_budget(self) -> None:
        if self.consecutive_errors > self.config.max_model_errors:
            last = self.last_mistake
            raise UsageLimitExceeded(
                f"The model made {self.consecutive_errors} mistakes in a row (last: {last[:160]}); "
                f"the budget is {self.config.max_model_errors}. Check the prompt and tool "
                "descriptions, or raise max_model_errors.",
                run_id=self.run_id,
                turn=self.turn,
            )

    async def _run_serial(self, call: ToolCall) -> None:
        result = await self._execute(call, "serial")
        self._append_result(call, result.content)
        self._record_call(result, call, "serial", None)

    # -- windows (arm F) ----------------------------------------------------------------------

    async def _close_window(self, certificate: Certificate | None) -> None:
        window, self.window = self.window, None
        if window is None:
            return
        results = await window.close()
        index = self.windows_closed
        self.windows_closed += 1
        for call, result in zip(window.calls, results, strict=True):
            at = self.tool_index[call.id]  # a new dict: never mutate a message an engine holds
            self.messages[at] = {**self.messages[at], "content": result.content}
            self._record_call(result, call, "eager" if self.config.eager else "window", index)
        self.absorb_pending = True
        closed_by = certificate.closed_by if certificate else "closed"
        starts = [r.started for r in results]
        ends = [r.finished for r in results]
        self.ledger.emit(
            WindowRecord(
                self.run_id,
                index,
                self.config.arm,
                self.detector.name,
                certificate.phase if certificate else None,
                len(results),
                tuple(c.id for c in window.calls),
                closed_by,
                certificate.evidence if certificate else (),
                window.opened_turn,
                self.turn,
                max(ends) - min(starts) if results else 0.0,
                sum(r.duration_s for r in results),
            )
        )

    async def _admit(self, call: ToolCall, completion: Completion, group: TaskGroup) -> None:
        admission: Admission = self.tracker.admit(call)
        if admission.closes is not None or (admission.action != "join" and self.window):
            await self._close_window(admission.closes)
        if admission.action == "discard":
            self._discard(call, admission)
            return
        self._append_call_message(completion, [call])
        if admission.action == "serial":
            await self._run_serial(call)
        else:
            if self.window is None:
                self.window = OpenWindow(
                    self.toolset,
                    self.turn - 1,
                    group if self.config.eager else None,
                    execute=lambda c: self._execute(
                        c, "eager" if self.config.eager else "window", self.windows_closed
                    ),
                )
            self.window.add(call)
            self._append_result(call, self.config.marker)
        if admission.completes is not None:
            await self._close_window(admission.completes)

    def _discard(self, call: ToolCall, admission: Admission) -> None:
        self.repairs += 1
        reason = admission.failures[0].message if admission.failures else admission.reason
        self.ledger.emit(
            TurnRecord(
                self.run_id,
                self.turn - 1,
                self.config.arm,
                "repair",
                1,
                0,
                0,
                0,
                0.0,
                0.0,
                0.0,
                0.0,
                0.0,
                time.monotonic(),
            )
        )
        if self.repairs > self.config.max_repairs:
            raise UsageLimitExceeded(
                f"{self.repairs} calls were discarded for D2 repairs (last: {reason}); the budget "
                f"is {self.config.max_repairs}. Declare slot counts in the manifest so windows "
                "close before dependent calls are generated.",
                run_id=self.run_id,
                call_id=call.id,
                tool=call.name,
                turn=self.turn,
            )

    # -- arms ---------------------------------------------------------------------------------

    async def _serial_step(self, completion: Completion, group: TaskGroup) -> bool:
        """Handle one S/F turn; True when the run is finished."""
        if not completion.tool_calls:
            if self.window is not None:
                # A final answer generated while results were withheld: reveal and regenerate.
                await self._close_window(self.tracker.close("final_answer"))
                self.repairs += 1
                return False
            self.messages.append(completion.to_message())
            return True
        for call in completion.tool_calls:
            if self.config.arm == "S":
                self._append_call_message(completion, [call])
                await self._run_serial(call)
            else:
                await self._admit(call, completion, group)
        return False

    async def _parallel_step(self, completion: Completion) -> bool:
        """Handle one P/P+V turn; True when the run is finished."""
        calls = list(completion.tool_calls)
        if not calls:
            self.messages.append(completion.to_message())
            return True
        phase = self.tracker.phase_of(calls)
        certified = len(calls) > 1 and isinstance(
            self.detector.certify(self.toolset, calls, phase, self.task.inputs), Certificate
        )
        for call in calls:
            self.tracker.admit(call)  # advance the phase position
        self.tracker.close("message")
        self._append_call_message(completion, calls)
        self.gold_group += 1
        if certified:
            index = self.windows_closed
            self.windows_closed += 1
            results = await run_concurrently(
                self.toolset, calls, execute=lambda c: self._execute(c, "parallel", index)
            )
            for call, result in zip(calls, results, strict=True):
                self._append_result(call, result.content)
                self._record_call(result, call, "parallel", index)
            self.ledger.emit(
                WindowRecord(
                    self.run_id, index, self.config.arm, self.detector.name,
                    phase.name if phase else None, len(calls), tuple(c.id for c in calls),
                    "message", (), self.turn - 1, self.turn - 1,
                    max(r.finished for r in results) - min(r.started for r in results),
                    sum(r.duration_s for r in results),
                )
            )  # fmt: skip
        else:
            for call in calls:
                await self._run_serial(call)
        return False

    async def _validated(self, completion: Completion) -> Completion:
        """P+V: resample a window the validator rejects (bounded; batched when configured)."""
        calls = completion.tool_calls
        phase = self.tracker.phase_of(calls) if calls else None
        problems = (
            validate_window(self.toolset, calls, phase, self.task.inputs, marker=self.config.marker)
            if calls
            else []
        )
        tries = 0
        while problems and tries < self.config.max_resamples:
            k = self.config.max_resamples - tries if self.config.batched_repair else 1
            candidates = await self._resample(k, tries)
            tries += k
            self.resamples += k
            for candidate in candidates:
                cphase = (
                    self.tracker.phase_of(candidate.tool_calls) if candidate.tool_calls else None
                )
                problems = (
                    validate_window(
                        self.toolset,
                        candidate.tool_calls,
                        cphase,
                        self.task.inputs,
                        marker=self.config.marker,
                    )
                    if candidate.tool_calls
                    else []
                )
                completion = candidate
                if not problems:
                    break
        return completion

    async def _resample(self, k: int, offset: int) -> list[Completion]:
        """Batched repair: ``k`` candidate windows submitted together (the fabric's batched
        consensus primitive), so the engine decodes them in one batch."""
        from harness.fabric.consensus import sample_batch

        base = self._settings()
        seed0 = (base.seed or 0) + 1 + offset
        settings = [
            replace(base, temperature=self.config.resample_temperature, seed=seed0 + i)
            for i in range(k)
        ]
        if self.turn + k > self.max_turns:
            raise UsageLimitExceeded(
                f"Task {self.task.id!r} would pass its limit of {self.max_turns} turns while "
                f"resampling a rejected window ({k} candidates); raise max_turns or lower "
                "max_resamples.",
                run_id=self.run_id,
                turn=self.turn,
            )
        started = time.monotonic()
        replayed = [self._replayed_turn(self.turn + i, s) for i, s in enumerate(settings)]
        missing = [i for i, c in enumerate(replayed) if c is None]
        fresh = await sample_batch(
            self.engine, self.messages, self.specs, [settings[i] for i in missing]
        )
        for i, completion in zip(missing, fresh, strict=True):
            replayed[i] = completion
            self._journal_turn(self.turn + i, "resample", settings[i], completion)
        candidates = [c for c in replayed if c is not None]
        out = []
        for candidate in candidates:
            renumbered = self._renumber(candidate)
            self._record_turn("resample", renumbered, started)
            self.turn += 1
            out.append(renumbered)
        self._check_token_budget()
        return out

    # -- driver -------------------------------------------------------------------------------

    async def execute(self) -> LoopResult:
        started = time.monotonic()
        answer: str | None = None
        error: str | None = "Cancelled: the run was cancelled before it ended"
        try:
            try:
                with anyio.move_on_after(self.config.max_wall_s) as deadline:
                    async with anyio.create_task_group() as group:
                        answer = await self._drive(group)
            except BaseExceptionGroup as group_error:
                single = _single(group_error)
                raise single from single.__cause__  # keep an engine error's original cause
            if deadline.cancelled_caught:
                raise UsageLimitExceeded(
                    f"Run {self.run_id!r} passed its wall-clock deadline of "
                    f"{self.config.max_wall_s:.1f} s at turn {self.turn} ({len(self.calls)} "
                    "calls done); raise LoopConfig.max_wall_s"
                    + (
                        f", or resume it from its journal in {self.journal.directory}."
                        if self.journal is not None
                        else ", or run it with a journal so it can be resumed."
                    ),
                    run_id=self.run_id,
                    turn=self.turn,
                )
            error = None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        except BaseException as exc:  # cancelled (a signal, a deadline outside): not finished
            kind = (
                "Cancelled"
                if isinstance(exc, anyio.get_cancelled_exc_class())
                else type(exc).__name__
            )
            error = f"{kind}: the run was stopped at turn {self.turn} before it ended"
            raise
        finally:
            self._summarise(started, answer, error)
            if self.journal is not None:
                self.journal.record_end(finished=error is None, error=error, answer=answer)
        return LoopResult(
            self.run_id,
            self.task.id,
            self.config.arm,
            self.config.policy,
            self.messages,
            answer,
            self.results,
            self.calls,
            self.ledger,
            self.summary,
        )

    async def _drive(self, group: TaskGroup) -> str | None:
        while True:
            completion = await self._generate("call")
            if completion.finish_reason == "length" and not completion.tool_calls:
                self._mistake(completion)
                continue
            self._check_stuck(completion)
            if self.config.arm == "P+V":
                completion = await self._validated(completion)
            if self.config.arm in ("P", "P+V"):
                done = await self._parallel_step(completion)
            else:
                done = await self._serial_step(completion, group)
            self._check_error_budget()
            if done:
                return completion.content

    def _check_stuck(self, completion: Completion) -> None:
        """A model that emits the very same call ``max_identical_calls`` turns in a row is stuck
        in a loop: end the run with a typed error instead of burning the turn budget."""
        if len(completion.tool_calls) != 1:
            self.last_call, self.repeats = None, 0
            return
        call = completion.tool_calls[0]
        key = (call.name, call.arguments)
        self.repeats = self.repeats + 1 if key == self.last_call else 1
        self.last_call = key
        if self.repeats >= self.config.max_identical_calls:
            raise UsageLimitExceeded(
                f"The model emitted the same call {call.name}({call.arguments[:120]}) "
                f"{self.repeats} turns in a row: it is stuck. Improve the prompt or the tool's "
                "result, or raise max_identical_calls.",
                run_id=self.run_id,
                call_id=call.id,
                tool=call.name,
                turn=self.turn,
            )

    def _mistake(self, completion: Completion) -> None:
        """A reply cut at max_tokens with no usable call: tell the model, count it."""
        self.model_errors += 1
        self.consecutive_errors += 1
        limit = self._settings().max_tokens
        self.last_mistake = f"a reply cut off at {limit} tokens with no usable call"
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
        self._check_error_budget()

    def _summarise(self, started: float, answer: str | None, error: str | None) -> None:
        turns = [
            r for r in self.ledger.records if isinstance(r, TurnRecord) and r.run_id == self.run_id
        ]
        self.summary = RunRecord(
            self.run_id,
            self.task.id,
            self.config.arm,
            self.config.policy,
            self.detector.name,
            self.config.eager,
            error is None,
            error,
            answer,
            self.turn,
            len(self.calls),
            self.windows_closed,
            self.repairs,
            self.resamples,
            self.model_errors,
            sum(t.prompt_tokens for t in turns),
            sum(t.cached_tokens for t in turns),
            sum(t.completion_tokens for t in turns),
            sum(t.billed_tokens for t in turns),
            sum(t.engine_s for t in turns),
            time.monotonic() - started,
            self._extra(),
        )
        self.ledger.emit(self.summary)

    def _extra(self) -> dict[str, object]:
        """What the summary adds for a journaled run and for calls whose threads run on."""
        extra: dict[str, object] = {}
        unsettled = [c for c, t in self.abandoned.items() if not t.done]
        if unsettled:
            extra["unsettled_calls"] = unsettled
        if self.journaled is not None and self.journal is not None:
            extra["journal"] = {
                "directory": str(self.journal.directory),
                "attempt": self.journal.state.attempts,
                "turns_replayed": self.turns_replayed,
                "replayed": list(self.journaled.replayed),
                "retried": list(self.journaled.retried),
                "unknown": list(self.journaled.unknown),
            }
        return extra


def _single(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one real error inside a task group's exception group (tool failures never get
    there: each call catches its own), so callers see ``UsageLimitExceeded``, not a group."""
    leaves: list[BaseException] = []

    def walk(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                walk(inner)
        else:
            leaves.append(error)

    walk(group)
    real = [e for e in leaves if not isinstance(e, anyio.get_cancelled_exc_class())]
    return real[0] if len(real) == 1 else group
