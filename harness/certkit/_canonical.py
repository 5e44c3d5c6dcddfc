"""The equivalence claims of the certification kit: the declared targets (and the store's
declared ``identity=`` functions) agree with how the store keys its records.

A store keys a record by the value's *identity*: one instant in two UTC offsets, ``./a`` and
``a``, ``"Straße"`` and ``"STRASSE"`` may each be one record. The kit makes other spellings
of an argument by its type (:mod:`harness.certkit._aliases`), runs a call and its other
spelling each alone on a fresh state, and asks the store (``resources(state)``) what each
changed:

``targets_canonical``  two spellings that change one resource of the store declare
                       overlapping write targets (:meth:`harness.tools.Tool.footprint`, matched
                       by :func:`harness.certify.conflicts.overlaps`, the certifier's own rule);
``identity``           a tool's ``identity=`` function per argument (the key its store gives
                       a value) is idempotent where it maps a value to one of the same type
                       (``fn(fn(x)) == fn(x)``), and two spellings the store treats as one
                       record get one identity.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from hypothesis import reject
from hypothesis import strategies as st

from harness.certify.d1 import conflicts_with
from harness.certkit._aliases import (
    argument_kind,
    argument_schema,
    spellings,
    target_arguments,
)
from harness.certkit._base import (
    Falsified,
    KitView,
    any_overlap,
    changed_resources,
    shared_resources,
    tool_call,
)
from harness.certkit._report import ClaimName, ClaimResult, Counterexample, Outcome
from harness.tools.effects import FOLD_STEPS, Fold
from harness.tools.toolset import Tool

__all__ = ("check_identity", "check_targets_canonical", "identity_arguments")


def _variant(
    data: st.DataObject,
    tool: Tool,
    arguments: Mapping[str, Any],
    feeding: list[str],
) -> tuple[str, Any]:
    """One argument of ``arguments`` (among ``feeding``) and another spelling of its value,
    by its type, that the tool's schema accepts (rejects the example when there is none)."""
    present = [a for a in feeding if a in arguments]
    options: dict[str, list[Any]] = {}
    for argument in present:
        valid = [
            v
            for v in spellings(
                arguments[argument], argument_schema(tool, argument), tool.parameters
            )
            if tool.is_valid({**arguments, argument: v})
        ]
        if valid:
            options[argument] = valid
    if not options:
        reject()
    argument = data.draw(st.sampled_from(sorted(options)), label="respelled argument")
    variant = data.draw(st.sampled_from(options[argument]), label="other spelling")
    return argument, variant


#: The built-in fold steps from the mildest (merges the fewest names) to the strongest.
_FOLD_STRENGTH = ("nfc", "strip", "whitespace", "path", "nfkc", "case")


def _suggest(tool: Tool, argument: str, a: Any, b: Any) -> str:
    """A fold that makes the two spellings one name, if a built-in one does; a typed
    argument when the two are one value of a type the certifier knows."""
    if tool.effect.identity_for(argument) is not None:
        return (
            f"identity={{'{argument}': ...}} that keys the two spellings as the store does "
            "(a fold inside it), instead of a canonical= fold the identity function bypasses"
        )
    typed = _typed_as(tool, argument, a, b)
    if typed:
        return (
            f"a typed argument ('{argument}: {typed}': the certifier keys the value the tool "
            f"receives by its type), or identity={{'{argument}': <the store's key function>}}"
        )
    if isinstance(a, str) and isinstance(b, str):
        for step in sorted(FOLD_STEPS, key=_FOLD_STRENGTH.index):  # the mildest first
            fold = Fold((step,))
            if fold(a) == fold(b):
                return f"canonical={{'{argument}': '{step}'}} (or a fold that includes '{step}')"
        if Fold(("case", "whitespace", "nfkc", "path"))(a) == Fold(
            ("case", "whitespace", "nfkc", "path")
        )(b):
            return f"canonical={{'{argument}': 'case+whitespace+nfkc+path'}} (the steps it applies)"
        return (
            f"canonical={{'{argument}': Fold(custom=...)}} or identity={{'{argument}': ...}} "
            "(the store's own fold or key function)"
        )
    return (
        f"a typed '{argument}' argument (the certifier spells the value the tool receives: "
        "type it as the store keys it, e.g. int), or canonical= with a custom fold"
    )


