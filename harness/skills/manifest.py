"""Skill manifests: the phases of a skill and where each argument's value comes from.

A manifest is a TOML file (stdlib ``tomllib``) with one table per skill::

    [skills.report]
    description = "Read the listed documents, then write a summary."

    [[skills.report.phases]]
    name = "gather"
    kind = "fan_out"            # or "chain"
    tools = ["read_doc"]
    slots = "input:keys"        # optional slot count: an integer or the length of a task input
    [skills.report.phases.args]
    "read_doc.key" = "input:keys"

    [[skills.report.phases]]
    name = "write"
    kind = "chain"
    tools = ["write_doc"]
    [skills.report.phases.args]
    "write_doc.body" = "result:gather"   # a result placeholder

Argument sources (``"tool.argument" = SOURCE``):

``input`` / ``input:FIELD``
    the task input (or one field of it).
``args:PHASE``
    an earlier call's *arguments* (known as soon as that call is emitted).
``result:PHASE``
    an earlier call's *result*: a **result placeholder**. When PHASE is the phase itself, calls
    of that tool depend on results from inside the window, so D2 fails for them.
``model``
    chosen freely by the model (no dependency).

A fan-out phase is the D3 signal (a manifest phase annotation); its ``slots`` is the
slot-closure signal (the window closes after that many calls). A skill's optional
``[skills.NAME.inputs.FIELD]`` tables say where each task input is written in a conversation,
for clients that never send them (:mod:`harness.skills.input_sources`). Validation errors name the
file, the skill, the phase and the field.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from harness.errors import ManifestError
from harness.skills.input_sources import InputSource, parse_input_sources, read_inputs
from harness.tools.identity import Fold, identity_text

__all__ = (
    "ArgSource",
    "Manifest",
    "Phase",
    "PhaseKind",
    "Skill",
    "load_manifest",
)

PhaseKind = Literal["fan_out", "chain"]
SourceKind = Literal["input", "args", "result", "model"]
_SOURCE_KINDS: tuple[SourceKind, ...] = ("input", "args", "result", "model")


@dataclass(frozen=True)
class ArgSource:
    """Where one argument's value comes from: ``kind`` and an optional reference
    (an input field, or the phase whose arguments/results it uses)."""

    kind: SourceKind
    ref: str | None = None

    @classmethod
    def parse(cls, text: str) -> ArgSource:
        kind, _, ref = text.partition(":")
        if kind not in _SOURCE_KINDS:
            raise ValueError(
                f"source must start with one of {', '.join(_SOURCE_KINDS)}; got {text!r}"
            )
        if kind in ("args", "result") and not ref:
            raise ValueError(f"{kind!r} needs a phase: write '{kind}:PHASE'")
        return cls(kind, ref or None)

    def __str__(self) -> str:
        return self.kind if self.ref is None else f"{self.kind}:{self.ref}"

    @property
    def is_result_placeholder(self) -> bool:
        return self.kind == "result"


_parse_source = functools.lru_cache(maxsize=1024)(ArgSource.parse)
#: How slot values are told apart: as a store folding case, Unicode and whitespace would.
_SLOT_FOLD = Fold(("case", "whitespace"))
_NO_RESULTS: Mapping[str, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True)
class Phase:
    """One phase of a skill: a fan-out (independent gathers or disjoint writes) or a chain."""

    name: str
    kind: PhaseKind
    tools: tuple[str, ...]
    slots: int | str | None = None
    args: Mapping[tuple[str, str], ArgSource] = field(default_factory=dict)

    @property
    def is_fan_out(self) -> bool:
        return self.kind == "fan_out"

    def slot_count(self, inputs: Mapping[str, Any]) -> int | None:
        """The declared number of calls in this phase for a task with ``inputs`` (``None``
        when the manifest does not say)."""
        if self.slots is None or isinstance(self.slots, int):
            return self.slots
        ref = self._slot_source
        if ref is None or ref.ref is None:
            return None
        value = inputs.get(ref.ref)
        if isinstance(value, dict):
            return len(value)
        if isinstance(value, list | tuple):
            # One slot per *distinct* value (as a store folding case, Unicode and whitespace
            # would see it): ["a", "a"] is one slot, so a second call is not admitted as a
            # slot the input never had. Fewer slots only close a window sooner.
            return len({identity_text(v, _SLOT_FOLD) for v in value})
        if isinstance(value, int):
            return value
        return None

    def in_window_placeholders(self, tool: str) -> list[str]:
        """Arguments of ``tool`` whose value is a result of *this* phase's calls: inside a
        window they would need a withheld result (D2 fails)."""
        return list(self.result_arguments(tool, self.name))

    def result_arguments(self, tool: str, phase: str) -> tuple[str, ...]:
        """Arguments of ``tool`` that this phase sources from a result of ``phase``, sorted."""
        return self.result_sources(tool).get(phase, ())

    def result_sources(self, tool: str) -> Mapping[str, tuple[str, ...]]:
        """Per phase, the arguments of ``tool`` this phase sources from its results, sorted
        (read-only: computed once per phase)."""
        return self._results_by_tool.get(tool, _NO_RESULTS)

    def sources(self, tool: str) -> dict[str, ArgSource]:
        return dict(self._sources_by_tool.get(tool, ()))

    # Indexes computed once per phase: the certifier asks for them on every call.
    @functools.cached_property
    def _sources_by_tool(self) -> dict[str, tuple[tuple[str, ArgSource], ...]]:
        grouped: dict[str, list[tuple[str, ArgSource]]] = {}
        for (t, arg), src in self.args.items():
            grouped.setdefault(t, []).append((arg, src))
        return {t: tuple(pairs) for t, pairs in grouped.items()}

    @functools.cached_property
    def _results_by_tool(self) -> dict[str, Mapping[str, tuple[str, ...]]]:
        grouped: dict[str, dict[str, list[str]]] = {}
        for (t, arg), src in self.args.items():
            if src.is_result_placeholder and src.ref is not None:
                grouped.setdefault(t, {}).setdefault(src.ref, []).append(arg)
        return {
            t: MappingProxyType({ref: tuple(sorted(a)) for ref, a in refs.items()})
            for t, refs in grouped.items()
        }

    @functools.cached_property
    def _slot_source(self) -> ArgSource | None:
        """The input a string slot count names (``None``: it names none)."""
        assert isinstance(self.slots, str)
        ref = _parse_source(self.slots)
        return ref if ref.kind == "input" and ref.ref is not None else None


@dataclass(frozen=True)
class Skill:
    name: str
    phases: tuple[Phase, ...]
    description: str = ""
    #: Where each task input is written in a conversation (``[skills.NAME.inputs.FIELD]``,
    #: :mod:`harness.skills.input_sources`): for a client that never sends them (the proxy's).
    inputs: Mapping[str, InputSource] = field(default_factory=dict)

    def read_inputs(self, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The inputs :attr:`inputs` can read in ``messages`` (those not found left out)."""
        return read_inputs(self.inputs, messages)

    def phase(self, name: str) -> Phase:
        for p in self.phases:
            if p.name == name:
                return p
        raise KeyError(name)

    def later(self, tool: str, index: int) -> tuple[int, ...]:
        """The indexes of the phases after ``index`` that list ``tool``, in order."""
        key = (tool, index)
        found = self._later.get(key)
        if found is None:
            phases = self.phases
            found = tuple(i for i in range(index + 1, len(phases)) if tool in phases[i].tools)
            self._later[key] = found
        return found

    # Computed once per skill (per tool and phase): the certifier asks on every call.
    @functools.cached_property
    def _later(self) -> dict[tuple[str, int], tuple[int, ...]]:
        return {}


