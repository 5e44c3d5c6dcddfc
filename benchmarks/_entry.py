"""How a benchmark module runs as ``python -m benchmarks.NAME``: Ctrl-C (SIGINT) ends
it with exit status 130 and SIGTERM with 143, each with one line on stderr, not a traceback,
and both unwind the run, so an embedded engine's processes are shut down rather than left
running (what it wrote before stays written; the benchmarks that resume say so in their
``--help``)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

__all__ = ("run_main",)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so the same unwinding (and engine shutdown) runs."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def run_main(main: Callable[[], int | None]) -> NoReturn:
    """``sys.exit(main())``, with SIGINT (Ctrl-C) turned into exit status 130 and SIGTERM into
    143, each with a message."""
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code = main()
    except _Terminated:
        print("terminated (SIGTERM): stopped; exit status 143", file=sys.stderr)
        raise SystemExit(143) from None
    except KeyboardInterrupt:
        print("interrupted (SIGINT): stopped; exit status 130", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    raise SystemExit(code)
