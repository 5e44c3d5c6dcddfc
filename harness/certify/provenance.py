"""Provenance: does each argument of a call come from where the manifest says it comes from?

The manifest declares, per ``tool.argument``, a *source*; the certifier trusts it for D2. A
model is free to deviate, so before a call joins a window the certifier checks the values it
can check, as a pure function of the call, the manifest, the task inputs and what the call's
turn could see (:func:`check_provenance`):

``input:FIELD``
    the value must be one of that input's values: the input itself or any value inside it (an
    element of a list, a value of a table, at any depth; a list argument: every element).
    ``input`` (no field): one of the values of any input field. Compared canonically (:func:`~harness.tools.effects.canonical_text`) and,
    when the tool declares a fold for the argument, after folding both sides.
``result:PHASE``
    the value must appear in a result the call's turn could see (a string: inside one such
    result's text; any other value: its canonical text equals a value in one such result).
    Checked when the turn is known (the loop always passes it); a call certified outside a
    run (batch ``certify`` without a view) has no turn to check against.
``args:PHASE``, ``model``
    not checked here (arguments are visible when emitted; ``model`` is free).

Under **every** source, and for every detector, an argument that contains the withheld-result
marker, or the full text of a result withheld from the call's turn, is a D2 violation: the
call was generated without something it quotes (:func:`quotes_withheld`).

A call with a violation is never admitted into a window: it is discarded and regenerated
after the open window's absorb turn when a window is open (the value may have depended on a
withheld result), otherwise it runs on its own. Either way the ledger counts it.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness.skills.manifest import ArgSource
from harness.tools.effects import Effect, Fold, canonical_text

__all__ = (
    "InputValues",
    "ProvenancePlan",
    "TurnView",
    "Violation",
    "check_provenance",
    "quotes_withheld",
    "result_values",
    "scalar_leaves",
)

ViolationKind = Literal["marker", "withheld_text", "not_an_input", "not_in_visible_results"]


@dataclass(frozen=True)
class TurnView:
    """What the turn that generated a call could see: the texts of the results in its
    context (``visible``) and of the results withheld from it that already exist
    (``withheld``: with eager dispatch a withheld call may have finished)."""

    visible: tuple[str, ...] = ()
    withheld: tuple[str, ...] = ()


@dataclass(frozen=True)
class Violation:
    """One argument whose value does not come from its declared source."""

    argument: str
    kind: ViolationKind
    message: str

    @property
    def code(self) -> str:
        return "D2_quotes_marker" if self.kind in ("marker", "withheld_text") else "D2_provenance"


def scalar_leaves(value: Any, *, keys: bool = False) -> Iterator[Any]:
    """Every scalar inside ``value`` (a JSON-like value: mappings' values and sequences'
    items, at any depth), in order; a scalar yields itself. ``keys``: mappings' keys too,
    each before its value."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            if keys:
                yield k
            yield from scalar_leaves(v, keys=keys)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from scalar_leaves(v, keys=keys)
    else:
        yield value


def quotes_withheld(
    arguments: Mapping[str, Any], marker: str, withheld: Sequence[str] = ()
) -> list[Violation]:
    """Arguments that contain ``marker`` or the full text of a withheld result (any string
    inside them, mappings' keys too, at any depth). The search for withheld text is bounded
    (:data:`MAX_SCAN` characters per call): past it an argument counts as quoting one (not
    proven otherwise, so the call is not certified)."""
    out = []
    texts = [w for w in withheld if w] if withheld else ()
    left = MAX_SCAN
    for name, value in arguments.items():
        for leaf in (value,) if type(value) is str else scalar_leaves(value, keys=True):
            text = leaf if isinstance(leaf, str) else canonical_text(leaf)
            if marker and marker in text:
                out.append(Violation(name, "marker", f"argument {name!r} quotes {marker!r}"))
                break
            if not texts:
                continue
            if isinstance(leaf, str):
                left -= len(text) * len(texts)
                quoted = left < 0 or any(w in text for w in texts)
            else:
                quoted = text in texts
            if quoted:
                out.append(
                    Violation(name, "withheld_text", f"argument {name!r} quotes a withheld result")
                )
                break
    return out


class InputValues:
    """The task inputs, indexed for provenance: per field, the canonical spelling of the
    field and of every value inside it (at any depth), folded on demand. Built once per run
    (a pure function of the inputs)."""

    def __init__(self, inputs: Mapping[str, Any]) -> None:
        self.fields: dict[str, set[str]] = {}
        for name, value in inputs.items():
            spelled: set[str] = set()
            self._walk(value, spelled)
            self.fields[name] = spelled
        self.every = set().union(*self.fields.values()) if self.fields else set()
        self._folded: dict[tuple[str | None, Fold], set[str]] = {}

    def _walk(self, value: Any, out: set[str]) -> None:
        # (a value with no canonical form, or an integer past Python's 4,300-digit limit on
        # spelling one, allows nothing)
        with contextlib.suppress(TypeError, ValueError):
            out.add(canonical_text(value))
        if isinstance(value, Mapping):
            for inner in value.values():
                self._walk(inner, out)
        elif isinstance(value, list | tuple | set | frozenset):
            for inner in value:
                self._walk(inner, out)

    def allowed(self, ref: str | None, fold: Fold | None) -> set[str]:
        """The spellings ``input[:ref]`` allows: none when the task has no such field (a
        value the manifest sources from an input the task lacks cannot be proven to be one,
        so the call is not certified)."""
        if ref is not None and ref not in self.fields:
            return set()
        plain = self.every if ref is None else self.fields[ref]
        if fold is None:
            return plain
        key = (ref, fold)
        if key not in self._folded:
            self._folded[key] = plain | {_fold_text(fold, t) for t in plain}
        return self._folded[key]


