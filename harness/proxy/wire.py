"""What the proxy's other wire APIs share: a route that reads the body, translates it to the
internal chat-completions request, has :meth:`~harness.proxy.app.ProxyService.complete`
answer it, and translates the answer back.

An API (:mod:`harness.proxy.responses_api`, :mod:`harness.proxy.messages_api`) is a
:class:`WireApi`: a pure translation layer — its request body to a
:class:`~harness.proxy.protocol.ChatRequest` (Chat Completions message form, so restoration
and the flattener work unchanged), the answered ``chat.completion`` body to its own response
and stream events, a streamed pass-through's chat chunks to its own events one by one, and
every error in its own error shape (a mistake is never a traceback).
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, Protocol

from harness._logging import get_logger
from harness.errors import EngineError, HarnessError
from harness.proxy.conversation import Meter
from harness.proxy.limits import Limits, check_arguments, decode_json
from harness.proxy.overhead import Kind, Overheads
from harness.proxy.protocol import BadRequest, ChatRequest

try:
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "harness.proxy needs Starlette: pip install 'agent-harness[serve]' "
        f"(the 'serve' extra: starlette and uvicorn); {exc}"
    ) from exc

__all__ = (
    "ChatChunk",
    "WireApi",
    "chat_chunks",
    "check_calls",
    "error_status",
    "sse",
    "wire_endpoint",
)

_log = get_logger("harness.proxy")


class _Served(Protocol):
    """What :class:`~harness.proxy.app.Served` holds (this module does not import the app)."""

    @property
    def body(self) -> dict[str, Any] | None: ...
    @property
    def headers(self) -> dict[str, str]: ...
    @property
    def kind(self) -> Kind: ...
    @property
    def meter(self) -> Meter: ...
    @property
    def chunks(self) -> AsyncIterator[str] | None: ...


class _Service(Protocol):
    """What a route needs of :class:`~harness.proxy.app.ProxyService`."""

    @property
    def config(self) -> Any: ...  # ProxyConfig
    @property
    def overheads(self) -> Overheads: ...
    def hide(self, text: str) -> str: ...
    async def complete(self, request: ChatRequest, headers: Mapping[str, str]) -> _Served: ...


class WireApi(Protocol):
    """One wire API as a translation to and from the chat-completions form."""

    name: str

    def parse(self, body: Any, *, max_messages: int) -> ChatRequest:
        """The request body as a checked chat request (raises
        :class:`~harness.proxy.protocol.BadRequest` naming what is wrong)."""
        ...

    def error(self, message: str, *, status: int, kind: str, param: str | None) -> dict[str, Any]:
        """This API's error body. ``kind``: the OpenAI error type the proxy uses
        (``invalid_request_error``, ``upstream_error``, ``server_error``, ...)."""
        ...

    def response(self, request: ChatRequest, chat: Mapping[str, Any]) -> dict[str, Any]:
        """The answered ``chat.completion`` body as this API's response body."""
        ...

    def events(self, request: ChatRequest, chat: Mapping[str, Any]) -> Iterator[str]:
        """The answered ``chat.completion`` body as this API's server-sent events."""
        ...

    def translate(self, request: ChatRequest, chunks: AsyncIterator[str]) -> AsyncIterator[str]:
        """A streamed pass-through's ``chat.completion.chunk`` events as this API's events,
        chunk by chunk."""
        ...


class ChatChunk:
    """One server-sent chat chunk, decoded: the text ``content`` delta, the
    ``finish_reason``, the ``usage`` and an ``error`` (OpenAI's error object), when present;
    ``done``: the ``[DONE]`` line."""

    def __init__(self, data: str) -> None:
        self.done = data == "[DONE]"
        body: dict[str, Any] = {} if self.done else json.loads(data)
        choices = body.get("choices") or [{}]
        delta = choices[0].get("delta") or {}
        self.content: str = delta.get("content") or ""
        self.finish_reason: str | None = choices[0].get("finish_reason")
        self.usage: Mapping[str, Any] | None = body.get("usage")
        self.error: Mapping[str, Any] | None = body.get("error")
        self.id: str | None = body.get("id")
        self.created: int | None = body.get("created")
        self.model: str | None = body.get("model")


async def chat_chunks(chunks: AsyncIterator[str]) -> AsyncIterator[ChatChunk]:
    """The chat chunks of a streamed pass-through, decoded (each string is one or more
    ``data: ...`` events)."""
    async for text in chunks:
        for line in text.splitlines():
            if line.startswith("data:"):
                yield ChatChunk(line[5:].strip())


