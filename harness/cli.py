"""The ``harness`` command line.

Each subcommand lives in ``harness/_commands/<name>.py`` and exposes ``register(sub)``; this
module only assembles them and turns :class:`~harness.errors.HarnessError` (a user mistake or
an operator-actionable failure) into ``error: ...`` and exit status 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from harness.errors import HarnessError

__all__ = ("COMMANDS", "build_parser", "main")

#: Subcommand modules under ``harness._commands``, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = ("run",)

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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"harness._commands.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
