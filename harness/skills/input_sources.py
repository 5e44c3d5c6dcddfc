"""Where a skill's task inputs come from in a conversation, for a client that never sends them.

A skill's inputs (the values ``input:FIELD`` argument sources and slot counts refer to) are
normally given with the task (``Task.inputs``; through the proxy, ``X-Harness-Inputs`` or
``harness_inputs``). An unmodified agent loop sends neither, so a manifest may say where each
input is written in the conversation itself::

    [skills.survey.inputs.keys]
    from = "prompt"                        # the first user message
    pattern = 'd\\d+(?:(?:, | and )d\\d+)*'  # the first match: "d558, d12 and d484"
    split = ', | and '                     # ... split into ["d558", "d12", "d484"]

    [skills.survey.inputs.reads]
    from = "prompt"
    pattern = 'read (\\d+) documents'       # group 1 (or a group named "value")
    type = "integer"

    [skills.audit.inputs.keys]
    from = "result:list_docs"              # the first result of list_docs, read as JSON
    path = "items[*].key"                  # a dotted path; [*] every element, [N] one

Fields: ``from`` (``prompt``, or ``result:TOOL``), ``pattern`` (a regular expression; its
group ``value``, else its group 1, else the whole match), ``all`` (``true``: a list of every
match instead of the first), ``split`` (a regular expression splitting the text read into a
list), ``path`` (for a ``result:`` source: where the value sits in the result's JSON; without
it, the whole result) and ``type`` (``string``, the default, or ``integer``: every value
converted). A source that finds nothing reads nothing (the input stays unknown: the proxy
then says so, see ``docs/proxy.md``); a value read wrongly only costs parallelism (a call whose
argument is not among the values does not certify, D2), never a wrong transcript.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness.errors import ManifestError

__all__ = ("InputSource", "parse_input_sources", "prompt_text", "read_inputs")

_FIELDS = frozenset({"from", "pattern", "all", "split", "path", "type"})
_STEP = re.compile(r"([^.\[\]]+)|\[(\*|\d+)\]")


@dataclass(frozen=True)
class InputSource:
    """Where one input is written in a conversation (see the module docstring)."""

    field: str
    origin: str  # "prompt" or "result:TOOL"
    pattern: re.Pattern[str] | None = None
    every: bool = False
    split: re.Pattern[str] | None = None
    path: tuple[str | int, ...] | None = None
    type: Literal["string", "integer"] = "string"

    def read(self, messages: Sequence[Mapping[str, Any]]) -> Any:
        """The input's value in ``messages`` (OpenAI-format), or ``None`` when it is not
        there (yet)."""
        text = self._text(messages)
        if text is None:
            return None
        value: Any
        if self.origin.startswith("result:"):
            value = _at_path(text, self.path)
            if value is None:
                return None
            if self.pattern is None and self.split is None:
                return self._typed(value)
            text = value if isinstance(value, str) else json.dumps(value)
        value = self._matched(text)
        return None if value is None else self._typed(value)

    def _text(self, messages: Sequence[Mapping[str, Any]]) -> str | None:
        if self.origin == "prompt":
            return prompt_text(messages)
        tool = self.origin.partition(":")[2]
        called = {
            str(c.get("id")): str((c.get("function") or {}).get("name"))
            for m in messages
            if m.get("role") == "assistant"
            for c in m.get("tool_calls") or ()
            if isinstance(c, Mapping)
        }
        for message in messages:
            if (
                message.get("role") == "tool"
                and called.get(str(message.get("tool_call_id"))) == tool
            ):
                return _content(message.get("content"))
        return None

    def _matched(self, text: str) -> Any:
        if self.pattern is None:
            found: list[str] = [text]
        else:
            found = [_group(m) for m in self.pattern.finditer(text)]
            if not found:
                return None
            if not self.every:
                found = found[:1]
        if self.split is not None:
            return [p.strip() for item in found for p in self.split.split(item) if p.strip()]
        return found if self.every else found[0]

    def _typed(self, value: Any) -> Any:
        if self.type == "string":
            return value
        try:
            if isinstance(value, list):
                return [int(v) for v in value]
            return int(value)
        except (TypeError, ValueError):
            return None


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text ``from = "prompt"`` reads: the first user message's (its text parts joined),
    or ``None`` when there is none."""
    for message in messages:
        if message.get("role") == "user":
            return _content(message.get("content"))
    return None


