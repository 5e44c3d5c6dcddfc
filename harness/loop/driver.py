"""The driver: generate → hand the completion to the arm → budgets → repeat.

:func:`run_loop` builds the run's :class:`~harness.loop.state.RunState` and its arm strategy
(:data:`STRATEGIES`), then drives: each turn it asks the arm for the generation settings,
generates, turns a reply cut at ``max_tokens`` into a counted mistake, checks for a stuck
model, lets the arm review the completion (P+V resamples) and handle it, and checks the
mistake budget, until the arm reports a final answer. The run's task group holds every call
still running (eager dispatch); cancelling the run cancels them all, and the run is recorded
as not finished (its ``error`` says it was stopped). ``max_wall_s`` bounds the whole run.

With ``journal=`` (:class:`~harness.journal.Journal`) every turn and call is journaled as it
happens — a call's intent before it starts — and the journal of a killed run resumes it:
journaled turns are replayed (:mod:`harness.journal.turns`), journaled outcomes are never
executed again, and in-doubt calls are retried with their idempotency key only when that is
safe, else shown as ``outcome_unknown`` (:mod:`harness.journal.execution`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup

from harness._logging import get_logger
from harness.certify import Detector, make_detector
from harness.engines.base import Engine
from harness.errors import ConfigError, UsageLimitExceeded
from harness.journal import Journal
from harness.journal.execution import JournaledCalls
from harness.journal.turns import JournaledTurns
from harness.loop.arm import ArmStrategy
from harness.loop.config import Arm, LoopConfig, Policy
from harness.loop.flattened import FlattenedArm
from harness.loop.ledger import (
    CallRecord,
    Ledger,
    RunRecord,
    SettledRecord,
    TurnRecord,
    WindowRecord,
)
from harness.loop.openai_format import messages_to_openai
from harness.loop.parallel import ParallelArm
from harness.loop.serial import SerialArm
from harness.loop.speculative import SpeculativeArm
from harness.loop.state import RunState
from harness.loop.task import Task
from harness.loop.validated import ValidatedArm
from harness.messages import Message, ToolCall
from harness.skills.manifest import Manifest, Skill
from harness.tools._thread import ToolThread
from harness.tools.execute import Executor, ToolResult, ToolsetExecutor
from harness.tools.toolset import Toolset

__all__ = ("STRATEGIES", "LoopResult", "drive", "run_loop")

_log = get_logger("harness.loop")


def _flattened(state: RunState, detector: Detector, group: TaskGroup) -> ArmStrategy:
    """Arm F: :class:`~harness.loop.speculative.SpeculativeArm` (F+spec) with
    ``flatten.speculate``, else :class:`~harness.loop.flattened.FlattenedArm`."""
    if state.config.flatten.speculate:
        return SpeculativeArm(state, detector, group)
    return FlattenedArm(state, detector, group)


#: Each arm's strategy, constructed as ``Strategy(state, detector, group)``.
STRATEGIES: dict[Arm, Callable[[RunState, Detector, TaskGroup], ArmStrategy]] = {
    "S": SerialArm,
    "F": _flattened,  # F+spec with ``flatten.speculate``
    "P": ParallelArm,
    "P+V": ValidatedArm,
}


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
    #: How many of ``messages`` came from the task's history (0 for a fresh task).
    history_length: int = 0

    def openai_messages(self, *, new_only: bool = False) -> list[dict[str, Any]]:
        """The final transcript as plain OpenAI-format messages (see
        :func:`harness.loop.openai_format.messages_to_openai`); ``new_only``: only the messages
        this run added after the task's history (what to append to your own)."""
        start = self.history_length if new_only else 0
        return messages_to_openai(self.messages[start:])

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
    executor: Executor | None = None,
    journal: Journal | None = None,
    detector: Detector | None = None,
    on_start: Callable[[RunState], None] | None = None,
) -> LoopResult:
    """Run ``task`` to its final answer with ``config.arm`` (see :mod:`harness.loop`).

    ``executor``: how calls run (default: in process, against ``toolset``); every call of
    every arm goes through its ``execute`` (a :class:`~harness.tools.execute.WindowExecutor` gets a
    revealed window's calls together). ``journal``: journal the run as it happens, or
    resume the run it holds (the run id is the journal's; calls run through it).
    ``detector``: the certifier (default: ``config.detector`` by name); its tracker may
    already stand at a history's phase position (the proxy's cold start,
    :mod:`harness.proxy.conversation`). ``on_start``: called with the run's
    :class:`~harness.loop.state.RunState` before its first turn (the proxy reads the
    transcript of the calls it hands its client from it).
    """
    config = config or LoopConfig()
    skill = _checked_skill(manifest, task, toolset, config)
    ledger = ledger or Ledger()
    watch = _Abandoned(ledger)
    journaled: JournaledCalls | None = None
    if journal is not None:
        run_id = _journal_run_id(journal, executor, run_id)
        journaled = JournaledCalls(journal, toolset, on_abandon=watch)
    if detector is None:
        detector = make_detector(config.detector, config.window_rules)
    state = RunState(
        engine,
        toolset,
        task,
        config,
        executor=executor or journaled or ToolsetExecutor(toolset, on_abandon=watch),
        skill=skill,
        ledger=ledger,
        run_id=run_id,
        detector_name=detector.name,
        turns=JournaledTurns(journal) if journal is not None else None,
    )
    watch.run_id = state.run_id
    if on_start is not None:
        on_start(state)
    if journaled is not None:
        journaled.turn_of = state.emitted_turn
    started = time.monotonic()
    answer: str | None = None
    error: str | None = "Cancelled: the run was stopped before it ended"
    arm: ArmStrategy | None = None
    try:
        try:
            with anyio.move_on_after(config.max_wall_s) as deadline:
                async with anyio.create_task_group() as group:
                    arm = STRATEGIES[config.arm](state, detector, group)
                    answer = await drive(state, arm)
        except BaseExceptionGroup as group_error:
            single = _single(group_error)
            raise single from single.__cause__  # keep an engine error's original cause
        if deadline.cancelled_caught:
            raise _past_deadline(state, journal)
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    except BaseException as exc:  # cancelled (a signal, an outer deadline): not finished
        kind = "Cancelled" if isinstance(exc, anyio.get_cancelled_exc_class()) else type(exc)
        name = kind if isinstance(kind, str) else kind.__name__
        error = f"{name}: the run was stopped at turn {state.turn} before it ended"
        raise
    finally:
        if error is not None and arm is not None:
            arm.abandon()
        extra = _extra(state, watch, journal, journaled)
        summary = _summarise(state, started, answer, error, extra)
        if journal is not None:
            journal.record_end(finished=error is None, error=error, answer=answer)
    return LoopResult(
        state.run_id,
        task.id,
        config.arm,
        config.policy,
        state.messages,
        answer,
        state.results,
        state.calls,
        state.ledger,
        summary,
        state.transcript.history_length,
    )


