"""Exit statuses of the ``harness`` command, and how a command reports jobs that errored.

=====  =================================================================================
  0    everything ran; no job errored (a job that ran and missed its gold label is a
       measurement, not an error)
  1    a job errored (an engine failure, a budget, a divergence) or the command failed on
       something other than its input; the error kinds are printed with their counts
       (:func:`harness.runs.jobs.errored_summary`). ``harness bench`` exits 1 only for
       harness failures: a model-policy job that ran out of a budget is the model's result
       (:mod:`harness.bench.outcomes`)
  2    usage: a bad option, file or directory (``ConfigError``); nothing or little ran
130    interrupted by SIGINT (Ctrl-C); 143 by SIGTERM — what finished is on disk
=====  =================================================================================
"""

from __future__ import annotations

import signal

__all__ = (
    "EXIT_INTERRUPTED",
    "EXIT_JOB_FAILED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
)

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM
