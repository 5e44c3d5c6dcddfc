"""The product's runner for a user's own tasks: a task file (:mod:`~harness.runs.task_file`)."""

from __future__ import annotations

__all__ = ()
