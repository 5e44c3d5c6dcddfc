"""``python -m harness``: the ``harness`` command, for an environment whose scripts are not on
``PATH``."""

from __future__ import annotations

from harness._commands.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
