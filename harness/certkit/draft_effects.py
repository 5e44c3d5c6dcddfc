"""Draft an effects file from what a toolset publishes, then certify the draft.

``harness init --mcp-server COMMAND`` (or :func:`draft_effects` in Python) reads each tool's
JSON Schema and hints and proposes a declaration with the reason for each field:

- **read-only**: from the server's ``readOnlyHint`` when the user trusts the hints
  (``--trust-hints``), or because the user names the tool (``--read-only NAME``); every
  other tool is a writer;
- **idempotent**: from ``idempotentHint`` (trusted hints only); a read-only tool is;
- **targets**: a string argument whose name says it holds a path (``path``, ``file``,
  ``dir``, ``source``, ``destination``, ...) is a file under the server's root,
  ``file:{argument}`` keyed with ``identity = { path = "path" }``; a list of such strings is
  ``"each path"``; a tool named like ``create_directory``/``mkdir`` writes its ``ancestors``
  too. A tool with no such argument gets no targets (the certifier treats it as touching
  everything: it never joins a window). A reader reads its targets; a writer reads and
  writes them.

The draft is not trusted: :func:`certify_draft` runs the certification kit on it (through
:class:`~harness.certkit.mcp_server.MCPServer`), and every tool a FALSE claim names loses its
declaration and keeps the worst case, round after round, until the kit finds nothing false.
:func:`render_effects` writes the result as TOML: certified declarations with their reasons
as comments, refused ones as comments with the counterexample that refused them (never as a
declaration). Nothing is applied: the user reads the file and passes it on
(``harness serve --effects``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.certkit._report import CertificationReport
from harness.tools import Effect, Tool, Toolset

__all__ = ("Draft", "DraftedTool", "certify_draft", "draft_effects", "render_effects")

#: Argument names that hold a path (matched as whole words of the name).
PATH_WORDS = ("path", "paths", "file", "files", "filename", "dir", "directory", "folder",
              "source", "destination", "src", "dst", "target")  # fmt: skip
#: Tool names that create the parents they need.
MAKES_PARENTS = re.compile(r"(create|make)_?(dir|directory|folder)|mkdir|makedirs", re.I)


@dataclass
class DraftedTool:
    """One tool's proposed declaration (``fields``: the effects-file table), why each field
    was proposed, and, once certified, what the kit said."""

    name: str
    fields: dict[str, Any]
    reasons: list[str]
    refused: list[str] = field(default_factory=list)  # the kit's FALSE claims, in full

    @property
    def declared(self) -> bool:
        return bool(self.fields) and not self.refused


@dataclass
class Draft:
    """An effects-file draft: its tools, the root it keys paths under, and the kit's report
    on the declarations kept."""

    tools: list[DraftedTool]
    root: str | None
    report: CertificationReport | None = None
    rounds: int = 0

    def tables(self) -> dict[str, Any]:
        """The effects file's tables for the declarations still standing."""
        out: dict[str, Any] = {"tools": {t.name: dict(t.fields) for t in self.tools if t.declared}}
        if self.root is not None:
            out["root"] = self.root
        return out


def _words(name: str) -> set[str]:
    return {w.lower() for w in re.split(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])", name) if w}


def _path_argument(name: str, schema: Any) -> str | None:
    """``"path"`` or ``"each path"`` when the argument holds a path (or a list of them)."""
    if not isinstance(schema, Mapping) or not (_words(name) & set(PATH_WORDS)):
        return None
    if schema.get("type") == "string":
        return "path"
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, Mapping):
        return "each path" if items.get("type") == "string" else None
    return None


def draft_effects(
    toolset: Toolset,
    *,
    hints: Mapping[str, Effect] | None = None,
    trust_hints: bool = False,
    read_only: Sequence[str] = (),
    root: str = "/path/to/the/server/root",
) -> Draft:
    """Propose a declaration per tool of ``toolset`` (see the module docstring). ``hints``:
    the server's hints per tool (an :class:`~harness.tools.mcp.MCPToolset`'s ``hints``),
    used only with ``trust_hints``; ``read_only``: tools the user says are read-only;
    ``root``: the directory paths are keyed under."""
    hints = hints or {}
    tools: list[DraftedTool] = []
    uses_root = False
    for name, tool in toolset.items():
        drafted = _draft_tool(name, tool, hints.get(name), trust_hints, name in read_only)
        uses_root = uses_root or "identity" in drafted.fields
        tools.append(drafted)
    return Draft(tools, root if uses_root else None)