def _checked_skill(
    manifest: Manifest | Skill | None, task: Task, toolset: Toolset, config: LoopConfig
) -> Skill | None:
    """The task's skill, its tools and inputs checked against the manifest; a warning when
    arm F's schema-sound certifier has no skill to certify by (every call runs serially)."""
    skill = _resolve_skill(manifest, task)
    if skill is None and config.arm == "F" and config.detector == "schema_sound":
        _log.warning(
            "no_manifest",
            arm=config.arm,
            task=task.id,
            detail=(
                "the schema-sound certifier needs a skill manifest's fan-out phase (D3): with "
                "no manifest no window certifies and every call runs serially; pass "
                "manifest=... (or the task's skill must be in it)"
            ),
        )
    if skill is not None and isinstance(manifest, Manifest):
        manifest.check_tools(toolset)
        manifest.check_inputs(skill.name, task.inputs)
    return skill


def _journal_run_id(journal: Journal, executor: Executor | None, run_id: str | None) -> str:
    """A journaled run's id: the journal's (its calls run through the journal, so neither
    another executor nor another run id may be given)."""
    if executor is not None or (run_id is not None and run_id != journal.run_id):
        raise ConfigError(
            f"A journaled run (journal of run {journal.run_id!r} in {journal.directory}) "
            "runs its calls through the journal under the journal's run id; pass neither "
            "executor nor run_id with journal."
        )
    return journal.run_id


