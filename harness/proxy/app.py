"""The proxy's ASGI app: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``.

:func:`build_app` wires one upstream :class:`~harness.engines.base.Engine` (the embedded vLLM
engine, or :class:`~harness.engines.openai_http.OpenAIHTTPEngine` over one or several
OpenAI-compatible servers) to a Starlette app. Each chat request:

1. is checked (:mod:`harness.proxy.protocol`; a mistake is a 400 with OpenAI's error body),
   and its skill and inputs are read from ``X-Harness-Skill`` / ``X-Harness-Inputs`` or the
   body's ``harness_skill`` / ``harness_inputs`` (a manifest with one skill: the default);
2. has its flattened windows put back in serial form (:mod:`harness.proxy.restore`);
3. is answered by arm F with the client as the executor (:mod:`harness.proxy.flatten`), or
   passed through (arm S: one generation, the reply as the upstream gave it) when the client
   asks for it (``X-Harness-Arm: S``), when it asks for native parallel calls
   (``parallel_tool_calls: true``) or when it sends no tools;
4. says what happened in headers — ``X-Harness-Arm``, ``X-Harness-Window`` (calls in the
   returned window, 0 for none), ``X-Harness-Generations`` (upstream generations folded in),
   ``X-Harness-Restored`` (windows put back in serial form), ``X-Harness-Discards``,
   ``X-Harness-Warning`` — and in the ledger (every turn, call and window).

``extra_routes``: more Starlette routes mounted on the same app (e.g. another service on the
same port); they share the API-key check.
"""

from __future__ import annotations

import hmac
import json
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness.certify import make_detector
from harness.effects import Effect
from harness.engines.base import Completion, Engine, Message, ToolCall, ToolSpec, Usage
from harness.engines.router import conversation_key
from harness.errors import ConfigError, EngineError, HarnessError
from harness.ledger import CallRecord, Ledger, WindowRecord
from harness.loop.config import LoopConfig
from harness.manifest import Manifest, Skill
from harness.proxy.effects_file import toolset_for
from harness.proxy.flatten import Outcome, ProxyArm, ProxyState, answer, replay_history
from harness.proxy.ids import CallIds
from harness.proxy.protocol import (
    BadRequest,
    ChatRequest,
    chat_response,
    error_body,
    parse_request,
    stream_chunks,
)
from harness.proxy.restore import Restoration, restore_serial
from harness.proxy.store import Pending, WindowStore
from harness.tools import Toolset

try:
    from starlette.applications import Starlette
    from starlette.datastructures import Headers
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import BaseRoute, Route
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "harness.proxy needs Starlette: pip install 'agent-harness[serve]' "
        f"(the 'serve' extra: starlette and uvicorn); {exc}"
    ) from exc

__all__ = ("ProxyConfig", "ProxyService", "build_app")

#: Distinct tool lists whose toolsets are kept built.
_TOOLSETS_KEPT = 64


@dataclass
class ProxyConfig:
    """How the proxy certifies and what it accepts.

    ``effects``: tool name -> :class:`~harness.effects.Effect` (see
    :mod:`harness.proxy.effects_file`); ``manifest``: the skills (one skill: the default).
    ``api_key``: required as ``Authorization: Bearer KEY`` when set. ``max_body_bytes``,
    ``max_messages``: request limits. ``store_capacity``: windows the bounded store keeps.
    ``max_generations``: upstream generations one request may fold in. ``secret``: the key of
    the minted call ids (default: random per server). ``secrets_to_hide``: strings never
    echoed in an error (the upstream's key). ``model``: the name ``/v1/models`` lists.
    """

    effects: Mapping[str, Effect] = field(default_factory=dict)
    manifest: Manifest | None = None
    detector: str = "schema_sound"
    max_window: int = 16
    api_key: str | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    max_messages: int = 2048
    store_capacity: int = 4096
    max_generations: int = 40
    secret: bytes | None = None
    secrets_to_hide: tuple[str, ...] = ()
    model: str = "harness"
    upstream: str = "the embedded engine"


