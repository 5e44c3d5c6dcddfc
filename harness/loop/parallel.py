"""Arm P, native parallel: the model emits a step's independent calls in one message.

A message of several calls that the detector certifies in batch runs concurrently (one
window, closed by the message); any other message runs its calls one by one in emitted order.
The tracker still follows the run's phase position (through draft windows), so later
messages are attributed to the right phase.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from anyio.abc import TaskGroup

from harness.certify import Certificate, Detector
from harness.engines.base import Completion, GenerationSettings
from harness.engines.batch import gather
from harness.loop.policy import with_room_for_forced
from harness.loop.state import RunState
from harness.manifest import Phase
from harness.window import Windows

__all__ = ("ParallelArm",)


class ParallelArm:
    """Arm P."""

    window_open = False

    def __init__(self, state: RunState, detector: Detector, group: TaskGroup) -> None:
        self.state = state
        self.detector = detector
        self.windows = Windows(detector.tracker(state.toolset, state.skill, state.task.inputs))
        self.step = 0  # messages of calls handled so far (the gold policy forces one step each)

    def settings(self) -> GenerationSettings:
        """A whole window per message: ``parallel.token_factor`` times the tokens, at most
        ``max_window`` calls, steered by the run's policy."""
        config = self.state.config
        base = replace(
            config.generation,
            parallel_tool_calls=True,
            max_tokens=config.generation.max_tokens * config.parallel.token_factor,
            max_parallel_calls=config.max_window,
        )
        return with_room_for_forced(self.state.steer(base, step=self.step))

    def phase_of(self, completion: Completion) -> Phase | None:
        calls = completion.tool_calls
        return self.windows.tracker.phase_of(calls) if calls else None

    async def review(self, completion: Completion) -> Completion:
        return completion

    async def handle(self, completion: Completion) -> bool:
        state = self.state
        calls = list(completion.tool_calls)
        if not calls:
            state.transcript.append_answer(completion)
            return True
        phase = self.phase_of(completion)
        verdict = self.detector.certify(state.toolset, calls, phase, state.task.inputs)
        certified = len(calls) > 1 and isinstance(verdict, Certificate)
        for call in calls:  # advance the phase position
            self.windows.admit(call)
        self.windows.close("message")
        state.transcript.append_calls(completion, calls)
        self.step += 1
        if not certified:
            for call in calls:
                await state.run_serial(call)
            return False
        results = await gather([partial(state.execute, c) for c in calls])
        index = state.next_window_index()
        for call, result in zip(calls, results, strict=True):
            state.transcript.append_result(call, result.content)
            state.record_call(result, call, "parallel", index)
        state.record_window(
            index,
            calls,
            results,
            phase=phase.name if phase else None,
            closed_by="message",
            evidence=(),
            opened_turn=state.turn - 1,
            closed_turn=state.turn - 1,
        )
        return False
