"""The same engine protocol over any OpenAI-compatible ``/v1/chat/completions`` server.

:class:`OpenAIHTTPEngine` sends the chat and the tools (``tools``, ``parallel_tool_calls``)
and reads back the assistant message, ``usage`` (with ``prompt_tokens_details.cached_tokens``
when the server reports it) and the finish reason. It takes an injected
``httpx.AsyncClient`` (tests use ``httpx.MockTransport``) or creates and owns one.

Two prompt formats:

- ``tool_format="openai"`` (default): tools go in the request and the server's own tool-call
  parser returns ``tool_calls`` — what OpenAI, vLLM with ``--enable-auto-tool-choice`` and
  most servers do.
- ``tool_format="harness"``: the chat is rendered exactly as :class:`~harness.engines.vllm.
  VLLMEngine` renders it (tools in the system prompt, the harness's JSON reply format, see
  :mod:`harness.engines._format`) and the reply is parsed by the harness. Use it for models
  whose chat template has no tool syntax (SmolLM2) behind a plain server.

:meth:`OpenAIHTTPEngine.stream` asks for server-sent events (``"stream": true``) and yields
the reply's text as it arrives (the engine seam's streaming extension).

Failures: 408, 409, 429 and 5xx, timeouts and every transient transport error (connection
reset or refused, ``RemoteProtocolError``, ``ReadError``, ``WriteError``, a proxy failure) are
retried with bounded exponential backoff as the official SDKs do (``backoff_s · 2^attempt``
up to ``max_backoff_s``, less up to ``jitter`` of it so K loops do not retry in step;
``Retry-After`` is honoured up to ``max_backoff_s``), then fail with
:class:`~harness.errors.EngineRequestError`; other 4xx and mistakes on our side of the wire
(``LocalProtocolError``, an unsupported URL scheme) fail at once with the status and the
server's message; a server that cannot be reached fails with
:class:`~harness.errors.EngineDeadError` naming the URL.

Several servers (``base_url`` a list, or comma-separated): each request goes through a
:class:`~harness.engines.router.Router` — by default prefix-affine (a loop's turns stay on the
replica that holds its prefix, with load-aware spill-over), ``routing="round_robin"`` as the
control. A replica that cannot be reached is not retried: the request moves to the next one
at once and the replica is left alone for a while (see :mod:`harness.engines.router`).

The gold policy (``settings.forced``) needs decoding constrained to the exact reply: with
``server_supports_structured_outputs=True`` (a vLLM server) the request carries vLLM's
``structured_outputs`` extension; otherwise it is a :class:`~harness.errors.ConfigError`.

``settings.tool_choice`` is sent as Chat Completions spells it with ``tool_format="openai"``
(:attr:`OpenAIHTTPEngine.takes_tool_choice`); the harness format ignores it.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx

from harness.engines import _format, _sse, router
from harness.engines.base import ClosingContext, GenerationSettings, NamedTool, ToolChoice
from harness.errors import ConfigError, EngineDeadError, EngineRequestError
from harness.messages import Completion, Message, Timings, ToolCall, ToolSpec, Usage

__all__ = ("HTTPEngineSettings", "OpenAIHTTPEngine")

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
#: Transport failures worth another attempt: the connection dropped or broke mid-exchange.
#: (``ConnectError`` and timeouts are handled on their own; ``LocalProtocolError`` and
#: ``UnsupportedProtocol`` are mistakes on our side that another attempt repeats.)
_TRANSIENT: tuple[type[BaseException], ...] = (
    httpx.NetworkError,
    httpx.RemoteProtocolError,
    httpx.ProxyError,
    ConnectionError,  # a reset that escapes the transport unwrapped
)


def _server_message(response: httpx.Response) -> str:
    """The error text a server put in its body (OpenAI's ``{"error": {"message"}}`` etc.)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            for key in ("message", "detail", "msg"):
                if isinstance(error.get(key), str):
                    return str(error[key])
        if isinstance(error, str):
            return error
        if isinstance(body.get("detail"), str):
            return str(body["detail"])
    return str(body)[:500]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


@dataclass(frozen=True)
class HTTPEngineSettings:
    """Everything that configures an :class:`OpenAIHTTPEngine`, as one object (what the CLI
    builds once from its options, :meth:`OpenAIHTTPEngine.from_settings`). The fields are the
    constructor's keywords, with the same defaults and meanings; ``option_names`` maps a
    parameter to the name errors give as the fix (a CLI names its own options)."""

    base_url: str | Sequence[str]
    model: str = "default"
    api_key: str | None = None
    timeout_s: float = 300.0
    max_retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    jitter: float = 0.25
    tool_format: Literal["openai", "harness"] = "openai"
    server_supports_structured_outputs: bool = False
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None
    routing: router.Policy = "affine"
    option_names: Mapping[str, str] = field(default_factory=dict)


class OpenAIHTTPEngine(ClosingContext):
    """An :class:`~harness.engines.base.Engine` over an OpenAI-compatible HTTP server.

    ``base_url`` is the API root, e.g. ``http://127.0.0.1:8000/v1``, or several (a list or a
    comma-separated string) served by one model; ``model`` the served model name. ``api_key``
    defaults to ``$OPENAI_API_KEY`` (sent as a bearer token if set). With several base URLs,
    ``routing`` is ``"affine"`` (default), ``"round_robin"`` or a
    :class:`~harness.engines.router.Router`, and ``route_key`` maps a request's messages to
    its loop's key (default :func:`~harness.engines.router.conversation_key`).
    ``option_names``: what errors name as the fix, by parameter (``base_url``,
    ``max_retries``, ``timeout_s``; default ``--base-url`` and the parameter names;
    ``harness serve`` names its own options). A request's ``settings.model`` overrides
    ``model``; ``settings.unsent`` fields are left out of the request.
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        model: str,
        *,
        client: httpx.AsyncClient | None = None,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        jitter: float = 0.25,
        tool_format: Literal["openai", "harness"] = "openai",
        server_supports_structured_outputs: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        name: str | None = None,
        routing: router.Policy | router.Router = "affine",
        route_key: Callable[[Sequence[Message]], str] = router.conversation_key,
        option_names: Mapping[str, str] | None = None,
    ) -> None:
        if tool_format not in ("openai", "harness"):
            raise ConfigError(f"tool_format must be 'openai' or 'harness', not {tool_format!r}.")
        if max_retries < 0 or backoff_s < 0 or max_backoff_s < 0 or timeout_s <= 0:
            raise ConfigError(
                "max_retries, backoff_s and max_backoff_s must be >= 0 and timeout_s > 0; "
                f"got {max_retries}, {backoff_s}, {max_backoff_s}, {timeout_s}."
            )
        if not 0 <= jitter < 1:
            raise ConfigError(
                f"jitter must be in [0, 1), the fraction a delay may shrink; got {jitter}."
            )
        urls = router.split_base_urls(base_url)
        self.router: router.Router | None = None
        if isinstance(routing, router.Router):
            if [r.url for r in routing.replicas] != urls:
                raise ConfigError(
                    f"The router serves {[r.url for r in routing.replicas]} but base_url is "
                    f"{urls}; pass the router's base URLs."
                )
            self.router = routing
        elif routing not in router.POLICIES:
            raise ConfigError(
                f"routing must be one of {', '.join(router.POLICIES)} or a Router, not {routing!r}."
            )
        elif len(urls) > 1:
            self.router = router.Router(urls, policy=routing)
        self.route_key = route_key
        #: What errors name as the fix, by parameter (a CLI names its own options).
        self.option_names = {
            "base_url": "--base-url",
            "max_retries": "max_retries",
            "timeout_s": "timeout_s",
            **(option_names or {}),
        }
        self.base_url = urls[0]
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.jitter = jitter
        self.tool_format = tool_format
        self.server_supports_structured_outputs = server_supports_structured_outputs
        self.extra_body = dict(extra_body or {})
        self.name = name or f"http:{model}"
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout_s)
        self._closed = False
        self._in_flight: set[anyio.CancelScope] = set()

    @classmethod
    def from_settings(
        cls,
        settings: HTTPEngineSettings,
        *,
        client: httpx.AsyncClient | None = None,
        route_key: Callable[[Sequence[Message]], str] = router.conversation_key,
    ) -> OpenAIHTTPEngine:
        """The engine ``settings`` describes (``client`` and ``route_key`` are objects, not
        settings: a shared HTTP client, how a conversation is keyed for routing)."""
        return cls(
            settings.base_url,
            settings.model,
            client=client,
            api_key=settings.api_key,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            backoff_s=settings.backoff_s,
            max_backoff_s=settings.max_backoff_s,
            jitter=settings.jitter,
            tool_format=settings.tool_format,
            server_supports_structured_outputs=settings.server_supports_structured_outputs,
            extra_body=settings.extra_body,
            name=settings.name,
            routing=settings.routing,
            route_key=route_key,
            option_names=settings.option_names,
        )

    @property
    def takes_tool_choice(self) -> bool:
        """Tools go in the request (``tool_format="openai"``), so ``tool_choice`` can too."""
        return self.tool_format == "openai"

    async def aclose(self) -> None:
        """Fail in-flight requests with EngineDeadError and close the engine (and the HTTP
        client, if this engine created it)."""
        if self._closed:
            return
        self._closed = True
        for scope in list(self._in_flight):
            scope.cancel()
        if self._owns_client:
            with anyio.CancelScope(shield=True):
                await self._client.aclose()

    # ------------------------------------------------------------------ request body

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> tuple[dict[str, Any], str | None]:
        forced = _format.forced_text(settings, tools)
        if forced is not None and not self.server_supports_structured_outputs:
            raise ConfigError(
                "The gold policy forces exact replies, which needs constrained decoding: use the "
                "in-process engine (VLLMEngine) or a vLLM server with "
                "server_supports_structured_outputs=True."
            )
        body: dict[str, Any] = {"model": settings.model or self.model}
        unsent = settings.unsent if forced is None else frozenset()
        if "max_tokens" not in unsent:
            body["max_tokens"] = settings.max_tokens
        if "temperature" not in unsent:
            body["temperature"] = settings.temperature
        if settings.seed is not None:
            body["seed"] = settings.seed
        if settings.stop:
            body["stop"] = list(settings.stop)
        if self.tool_format == "harness":
            body["messages"] = _format.render_messages(
                messages, tools, settings.parallel_tool_calls
            )
            constrain = forced is None and settings.constrain and bool(tools)
            if constrain and self.server_supports_structured_outputs:
                body["structured_outputs"] = {
                    "json": _format.reply_schema(
                        tools if settings.grammar_tools is None else settings.grammar_tools,
                        settings.parallel_tool_calls,
                        settings.max_parallel_calls,
                    )
                }
        else:
            body["messages"] = [dict(m) for m in messages]
            if tools:
                body["tools"] = [dict(t) for t in tools]
                if "parallel_tool_calls" not in unsent:
                    body["parallel_tool_calls"] = settings.parallel_tool_calls
                # A forced reply arrives as text in the harness format; the server must not
                # try to parse it as its own tool-call syntax.
                if "tool_choice" not in unsent:
                    body["tool_choice"] = (
                        "none" if forced is not None else _wire_choice(settings.tool_choice)
                    )
        if forced is not None:
            body["structured_outputs"] = {"choice": [forced]}
            body["max_tokens"] = max(settings.max_tokens, len(forced.encode("utf-8")) + 8)
        body.update(self.extra_body)
        return body, forced

    # ------------------------------------------------------------------ transport

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        """The nominal wait before attempt ``attempt + 1`` (jitter is applied on top)."""
        delay: float = min(self.max_backoff_s, self.backoff_s * 2.0**attempt)
        if response is not None:
            after = _retry_after(response)
            if after is not None:
                delay = min(self.max_backoff_s, max(delay, after))
        return delay

    def _wait(self, attempt: int, response: httpx.Response | None) -> float:
        """The actual wait: the nominal delay less a random part of up to ``jitter`` of it
        (as the OpenAI SDK does), unless the server asked for a time with ``Retry-After``."""
        delay = self._delay(attempt, response)
        if response is not None and _retry_after(response) is not None:
            return delay
        return delay * (1.0 - self.jitter * random.random())

    async def _post(self, body: dict[str, Any], base_url: str) -> tuple[dict[str, Any], float]:
        url = f"{base_url}/chat/completions"
        # Behind a router, an unreachable replica is not retried: the router moves on at once.
        connect_retries = 0 if self.router else self.max_retries
        last: str = ""
        for attempt in range(self.max_retries + 1):
            if self._closed:
                raise EngineDeadError(f"Engine {self.name} is closed; open a new one.")
            response: httpx.Response | None = None
            started = time.perf_counter()
            try:
                response = await self._client.post(
                    url, json=body, headers=self._headers, timeout=self.timeout_s
                )
            except (httpx.TransportError, ConnectionError) as exc:
                last = self._transport_failure(exc, attempt, url, connect_retries)
            else:
                if response.status_code < 400:
                    return self._json(response, url), time.perf_counter() - started
                message = _server_message(response)
                last = f"HTTP {response.status_code}: {message}"
                if response.status_code not in _RETRY_STATUS:
                    raise EngineRequestError(
                        f"{url} rejected the request with HTTP {response.status_code}: {message}"
                    )
                if attempt == self.max_retries:
                    break
            await anyio.sleep(self._wait(attempt, response))
        raise EngineRequestError(
            f"{url} kept failing after {self.max_retries + 1} attempt(s); last: {last}. "
            f"Retry later or raise {self.option_names['max_retries']}."
        )

    def _transport_failure(
        self, exc: BaseException, attempt: int, url: str, connect_retries: int
    ) -> str:
        """What went wrong on the wire, when another attempt may help; raises the typed error
        when it cannot, or when ``attempt`` was the last one (behind a router, an unreachable
        replica gets ``connect_retries`` = 0: the router moves on at once)."""
        final = attempt == self.max_retries
        tries = f"{attempt + 1} attempt(s)"
        if isinstance(exc, httpx.ConnectError):
            if attempt >= connect_retries:
                raise EngineDeadError(
                    f"The server at {url} cannot be reached after {tries} ({exc}); "
                    f"is it running? Check {self.option_names['base_url']}."
                ) from exc
            return f"cannot connect to {url}: {exc}"
        if isinstance(exc, httpx.TimeoutException):
            if final:
                raise EngineRequestError(
                    f"{url} gave no answer within {self.timeout_s:.1f} s ({tries}); "
                    f"raise {self.option_names['timeout_s']} or check the server."
                ) from exc
            return f"no answer within {self.timeout_s:.1f} s"
        if not isinstance(exc, _TRANSIENT):
            raise EngineRequestError(
                f"Request to {url} failed and cannot be retried: {exc!r}"
            ) from exc
        last = f"{type(exc).__name__}: {exc}"
        if final:
            raise EngineRequestError(
                f"The connection to {url} broke on each of {tries} (last: {last}); "
                f"check the server and the network, or raise {self.option_names['max_retries']}."
            ) from exc
        return last

    def _json(self, response: httpx.Response, url: str) -> dict[str, Any]:
        try:
            data = response.json()
        except ValueError as exc:
            raise EngineRequestError(
                f"{url} answered {response.status_code} with a body that is not JSON: "
                f"{response.text[:200]!r}"
            ) from exc
        if not isinstance(data, dict):
            raise EngineRequestError(f"{url} answered with {data!r}, not an object.")
        return data

    # ------------------------------------------------------------------ health

    async def check_health(self, timeout_s: float = 5.0) -> None:
        """Return if a server answers ``GET /models`` with success (any replica); raise
        EngineDeadError naming each server and what it said otherwise (no retries)."""
        if self._closed:
            raise EngineDeadError(f"Engine {self.name} is closed; open a new one.")
        urls = [r.url for r in self.router.replicas] if self.router else [self.base_url]
        failures = []
        for base in urls:
            try:
                response = await self._client.get(
                    f"{base}/models", headers=self._headers, timeout=timeout_s
                )
            except (httpx.TransportError, ConnectionError) as exc:
                failures.append(f"{base}: {type(exc).__name__}: {exc}")
                continue
            if response.status_code < 400:
                return
            failures.append(f"{base}: HTTP {response.status_code}: {_server_message(response)}")
        raise EngineDeadError(
            f"No upstream server answers: {'; '.join(failures)}; start it or check "
            f"{self.option_names['base_url']}."
        )

    # ------------------------------------------------------------------ generate

    async def generate(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> Completion:
        """Generate one assistant turn (see :class:`~harness.engines.base.Engine`)."""
        if self._closed:
            raise EngineDeadError(f"Engine {self.name} is closed; open a new one.")
        body, forced = self._body(messages, tools, settings)
        result: tuple[dict[str, Any], float] | None = None
        with anyio.CancelScope() as scope:
            self._in_flight.add(scope)
            try:
                if self.router is None:
                    result = await self._post(body, self.base_url)
                else:
                    key = self.route_key(messages)
                    result = await self.router.call(key, lambda url: self._post(body, url))
            finally:
                self._in_flight.discard(scope)
        if result is None:
            raise EngineDeadError(f"Engine {self.name} was closed while a request was in flight.")
        data, elapsed = result
        return self._completion(data, elapsed, settings, tools, forced)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> AsyncGenerator[str | Completion, None]:
        """Generate one assistant turn as server-sent events (``"stream": true``), yielding
        its text as it arrives, then the whole :class:`Completion` (the streaming extension,
        :class:`~harness.engines.base.StreamingEngine`). Failures before the first event are
        retried like :meth:`generate`'s; a stream cut short is an EngineRequestError."""
        if self._closed:
            raise EngineDeadError(f"Engine {self.name} is closed; open a new one.")
        body, forced = self._body(messages, tools, settings)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        started = time.perf_counter()
        assembled = _sse.ChatStream()
        async with (
            self._open_stream(body) as response,
            contextlib.aclosing(_sse.events(response.aiter_lines(), self.url)) as chunks,
        ):
            while (chunk := await self._next_event(chunks, assembled)) is not None:
                delta = assembled.add(chunk)
                if delta:
                    yield delta
        if assembled.finish_reason is None:
            raise EngineRequestError(
                f"The stream from {self.url} ended after {assembled.chunks} event(s) without a "
                "finish reason; the server cut it short. Retry the request."
            )
        data = assembled.body()
        yield self._completion(data, time.perf_counter() - started, settings, tools, forced)

    async def _next_event(
        self, chunks: AsyncIterator[dict[str, Any]], assembled: _sse.ChatStream
    ) -> dict[str, Any] | None:
        """The stream's next event (``None`` at its end); only this wait is in flight, so
        :meth:`aclose` can fail it (a cancel scope must not span the caller's ``yield``)."""
        with anyio.CancelScope() as scope:
            self._in_flight.add(scope)
            try:
                return await chunks.__anext__()
            except StopAsyncIteration:
                return None
            except httpx.HTTPError as exc:
                raise EngineRequestError(
                    f"The stream from {self.url} broke after {assembled.chunks} event(s): "
                    f"{exc!r}; retry the request."
                ) from exc
            finally:
                self._in_flight.discard(scope)
        raise EngineDeadError(f"Engine {self.name} was closed while a request was in flight.")

    @asynccontextmanager
    async def _open_stream(self, body: dict[str, Any]) -> AsyncIterator[httpx.Response]:
        """A streaming response with a success status, closed on exit; waiting for it is in
        flight (:meth:`aclose` fails it with EngineDeadError)."""
        response: httpx.Response | None = None
        with anyio.CancelScope() as scope:
            self._in_flight.add(scope)
            try:
                response = await self._connect(body)
            finally:
                self._in_flight.discard(scope)
        if response is None:
            raise EngineDeadError(f"Engine {self.name} was closed while a request was in flight.")
        try:
            yield response
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()

    async def _connect(self, body: dict[str, Any]) -> httpx.Response:
        """Send a streaming request; connection failures and retryable statuses are retried
        with backoff (as in :meth:`_post`), then fail typed."""
        last = ""
        for attempt in range(self.max_retries + 1):
            if self._closed:
                raise EngineDeadError(f"Engine {self.name} is closed; open a new one.")
            request = self._client.build_request(
                "POST", self.url, json=body, headers=self._headers, timeout=self.timeout_s
            )
            try:
                response = await self._client.send(request, stream=True)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                if attempt == self.max_retries:
                    error = EngineDeadError if isinstance(exc, httpx.ConnectError) else None
                    raise (error or EngineRequestError)(
                        f"{self.url} could not be streamed from after {attempt + 1} "
                        f"attempt(s) ({last}); is the server running? Check "
                        f"{self.option_names['base_url']}."
                    ) from exc
                await anyio.sleep(self._delay(attempt, None))
                continue
            if response.status_code < 400:
                return response
            await response.aread()
            await response.aclose()
            message = _server_message(response)
            last = f"HTTP {response.status_code}: {message}"
            if response.status_code not in _RETRY_STATUS:
                raise EngineRequestError(
                    f"{self.url} rejected the request with HTTP {response.status_code}: {message}"
                )
            if attempt < self.max_retries:
                await anyio.sleep(self._delay(attempt, response))
        raise EngineRequestError(
            f"{self.url} kept failing after {self.max_retries + 1} attempt(s); last: {last}. "
            f"Retry later or raise {self.option_names['max_retries']}."
        )

    def _completion(
        self,
        data: Mapping[str, Any],
        elapsed: float,
        settings: GenerationSettings,
        tools: Sequence[ToolSpec],
        forced: str | None,
    ) -> Completion:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise EngineRequestError(f"{self.url} answered without choices: {str(data)[:300]}")
        choice = choices[0]
        message = choice.get("message") or {}
        text = _format.message_text(message.get("content"))
        reason = str(choice.get("finish_reason") or "stop")
        usage = _usage(data.get("usage"))
        timings = Timings(total_s=elapsed)
        if forced is not None:
            return _format.forced_completion(text, forced, settings, usage, timings, "the server")
        if self.tool_format == "harness":
            parsed = _format.parse_reply(
                text,
                truncated=reason == "length",
                has_tools=bool(tools),
                salt=str(data.get("id", "")),
            )
            return Completion(
                parsed.content, parsed.tool_calls, usage, timings, parsed.finish_reason
            )
        raw_calls = message.get("tool_calls") or []
        calls = tuple(ToolCall.from_openai(raw) for raw in raw_calls if isinstance(raw, Mapping))
        if calls:
            content = text or None
            return Completion(content, calls, usage, timings, "tool_calls")
        finish: Literal["stop", "length"] = "length" if reason == "length" else "stop"
        return Completion(text, (), usage, timings, finish)


def _wire_choice(choice: ToolChoice) -> str | dict[str, Any]:
    """``choice`` as Chat Completions spells it."""
    if isinstance(choice, str):
        return choice
    if isinstance(choice, NamedTool):
        return {"type": "function", "function": {"name": choice.name}}
    return dict(choice.value)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage()
    details = raw.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    prompt = int(raw.get("prompt_tokens") or 0)
    return Usage(
        prompt_tokens=prompt,
        cached_tokens=min(prompt, int(cached or 0)),
        completion_tokens=int(raw.get("completion_tokens") or 0),
    )
