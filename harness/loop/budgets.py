"""The budgets of a run: each ends in :class:`~harness.errors.UsageLimitExceeded` with the
number and the fix, never a silent stop.

Turns (``max_turns``, or the task's own), consecutive model mistakes (``max_model_errors``),
the same call emitted turn after turn (``max_identical_calls``), calls discarded under D2
(``flatten.max_discards``) and P+V resamples that would pass the turn budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.engines.base import Completion, ToolCall
from harness.errors import UsageLimitExceeded
from harness.loop.config import LoopConfig

__all__ = ("Budgets", "Counters")


@dataclass
class Counters:
    """What the run summary counts."""

    turns: int = 0
    windows: int = 0
    discards: int = 0
    resamples: int = 0
    model_errors: int = 0
    consecutive_errors: int = 0


class Budgets:
    """The counters of one run and the checks on them."""

    def __init__(self, config: LoopConfig, task_id: str, run_id: str, max_turns: int) -> None:
        self.config = config
        self.task_id = task_id
        self.run_id = run_id
        self.max_turns = max_turns
        self.count = Counters()
        self._last_mistake = ""
        self._last_call: tuple[str, str] | None = None
        self._repeats = 0

    def check_turns(self) -> None:
        """One more generation must fit in the turn budget."""
        if self.count.turns >= self.max_turns:
            raise UsageLimitExceeded(
                f"Task {self.task_id!r} reached its limit of {self.max_turns} turns without a "
                "final answer; raise max_turns or check the prompt.",
                run_id=self.run_id,
                turn=self.count.turns,
            )

    def check_resample(self, k: int) -> None:
        """P+V is about to draw ``k`` candidates: they must fit in the turn budget."""
        if self.count.turns + k > self.max_turns:
            raise UsageLimitExceeded(
                f"Task {self.task_id!r} would pass its limit of {self.max_turns} turns while "
                f"resampling a rejected window ({k} candidates); raise max_turns or lower "
                "max_resamples.",
                run_id=self.run_id,
                turn=self.count.turns,
            )

    def outcome(self, is_error: bool, content: str) -> None:
        """A call's outcome: an error result is a model mistake; a success resets the run."""
        if is_error:
            self.count.model_errors += 1
            self.count.consecutive_errors += 1
            self._last_mistake = content
        else:
            self.count.consecutive_errors = 0

    def cut_off(self, limit: int) -> None:
        """A reply cut at ``limit`` tokens with no usable call: a mistake."""
        self.count.model_errors += 1
        self.count.consecutive_errors += 1
        self._last_mistake = f"a reply cut off at {limit} tokens with no usable call"
        self.check_errors()

    def check_errors(self) -> None:
        if self.count.consecutive_errors > self.config.max_model_errors:
            raise UsageLimitExceeded(
                f"The model made {self.count.consecutive_errors} mistakes in a row (last: "
                f"{self._last_mistake[:160]}); the budget is {self.config.max_model_errors}. "
                "Check the prompt and tool descriptions, or raise max_model_errors.",
                run_id=self.run_id,
                turn=self.count.turns,
            )

    def discarded(self, call: ToolCall, reason: str) -> None:
        """One more call discarded under D2."""
        self.count.discards += 1
        limit = self.config.flatten.max_discards
        if self.count.discards > limit:
            raise UsageLimitExceeded(
                f"{self.count.discards} calls were discarded under D2 (last: {reason}); the "
                f"budget is {limit}. Declare slot counts in the manifest so windows "
                "close before dependent calls are generated.",
                run_id=self.run_id,
                call_id=call.id,
                tool=call.name,
                turn=self.count.turns,
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
                turn=self.count.turns,
            )
