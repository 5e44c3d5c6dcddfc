"""The engine boundary: whatever an engine raises reaches the caller as a HarnessError."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from harness import Task, Toolset
from harness.engines.base import (
    CacheResettingEngine,
    GenerationSettings,
    engine_name,
    guarded_generate,
    reset_prefix_cache,
)
from harness.errors import EngineDeadError, EngineError, HarnessError
from harness.loop import LoopConfig, run_loop
from harness.messages import Message, ToolSpec
from harness.testing import ScriptedEngine

pytestmark = pytest.mark.anyio


def _boom(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    raise RuntimeError("socket closed under us")


async def test_a_plain_exception_from_an_engine_becomes_a_typed_engine_error() -> None:
    engine = ScriptedEngine(_boom)
    with pytest.raises(EngineError, match="raised RuntimeError: socket closed") as caught:
        await run_loop(engine, Toolset([]), Task(id="t", prompt="hi"), LoopConfig(arm="S"))
    assert isinstance(caught.value, HarnessError)
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert caught.value.turn == 0


async def test_an_engines_own_typed_error_passes_unchanged() -> None:
    engine = ScriptedEngine()
    await engine.aclose()
    with pytest.raises(EngineDeadError, match="closed"):
        await guarded_generate(engine, [], [], GenerationSettings(forced_answer="x", forced=()))


async def test_a_reply_that_is_not_a_completion_is_an_engine_error() -> None:
    class Broken(ScriptedEngine):
        async def generate(self, *args: Any, **kwargs: Any) -> Any:
            return {"content": "hi"}

    with pytest.raises(EngineError, match="returned dict, not a Completion"):
        await guarded_generate(Broken(), [], [], GenerationSettings())


async def test_a_prefix_cache_is_reset_only_on_an_engine_that_has_one() -> None:
    class Cached(ScriptedEngine):
        resets = 0

        async def reset_prefix_cache(self) -> bool:
            self.resets += 1
            return True

    class Uncached:  # an engine of another author, with no cache to empty
        name = "uncached"

    cached = Cached()
    assert isinstance(cached, CacheResettingEngine)
    assert await reset_prefix_cache(cached)
    assert cached.resets == 1
    assert not isinstance(Uncached(), CacheResettingEngine)
    assert not await reset_prefix_cache(Uncached())  # left as it is


def test_an_engine_without_a_name_is_called_by_its_class() -> None:
    assert engine_name(ScriptedEngine()) == ScriptedEngine().name
    assert engine_name(object()) == "object"
