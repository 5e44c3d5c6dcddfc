"""``harness init``: draft an effects file for an MCP server from its tools' schemas and
hints, certify the draft, write what passed (:mod:`harness.certkit.draft_effects`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

__all__ = ("register", "run")

DESCRIPTION = """\
Draft the effects file an MCP server needs before anything flattens, then prove it: each
tool's declaration is proposed from its JSON Schema and hints (read-only from trusted hints
or --read-only; a path-like argument becomes a file target under the server's root; a
directory maker writes its parents), the certification kit runs on the draft against the
server itself (as `harness certify --mcp-server` does), and every tool a FALSE claim names
is refused and left undeclared, round after round, until nothing is false. The file says
why each line was proposed; refused declarations are comments with the counterexample.
Nothing is applied: read the file, set its root, then `harness serve --effects FILE`.
"""

EPILOG = """\
examples:
  harness init --mcp-server "npx -y @modelcontextprotocol/server-filesystem {root}" \\
      --trust-hints --nondeterministic times --nondeterministic temp-names -o fs.effects.toml
  harness init --mcp-server mcp-server-memory --mcp-env MEMORY_FILE_PATH={root}/memory.json \\
      --read-only read_graph --read-only search_nodes --read-only open_nodes

exit status: 0 the file was written (refused declarations included, as comments),
2 a usage error (no server, the output exists without --force, ...).
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``harness init`` to the CLI."""
    parser = sub.add_parser(
        "init",
        help="draft an MCP server's effects file from its schemas and hints, certified",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--mcp-server",
        metavar="COMMAND",
        required=True,
        help="the server's command line, with {root} where it takes its directory",
    )
    parser.add_argument(
        "--mcp-env",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="an environment variable for the server (repeatable; {root} is replaced)",
    )
    parser.add_argument(
        "--trust-hints",
        action="store_true",
        help="propose read-only and idempotent from the server's own hints",
    )
    parser.add_argument(
        "--read-only",
        metavar="TOOL",
        action="append",
        default=[],
        help="a tool you know changes nothing (repeatable)",
    )
    parser.add_argument(
        "--root",
        default="/path/to/the/server/root",
        metavar="DIR",
        help="the directory written as the file's root (the server's own, when you serve it)",
    )
    parser.add_argument(
        "--nondeterministic",
        metavar="PATTERN",
        action="append",
        default=[],
        help="mask result text that varies (presets times, temp-names, uuids, or a regex)",
    )
    parser.add_argument(
        "--seed-dir", metavar="DIR", help="copied into the server's directory for each example"
    )
    parser.add_argument(
        "--examples", type=int, default=25, metavar="N", help="kit examples per claim (25)"
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    parser.add_argument("--force", action="store_true", help="overwrite --output if it exists")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.certkit import CertificationReport, check_toolset
    from harness.certkit.draft_effects import certify_draft, draft_effects, render_effects
    from harness.certkit.mcp_server import MCPServer

    if args.examples < 1:
        raise ConfigError(f"--examples must be at least 1, got {args.examples}.")
    if not args.root.startswith("/"):
        raise ConfigError(f"--root must be an absolute directory, got {args.root!r}.")
    output = Path(args.output) if args.output else None
    if output is not None and output.exists() and not args.force:
        raise ConfigError(f"{output} exists: pass --force to overwrite it, or another -o.")
    env: dict[str, str] = {}
    for item in args.mcp_env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--mcp-env {item!r}: write KEY=VALUE.")
        env[key] = value

    def server(effects: Mapping[str, Any] | None = None) -> MCPServer:
        return MCPServer(
            args.mcp_server,
            env=env,
            effects=effects,
            seed_dir=args.seed_dir,
            nondeterministic=args.nondeterministic,
        )

    with server() as probe:
        toolset = probe.make_toolset(probe.new_state(0))
        hints = dict(probe.hints)
    unknown = sorted(set(args.read_only) - set(toolset))
    if unknown:
        raise ConfigError(
            f"--read-only names {unknown}, which the server does not list; it lists "
            f"{', '.join(toolset)}."
        )
    draft = draft_effects(
        toolset, hints=hints, trust_hints=args.trust_hints, read_only=args.read_only, root=args.root
    )

    def certify(tables: Mapping[str, Any]) -> CertificationReport:
        print(f"certifying {len(tables['tools'])} declarations ...", file=sys.stderr, flush=True)
        with server(tables) as live:
            return check_toolset(live.certifiable(), examples=args.examples)

    certify_draft(draft, certify)
    text = render_effects(draft, source=f"the MCP server `{args.mcp_server}`")
    declared = sum(t.declared for t in draft.tools)
    refused = sum(bool(t.refused) for t in draft.tools)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
    print(
        f"{declared} tools declared and certified, {refused} refused, "
        f"{len(draft.tools) - declared - refused} left undeclared"
        + (f"; written to {output}" if output else ""),
        file=sys.stderr,
    )
    return 0
