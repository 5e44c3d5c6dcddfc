"""Generations through the journal: a journaled turn is replayed, never generated again.

:class:`JournaledTurns` is the loop's side of the journal for turns. Before a generation,
:meth:`JournaledTurns.replay` returns the completion the journal holds for that turn — if the
request is the one journaled (same chat, tools and settings, by :func:`prompt_hash`), else the
run has diverged from its journal (:class:`~harness.errors.ReplayDivergence`). After a fresh
generation, :meth:`JournaledTurns.record` journals it. Completions are journaled as the engine
returned them, before the loop renumbers their calls (renumbering is deterministic).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.engines.base import GenerationSettings
from harness.errors import ReplayDivergence
from harness.journal import Journal, completion_from_entry, prompt_hash
from harness.messages import Completion, Message, ToolSpec

__all__ = ("JournaledTurns",)


class JournaledTurns:
    """Replays and records the turns of one run (see the module docstring); ``replayed``
    counts the turns not generated again, ``regenerated`` the journaled turns generated again
    because a journal resumed past damage changed what they were asked."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.replayed = 0
        self.regenerated = 0

    def replay(
        self,
        turn: int,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> Completion | None:
        entry = self.journal.replay.turns.get(turn)
        if entry is None:
            return None
        if entry.get("prompt") != prompt_hash(messages, tools, settings):
            if self.journal.damage is not None:
                # Past damage the chat may differ from the journaled one (a lost outcome is
                # now outcome_unknown): generate the turn again; its calls go through the
                # journal like any other (behind the damage, never run as new).
                self.regenerated += 1
                return None
            raise ReplayDivergence(
                f"Turn {turn} of run {self.journal.run_id!r} asks the engine something else "
                f"than the journal in {self.journal.directory} recorded: the task, the toolset, "
                "the manifest or the settings changed since the run started. Resume with the "
                "same ones, or start a new run.",
                run_id=self.journal.run_id,
                turn=turn,
            )
        self.replayed += 1
        return completion_from_entry(entry["completion"])

    def record(
        self,
        turn: int,
        purpose: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
        completion: Completion,
    ) -> None:
        prompt = prompt_hash(messages, tools, settings)
        self.journal.record_turn(turn, purpose, prompt, completion)