def _typed_as(tool: Tool, argument: str, a: Any, b: Any) -> str:
    """The Python type that makes ``a`` and ``b`` one value, when the argument is a string
    the store parses (a date-time, a time, a UUID); ``""`` otherwise."""
    kind = argument_kind(tool, argument)
    if not (isinstance(a, str) and isinstance(b, str)):
        return ""
    parsers: dict[str, tuple[str, Callable[[str], Any]]] = {
        "date-time": ("datetime", _instant),
        "time": ("time", _time_of_day),
        "uuid": ("UUID", uuid.UUID),
    }
    for name, (typed, parse) in parsers.items():
        if kind in (name, "string"):
            try:
                if parse(a) == parse(b):
                    return typed
            except (ValueError, TypeError):
                continue
    return ""


def _instant(text: str) -> Any:
    moment = datetime.datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        raise ValueError("naive")
    return moment


def _time_of_day(text: str) -> Any:
    value = datetime.time.fromisoformat(text.strip())
    if value.utcoffset() is None:
        raise ValueError("naive")
    return datetime.datetime.combine(datetime.date(2000, 1, 3), value)


def check_targets_canonical(kit: KitView, name: str) -> ClaimResult:
    """``targets_canonical`` for one writer: a call and a variant of it (one argument that
    feeds its targets spelled another way) that change the same resource of the store must
    declare overlapping write targets. The store's view: ``resources(state)`` (the two runs
    change a common resource) or, without it, the final fingerprints (both change the state,
    to the same state)."""
    tool = kit.toolset[name]
    feeding = target_arguments(tool)

    def body(data: st.DataObject) -> None:
        arguments = data.draw(kit.strategies[name], label="arguments")
        argument, variant = _variant(data, tool, arguments, feeding)
        try:
            pair(arguments, argument, variant)
        except _Skip:
            reject()

    def pair(arguments: Mapping[str, Any], argument: str, variant: Any) -> None:
        other = {**arguments, argument: variant}
        first, second = tool.footprint(arguments), tool.footprint(other)
        if first.writes is None or second.writes is None or first.error or second.error:
            raise _Skip  # unknown targets: the certifier keeps such calls apart anyway
        assert first.writes is not None
        assert second.writes is not None
        if any_overlap(first.writes, second.writes):
            return  # declared as one resource (or overlapping ones): nothing can certify apart
        found = _one_resource(kit, name, arguments, other)
        if found is None:
            return
        run_a, run_b, shared = found
        raise Falsified(
            Counterexample(
                calls=((name, arguments), (name, other)),
                message=(
                    f"'{name}' with {argument}={arguments[argument]!r} and with "
                    f"{argument}={variant!r} change the same resource of the store "
                    f"({shared}), but declare disjoint write targets "
                    f"({sorted(first.writes)} vs {sorted(second.writes)}): the certifier "
                    "would run the two calls concurrently."
                ),
                expected=Outcome(
                    "one resource: overlapping targets",
                    (),
                    None,
                    (f"#1 {sorted(first.writes)}", f"#2 {sorted(second.writes)}"),
                ),
                actual=Outcome(
                    "what each call changed, each on a fresh state",
                    (run_a.results[0].content, run_b.results[0].content),
                    None,
                ),
                fix=(
                    f"The store folds '{argument}' but the targets of '{name}' spell it raw: "
                    f"declare {_suggest(tool, argument, arguments[argument], variant)} on "
                    f"'{name}' and on every tool that names the same resources."
                ),
            )
        )

    return _explicit_then_drawn(
        kit,
        "targets_canonical",
        name,
        feeding,
        pair,
        body,
        empty="no argument that feeds its targets has another spelling to try",
    )