def read_inputs(
    sources: Mapping[str, InputSource], messages: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Every input ``sources`` can read in ``messages`` (the ones not found left out)."""
    out: dict[str, Any] = {}
    for name, source in sources.items():
        value = source.read(messages)
        if value is not None and value != []:
            out[name] = value
    return out


def parse_input_sources(where: str, raw: Any) -> dict[str, InputSource]:
    """A skill's ``inputs`` table, checked; errors name the skill and the field."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{where}, field 'inputs': must be a table of [inputs.FIELD] tables.")
    return {
        str(name): _parse(f"{where}, field 'inputs.{name}'", str(name), spec)
        for name, spec in raw.items()
    }


def _parse(at: str, name: str, spec: Any) -> InputSource:
    if not isinstance(spec, Mapping):
        raise ManifestError(f"{at}: must be a table (from, pattern, all, split, path, type).")
    unknown = set(spec) - _FIELDS
    if unknown:
        raise ManifestError(f"{at}: unknown field(s) {sorted(unknown)}; known: {sorted(_FIELDS)}.")
    origin = spec.get("from")
    if not isinstance(origin, str) or not (
        origin == "prompt" or (origin.startswith("result:") and origin != "result:")
    ):
        raise ManifestError(f"{at}, 'from': 'prompt' or 'result:TOOL', got {origin!r}.")
    kind = spec.get("type", "string")
    if kind not in ("string", "integer"):
        raise ManifestError(f"{at}, 'type': 'string' or 'integer', got {kind!r}.")
    every = spec.get("all", False)
    if not isinstance(every, bool):
        raise ManifestError(f"{at}, 'all': true or false, got {every!r}.")
    path = spec.get("path")
    if path is not None and (not isinstance(path, str) or origin == "prompt"):
        raise ManifestError(f"{at}, 'path': a dotted path into a 'result:TOOL' source's JSON.")
    if origin == "prompt" and spec.get("pattern") is None:
        raise ManifestError(f"{at}: a 'prompt' source needs a 'pattern'.")
    return InputSource(
        field=name,
        origin=origin,
        pattern=_regex(at, "pattern", spec.get("pattern")),
        every=every,
        split=_regex(at, "split", spec.get("split")),
        path=_path(at, path) if path is not None else None,
        type=kind,
    )


def _regex(at: str, key: str, text: Any) -> re.Pattern[str] | None:
    if text is None:
        return None
    if not isinstance(text, str) or not text:
        raise ManifestError(f"{at}, {key!r}: a regular expression string, got {text!r}.")
    try:
        return re.compile(text)
    except re.error as exc:
        raise ManifestError(f"{at}, {key!r}: not a regular expression: {exc}.") from None


def _path(at: str, text: str) -> tuple[str | int, ...]:
    steps: list[str | int] = []
    for part in text.split("."):
        matched = list(_STEP.finditer(part))
        if not part or "".join(m.group(0) for m in matched) != part:
            raise ManifestError(f"{at}, 'path': {text!r} is not a path like 'items[*].key'.")
        for m in matched:
            name, index = m.group(1), m.group(2)
            steps.append(name if name is not None else ("*" if index == "*" else int(index)))
    return tuple(steps)


def _at_path(text: str, path: tuple[str | int, ...] | None) -> Any:
    try:
        value: Any = json.loads(text)
    except ValueError:
        return text if not path else None
    values: list[Any] = [value]
    spread = False
    for step in path or ():
        nxt: list[Any] = []
        for v in values:
            if step == "*":
                spread = True
                nxt.extend(v if isinstance(v, list) else [])
            elif isinstance(step, int):
                if isinstance(v, list) and -len(v) <= step < len(v):
                    nxt.append(v[step])
            elif isinstance(v, Mapping) and step in v:
                nxt.append(v[step])
        values = nxt
    if spread:
        return values
    return values[0] if values else None


def _group(match: re.Match[str]) -> str:
    if "value" in match.re.groupindex:
        return match.group("value") or ""
    return match.group(1) if match.re.groups else match.group(0)


def _content(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)
