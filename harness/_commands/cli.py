"""The ``harness`` command line.

Each subcommand lives in ``harness/_commands/<name>.py`` and exposes ``register(sub)``. Like
pip, this module keeps a table of the commands and their one-line summaries and imports only
the module of the command being run, so ``harness --help`` and ``harness --version`` load
nothing but this module. A :class:`~harness.errors.HarnessError` (a user mistake or an
operator-actionable failure) becomes ``error: ...`` — never a traceback — and an exit status
that tells the truth (:mod:`harness._commands._exit`): 2 for a usage mistake
(``ConfigError``), 1 for any other failure, 130/143 when SIGINT/SIGTERM stopped it.

The global options ``-v``/``--verbose`` and ``--log-json`` are accepted before or after the
subcommand (``harness -v run ...`` and ``harness run ... -v``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from harness import __version__
from harness.errors import ConfigError, HarnessError, Interrupted

__all__ = ("COMMANDS", "build_parser", "main")

#: Subcommand -> its one-line summary, in the order ``--help`` lists them. The command's module
#: ``harness._commands.<name>`` is imported only when that command is named on the line.
COMMANDS: dict[str, str] = {
    "run": "run a workload task or your own (one, or a batch) under chosen arms; compare the cost",
    "bench": "run the 4-arm protocol on the real engine and report R1-R4 verdicts",
    "tasks": "list or show the workload's tasks (the 48 seeded and the families) and gold labels",
    "frontier": "closed-form wall time, tokens and crossover gaps per window (the cost model)",
    "engine": "prepare the packaged model, show engine settings, smoke-test the engine",
    "fabric": "run a task as a DAG of batched steps and report the PEF figures",
    "certify": "check a toolset's effect annotations against real executions (hypothesis)",
    "init": "draft effects (MCP server or Python toolset) and a manifest (traces), certified",
    "serve": "serve an OpenAI-compatible proxy that flattens certified windows (arm F)",
}

DESCRIPTION = """\
Run unattended tool-calling agent loops without the wall time and tokens that serial tool
calling wastes. Four arms: S (serial), F (harness-flattened: certified fan-out windows run
concurrently, results withheld until the absorb turn), P (native parallel), P+V (native
parallel with a validator that resamples).
"""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``harness run: error: argument
    --arm: invalid choice: 'X' (choose from ...)``) and a pointer to ``--help``, not the whole
    usage block; exit status 2 as for every usage error. Subcommands inherit the class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _add_logging_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """``-v`` and ``--log-json``; below the top level they only override what was given."""
    default_off: object = False if top else argparse.SUPPRESS
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default_off,
        help="log every turn, call and window to stderr",
    )
    parser.add_argument(
        "--log-json",
        action="store_true",
        default=default_off,
        help="log as JSON lines (one object per event; implies -v)",
    )


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += [child, *_subparsers(child)]
    return found


def _named_command(argv: Sequence[str]) -> str | None:
    """The subcommand on the line: the first argument that is not an option (the global
    options take no value)."""
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser, every command built (for references and tests); given ``argv``, the
    parser :func:`main` uses: every command listed, only the one ``argv`` names built."""
    parser = _Parser(
        prog="harness",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `harness COMMAND --help` for each command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_logging_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    built = list(COMMANDS) if argv is None else [_named_command(argv)]
    for name, summary in COMMANDS.items():
        if name in built:
            importlib.import_module(f"harness._commands.{name}").register(sub)
            command = sub.choices[name]
            for child in [command, *_subparsers(command)]:
                _add_logging_options(child, top=False)
        else:
            sub.add_parser(name, help=summary)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so the same cleanup runs (engines closed, files ended)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real stdout (captured): nothing to do
        pass


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments)
    args = parser.parse_args(arguments)
    from harness._commands._exit import (
        EXIT_INTERRUPTED,
        EXIT_JOB_FAILED,
        EXIT_TERMINATED,
        EXIT_USAGE,
    )
    from harness._logging import configure_cli_logging

    configure_cli_logging(verbose=args.verbose or args.log_json, json_lines=args.log_json)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return int(args.func(args))
    except Interrupted as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 128 + exc.signum if exc.signum else EXIT_INTERRUPTED
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_JOB_FAILED
    except BrokenPipeError:  # `harness tasks list | head`: the reader has all it wanted
        _silence_stdout()
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print("terminated" if terminated else "interrupted", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
