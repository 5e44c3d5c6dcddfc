"""Exit statuses of the ``harness`` command, and how a command reports jobs that errored.

=====  =================================================================================
  0    everything ran; no job errored (a job that ran and missed its gold label is a
       measurement, not an error)
  1    a job errored (an engine failure, a budget, a divergence) or the command failed on
       something other than its input; the error kinds are printed with their counts
  2    usage: a bad option, file or directory (``ConfigError``); nothing or little ran
130    interrupted by SIGINT (Ctrl-C); 143 by SIGTERM — what finished is on disk
=====  =================================================================================
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = (
    "EXIT_INTERRUPTED",
    "EXIT_JOB_FAILED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "error_kinds",
    "errored_summary",
)

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM


def error_kinds(jobs: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """How many jobs ended in each error class (``job["error"]`` is ``"Kind: message"``)."""
    return Counter(
        str(job["error"]).split(":", 1)[0].strip() or "error" for job in jobs if job.get("error")
    )


def errored_summary(jobs: Iterable[Mapping[str, Any]]) -> str | None:
    """``"2 of 5 job(s) errored: EngineRequestError ×1, UsageLimitExceeded ×1"``, or ``None``
    when none did."""
    jobs = list(jobs)
    kinds = error_kinds(jobs)
    if not kinds:
        return None
    listed = ", ".join(f"{kind} ×{n}" for kind, n in sorted(kinds.items()))
    return f"{sum(kinds.values())} of {len(jobs)} job(s) errored: {listed}"