@dataclass(frozen=True)
class Manifest:
    """All skills of one manifest file."""

    skills: Mapping[str, Skill]
    source: str = "<memory>"

    def skill(self, name: str) -> Skill:
        try:
            return self.skills[name]
        except KeyError:
            raise ManifestError(
                f"{self.source}: no skill named {name!r}; skills here: {', '.join(self.skills)}."
            ) from None

    def check_tools(self, tool_names: Sequence[str] | Mapping[str, Any]) -> None:
        """Every tool a phase names must exist in the toolset, and (when given the tools, not
        only their names) every ``args`` key must name an argument its tool's schema has."""
        known = set(tool_names)
        for skill in self.skills.values():
            for phase in skill.phases:
                missing = [t for t in phase.tools if t not in known]
                if missing:
                    raise ManifestError(
                        f"{self.source}: skill {skill.name!r}, phase {phase.name!r}, field "
                        f"'tools': unknown tool(s) {missing}; the toolset has {sorted(known)}."
                    )
                if isinstance(tool_names, Mapping):
                    self._check_arguments(skill, phase, tool_names)

    def _check_arguments(self, skill: Skill, phase: Phase, tools: Mapping[str, Any]) -> None:
        for tool, argument in phase.args:
            schema = getattr(tools.get(tool), "parameters", None)
            if not isinstance(schema, Mapping):
                continue
            properties = schema.get("properties")
            if not isinstance(properties, Mapping) or argument in properties:
                continue
            if schema.get("additionalProperties") not in (None, False):
                continue  # a tool that takes any argument
            raise ManifestError(
                f"{self.source}: skill {skill.name!r}, phase {phase.name!r}, field "
                f"'args.{tool}.{argument}': {tool!r} has no argument {argument!r}; its "
                f"arguments are {sorted(properties)}."
            )

    def check_inputs(self, skill: str, inputs: Mapping[str, Any]) -> None:
        """Every ``slots = "input:FIELD"`` of ``skill`` must name a field of the task's
        inputs (a slot count from a missing input would silently count nothing)."""
        for phase in self.skill(skill).phases:
            if isinstance(phase.slots, str):
                field = phase.slots.partition(":")[2]
                if field not in inputs:
                    shown = ", ".join(sorted(inputs)) or "none"
                    raise ManifestError(
                        f"{self.source}: skill {skill!r}, phase {phase.name!r}, field 'slots': "
                        f"{phase.slots!r} names the input {field!r}, which the task does not "
                        f"have (its inputs: {shown})."
                    )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<memory>") -> Manifest:
        skills_raw = data.get("skills")
        if not isinstance(skills_raw, Mapping) or not skills_raw:
            raise ManifestError(f"{source}: needs a [skills.NAME] table with at least one skill.")
        unknown_top = set(data) - {"skills", "version", "description"}
        if unknown_top:
            raise ManifestError(f"{source}: unknown top-level key(s) {sorted(unknown_top)}.")
        skills = {name: _parse_skill(source, name, raw) for name, raw in skills_raw.items()}
        return cls(skills=skills, source=source)


