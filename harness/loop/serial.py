"""Arm S, serial: one call per turn; block on its result; append it; generate again."""

from __future__ import annotations

from dataclasses import replace

from anyio.abc import TaskGroup

from harness.certify import Detector
from harness.engines.base import GenerationSettings
from harness.loop.policy import with_room_for_forced
from harness.loop.state import RunState
from harness.messages import Completion

__all__ = ("SerialArm", "serial_settings")


def serial_settings(state: RunState) -> GenerationSettings:
    """One call per reply (arms S and F), steered by the run's policy."""
    base = replace(state.config.generation, parallel_tool_calls=False)
    return with_room_for_forced(state.steer(base, step=None))


class SerialArm:
    """Arm S."""

    window_open = False

    def abandon(self) -> None:
        """Nothing is withheld between turns: nothing to record when the run ends early."""

    def __init__(self, state: RunState, detector: Detector, group: TaskGroup) -> None:
        self.state = state

    def settings(self) -> GenerationSettings:
        return serial_settings(self.state)

    async def review(self, completion: Completion) -> Completion:
        return completion

    async def handle(self, completion: Completion) -> bool:
        if not completion.tool_calls:
            self.state.transcript.append_answer(completion)
            return True
        for call in completion.tool_calls:
            self.state.transcript.append_calls(completion, [call])
            await self.state.run_serial(call)
        return False
