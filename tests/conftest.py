"""Shared fixtures: the anyio backend, and a guard that keeps unit tests off the real engine."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
