"""The effects file: effect annotations for OpenAI-style tools, no Python needed.

A client sends its tools as OpenAI function specs; what each tool does to the world (the
evidence for D1) comes from this file, TOML or JSON, one table per tool name::

    [tools.read_doc]
    read_only = true
    read_targets = "doc:{key}"      # a template, or a list of templates
    canonical = "case"              # how the store folds names: fold steps, or {arg: steps}

    [tools.set_status]
    idempotent = true
    destructive = false
    write_targets = "doc:{key}/status"
    read_targets = []               # a blind write: reads nothing

Fields: ``read_only``, ``idempotent``, ``destructive``, ``open_world``,
``accepts_idempotency_key`` (booleans), ``write_targets``, ``read_targets`` (template or list
of templates), ``canonical``; each becomes :meth:`harness.tools.effects.Effect.declare`. A tool the
file does not name keeps the worst case (it never joins a window). Every mistake is a
:class:`~harness.errors.ConfigError` naming the file, the tool and the field.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, ToolsetError
from harness.messages import ToolSpec
from harness.tools.effects import Effect
from harness.tools.toolset import Tool, Toolset

__all__ = ("EFFECT_FIELDS", "ClientToolset", "effects_from_dict", "load_effects", "toolset_for")

_BOOLS = ("read_only", "idempotent", "destructive", "open_world", "accepts_idempotency_key")
_TARGETS = ("write_targets", "read_targets")
EFFECT_FIELDS = (*_BOOLS, *_TARGETS, "canonical")


def load_effects(path: str | Path) -> dict[str, Effect]:
    """Read an effects file (``.toml`` or ``.json``): tool name -> :class:`Effect`."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"Cannot read effects file {source}: {exc.strerror or exc}.") from None
    try:
        if source.suffix.lower() == ".json":
            data: Any = json.loads(text)
        else:
            data = tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if source.suffix.lower() == ".json" else "TOML"
        raise ConfigError(f"Effects file {source} is not valid {kind}: {exc}.") from None
    return effects_from_dict(data, str(source))


def effects_from_dict(data: Any, source: str = "<memory>") -> dict[str, Effect]:
    """Effects from the file's parsed form ``{"tools": {name: {field: value}}}``."""
    if not isinstance(data, Mapping) or not isinstance(data.get("tools"), Mapping):
        raise ConfigError(
            f"Effects file {source} needs a 'tools' table: one [tools.NAME] table per tool."
        )
    unknown_top = sorted(set(data) - {"tools", "version", "description"})
    if unknown_top:
        raise ConfigError(
            f"Effects file {source}: unknown top-level field(s) {unknown_top}; "
            "use 'tools' (and optionally 'version', 'description')."
        )
    return {str(name): _effect(source, str(name), raw) for name, raw in data["tools"].items()}


def _effect(source: str, name: str, raw: Any) -> Effect:
    where = f"Effects file {source}, tool {name!r}"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a table of fields, got {type(raw).__name__}.")
    unknown = sorted(set(raw) - set(EFFECT_FIELDS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {unknown}; known: {', '.join(EFFECT_FIELDS)}."
        )
    for key in _BOOLS:
        if key in raw and not isinstance(raw[key], bool):
            raise ConfigError(f"{where}: field {key!r} must be true or false, got {raw[key]!r}.")
    targets: dict[str, str | tuple[str, ...]] = {}
    for key in _TARGETS:
        if key not in raw:
            continue
        value = raw[key]
        if isinstance(value, str):
            targets[key] = value
        elif isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
            targets[key] = tuple(value)
        else:
            raise ConfigError(
                f"{where}: field {key!r} must be a template string or a list of them, "
                f"got {value!r}."
            )
    canonical = raw.get("canonical")
    if canonical is not None and not isinstance(canonical, str | Mapping | list):
        raise ConfigError(
            f"{where}: field 'canonical' must be fold steps ('case+nfkc'), a list of steps or "
            f"a table argument -> steps, got {canonical!r}."
        )
    try:
        effect = Effect.declare(
            read_only=bool(raw.get("read_only", False)),
            idempotent=raw.get("idempotent"),
            destructive=raw.get("destructive"),
            open_world=bool(raw.get("open_world", False)),
            write_targets=targets.get("write_targets"),
            read_targets=targets.get("read_targets"),
            canonical=canonical,
        )
    except (ToolsetError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if raw.get("accepts_idempotency_key"):
        effect = replace(effect, accepts_idempotency_key=True)
    return effect


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
