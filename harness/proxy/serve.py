"""The served deployment: the proxy app under uvicorn on a socket.

:func:`check_bind` refuses a bind that is not loopback unless an API key is set (a proxy
that anyone on the network can use to spend your engine is a server, and is secured like
one). :func:`serve` binds the socket first (so ``port=0`` gets a free port the caller learns
through ``on_listen``) and serves until cancelled; uvicorn's own signal handling is off, the
caller's structured cancellation stops it (``harness serve`` uses SIGINT/SIGTERM).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import ipaddress
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

from harness.errors import ConfigError

__all__ = ("check_bind", "is_loopback", "return_large_blocks", "serve")

#: glibc's ``mallopt`` parameter for the size from which a block gets its own mapping.
_M_MMAP_THRESHOLD = -3
#: Blocks at least this large (bytes) are mapped on their own and given back when freed.
MMAP_THRESHOLD = 128 * 1024


def return_large_blocks() -> bool:
    """Have glibc map every block of :data:`MMAP_THRESHOLD` bytes or more on its own, so
    freeing it gives the memory back to the system (True when set; False off glibc).

    glibc raises that threshold each time it frees such a block, up to 32 MiB, after which a
    request body's megabyte strings come from the heap, where one still in use pins the
    freed ones around it: a proxy that has dropped its waiting conversations stays at its
    peak size. Fixing the threshold (``mallopt(M_MMAP_THRESHOLD)``, which also stops the
    raising) keeps the process's size near what it holds. A process-wide setting, so
    :func:`serve` (a process of its own) sets it, a library user's app does not."""
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def is_loopback(host: str) -> bool:
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None) -> None:
    """A non-loopback ``host`` needs ``api_key`` (see the module docstring)."""
    if not is_loopback(host) and not api_key:
        raise ConfigError(
            f"Binding to {host!r} exposes the proxy beyond this machine; set an API key "
            "(--api-key or $HARNESS_API_KEY) or bind to 127.0.0.1."
        )


async def serve(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    on_listen: Callable[[str], None] | None = None,
    log_level: str = "warning",
) -> None:
    """Serve ``app`` on ``host:port`` until cancelled; ``on_listen(base_url)`` once bound.
    Large blocks are given back to the system when freed (:func:`return_large_blocks`)."""
    return_large_blocks()
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "harness serve needs uvicorn: pip install 'agent-harness[serve]'."
        ) from exc

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:  # the caller owns the signals
            yield

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"Cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port."
        ) from None
    sock.listen(2048)  # connections queue from now on: on_listen's URL answers at once
    bound = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level=log_level, lifespan="off", access_log=False)
    server = _Server(config)
    # The app's lifespan runs here, in this task, around the server (not in uvicorn's lifespan
    # task, which a cancel would leave with a logged traceback): it holds the task group where
    # conversations wait for their clients (harness.proxy.conversation), and a cancel (a
    # signal) leaves it cleanly, cancelling them. Without it every request would start from
    # its history.
    lifespan = getattr(getattr(app, "router", None), "lifespan_context", None)
    around: contextlib.AbstractAsyncContextManager[Any] = (
        lifespan(app) if lifespan is not None else contextlib.nullcontext()
    )
    try:
        async with around:
            if on_listen is not None:
                shown = f"[{host}]" if family == socket.AF_INET6 else host
                on_listen(f"http://{shown}:{bound}/v1")
            await server.serve(sockets=[sock])
    finally:
        # A cancel leaves uvicorn's asyncio servers open, their socket still registered with
        # the event loop's selector; closing only the socket would leave that registration
        # stale, and a later server in the same loop whose socket gets the same descriptor
        # would never be told of a connection. Closing the servers unregisters it first.
        for listening in getattr(server, "servers", ()):
            listening.close()
        sock.close()
