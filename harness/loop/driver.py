"""The driver: generate → hand the completion to the arm → budgets → repeat.

:func:`run_loop` builds the run's :class:`~harness.loop.state.RunState` and its arm strategy
(:data:`STRATEGIES`), then drives: each turn it asks the arm for the generation settings,
generates, turns a reply cut at ``max_tokens`` into a counted mistake, checks for a stuck
model, lets the arm review the completion (P+V resamples) and handle it, and checks the
mistake budget, until the arm reports a final answer. The run's task group holds every call
still running (eager dispatch); cancelling the run cancels them all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup

from harness.calls import Executor, ToolResult, ToolsetExecutor
from harness.certify import Detector, make_detector
from harness.engines.base import Engine, Message, ToolCall
from harness.errors import ConfigError
from harness.ledger import CallRecord, Ledger, RunRecord, TurnRecord, WindowRecord
from harness.loop.arm import ArmStrategy
from harness.loop.config import Arm, LoopConfig, Policy
from harness.loop.flattened import FlattenedArm
from harness.loop.parallel import ParallelArm
from harness.loop.policy import POLICIES
from harness.loop.serial import SerialArm
from harness.loop.state import RunState
from harness.loop.validated import ValidatedArm
from harness.manifest import Manifest, Skill
from harness.task import Task
from harness.tools import Toolset

__all__ = ("STRATEGIES", "LoopResult", "run_loop")

#: Each arm's strategy, constructed as ``Strategy(state, detector, group)``.
STRATEGIES: dict[Arm, Callable[[RunState, Detector, TaskGroup], ArmStrategy]] = {
    "S": SerialArm,
    "F": FlattenedArm,
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
) -> LoopResult:
    """Run ``task`` to its final answer with ``config.arm`` (see :mod:`harness.loop`).

    ``executor``: how calls run (default: in process, against ``toolset``); every call of
    every arm goes through its ``execute``.
    """
    config = config or LoopConfig()
    skill = _resolve_skill(manifest, task)
    if skill is not None and isinstance(manifest, Manifest):
        manifest.check_tools(toolset)
    detector = make_detector(config.detector, max_window=config.max_window, marker=config.marker)
    state = RunState(
        engine,
        toolset,
        executor or ToolsetExecutor(toolset),
        task,
        config,
        skill,
        ledger or Ledger(),
        run_id,
        detector_name=detector.name,
        policy=POLICIES[config.policy](),
    )
    started = time.monotonic()
    answer: str | None = None
    error: str | None = None
    try:
        try:
            async with anyio.create_task_group() as group:
                arm = STRATEGIES[config.arm](state, detector, group)
                answer = await _drive(state, arm)
        except BaseExceptionGroup as group_error:
            raise _single(group_error) from None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        summary = _summarise(state, started, answer, error)
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
    )


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


async def _drive(state: RunState, arm: ArmStrategy) -> str | None:
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


def _summarise(state: RunState, started: float, answer: str | None, error: str | None) -> RunRecord:
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
