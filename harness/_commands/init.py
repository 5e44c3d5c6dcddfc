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

With --traces FILE (recorded serial runs: a JSONL of OpenAI-format chats) it also drafts a
skill manifest: a tool called in consecutive turns, one call per turn, one argument
changing, becomes a fan-out phase (with the prompt rule the proxy reads its inputs by when
the values were in the prompt), its evidence beside it; with --mcp-server too, the kit
certifies the drafted effects with the drafted phases.
"""

EPILOG = """\
examples:
  harness init --mcp-server "npx -y @modelcontextprotocol/server-filesystem {root}" \\
      --trust-hints --nondeterministic times --nondeterministic temp-names -o fs.effects.toml
  harness init --mcp-server mcp-server-memory --mcp-env MEMORY_FILE_PATH={root}/memory.json \\
      --read-only read_graph --read-only search_nodes --read-only open_nodes
  harness init --traces runs.jsonl --manifest-output skills.toml

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
        help="the server's command line, with {root} where it takes its directory",
    )
    parser.add_argument(
        "--traces",
        metavar="FILE",
        help="recorded serial runs (JSONL of OpenAI-format chats): draft a skill manifest",
    )
    parser.add_argument(
        "--manifest-output",
        metavar="FILE",
        help="write the drafted manifest here (default: stdout)",
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
    if args.mcp_server is None and args.traces is None:
        raise ConfigError("Name what to draft from: --mcp-server COMMAND, --traces FILE, or both.")
    outputs = [args.output if args.mcp_server else "", args.manifest_output if args.traces else ""]
    if None in outputs and outputs.count(None) > 1:
        raise ConfigError("Both drafts would go to stdout: give -o FILE or --manifest-output FILE.")
    for name in (args.output, args.manifest_output):
        if name and Path(name).exists() and not args.force:
            raise ConfigError(f"{name} exists: pass --force to overwrite it, or another name.")
    manifest_text = _draft_manifest(args) if args.traces else None
    if args.mcp_server is not None:
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

    from harness.skills.draft_manifest import mine_fan_outs, read_chats, render_manifest
    from harness.skills.manifest import load_manifest

    chats = read_chats(args.traces)
    proposals = mine_fan_outs(chats)
    text = render_manifest(proposals, source=args.traces)
    with tempfile.TemporaryDirectory(prefix="harness-init-") as home:
        draft = Path(home) / "manifest.toml"
        draft.write_text(text, encoding="utf-8")
        load_manifest(draft)  # the draft is a manifest the harness reads
    print(
        f"{len(proposals)} fan-out phase(s) found in {len(chats)} chat(s)",
        file=sys.stderr,
    )
    return text


def _draft_effects(args: argparse.Namespace, manifest_text: str | None) -> None:
    import tempfile

    from harness.certkit import CertificationReport, check_toolset
    from harness.certkit.draft_effects import certify_draft, draft_effects, render_effects
    from harness.certkit.mcp_server import MCPServer, env_from_pairs
    from harness.skills.manifest import Manifest, load_manifest

    if args.examples < 1:
        raise ConfigError(f"--examples must be at least 1, got {args.examples}.")
    if not args.root.startswith("/"):
        raise ConfigError(f"--root must be an absolute directory, got {args.root!r}.")
    output = Path(args.output) if args.output else None
    env = env_from_pairs(args.mcp_env)

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
            with server(tables) as live:
                return check_toolset(live.certifiable(), manifest=manifest, examples=args.examples)

        certify_draft(draft, certify)
    text = render_effects(draft, source=f"the MCP server `{args.mcp_server}`")
    declared = sum(t.declared for t in draft.tools)
    refused = sum(bool(t.refused) for t in draft.tools)
    _write(text, args.output)
    print(
        f"{declared} tools declared and certified, {refused} refused, "
        f"{len(draft.tools) - declared - refused} left undeclared"
        + (f"; written to {output}" if output else ""),
        file=sys.stderr,
    )