class _Abandoned:
    """Told about sync calls whose thread outlived them: records a
    :class:`~harness.loop.ledger.SettledRecord` when each thread really ends."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.run_id = ""
        self.threads: dict[str, ToolThread] = {}

    def __call__(self, call: ToolCall, thread: ToolThread) -> None:
        self.threads[call.id] = thread

        def settled(ended: ToolThread) -> None:
            error = ended.error
            self.ledger.emit(
                SettledRecord(
                    run_id=self.run_id,
                    call_id=call.id,
                    tool=call.name,
                    outcome="raised" if error is not None else "returned",
                    error=None if error is None else f"{type(error).__name__}: {error}",
                    finished=ended.finished,
                )
            )

        thread.on_end(settled)


def _past_deadline(state: RunState, journal: Journal | None) -> UsageLimitExceeded:
    how = (
        f", or resume it from its journal in {journal.directory}."
        if journal is not None
        else ", or run it with a journal so that it can be resumed."
    )
    return UsageLimitExceeded(
        f"Run {state.run_id!r} passed its wall-clock deadline of {state.config.max_wall_s:.1f} "
        f"s at turn {state.turn} ({len(state.calls)} calls done); raise LoopConfig.max_wall_s"
        + how,
        run_id=state.run_id,
        turn=state.turn,
    )


def _extra(
    state: RunState,
    watch: _Abandoned,
    journal: Journal | None,
    journaled: JournaledCalls | None,
) -> dict[str, object]:
    """What the summary adds: calls whose threads still run, and what the journal replayed."""
    extra: dict[str, object] = dict(state.extra)
    if state.count.tool_failures:
        extra["tool_failures"] = state.count.tool_failures
    unsettled = [c for c, t in watch.threads.items() if not t.done]
    if unsettled:
        extra["unsettled_calls"] = unsettled
    if journal is not None and journaled is not None and state.journaled_turns is not None:
        extra["journal"] = {
            "directory": str(journal.directory),
            "attempt": journal.state.attempts,
            "turns_replayed": state.journaled_turns.replayed,
            "replayed": list(journaled.replayed),
            "retried": list(journaled.retried),
            "unknown": list(journaled.unknown),
            # Every call that was ever in doubt, attempt by attempt (in doubt at 1,
            # outcome_unknown at 2, replayed at 3): a later attempt never hides it.
            "history": journal.state.eventful(),
        }
    return extra


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


async def drive(state: RunState, arm: ArmStrategy) -> str | None:
    """The turn loop every run goes through — :func:`run_loop`'s, and so the proxy's: the
    arm's settings, one generation, a reply cut off at ``max_tokens`` turned into a counted
    mistake, the stuck guard, the arm's review and handling, the mistake budget; until the arm
    reports a final answer (returned). Calls run where the state's executor runs them: in
    process, through a journal, or at a client (the proxy's executor suspends the drive until
    the client sends the results back)."""
    while True:
        settings = arm.settings()
        completion = await state.generate(settings, window_open=arm.window_open)
        if completion.finish_reason == "length" and not completion.tool_calls:
            state.cut_off(completion, settings.max_tokens)
            continue
        state.budgets.check_stuck(completion)
        completion = await arm.review(completion)
        done = await arm.handle(completion)
        state.budgets.check_errors()
        if done:
            return completion.content


def _summarise(
    state: RunState,
    started: float,
    answer: str | None,
    error: str | None,
    extra: dict[str, object],
) -> RunRecord:
    turns = [
        r for r in state.ledger.records if isinstance(r, TurnRecord) and r.run_id == state.run_id
    ]
    count = state.count
    summary = RunRecord(
        run_id=state.run_id,
        task_id=state.task.id,
        arm=state.config.arm,
        policy=state.config.policy,
        detector=state.detector_name,
        eager=state.config.flatten.eager,
        speculate=state.config.flatten.speculate,
        finished=error is None,
        error=error,
        answer=answer,
        turns=count.turns,
        calls=len(state.calls),
        windows=count.windows,
        discards=count.discards,
        resamples=count.resamples,
        model_errors=count.model_errors,
        prompt_tokens=sum(t.prompt_tokens for t in turns),
        cached_tokens=sum(t.cached_tokens for t in turns),
        completion_tokens=sum(t.completion_tokens for t in turns),
        billed_tokens=sum(t.billed_tokens for t in turns),
        engine_s=sum(t.engine_s for t in turns),
        wall_s=time.monotonic() - started,
        extra=extra,
    )
    state.ledger.emit(summary)
    return summary


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
