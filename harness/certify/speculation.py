"""Certified speculation: a fan-out phase's calls started before the model emits them.

Arm F+spec (``FlattenSettings.speculate``, :mod:`harness.loop.speculative`) does not guess.
The skill manifest says where each argument of a fan-out phase comes from; when those sources
are known the phase's calls are known, and the tools' effects say which of them are safe to
start early. This module holds the three parts:

**Prediction** (:func:`predict`): for each tool of the phase, from its argument sources —

``input:FIELD``
    a scalar input is a constant; a list input drives one call per element (an element that
    is a table gives the argument of its own name: ``"append_note.text" = "input:notes"``
    over ``notes = [{key, text}, …]``). Arguments driven by two *different* list inputs are
    not predicted (that would be a guess at their pairing).
``result:PHASE`` (an earlier phase)
    *predict from what is visible*: every value in a result already in the context when the
    phase starts that the tool's schema accepts. That is a superset of what the model will
    pick, so it is used only for read-only tools.
``args:PHASE``, ``model``, or a required argument without a source
    nothing is predicted for that tool.

Every prediction must validate against the tool's schema; duplicates are dropped; at most the
phase's slot count (else ``max_window``) per tool.

**Safety** (:func:`speculation_safe`): a read-only tool; or an idempotent tool that takes an
idempotency key *and* whose toolset opted in (``Effect.speculable``, checked by
``harness certify``). Anything else is never started early. An opted-in write is predicted
only from task inputs, only in a one-tool phase, and only at window open (never prefetched):
if the model then does not emit it, it has still run once (idempotent, keyed) — that is what
the opt-in accepts.

**Matching and settling** (:class:`Speculation`): a call the certifier admits into a window of
the speculated phase is matched by tool and canonical arguments as spelled
(:func:`spelled_call_key`: the one :func:`~harness.messages.call_key` every layer compares
calls by, in the certifier's spelling, never folded: a result may echo the spelling). A hit takes over the running or finished
speculative execution (its result is re-addressed to the model's call id; the tool ran once);
a miss runs as F runs it. A call that may write, run serially or in a window of another phase, cancels every other
phase's speculations (they read what it may change). When the window closes, every
unmatched speculation is cancelled and
its result discarded: never shown to the model, never recorded as a call. With
a journal a speculative execution is journaled under its own ``spec_N`` id with mode
``speculative`` — no model call has such an id, so a resume never replays it as a real call —
and a hit journals the model's call with the adopted outcome (mode ``speculated``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup

from harness.certify.provenance import result_values, scalar_leaves
from harness.certify.verdict import DEFAULT_MAX_WINDOW
from harness.messages import CallKey, ToolCall, call_key
from harness.skills.manifest import Phase
from harness.tools.effects import canonical_text
from harness.tools.execute import Executor, SpeculationRecord, ToolResult
from harness.tools.toolset import Tool, Toolset

__all__ = (
    "Prediction",
    "SpecStats",
    "Speculation",
    "draft_calls",
    "folded_call_key",
    "predict",
    "speculation_safe",
    "spelled_call_key",
)


def speculation_safe(tool: Tool | None) -> bool:
    """May a call of ``tool`` start before the model emits it (see the module docstring)?"""
    if tool is None:
        return False
    effect = tool.effect
    if effect.read_only:
        return True
    return effect.idempotent and effect.accepts_idempotency_key and effect.speculable


def spelled_call_key(name: str, arguments: Mapping[str, Any]) -> CallKey | None:
    """The call's :func:`~harness.messages.call_key` with its arguments as spelled (values in
    the certifier's canonical spelling, strings unfolded); ``None`` when they have no
    canonical form."""
    try:
        return call_key(name, dict(arguments), canonical_text)
    except (TypeError, ValueError):
        return None


def folded_call_key(tool: Tool | None, name: str, arguments: Mapping[str, Any]) -> CallKey | None:
    """The call's :func:`~harness.messages.call_key` as the tool's store names it: each string
    argument folded as the store folds it, the values in the certifier's canonical spelling
    (:func:`~harness.tools.effects.canonical_text`); ``None`` when the arguments have no
    canonical form (such a call never matches)."""
    effect = tool.effect if tool is not None else None
    folded: dict[str, Any] = {}
    for arg, value in arguments.items():
        fold = effect.fold_for(arg) if effect is not None else None
        folded[arg] = fold.apply(value) if fold is not None else value
    try:
        return call_key(name, folded, canonical_text)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Prediction:
    """One call the manifest makes known: the tool, its arguments, and where they came from
    (``input``: task inputs only; ``result``: a value in a visible result)."""

    tool: str
    arguments: Mapping[str, Any]
    source: Literal["input", "result"]


def _input_values(value: Any, arg: str) -> list[Any] | None:
    """One value of ``arg`` per element of a list input (a table element gives its ``arg``
    entry); ``None`` when an element has no such entry."""
    out = []
    for element in value:
        if isinstance(element, Mapping):
            if arg not in element:
                return None
            out.append(element[arg])
        else:
            out.append(element)
    return out


@dataclass
class _Sources:
    """One tool's argument sources, sorted into constants, input-driven lists and
    result-sourced arguments (``ok`` False: some argument is not known in advance)."""

    constants: dict[str, Any] = field(default_factory=dict)
    driven: dict[str, list[Any]] = field(default_factory=dict)
    drivers: set[str] = field(default_factory=set)
    from_results: list[str] = field(default_factory=list)
    ok: bool = True


def _sort_sources(tool: Tool, phase: Phase, inputs: Mapping[str, Any]) -> _Sources:
    sources = phase.sources(tool.name)
    required = tool.parameters.get("required", [])
    out = _Sources(ok=bool(sources) and all(arg in sources for arg in required))
    for arg, source in sources.items():
        if source.kind == "input" and source.ref is not None and source.ref in inputs:
            value = inputs[source.ref]
            if not isinstance(value, list | tuple):
                out.constants[arg] = value
                continue
            values = _input_values(value, arg)
            if values is None:
                out.ok = False
            else:
                out.driven[arg] = values
                out.drivers.add(source.ref)
        elif source.kind == "result" and source.ref != phase.name:
            out.from_results.append(arg)
        else:
            out.ok = False  # args:, model, an unnamed input: not known in advance
    # Two independent lists (or a list and results): their pairing would be a guess.
    if len(out.drivers) > 1 or len(out.from_results) > 1 or (out.drivers and out.from_results):
        out.ok = False
    return out


def _visible_values(visible: Sequence[str]) -> list[Any]:
    """Every value inside the visible results (JSON leaves, then each result's text)."""
    values: list[Any] = []
    for text in visible:
        with contextlib.suppress(ValueError):
            values.extend(scalar_leaves(json.loads(text)))
    values.extend(sorted(set().union(*(result_values(r) for r in visible))) if visible else [])
    return values


def _tool_predictions(
    tool: Tool,
    phase: Phase,
    inputs: Mapping[str, Any],
    visible: Sequence[str],
    limit: int,
) -> list[Prediction]:
    sources = _sort_sources(tool, phase, inputs)
    if not sources.ok:
        return []
    rows: list[dict[str, Any]] = [{}]
    kind: Literal["input", "result"] = "input"
    if sources.from_results:
        if not tool.effect.read_only:
            return []  # a superset guess: only for tools that change nothing
        kind, arg = "result", sources.from_results[0]
        rows = [{arg: v} for v in _visible_values(visible) if isinstance(v, str | int | float)]
    elif sources.driven:
        lengths = {len(v) for v in sources.driven.values()}
        if len(lengths) != 1:
            return []
        rows = [{a: vs[i] for a, vs in sources.driven.items()} for i in range(lengths.pop())]
    out: list[Prediction] = []
    seen: set[CallKey] = set()
    for row in rows:
        arguments = {**sources.constants, **row}
        key = folded_call_key(tool, tool.name, arguments)
        if key is None or key in seen or tool.validation_errors(arguments):
            continue
        seen.add(key)
        out.append(Prediction(tool.name, arguments, kind))
        if len(out) >= limit:
            break
    return out


def predict(
    phase: Phase,
    toolset: Toolset,
    inputs: Mapping[str, Any],
    visible: Sequence[str] = (),
    *,
    max_window: int = DEFAULT_MAX_WINDOW,
    prefetch: bool = False,
) -> list[Prediction]:
    """The safe calls of fan-out ``phase`` known from ``inputs`` and the ``visible`` result
    texts (see the module docstring). ``prefetch``: the phase has not started yet (no window
    is open), so only read-only tools are predicted."""
    if not phase.is_fan_out:
        return []
    slots = phase.slot_count(inputs)
    limit = min(slots, max_window) if slots is not None else max_window
    out: list[Prediction] = []
    for name in phase.tools:
        tool = toolset.get(name)
        if tool is None or not speculation_safe(tool):
            continue
        writes = not tool.effect.read_only
        if writes and (prefetch or len(phase.tools) > 1):
            continue
        found = _tool_predictions(tool, phase, inputs, visible, limit)
        if writes and (slots is None or len(found) != slots):
            continue  # a write only when the window's calls are exactly known
        out.extend(found)
    return out


def draft_calls(
    skill_phases: Sequence[Phase],
    toolset: Toolset,
    inputs: Mapping[str, Any],
    visible: Sequence[str],
    made: Sequence[ToolCall],
    *,
    max_window: int = DEFAULT_MAX_WINDOW,
) -> tuple[ToolCall, ...]:
    """The calls the fan-out phases of a skill make known (from ``inputs`` and the
    ``visible`` result texts, as :func:`predict` finds them, for *any* tool: a draft is only
    text the engine verifies, never a call that runs) that are not among the calls already
    ``made``, in the manifest's order; arguments in the tool schema's order, as the model
    writes them. What the drafted decoding of :mod:`harness.engines.window_drafts` drafts."""
    done: set[CallKey] = set()
    for call in made:
        value = call.args.value
        if value is not None:
            key = folded_call_key(toolset.get(call.name), call.name, value)
            if key is not None:
                done.add(key)
    out: list[ToolCall] = []
    for phase in skill_phases:
        if not phase.is_fan_out:
            continue
        slots = phase.slot_count(inputs)
        limit = min(slots, max_window) if slots is not None else max_window
        for name in phase.tools:
            tool = toolset.get(name)
            if tool is None:
                continue
            for prediction in _tool_predictions(tool, phase, inputs, visible, limit):
                key = folded_call_key(tool, name, prediction.arguments)
                if key is None or key in done:
                    continue
                done.add(key)
                order = list(tool.parameters.get("properties", {}))
                ordered = dict(
                    sorted(
                        prediction.arguments.items(),
                        key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order),
                    )
                )
                text = json.dumps(ordered, ensure_ascii=False)
                out.append(ToolCall(f"draft_{len(out)}", name, text))
    return tuple(out)


