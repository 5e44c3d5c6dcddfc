"""One client conversation is one run of the loop: the proxy's drive.

The proxy answers a conversation by running the loop itself —
:func:`~harness.loop.driver.run_loop` with arm F on the client's history — with the client as
the executor (:class:`ClientCalls`). Where the loop would run calls, the executor *hands them
off*: a revealed window's calls (the executor is a :class:`~harness.tools.execute.WindowExecutor`) or
one serial call become a :class:`Handoff`; the request waiting on the conversation answers the
client with them, and the run stays suspended in the executor until the client's next request
brings their results. Everything else is the loop's own — the same turn loop
(:func:`~harness.loop.driver.drive`), call ids, stuck guard, cut-off handling, review, mistake
budget and ledger records as ``harness run``'s — so a conversation through the proxy and the
same task run by :func:`~harness.loop.driver.run_loop` send the upstream the same requests and
record the same turns, calls and windows.

A suspended conversation is found again by meaning (:func:`history_digest`): the client's next
request, with the results it brings left out, must hold the conversation's transcript as the
client saw it (:meth:`~harness.loop.transcript.Transcript.client_view`). When it does not — the
client edited its history, the proxy restarted or evicted the conversation
(:class:`Conversations`: at most ``capacity``, idle ones dropped after ``idle_s``), or the app
runs without its lifespan — the request starts a new run from the client's history: a *cold
start*, its tracker brought to the history's phase position (:mod:`harness.proxy.positions`).
A cold start never gives a wrong transcript; it may cost one generation more than the loop
(a call generated as a window closed is generated again after the absorb turn).
"""

from __future__ import annotations

import gc
import hashlib
import json
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from harness._logging import get_logger
from harness.certify import Certificate, Detector, Rejection, WindowTracker
from harness.certify.provenance import TurnView
from harness.engines.base import (
    ClosingContext,
    Engine,
    GenerationSettings,
    drafts_calls,
    engine_name,
)
from harness.errors import EngineError, HarnessError, UsageLimitExceeded
from harness.loop.config import LoopConfig
from harness.loop.driver import LoopResult, run_loop
from harness.loop.ledger import Ledger
from harness.loop.state import RunState
from harness.loop.task import Task
from harness.messages import Completion, Message, ToolCall, ToolSpec, Usage, canonical_arguments
from harness.skills.manifest import Phase, Skill
from harness.tools.execute import ToolResult
from harness.tools.toolset import Toolset

__all__ = (
    "DEFAULT_MAX_BYTES",
    "ClientCalls",
    "Conversation",
    "Conversations",
    "Event",
    "Failed",
    "Finished",
    "Handoff",
    "Meter",
    "MeteredEngine",
    "Positioned",
    "history_bytes",
    "history_digest",
    "message_meaning",
    "result_ids",
    "tool_texts",
)


# -- what a run tells the request waiting on it --------------------------------------------


@dataclass(eq=False)
class Handoff:
    """Calls the client must run now: a revealed window's (``window``) or one serial call.
    The run waits in :meth:`ClientCalls.execute_window` / :meth:`ClientCalls.execute` until
    :meth:`deliver` gives it their results."""

    calls: tuple[ToolCall, ...]
    window: bool
    started: float = field(default_factory=time.monotonic)
    _results: list[ToolResult] = field(default_factory=list)
    _delivered: anyio.Event = field(default_factory=anyio.Event)

    def deliver(self, texts: Mapping[str, str]) -> None:
        """The client's result text of every call (by call id), back into the run."""
        now = time.monotonic()
        self._results = [
            ToolResult(c.id, c.name, texts[c.id], started=self.started, finished=now)
            for c in self.calls
        ]
        self._delivered.set()

    async def results(self) -> list[ToolResult]:
        await self._delivered.wait()
        return self._results


@dataclass(frozen=True)
class Finished:
    """The run ended with a final answer (``result.answer``; the reply is the last turn's)."""

    result: LoopResult
    completion: Completion


