"""Toolsets shipped with the harness, one package each.

``harness.toolsets.workspace`` is the typed read/write document store the 48-task workload runs on
(see :mod:`harness.toolsets.workspace` for the contract the benchmark and the certification kit use).
"""

from __future__ import annotations

__all__ = ()
