"""Arm F with the client as the tool executor: one request of a client's loop.

The proxy runs the loop's own arm F (:class:`~harness.loop.flattened.FlattenedArm` over
:class:`~harness.window.Windows` and the detector's tracker, on a
:class:`~harness.loop.state.RunState`) on the client's (serial) history. Where the loop would
run calls — :meth:`~harness.loop.state.RunState.reveal` of a closed window,
:meth:`~harness.loop.state.RunState.run_serial` of a call that did not certify — the proxy
hands them to the client instead (:class:`ClientHandoff`) and the request ends: a window goes
back as one message with parallel calls, a serial call as the upstream's own reply. The next
request carries their results; :mod:`harness.proxy.restore` puts them back in serial form,
:func:`replay_history` brings the tracker to the same phase position, and the arm goes on
from there: the absorb turn, exactly as in the loop.

The one difference from the loop is where a request ends: a call the window's closing
generated that did not join it (the loop keeps it and handles it after the absorb) is
returned in :attr:`Outcome.remainder`, for the bounded store, and handled first on the
next request (:func:`answer`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from harness.calls import ToolResult
from harness.certify import Detector, WindowTracker
from harness.engines.base import (
    Completion,
    Engine,
    GenerationSettings,
    Message,
    ToolCall,
    ToolSpec,
)
from harness.errors import ConfigError
from harness.ledger import Ledger, Purpose
from harness.loop.config import LoopConfig
from harness.loop.flattened import FlattenedArm
from harness.loop.policy import POLICIES
from harness.loop.state import RunState
from harness.loop.transcript import Transcript
from harness.manifest import Skill
from harness.provenance import TurnView
from harness.proxy.positions import HistoryCall, history_calls
from harness.task import Task
from harness.tools import Toolset
from harness.window import Step, Window, Windows

__all__ = (
    "ClientExecutor",
    "ClientHandoff",
    "Outcome",
    "ProxyArm",
    "ProxyState",
    "answer",
    "replay_calls",
    "replay_history",
)


class ClientHandoff(Exception):
    """The calls the client must run now: a closed ``window``, or one serial call."""

    def __init__(self, calls: Sequence[ToolCall], window: Window | None) -> None:
        super().__init__(f"{len(calls)} call(s) handed to the client")
        self.calls = tuple(calls)
        self.window = window


class ClientExecutor:
    """The proxy's executor: the client runs every call. The state hands calls off before any
    would reach ``execute``, so reaching it is a bug, said plainly."""

    async def execute(self, call: ToolCall) -> ToolResult:
        raise ConfigError(
            f"Call {call.id} ({call.name}) would run inside the proxy; the proxy's calls run at "
            "the client. This is a bug in harness.proxy: please report it."
        )


class _ClientTranscript(Transcript):
    """The client's (restored, serial) history as the run's transcript."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = list(messages)
        self._result_at = {
            str(m.get("tool_call_id")): i
            for i, m in enumerate(self.messages)
            if m.get("role") == "tool"
        }


class ProxyState(RunState):
    """A :class:`RunState` over the client's history whose calls run at the client."""

    def __init__(
        self,
        engine: Engine,
        toolset: Toolset,
        specs: Sequence[ToolSpec],
        messages: Sequence[Message],
        config: LoopConfig,
        skill: Skill | None,
        inputs: dict[str, object],
        ledger: Ledger,
        run_id: str,
        *,
        detector_name: str,
    ) -> None:
        task = Task(id=run_id, prompt="", skill=skill.name if skill else None, inputs=inputs)
        super().__init__(
            engine,
            toolset,
            ClientExecutor(),
            task,
            config,
            skill,
            ledger,
            run_id,
            detector_name=detector_name,
            policy=POLICIES["model"](config),
        )
        self.transcript = _ClientTranscript(messages)
        self.specs = list(specs)  # the client's own specs, byte for byte
        self.completions: list[Completion] = []
        #: Wall and CPU seconds spent awaiting the upstream (the rest of a request is the
        #: proxy's own; :mod:`harness.proxy.overhead`).
        self.upstream_s = 0.0
        self.upstream_cpu_s = 0.0
        #: The proxy's own wall and CPU seconds while a reply streams (between deltas).
        self.proxy_s = 0.0
        self.proxy_cpu_s = 0.0

    def _renumber(self, completion: Completion) -> Completion:
        """Keep the upstream's call ids: the serial transcript is the client's, and its ids
        must stay what the upstream gave (pass-through returns them untouched)."""
        for call in completion.tool_calls:
            self._emitted_turn[call.id] = self.turn
        return completion

    async def complete(
        self, turn: int, settings: GenerationSettings, purpose: Purpose
    ) -> Completion:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return await super().complete(turn, settings, purpose)
        finally:
            self.upstream_s += time.perf_counter() - started
            self.upstream_cpu_s += time.thread_time() - cpu

    def took_turn(
        self, completion: Completion, purpose: Purpose, started: float, *, window_open: bool = False
    ) -> Completion:
        completion = super().took_turn(completion, purpose, started, window_open=window_open)
        self.completions.append(completion)
        return completion

    async def run_serial(self, call: ToolCall) -> None:
        raise ClientHandoff((call,), None)

    async def reveal(self, window: Window) -> None:
        raise ClientHandoff(tuple(window.calls), window)


