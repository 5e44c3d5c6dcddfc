"""The client's tools as the proxy certifies them: the client's own specs, annotated from the
effects file (:mod:`harness.tools.effects_file`, the proxy's ``--effects FILE``; its
``load_effects`` and ``effects_from_dict`` are re-exported here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.errors import ConfigError, ToolsetError
from harness.messages import ToolSpec
from harness.tools import Effect, Tool, Toolset
from harness.tools.effects_file import EFFECT_FIELDS, effects_from_dict, load_effects

__all__ = ("EFFECT_FIELDS", "ClientToolset", "effects_from_dict", "load_effects", "toolset_for")


class ClientToolset(Toolset):
    """A client's tools: shown to the model as the client's own specs, byte for byte and in
    the client's order (:meth:`specs`), certified with the effects file's annotations."""

    def __init__(self, tools: Sequence[Tool], specs: Sequence[ToolSpec]) -> None:
        super().__init__(tools, name="client")
        self._client_specs = [dict(s) for s in specs]

    def specs(self) -> list[ToolSpec]:
        return [dict(s) for s in self._client_specs]


def toolset_for(specs: Sequence[ToolSpec], effects: Mapping[str, Effect]) -> ClientToolset:
    """The client's tools (OpenAI specs) with the effects file's annotations applied; a tool
    the file does not name is the worst case (its spec's own ``annotations`` are ignored:
    the file is the one source of effects the proxy trusts)."""
    plain = [_without_annotations(s) for s in specs]
    toolset = Toolset.from_openai(plain, name="client")
    try:
        tools: list[Tool] = []
        for tool in toolset.values():
            effect = effects.get(tool.name)
            tools.append(tool.with_effect(effect) if effect is not None else tool)
        return ClientToolset(tools, specs)
    except ToolsetError as exc:
        raise ConfigError(f"The effects do not fit the request's tools: {exc}") from None


def _without_annotations(spec: ToolSpec) -> dict[str, Any]:
    function = spec.get("function", spec)
    if not isinstance(function, Mapping):
        return dict(spec)
    return {k: v for k, v in function.items() if k != "annotations"}
