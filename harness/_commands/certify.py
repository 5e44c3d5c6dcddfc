"""``harness certify``: check that a toolset's effect annotations are true (the kit in
:mod:`harness.certkit`), print the report, exit 1 when any claim is false."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from harness._commands._mcp_args import add_mcp_server_arguments
from harness._progress import Progress
from harness.certkit import (
    DEFAULT_EXAMPLES,
    CertifiableToolset,
    ClaimResult,
    check_toolset,
    load_certifiable,
)
from harness.certkit.draft_effects import certifiable_with
from harness.certkit.mcp_server import MCPServer, env_from_pairs
from harness.errors import ConfigError
from harness.tools.effects_file import load_effects

__all__ = ("register", "run")

DESCRIPTION = """\
Check, against real executions, that a toolset's effect annotations are true — the
declarations the schema-sound certifier trusts when it runs calls concurrently. hypothesis
generates arguments from each tool's JSON Schema; every example runs on a fresh state from
the toolset's factory. Claims checked:

  read_only      a call leaves the state fingerprint unchanged
  idempotent     calling twice leaves the same state and result as calling once
  write_targets  a call changes nothing outside its declared write targets
                 (needs resources(state); otherwise "unverified", never "passed")
  targets_canonical
                 (a writer whose targets name arguments) two spellings of an argument that
                 change one resource declare overlapping targets
  identity       (an argument whose identity comes from the store's identity= function)
                 the function is idempotent and gives one record one identity
  commutes       every window the certifier certifies, run concurrently in random start
                 orders and interleavings, equals the serial run in emitted order
  D2             (with --manifest) no certified window holds a call whose argument is a
                 result of another call of that window
  speculable     (a writer that opts in to certified speculation) run twice with one key,
                 or before a call it commutes with, changes nothing

A false claim is shrunk to a minimal counterexample: the tool, the claim, the arguments, the
two outcomes that differ, and what to change. Tools outside the process (open_world) and
spec files (no state factory) cannot be fingerprinted: only idempotence is checked, from
results, and the rest is reported "unverified".

TOOLSET is an importable module with new_state(seed), make_toolset(state) and
fingerprint(state) (optionally resources(state) and example_values(state)), an object in a
module ('pkg.module:object': a CertifiableToolset, a Toolset or a factory of one), or an
OpenAI/MCP-style spec file (.json).

An MCP server is certified directly with --mcp-server COMMAND instead of TOOLSET: the kit
runs the server confined to a directory of its own ({root} in the command and in --mcp-env
values), empties and seeds that directory for every example (--seed-dir, default a few
files), and diffs it: every file, directory and link is one resource, named file: and its
path relative to the root (file:notes/b.md). A command with no {root} in it or in an
--mcp-env value is refused (it would run every example in your own directory) unless
--no-root says the server keeps nothing on disk. Effects come from --effects FILE (the same
TOML as `harness serve --effects`; its root is replaced by the kit's directory) or the
server's own hints (--trust-hints). Results that vary from run to run (times, temporary
names) are masked with --nondeterministic; unmasked, the kit reports them as unverified and
names the preset that would mask them, rather than blaming the declaration. A claim whose
tool never once succeeded (every call an error on the kit's fresh states) is unverified too,
naming the tool's first error.

--effects FILE with a TOOLSET certifies that file's declarations in place of the toolset's
own (a tool the file does not name is the worst case): a `harness init --toolset` draft, or
the file you serve it with.
"""

EPILOG = f"""\
examples:
  harness certify harness.toolsets.workspace                      # the workspace, {DEFAULT_EXAMPLES} examples per claim
  harness certify harness.toolsets.workspace --manifest manifests/workspace.toml   # + its phases and D2
  harness certify mypkg.tools:certifiable --examples 200 --seed 3
  harness certify tools.json                              # a spec file: what can be checked
  harness certify harness.toolsets.workspace --json > certify.json   # for CI
  harness certify --mcp-server "npx -y @modelcontextprotocol/server-filesystem {{root}}" \\
      --effects fs-effects.toml --nondeterministic times --nondeterministic temp-names
  harness certify --mcp-server "npx -y @modelcontextprotocol/server-memory" \\
      --mcp-env MEMORY_FILE_PATH={{root}}/memory.json --effects memory-effects.toml

exit status: 0 no claim is false, 1 a claim is false, 2 a usage error (bad TOOLSET, ...).

JSON (--json): {{"toolset", "tools", "seed", "examples", "manifest", "ok", "summary":
{{"passed", "false", "unverified"}}, "elapsed_s", "notes", "claims": [{{"claim", "tool",
"phase", "status" ("passed" | "FALSE" | "unverified"), "examples", "reason",
"counterexample": null or {{"calls": [{{"name", "arguments"}}], "message", "expected",
"actual" ({{"label", "results", "state", "details"}}), "fix", "flaky", "nondeterministic"}}}}]}}.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``harness certify`` to the CLI."""
    parser = sub.add_parser(
        "certify",
        help="check a toolset's effect annotations against real executions (hypothesis)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "toolset",
        metavar="TOOLSET",
        nargs="?",
        help="module, 'pkg.module:object' or spec .json (or give --mcp-server instead)",
    )
    _add_mcp_arguments(parser)
    parser.add_argument(
        "--manifest",
        metavar="FILE",
        help="skill manifest (TOML): adds its fan-out phases' windows and the D2 checks",
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=DEFAULT_EXAMPLES,
        metavar="N",
        help=f"hypothesis examples per claim (default {DEFAULT_EXAMPLES})",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="state seed and hypothesis seed: same seed, same run (default 0)",
    )
    parser.add_argument(
        "--max-window",
        type=int,
        default=5,
        metavar="K",
        help="largest window drawn for the commutation claim (default 5)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def _add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    """An MCP server certified directly: how to start it, its effects, and how its state is
    seeded, restarted and shown."""
    mcp = parser.add_argument_group("an MCP server, certified directly")
    add_mcp_server_arguments(mcp)
    mcp.add_argument(
        "--effects",
        metavar="FILE",
        help="effects file (TOML/JSON, as for `harness serve`); its root becomes the kit's. "
        "With a TOOLSET: its declarations replace the toolset's own (a tool it does not "
        "name is the worst case), e.g. a `harness init --toolset` draft",
    )
    mcp.add_argument(
        "--trust-hints",
        action="store_true",
        help="tools the effects file does not name take the server's own hints",
    )
    mcp.add_argument(
        "--restart-server",
        action="store_true",
        help="a new server process for every example (a server that keeps state in memory)",
    )
    mcp.add_argument(
        "--show-server-log",
        action="store_true",
        help="pass the server's stderr through (default: kept in the kit's temp directory)",
    )


def run(args: argparse.Namespace) -> int:
    if args.examples < 1:
        raise ConfigError(f"--examples must be at least 1, got {args.examples}.")
    if args.max_window < 2:
        raise ConfigError(f"--max-window must be at least 2, got {args.max_window}.")
    if (args.toolset is None) == (args.mcp_server is None):
        raise ConfigError(
            "Name what to certify: a TOOLSET, or an MCP server with --mcp-server COMMAND "
            "(not both)."
        )
    mcp_only = ("trust_hints", "seed_dir", "restart_server", "show_server_log", "no_root")
    stray = [f"--{n.replace('_', '-')}" for n in mcp_only if getattr(args, n)]
    stray += ["--mcp-env"] * bool(args.mcp_env) + ["--nondeterministic"] * bool(
        args.nondeterministic
    )
    if args.mcp_server is None and stray:
        raise ConfigError(f"{', '.join(stray)} applies to --mcp-server only.")
    with contextlib.ExitStack() as stack:
        if args.mcp_server is not None:
            server = stack.enter_context(_mcp_server(args))
            # started before the kit runs, so a server that does not start, or an effects
            # file that does not fit its tools, is said as it is, not as the kit's error
            server.new_state(args.seed)
            certifiable = server.certifiable()
        else:
            if os.getcwd() not in sys.path:  # 'pkg.module' from the working directory
                sys.path.insert(0, os.getcwd())
            certifiable = load_certifiable(args.toolset)
            if args.effects is not None:
                certifiable = certifiable_with(certifiable, load_effects(args.effects))
        return _certify(args, certifiable)


def _mcp_server(args: argparse.Namespace) -> MCPServer:
    env = env_from_pairs(args.mcp_env)
    return MCPServer(
        args.mcp_server,
        env=env,
        effects=args.effects,
        trust_hints=args.trust_hints,
        seed_dir=args.seed_dir,
        restart=args.restart_server,
        nondeterministic=args.nondeterministic,
        show_server_log=args.show_server_log,
        no_root=args.no_root,
    )


def _certify(args: argparse.Namespace, certifiable: CertifiableToolset) -> int:
    progress = Progress(0, unit="claims", every=5)

    def on_claim(result: ClaimResult, done: int, total: int) -> None:
        progress.total = total
        progress.advance(f"{result.subject} {result.claim}", failed=result.status == "FALSE")

    report = check_toolset(
        certifiable,
        manifest=args.manifest,
        examples=args.examples,
        seed=args.seed,
        max_window=args.max_window,
        on_claim=on_claim,
    )
    if args.json:
        print(json.dumps(report.to_json(), indent=1, ensure_ascii=False))
    else:
        print(report.render())
    return 0 if report.ok else 1
