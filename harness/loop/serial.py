"""Arm S, serial: one call per turn; block on its result; append it; generate again."""

from __future__ import annotations

from dataclasses import replace

from anyio.abc import TaskGroup

from harness.certify import Detector
from harness.engines.base import Completion, GenerationSettings
from harness.loop.arm import gold_answer, with_room_for_forced
from harness.loop.state import RunState

__all__ = ("SerialArm", "serial_settings")


def serial_settings(state: RunState) -> GenerationSettings:
    """One call per reply (arms S and F); under the gold policy the next gold call is forced
    (counted by the tool messages so far, withheld ones included), then the gold answer."""
    base = replace(state.config.generation, parallel_tool_calls=False)
    if state.config.policy == "gold":
        flat = state.task.gold_calls
        done = state.transcript.tool_messages
        if done < len(flat):
            base = replace(base, forced=(flat[done].to_tool_call(f"gold_{done}"),))
        else:
            base = gold_answer(state, base)
    return with_room_for_forced(base)


class SerialArm:
    """Arm S."""

    window_open = False

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
