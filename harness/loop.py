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
exactly one result; cancelling the run cancels every tool still running.
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

from harness.calls import ToolResult, execute_call
from harness.certify import (
    DEFAULT_MARKER,
    Admission,
    Certificate,
    Detector,
    WindowTracker,
    make_detector,
    replay,
)
from harness.engines.base import Completion, Engine, GenerationSettings, Message, ToolCall
from harness.errors import ConfigError, UsageLimitExceeded
from harness.ledger import CallRecord, Ledger, RunRecord, TurnRecord, WindowRecord
from harness.manifest import Manifest, Skill
from harness.provenance import TurnView
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

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ConfigError(f"Unknown arm {self.arm!r}; choose one of {', '.join(ARMS)}.")
        if self.policy not in ("model", "gold"):
            raise ConfigError(f"Unknown policy {self.policy!r}; choose 'model' or 'gold'.")
        if self.max_turns < 1 or self.max_window < 1:
            raise ConfigError("max_turns and max_window must be at least 1.")


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
) -> LoopResult:
    """Run ``task`` to its final answer with ``config.arm``; see the module docstring."""
    config = config or LoopConfig()
    skill = _resolve_skill(manifest, task)
    if skill is not None and isinstance(manifest, Manifest):
        manifest.check_tools(toolset)
    run = _Run(engine, toolset, task, config, skill, ledger or Ledger(), run_id)
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
        completion = await self.engine.generate(
            self.messages, self.specs, settings or self._settings()
        )
        completion = self._renumber(completion)
        self._record_turn(purpose, completion, started)
        self.turn += 1
        return completion

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
        if result.is_error:
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
            )
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
        result = await execute_call(self.toolset, call)
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

    def _view(self) -> TurnView:
        """What the turn just generated could see: every result in the context, and the
        results already finished of calls withheld from it (eager dispatch)."""
        marker = self.config.marker
        visible = tuple(
            str(m.get("content", ""))
            for m in self.messages
            if m["role"] == "tool" and m.get("content") != marker
        )
        withheld = self.window.finished_texts() if self.window is not None else ()
        return TurnView(visible, withheld)

    async def _admit(
        self, call: ToolCall, completion: Completion, group: TaskGroup, view: TurnView
    ) -> None:
        admission: Admission = self.tracker.admit(call, view)
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
                    self.toolset, self.turn - 1, group if self.config.eager else None
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
        view = self._view() if self.config.arm != "S" else None
        for call in completion.tool_calls:
            if view is None:
                self._append_call_message(completion, [call])
                await self._run_serial(call)
            else:
                await self._admit(call, completion, group, view)
        return False

    async def _parallel_step(self, completion: Completion) -> bool:
        """Handle one P/P+V turn; True when the run is finished."""
        calls = list(completion.tool_calls)
        if not calls:
            self.messages.append(completion.to_message())
            return True
        phase = self.tracker.phase_of(calls)
        # The message is one window iff the run's own tracker admits every call into one
        # window (the same decision procedure as arm F and batch certify).
        certified = len(calls) > 1 and isinstance(
            replay(self.tracker, calls, self._view(), self.detector.name), Certificate
        )
        self.tracker.close("message")
        self._append_call_message(completion, calls)
        self.gold_group += 1
        if certified:
            results = await run_concurrently(self.toolset, calls)
            index = self.windows_closed
            self.windows_closed += 1
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
        candidates = await sample_batch(self.engine, self.messages, self.specs, settings)
        out = []
        for candidate in candidates:
            renumbered = self._renumber(candidate)
            self._record_turn("resample", renumbered, started)
            self.turn += 1
            out.append(renumbered)
        return out

    # -- driver -------------------------------------------------------------------------------

    async def execute(self) -> LoopResult:
        started = time.monotonic()
        answer: str | None = None
        error: str | None = None
        try:
            try:
                async with anyio.create_task_group() as group:
                    answer = await self._drive(group)
            except BaseExceptionGroup as group_error:
                raise _single(group_error) from None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self._summarise(started, answer, error)
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
        )
        self.ledger.emit(self.summary)


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
