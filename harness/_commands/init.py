"""``harness init``: draft an effects file for an MCP server from its tools' schemas and
hints, certify the draft, write what passed (:mod:`harness.certkit.draft_effects`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness._commands._mcp_args import add_mcp_server_arguments
from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.certkit import CertificationReport
    from harness.certkit.draft_effects import Keying
    from harness.skills.manifest import Manifest
    from harness.tools import Effect, Toolset

__all__ = ("register", "run")

#: The root an MCP draft is written with unless --root names the server's own.
DEFAULT_ROOT = "/path/to/the/server/root"

DESCRIPTION = """\
Draft the two files the proxy needs before anything flattens, then prove them.

Effects (--mcp-server COMMAND or --toolset TOOLSET): each tool's declaration is proposed from
its JSON Schema and hints — read-only from trusted hints (an MCP server's with --trust-hints,
a Python toolset's own declarations) or --read-only; an argument named like a key becomes a
target (on an MCP server a path, a file under the server's root, a directory maker writing
its parents; in a Python toolset a record named as its resources are, doc:{key}) — then the
certification kit runs on the draft against the real thing (as `harness certify` does), and
every tool a FALSE claim names is refused and left undeclared, round after round, until
nothing is false. The file says why each line was proposed; refused declarations are
comments with the counterexample.

Manifest (--traces PATH, recorded serial runs): a tool called in consecutive turns, one call
per turn, one argument changing, becomes a fan-out phase, with the prompt rule the proxy
reads its inputs by when the values were in the first user message, its evidence beside it.
PATH is read by its contents: a JSONL of OpenAI-format chats, the proxy's ledger (`harness
serve --ledger FILE` while nothing flattens), or `harness run --journal` journals (a
journal.jsonl, or the run's directory). With effects too, the kit certifies the drafted
effects with the drafted phases.

Nothing is applied: read the files (an MCP draft: set its root), then
`harness serve --effects FILE --manifest FILE`.
"""

EPILOG = """\
examples:
  harness init --mcp-server "npx -y @modelcontextprotocol/server-filesystem {root}" \\
      --trust-hints --nondeterministic times --nondeterministic temp-names -o fs.effects.toml
  harness init --mcp-server mcp-server-memory --mcp-env MEMORY_FILE_PATH={root}/memory.json \\
      --read-only read_graph --read-only search_nodes --read-only open_nodes
  harness init --toolset harness.toolsets.workspace -o workspace.effects.toml
  harness init --toolset mytools:certifiable --traces ledger.jsonl \\
      -o effects.toml --manifest-output skills.toml      # the proxy's ledger
  harness init --traces runs/batch --manifest-output skills.toml   # harness run journals
  harness init --traces chats.jsonl --manifest-output skills.toml

exit status: 0 the files were written (refused declarations included, as comments),
2 a usage error (nothing to draft from, unrecognized traces, the output exists without
--force, ...).
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``harness init`` to the CLI."""
    parser = sub.add_parser(
        "init",
        help="draft effects (MCP server or Python toolset) and a manifest (traces), certified",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--toolset",
        metavar="TOOLSET",
        help="a Python toolset, named as `harness certify` takes it (pkg.module with "
        "new_state/make_toolset/fingerprint, pkg.module:object, or a spec .json)",
    )
    parser.add_argument(
        "--traces",
        metavar="PATH",
        help="recorded serial runs: a JSONL of chats, the proxy's ledger, or harness run "
        "journals (a journal.jsonl or a run directory): draft a skill manifest",
    )
    parser.add_argument(
        "--manifest-output",
        metavar="FILE",
        help="write the drafted manifest here (default: stdout)",
    )
    parser.add_argument(
        "--read-only",
        metavar="TOOL",
        action="append",
        default=[],
        help="a tool you know changes nothing (repeatable; a Python toolset's own read-only "
        "declarations count too)",
    )
    _add_mcp_arguments(parser)
    parser.add_argument(
        "--examples", type=int, default=25, metavar="N", help="kit examples per claim (25)"
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write the drafted effects here (default: stdout)"
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite -o / --manifest-output if they exist"
    )
    parser.set_defaults(func=run)


def _add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    """An MCP server drafted from: how to start and seed it, which hints to trust, and the
    root its file names."""
    mcp = parser.add_argument_group("an MCP server (with --mcp-server only)")
    add_mcp_server_arguments(mcp)
    mcp.add_argument(
        "--trust-hints",
        action="store_true",
        help="propose read-only and idempotent from the server's own hints",
    )
    mcp.add_argument(
        "--root",
        default=DEFAULT_ROOT,
        metavar="DIR",
        help="the directory written as the file's root (the server's own, when you serve it)",
    )


def run(args: argparse.Namespace) -> int:
    if args.mcp_server is None and args.toolset is None and args.traces is None:
        raise ConfigError(
            "Name what to draft from: --mcp-server COMMAND or --toolset TOOLSET (effects), "
            "--traces FILE (a manifest), or one of the first two with the third."
        )
    if args.mcp_server is not None and args.toolset is not None:
        raise ConfigError("Draft from one toolset: --mcp-server COMMAND or --toolset TOOLSET.")
    tools = args.mcp_server is not None or args.toolset is not None
    outputs = [args.output if tools else "", args.manifest_output if args.traces else ""]
    if None in outputs and outputs.count(None) > 1:
        raise ConfigError("Both drafts would go to stdout: give -o FILE or --manifest-output FILE.")
    for name in (args.output, args.manifest_output):
        if name and Path(name).exists() and not args.force:
            raise ConfigError(f"{name} exists: pass --force to overwrite it, or another name.")
    manifest_text = _draft_manifest(args) if args.traces else None
    if tools:
        _draft_effects(args, manifest_text)
    if manifest_text is not None:
        _write(manifest_text, args.manifest_output)
    return 0


def _write(text: str, name: str | None) -> None:
    if name is None:
        sys.stdout.write(text)
    else:
        Path(name).write_text(text, encoding="utf-8")


def _draft_manifest(args: argparse.Namespace) -> str:
    import tempfile

    from harness.skills.draft_manifest import mine_fan_outs, render_manifest
    from harness.skills.manifest import load_manifest
    from harness.skills.traces import read_traces

    traces = read_traces(args.traces)
    chats = traces.chats
    proposals = mine_fan_outs(chats)
    text = render_manifest(proposals, source=traces.described)
    with tempfile.TemporaryDirectory(prefix="harness-init-") as home:
        draft = Path(home) / "manifest.toml"
        draft.write_text(text, encoding="utf-8")
        load_manifest(draft)  # the draft is a manifest the harness reads
    print(
        f"{len(proposals)} fan-out phase(s) found in {len(chats)} chat(s) of {traces.described}",
        file=sys.stderr,
    )
    return text


@dataclass
class _Source:
    """What the effects are drafted from: the tools, their hints, how arguments key records,
    and how the kit certifies a draft on the real thing (``certify(tables, manifest)``)."""

    label: str
    toolset: Toolset
    hints: dict[str, Effect]
    trust_hints: bool
    hints_are: str
    keying: Keying
    certify: Callable[[Mapping[str, Any], Manifest | None], CertificationReport]


def _mcp_source(args: argparse.Namespace) -> _Source:
    from harness.certkit import check_toolset
    from harness.certkit.draft_effects import FILES
    from harness.certkit.mcp_server import MCPServer, env_from_pairs

    if not args.root.startswith("/"):
        raise ConfigError(f"--root must be an absolute directory, got {args.root!r}.")
    env = env_from_pairs(args.mcp_env)

    def server(effects: Mapping[str, Any] | None = None) -> MCPServer:
        return MCPServer(
            args.mcp_server,
            env=env,
            effects=effects,
            seed_dir=args.seed_dir,
            nondeterministic=args.nondeterministic,
            no_root=args.no_root,
        )

    with server() as probe:
        toolset = probe.make_toolset(probe.new_state(0))
        hints = dict(probe.hints)

    def certify(tables: Mapping[str, Any], manifest: Manifest | None) -> CertificationReport:
        with server(tables) as live:
            return check_toolset(live.certifiable(), manifest=manifest, examples=args.examples)

    return _Source(
        f"the MCP server `{args.mcp_server}`",
        toolset,
        hints,
        args.trust_hints,
        "the server's {hint} (trusted with --trust-hints)",
        FILES,
        certify,
    )


def _toolset_source(args: argparse.Namespace) -> _Source:
    import os

    from harness.certkit import check_toolset, load_certifiable
    from harness.certkit.draft_effects import certifiable_with, records_keying
    from harness.tools.effects_file import effects_from_dict

    mcp_only = ("mcp_env", "trust_hints", "seed_dir", "nondeterministic", "no_root")
    stray = [f"--{n.replace('_', '-')}" for n in mcp_only if getattr(args, n)]
    stray += ["--root"] * (args.root != DEFAULT_ROOT)
    if stray:
        raise ConfigError(
            f"{', '.join(stray)} applies to --mcp-server only (a Python toolset's own "
            "declarations are its hints, and its records have no root)."
        )
    if os.getcwd() not in sys.path:  # 'pkg.module' from the working directory
        sys.path.insert(0, os.getcwd())
    certifiable = load_certifiable(args.toolset)
    state = certifiable.new_state(0)
    toolset = certifiable.make_toolset(state)
    resources = certifiable.resources(state) if certifiable.resources is not None else {}

    def certify(tables: Mapping[str, Any], manifest: Manifest | None) -> CertificationReport:
        drafted = certifiable_with(certifiable, effects_from_dict(tables, "the draft"))
        return check_toolset(drafted, manifest=manifest, examples=args.examples)

    return _Source(
        f"the toolset `{args.toolset}`",
        toolset,
        {name: tool.effect for name, tool in toolset.items()},
        True,
        "the toolset declares it",
        records_keying(resources),
        certify,
    )


def _draft_effects(args: argparse.Namespace, manifest_text: str | None) -> None:
    import tempfile

    from harness.certkit.draft_effects import (
        certify_draft,
        draft_effects,
        render_effects,
        unverified_claims,
    )
    from harness.skills.manifest import load_manifest

    if args.examples < 1:
        raise ConfigError(f"--examples must be at least 1, got {args.examples}.")
    output = Path(args.output) if args.output else None
    source = _mcp_source(args) if args.mcp_server is not None else _toolset_source(args)
    toolset = source.toolset
    unknown = sorted(set(args.read_only) - set(toolset))
    if unknown:
        where = "the server does not list" if args.mcp_server else "the toolset does not have"
        raise ConfigError(
            f"--read-only names {unknown}, which {where}; it has {', '.join(toolset)}."
        )
    draft = draft_effects(
        toolset,
        hints=source.hints,
        trust_hints=source.trust_hints,
        read_only=args.read_only,
        root=args.root,
        keying=source.keying,
        hints_are=source.hints_are,
    )

    manifest: Manifest | None = None
    with tempfile.TemporaryDirectory(prefix="harness-init-") as home:
        if manifest_text is not None:
            path = Path(home) / "manifest.toml"
            path.write_text(manifest_text, encoding="utf-8")
            manifest = load_manifest(path)
            manifest.check_tools(toolset)

        def certify(tables: Mapping[str, Any]) -> CertificationReport:
            print(
                f"certifying {len(tables['tools'])} declarations ...", file=sys.stderr, flush=True
            )
            return source.certify(tables, manifest)

        certify_draft(draft, certify)
    text = render_effects(draft, source=source.label)
    declared = sum(t.declared for t in draft.tools)
    refused = sum(bool(t.refused) for t in draft.tools)
    unverified = sorted(unverified_claims(draft))
    _write(text, args.output)
    print(
        f"{declared - len(unverified)} tools declared and certified, "
        + (
            f"{len(unverified)} declared but unverified ({', '.join(unverified)}: "
            "see the UNVERIFIED comments), "
            if unverified
            else ""
        )
        + f"{refused} refused, {len(draft.tools) - declared - refused} left undeclared"
        + (f"; written to {output}" if output else ""),
        file=sys.stderr,
    )
