"""Executing calls through the journal: replay what is known, decide what is in doubt, and
write the intent of everything else before it starts.

For each call, :meth:`JournaledCalls.execute` does exactly one of:

``replay``   its outcome is journaled: return it as it was, never execute it again;
``late``     it was abandoned (cancelled sync call) and its thread's outcome was journaled
             after: return that outcome, never execute it again;
``retry``    it is in doubt (intent, no outcome) and safe to repeat — read-only, idempotent,
             or the tool accepts an idempotency key: run it again with the **same key**;
``unknown``  it is in doubt and not safe to repeat: do not run it; the model and the ledger
             get an ``outcome_unknown`` error result saying so (journaled, so a second resume
             says the same);
``live``     never seen: journal the intent (on disk), run it with its key, journal the
             outcome (on disk).

A journal resumed past damage (:mod:`harness.journal.damage`) may have lost a call's records:
a call *behind the damage* with no readable entry is treated as in doubt (``retry`` when safe,
else ``unknown``), never run as new.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from harness.errors import ReplayDivergence
from harness.journal import Journal, idempotency_key, result_from_entry
from harness.messages import ToolCall
from harness.tools.execute import ToolResult, execute_call, render_result
from harness.tools.toolset import Tool, Toolset, ToolThread

__all__ = ("Decision", "JournaledCalls", "outcome_unknown", "retry_is_safe")

Decision = Literal["replay", "late", "retry", "unknown", "live"]


def retry_is_safe(tool: Tool | None) -> bool:
    """A call of ``tool`` whose outcome is in doubt may run again: it writes nothing, writing
    twice equals writing once, or the tool drops a second write with the same key."""
    if tool is None:
        return True  # an unknown tool never ran: it is an error result again
    effect = tool.effect
    return effect.read_only or effect.idempotent or effect.accepts_idempotency_key


def outcome_unknown(call: ToolCall, now: float = 0.0, *, damaged: bool = False) -> ToolResult:
    """The result shown for an in-doubt call that is not run again (``damaged``: its record
    may have been lost in a damaged journal)."""
    why = (
        "the run's journal was damaged where this call may have been recorded, so it may "
        "already have run"
        if damaged
        else "the run was interrupted after the call started and before its result was recorded"
    )
    return ToolResult(
        call.id,
        call.name,
        f"Error: the outcome of this '{call.name}' call is unknown: {why}. It was not run "
        "again because it is not idempotent and takes no idempotency key. Check whether it "
        "took effect before calling it again.",
        True,
        "outcome_unknown",
        None,
        now,
        now,
    )


def _late_result(call: ToolCall, settled: dict[str, object]) -> ToolResult:
    if settled.get("status") == "raised":
        return ToolResult(
            call.id, call.name, f"Error: Tool '{call.name}' raised {settled.get('error')}",
            True, "tool_raised",
        )  # fmt: skip
    value = settled.get("value")
    return ToolResult(call.id, call.name, render_result(value), False, None, value)


class JournaledCalls:
    """Runs the calls of one run through its journal (see the module docstring).

    ``on_abandon(call, thread)`` is told about sync calls whose thread outlived the call
    (the journal records their late outcome by itself). Counters: ``replayed`` (calls not
    executed because their outcome was journaled), ``retried`` and ``unknown`` (in-doubt
    calls run again with their key, or surfaced as ``outcome_unknown``).
    """

    def __init__(
        self,
        journal: Journal,
        toolset: Toolset,
        *,
        on_abandon: Callable[[ToolCall, ToolThread], None] | None = None,
    ) -> None:
        self.journal = journal
        self.toolset = toolset
        self._on_abandon = on_abandon
        #: The turn that emitted a call (the loop sets it); the horizon of a damaged journal.
        self.turn_of: Callable[[str], int | None] = lambda call_id: None
        self.replayed: list[str] = []
        self.retried: list[str] = []
        self.unknown: list[str] = []

    def decide(self, call: ToolCall) -> Decision:
        """What :meth:`execute` will do with ``call`` (see the module docstring)."""
        replay = self.journal.replay
        if call.id in replay.outcomes:
            return "replay"
        if call.id in replay.settled:
            return "late"
        if call.id in replay.intents or self._behind_damage(call):
            return "retry" if retry_is_safe(self.toolset.get(call.name)) else "unknown"
        return "live"

    def _behind_damage(self, call: ToolCall) -> bool:
        horizon = self.journal.horizon
        return horizon is not None and horizon.behind(call.id, self.turn_of(call.id))

    def _check_same_call(self, call: ToolCall) -> None:
        intent = self.journal.replay.intents.get(call.id)
        if intent is None:
            return
        if (intent.get("tool"), intent.get("arguments")) != (call.name, call.arguments):
            raise ReplayDivergence(
                f"Call {call.id} is {call.name}({call.arguments[:80]}) in this run but the "
                f"journal in {self.journal.directory} recorded {intent.get('tool')}"
                f"({str(intent.get('arguments'))[:80]}): the run diverged from its journal. "
                "Resume with the same task, toolset and settings, or start a new run.",
                run_id=self.journal.run_id,
                call_id=call.id,
                tool=call.name,
            )

    async def execute(
        self, call: ToolCall, *, turn: int | None = None, mode: str = "", window: int | None = None
    ) -> ToolResult:
        """Run (or replay, or surface) ``call``; ``turn``, ``mode`` and ``window`` only
        annotate its intent (the :class:`~harness.tools.execute.Executor` protocol passes the call)."""
        decision = self.decide(call)
        self._check_same_call(call)
        replay = self.journal.replay
        if decision == "replay":
            self.replayed.append(call.id)
            self.journal.state.note(call.id, "replayed")
            return result_from_entry(replay.outcomes[call.id])
        if decision == "late":
            self.replayed.append(call.id)
            result = _late_result(call, replay.settled[call.id])
            self.journal.record_outcome(result, replayed=True)
            return result
        if decision == "unknown":
            self.unknown.append(call.id)
            result = outcome_unknown(call, damaged=call.id not in replay.intents)
            self.journal.record_outcome(result)
            return result
        if decision == "retry":
            self.retried.append(call.id)
        key = idempotency_key(self.journal.run_id, call.id)
        self.journal.record_intent(call, key=key, turn=turn, mode=mode, window=window)
        result = await execute_call(
            self.toolset, call, idempotency_key=key, on_abandon=self._abandoned
        )
        self.journal.record_outcome(result)
        return result

    # -- the SpeculationRecord capability (harness.tools.execute): what arm F+spec asks ------------

    async def speculate(self, call: ToolCall) -> ToolResult:
        """Run a speculative ``call``, journaled as ``speculative``; speculated in an earlier
        attempt: its recorded outcome (not counted as a replay)."""
        recorded = self.journal.replay.outcomes.get(call.id)
        if recorded is not None:
            return result_from_entry(recorded)
        return await self.execute(call, mode="speculative")

    def decided(self, call: ToolCall) -> bool:
        """Whether the journal already decides ``call`` (anything but ``live``)."""
        return self.decide(call) != "live"

    def adopted(self, call: ToolCall, speculative: ToolCall, result: ToolResult) -> None:
        """Journal ``call`` as ``speculated``: its intent (under the speculation's idempotency
        key: the tool ran once, as ``speculative``) and ``result``."""
        key = idempotency_key(self.journal.run_id, speculative.id)
        self.journal.record_intent(call, key=key, turn=None, mode="speculated", window=None)
        self.journal.record_outcome(result)

    def _abandoned(self, call: ToolCall, thread: ToolThread) -> None:
        thread.on_end(lambda ended: self.journal.record_settled(call, ended))
        if self._on_abandon is not None:
            self._on_abandon(call, thread)