@dataclass(frozen=True)
class Failed:
    """The run ended in an error (an engine failure, a budget): the request answers with it."""

    error: Exception


Event = Handoff | Finished | Failed


class ClientCalls:
    """The proxy's executor: every call runs at the client. A window's calls go as one
    :class:`Handoff` (:class:`~harness.tools.execute.WindowExecutor`), a serial call as one of its
    own; each waits for the client's next request."""

    #: A client's result is never an error result (an ``is_error`` one is text prefixed with
    #: ``Error: ``), so no budget can stop the run inside a window: a window's calls go to the
    #: client as one handoff (:meth:`harness.loop.state.RunState.reach`).
    results_never_fail = True

    def __init__(self, post: Callable[[Event], Awaitable[None]]) -> None:
        self._post = post

    async def execute(self, call: ToolCall) -> ToolResult:
        (result,) = await self._hand_off((call,), window=False)
        return result

    async def execute_window(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        return await self._hand_off(tuple(calls), window=True)

    async def _hand_off(self, calls: tuple[ToolCall, ...], *, window: bool) -> list[ToolResult]:
        handoff = Handoff(calls, window)
        await self._post(handoff)
        return await handoff.results()


# -- the upstream, metered per request ------------------------------------------------------


@dataclass
class Meter:
    """What one request spent upstream: generations, tokens, and the wall and CPU seconds
    awaiting the upstream (the rest of a request is the proxy's own,
    :mod:`harness.proxy.overhead`); ``limit``: generations the request may fold in."""

    limit: int
    generations: int = 0
    usage: Usage = field(default_factory=Usage)
    upstream_s: float = 0.0
    upstream_cpu_s: float = 0.0
    #: The proxy's own wall and CPU seconds while a pass-through reply streams.
    proxy_s: float = 0.0
    proxy_cpu_s: float = 0.0
    completions: list[Completion] = field(default_factory=list)
    #: The request's first generation was cut at ``max_tokens`` with no call: it is the
    #: client's answer as the serial run gives it (``finish_reason`` ``length``), not a
    #: mistake for the loop to retry (:class:`MeteredEngine`).
    cut_off: bool = False


class MeteredEngine(ClosingContext):
    """The upstream engine, each generation counted on the current request's :class:`Meter`
    (a request that would fold in more than ``Meter.limit`` generations ends in
    :class:`~harness.errors.UsageLimitExceeded`)."""

    def __init__(
        self,
        engine: Engine,
        meter: Callable[[], Meter],
        render: Callable[[Sequence[Message]], Sequence[Message]] | None = None,
        hide: Callable[[str], str] = str,
    ) -> None:
        """``render``: the messages as the upstream gets them (a conversation's: the client's
        own bytes for every message the client holds, :meth:`Conversation.as_client_sent`);
        ``hide``: what an upstream error may say (the upstream's key never leaves here, not
        even in the run's ledger record)."""
        self._engine = engine
        self._meter = meter
        self._render = render
        self._hide = hide
        self.name = engine_name(engine)

    @property
    def drafts_calls(self) -> bool:
        return drafts_calls(self._engine)

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> Completion:
        meter = self._meter()
        if meter.generations >= meter.limit:
            raise UsageLimitExceeded(
                f"One request folded in {meter.generations} upstream generations without "
                f"reaching a window, a call or an answer; raise harness serve --max-generations "
                f"(ProxyConfig.max_generations, now {meter.limit}) if the model needs more."
            )
        if self._render is not None:
            messages = self._render(messages)
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            completion = await self._engine.generate(messages, tools, settings)
        except Exception as exc:
            raise _hidden(exc, self._hide) from None
        finally:
            meter.upstream_s += time.perf_counter() - started
            meter.upstream_cpu_s += time.thread_time() - cpu
        meter.generations += 1
        if isinstance(completion, Completion):
            meter.usage = meter.usage + completion.usage
            meter.completions.append(completion)
            if (
                self._render is not None  # a conversation's run (the loop would retry it)
                and meter.generations == 1  # no window is open at a request's first turn
                and completion.finish_reason == "length"
                and not completion.tool_calls
            ):
                # What a serial client gets: the cut reply as its answer. The loop would
                # count it a mistake and generate again, which the client never asked for.
                meter.cut_off = True
                completion = replace(completion, finish_reason="stop")
        return completion

    async def aclose(self) -> None:
        """The upstream belongs to the proxy's owner: never closed here."""


def _with_arguments_of(client: Message, own: Message) -> Message:
    """The client's ``client`` message with the argument strings of ``own`` (the same
    message by meaning, as the upstream wrote it)."""
    calls, mine = client.get("tool_calls"), own.get("tool_calls")
    if not calls or not mine or len(calls) != len(mine):
        return client
    merged = []
    for theirs, ours in zip(calls, mine, strict=True):
        if not isinstance(theirs, Mapping) or not isinstance(theirs.get("function"), Mapping):
            return client
        arguments = ours.get("function", {}).get("arguments") if isinstance(ours, Mapping) else None
        if not isinstance(arguments, str):
            return client
        merged.append({**theirs, "function": {**theirs["function"], "arguments": arguments}})
    return {**client, "tool_calls": merged}


def _hidden(error: Exception, hide: Callable[[str], str]) -> Exception:
    """``error``, or the same kind of error saying what ``hide`` lets it say."""
    text = str(error)
    said = hide(text)
    if said == text:
        return error
    if isinstance(error, HarnessError):
        try:
            return type(error)(said)
        except TypeError:
            pass
    return EngineError(said)


# -- the tracker at a history's phase position (a cold start) -------------------------------


class Positioned:
    """``detector`` whose first tracker is ``tracker`` (already at a history's phase
    position); everything else is the detector's."""

    def __init__(self, detector: Detector, tracker: WindowTracker) -> None:
        self._detector = detector
        self._tracker: WindowTracker | None = tracker

    @property
    def name(self) -> str:
        return self._detector.name

    def tracker(
        self, toolset: Toolset, skill: Skill | None, inputs: Mapping[str, Any]
    ) -> WindowTracker:
        tracker, self._tracker = self._tracker, None
        return tracker if tracker is not None else self._detector.tracker(toolset, skill, inputs)

    def certify(
        self,
        toolset: Toolset,
        calls: Sequence[ToolCall],
        phase: Phase | None,
        inputs: Mapping[str, Any] | None = None,
        view: TurnView | None = None,
    ) -> Certificate | Rejection:
        return self._detector.certify(toolset, calls, phase, inputs, view)


# -- one conversation -----------------------------------------------------------------------


class Conversation:
    """One run of the loop over a client's conversation (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        toolset: Toolset,
        task: Task,
        config: LoopConfig,
        *,
        skill: Skill | None,
        ledger: Ledger,
        detector: Detector,
        max_generations: int,
        hide: Callable[[str], str] = str,
    ) -> None:
        self.task = task
        self.run_id = task.id
        #: The client's ``tool_choice`` the run generates under (:mod:`harness.proxy.upstream`).
        self.tool_choice = config.generation.tool_choice
        #: What the conversation's windows' minted ids derive from (default: the run id).
        self.name = task.id
        self.meter = Meter(max_generations)
        self._events: deque[Event] = deque()
        self._arrived = anyio.Event()
        self._run: Callable[[], Awaitable[LoopResult]] = lambda: run_loop(
            MeteredEngine(engine, lambda: self.meter, self.as_client_sent, hide),
            toolset,
            task,
            config,
            manifest=skill,
            ledger=ledger,
            run_id=task.id,
            executor=ClientCalls(self._post),
            detector=detector,
            on_start=self._started,
        )
        self.state: RunState | None = None
        self.pending: Handoff | None = None
        self._client: Sequence[Message] = ()
        self._client_meanings: list[list[Any]] = []
        self.client_messages = task.history
        self.scope = anyio.CancelScope()
        self.used = time.monotonic()
        self.max_generations = max_generations
        #: Run inside its first request only (an app without its lifespan): never parked.
        self.stateless = False
        #: The key of the window handed to the client and not answered yet, if any.
        self.window_key: str | None = None
        #: Bytes of history it holds while it waits (:func:`history_bytes`).
        self.size = 0

    def _started(self, state: RunState) -> None:
        self.state = state

    async def run(self) -> None:
        """The run, to its end: its answer or its error goes to the request waiting on it;
        cancelled (evicted, the proxy stopping): nothing."""
        with self.scope:
            try:
                result = await self._run()
            except Exception as exc:
                await self._post(Failed(exc))
                return
            completion = self.meter.completions[-1] if self.meter.completions else None
            await self._post(Finished(result, completion or Completion(result.answer)))

    async def next_event(self) -> Event:
        """What the run does next for the waiting request: a handoff, its answer, its error."""
        while not self._events:
            self._arrived = anyio.Event()
            await self._arrived.wait()
        event = self._events.popleft()
        self.pending = event if isinstance(event, Handoff) else None
        self.used = time.monotonic()
        return event

    async def _post(self, event: Event) -> None:
        self._events.append(event)
        self._arrived.set()

    def start_request(self) -> Meter:
        """A new request waits on this conversation: its own meter."""
        self.meter = Meter(self.max_generations)
        self.used = time.monotonic()
        return self.meter

    @property
    def client_messages(self) -> Sequence[Message]:
        """The (restored) history of the latest request: what the client holds."""
        return self._client

    @client_messages.setter
    def client_messages(self, messages: Sequence[Message]) -> None:
        self._client = messages
        # each message's meaning, once per request (every generation compares against it)
        self._client_meanings = [message_meaning(m) for m in messages]

    def held(self) -> Sequence[Message]:
        """The messages the run holds: its transcript (the client's history before it
        starts)."""
        return self.state.messages if self.state is not None else self.client_messages

    def forget_client(self) -> None:
        """Drop the latest request's own copy of the history while the run waits: the
        client's next request brings the history again (and sets :attr:`client_messages`
        before the run goes on), so a waiting conversation holds each text once, in its
        transcript, not a second time as the last request decoded it."""
        self.client_messages = ()

    def as_client_sent(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` (the run's transcript) with every message the client holds in the
        client's own bytes: in order, each message that means what the client's next one
        means is replaced by it (the loop's own messages — markers, internal notes, turns the
        client has not seen yet — stay), so the upstream gets byte for byte what the client's
        loop would send it in a serial run — except each call's argument string, which
        stays the upstream's own (a client may re-serialise it: the same value, other bytes)."""
        client = self.client_messages
        internal = self.state.transcript.internal if self.state is not None else set()
        out: list[Message] = []
        j = 0
        for i, message in enumerate(messages):
            if i not in internal and j < len(client):
                if self._client_meanings[j] == message_meaning(message):
                    out.append(_with_arguments_of(client[j], message))
                    j += 1
                    continue
                j = len(client)  # the histories part here: the rest is the run's own
            out.append(message)
        return out

    @property
    def discards(self) -> int:
        return self.state.count.discards if self.state is not None else 0

    def expected_digest(self) -> str:
        """The digest the client's next request must have (:func:`history_digest`)."""
        assert self.state is not None
        assert self.pending is not None
        calls = self.pending.calls
        return history_digest(self.state.transcript.client_view(), [c.id for c in calls])

    def contents(self, calls: Sequence[ToolCall]) -> tuple[str | None, ...]:
        """Each call's assistant text, as the transcript holds it."""
        assert self.state is not None
        by_call: dict[str, str | None] = {}
        for message in self.state.messages:
            for raw in message.get("tool_calls") or ():
                by_call[str(raw.get("id"))] = message.get("content")
        return tuple(by_call.get(c.id) for c in calls)


