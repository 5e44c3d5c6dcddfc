"""The budgets of a run: each ends in :class:`~harness.errors.UsageLimitExceeded` with the
number and the fix, never a silent stop.

Turns (``max_turns``, or the task's own), billed tokens (``max_billed_tokens``; the
wall-clock deadline ``max_wall_s`` is the driver's), consecutive model mistakes
(``max_model_errors``), consecutive tool failures — a tool that raised or timed out, which is
the tool's fault, not the model's (``max_tool_failures``),
the same call emitted turn after turn (``max_identical_calls``), calls discarded under D2
(``flatten.max_discards``) and P+V resamples that would pass the turn budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import UsageLimitExceeded
from harness.loop.config import LoopConfig
from harness.messages import Completion, ToolCall
from harness.tools.execute import ToolResult

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
    tool_failures: int = 0
    consecutive_tool_failures: int = 0


#: Error results that are the tool's failure, not a model mistake.
TOOL_FAILURES = frozenset({"timeout", "tool_raised"})


class Budgets:
    """The counters of one run and the checks on them."""

    def __init__(self, config: LoopConfig, task_id: str, run_id: str, max_turns: int) -> None:
        self.config = config
        self.task_id = task_id
        self.run_id = run_id
        self.max_turns = max_turns
        self.count = Counters()
        self.billed_tokens = 0
        self._last_mistake = ""
        self._last_failure: tuple[str, str] = ("", "")
        self._last_call: tuple[str, str] | None = None
        self._repeats = 0
        self._before_stuck: tuple[tuple[str, str] | None, int] = (None, 0)

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

    def spent(self, billed_tokens: int) -> None:
        """A turn billed ``billed_tokens``: the run must stay within ``max_billed_tokens``."""
        self.billed_tokens += billed_tokens
        budget = self.config.max_billed_tokens
        if budget is not None and self.billed_tokens > budget:
            raise UsageLimitExceeded(
                f"Run {self.run_id!r} billed {self.billed_tokens:,} tokens by turn "
                f"{self.count.turns}, over its budget of {budget:,}; raise "
                "LoopConfig.max_billed_tokens, or lower max_tokens per turn or max_turns.",
                run_id=self.run_id,
                turn=self.count.turns,
            )

    def outcome(
        self, is_error: bool, content: str, kind: str | None = None, tool: str = ""
    ) -> None:
        """A call's outcome: an error result is a model mistake, or a tool failure when the
        tool raised or timed out (``max_tool_failures``); a success resets both. An in-doubt
        call of a resumed run (``outcome_unknown``) is neither: the run was interrupted, the
        model did nothing wrong."""
        if kind == "outcome_unknown":
            return
        if is_error and kind in TOOL_FAILURES:
            self.count.tool_failures += 1
            self.count.consecutive_tool_failures += 1
            self._last_failure = (tool, content)
            return
        if not is_error:
            self.count.consecutive_tool_failures = 0
        if is_error:
            self.count.model_errors += 1
            self.count.consecutive_errors += 1
            self._last_mistake = content
        else:
            self.count.consecutive_errors = 0

    def reach(self, turns: Sequence[int], results: Sequence[ToolResult]) -> int:
        """How many of a window's calls (emitted on ``turns``, in order) the serial arm is
        sure to run, given the results of the first ``len(results)``: it checks the mistake
        and tool-failure budgets after each reply (:meth:`check_errors`), so it stops after
        the reply whose results pass either, and it reaches a call not yet run only if no
        check before it could stop it even if every call before it (result still unknown)
        failed. Arm F runs no window call past this count (:class:`~harness.certify.window.
        Window`), so it never executes a call the serial arm would not have reached."""
        count = self.count
        failures, mistakes = count.consecutive_tool_failures, count.consecutive_errors
        limit_f, limit_m = self.config.max_tool_failures, self.config.max_model_errors
        n = len(turns)
        for j, result in enumerate(results[:n]):
            failures, mistakes = _after(failures, mistakes, result)
            if (
                j + 1 < n
                and turns[j + 1] != turns[j]
                and (failures > limit_f or mistakes > limit_m)
            ):
                return j + 1
        i = known = min(len(results), n)
        while i < n:
            if i > known:  # call i - 1 is still unknown: in the worst case it failed
                failures, mistakes = failures + 1, mistakes + 1
                if turns[i] != turns[i - 1] and (failures > limit_f or mistakes > limit_m):
                    break
            i += 1
        return i

    def cut_off(self, limit: int) -> None:
        """A reply cut at ``limit`` tokens with no usable call: a mistake."""
        self.count.model_errors += 1
        self.count.consecutive_errors += 1
        self._last_mistake = f"a reply cut off at {limit} tokens with no usable call"
        self.check_errors()

    def check_errors(self) -> None:
        if self.count.consecutive_tool_failures > self.config.max_tool_failures:
            tool, content = self._last_failure
            raise UsageLimitExceeded(
                f"Tool '{tool}' failed: {self.count.consecutive_tool_failures} tool calls in a "
                f"row raised or timed out (last: {content[:160]}); the budget is "
                f"max_tool_failures={self.config.max_tool_failures}. The tool failed, not the "
                "model: fix it or raise its timeout_s, or raise max_tool_failures.",
                run_id=self.run_id,
                tool=tool or None,
                turn=self.count.turns,
            )
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
        self._before_stuck = (self._last_call, self._repeats)
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

    def unsee(self) -> None:
        """The completion :meth:`check_stuck` last counted was discarded whole (arm F: it was
        generated while a result it needed was withheld, and is regenerated after the absorb
        turn): the serial arm never saw it, so it does not count toward the stuck guard."""
        self._last_call, self._repeats = self._before_stuck


def _after(failures: int, mistakes: int, result: ToolResult) -> tuple[int, int]:
    """The consecutive tool failures and mistakes after ``result``, as :meth:`Budgets.outcome`
    counts them."""
    if result.error_kind == "outcome_unknown":
        return failures, mistakes
    if not result.is_error:
        return 0, 0
    if result.error_kind in TOOL_FAILURES:
        return failures + 1, mistakes
    return failures, mistakes + 1
