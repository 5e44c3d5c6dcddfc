"""``harness certify``: check that a toolset's effect annotations are true (the kit in
:mod:`harness.certkit`), print the report, exit 1 when any claim is false."""

from __future__ import annotations

import argparse
import json
import os
import sys

from harness._progress import Progress
from harness.certkit import DEFAULT_EXAMPLES, ClaimResult, check_toolset, load_certifiable
from harness.errors import ConfigError

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
"""

EPILOG = f"""\
examples:
  harness certify harness.toolsets.workspace                      # the workspace, {DEFAULT_EXAMPLES} examples per claim
  harness certify harness.toolsets.workspace --manifest manifests/workspace.toml   # + its phases and D2
  harness certify mypkg.tools:certifiable --examples 200 --seed 3
  harness certify tools.json                              # a spec file: what can be checked
  harness certify harness.toolsets.workspace --json > certify.json   # for CI

exit status: 0 no claim is false, 1 a claim is false, 2 a usage error (bad TOOLSET, ...).

JSON (--json): {{"toolset", "tools", "seed", "examples", "manifest", "ok", "summary":
{{"passed", "false", "unverified"}}, "elapsed_s", "notes", "claims": [{{"claim", "tool",
"phase", "status" ("passed" | "FALSE" | "unverified"), "examples", "reason",
"counterexample": null or {{"calls": [{{"name", "arguments"}}], "message", "expected",
"actual" ({{"label", "results", "state", "details"}}), "fix", "flaky"}}}}]}}.
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
        "toolset", metavar="TOOLSET", help="module, 'pkg.module:object' or spec .json"
    )
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


def run(args: argparse.Namespace) -> int:
    if args.examples < 1:
        raise ConfigError(f"--examples must be at least 1, got {args.examples}.")
    if args.max_window < 2:
        raise ConfigError(f"--max-window must be at least 2, got {args.max_window}.")
    if os.getcwd() not in sys.path:  # 'pkg.module' from the current directory, as pytest does
        sys.path.insert(0, os.getcwd())
    certifiable = load_certifiable(args.toolset)
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