@dataclass
class _Speculated:
    call: ToolCall
    key: CallKey
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    result: ToolResult | None = None
    started: float = 0.0
    ended: float | None = None
    claimed_by: str | None = None


@dataclass(frozen=True)
class SpecStats:
    """What one phase's speculation did: ``predicted`` (calls started early), ``hits``
    (emitted calls that took one over), ``misses`` (calls of the window that matched none and
    ran as in F), ``cancelled`` (unmatched when the window closed: discarded) and
    ``wasted_s`` (tool seconds spent on discarded speculations)."""

    predicted: int = 0
    hits: int = 0
    misses: int = 0
    cancelled: int = 0
    wasted_s: float = 0.0


class Speculation:
    """The speculative executions of one phase (see the module docstring).

    ``executor``: the run's executor (one with the :class:`~harness.tools.execute.SpeculationRecord`
    capability, the journal, records each as ``speculative``); ``group``: the run's task
    group, so cancelling the run cancels them; ``ids``: the run's ``spec_N`` id source."""

    def __init__(
        self,
        phase: str,
        predictions: Sequence[Prediction],
        toolset: Toolset,
        executor: Executor,
        group: TaskGroup,
        ids: Iterator[int],
    ) -> None:
        self.phase = phase
        self.toolset = toolset
        self.executor = executor
        self.entries: list[_Speculated] = []
        for p in predictions:
            key = spelled_call_key(p.tool, p.arguments)
            assert key is not None  # predict() kept only canonical arguments
            call = ToolCall(f"spec_{next(ids)}", p.tool, json.dumps(dict(p.arguments)))
            self.entries.append(_Speculated(call, key, started=time.monotonic()))
        self.hits = 0
        self.misses = 0
        self.settled = False
        for entry in self.entries:
            group.start_soon(self._run, entry)

    async def _run(self, entry: _Speculated) -> None:
        entry.started = time.monotonic()
        try:
            with entry.scope:
                executor = self.executor
                if isinstance(executor, SpeculationRecord):
                    entry.result = await executor.speculate(entry.call)
                else:
                    entry.result = await executor.execute(entry.call)
        finally:
            entry.ended = time.monotonic()
            entry.done.set()

    def key_of(self, call: ToolCall) -> CallKey | None:
        """The key a call must share with a speculation to take over its result: its
        arguments as spelled, never folded (``read_doc("D1")`` under a case fold is the same
        record as ``read_doc("d1")``, but its result may echo the spelling)."""
        arguments = call.args.value
        if not isinstance(arguments, Mapping):
            return None
        return spelled_call_key(call.name, arguments)

    def claim(self, call: ToolCall) -> _Speculated | None:
        """The unclaimed speculation ``call`` matches (now claimed by it), or ``None``: a miss."""
        key = self.key_of(call) if not self.settled else None
        for entry in self.entries:
            if key is not None and entry.claimed_by is None and entry.key == key:
                if entry.done.is_set() and entry.result is None:
                    continue  # cancelled before it finished: nothing to reuse
                entry.claimed_by = call.id
                self.hits += 1
                return entry
        self.misses += 1
        return None

    async def adopt(self, entry: _Speculated, call: ToolCall) -> ToolResult:
        """The result of the hit ``call``: the speculation's, re-addressed to ``call``."""
        executor = self.executor
        record = executor if isinstance(executor, SpeculationRecord) else None
        if record is not None and record.decided(call):
            entry.scope.cancel()
            return await executor.execute(call)  # resumed: the journal's word on call is final
        await entry.done.wait()
        if entry.result is None:  # cancelled with the run: run it as F would
            return await executor.execute(call)
        result = replace(entry.result, call_id=call.id)
        if record is not None:
            record.adopted(call, entry.call, result)
        return result

    def settle(self) -> SpecStats:
        """Cancel every unmatched speculation (its result is discarded) and say what the
        phase's speculation did. Idempotent."""
        now = time.monotonic()
        wasted = 0.0
        cancelled = 0
        for entry in self.entries:
            if entry.claimed_by is not None:
                continue
            if not self.settled:
                entry.scope.cancel()
            cancelled += 1
            wasted += (entry.ended if entry.ended is not None else now) - entry.started
        self.settled = True
        return SpecStats(len(self.entries), self.hits, self.misses, cancelled, wasted)
