"""Benchmarks and workloads: importable modules, run as ``python -m benchmarks.NAME``.

``harness.benchmarks.tasks`` is the 48-task workspace workload; ``harness.benchmarks.bfcl`` loads and scores
BFCL simple/parallel entries from the ``bfcl-eval`` package.
"""

from __future__ import annotations

__all__ = ()