def _fold_text(fold: Fold, text: str) -> str:
    try:
        return fold(text)
    except Exception:  # a fold that cannot read this text folds nothing
        return text


def result_values(text: str) -> frozenset[str]:
    """The canonical spellings of every value a result's text holds (each scalar of its JSON,
    at any depth, and the text itself): what a call could have copied from it."""
    return _result_leaves(text)


@functools.lru_cache(maxsize=4096)
def _result_leaves(text: str) -> frozenset[str]:
    try:
        decoded = json.loads(text)
    except ValueError:
        return frozenset({text})
    try:
        return frozenset({canonical_text(v) for v in scalar_leaves(decoded)} | {text})
    except TypeError:
        return frozenset({text})


def check_provenance(
    tool: str,
    arguments: Mapping[str, Any],
    sources: Mapping[str, ArgSource],
    inputs: Mapping[str, Any] | InputValues,
    visible_results: Sequence[str] | None,
    *,
    marker: str,
    withheld: Sequence[str] = (),
    effect: Effect | None = None,
) -> list[Violation]:
    """Every argument of a call to ``tool`` whose value does not come from its declared
    source (see the module docstring). ``visible_results``: the texts of the results the
    call's turn could see (``None``: the turn is not known, as for calls certified outside a
    run; result-sourced arguments are then not checked); ``withheld``: the texts of results
    withheld from it, where known (with eager dispatch a withheld call may already have its
    result). A tracker that checks many calls of one tool compiles a :class:`ProvenancePlan`
    once instead."""
    plan = ProvenancePlan(tool, sources, inputs, effect)
    return plan.check(arguments, visible_results, marker=marker, withheld=withheld)


class ProvenancePlan:
    """:func:`check_provenance` for the calls of one tool under one set of declared sources,
    with what does not depend on the call worked out once: the sources in argument order,
    and for each input-sourced argument its fold and the spellings it allows."""

    def __init__(
        self,
        tool: str,
        sources: Mapping[str, ArgSource],
        inputs: Mapping[str, Any] | InputValues,
        effect: Effect | None = None,
    ) -> None:
        index = inputs if isinstance(inputs, InputValues) else InputValues(inputs)
        self.tool = tool
        checks: list[tuple[str, ArgSource, Fold | None, set[str] | None]] = []
        for name, source in sorted(sources.items()):
            if source.kind == "input":
                fold = effect.fold_for(name) if effect is not None else None
                checks.append((name, source, fold, index.allowed(source.ref, fold)))
            elif source.kind == "result":
                checks.append((name, source, None, None))
        self._checks = tuple(checks)

    def check(
        self,
        arguments: Mapping[str, Any],
        visible_results: Sequence[str] | None,
        *,
        marker: str,
        withheld: Sequence[str] = (),
    ) -> list[Violation]:
        """The violations of one call's ``arguments`` (as :func:`check_provenance`)."""
        tool = self.tool
        shown = visible_results or ()
        out = quotes_withheld(
            arguments, marker, [w for w in withheld if w not in shown] if withheld else ()
        )
        flagged = {v.argument for v in out} if out else ()
        leaves: set[str] | None = None
        for name, source, fold, allowed in self._checks:
            if name in flagged or name not in arguments:
                continue
            value = arguments[name]
            if allowed is not None:  # an input source
                if (value if fold is None and type(value) is str else _spell(value, fold)) in (
                    allowed
                ) or (
                    isinstance(value, list | tuple)
                    and all(_spell(v, fold) in allowed for v in value)
                ):
                    continue
                where = f"input {source.ref!r}" if source.ref else "the task inputs"
                out.append(
                    Violation(
                        name,
                        "not_an_input",
                        f"'{tool}' argument {name!r} = {_short(value)} is not one of {where}'s "
                        "values, where the manifest sources it",
                    )
                )
            elif visible_results is not None:  # a result source, and the turn is known
                if leaves is None:
                    leaves = set().union(*(_result_leaves(r) for r in visible_results))
                wanted = value if isinstance(value, list | tuple) else [value]
                scan = _Scan(visible_results)
                if all(_appears(v, scan, leaves) for v in wanted):
                    continue
                out.append(
                    Violation(
                        name,
                        "not_in_visible_results",
                        f"'{tool}' argument {name!r} = {_short(value)} appears in no result "
                        f"its turn could see (the manifest sources it from result:{source.ref})"
                        + ("; too much text to search, so not proven" if scan.spent else ""),
                    )
                )
        return out


def _spell(value: Any, fold: Fold | None) -> str:
    """How ``value`` is compared with the inputs: canonical, folded when it is a string."""
    text = value if type(value) is str else canonical_text(value)
    return _fold_text(fold, text) if fold is not None and isinstance(value, str) else text


#: The most result text one call's provenance check searches (characters, over all the
#: values it searches for): past it a value not found among the results' leaves is not
#: proven (bounded work per call; 1,000 keys against 60 results of 16,000 characters took
#: half a second).
MAX_SCAN = 1 << 22


class _Scan:
    """The visible results one check searches, and what is left of its budget."""

    __slots__ = ("left", "results", "size", "spent")

    def __init__(self, results: Sequence[str]) -> None:
        self.results = results
        self.size = sum(map(len, results))
        self.left = MAX_SCAN
        self.spent = False

    def finds(self, value: str) -> bool:
        if self.size > self.left:
            self.spent = True
            return False
        self.left -= self.size
        return any(value in r for r in self.results)


def _appears(value: Any, scan: _Scan, leaves: set[str]) -> bool:
    if isinstance(value, str):
        return value == "" or value in leaves or scan.finds(value)
    return canonical_text(value) in leaves


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "…"