def _one_resource(
    kit: KitView, name: str, first: Mapping[str, Any], second: Mapping[str, Any]
) -> tuple[Any, Any, str] | None:
    """The tail both spelling claims share: ``name`` run once with ``first`` and once with
    ``second``, each on a fresh state; the two runs and what they changed in common when they
    changed one resource of the store (a counterexample to build), else ``None``."""
    run_a, run_b = kit.once(name, first), kit.once(name, second)
    shared = _shared_resources(run_a, run_b)
    return None if shared is None else (run_a, run_b, shared)


def _shared_resources(run_a: Any, run_b: Any) -> str | None:
    """What the two single-call runs changed in common, as text (``None``: nothing)."""
    before_a, after_a = run_a.before, run_a.after
    before_b, after_b = run_b.before, run_b.after
    if before_a.resources is not None and before_b.resources is not None:
        changed_a = changed_resources(before_a.resources, after_a.resources)
        changed_b = changed_resources(before_b.resources, after_b.resources)
        common = shared_resources(changed_a, changed_b)
        return ", ".join(common[:3]) if common else None
    if before_a.fingerprint is None:
        return None
    changed = before_a.fingerprint != after_a.fingerprint
    if changed and after_a.fingerprint == after_b.fingerprint:
        return "both leave the same state"
    return None


# ------------------------------------------------------------------------------ identity=


def identity_arguments(tool: Tool) -> dict[str, Callable[[Any], Any]]:
    """The arguments of ``tool`` with a declared ``identity=`` function (the key its store
    gives a value), read through ``Effect.identity_for``."""
    effect = tool.effect
    if not getattr(effect, "identity", None):
        return {}
    lookup = getattr(effect, "identity_for", None)
    out: dict[str, Callable[[Any], Any]] = {}
    for argument in tool.parameters.get("properties", {}):
        fn = lookup(argument) if callable(lookup) else None
        if callable(fn):
            out[argument] = fn
    return out


class _Skip(Exception):
    """An example with nothing to compare (hypothesis rejects it; an explicit pair is passed
    over)."""


class _Raised(Exception):
    def __init__(self, exc: Exception) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")


def _apply(fn: Callable[[Any], Any], value: Any) -> Any:
    try:
        return fn(value)
    except Exception as exc:  # the store's key function refuses the value
        raise _Raised(exc) from exc


def _received(tool: Tool, arguments: Mapping[str, Any], argument: str) -> Any:
    """The value the tool function receives for ``argument`` (rejects invalid arguments)."""
    checked = tool.check(arguments)
    if checked.values is None or argument not in checked.values:
        raise _Skip
    assert checked.values is not None
    return checked.values[argument]


def _same_kind(a: Any, b: Any) -> bool:
    return type(a) is type(b) or (isinstance(a, str) and isinstance(b, str))


