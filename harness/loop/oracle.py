"""The context-bound oracle: a perfect agent that may use only what its context shows.

The *gold* policy forces the task's gold calls whatever the context holds, so a call generated
while a result it needed was withheld still gets the right argument and a false fill costs
nothing. The *oracle* policy follows the same plan (the next gold call, counted by the tool
messages so far, or the next gold step with parallel prompting, then the answer) and is forced
through the engine's constrained decoding the same way, but it resolves every argument from
the messages visible at that turn (:class:`ContextView`):

* a value is **shown** when it is one of the task inputs (the prompt names them: any value
  inside ``Task.inputs``) or named whole-word in the user's prompt, or when a visible tool
  message holds it (a value of its JSON, at any depth; the canonical spelling of
  :func:`~harness.tools.effects.canonical_text`). A tool message that holds the window's marker
  shows nothing.
* **The stale rule** (one rule, for every argument): a value the context does not show is
  replaced by the *last value it used for that argument* — the value of the same-named
  argument in the latest call in the context that has one — or, when no earlier call has
  such an argument, by the marker text itself. It is the guess a real model makes (the issue's
  ``read_doc("d417")``): the marker alone would be caught by every detector's D2 check
  (discarded and regenerated, so it would never cost accuracy), while a stale value is the
  undetectable kind a false fill has to be priced for.
* **The answer** states only facts it has seen: each of the task's ``answer_facts`` (the
  values the gold answer reports from results) that no visible tool message holds is replaced
  in the gold answer by ``unknown``.

Where the context shows everything the gold calls need (S, P, P+V, and F under the
schema-sound detector, which never withholds a result a call needs), the oracle's calls and
answer are the gold ones, token for token. Under a false fill (a certified window with a
dependent edge, e.g. the phase-heuristic detector on a chain) it reads the wrong document,
writes the wrong one, or answers ``unknown``, and the task's gold label fails (or the run ends
in the stuck guard, as a repeating model's does).

It checks argument *values*, not the reasoning that chose a call: a call whose existence
depends on a withheld result (which documents ``triage`` approves) is still made when its
values are shown elsewhere (the keys are in the prompt).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.certify import DEFAULT_MARKER
from harness.certify.provenance import InputValues, result_values
from harness.engines.base import GenerationSettings
from harness.loop.task import GoldCall, Task
from harness.loop.transcript import Transcript
from harness.messages import Message
from harness.tools.effects import canonical_text

__all__ = ("UNKNOWN", "ContextView", "OraclePolicy")

#: What the oracle's answer says in place of a fact it has not seen.
UNKNOWN = "unknown"


def _spellings(value: Any) -> frozenset[str]:
    """The canonical spellings of every scalar inside ``value``: what it takes to show it."""
    if isinstance(value, Mapping | list | tuple):
        text = json.dumps(value, default=str)
        return result_values(text) - {text}
    try:
        return frozenset({canonical_text(value)})
    except TypeError:  # a value with no canonical form shows nothing
        return frozenset()


def _words(text: str) -> str:
    return " " + " ".join(re.split(r"[^0-9a-z]+", text.casefold())).strip() + " "


@dataclass(frozen=True)
class ContextView:
    """What one turn's context shows: the task inputs and the user's prompt, the values the
    visible tool messages hold, and the arguments of the calls in the context (in order)."""

    inputs: frozenset[str]
    prompt: str
    results: tuple[frozenset[str], ...]
    arguments: tuple[Mapping[str, Any], ...]

    @classmethod
    def of(cls, task: Task, messages: Sequence[Message], marker: str) -> ContextView:
        prompt = " ".join(str(m.get("content") or "") for m in messages if m["role"] == "user")
        results = tuple(
            result_values(str(m.get("content") or ""))
            for m in messages
            if m["role"] == "tool" and m.get("content") != marker
        )
        arguments: list[Mapping[str, Any]] = []
        for m in messages:
            for call in m.get("tool_calls") or ():
                try:
                    parsed = json.loads(call["function"]["arguments"])
                except (KeyError, TypeError, ValueError):
                    continue
                if isinstance(parsed, dict):
                    arguments.append(parsed)
        return cls(
            frozenset(InputValues(task.inputs).every), _words(prompt), results, tuple(arguments)
        )

    def in_results(self, value: Any) -> bool:
        """Whether a visible tool message holds every part of ``value``."""
        wanted = _spellings(value)
        return bool(wanted) and all(any(w in r for r in self.results) for w in wanted)

    def shows(self, value: Any) -> bool:
        """Whether the context shows ``value`` (module docstring)."""
        wanted = _spellings(value)
        if not wanted:
            return False
        return all(
            w in self.inputs
            or (w.strip() != "" and _words(w) in self.prompt)
            or any(w in r for r in self.results)
            for w in wanted
        )

    def stale(self, argument: str, marker: str) -> Any:
        """The last value the context's calls used for ``argument``, else the marker."""
        for arguments in reversed(self.arguments):
            if argument in arguments:
                return arguments[argument]
        return marker


@dataclass(frozen=True)
class OraclePolicy:
    """The gold plan, with every argument resolved from the visible context (module
    docstring). ``marker``: the text that stands in for a withheld result."""

    marker: str = DEFAULT_MARKER

    def resolve(self, call: GoldCall, view: ContextView) -> GoldCall:
        """``call`` with each argument the context does not show replaced by its stale value."""
        arguments = {
            name: value if view.shows(value) else view.stale(name, self.marker)
            for name, value in call.arguments.items()
        }
        return GoldCall(call.name, arguments)

    def answer(self, task: Task, view: ContextView) -> str:
        """The gold answer with every fact no visible tool message holds replaced by
        :data:`UNKNOWN`."""
        text = task.gold_answer or "Done."
        for fact in task.answer_facts:
            if not view.in_results(fact):
                text = re.sub(
                    rf"(?<![0-9A-Za-z]){re.escape(fact)}(?![0-9A-Za-z])",
                    UNKNOWN,
                    text,
                    flags=re.IGNORECASE,
                )
        return text

    def steer(
        self, task: Task, transcript: Transcript, base: GenerationSettings, *, step: int | None
    ) -> GenerationSettings:
        view = ContextView.of(task, transcript.messages, self.marker)
        if step is None:
            flat = task.gold_calls
            done = transcript.tool_messages
            if done < len(flat):
                call = self.resolve(flat[done], view)
                return replace(base, forced=(call.to_tool_call(f"gold_{done}"),))
        elif step < len(task.gold_steps):
            calls = [self.resolve(g, view) for g in task.gold_steps[step]]
            return replace(
                base, forced=tuple(c.to_tool_call(f"gold_{i}") for i, c in enumerate(calls))
            )
        return replace(base, forced=(), forced_answer=self.answer(task, view))