class _RecordingWindows(Windows):
    """:class:`Windows` that remembers the last admission (the proxy needs to know what the
    call that closed a window was going to do)."""

    last: tuple[ToolCall, Step] | None = None

    def __init__(self, tracker: WindowTracker, opener: Callable[[str | None], Window]) -> None:
        super().__init__(tracker, opener)
        #: Every call admitted since the history's replay, and whether each joined.
        self.admitted: list[tuple[ToolCall, bool]] = []

    def admit(self, call: ToolCall, view: TurnView | None = None) -> Step:
        step = super().admit(call, view)
        self.last = (call, step)
        self.admitted.append((call, step.admission.action == "join"))
        return step

    def only_joined(self, calls: Sequence[ToolCall]) -> bool:
        """Since the replay, exactly ``calls`` were admitted, in order, and each joined."""
        return [(c.id, True) for c in calls] == [(c.id, j) for c, j in self.admitted]


class ProxyArm(FlattenedArm):
    """Arm F on a :class:`ProxyState` (calls at close, never eager: the client runs them)."""

    def __init__(
        self, state: ProxyState, detector: Detector, tracker: WindowTracker | None = None
    ) -> None:
        """``tracker``: one already at the history's phase position (a cached replay,
        :mod:`harness.proxy.positions`) instead of a fresh one."""
        super().__init__(state, detector, None, tracker)  # type: ignore[arg-type]  # no group
        self.recording = _RecordingWindows(self.windows.tracker, self._open)
        self.windows = self.recording
        self.contents: dict[str, str | None] = {}
        self.reply: tuple[ToolCall, ...] = ()
        #: The history's calls (what :func:`replay_calls` brought the tracker through).
        self.history: list[HistoryCall] = []
        self._settings: GenerationSettings | None = None

    def settings(self) -> GenerationSettings:
        """Arm F's settings, computed once per request: the proxy's policy is the model's
        own (:class:`~harness.loop.policy.ModelPolicy`), which never steers by the
        transcript, so every generation of a request has the same settings."""
        if self._settings is None:
            self._settings = super().settings()
        return self._settings

    async def handle(self, completion: Completion) -> bool:
        self.reply = completion.tool_calls
        self.recording.last = None
        return await super().handle(completion)

    async def _admit(self, call: ToolCall, completion: Completion, view: TurnView) -> None:
        self.contents[call.id] = completion.content
        await super()._admit(call, completion, view)


def replay_history(
    arm: ProxyArm, messages: Sequence[Message], windows: Sequence[Sequence[str]]
) -> None:
    """Bring the arm's tracker to the phase position the history's calls leave it in: every
    call admitted in order, the history's windows (``windows``: their call ids) as windows,
    every other call on its own. Nothing runs and nothing is recorded."""
    replay_calls(arm, history_calls(messages, windows))


def replay_calls(arm: ProxyArm, calls: Sequence[HistoryCall]) -> None:
    """Admit ``calls`` (a history's, or the part of it after a cached position, which starts
    where no window is open) as :func:`replay_history` does."""
    for item in calls:
        if item.place == "serial":
            arm.windows.close("history")
        arm.windows.admit(item.call)
        if item.closes:
            arm.windows.close("history")
    arm.windows.close("history")
    arm.recording.last = None
    arm.recording.admitted.clear()


