"""One writer per directory: an exclusive ``flock`` on ``DIR/.lock``.

The lock belongs to the open file, so the operating system drops it when the process ends,
however it ends (SIGKILL included): a crashed writer never leaves a stale lock behind. The
file names the holder (``pid N``) for the message a second writer gets.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

from harness.errors import HarnessError

__all__ = ("lock_directory",)


def lock_directory(directory: Path, refuse: Callable[[str], HarnessError]) -> IO[str]:
    """Lock ``directory`` (created if missing) for this process and return the open lock file
    (close it to release). When another process holds it, raise ``refuse(holder)``."""
    directory.mkdir(parents=True, exist_ok=True)
    handle = (directory / ".lock").open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise refuse(holder) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    return handle
