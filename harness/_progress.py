"""A dependency-free progress bar on stderr for long commands (bench, certify, fabric)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ("Progress",)


class Progress:
    """``[#######.......]  12/40 jobs  3 failed  1m05s elapsed, ~2m10s left  <last item>``.

    Redraws the bar in place on a terminal. On a pipe or file (a log) no bar is drawn: a plain
    line ``12/40 jobs  3 failed  1m05s elapsed, ~2m10s left  <last item>`` every ``every``
    items and at the end.
    """

    def __init__(
        self,
        total: int,
        unit: str = "jobs",
        *,
        stream: TextIO | None = None,
        every: int = 10,
        failed_label: str = "failed",
    ) -> None:
        self.total = max(total, 0)
        self.failed_label = failed_label
        self.unit = unit
        self.done = 0
        self.failed = 0
        self.stream = stream or sys.stderr
        self.every = every
        self.started = time.monotonic()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    @staticmethod
    def _clock(seconds: float) -> str:
        minutes, secs = divmod(int(seconds), 60)
        return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"

    def line(self, note: str = "", *, bar: bool = True) -> str:
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        drawn = f"[{'#' * filled}{'.' * (width - filled)}] " if bar else ""
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        failed = f"  {self.failed} {self.failed_label}" if self.failed else ""
        eta = f", ~{self._clock(left)} left" if self.done and self.done < self.total else ""
        return (
            f"{drawn}{self.done:>4}/{self.total} {self.unit}{failed}"
            f"  {self._clock(elapsed)} elapsed{eta}  {note[:40]}"
        )

    def restart(self, total: int) -> None:
        """Count ``total`` items from now: a runner learns its total (what is left to run)
        after its caller made the bar."""
        self.total = max(total, 0)
        self.done = self.failed = 0
        self.started = time.monotonic()

    def advance(self, note: str = "", *, failed: bool = False) -> None:
        self.done += 1
        self.failed += int(failed)
        if self.tty:
            self.stream.write("\r" + self.line(note).ljust(110))
            if self.done >= self.total:
                self.stream.write("\n")
        elif self.done % self.every == 0 or self.done >= self.total:
            self.stream.write(self.line(note, bar=False).strip() + "\n")
        self.stream.flush()
