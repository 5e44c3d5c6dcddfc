"""The ``harness`` command line.

Each subcommand lives in ``harness/_commands/<name>.py`` and exposes ``register(sub)``; this
module only assembles them and turns :class:`~harness.errors.HarnessError` into
``error: ...`` — never a traceback — and an exit status that tells the truth
(:mod:`harness._commands._exit`): 2 for a usage mistake (``ConfigError``), 1 for any other
failure, 130/143 when SIGINT/SIGTERM stopped it.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
from collections.abc import Sequence
from types import FrameType

import structlog

from harness._commands._exit import (
    EXIT_INTERRUPTED,
    EXIT_JOB_FAILED,
    EXIT_TERMINATED,
    EXIT_USAGE,
)
from harness.errors import ConfigError, HarnessError

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


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so the same cleanup runs (engines closed, files ended)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(verbose=bool(getattr(args, "verbose", False)))
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_JOB_FAILED
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print("terminated" if terminated else "interrupted", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
