"""A task: what one agent loop is asked to do, and (for seeded workloads) its gold answer.

The loop needs only ``prompt`` (and optionally ``system``: ``None`` is the loop's default
system prompt, ``""`` none at all; the ``skill`` whose manifest
phases the certifier uses, and the task ``inputs`` the manifest's ``input:FIELD`` sources and
slot counts refer to). ``gold_steps`` and ``gold_answer`` are the calls a correct run makes,
decided by construction: each step is a group of calls (a fan-out window is one group, a chain
call is a group of one). Serial arms (S, F) emit them one per turn in order; native-parallel
arms (P, P+V) emit each group in one message. The *gold* policy forces the engine to emit
exactly these (the engine still prefills and decodes every token); the *oracle* policy forces
them as far as the visible context shows their values, and states of ``gold_answer`` only the
``answer_facts`` it has seen.

A task may continue an existing conversation: ``history`` holds OpenAI-format messages
(system, user, assistant with ``tool_calls``, tool results) that the run starts from instead
of ``system`` + ``prompt``; :meth:`Task.from_messages` builds one, checked and normalised by
:mod:`harness.loop.openai_format`. A non-empty ``prompt`` is then appended as a new user message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.errors import ConfigError
from harness.loop.openai_format import messages_from_openai
from harness.messages import Message, ToolCall

__all__ = ("GoldCall", "Task")


@dataclass(frozen=True)
class GoldCall:
    """One call of a gold run: a tool name and its arguments."""

    name: str
    arguments: Mapping[str, Any]

    def to_tool_call(self, call_id: str) -> ToolCall:
        return ToolCall(call_id, self.name, json.dumps(dict(self.arguments), sort_keys=True))

    def matches(self, call: ToolCall) -> bool:
        """Whether a model's call is this gold call (same tool, same parsed arguments)."""
        try:
            return call.name == self.name and call.parsed_arguments() == dict(self.arguments)
        except ValueError:
            return False


@dataclass(frozen=True)
class Task:
    """One loop task. See the module docstring."""

    id: str
    prompt: str
    system: str | None = None
    skill: str | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict)
    gold_steps: tuple[tuple[GoldCall, ...], ...] = ()
    gold_answer: str | None = None
    max_turns: int | None = None
    #: The values the gold answer reports from tool results (the context-bound oracle states
    #: each only when a visible result holds it; :mod:`harness.loop.oracle`).
    answer_facts: tuple[str, ...] = ()
    history: tuple[Message, ...] = ()

    @classmethod
    def from_messages(
        cls,
        messages: Iterable[Any],
        *,
        id: str = "conversation",
        prompt: str = "",
        skill: str | None = None,
        inputs: Mapping[str, Any] | None = None,
        max_turns: int | None = None,
    ) -> Task:
        """A task that continues ``messages``, an OpenAI-format history (dicts or the openai
        SDK's message objects), optionally with one more user message ``prompt``.

        The history must end where the model speaks next: after a user message or a tool
        result (or pass ``prompt``). A history without a system message gets the loop's
        default one in front. Raises :class:`~harness.errors.ConfigError` naming the message
        at fault.
        """
        history = messages_from_openai(messages)
        if not history and not prompt:
            raise ConfigError("Task.from_messages got no messages and no prompt; pass either.")
        if history and history[-1]["role"] == "assistant" and not prompt:
            raise ConfigError(
                f"The history ends with an assistant message (message {len(history) - 1}), so "
                "the model has already answered; append a user message (or pass prompt=) "
                "to continue it."
            )
        return cls(
            id=id,
            prompt=prompt,
            skill=skill,
            inputs=dict(inputs or {}),
            max_turns=max_turns,
            history=tuple(history),
        )

    @property
    def gold_calls(self) -> tuple[GoldCall, ...]:
        """The gold calls in serial order."""
        return tuple(call for step in self.gold_steps for call in step)
