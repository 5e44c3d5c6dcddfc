"""Skill manifests: per skill, its phases (fan-out or chain), the tools each phase uses, and
where each argument slot's value comes from (:mod:`~harness.skills.manifest`); the task inputs
a slot may name, read from files or the command line (:mod:`~harness.skills.input_sources`)."""

from __future__ import annotations

__all__ = ()