def _draft_tool(
    name: str, tool: Tool, hint: Effect | None, trust: bool, said_read_only: bool
) -> DraftedTool:
    fields: dict[str, Any] = {}
    reasons: list[str] = []
    trusted = hint if trust and hint is not None and hint.annotated else None
    if said_read_only:
        fields["read_only"] = True
        reasons.append("read-only: you said so (--read-only)")
    elif trusted is not None and trusted.read_only:
        fields["read_only"] = True
        reasons.append("read-only: the server's readOnlyHint (trusted with --trust-hints)")
    elif trusted is not None and trusted.idempotent:
        fields["idempotent"] = True
        reasons.append("idempotent: the server's idempotentHint (trusted)")
    properties = tool.parameters.get("properties")
    keyed: dict[str, str] = {}
    if isinstance(properties, Mapping):
        for argument, schema in properties.items():
            kind = _path_argument(str(argument), schema)
            if kind is not None:
                keyed[str(argument)] = kind
    if keyed:
        templates = [f"file:{{{a}}}" for a in keyed]
        spec: str | list[str] = templates[0] if len(templates) == 1 else templates
        fields["read_targets"] = spec
        if not fields.get("read_only"):
            fields["write_targets"] = spec
        fields["identity"] = dict(keyed)
        reasons.append(
            "targets: "
            + ", ".join(f"'{a}' holds {'paths' if k == 'each path' else 'a path'}" for a, k in keyed.items())
            + " (its name), a file under the root"
        )  # fmt: skip
        if not fields.get("read_only") and MAKES_PARENTS.search(name):
            fields["ancestors"] = True
            reasons.append("ancestors: its name says it creates directories (mkdir -p)")
    elif fields.get("read_only"):
        reasons.append("reads: no argument names a record, so it may read anything")
    else:
        reasons.append(
            "no argument names a record: left undeclared (worst case, never in a window)"
        )
        fields = {}
    return DraftedTool(name, fields, reasons)


def certify_draft(
    draft: Draft,
    certify: Callable[[Mapping[str, Any]], CertificationReport],
    *,
    max_rounds: int = 4,
) -> Draft:
    """Certify ``draft`` with ``certify(tables) -> report`` (the kit on the server, with
    the draft as its effects file); each tool a FALSE claim names is refused (its counter-
    example kept) and the rest certified again, until no claim is false or ``max_rounds``."""
    by_name = {t.name: t for t in draft.tools}
    for round_ in range(1, max_rounds + 1):
        report = certify(draft.tables())
        draft.report, draft.rounds = report, round_
        if report.ok:
            return draft
        # a tool's own FALSE claim first; a window's FALSE claim refuses the tools of its
        # calls only when none of them was refused by a claim of its own this round (the
        # window then shows a declaration already refused, not its neighbours')
        refused_now: set[str] = set()
        for claim in sorted(report.false, key=lambda c: c.tool is None):
            ce = claim.counterexample
            if claim.tool:
                names = {claim.tool}
            else:
                names = {n for n, _ in ce.calls} if ce is not None else set()
                if names & refused_now:
                    continue
            text = f"{claim.claim} FALSE" + (f": {ce.message} Fix: {ce.fix}" if ce else "")
            for name in names:
                if name in by_name and by_name[name].declared:
                    by_name[name].refused.append(text)
                    refused_now.add(name)
    return draft


def render_effects(draft: Draft, *, source: str) -> str:
    """The draft as an effects file (TOML), every line's reason beside it."""
    out = [
        f"# Effects drafted by `harness init` from {source}.",
        "# Each declaration says why it was proposed; only declarations the certification kit",
        "# passed are written as declarations. Refused ones are comments with the claim that",
        "# refused them. Read it before you use it: `harness serve --effects THIS_FILE`.",
    ]
    if draft.report is not None:
        r = draft.report
        out.append(
            f"# Certified: {len(r.passed)} claims passed, {len(r.false)} FALSE, "
            f"{len(r.unverified)} unverified ({draft.rounds} round(s), "
            f"{r.examples} examples per claim)."
        )
    if draft.root is not None:
        out += [
            "",
            "# The directory the server is confined to: set it to yours.",
            f'root = "{draft.root}"',
        ]
    for tool in draft.tools:
        out.append("")
        out.extend(f"# draft: {reason}" for reason in tool.reasons)
        if tool.refused:
            out.append("# REFUSED by the kit, so left undeclared (worst case):")
            for text in tool.refused:
                out.extend("#   " + line for line in _wrap(text))
            out.extend("# " + line for line in _table(tool.name, tool.fields))
        elif tool.fields:
            out.extend(_table(tool.name, tool.fields))
        else:
            out.append(f"# [tools.{tool.name}] left undeclared")
    return "\n".join(out) + "\n"


def _table(name: str, fields: Mapping[str, Any]) -> list[str]:
    lines = [f"[tools.{name}]"]
    for key, value in fields.items():
        lines.append(f"{key} = {_toml(value)}")
    return lines


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return str(value)


def _wrap(text: str, width: int = 90) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines
