"""The commutation claim of the certification kit: every window the certifier certifies, run
concurrently in random start orders and interleavings, gives the same results and final state
as the serial run in emitted order.

Windows are drawn call by call (a call that would break D1/D2 is left out), and most are
*constructed* to meet a hidden conflict before any is sampled at random: a later call takes
an earlier call's argument values (same argument name, else same type), as they are or
spelled another way (:mod:`harness.certkit._aliases`). Two writers whose declared targets are
disjoint while their store's are not then meet on one record in most windows, not by chance.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from hypothesis import reject
from hypothesis import strategies as st

from harness.certify import Certificate
from harness.certify.d1 import conflicts_with
from harness.certify.d2 import placeholder_failure
from harness.certkit._aliases import argument_kind, argument_schema, spellings, target_arguments
from harness.certkit._base import (
    Call,
    Falsified,
    Observed,
    RunningKit,
    change_lines,
    changed_resources,
    declared_writes,
    nondeterministic_counterexample,
    not_covered,
    not_overlapping,
    outcome_text,
    short,
    tool_call,
    varying,
)
from harness.certkit._report import ClaimResult, Counterexample, Outcome
from harness.certkit._schema_strategies import simplest_arguments
from harness.messages import ToolCall
from harness.skills.manifest import Phase

__all__ = ("COMMUTES_FACTOR", "check_commutes", "draw_window", "explicit_windows")

#: A commutation claim gets this many times the examples of a per-tool claim: the space of
#: windows (tools x arguments x schedules) is much larger than one tool's arguments.
COMMUTES_FACTOR = 2
DEPENDENCY_FIX = (
    "if one call's argument comes from another call's result, mark it result:PHASE in the "
    "manifest (D2); if they share a resource, declare it in write/read targets (D1)."
)


#: How a window's calls are drawn: a later call takes an earlier call's argument values as
#: they are (``shared``) or spelled another way (``respelled``), or a value an earlier call
#: returns when run alone (``result``: a result the manifest may not mark as one), or nothing
#: is shared (``random``). Hypothesis draws the constructed kinds three times in four, and
#: shrinks towards ``shared``.
WINDOW_KINDS = ("shared", "respelled", "result", "random")


def draw_window(kit: RunningKit, data: st.DataObject, phase: Phase) -> list[Call]:
    """A window the detector certifies in ``phase``: calls are drawn one by one (each after
    the first sharing an earlier call's values, unless the window is ``random``) and a call
    that would break D1/D2 is left out (rejects when fewer than two remain)."""
    tools = kit.eligible(phase.tools)
    kind = data.draw(st.sampled_from(WINDOW_KINDS), label="window kind")
    size = data.draw(st.integers(2, kit.max_window), label="window size")
    window: list[Call] = []
    calls: list[ToolCall] = []
    for _ in range(size):
        name = data.draw(st.sampled_from(tools), label="tool")
        arguments = data.draw(kit.strategies[name], label=f"{name} arguments")
        if kind != "random" and window:
            source = window[data.draw(st.integers(0, len(window) - 1), label="shares with")]
            if kind == "result":
                arguments = _from_result(kit, data, name, arguments, source)
            else:
                arguments = _share(kit, data, name, arguments, source, respell=kind == "respelled")
        call = tool_call(len(calls), name, arguments)
        if placeholder_failure(phase, call) or conflicts_with(kit.toolset, calls, call):
            continue
        window.append((name, arguments))
        calls.append(call)
    if len(window) < 2:
        reject()
    if not isinstance(kit.detector.certify(kit.toolset, calls, phase, {}), Certificate):
        reject()
    return window


def _share(
    kit: RunningKit,
    data: st.DataObject,
    name: str,
    arguments: Mapping[str, Any],
    source: Call,
    *,
    respell: bool,
) -> dict[str, Any]:
    """``arguments`` of tool ``name`` with each argument that feeds its targets taking the
    value of ``source``'s argument of the same name (else of the first of its target
    arguments of the same type), spelled another way when ``respell``; a value the schema
    refuses is left as drawn."""
    tool = kit.toolset[name]
    out = dict(arguments)
    for argument, value in _source_values(kit, name, list(arguments), source):
        if respell:
            schema = argument_schema(tool, argument)
            options = [
                v
                for v in spellings(value, schema, tool.parameters)
                if tool.is_valid({**out, argument: v})
            ]
            if options:
                value = data.draw(st.sampled_from(options), label=f"{argument} spelled")
        if tool.is_valid({**out, argument: value}):
            out[argument] = value
    return out


def _from_result(
    kit: RunningKit, data: st.DataObject, name: str, arguments: Mapping[str, Any], source: Call
) -> dict[str, Any]:
    """``arguments`` of tool ``name`` with one argument that feeds its targets taking a value
    that ``source`` returns when run alone on a fresh state (if the schema accepts one)."""
    tool = kit.toolset[name]
    returned = [
        v
        for v in dict.fromkeys(_leaves(_decoded(outcome_text(kit.once(*source).results[0]))))
        if isinstance(v, str | int)
    ]
    out = dict(arguments)
    options = [
        (argument, value)
        for argument in target_arguments(tool) or list(arguments)
        for value in returned
        if tool.is_valid({**out, argument: value})
    ]
    if options:
        argument, value = data.draw(st.sampled_from(options), label="a returned value")
        out[argument] = value
    return out


def check_commutes(kit: RunningKit, label: str, phase: Phase) -> ClaimResult:
    """``commutes`` for one phase: first every explicit pair (:func:`explicit_windows`), then
    windows hypothesis draws (:func:`draw_window`), each run serially and concurrently."""
    tried = 0
    for window in explicit_windows(kit, phase):
        reverse = list(range(len(window)))[::-1]
        try:
            _check_window(
                kit,
                window,
                ((reverse, [0] * len(window)), (sorted(reverse), [1] + [0] * (len(window) - 1))),
            )
        except Falsified as exc:
            if exc.counterexample.nondeterministic:
                continue  # noise, not a verdict: the drawn windows report it if it stays
            return ClaimResult("commutes", "FALSE", tried, None, label, "", exc.counterexample)
        tried += 1

    def body(data: st.DataObject) -> None:
        window = draw_window(kit, data, phase)
        order = data.draw(st.permutations(range(len(window))), label="start order")
        yields = data.draw(
            st.lists(st.integers(0, 3), min_size=len(window), max_size=len(window)),
            label="yields before each call",
        )
        # the drawn schedule, then the emitted order reversed (the likeliest to differ)
        reverse = list(range(len(window)))[::-1]
        _check_window(kit, window, ((order, yields), (reverse, [0] * len(window))))

    result = kit._result(
        "commutes",
        st.data(),
        body,
        examples=COMMUTES_FACTOR * kit.examples,
        phase=label,
        empty="no window of 2+ calls certifies in this phase, so none runs concurrently",
    )
    if tried and result.status == "unverified" and result.counterexample is None:
        return replace(result, status="passed", examples=tried, reason="")
    return replace(result, examples=result.examples + tried)


def _check_window(
    kit: RunningKit,
    window: list[Call],
    schedules: Sequence[tuple[Sequence[int], Sequence[int]]],
) -> None:
    """Run ``window`` serially, then concurrently under each (start order, yields) schedule;
    raise :class:`Falsified` at the first difference not explained by nondeterminism."""
    serial = kit.execute(window)
    expected = [outcome_text(r) for r in serial.results]
    for start, pauses in schedules:
        concurrent = kit.execute(window, order=start, yields=pauses)
        got = [outcome_text(r) for r in concurrent.results]
        if got != expected or serial.after.fingerprint != concurrent.after.fingerprint:
            _judge_against_control(kit, window, serial, concurrent)
            raise Falsified(
                _commutation_counterexample(kit, window, start, pauses, serial, concurrent)
            )


#: At most this many explicit windows per phase.
MAX_EXPLICIT_WINDOWS = 400
#: Explicit argument objects of a writer paired with every other tool.
EXPLICIT_PER_WRITER = 6


def explicit_windows(kit: RunningKit, phase: Phase) -> Iterator[list[Call]]:
    """Collisions on purpose: every tool of the phase that writes, with each of its first
    explicit argument objects (each an example value, :attr:`Kit.explicit`), paired with
    every tool of the phase given the same values for its arguments of the same name (else
    kind), in both orders; only the pairs the certifier certifies. A reader that declares
    less than it reads, or a writer that declares less than it writes, meets the call that
    shows it here at every seed."""
    tools = kit.eligible(phase.tools)
    count = 0
    for writer in tools:
        if kit.toolset[writer].effect.read_only:
            continue
        for written in kit.explicit.get(writer, [])[:EXPLICIT_PER_WRITER]:
            for other in tools:
                base = simplest_arguments(kit.toolset[other].parameters)
                if base is None:
                    continue
                for shared in _shared_variants(kit, other, base, (writer, written)):
                    for window in ([(writer, written), (other, shared)], [(other, shared), (writer, written)]):  # fmt: skip
                        calls = [tool_call(i, n, a) for i, (n, a) in enumerate(window)]
                        if placeholder_failure(phase, calls[1]) or conflicts_with(
                            kit.toolset, calls[:1], calls[1]
                        ):
                            continue
                        if not isinstance(
                            kit.detector.certify(kit.toolset, calls, phase, {}), Certificate
                        ):
                            continue
                        yield window
                        count += 1
                        if count >= MAX_EXPLICIT_WINDOWS:
                            return


def _shared_variants(
    kit: RunningKit, name: str, base: Mapping[str, Any], source: Call
) -> Iterator[dict[str, Any]]:
    """``name``'s arguments sharing ``source``'s values (:func:`_share_values`), then the
    same with each shared text value replaced by each of its ancestors (``notes/b.md``:
    ``notes`` and ``.``): a listing of a directory meets a write inside it."""
    shared = _share_values(kit, name, base, source)
    yield shared
    tool = kit.toolset[name]
    for argument, value in shared.items():
        if not isinstance(value, str) or value == base.get(argument):
            continue
        for parent in _parents(value):
            candidate = {**shared, argument: parent}
            if tool.is_valid(candidate):
                yield candidate


def _parents(text: str) -> list[str]:
    """Each proper ancestor of a ``/``-separated name, nearest first, and ``.`` for a relative
    one: ``a/b/c`` gives ``a/b``, ``a``, ``.``."""
    parts = [p for p in text.split("/") if p]
    out = ["/" * text.startswith("/") + "/".join(parts[:k]) for k in range(len(parts) - 1, 0, -1)]
    return out if text.startswith("/") else [*out, "."]


def _share_values(
    kit: RunningKit, name: str, arguments: Mapping[str, Any], source: Call
) -> dict[str, Any]:
    """``arguments`` of ``name`` taking ``source``'s values for arguments of the same name,
    else of the same kind, where the schema accepts them (:func:`_share` without drawing)."""
    tool = kit.toolset[name]
    out = dict(arguments)
    properties = list(tool.parameters.get("properties", {}))
    for argument, value in _source_values(kit, name, properties, source):
        if tool.is_valid({**out, argument: value}):
            out[argument] = value
    return out


def _source_values(
    kit: RunningKit, name: str, fallback: list[str], source: Call
) -> Iterator[tuple[str, Any]]:
    """For each argument of ``name`` that feeds its targets (else each of ``fallback``):
    ``source``'s value for the argument of the same name, else for its first target argument
    of the same kind (none: the argument is left out)."""
    tool, other = kit.toolset[name], kit.toolset[source[0]]
    theirs = target_arguments(other) or list(source[1])
    for argument in target_arguments(tool) or fallback:
        if argument in source[1]:
            yield argument, source[1][argument]
            continue
        kind = argument_kind(tool, argument)
        same = [a for a in theirs if a in source[1] and argument_kind(other, a) == kind]
        if same:
            yield argument, source[1][same[0]]


def _judge_against_control(
    kit: RunningKit, window: list[Call], serial: Observed, concurrent: Observed
) -> None:
    """Before a difference is blamed on concurrency: run the window serially once more on a
    fresh state. When every difference from the concurrent run is also a difference between
    the two serial runs (and the state is the same, or also varies), the results are
    nondeterministic and the claim cannot be judged from them."""
    control = kit.execute(window)
    noise = set(varying(serial, control))
    concurrency = set(varying(serial, concurrent))
    state_noise = serial.after.fingerprint != control.after.fingerprint
    state_concurrency = serial.after.fingerprint != concurrent.after.fingerprint
    if noise and concurrency <= noise and (state_noise or not state_concurrency):
        raise Falsified(nondeterministic_counterexample(window, serial, control))


def _commutation_counterexample(
    kit: RunningKit,
    window: list[Call],
    order: Sequence[int],
    yields: Sequence[int],
    serial: Observed,
    concurrent: Observed,
) -> Counterexample:
    differing = [
        i
        for i, (x, y) in enumerate(zip(serial.results, concurrent.results, strict=True))
        if outcome_text(x) != outcome_text(y)
    ]
    state_differs = serial.after.fingerprint != concurrent.after.fingerprint
    parts = (
        [f"the results of {', '.join(f'#{i} {window[i][0]}' for i in differing)}"]
        if differing
        else []
    )
    if state_differs:
        parts.append("the final state")
    names = sorted({window[i][0] for i in differing} or {n for n, _ in window})
    message = (
        f"A certified window of {len(window)} calls is not order-independent: "
        f"{' and '.join(parts)} differ between the serial run and a concurrent one "
        f"({', '.join(repr(n) for n in names)})."
    )
    state_lines = change_lines(
        serial.after.resources,
        concurrent.after.resources,
        changed_resources(serial.after.resources, concurrent.after.resources),
    )
    return Counterexample(
        calls=tuple(window),
        message=message,
        expected=Outcome(
            "serial, in emitted order",
            tuple(outcome_text(r) for r in serial.results),
            short(serial.after.fingerprint),
        ),
        actual=Outcome(
            f"concurrent, started in order {list(order)} with {list(yields)} scheduler yields",
            tuple(outcome_text(r) for r in concurrent.results),
            short(concurrent.after.fingerprint),
            tuple(
                line.replace("changed ", "differs ", 1).replace(" → ", " (serial) vs ", 1)
                + " (concurrent)"
                for line in state_lines
            ),
        ),
        fix=_commutation_fix(kit, window, differing, serial),
    )


def _commutation_fix(
    kit: RunningKit, window: list[Call], differing: list[int], serial: Observed
) -> str:
    """What to change: undeclared writes (seen through ``resources``), else undeclared
    reads or the general advice, with the D2 alternative (a result the manifest does not
    mark as one), first when an argument of one call is a value another call returns."""
    advice, seen_writing = _targets_fix(kit, window, differing)
    if seen_writing:
        return advice
    used = _result_as_argument(window, [outcome_text(r) for r in serial.results])
    if used:
        return f"{used}{DEPENDENCY_FIX} {advice}"
    return f"{advice} {DEPENDENCY_FIX[:1].upper()}{DEPENDENCY_FIX[1:]}"


def _targets_fix(kit: RunningKit, window: list[Call], differing: list[int]) -> tuple[str, bool]:
    """The advice, and whether ``resources`` showed a call writing what it does not declare."""
    if kit.cert.resources is not None:
        writes: list[set[str]] = []
        undeclared = []
        for name, arguments in window:
            run = kit.once(name, arguments)
            changed = changed_resources(run.before.resources, run.after.resources)
            writes.append(changed)
            extra = not_covered(changed, declared_writes(kit.toolset[name], arguments) or ())
            if extra:
                undeclared.append(f"'{name}' writes {sorted(extra)}, which it does not declare")
        if undeclared:
            return (
                "; ".join(undeclared) + ": declare them as write targets (then D1 keeps these "
                "calls apart), or stop the tool writing them.",
                True,
            )
        for i in differing:
            name, arguments = window[i]
            others = set().union(*(w for j, w in enumerate(writes) if j != i))
            reads = kit.toolset[name].footprint(arguments).reads
            unread = set() if reads is None else not_overlapping(others, reads)
            if unread:
                return (
                    f"'{name}' returns a different result when another call of the window "
                    f"writes {sorted(unread)}, which '{name}' does not declare as read "
                    f"targets: add what it really reads to its read_targets (then D1 keeps "
                    "it apart from those writes), or make it read only what it declares.",
                    False,
                )
    names = sorted({n for n, _ in window})
    who = f"'{names[0]}'" if len(names) == 1 else "one of " + " and ".join(repr(n) for n in names)
    return (
        f"These calls certified as independent (their declared targets are disjoint) but do "
        f"not commute, so {who} touches state it does not declare. If a result depends on "
        "hidden state (a counter, a clock, the order of calls), make it depend only on the "
        "arguments and the declared targets, or declare that state as a write target of "
        "every call that touches it; if a call reads what another writes, add it to its "
        "read_targets.",
        False,
    )


def _leaves(value: Any) -> Iterator[Any]:
    """The scalar values in a decoded JSON result."""
    if isinstance(value, dict | list):
        for inner in value.values() if isinstance(value, dict) else value:
            yield from _leaves(inner)
    elif not isinstance(value, bool):
        yield value


def _decoded(content: str) -> Any:
    try:
        return json.loads(content)
    except json.JSONDecodeError:
        return content


def _result_as_argument(window: Sequence[Call], results: Sequence[str]) -> str:
    """A sentence when an argument of one call is a value another call of the window returns
    (serially): likely a result the manifest does not mark as one; else ``""``."""
    leaves = [set(_leaves(_decoded(r))) for r in results]
    for i, (name, arguments) in enumerate(window):
        for argument, value in sorted(arguments.items()):
            if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
                continue
            for j, (other, _) in enumerate(window):
                if j != i and value in leaves[j]:
                    return (
                        f"#{i} '{name}' gets {argument}={json.dumps(value)}, which #{j} '{other}' "
                        "returns: "
                    )
    return ""
