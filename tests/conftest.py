"""Shared fixtures: the anyio backend, and a guard that keeps unit tests off the real engine."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_GUARD_MESSAGE = "unit test tried to start the real engine; mark it @pytest.mark.engine"


@pytest.fixture(autouse=True)
def _no_real_engine_in_unit_tests(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unless a test is marked ``engine``, starting the in-process vLLM engine raises.

    ``VLLMEngine.start`` (the only way to load a model) is replaced, and the constructor refuses
    a real vLLM object; a fake ``llm`` handed to the constructor is still allowed. If the engine
    module is missing or does not import, there is nothing to guard.
    """
    if request.node.get_closest_marker("engine") is not None:
        return
    try:
        from harness.engines import vllm as vllm_engine
    except Exception:
        return
    engine_cls: Any = getattr(vllm_engine, "VLLMEngine", None)
    if engine_cls is None:
        return

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(_GUARD_MESSAGE)

    if hasattr(engine_cls, "start"):
        monkeypatch.setattr(engine_cls, "start", classmethod(refuse))
    original_init = engine_cls.__init__

    def guarded_init(self: Any, llm: Any = None, *args: Any, **kwargs: Any) -> None:
        if type(llm).__module__.partition(".")[0] == "vllm":
            raise RuntimeError(_GUARD_MESSAGE)
        original_init(self, llm, *args, **kwargs)

    monkeypatch.setattr(engine_cls, "__init__", guarded_init)
