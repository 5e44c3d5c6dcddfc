"""The one-off measurements, run from a checkout as ``python -m benchmarks.NAME``.

Each module measures something and writes under ``benchmarks/results/`` (soundness, crash and
resume, the proxy, speculation, drafts, the fabric, scale, the certifier's cost, ...). They
import the package; the package imports nothing from here (an import contract says so), and
they are not shipped in the wheel. What ``harness run``/``harness bench`` need — jobs, the
workload, BFCL, the bench runner, reports — is :mod:`harness.bench`.
"""

from __future__ import annotations

__all__ = ()
