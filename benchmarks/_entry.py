"""How a benchmark module runs as ``python -m harness.benchmarks.NAME``: Ctrl-C ends it with
exit status 130 and one line on stderr, not a traceback (what it wrote before stays written;
the benchmarks that resume say so in their ``--help``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

__all__ = ("run_main",)


def run_main(main: Callable[[], int | None]) -> NoReturn:
    """``sys.exit(main())``, with SIGINT (Ctrl-C) turned into exit status 130 and a message."""
    try:
        code = main()
    except KeyboardInterrupt:
        print("interrupted (SIGINT): stopped; exit status 130", file=sys.stderr)
        raise SystemExit(130) from None
    raise SystemExit(code)
