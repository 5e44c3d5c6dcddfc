"""The proxy's ASGI app: ``POST /v1/chat/completions``, ``POST /v1/responses`` (the OpenAI
Responses API, :mod:`harness.proxy.responses_api`), ``POST /v1/messages`` (the Anthropic
Messages API, :mod:`harness.proxy.messages_api`), ``GET /v1/models``, ``GET /health``.

:func:`build_app` wires one upstream :class:`~harness.engines.base.Engine` (the embedded vLLM
engine, or :class:`~harness.engines.openai_http.OpenAIHTTPEngine` over one or several
OpenAI-compatible servers) to a Starlette app. Each chat request:

1. is checked (:mod:`harness.proxy.limits`, then its API's typed model,
   :mod:`harness.proxy.models`; a mistake is a 400 in that API's error shape),
   and its skill and inputs are read from ``X-Harness-Skill`` / ``X-Harness-Inputs`` or the
   body's ``harness_skill`` / ``harness_inputs`` (a manifest with one skill: the default);
2. has its flattened windows put back in serial form (:mod:`harness.proxy.restore`);
3. is answered by the loop itself — a conversation is one run of arm F with the client as
   the executor, waiting between requests for the client's results
   (:mod:`harness.proxy.conversation`) — or
   passed through (arm S: one generation, the reply as the upstream gave it) when the client
   asks for it (``X-Harness-Arm: S``), when it wants at most one call per response
   (``parallel_tool_calls: false``, as the OpenAI API defines it) or when it sends no tools;
4. says what happened in headers — ``X-Harness-Arm``, ``X-Harness-Window`` (calls in the
   returned window, 0 for none), ``X-Harness-Generations`` (upstream generations folded in),
   ``X-Harness-Restored`` (windows put back in serial form), ``X-Harness-Discards``,
   ``X-Harness-Warning`` — and in the ledger (every turn, call and window, and once per
   window that came back changed and was passed through, with a logged warning).

``extra_routes``: more Starlette routes mounted on the same app (e.g. another service on the
same port); they share the API-key check.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio
from anyio.abc import TaskGroup

from harness._logging import get_logger
from harness.certify import make_detector
from harness.engines.base import Engine, GenerationSettings, HealthCheckingEngine, StreamingEngine
from harness.engines.router import conversation_key
from harness.errors import ConfigError, EngineError, HarnessError
from harness.loop.config import LoopConfig
from harness.loop.ledger import ExchangeRecord, Ledger, UnrestoredRecord
from harness.loop.state import RunState
from harness.loop.task import Task
from harness.messages import Message, ToolCall, ToolSpec
from harness.proxy.chat_api import ChatApi
from harness.proxy.config import ProxyConfig
from harness.proxy.conversation import (
    Conversation,
    Conversations,
    Event,
    Failed,
    Finished,
    Handoff,
    Meter,
    MeteredEngine,
    Positioned,
    history_digest,
    result_ids,
    tool_texts,
)
from harness.proxy.effects_file import toolset_for
from harness.proxy.ids import CallIds
from harness.proxy.limits import decode_json
from harness.proxy.messages_api import MessagesApi
from harness.proxy.overhead import Kind, Overheads
from harness.proxy.positions import PositionCache, history_calls, replay
from harness.proxy.protocol import (
    BadRequest,
    ChatRequest,
    chat_response,
    error_body,
)
from harness.proxy.responses_api import ResponsesApi
from harness.proxy.restore import Restoration, restore_serial
from harness.proxy.store import Pending, WindowStore
from harness.proxy.streaming import stream_pass_through
from harness.proxy.text_history import restore_text
from harness.proxy.upstream import ChoicePlan, choice_plan
from harness.proxy.wire import wire_endpoint
from harness.skills.input_sources import prompt_text
from harness.skills.manifest import Skill
from harness.tools.execute import ToolResult
from harness.tools.toolset import Toolset

try:
    from starlette.applications import Starlette
    from starlette.datastructures import Headers
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import BaseRoute, Route
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "harness.proxy needs Starlette: pip install 'agent-harness[serve]' "
        f"(the 'serve' extra: starlette and uvicorn); {exc}"
    ) from exc

__all__ = ("ProxyService", "Served", "build_app")

#: Distinct tool lists whose toolsets are kept built.
_TOOLSETS_KEPT = 64
#: Ledger records a proxy holds in memory (the newest; ``--ledger FILE`` writes them all).
_RECORDS_KEPT = 10_000
#: Windows already reported as not restored (a client resends its history every turn).
_REPORTED_KEPT = 4096

_log = get_logger("harness.proxy")
#: A conversation's turn budget: the proxy bounds each request instead (``max_generations``).
_CONVERSATION_TURNS = 1_000_000_000


def _metered(engine: Engine, meter: Meter, hide: Callable[[str], str]) -> MeteredEngine:
    return MeteredEngine(engine, lambda: meter, hide=hide)


class _NoCalls:
    """A pass-through's executor: it runs no call (the client does, after the reply)."""

    async def execute(self, call: ToolCall) -> ToolResult:
        raise ConfigError(
            f"Call {call.id} ({call.name}) would run inside the proxy's pass-through; this is "
            "a bug in harness.proxy: please report it."
        )