_log = get_logger("harness.proxy")

#: Bytes of history all waiting conversations may hold together, by default.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Bytes of dropped conversations after which the cycle collector runs (see
#: :meth:`Conversations.park`), at least; an eighth of the budget when that is more.
_RECLAIM_BYTES = 8 * 1024 * 1024


class Conversations:
    """The conversations waiting for a client's results, by :func:`history_digest`: at most
    ``capacity``, holding at most ``max_bytes`` of history together (:func:`history_bytes`;
    the least recently used is evicted first, and one larger than ``max_bytes`` is not kept),
    each for at most ``idle_s`` seconds; an evicted conversation's run is cancelled (its next
    request cold-starts from its history: a generation more at worst, never a wrong
    answer)."""

    def __init__(
        self, capacity: int = 1024, idle_s: float = 900.0, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.capacity = capacity
        self.idle_s = idle_s
        self.max_bytes = max_bytes
        self._waiting: OrderedDict[str, list[Conversation]] = OrderedDict()
        self.evicted = 0
        #: Bytes of history the waiting conversations hold (:func:`history_bytes`).
        self.bytes = 0
        #: Bytes of history dropped since the cycle collector last ran.
        self.unreclaimed = 0
        #: Times :meth:`park` ran the cycle collector.
        self.collections = 0

    def __len__(self) -> int:
        return sum(len(v) for v in self._waiting.values())

    def waiting(self) -> list[Conversation]:
        """The waiting conversations, the least recently parked first."""
        return [c for waiting in self._waiting.values() for c in waiting]

    def park(self, digest: str, conversation: Conversation) -> None:
        """Keep ``conversation`` waiting at ``digest`` (within the bounds; see the class).

        A dropped run is a graph of objects in reference cycles (its task, frames, state),
        freed only by the cycle collector, which runs by the count of objects made, not by
        their bytes: a few conversations holding megabytes of history would stay in memory
        long after they were dropped. So once the dropped conversations held
        :data:`_RECLAIM_BYTES` (or an eighth of ``max_bytes``, if more) since the last time,
        parking runs the collector (``gc.collect()``: milliseconds over the proxy's own objects;
        ``harness serve`` freezes what exists once its engine is up, ``gc.freeze()``, so the
        embedded engine's objects are not walked; logged as ``reclaimed`` at debug level)."""
        if self.unreclaimed >= max(_RECLAIM_BYTES, self.max_bytes // 8):
            dropped, self.unreclaimed = self.unreclaimed, 0
            self.collections += 1
            started = time.perf_counter()
            found = gc.collect()
            _log.debug(
                "reclaimed",
                dropped_bytes=dropped,
                objects=found,
                wall_s=round(time.perf_counter() - started, 4),
            )
        conversation.size = history_bytes(conversation.held())
        conversation.forget_client()
        if self.capacity <= 0 or conversation.size > self.max_bytes:
            self._evict(conversation)
            return
        self._waiting.setdefault(digest, []).append(conversation)
        self._waiting.move_to_end(digest)
        self.bytes += conversation.size
        self.sweep()

    def claim(self, digest: str) -> Conversation | None:
        """The conversation waiting at ``digest`` (taken: one request continues it)."""
        self.sweep()
        waiting = self._waiting.get(digest)
        if not waiting:
            return None
        conversation = waiting.pop(0)
        if not waiting:
            del self._waiting[digest]
        self.bytes -= conversation.size
        return conversation

    def sweep(self) -> None:
        now = time.monotonic()
        for digest in list(self._waiting):
            kept = []
            for conversation in self._waiting[digest]:
                if now - conversation.used > self.idle_s:
                    self._drop(conversation)
                else:
                    kept.append(conversation)
            if kept:
                self._waiting[digest] = kept
            else:
                del self._waiting[digest]
        while self._waiting and (len(self) > self.capacity or self.bytes > self.max_bytes):
            digest, waiting = next(iter(self._waiting.items()))
            self._drop(waiting.pop(0))
            if not waiting:
                del self._waiting[digest]

    def release(self, windows: Iterable[str]) -> int:
        """Cancel the conversations waiting for the results of ``windows`` (their client
        wrote the window back as text and will not send them): how many."""
        keys = set(windows)
        released = 0
        for digest in list(self._waiting):
            kept = []
            for conversation in self._waiting[digest]:
                if conversation.window_key is not None and conversation.window_key in keys:
                    self._drop(conversation)
                    released += 1
                else:
                    kept.append(conversation)
            if kept:
                self._waiting[digest] = kept
            else:
                del self._waiting[digest]
        return released

    def _drop(self, conversation: Conversation) -> None:
        """Evict a waiting ``conversation`` (its bytes no longer held)."""
        self.bytes -= conversation.size
        self._evict(conversation)

    def _evict(self, conversation: Conversation) -> None:
        conversation.scope.cancel()
        self.evicted += 1
        self.unreclaimed += conversation.size or history_bytes(conversation.client_messages)

    def close(self) -> None:
        """Cancel every waiting run (the proxy is stopping)."""
        for waiting in self._waiting.values():
            for conversation in waiting:
                conversation.scope.cancel()
        self._waiting.clear()
        self.bytes = 0


# -- finding a conversation again by meaning ------------------------------------------------


def history_digest(messages: Sequence[Message], results_of: Iterable[str] = ()) -> str:
    """A digest of what ``messages`` mean, the tool messages of the calls ``results_of``
    left out: each message's role, its text (``None``, absent and ``""`` are one; text parts
    joined), its calls (id, tool and :func:`~harness.messages.canonical_arguments`) and the
    call a tool message answers. A client that echoes a message in its own shape (``content:
    null``, extra keys, re-serialised arguments) keeps its digest; an edit does not."""
    leave_out = set(results_of)
    meaning = [
        message_meaning(m)
        for m in messages
        if not (m.get("role") == "tool" and str(m.get("tool_call_id")) in leave_out)
    ]
    text = json.dumps(meaning, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def history_bytes(messages: Sequence[Message]) -> int:
    """What ``messages`` weigh, roughly: the characters of every string in them (texts,
    argument strings, ids), the keys, and a little per message and per value."""
    total = 0
    stack: list[Any] = list(messages)
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, Mapping):
            total += 64
            for key, value in item.items():
                total += len(str(key))
                stack.append(value)
        elif isinstance(item, list | tuple):
            total += 8 * len(item)
            stack.extend(item)
        else:
            total += 8
    return total


def message_meaning(message: Message) -> list[Any]:
    """What a message means, its spelling aside (see :func:`history_digest`)."""
    role = message.get("role")
    item: list[Any] = [role, _text(message.get("content"))]
    calls = message.get("tool_calls")
    if calls:
        item.append([_call_meaning(c) for c in calls])
    if role == "tool":
        item.append(str(message.get("tool_call_id")))
    return item


def result_ids(messages: Sequence[Message], window_calls: Sequence[ToolCall] = ()) -> list[str]:
    """The calls whose results a request brings: the trailing tool messages' calls, and the
    calls of the restored window its history ends with (``window_calls``)."""
    ids = [c.id for c in window_calls]
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        ids.append(str(message.get("tool_call_id")))
    return ids


def tool_texts(messages: Sequence[Message]) -> dict[str, str]:
    """Each tool message's text, by the call it answers (the last one wins)."""
    return {
        str(m.get("tool_call_id")): _text(m.get("content"))
        for m in messages
        if m.get("role") == "tool"
    }


def _text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return str(content)


def _call_meaning(raw: Any) -> list[str]:
    if not isinstance(raw, Mapping):
        return [str(raw)]
    function = raw.get("function")
    function = function if isinstance(function, Mapping) else {}
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, sort_keys=True)
    return [str(raw.get("id")), str(function.get("name")), canonical_arguments(arguments)]
