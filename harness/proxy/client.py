"""In-process deployment: the proxy app behind an ``httpx.AsyncClient``, no port, no thread.

Hand the client to the OpenAI SDK and point nothing anywhere::

    from openai import AsyncOpenAI
    from harness.proxy import build_app, in_process_client

    app = build_app(engine, ProxyConfig(effects=..., manifest=...))
    async with in_process_client(app) as http:
        openai = AsyncOpenAI(base_url="http://harness/v1", api_key="unused", http_client=http)
        ...

Requests go through ``httpx.ASGITransport`` straight into the app, in the caller's event
loop. ``async with`` also runs the app's lifespan: the task group where conversations wait for
their clients' results (:mod:`harness.proxy.conversation`); leaving it cancels them. A client
used without ``async with`` still works, but every request then starts from the client's
history (the proxy logs a warning once). The app does not open or close the engine: the
caller does (``async with engine:``).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import httpx

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ("IN_PROCESS_BASE_URL", "in_process_client")

#: The base URL the in-process client answers on (any host works; this one says what it is).
IN_PROCESS_BASE_URL = "http://harness.in-process/v1"


def in_process_client(app: Starlette, *, timeout_s: float = 600.0) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose requests ``app`` serves in process; ``async with`` it
    to run the app's lifespan too (see the module docstring)."""
    return _InProcessClient(app, timeout_s)


class _InProcessClient(httpx.AsyncClient):
    def __init__(self, app: Starlette, timeout_s: float) -> None:
        super().__init__(
            transport=httpx.ASGITransport(app=app),
            base_url=IN_PROCESS_BASE_URL,
            timeout=timeout_s,
        )
        self._app = app
        self._lifespan: AbstractAsyncContextManager[Any] | None = None

    async def __aenter__(self) -> Self:
        await super().__aenter__()
        lifespan = self._app.router.lifespan_context(self._app)
        await lifespan.__aenter__()
        self._lifespan = lifespan
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        lifespan, self._lifespan = self._lifespan, None
        try:
            if lifespan is not None:
                await lifespan.__aexit__(exc_type, exc, tb)
        finally:
            await super().__aexit__(exc_type, exc, tb)