def sse(event: str, data: Mapping[str, Any]) -> str:
    """One server-sent event with an ``event:`` name."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def error_status(exc: Exception, upstream: str) -> tuple[int, str, str]:
    """The one place a failure becomes an answer: its status, the OpenAI error type and the
    message. A client's mistake (:class:`~harness.proxy.protocol.BadRequest`) is its own
    status (4xx); the upstream failing is a 502 naming it; any other harness error (a
    budget, the stuck guard) a 500 saying what; anything else is a bug in the proxy: a 500
    that names only the exception's type (its text may hold the server's paths), logged
    with its traceback."""
    if isinstance(exc, BadRequest):
        return exc.status, "invalid_request_error", exc.message
    if isinstance(exc, EngineError):
        return 502, "upstream_error", f"The upstream ({upstream}) failed: {exc}"
    if isinstance(exc, HarnessError):
        return 500, "server_error", f"{type(exc).__name__}: {exc}"
    return (
        500,
        "server_error",
        f"The proxy failed on this request ({type(exc).__name__}); the error is logged "
        "(logger harness.proxy, event internal_error); please report it.",
    )


def check_calls(request: ChatRequest, limits: Limits) -> None:
    """Every call's argument string in the history within ``limits`` (it is parsed again
    behind the edge: :func:`~harness.proxy.limits.check_arguments`)."""
    for i, message in enumerate(request.messages):
        for j, call in enumerate(message.get("tool_calls") or ()):
            arguments = call.get("function", {}).get("arguments")
            if isinstance(arguments, str) and arguments[:1] in ("{", "["):
                where = f"messages[{i}].tool_calls[{j}].function.arguments"
                check_arguments(arguments, what=where, limits=limits, param=where)


def wire_endpoint(service: _Service, api: WireApi) -> Callable[[Request], Awaitable[Response]]:
    """The Starlette endpoint of ``api`` over ``service``."""
    cfg = service.config

    def error(
        status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None
    ) -> JSONResponse:
        body = api.error(service.hide(message), status=status, kind=kind, param=param)
        return JSONResponse(body, status_code=status)

    async def answer(request: Request, started: tuple[float, float]) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > cfg.max_body_bytes:
            return error(
                413,
                f"Request body of {int(declared):,} bytes is over this server's limit of "
                f"{cfg.max_body_bytes:,} bytes.",
                kind="request_too_large",
            )
        pieces: list[bytes] = []
        size = 0
        try:
            async for piece in request.stream():
                pieces.append(piece)
                size += len(piece)
                if size > cfg.max_body_bytes:
                    return error(
                        413,
                        f"Request body is over this server's limit of {cfg.max_body_bytes:,} "
                        "bytes.",
                        kind="request_too_large",
                    )
        except ClientDisconnect:
            return error(400, "The client closed the connection before the request body ended.")
        raw = b"".join(pieces)
        try:
            decoded = decode_json(raw, what="The request body", limits=cfg.limits)
            parsed = api.parse(decoded, max_messages=cfg.max_messages)
            check_calls(parsed, cfg.limits)
            served = await service.complete(parsed, request.headers)
            request.state.kind = served.kind
            return _respond(service, api, served, parsed, started)
        except Exception as exc:  # a cancellation is a BaseException: it goes on
            status, kind, message = error_status(exc, cfg.upstream)
            _log_failure(service, exc, message)
            param = exc.param if isinstance(exc, BadRequest) else None
            return error(status, message, kind=kind, param=param)

    async def endpoint(request: Request) -> Response:
        started = time.perf_counter(), time.thread_time()
        response = await answer(request, started)
        headers = response.headers
        _log.info(
            "request",
            api=api.name,
            path=request.url.path,
            status=response.status_code,
            kind=getattr(request.state, "kind", None),
            arm=headers.get("x-harness-arm"),
            window=int(headers.get("x-harness-window", "0")),
            generations=int(headers.get("x-harness-generations", "0")),
            restored=int(headers.get("x-harness-restored", "0")),
            upstream=cfg.upstream,
            wall_s=round(time.perf_counter() - started[0], 4),
        )
        return response

    return endpoint


def _log_failure(service: _Service, exc: Exception, message: str) -> None:
    """Log a request that failed past its parse: an upstream's failure as a warning, a bug
    (not a :class:`~harness.errors.HarnessError`) as an error with its traceback, secrets
    hidden; the client's own mistakes are its answer, not a log line."""
    if isinstance(exc, EngineError):
        _log.warning(
            "upstream_failed",
            upstream=service.config.upstream,
            error=type(exc).__name__,
            detail=service.hide(message),
        )
    elif not isinstance(exc, HarnessError):
        _log.error(
            "internal_error",
            error=type(exc).__name__,
            detail=service.hide(str(exc))[:2000],
            traceback=service.hide(traceback.format_exc())[-8000:],
        )


def _respond(
    service: _Service,
    api: WireApi,
    served: _Served,
    parsed: ChatRequest,
    started: tuple[float, float],
) -> Response:
    """The translated response (JSON or server-sent events), its overhead counted as the
    chat route counts it (:mod:`harness.proxy.overhead`)."""
    meter = served.meter
    if served.chunks is not None:
        chunks = served.chunks

        async def measured() -> AsyncIterator[str]:
            wall = time.perf_counter() - started[0] - meter.upstream_s
            cpu = time.thread_time() - started[1] - meter.upstream_cpu_s
            async for event in api.translate(parsed, chunks):
                yield event
            service.overheads.add(served.kind, wall + meter.proxy_s, cpu + meter.proxy_cpu_s)

        return StreamingResponse(measured(), media_type="text/event-stream", headers=served.headers)
    assert served.body is not None
    response: Response
    if parsed.stream:
        response = StreamingResponse(
            iter(list(api.events(parsed, served.body))),
            media_type="text/event-stream",
            headers=served.headers,
        )
    else:
        response = JSONResponse(api.response(parsed, served.body), headers=served.headers)
    service.overheads.add(
        served.kind,
        time.perf_counter() - started[0] - meter.upstream_s,
        time.thread_time() - started[1] - meter.upstream_cpu_s,
    )
    return response