class ProxyService:
    """The request handling behind the app (one per app; safe for concurrent requests)."""

    def __init__(self, engine: Engine, config: ProxyConfig, ledger: Ledger | None = None) -> None:
        self.engine = engine
        self.config = config
        self.ledger = ledger or Ledger(log=False)
        self.ids = CallIds(config.secret)
        self.store = WindowStore(config.store_capacity)
        self.detector = make_detector(config.detector, max_window=config.max_window)
        self._toolsets: OrderedDict[str, Toolset] = OrderedDict()
        #: Seconds spent in the proxy itself per request: its wall time in :meth:`complete`
        #: less the time awaiting the upstream (parsing, restoration, certification, replay).
        self.overheads: list[float] = []
        self.overheads_by_arm: dict[str, list[float]] = {}

    # -- the request ------------------------------------------------------------------------

    def _skill(self, request: ChatRequest, header: str | None) -> Skill | None:
        name = header or request.skill
        manifest = self.config.manifest
        if manifest is None:
            if name is not None:
                raise BadRequest(
                    f"Skill {name!r} was asked for but this proxy has no manifest; start it with "
                    "--manifest FILE.",
                    param="harness_skill",
                )
            return None
        if name is None:
            if len(manifest.skills) == 1:
                return next(iter(manifest.skills.values()))
            return None
        if name not in manifest.skills:
            raise BadRequest(
                f"Unknown skill {name!r}; the manifest {manifest.source} has: "
                f"{', '.join(sorted(manifest.skills))}.",
                param="harness_skill",
            )
        return manifest.skills[name]

    def _toolset(self, specs: list[ToolSpec]) -> Toolset:
        """The request's tools with the configured effects, built once per distinct tool list
        (checking JSON schemas costs milliseconds per tool; clients resend the same tools
        every turn)."""
        key = json.dumps(specs, sort_keys=True, default=str)
        toolset = self._toolsets.get(key)
        if toolset is None:
            try:
                toolset = toolset_for(specs, self.config.effects)
            except (ConfigError, HarnessError) as exc:
                raise BadRequest(str(exc), param="tools") from None
            self._toolsets[key] = toolset
            while len(self._toolsets) > _TOOLSETS_KEPT:
                self._toolsets.popitem(last=False)
        else:
            self._toolsets.move_to_end(key)
        return toolset

    @staticmethod
    def _inputs(request: ChatRequest, header: str | None) -> dict[str, Any]:
        if header is None:
            return dict(request.inputs or {})
        try:
            inputs = json.loads(header)
        except ValueError as exc:
            raise BadRequest(
                f"X-Harness-Inputs is not valid JSON: {exc}.", param="X-Harness-Inputs"
            ) from None
        if not isinstance(inputs, dict):
            raise BadRequest("X-Harness-Inputs must be a JSON object.", param="X-Harness-Inputs")
        return inputs

    async def complete(
        self, request: ChatRequest, headers: Mapping[str, str]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """Answer one checked request: the response body and the X-Harness headers."""
        started = time.perf_counter()
        skill = self._skill(request, headers.get("x-harness-skill"))
        inputs = self._inputs(request, headers.get("x-harness-inputs"))
        arm = headers.get("x-harness-arm") or request.arm or "F"
        if arm not in ("S", "F"):
            raise BadRequest(
                "X-Harness-Arm must be 'S' (pass-through) or 'F'.", param="X-Harness-Arm"
            )
        if request.parallel_tool_calls or not request.tools:
            arm = "S"
        toolset = self._toolset(request.tools)
        if skill is not None:
            missing = sorted({t for p in skill.phases for t in p.tools} - set(toolset))
            if missing and arm == "F":
                raise BadRequest(
                    f"Skill {skill.name!r} uses tools the request does not send: {missing}; "
                    "send them in 'tools' or pick another skill.",
                    param="tools",
                )
        restoration = restore_serial(request.messages, self.ids, self.store)
        run_id = f"proxy-{conversation_key(restoration.messages)}"
        settings = request.settings
        settings = replace(settings, parallel_tool_calls=bool(request.parallel_tool_calls))
        config = LoopConfig(
            arm="F" if arm == "F" else "S",
            detector=self.config.detector,
            max_turns=self.config.max_generations,
            max_window=self.config.max_window,
            generation=settings,
        )
        state = ProxyState(
            self.engine,
            toolset,
            request.tools,
            restoration.messages,
            config,
            skill,
            inputs,
            self.ledger,
            run_id,
            detector_name=self.detector.name,
        )
        self._record_results(state, restoration)
        if arm == "S":
            outcome = await self._pass_through(state)
        else:
            proxy_arm = ProxyArm(state, self.detector)
            replay_history(
                proxy_arm,
                restoration.messages,
                [[c.id for c in w.calls] for w in restoration.windows],
            )
            pending = self._pending(restoration)
            outcome = await answer(
                state,
                proxy_arm,
                pending.remainder if pending else (),
                pending.remainder_content if pending else None,
            )
        body = self._response(request, outcome, run_id)
        overhead = max(0.0, time.perf_counter() - started - state.upstream_s)
        self.overheads.append(overhead)
        self.overheads_by_arm.setdefault(arm, []).append(overhead)
        out_headers = {
            "X-Harness-Arm": arm,
            "X-Harness-Window": str(len(outcome.calls) if outcome.kind == "window" else 0),
            "X-Harness-Generations": str(len(outcome.completions)),
            "X-Harness-Restored": str(len(restoration.windows)),
            "X-Harness-Discards": str(outcome.discards),
        }
        if restoration.warnings:
            out_headers["X-Harness-Warning"] = _header_text("; ".join(restoration.warnings))
        return body, out_headers

    async def _pass_through(self, state: ProxyState) -> Outcome:
        completion = await state.generate(state.config.generation)
        return Outcome(
            "calls" if completion.tool_calls else "answer",
            state.completions,
            completion,
            calls=completion.tool_calls,
            content=completion.content,
        )

    def _pending(self, restoration: Restoration) -> Pending | None:
        if not restoration.windows or not restoration.windows[-1].last:
            return None
        return self.store.get(restoration.windows[-1].key)

    def _record_results(self, state: ProxyState, restoration: Restoration) -> None:
        """The window whose results this request brings: its calls and the window, recorded
        (older windows in the history were recorded when their results came)."""
        if not restoration.windows or not restoration.windows[-1].last:
            return
        window = restoration.windows[-1]
        now = time.monotonic()
        for call, text in zip(window.calls, window.results, strict=True):
            state.ledger.emit(
                CallRecord(
                    run_id=state.run_id,
                    call_id=call.id,
                    tool=call.name,
                    arguments=call.arguments,
                    turn=-1,
                    mode="client",
                    window=None,
                    is_error=False,
                    error_kind=None,
                    started=now,
                    finished=now,
                    result_chars=len(text),
                    outcome_known=True,
                )
            )
        state.ledger.emit(
            WindowRecord(
                run_id=state.run_id,
                index=len(restoration.windows) - 1,
                arm="F",
                detector=state.detector_name,
                phase=None,
                n=len(window.calls),
                call_ids=tuple(c.id for c in window.calls),
                closed_by="client_results",
                evidence=(f"window {window.key}: results came back from the client",),
                opened_turn=-1,
                closed_turn=-1,
                tool_wall_s=0.0,
                tool_serial_s=0.0,
            )
        )

    def _response(self, request: ChatRequest, outcome: Outcome, run_id: str) -> dict[str, Any]:
        usage = sum((c.usage for c in outcome.completions), Usage())
        model = request.model or self.config.model
        if outcome.kind == "answer":
            completion = outcome.completion or Completion("")
            message: Message = {"role": "assistant", "content": completion.content}
            return chat_response(model, message, completion.finish_reason, usage)
        if outcome.kind == "calls":
            message = {
                "role": "assistant",
                "content": outcome.content,
                "tool_calls": [c.to_openai() for c in outcome.calls],
            }
            return chat_response(model, message, "tool_calls", usage)
        calls = outcome.calls
        key = self.ids.window_key(run_id, calls)
        minted = [
            ToolCall(self.ids.mint(key, i, len(calls), c), c.name, c.arguments)
            for i, c in enumerate(calls)
        ]
        contents = outcome.contents
        later = any(c for c in contents[1:])
        if outcome.remainder or later:
            self.store.put(
                key,
                Pending(contents if later else (), outcome.remainder, outcome.remainder_content),
            )
        message = {
            "role": "assistant",
            "content": contents[0] if contents else None,
            "tool_calls": [c.to_openai() for c in minted],
        }
        return chat_response(model, message, "tool_calls", usage)

    def hide(self, text: str) -> str:
        for secret in self.config.secrets_to_hide:
            if secret:
                text = text.replace(secret, "***")
        return text


def _header_text(text: str) -> str:
    """A header value: latin-1 safe, one line, bounded."""
    return text.encode("latin-1", "replace").decode("latin-1").replace("\n", " ")[:1000]


def build_app(
    engine: Engine,
    config: ProxyConfig | None = None,
    *,
    ledger: Ledger | None = None,
    extra_routes: Sequence[BaseRoute] = (),
) -> Starlette:
    """The proxy as an ASGI app over ``engine`` (opened by the caller, who also closes it).

    ``extra_routes``: more Starlette routes on the same app (behind the same API key), e.g.
    ``[Route("/v1/fabric", handler, methods=["POST"])]``. The app's :class:`ProxyService` is
    ``app.state.proxy``.
    """
    service = ProxyService(engine, config or ProxyConfig(), ledger)
    cfg = service.config

    def error(
        status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None
    ) -> JSONResponse:
        return JSONResponse(
            error_body(service.hide(message), kind=kind, param=param), status_code=status
        )

    async def chat(request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > cfg.max_body_bytes:
            return error(
                413,
                f"Request body of {int(declared):,} bytes is over this server's limit of {cfg.max_body_bytes:,} bytes.",
            )
        raw = b""
        async for piece in request.stream():
            raw += piece
            if len(raw) > cfg.max_body_bytes:
                return error(
                    413,
                    f"Request body is over this server's limit of {cfg.max_body_bytes:,} bytes.",
                )
        try:
            decoded = json.loads(raw)
        except ValueError as exc:
            return error(400, f"The request body is not valid JSON: {exc}.")
        try:
            parsed = parse_request(decoded, max_messages=cfg.max_messages)
            body, headers = await service.complete(parsed, request.headers)
        except BadRequest as bad:
            return error(bad.status, bad.message, param=bad.param)
        except EngineError as exc:
            return error(502, f"The upstream ({cfg.upstream}) failed: {exc}", kind="upstream_error")
        except HarnessError as exc:
            return error(500, f"{type(exc).__name__}: {exc}", kind="server_error")
        if parsed.stream:
            return StreamingResponse(
                iter(list(stream_chunks(body, include_usage=parsed.include_usage))),
                media_type="text/event-stream",
                headers=headers,
            )
        return JSONResponse(body, headers=headers)

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": cfg.model, "object": "model", "created": 0, "owned_by": "harness"}],
            }
        )

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "upstream": cfg.upstream})

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(
            404,
            f"No route {request.method} {request.url.path}; this server serves POST /v1/chat/completions, GET /v1/models and GET /health.",
        )

    routes: list[BaseRoute] = [
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/health", health, methods=["GET"]),
        *extra_routes,
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={404: not_found},
        middleware=[Middleware(_ApiKey, key=cfg.api_key, open_paths=("/health", "/v1/health"))],
    )
    app.state.proxy = service
    return app


class _ApiKey:
    """ASGI middleware: every path but ``open_paths`` needs ``Authorization: Bearer KEY``
    (compared in constant time) when ``key`` is set."""

    def __init__(self, app: ASGIApp, *, key: str | None, open_paths: tuple[str, ...]) -> None:
        self.app = app
        self.key = key.encode("utf-8") if key else None
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.key is None or scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        given = Headers(scope=scope).get("authorization", "")
        token = given[7:].strip() if given[:7].lower() == "bearer " else ""
        if hmac.compare_digest(token.encode("utf-8"), self.key):
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            error_body(
                "Missing or wrong API key: send 'Authorization: Bearer <key>'.",
                kind="authentication_error",
            ),
            status_code=401,
        )
        await response(scope, receive, send)
