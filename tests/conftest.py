"""Shared fixtures: the anyio backend, structlog as a fresh process has it, and a guard that
keeps unit tests off the real engine."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
import structlog
from hypothesis import settings

# Shared, noisy 2-core machines: a per-example deadline measures the neighbours, not the code.
settings.register_profile("harness", deadline=None)
settings.load_profile("harness")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    # Session scope, so session-scoped async fixtures (the shared real engine) share the loop.
    return "asyncio"


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """Every test starts with structlog's defaults: the CLI's tests configure a WARNING filter
    for the process, which would otherwise drop the events a later test captures."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


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


# -- the real engine, shared by every test marked `engine` -----------------------------------


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The prepared SmolLM2-135M-Instruct folder (converted on first use)."""
    from harness.engines.model import prepare_model

    return prepare_model()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Path:
    """A random-weight 2-layer Llama folder with SmolLM2's tokenizer (start with
    ``tests.engine_support.TINY_SETTINGS``)."""
    from tests.engine_support import build_tiny_model

    return build_tiny_model(smollm2_dir, tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
async def real_engine(smollm2_dir: Path) -> AsyncIterator[Any]:
    """One VLLMEngine on SmolLM2 for the whole session (starting one costs 10-40 s).

    It can give every token's raw logit (``benchmarks.draft_ties.SCORER_SETTINGS``), so the
    drafted-decoding tests can score where two runs part; no request asks for log-probs
    unless it says so, and one that does not is served as by a default engine."""
    from benchmarks.draft_ties import SCORER_SETTINGS
    from harness.engines.vllm import VLLMEngine

    engine = await VLLMEngine.start(smollm2_dir, extra=SCORER_SETTINGS)
    try:
        yield engine
    finally:
        await engine.aclose()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Engine tests last: their shared engine lives on a session-wide event loop, and unit
    tests that start their own loop (``anyio.run``) must all have run before it starts."""
    items.sort(key=lambda item: item.get_closest_marker("engine") is not None)


@pytest.fixture
def opened_with(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``open_default_engine`` replaced by the scripted engine; records its keyword arguments
    (what a command asked the in-process engine for)."""
    from contextlib import asynccontextmanager

    from harness.engines import vllm
    from harness.testing import ScriptedEngine

    calls: list[dict[str, Any]] = []

    @asynccontextmanager
    async def fake(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        async with ScriptedEngine() as engine:
            yield engine

    monkeypatch.setattr(vllm, "open_default_engine", fake)
    return calls