def check_identity(kit: KitView, name: str) -> ClaimResult:
    """``identity`` for one tool: each declared ``identity=`` function is idempotent where it
    keeps the type, and two spellings of the argument that change one resource of the store
    get one identity."""
    tool = kit.toolset[name]
    keyed = identity_arguments(tool)

    def body(data: st.DataObject) -> None:
        arguments = data.draw(kit.strategies[name], label="arguments")
        argument, variant = _variant(data, tool, arguments, sorted(keyed))
        try:
            pair(arguments, argument, variant)
        except _Skip:
            reject()

    def pair(arguments: Mapping[str, Any], argument: str, variant: Any) -> None:
        fn = keyed[argument]
        other = {**arguments, argument: variant}
        value, respelled = _received(tool, arguments, argument), _received(tool, other, argument)
        try:
            key, again = _apply(fn, value), None
            if _same_kind(key, value):
                again = _apply(fn, key)
            other_key = _apply(fn, respelled)
        except _Raised:
            raise _Skip from None  # a value the store's key function refuses: nothing to compare
        if again is not None and again != key:
            raise Falsified(
                Counterexample(
                    calls=((name, arguments),),
                    message=(
                        f"The identity= function of '{name}' for '{argument}' is not "
                        f"idempotent: it maps {value!r} to {key!r}, and that to {again!r}."
                    ),
                    expected=Outcome("identity(identity(x)) == identity(x)", (repr(key),)),
                    actual=Outcome("identity applied twice", (repr(again),)),
                    fix=(
                        f"Make identity={{'{argument}': ...}} of '{name}' return the key the "
                        "store stores, and return it unchanged when given a key (a fixed point)."
                    ),
                )
            )
        if key == other_key:
            return
        if conflicts_with(kit.toolset, [tool_call(0, name, arguments)], tool_call(1, name, other)):
            return  # the two calls conflict anyway (another argument, or ancestors): never together
        found = _one_resource(kit, name, arguments, other)
        if found is None:
            return
        run_a, run_b, shared = found
        raise Falsified(
            Counterexample(
                calls=((name, arguments), (name, other)),
                message=(
                    f"'{name}' with {argument}={arguments[argument]!r} and with "
                    f"{argument}={variant!r} change the same record of the store ({shared}), "
                    f"but its identity= function gives them two identities ({key!r} vs "
                    f"{other_key!r}): the certifier would run the two calls concurrently."
                ),
                expected=Outcome("one record: one identity", (), None, (repr(key),)),
                actual=Outcome(
                    "the declared identity of each spelling",
                    (run_a.results[0].content, run_b.results[0].content),
                    None,
                    (f"#1 {key!r}", f"#2 {other_key!r}"),
                ),
                fix=(
                    f"identity={{'{argument}': ...}} of '{name}' must be the function the store "
                    f"keys its records with: it keys {arguments[argument]!r} and {variant!r} "
                    "as one record, so they need one identity."
                ),
            )
        )

    return _explicit_then_drawn(
        kit,
        "identity",
        name,
        sorted(keyed),
        pair,
        body,
        empty="no argument with an identity= function has another spelling to try",
    )


#: At most this many explicit (arguments, other spelling) pairs per spelling claim.
MAX_EXPLICIT_PAIRS = 240


def _explicit_then_drawn(
    kit: KitView,
    claim: ClaimName,
    name: str,
    feeding: Sequence[str],
    pair: Callable[[Mapping[str, Any], str, Any], None],
    body: Callable[[st.DataObject], None],
    *,
    empty: str,
) -> ClaimResult:
    """Collisions on purpose: ``pair`` on each explicit argument object of the tool (each
    example value, :attr:`Kit.explicit`) with each other spelling of each argument in
    ``feeding`` (NFC and NFD, case, ``./a`` and ``a``, ...), before hypothesis draws; the
    first false pair is the verdict (already minimal: one value, one spelling)."""
    tool = kit.toolset[name]
    tried = 0
    for arguments in kit.explicit.get(name, []):
        for argument in feeding:
            if argument not in arguments:
                continue
            schema = argument_schema(tool, argument)
            for variant in spellings(arguments[argument], schema, tool.parameters):
                if tried >= MAX_EXPLICIT_PAIRS:
                    break
                if not tool.is_valid({**arguments, argument: variant}):
                    continue
                tried += 1
                try:
                    pair(arguments, argument, variant)
                except _Skip:
                    continue
                except Falsified as exc:
                    if exc.counterexample.nondeterministic:
                        continue
                    return ClaimResult(
                        claim, "FALSE", tried - 1, name, None, "", exc.counterexample
                    )
    result = kit._result(claim, st.data(), body, tool=name, empty=empty)
    if tried and result.status == "unverified" and result.counterexample is None:
        return replace(result, status="passed", examples=tried, reason="")
    return replace(result, examples=result.examples + tried)
