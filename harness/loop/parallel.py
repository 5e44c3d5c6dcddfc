"""Arm P, native parallel: the model emits a step's independent calls in one message.

A message of several calls that the run's tracker admits into one window (the decision
procedure of arm F and of batch certification) runs concurrently (one window, closed by the
message); any other message runs its calls one by one in emitted order. The tracker follows
the run's phase position (through draft windows), so later messages are attributed to the
right phase.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from anyio.abc import TaskGroup

from harness._concurrency import gather
from harness.certify import Detector
from harness.certify.provenance import TurnView
from harness.certify.window import Windows
from harness.engines.base import GenerationSettings
from harness.loop.policy import with_room_for_forced
from harness.loop.state import RunState
from harness.messages import Completion
from harness.skills.manifest import Phase

__all__ = ("ParallelArm",)


class ParallelArm:
    """Arm P."""

    window_open = False

    def abandon(self) -> None:
        """Nothing is withheld between turns: nothing to record when the run ends early."""

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
        # The run's own tracker decides (the procedure of arm F and of batch certify): the
        # message is one window iff every call joins it and it closes on no call but the last.
        view = TurnView(state.transcript.visible_results(state.config.marker))
        steps = [self.windows.admit(call, view) for call in calls]
        self.windows.close("message")
        certified = (
            len(calls) > 1
            and all(s.admission.action == "join" and s.closed is None for s in steps)
            and all(s.completed is None for s in steps[:-1])
        )
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