@dataclass
class Outcome:
    """What one request produced.

    ``kind``: ``answer`` (``completion`` is the final reply), ``calls`` (one serial call the
    upstream emitted, returned as it came), ``window`` (a closed window's calls, to return as
    one message). ``remainder``: calls generated after the window closed, to handle first on
    the next request (with their reply's text ``remainder_content``); ``contents``: each
    window call's assistant text."""

    kind: Literal["answer", "calls", "window"]
    completions: list[Completion]
    completion: Completion | None = None
    calls: tuple[ToolCall, ...] = ()
    window: Window | None = None
    contents: tuple[str | None, ...] = ()
    content: str | None = None
    remainder: tuple[ToolCall, ...] = ()
    remainder_content: str | None = None
    remainder_serial: bool = False
    discards: int = 0
    notes: list[str] = field(default_factory=list)


async def answer(
    state: ProxyState,
    arm: ProxyArm,
    remainder: Sequence[ToolCall] = (),
    remainder_content: str | None = None,
    remainder_serial: bool = False,
) -> Outcome:
    """Drive arm F on ``state`` until the client must act: a final answer, a serial call or a
    closed window. ``remainder``: calls left from the last window's closing, handled first;
    ``remainder_serial``: the first of them failed certification as it was generated (it
    closed the window by not joining): it runs on its own, as arm F runs it."""
    try:
        if remainder:
            carried = Completion(remainder_content, tuple(remainder), finish_reason="tool_calls")
            arm.reply = carried.tool_calls
            if remainder_serial:
                _run_serial_again(state, arm, carried)
            view = arm._view()
            for call in remainder:
                await arm._admit(call, carried, view)
        while True:
            completion = await state.generate(arm.settings(), window_open=arm.window_open)
            if await arm.handle(completion):
                return Outcome(
                    "answer",
                    state.completions,
                    completion,
                    discards=state.count.discards,
                )
    except ClientHandoff as handoff:
        return _handed_off(state, arm, handoff)


def _run_serial_again(state: ProxyState, arm: ProxyArm, carried: Completion) -> None:
    """Hand off ``carried``'s first call as a serial call (see :func:`answer`). Arm F
    admitted it once, when the window was still open, and ran it serially; the tracker is
    brought past it as that admission did (a call's admission moves the phase position the
    same way whether it joins or not), and the window its admission may open now is
    dropped: it runs on its own."""
    call = carried.tool_calls[0]
    step = arm.windows.admit(call)
    if step.window is not None and arm.windows.window is step.window:
        arm.windows.window = None
    arm.recording.last = None
    arm.contents[call.id] = carried.content
    state.transcript.append_calls(carried, [call])
    raise ClientHandoff((call,), None)


def _handed_off(state: ProxyState, arm: ProxyArm, handoff: ClientHandoff) -> Outcome:
    if handoff.window is None:
        (call,) = handoff.calls
        rest = _after(arm.reply, call)
        return Outcome(
            "calls",
            state.completions,
            state.completions[-1] if state.completions else None,
            calls=handoff.calls,
            content=arm.contents.get(call.id),
            remainder=rest,
            remainder_content=arm.contents.get(call.id),
            discards=state.count.discards,
        )
    window = handoff.window
    remainder: tuple[ToolCall, ...] = ()
    serial = False
    last = arm.recording.last
    discards = state.count.discards
    if last is not None:
        call, step = last
        if call in window.calls:  # it completed the window: what follows it is left
            remainder = _after(arm.reply, call)
        elif step.admission.action == "discard":  # generated without a result it needed
            remainder = _after(arm.reply, call)
            discards += 1
        else:  # it closed the window by not joining: the loop handles it after the absorb
            remainder = (call, *_after(arm.reply, call))
            serial = step.admission.action == "serial"
    else:  # a final answer (or a cut-off reply) closed the window: regenerated after absorb
        discards += 1
    contents = tuple(arm.contents.get(c.id) for c in window.calls)
    return Outcome(
        "window",
        state.completions,
        state.completions[-1] if state.completions else None,
        calls=handoff.calls,
        window=window,
        contents=contents,
        remainder=remainder,
        remainder_content=arm.contents.get(remainder[0].id) if remainder else None,
        remainder_serial=serial,
        discards=discards,
    )


def _after(reply: Sequence[ToolCall], call: ToolCall) -> tuple[ToolCall, ...]:
    for i, item in enumerate(reply):
        if item.id == call.id:
            return tuple(reply[i + 1 :])
    return ()