#: Seconds ``/health`` waits for the upstream's answer.
_HEALTH_TIMEOUT_S = 5.0


@dataclass
class Served:
    """One answered request: the response ``body`` (``None`` when streamed token by token:
    ``chunks``, its server-sent events), the X-Harness ``headers``, the request's ``kind``
    (:mod:`harness.proxy.overhead`) and its ``meter`` (its time awaiting the upstream)."""

    body: dict[str, Any] | None
    headers: dict[str, str]
    kind: Kind
    meter: Meter
    chunks: AsyncIterator[str] | None = None


class ProxyService:
    """The request handling behind the app (one per app; safe for concurrent requests)."""

    def __init__(self, engine: Engine, config: ProxyConfig, ledger: Ledger | None = None) -> None:
        self.engine = engine
        self.config = config
        self.ledger = ledger or Ledger(log=False, keep=_RECORDS_KEPT)
        self.ids = CallIds(config.secret)
        self.store = WindowStore(config.store_capacity)
        self.detector = make_detector(config.detector, config.window_rules)
        self.positions = PositionCache(config.positions_capacity)
        self.conversations = Conversations(
            config.conversations_capacity, config.idle_s, config.conversations_bytes
        )
        self._group: TaskGroup | None = None
        self._toolsets: OrderedDict[str, Toolset] = OrderedDict()
        self._reported: OrderedDict[tuple[str, str], None] = OrderedDict()
        #: Seconds spent in the proxy itself per request, by kind (:mod:`harness.proxy.overhead`).
        self.overheads = Overheads()

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
                f"Unknown skill {name!r}; this server's manifest has: "
                f"{', '.join(sorted(manifest.skills))}.",
                param="harness_skill",
            )
        return manifest.skills[name]

    def _toolset(self, specs: list[ToolSpec]) -> tuple[str, Toolset]:
        """The request's tools with the configured effects, built once per distinct tool list
        (checking JSON schemas costs milliseconds per tool; clients resend the same tools
        every turn), and the list's key."""
        key = json.dumps(specs, default=str)  # the client's own order: it resends it as is
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
        return key, toolset

    def _inputs(self, request: ChatRequest, header: str | None) -> dict[str, Any]:
        if header is None:
            return dict(request.inputs or {})
        inputs = decode_json(
            header, what="X-Harness-Inputs", limits=self.config.limits, param="X-Harness-Inputs"
        )
        if not isinstance(inputs, dict):
            raise BadRequest("X-Harness-Inputs must be a JSON object.", param="X-Harness-Inputs")
        return inputs

    def _restore(self, messages: Sequence[Message]) -> Restoration:
        """The client's history in serial form: its flattened windows
        (:mod:`harness.proxy.restore`), and those it wrote back as text
        (:mod:`harness.proxy.text_history`), whose waiting conversations are released."""
        restoration = restore_serial(messages, self.ids, self.store)
        text = restore_text(restoration.messages, self.ids, self.store)
        if text.released:
            restoration.messages = text.messages
            restoration.text_windows = text.windows
            restoration.unrestored.extend(text.unrestored)
            self.conversations.release(text.released)
        return restoration

    @staticmethod
    def _arm(request: ChatRequest, header: str | None, *, serial: bool) -> str:
        """``F`` or ``S``: the client's choice, ``S`` when it wants at most one call per
        response (``parallel_tool_calls: false``), sends no tools, or ``serial`` (its
        ``tool_choice`` is served serially: :mod:`harness.proxy.upstream`)."""
        arm = header or request.arm or "F"
        if arm not in ("S", "F"):
            raise BadRequest(
                "X-Harness-Arm must be 'S' (pass-through) or 'F'.", param="X-Harness-Arm"
            )
        if request.parallel_tool_calls is False or not request.tools or serial:
            return "S"
        return arm

    async def complete(self, request: ChatRequest, headers: Mapping[str, str]) -> Served:
        """Answer one checked request: the response (a body, or the chunks of a streamed
        pass-through) and the X-Harness headers."""
        skill = self._skill(request, headers.get("x-harness-skill"))
        inputs = self._inputs(request, headers.get("x-harness-inputs"))
        plan = choice_plan(request.tool_choice, self.engine, self.config.upstream)
        arm = self._arm(request, headers.get("x-harness-arm"), serial=plan.serial)
        tools_key, toolset = self._toolset(request.tools)
        if skill is not None and arm == "F":
            _check_skill_tools(skill, toolset)
        restoration = self._restore(request.messages)
        if restoration.text_windows or any(u.reason == "text" for u in restoration.unrestored):
            arm = "S"  # a text history cannot hold a withheld window (harness.proxy.text_history)
        if skill is not None and skill.inputs:  # where the manifest says they are written
            inputs = {**skill.read_inputs(restoration.messages), **inputs}
        # The conversation's name (its windows' keys derive from it: the same conversation
        # gets the same minted ids from any proxy with the same secret), and its run's id
        # (unique: concurrent conversations may share an opening).
        name = f"proxy-{conversation_key(restoration.messages)}"
        run_id = f"{name}-{uuid.uuid4().hex[:8]}"
        self._report(restoration, name)
        missing_inputs = self._without_inputs(skill, inputs) if arm == "F" and skill else None
        notes = [missing_inputs] if missing_inputs else []
        if plan.note is not None and request.tools:
            notes.append(plan.note)
        settings = self._upstream_settings(request, arm, plan)
        task = Task(
            id=run_id,
            prompt="",
            system="",  # the client's history as it is: no system message added
            skill=skill.name if skill is not None else None,
            inputs=inputs,
            history=tuple(restoration.messages),
        )
        if arm == "S":
            return await self._pass_through(request, task, toolset, settings, restoration, notes)
        config = LoopConfig(
            arm="F",
            detector=self.config.detector,
            # The proxy's budget is per request (``max_generations``, the meter's); a
            # conversation may go on as long as its client does.
            max_turns=_CONVERSATION_TURNS,
            max_window=self.config.max_window,
            generation=settings,
            call_ids="engine",  # the transcript is the client's: the upstream's ids
        )
        window = restoration.windows[-1] if restoration.windows else None
        brought = window.calls if window is not None and window.last else ()
        conversation = self._claim(restoration, brought, inputs, settings)
        kind: Kind = "absorb" if brought else "serial"
        fresh = conversation is None or not self._deliver(conversation, restoration)
        if conversation is None or fresh:
            conversation = self._cold_start(task, toolset, config, skill, restoration, tools_key)
            conversation.name = name
        meter = conversation.meter  # this request's (a delivery starts a new one)
        discards = conversation.discards
        event = await self._next_event(conversation, fresh=fresh)
        if isinstance(event, Failed):
            raise event.error
        if isinstance(event, Finished):
            completion = event.completion
            message: Message = {"role": "assistant", "content": completion.content}
            finish = "length" if meter.cut_off else completion.finish_reason
            body = chat_response(request.model or self.config.model, message, finish, meter.usage)
            size = 0
            self._record_exchange(conversation.run_id, restoration.messages, message, ())
        else:
            if not conversation.stateless:
                self.conversations.park(conversation.expected_digest(), conversation)
            body = self._handed_off(request, conversation, event, meter)
            size = len(event.calls) if event.window else 0
            kind = "flattening" if event.window and kind != "absorb" else kind
            reply = body["choices"][0]["message"]
            self._record_exchange(conversation.run_id, restoration.messages, reply, event.calls)
        out_headers = self._headers(
            "F",
            size,
            meter.generations,
            restoration,
            conversation.discards - discards,
            notes,
        )
        return Served(body, out_headers, kind, meter)

    def _upstream_settings(
        self, request: ChatRequest, arm: str, plan: ChoicePlan
    ) -> GenerationSettings:
        """What the upstream is asked for. It is a serial model: arm F asks it for one call per
        turn; a pass-through asks for what the client asked."""
        native = arm == "S" and request.parallel_tool_calls is True
        unsent = request.settings.unsent
        if arm == "F":  # the proxy's own setting: a serial upstream, one call per turn
            unsent = unsent - {"parallel_tool_calls"}
        if plan.forward is None:  # never "auto" in place of what the client asked
            unsent = unsent | {"tool_choice"}
        return replace(
            request.settings,
            parallel_tool_calls=native,
            model=self.config.upstream_model or request.model or None,
            unsent=unsent,
            tool_choice=plan.forward or "auto",  # "auto" unsent when nothing is forwarded
        )

    def _claim(
        self,
        restoration: Restoration,
        brought: Sequence[ToolCall],
        inputs: Mapping[str, Any],
        settings: GenerationSettings,
    ) -> Conversation | None:
        """The conversation waiting for this history (with the results of the window it
        brings), or ``None``: none waits, or its inputs or ``tool_choice`` changed (read from
        a new result, or asked anew), so it is cancelled and the request starts cold."""
        digest = history_digest(restoration.messages, result_ids(restoration.messages, brought))
        conversation = self.conversations.claim(digest)
        if conversation is not None and (
            dict(conversation.task.inputs) != inputs
            or conversation.tool_choice != settings.tool_choice
        ):
            conversation.scope.cancel()
            return None
        return conversation

    def _deliver(self, conversation: Conversation, restoration: Restoration) -> bool:
        """Give the waiting ``conversation`` the results this request brings; False (and the
        conversation dropped) when any is missing."""
        pending = conversation.pending
        texts = tool_texts(restoration.messages)
        if pending is None or any(c.id not in texts for c in pending.calls):
            conversation.scope.cancel()
            return False
        conversation.start_request()
        conversation.client_messages = restoration.messages
        pending.deliver(texts)
        return True

    def _cold_start(
        self,
        task: Task,
        toolset: Toolset,
        config: LoopConfig,
        skill: Skill | None,
        restoration: Restoration,
        tools_key: str,
    ) -> Conversation:
        """A new run over the client's history, its tracker at the history's phase position:
        from the longest cached prefix of the history, the rest replayed
        (:mod:`harness.proxy.positions`)."""
        calls = history_calls(
            restoration.messages, [[c.id for c in w.calls] for w in restoration.windows]
        )
        context = "\x1d".join(
            (
                self.detector.name,
                str(self.config.max_window),
                skill.name if skill is not None else "",
                json.dumps(task.inputs, sort_keys=True, default=str),
                tools_key,
            )
        )
        keys = self.positions.prefix_keys(context, calls)
        resumed = self.positions.resume(keys)
        covered, tracker = resumed if resumed is not None else (0, None)
        if tracker is None:
            tracker = self.detector.tracker(toolset, skill, task.inputs)
        replay(tracker, calls[covered:])
        self.positions.keep(keys[-1][1], tracker)
        return Conversation(
            self.engine,
            toolset,
            task,
            config,
            skill=skill,
            ledger=self.ledger,
            detector=Positioned(self.detector, tracker),
            max_generations=self.config.max_generations,
            hide=self.hide,
        )

    async def _next_event(self, conversation: Conversation, *, fresh: bool) -> Event:
        """The conversation's next event; a fresh one is started first, in the app's task
        group (it outlives this request), or — an app run without its lifespan — in this
        request's, and dropped after its first event (its next request cold-starts)."""
        if fresh and self._group is not None:
            self._group.start_soon(conversation.run, name=f"proxy {conversation.run_id}")
        if not fresh or self._group is not None:
            try:
                return await conversation.next_event()
            except BaseException:  # this request was cancelled (its client went away)
                conversation.scope.cancel()  # no one will bring the results it would wait for
                raise
        self._warn_stateless()
        conversation.stateless = True
        async with anyio.create_task_group() as group:
            group.start_soon(conversation.run)
            event = await conversation.next_event()
            group.cancel_scope.cancel()
        return event

    def _warn_stateless(self) -> None:
        key = ("stateless", "")
        if key not in self._reported:
            self._reported[key] = None
            _log.warning(
                "no_lifespan",
                detail="the proxy app runs without its lifespan, so no conversation can wait "
                "for its client: every request starts from the client's history (a window's "
                "closing call is generated again); run it under uvicorn, or enter "
                "`async with in_process_client(app)`",
            )

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """The app's lifespan: the task group the conversations waiting for their clients
        run in; leaving it cancels them all."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                self.conversations.close()
                group.cancel_scope.cancel()

    def _report(self, restoration: Restoration, run_id: str) -> None:
        """Log and count each window that came back changed and was passed through, once
        (the client resends it with every later request)."""
        for item in restoration.unrestored:
            key = (item.window, item.reason)
            if key in self._reported:
                self._reported.move_to_end(key)
                continue
            self._reported[key] = None
            while len(self._reported) > _REPORTED_KEPT:
                self._reported.popitem(last=False)
            _log.warning(
                "window_not_restored",
                run_id=run_id,
                window=item.window,
                reason=item.reason,
                detail=item.message,
            )
            self.ledger.emit(UnrestoredRecord(run_id, item.window, item.reason, item.message))

    def _without_inputs(self, skill: Skill, inputs: Mapping[str, Any]) -> str | None:
        """A sentence when a fan-out phase's slot count names an input the request does not
        carry (logged once per skill): a call whose argument the manifest sources from that
        input cannot be proven to come from it, so it runs on its own (served serially)."""
        phases = [
            p.name
            for p in skill.phases
            if p.is_fan_out and isinstance(p.slots, str) and p.slot_count(inputs) is None
        ]
        if not phases:
            return None
        text = (
            f"skill {skill.name!r}: no inputs for the slot count of phase(s) "
            f"{', '.join(phases)}; a call whose argument the manifest sources from a missing "
            "input cannot be proven to come from it and runs on its own (no window); send "
            "X-Harness-Inputs or harness_inputs, or declare where the manifest's skill finds "
            "them ([skills.NAME.inputs.FIELD])"
        )
        key = ("no-inputs", skill.name)
        if key not in self._reported:
            self._reported[key] = None
            _log.warning("no_inputs", skill=skill.name, phases=phases, detail=text)
        return text

    @staticmethod
    def _headers(
        arm: str,
        window: int,
        generations: int,
        restoration: Restoration,
        discards: int,
        notes: Sequence[str] = (),
    ) -> dict[str, str]:
        out = {
            "X-Harness-Arm": arm,
            "X-Harness-Window": str(window),
            "X-Harness-Generations": str(generations),
            "X-Harness-Restored": str(len(restoration.windows) + len(restoration.text_windows)),
            "X-Harness-Discards": str(discards),
        }
        warnings = [*restoration.warnings, *notes]
        if warnings:
            out["X-Harness-Warning"] = _header_text("; ".join(warnings))
        return out

    async def _pass_through(
        self,
        request: ChatRequest,
        task: Task,
        toolset: Toolset,
        settings: GenerationSettings,
        restoration: Restoration,
        notes: Sequence[str],
    ) -> Served:
        """Arm S: one generation of the client's history, the reply as the upstream gave it
        (its call ids kept); streamed delta by delta when the client asks and sends no tools."""
        meter = Meter(1)
        config = LoopConfig(
            arm="S", max_window=self.config.max_window, generation=settings, call_ids="engine"
        )
        state = RunState(
            _metered(self.engine, meter, self.hide),
            toolset,
            task,
            config,
            executor=_NoCalls(),
            ledger=self.ledger,
            run_id=task.id,
            detector_name=self.detector.name,
        )
        headers = self._headers("S", 0, 1, restoration, 0, notes)
        if request.stream and not request.tools and isinstance(self.engine, StreamingEngine):
            chunks = await stream_pass_through(
                state,
                self.engine,
                meter,
                request.model or self.config.model,
                include_usage=request.include_usage,
                upstream=self.config.upstream,
                hide=self.hide,
            )
            return Served(None, headers, "pass_through", meter, chunks)
        started = time.monotonic()
        state.budgets.check_turns()
        completion = await state.complete(state.turn, settings, "call")
        completion = state.took_turn(completion, "call", started)
        message: Message = {"role": "assistant", "content": completion.content}
        if completion.tool_calls:
            message["tool_calls"] = [c.to_openai() for c in completion.tool_calls]
        self._record_exchange(task.id, restoration.messages, message, completion.tool_calls)
        body = chat_response(
            request.model or self.config.model,
            message,
            "tool_calls" if completion.tool_calls else completion.finish_reason,
            meter.usage,
        )
        return Served(body, headers, "pass_through", meter)

    def _record_exchange(
        self,
        run_id: str,
        history: Sequence[Message],
        reply: Message,
        calls: Sequence[ToolCall],
    ) -> None:
        """One request's :class:`~harness.loop.ledger.ExchangeRecord` (what the client got):
        what a serial trace needs to draft a manifest from the ledger (``harness init
        --traces``); only for a ledger written to a file (``--ledger FILE``), so a proxy
        without one spends no time on digests."""
        if self.ledger.path is None:
            return
        turn = sum(m.get("role") == "assistant" for m in history)
        self.ledger.emit(
            ExchangeRecord(
                run_id=run_id,
                turn=turn,
                before=history_digest(history, result_ids(history)),
                after=history_digest([*history, reply]),
                tools=tuple(c.name for c in calls),
                arguments=tuple(c.arguments for c in calls),
                prompt=prompt_text(history) if turn == 0 else None,
            )
        )

    def _handed_off(
        self, request: ChatRequest, conversation: Conversation, handoff: Handoff, meter: Meter
    ) -> dict[str, Any]:
        """The response that hands ``handoff``'s calls to the client: a serial call as the
        transcript holds it; a window as one message whose calls carry minted ids
        (:mod:`harness.proxy.ids`), what they cannot carry kept in the store."""
        model = request.model or self.config.model
        calls = handoff.calls
        contents = conversation.contents(calls)
        conversation.window_key = None
        if not handoff.window:
            message: Message = {
                "role": "assistant",
                "content": contents[0],
                "tool_calls": [c.to_openai() for c in calls],
            }
            return chat_response(model, message, "tool_calls", meter.usage)
        key = self.ids.window_key(conversation.name, calls)
        conversation.window_key = key
        minted = [
            ToolCall(self.ids.mint(key, i, len(calls), c), c.name, c.arguments)
            for i, c in enumerate(calls)
        ]
        later = any(c for c in contents[1:])
        self.store.put(
            key,
            Pending(
                contents if later else (),
                arguments=tuple(c.arguments for c in calls),
                names=tuple(c.name for c in calls),
            ),
        )
        message = {
            "role": "assistant",
            "content": contents[0] if contents else None,
            "tool_calls": [c.to_openai() for c in minted],
        }
        return chat_response(model, message, "tool_calls", meter.usage)

    def hide(self, text: str) -> str:
        for secret in self.config.secrets_to_hide:
            if secret:
                text = text.replace(secret, "***")
        return text


async def _health(service: ProxyService) -> JSONResponse:
    """``/health``: the proxy answers, and whether its upstream can serve (``upstream_status``
    ``ok``, ``down`` with the error and status 503, or ``unchecked`` for an engine that cannot
    say: :class:`~harness.engines.base.HealthCheckingEngine`)."""
    engine = service.engine
    body: dict[str, Any] = {"status": "ok", "upstream": service.config.upstream}
    if not isinstance(engine, HealthCheckingEngine):
        return JSONResponse({**body, "upstream_status": "unchecked"})
    try:
        with anyio.fail_after(_HEALTH_TIMEOUT_S):
            await engine.check_health()
    except (EngineError, TimeoutError) as exc:
        detail = str(exc) or f"no answer within {_HEALTH_TIMEOUT_S:.0f} s"
        down = {"status": "unavailable", "upstream_status": "down", "error": service.hide(detail)}
        return JSONResponse({**body, **down}, status_code=503)
    return JSONResponse({**body, "upstream_status": "ok"})


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

    def error(request: Request, status: int, message: str) -> JSONResponse:
        return _error_response(request.url.path, status, service.hide(message))

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": cfg.model, "object": "model", "created": 0, "owned_by": "harness"}],
            }
        )

    async def health(request: Request) -> Response:
        return await _health(service)

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(
            request,
            404,
            f"No route {request.method} {_bounded_path(request)}; this server serves POST "
            "/v1/chat/completions, /v1/responses and /v1/messages, GET /v1/models and GET "
            "/health.",
        )

    async def wrong_method(request: Request, exc: Exception) -> Response:
        return error(
            request,
            405,
            f"{request.method} is not served at {_bounded_path(request)}; send POST (the API "
            "routes) or GET (/v1/models, /health).",
        )

    routes: list[BaseRoute] = [
        *_wire_routes(service),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/health", health, methods=["GET"]),
        *extra_routes,
    ]
    app = Starlette(
        routes=routes,
        lifespan=lambda app: service.lifespan(),
        exception_handlers={404: not_found, 405: wrong_method},
        middleware=[Middleware(_ApiKey, key=cfg.api_key, open_paths=("/health", "/v1/health"))],
    )
    app.state.proxy = service
    return app


def _wire_routes(service: ProxyService) -> list[BaseRoute]:
    """The three APIs, one request path each (:func:`~harness.proxy.wire.wire_endpoint`):
    Chat Completions (the internal form), and the Responses and Messages APIs (translations
    to and from it)."""
    chat = wire_endpoint(service, ChatApi())
    responses = wire_endpoint(service, ResponsesApi())
    messages = wire_endpoint(service, MessagesApi())
    return [
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/chat/completions", chat, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/responses", responses, methods=["POST"]),
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/messages", messages, methods=["POST"]),
    ]


class _ApiKey:
    """ASGI middleware: every path but ``open_paths`` needs ``Authorization: Bearer KEY`` or
    ``x-api-key: KEY`` (what the Anthropic SDK sends), compared in constant time, when ``key``
    is set. The refusal is in the error shape of the path's API."""

    def __init__(self, app: ASGIApp, *, key: str | None, open_paths: tuple[str, ...]) -> None:
        self.app = app
        self.key = key.encode("utf-8") if key else None
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.key is None or scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        given = headers.get("authorization", "")
        token = given[7:].strip() if given[:7].lower() == "bearer " else ""
        token = token or headers.get("x-api-key", "").strip()
        if hmac.compare_digest(token.encode("utf-8"), self.key):
            await self.app(scope, receive, send)
            return
        message = (
            "Missing or wrong API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'."
        )
        response = _error_response(scope["path"], 401, message, kind="authentication_error")
        await response(scope, receive, send)


def _error_response(
    path: str, status: int, message: str, *, kind: str = "invalid_request_error"
) -> JSONResponse:
    """An error outside the API routes' own handler (a wrong path or method, a missing API
    key) in the error shape of the API the path names (Anthropic's for ``/messages`` and
    below it, e.g. ``/v1/messages/count_tokens``)."""
    if "messages" in path.strip("/").split("/"):
        body = MessagesApi().error(message, status=status, kind=kind, param=None)
    else:
        body = error_body(message, kind=kind)
    return JSONResponse(body, status_code=status)


def _bounded_path(request: Request) -> str:
    path = request.url.path
    return path if len(path) <= 200 else path[:200] + "..."


def _check_skill_tools(skill: Skill, toolset: Mapping[str, Any]) -> None:
    """Arm F runs the skill's phases with the request's tools: every tool they name must be
    sent."""
    missing = sorted({t for p in skill.phases for t in p.tools} - set(toolset))
    if missing:
        raise BadRequest(
            f"Skill {skill.name!r} uses tools the request does not send: {missing}; "
            "send them in 'tools' or pick another skill.",
            param="tools",
        )
