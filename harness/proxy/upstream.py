"""How the proxy serves its client's ``tool_choice``.

The engine seam carries it (``GenerationSettings.tool_choice``, typed as
:data:`~harness.engines.base.ToolChoice`): the embedded engine forces it with its reply
grammar, an OpenAI-compatible server upstream (``harness serve --upstream``,
``--tool-format openai``) gets it in each request. An engine that can do neither (a server
with ``--tool-format harness``, a test double, any other
:class:`~harness.engines.base.Engine`) is no :class:`~harness.engines.base.ToolChoiceEngine`:
:func:`choice_plan` then serves the request serially and says why (never a silent ``"auto"``
in place of what the client asked).

What each value gets (:func:`choice_plan`), in Chat Completions' terms (the Responses and
Messages APIs translate theirs to it):

- absent or ``"auto"``: as ever (flattened when a window certifies);
- ``"required"``: passed on with every upstream generation of the request, so each serial
  turn is a call and a gathered window (one or more calls) satisfies it;
- ``"none"``: passed on, served serially (no call can open a window);
- a named function (:class:`~harness.engines.base.NamedTool`) and any other object
  (``allowed_tools``, ...: :class:`~harness.engines.base.OtherToolChoice`, which only a
  server upstream takes, as sent): passed on and served serially, one turn per response —
  the turns after the first of a window would be forced too, which a serial client may not
  have asked for — with a note in ``X-Harness-Warning``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.engines import base
from harness.engines.base import Engine, NamedTool, OtherToolChoice, ToolChoice
from harness.engines.openai_http import OpenAIHTTPEngine

__all__ = ("ChoicePlan", "choice_plan", "takes_tool_choice")


def takes_tool_choice(engine: Engine, choice: ToolChoice = "required") -> bool:
    """``engine`` gives its model ``choice`` (see the module docstring): it is a
    :class:`~harness.engines.base.ToolChoiceEngine` that takes it now, and an object the
    harness does not interpret goes only to a server upstream."""
    if not base.takes_tool_choice(engine):
        return False
    return not isinstance(choice, OtherToolChoice) or isinstance(engine, OpenAIHTTPEngine)


@dataclass(frozen=True)
class ChoicePlan:
    """How one request's ``tool_choice`` is served: ``serial`` (no window gathered),
    ``forward`` (what the upstream gets; ``None``: nothing), ``note`` (a sentence for
    ``X-Harness-Warning``, or ``None``)."""

    serial: bool
    forward: ToolChoice | None
    note: str | None = None


def describe(choice: ToolChoice) -> str:
    """``choice`` in a sentence, bounded."""
    if isinstance(choice, str):
        return repr(choice)
    if isinstance(choice, NamedTool):
        return f"function {choice.name[:100]!r}"
    return json.dumps(choice.value, ensure_ascii=False, default=str)[:120]


def choice_plan(choice: ToolChoice | None, engine: Engine, upstream: str) -> ChoicePlan:
    """How the proxy serves ``choice`` over ``engine`` (see the module docstring)."""
    if choice is None or choice == "auto":
        return ChoicePlan(serial=False, forward=choice)
    if not takes_tool_choice(engine, choice):
        return ChoicePlan(
            serial=True,
            forward=None,
            note=f"tool_choice {describe(choice)} was not passed on: the upstream ({upstream}) "
            + (
                "takes no tool_choice objects other than a named function (run harness serve "
                "--upstream URL with --tool-format openai)"
                if takes_tool_choice(engine)
                else "takes no tool_choice (run harness serve --upstream URL with --tool-format "
                "openai, or the embedded engine)"
            )
            + "; served serially, the choice not enforced",
        )
    if choice == "required":
        return ChoicePlan(serial=False, forward=choice)
    if choice == "none":
        return ChoicePlan(serial=True, forward=choice)
    return ChoicePlan(
        serial=True,
        forward=choice,
        note=f"tool_choice {describe(choice)} is served serially (one turn per response): "
        "the proxy gathers no window under it; send 'auto' or 'required' to have windows "
        "flattened",
    )