def _parse_skill(source: str, name: str, raw: Any) -> Skill:
    where = f"{source}: skill {name!r}"
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{where}: must be a table.")
    unknown = set(raw) - {"description", "phases", "inputs"}
    if unknown:
        raise ManifestError(f"{where}: unknown field(s) {sorted(unknown)}.")
    phases_raw = raw.get("phases")
    if not isinstance(phases_raw, list) or not phases_raw:
        raise ManifestError(f"{where}, field 'phases': needs at least one [[...phases]] entry.")
    phases = []
    names: set[str] = set()
    for index, praw in enumerate(phases_raw):
        phase = _parse_phase(where, index, praw, names)
        names.add(phase.name)
        phases.append(phase)
    return Skill(
        name=name,
        phases=tuple(phases),
        description=str(raw.get("description", "")),
        inputs=parse_input_sources(where, raw.get("inputs")),
    )


def _parse_phase(where: str, index: int, raw: Any, earlier: set[str]) -> Phase:
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{where}, phase #{index + 1}: must be a table.")
    pname = raw.get("name")
    if not isinstance(pname, str) or not pname:
        raise ManifestError(
            f"{where}, phase #{index + 1}, field 'name': a non-empty string is required."
        )
    at = f"{where}, phase {pname!r}"
    if pname in earlier:
        raise ManifestError(f"{at}, field 'name': duplicate phase name.")
    unknown = set(raw) - {"name", "kind", "tools", "slots", "args", "description"}
    if unknown:
        raise ManifestError(f"{at}: unknown field(s) {sorted(unknown)}.")
    kind = raw.get("kind")
    if kind not in ("fan_out", "chain"):
        raise ManifestError(f"{at}, field 'kind': expected 'fan_out' or 'chain', got {kind!r}.")
    tools = raw.get("tools")
    if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
        raise ManifestError(f"{at}, field 'tools': a non-empty list of tool names is required.")
    slots = raw.get("slots")
    if slots is not None:
        if kind != "fan_out":
            raise ManifestError(f"{at}, field 'slots': only a fan_out phase has a slot count.")
        bad_int = isinstance(slots, bool) or (isinstance(slots, int) and slots < 1)
        bad_ref = isinstance(slots, str) and (not slots.startswith("input:") or slots == "input:")
        if bad_int or bad_ref or not isinstance(slots, int | str):
            raise ManifestError(
                f"{at}, field 'slots': a positive integer or 'input:FIELD', got {slots!r}."
            )
    args = _parse_args(at, pname, tools, earlier, raw.get("args", {}))
    return Phase(name=pname, kind=kind, tools=tuple(tools), slots=slots, args=args)


def _parse_args(
    at: str, pname: str, tools: list[str], earlier: set[str], args_raw: Any
) -> dict[tuple[str, str], ArgSource]:
    args: dict[tuple[str, str], ArgSource] = {}
    if not isinstance(args_raw, Mapping):
        raise ManifestError(f"{at}, field 'args': must be a table of \"tool.argument\" = SOURCE.")
    for key, value in args_raw.items():
        # rpartition: tool names may contain '.' (e.g. "docs.read"), argument names do not.
        tool, dot, arg = str(key).rpartition(".")
        if not dot or not arg:
            raise ManifestError(f"{at}, field 'args.{key}': keys are \"tool.argument\".")
        if tool not in tools:
            raise ManifestError(
                f"{at}, field 'args.{key}': tool {tool!r} is not in this phase's tools."
            )
        if not isinstance(value, str):
            raise ManifestError(f"{at}, field 'args.{key}': the source must be a string.")
        try:
            src = ArgSource.parse(value)
        except ValueError as exc:
            raise ManifestError(f"{at}, field 'args.{key}': {exc}.") from None
        if src.kind in ("args", "result") and src.ref not in earlier and src.ref != pname:
            raise ManifestError(
                f"{at}, field 'args.{key}': {value!r} names phase {src.ref!r}, which is neither "
                "this phase nor an earlier one."
            )
        args[(tool, arg)] = src
    return args


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate a TOML manifest; errors name the file, the phase and the field."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"Manifest file {str(p)!r} does not exist.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{p}: not valid TOML: {exc}.") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start}).") from None
    except OSError as exc:
        raise ManifestError(f"{p}: cannot read the manifest: {exc.strerror or exc}.") from None
    return Manifest.from_dict(data, source=str(p))
