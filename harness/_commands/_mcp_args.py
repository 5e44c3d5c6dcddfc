"""The options that start and seed an MCP server, read the same way by ``harness certify``
and ``harness init`` (both run the certification kit on the live server)."""

from __future__ import annotations

import argparse


def add_mcp_server_arguments(group: argparse._ArgumentGroup) -> None:
    """``--mcp-server``, ``--mcp-env``, ``--no-root``, ``--seed-dir`` and
    ``--nondeterministic``."""
    group.add_argument(
        "--mcp-server",
        metavar="COMMAND",
        help="the server's command line, with {root} where it takes its directory",
    )
    group.add_argument(
        "--mcp-env",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="an environment variable for the server (repeatable; {root} is replaced)",
    )
    group.add_argument(
        "--no-root",
        action="store_true",
        help="run a command with no {root} anywhere (refused otherwise): only for a server "
        "that keeps nothing on disk, as it then writes wherever it writes",
    )
    group.add_argument(
        "--seed-dir",
        metavar="DIR",
        help="copied into the server's directory for every example (default: a few files)",
    )
    group.add_argument(
        "--nondeterministic",
        metavar="PATTERN",
        action="append",
        default=[],
        help="mask result text that varies from run to run: a preset (times, temp-names, "
        "uuids) or a regular expression (repeatable)",
    )
