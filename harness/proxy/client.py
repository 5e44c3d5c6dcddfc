"""In-process deployment: the proxy app behind an ``httpx.AsyncClient``, no port, no thread.

Hand the client to the OpenAI SDK and point nothing anywhere::

    from openai import AsyncOpenAI
    from harness.proxy import build_app, in_process_client

    app = build_app(engine, ProxyConfig(effects=..., manifest=...))
    openai = AsyncOpenAI(base_url="http://harness/v1", api_key="unused",
                         http_client=in_process_client(app))

Requests go through ``httpx.ASGITransport`` straight into the app, in the caller's event
loop. The app does not open or close the engine: the caller does (``async with engine:``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ("IN_PROCESS_BASE_URL", "in_process_client")

#: The base URL the in-process client answers on (any host works; this one says what it is).
IN_PROCESS_BASE_URL = "http://harness.in-process/v1"


def in_process_client(app: Starlette, *, timeout_s: float = 600.0) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose requests ``app`` serves in process."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url=IN_PROCESS_BASE_URL,
        timeout=timeout_s,
    )
