"""Draft an effects file from what a toolset publishes, then certify the draft.

One drafting core over *tool specs + hints*, two sources: ``harness init --mcp-server
COMMAND`` (an MCP server's tools and its hints) and ``harness init --toolset TOOLSET`` (a
Python toolset's tools and its own declarations). :func:`draft_effects` reads each tool's
JSON Schema and hints and proposes a declaration with the reason for each field:

- **read-only**: from the hints when they are trusted (an MCP server's ``readOnlyHint`` with
  ``--trust-hints``; a Python toolset's own declarations), or because the user names the
  tool (``--read-only NAME``); every other tool is a writer;
- **idempotent**: from the trusted hints' ``idempotent`` (``idempotentHint``); a read-only
  tool is;
- **targets**: an argument whose name says it keys a record (:class:`Keying`). On an MCP
  server (:data:`FILES`) a string argument named like a path (``path``, ``file``, ``dir``,
  ``source``, ``destination``, ...) is a file under the server's root, ``file:{argument}``
  keyed with ``identity = { path = "path" }``; a list of such strings is ``"each path"``; a
  tool named like ``create_directory``/``mkdir`` writes its ``ancestors`` too. In a Python
  toolset (:data:`RECORDS`) a string (or list of strings) argument named like a key
  (``key``, ``id``, ``doc_id``, ``name``, ``path``, ...) is a record, ``record:{argument}``,
  one namespace for all of them (two tools that name one record by different arguments
  overlap: over-approximating costs parallelism, never correctness). A tool with no such
  argument gets no targets (the certifier treats it as touching everything: it never joins
  a window). A reader reads its targets; a writer reads and writes them.

The draft is not trusted: :func:`certify_draft` runs the certification kit on it (through
:class:`~harness.certkit.mcp_server.MCPServer`, or the toolset's own state factory with the
draft's effects in place of its declarations), and every tool a FALSE claim names loses its
declaration and keeps the worst case, round after round, until the kit finds nothing false.
:func:`render_effects` writes the result as TOML: certified declarations with their reasons
as comments, refused ones as comments with the counterexample that refused them (never as a
declaration). Nothing is applied: the user reads the file and passes it on
(``harness serve --effects``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness.certkit._contract import CertifiableToolset
from harness.certkit._report import CertificationReport
from harness.tools import Effect, Tool, Toolset

__all__ = (
    "FILES",
    "RECORDS",
    "Draft",
    "DraftedTool",
    "Keying",
    "certifiable_with",
    "certify_draft",
    "draft_effects",
    "records_keying",
    "render_effects",
)

#: Argument names that hold a path (matched as whole words of the name).
PATH_WORDS = ("path", "paths", "file", "files", "filename", "dir", "directory", "folder",
              "source", "destination", "src", "dst", "target")  # fmt: skip
#: Argument names that key a record in a Python toolset (besides the path words).
KEY_WORDS = ("key", "keys", "id", "ids", "uuid", "slug", "name", "names")
#: Tool names that create the parents they need.
MAKES_PARENTS = re.compile(r"(create|make)_?(dir|directory|folder)|mkdir|makedirs", re.I)


@dataclass(frozen=True)
class Keying:
    """How a source's arguments key what a call touches: argument names made of one of
    ``words`` name a record ``namespace:{argument}``; with ``paths``, a path under the
    effects file's root (``identity = { argument = "path" }``, directory makers write their
    ancestors). ``what``: how the reasons say it."""

    words: tuple[str, ...]
    namespace: str
    paths: bool
    what: str


#: An MCP server's files under its root (:mod:`harness.certkit.mcp_server` diffs them).
FILES = Keying(PATH_WORDS, "file", True, "a file under the root")
#: A Python toolset's records, by key-like arguments.
RECORDS = Keying(KEY_WORDS + PATH_WORDS, "record", False, "a record")


def records_keying(resource_names: Iterable[str]) -> Keying:
    """:data:`RECORDS` in the namespace a Python toolset's resources use most (``doc:d1/status``,
    ``doc:d2/tags`` and ``catalog`` -> ``doc``): the kit checks a writer's targets against the
    resources it changes by name, so a draft must name them as the toolset does."""
    spaces = Counter(name.split(":", 1)[0] for name in resource_names if ":" in name)
    if not spaces:
        return RECORDS
    space = spaces.most_common(1)[0][0]
    what = f"a record (named as the toolset's resources are: {space}:...)"
    return replace(RECORDS, namespace=space, what=what)


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


def _key_argument(name: str, schema: Any, words: Sequence[str]) -> str | None:
    """``"path"`` or ``"each path"`` when the argument keys a record (or a list of them)."""
    if not isinstance(schema, Mapping) or not (_words(name) & set(words)):
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
    keying: Keying = FILES,
    hints_are: str = "the server's {hint} (trusted with --trust-hints)",
) -> Draft:
    """Propose a declaration per tool of ``toolset`` (see the module docstring). ``hints``:
    each tool's effect as its source states it (an :class:`~harness.tools.mcp.MCPToolset`'s
    ``hints``, or a Python toolset's own declarations), used only with ``trust_hints`` and
    named in the reasons as ``hints_are`` (``{hint}``: the MCP hint's name); ``read_only``:
    tools the user says are read-only; ``root``: the directory paths are keyed under;
    ``keying``: which arguments key what (:data:`FILES` for an MCP server, :data:`RECORDS`
    for a Python toolset)."""
    hints = hints or {}
    tools: list[DraftedTool] = []
    uses_root = False
    for name, tool in toolset.items():
        hint = hints.get(name) if trust_hints else None
        drafted = _draft_tool(name, tool, hint, hints_are, name in read_only, keying)
        uses_root = uses_root or "identity" in drafted.fields
        tools.append(drafted)
    return Draft(tools, root if uses_root else None)


def _draft_tool(
    name: str,
    tool: Tool,
    hint: Effect | None,
    hints_are: str,
    said_read_only: bool,
    keying: Keying,
) -> DraftedTool:
    fields: dict[str, Any] = {}
    reasons: list[str] = []
    trusted = hint if hint is not None and hint.annotated else None
    if said_read_only:
        fields["read_only"] = True
        reasons.append("read-only: you said so (--read-only)")
    elif trusted is not None and trusted.read_only:
        fields["read_only"] = True
        reasons.append("read-only: " + hints_are.format(hint="readOnlyHint"))
    elif trusted is not None and trusted.idempotent:
        fields["idempotent"] = True
        reasons.append("idempotent: " + hints_are.format(hint="idempotentHint"))
    properties = tool.parameters.get("properties")
    keyed: dict[str, str] = {}
    if isinstance(properties, Mapping):
        for argument, schema in properties.items():
            kind = _key_argument(str(argument), schema, keying.words)
            if kind is not None:
                keyed[str(argument)] = kind
    if keyed:
        templates = [f"{keying.namespace}:{{{a}}}" for a in keyed]
        spec: str | list[str] = templates[0] if len(templates) == 1 else templates
        fields["read_targets"] = spec
        if not fields.get("read_only"):
            fields["write_targets"] = spec
        if keying.paths:
            fields["identity"] = dict(keyed)
        noun = ("paths", "a path") if keying.paths else ("keys", "a key")
        reasons.append(
            "targets: "
            + ", ".join(f"'{a}' holds {noun[0] if k == 'each path' else noun[1]}" for a, k in keyed.items())
            + f" (its name), {keying.what}"
        )  # fmt: skip
        if keying.paths and not fields.get("read_only") and MAKES_PARENTS.search(name):
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


def certifiable_with(
    certifiable: CertifiableToolset, effects: Mapping[str, Effect]
) -> CertifiableToolset:
    """``certifiable`` with ``effects`` (an effects file's, :func:`~harness.tools.
    effects_file.load_effects`, or a draft's tables through ``effects_from_dict``) in place of
    its tools' own declarations: a tool they do not name is the worst case, as the proxy
    serving that file would see it."""
    make = certifiable.make_toolset

    def make_toolset(state: Any) -> Toolset:
        toolset = make(state)
        tools = [t.with_effect(effects.get(n, Effect.worst_case())) for n, t in toolset.items()]
        return Toolset(tools, name=toolset.name)

    return replace(certifiable, make_toolset=make_toolset)


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
            for why in unverified_claims(draft).get(tool.name, []):
                out.extend("# UNVERIFIED by the kit: " + line for line in _wrap(why)[:1])
                out.extend("#   " + line for line in _wrap(why)[1:])
            out.extend(_table(tool.name, tool.fields))
        else:
            out.append(f"# [tools.{tool.name}] left undeclared")
    return "\n".join(out) + "\n"


def unverified_claims(draft: Draft) -> dict[str, list[str]]:
    """The declared tools whose claims the kit could not verify (the tool never succeeded on
    the kit's states, or its text is nondeterministic), each with the claims and why."""
    out: dict[str, list[str]] = {}
    if draft.report is None:
        return out
    declared = {t.name for t in draft.tools if t.declared and not t.refused}
    for claim in draft.report.unverified:
        if claim.tool in declared:
            out.setdefault(claim.tool, []).append(f"{claim.claim}: {claim.reason}")
    return out


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
