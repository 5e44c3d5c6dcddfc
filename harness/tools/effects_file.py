"""The effects file: effect annotations for tools, no Python needed.

A client sends its tools as OpenAI function specs, an MCP server lists its own; what each tool
does to the world (the evidence for D1) comes from this file, TOML or JSON, one table per
tool name (the proxy's ``--effects``, ``harness certify --mcp-server ... --effects``)::

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
from harness.tools.effects import Effect
from harness.tools.identity import each, in_root

__all__ = ("EFFECT_FIELDS", "IDENTITY_KINDS", "effects_from_dict", "load_effects")

_BOOLS = (
    "read_only",
    "idempotent",
    "destructive",
    "open_world",
    "accepts_idempotency_key",
    "ancestors",
)
_TARGETS = ("write_targets", "read_targets")
EFFECT_FIELDS = (*_BOOLS, *_TARGETS, "canonical", "identity")
#: What an ``identity`` table may say of an argument.
IDENTITY_KINDS = ("path", "each path")


def load_effects(path: str | Path, *, root: str | None = None) -> dict[str, Effect]:
    """Read an effects file (``.toml`` or ``.json``): tool name -> :class:`Effect`. ``root``
    replaces the file's own ``root`` (the certification kit gives each server a directory
    of its own)."""
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
    return effects_from_dict(data, str(source), root=root)


def effects_from_dict(
    data: Any, source: str = "<memory>", *, root: str | None = None
) -> dict[str, Effect]:
    """Effects from the file's parsed form ``{"root": ..., "tools": {name: {field: value}}}``;
    ``root`` replaces the file's own."""
    if not isinstance(data, Mapping) or not isinstance(data.get("tools"), Mapping):
        raise ConfigError(
            f"Effects file {source} needs a 'tools' table: one [tools.NAME] table per tool."
        )
    unknown_top = sorted(set(data) - {"tools", "root", "version", "description"})
    if unknown_top:
        raise ConfigError(
            f"Effects file {source}: unknown top-level field(s) {unknown_top}; "
            "use 'tools' (and optionally 'root', 'version', 'description')."
        )
    declared_root = data.get("root")
    if declared_root is not None and (
        not isinstance(declared_root, str) or not declared_root.startswith("/")
    ):
        raise ConfigError(
            f"Effects file {source}: 'root' must be an absolute directory path such as "
            f"'/home/me/project', got {declared_root!r}."
        )
    root = root if root is not None else declared_root
    return {str(name): _effect(source, str(name), raw, root) for name, raw in data["tools"].items()}


def _identity(where: str, raw: Any, root: str | None) -> dict[str, Any] | None:
    """An ``identity`` table: argument -> ``"path"`` or ``"each path"`` (keys under ``root``)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(
            f"{where}: field 'identity' must be a table argument -> kind, such as "
            f'{{ path = "path" }}, got {raw!r}.'
        )
    out: dict[str, Any] = {}
    for argument, kind in raw.items():
        if kind not in IDENTITY_KINDS:
            raise ConfigError(
                f"{where}: identity of {argument!r} must be one of "
                f"{', '.join(repr(k) for k in IDENTITY_KINDS)}, got {kind!r}."
            )
        if root is None:
            raise ConfigError(
                f"{where}: identity {kind!r} keys paths under the store's root; add "
                'root = "/the/directory" at the top of the file.'
            )
        key = in_root(root)
        out[str(argument)] = each(key) if kind == "each path" else key
    return out


def _effect(source: str, name: str, raw: Any, root: str | None = None) -> Effect:
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
    identity = _identity(where, raw.get("identity"), root)
    try:
        effect = Effect.declare(
            read_only=bool(raw.get("read_only", False)),
            idempotent=raw.get("idempotent"),
            destructive=raw.get("destructive"),
            open_world=bool(raw.get("open_world", False)),
            write_targets=targets.get("write_targets"),
            read_targets=targets.get("read_targets"),
            canonical=canonical,
            identity=identity,
            ancestors=bool(raw.get("ancestors", False)),
        )
    except (ToolsetError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if raw.get("accepts_idempotency_key"):
        effect = replace(effect, accepts_idempotency_key=True)
    return effect
