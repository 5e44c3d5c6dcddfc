"""What the proxy passes to its upstream beyond the engine seam: the client's ``tool_choice``.

The engine seam (:class:`~harness.engines.base.GenerationSettings`) has no ``tool_choice``:
the loop never needs one. The proxy's clients do (smolagents' ``ToolCallingAgent`` sends
``"required"`` on every request), so the proxy carries it in :class:`ProxySettings` (the
same settings with one field more; ``dataclasses.replace`` keeps the subclass through the
loop) and :class:`UpstreamEngine` — the OpenAI-compatible HTTP engine ``harness serve
--upstream`` runs — writes it into each upstream request. An engine that cannot carry it
(the embedded engine, a server engine with ``tool_format="harness"``, any other
:class:`~harness.engines.base.Engine`) says so by lacking :attr:`UpstreamEngine.takes_tool_choice`:
:func:`choice_plan` then serves the request serially and says why (never a silent
``"auto"`` in place of what the client asked).

What each value gets (:func:`choice_plan`), in Chat Completions' spelling (the Responses and
Messages APIs translate theirs to it):

- absent or ``"auto"``: as ever (flattened when a window certifies);
- ``"required"``: passed on with every upstream generation of the request, so each serial
  turn is a call and a gathered window (one or more calls) satisfies it;
- ``"none"``: passed on, served serially (no call can open a window);
- a named function ``{"type": "function", "function": {"name": ...}}`` and any other object
  (``allowed_tools``, ...): passed on as sent and served serially, one turn per response —
  the turns after the first of a window would be forced too, which a serial client may not
  have asked for — with a note in ``X-Harness-Warning``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.engines.base import Engine, GenerationSettings
from harness.engines.openai_http import OpenAIHTTPEngine
from harness.messages import Message, ToolSpec

__all__ = ("ChoicePlan", "ProxySettings", "UpstreamEngine", "choice_plan", "takes_tool_choice")

#: A ``tool_choice`` as Chat Completions spells it: ``"auto"``, ``"none"``, ``"required"`` or
#: an object (a named function, ``allowed_tools``, ...).
ToolChoice = str | Mapping[str, Any]


@dataclass(frozen=True)
class ProxySettings(GenerationSettings):
    """:class:`~harness.engines.base.GenerationSettings` with the client's ``tool_choice``
    (``None``: not sent; the upstream's default applies)."""

    tool_choice: ToolChoice | None = None


class UpstreamEngine(OpenAIHTTPEngine):
    """:class:`~harness.engines.openai_http.OpenAIHTTPEngine` that passes each request's
    ``tool_choice`` (:class:`ProxySettings`) on as the client sent it."""

    @property
    def takes_tool_choice(self) -> bool:
        """Tools go in the request (``tool_format="openai"``), so ``tool_choice`` can too."""
        return self.tool_format == "openai"

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> tuple[dict[str, Any], str | None]:
        # The engine's own request builder, then the client's tool_choice over its "auto".
        # A hook on a private method: if the engine seam gains a tool_choice of its own
        # (GenerationSettings), this class and ProxySettings go and the engine sends it.
        body, forced = super()._body(messages, tools, settings)
        choice = getattr(settings, "tool_choice", None)
        if choice is not None and forced is None and "tools" in body:
            body["tool_choice"] = choice
        return body, forced


def takes_tool_choice(engine: Engine) -> bool:
    """``engine`` passes a request's ``tool_choice`` to its model (see the module docstring)."""
    return getattr(engine, "takes_tool_choice", False) is True


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
    name = choice.get("function", {}).get("name") if choice.get("type") == "function" else None
    if isinstance(name, str):
        return f"function {name!r}"
    return json.dumps(choice, ensure_ascii=False, default=str)[:120]


def choice_plan(choice: ToolChoice | None, engine: Engine, upstream: str) -> ChoicePlan:
    """How the proxy serves ``choice`` over ``engine`` (see the module docstring)."""
    if choice is None or choice == "auto":
        return ChoicePlan(serial=False, forward=choice)
    if not takes_tool_choice(engine):
        return ChoicePlan(
            serial=True,
            forward=None,
            note=f"tool_choice {describe(choice)} was not passed on: the upstream ({upstream}) "
            "takes no tool_choice (run harness serve --upstream URL with --tool-format "
            "openai); served serially, the choice not enforced",
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
