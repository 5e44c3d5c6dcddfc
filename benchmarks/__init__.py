"""Benchmarks and workloads: importable modules, run as ``python -m benchmarks.NAME``.

``harness.benchmarks.tasks`` is the 48-task workspace workload; ``harness.benchmarks.bfcl`` loads and scores
BFCL's AST categories from the ``bfcl-eval`` package, with a scorer measured against BFCL's
own checker (``python -m harness.benchmarks.bfcl agreement``).
"""

from __future__ import annotations

__all__ = ()
