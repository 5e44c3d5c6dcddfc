"""The ``harness`` command line.

Each subcommand lives in ``harness/_commands/<name>.py`` and exposes ``register(sub)``; this
module only assembles them and turns :class:`~harness.errors.HarnessError` (a user mistake or
an operator-actionable failure) into ``error: ...`` and exit status 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

import structlog

from harness.errors import HarnessError

__all__ = ("COMMANDS", "build_parser", "main")

#: Subcommand modules under ``harness._commands``, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = ("run", "bench", "tasks", "frontier", "engine", "fabric", "certify")

DESCRIPTION = """\
Run unattended tool-calling agent loops without the wall time and tokens that serial tool
calling wastes. Four arms: S (serial), F (harness-flattened: certified fan-out windows run
concurrently, results withheld until the absorb turn), P (native parallel), P+V (native
parallel with a validator that resamples).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `harness COMMAND --help` for each command's options and examples.",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log every turn, call and window (structlog) to stderr",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"harness._commands.{name}")
        module.register(sub)
    return parser


def _configure_logging(*, verbose: bool) -> None:
    """Ledger events are debug-level structlog events: shown with ``-v``, hidden otherwise."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.DEBUG if verbose else logging.WARNING
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(verbose=bool(getattr(args, "verbose", False)))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
