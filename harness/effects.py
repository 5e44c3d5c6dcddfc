"""Effects: what a tool call does to the world, and the resources it reads and writes.

An :class:`Effect` is a tool's declaration (``read_only``, ``idempotent``, ``destructive``,
``open_world``) plus two *target specs*, ``write_targets`` and ``read_targets``: how to name,
from a call's arguments, the resources it writes and reads. The certifier (D1) trusts them;
``harness certify`` checks them. This module turns a call's arguments into its
:class:`Footprint` — the canonical read and write target sets — and nothing else; how two
footprints conflict lives in :mod:`harness.conflicts`.

**Target specs.** A template such as ``"doc:{key}/status"``, several templates, or a function
``arguments -> targets``. A template's fields are argument names only: no positional
(``{}``), attribute, index, conversion (``!r``) or format spec (``:03d``) — those are
rejected when the effect is declared, because a formatted spelling is not a canonical name.
A list (or tuple, set) argument expands to one target per element; several list arguments
expand to their product.

**Canonical targets.** Targets are filled from the *validated* arguments, the values the
tool function receives (after JSON Schema validation and the tool's pydantic model), each
written in one canonical form per type (:func:`canonical_text`): numbers equal in Python are
one spelling (``1``, ``1.0``, ``True`` are all ``1``), enums their value, UUIDs, dates and
paths their standard string, mappings sorted JSON. A tool whose store *folds* names (case,
Unicode normalisation, whitespace, path forms) declares it with ``canonical=`` (a
:class:`Fold`, for all string arguments or per argument), and the fold is applied to the
argument before the template is filled. Two spellings that the store treats as one
resource must have one canonical target: over-approximating (folding more than the store
does) only costs parallelism, under-folding is a false declaration the certification kit
looks for.

**Unknown is everything.** ``write_targets=None`` on a tool that is not read-only, and
``read_targets=None`` on any tool, mean *unknown*: that side of the footprint is ``None``
(every resource). A writer that declares no read targets therefore conflicts with every
other call in its window that writes anything (see :mod:`harness.conflicts`); declare
``read_targets=()`` for a blind write that reads nothing. A target set larger than
:data:`MAX_TARGETS` (a product of long list arguments) is also treated as unknown, so the
certifier never spends more than a bounded time on one call.

**Total.** :meth:`Effect.footprint` never raises: a missing argument makes its side unknown,
and anything else that goes wrong (a target function that raises on arguments it did not
expect, a value that cannot be written canonically) gives a footprint with an ``error``,
which the certifier turns into "not certified" — the call then runs on its own, exactly as
the serial arm runs it, and gets the serial arm's result.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import fractions
import functools
import itertools
import json
import math
import numbers
import posixpath
import string
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from harness.errors import ToolsetError

__all__ = (
    "MAX_TARGETS",
    "Effect",
    "Fold",
    "Footprint",
    "TargetSpec",
    "WriteTargets",
    "canonical_text",
    "template_fields",
)

#: How to name the resources a call touches: a template such as ``"doc:{key}"``, several
#: templates, or a function ``arguments -> targets``.
TargetSpec = str | Sequence[str] | Callable[[Mapping[str, Any]], Iterable[str]]
#: The old name of :data:`TargetSpec` (kept: harness.toolsets import it).
WriteTargets = TargetSpec

#: Above this many targets on one side (the product of a call's list arguments), the side is
#: treated as unknown (every resource): the certifier's cost per call stays bounded.
MAX_TARGETS = 1024


# -- canonical values ------------------------------------------------------------------------


def canonical_text(value: Any) -> str:
    """One spelling per value, so values a store keys as equal name one resource.

    Numbers equal in Python are one spelling (``1 == 1.0 == True`` all give ``"1"``;
    ``Decimal("1.50")`` and ``1.5`` give ``"1.5"``); strings are themselves; ``None`` is
    ``"null"``; enums their value; UUIDs the lower-case hyphenated form; dates ISO 8601;
    paths their POSIX string; mappings, sequences and pydantic models compact sorted JSON of
    their canonical parts. Raises ``TypeError`` for a value with no canonical form (the
    caller turns that into "not certified")."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, enum.Enum):
        return canonical_text(value.value)
    if isinstance(value, numbers.Number):
        return _canonical_number(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return _canonical_number(value.total_seconds())
    if isinstance(value, PurePath):
        return value.as_posix()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return json.dumps(_canonical_json(value), sort_keys=True, separators=(",", ":"))


def _canonical_number(value: Any) -> str:
    exact: fractions.Fraction
    if isinstance(value, Decimal):
        if not value.is_finite():  # Decimal("Infinity") == float("inf")
            return "nan" if value.is_nan() else repr(float(value))
        exact = fractions.Fraction(value)
    elif isinstance(value, numbers.Rational):
        exact = fractions.Fraction(int(value.numerator), int(value.denominator))
    elif isinstance(value, numbers.Real):
        real = float(value)
        if not math.isfinite(real):
            return repr(real)
        exact = fractions.Fraction(real)
    else:  # complex: equal to a real only when its imaginary part is zero
        c = complex(value)
        return _canonical_number(c.real) if c.imag == 0 else repr(c)
    if exact.denominator == 1:
        return str(exact.numerator)
    as_float = float(exact)
    if fractions.Fraction(as_float) == exact:
        return repr(as_float)
    return f"{exact.numerator}/{exact.denominator}"


def _canonical_json(value: Any) -> Any:
    """The JSON structure of ``value`` with canonical leaves (strings, for equality)."""
    if isinstance(value, Mapping):
        return {canonical_text(k): _canonical_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical_json(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_canonical_json(v) for v in value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _canonical_json(dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _canonical_json(dataclasses.asdict(value))
    if isinstance(value, str | int | float | bool | Decimal | enum.Enum | uuid.UUID) or (
        value is None
        or isinstance(value, datetime.date | datetime.time | datetime.timedelta | PurePath)
    ):
        return canonical_text(value)
    raise TypeError(f"{type(value).__name__} has no canonical form")


# -- folds: names a store treats as equal ----------------------------------------------------


def _case(text: str) -> str:
    # upper() first: a store that folds with upper() merges 'ı' and 'i' ('I'), casefold() alone
    # does not; upper().casefold() merges everything lower(), upper() or casefold() merges.
    return text.upper().casefold()


def _whitespace(text: str) -> str:
    return " ".join(text.split())


def _path(text: str) -> str:
    if not text:
        return text
    normal = posixpath.normpath(text)
    return "/" if normal == "//" else normal


FOLD_STEPS: Mapping[str, Callable[[str], str]] = {
    "case": _case,
    "nfc": lambda text: unicodedata.normalize("NFC", text),
    "nfkc": lambda text: unicodedata.normalize("NFKC", text),
    "strip": str.strip,
    "whitespace": _whitespace,
    "path": _path,
}


@dataclass(frozen=True)
class Fold:
    """How a tool's store folds names: steps applied in order to a string argument (or to
    each string element of a list argument) before targets are filled.

    ``case`` letters without case (``str.upper`` then ``str.casefold``, so a store that
    folds with ``lower``, ``upper`` or ``casefold`` is covered); ``nfc`` / ``nfkc`` Unicode
    normalisation; ``strip`` leading/trailing whitespace; ``whitespace`` strip and collapse
    runs of whitespace to one space; ``path`` POSIX path normalisation (``a//b/./c/`` ->
    ``a/b/c``, ``a/../b`` -> ``b``). ``custom`` is a function for any other folding; two folds
    are the same fold when their steps and custom function are equal.

    Contract (what the certification kit verifies): for every two spellings ``x``, ``y`` of an
    argument that the tool's store treats as one resource, ``fold(x) == fold(y)``.
    """

    steps: tuple[str, ...] = ()
    custom: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        unknown = [s for s in self.steps if s not in FOLD_STEPS]
        if unknown:
            raise ToolsetError(
                f"Unknown fold step(s) {unknown}; use {', '.join(FOLD_STEPS)} or Fold(custom=fn)."
            )

    @classmethod
    def of(cls, spec: Fold | str | Sequence[str]) -> Fold:
        """``"case"``, ``"case+nfkc"``, ``["case", "nfkc"]`` or a :class:`Fold`."""
        if isinstance(spec, Fold):
            return spec
        if isinstance(spec, str):
            return cls(tuple(s.strip() for s in spec.split("+") if s.strip()))
        if callable(spec):
            return cls(custom=spec)
        return cls(tuple(spec))

    def __call__(self, text: str) -> str:
        for step in self.steps:
            text = FOLD_STEPS[step](text)
        if self.custom is not None:
            text = self.custom(text)
            if not isinstance(text, str):
                raise TypeError(f"the custom fold returned {type(text).__name__}, not str")
        return text

    def __str__(self) -> str:
        parts = list(self.steps)
        if self.custom is not None:
            parts.append(getattr(self.custom, "__name__", "custom"))
        return "+".join(parts) or "none"

    def apply(self, value: Any) -> Any:
        """Fold a string, or every string of a list/tuple/set; other values unchanged."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list | tuple | set | frozenset):
            return type(value)(self.apply(v) for v in value)
        return value


#: What ``canonical=`` accepts: one fold for every string argument, or one per argument.
CanonicalSpec = Fold | str | Sequence[str] | Mapping[str, Fold | str | Sequence[str]]


def _folds(spec: CanonicalSpec | None) -> Fold | dict[str, Fold] | None:
    if spec is None:
        return None
    if isinstance(spec, Mapping):
        return {str(name): Fold.of(f) for name, f in spec.items()}
    return Fold.of(spec)


# -- templates -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def template_fields(template: str) -> tuple[str, ...]:
    """The argument names a target template uses, in order. Raises :class:`ToolsetError`
    for anything but plain ``{name}`` fields (see the module docstring)."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ToolsetError(f"Target template {template!r} is malformed: {exc}.") from None
    names = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            raise ToolsetError(
                f"Target template {template!r} has the field {{{name}}}: a field must name an "
                "argument, e.g. 'doc:{key}' (no positional, attribute or index fields)."
            )
        if spec or conversion:
            shown = (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise ToolsetError(
                f"Target template {template!r} formats {{{name}{shown}}}: targets are canonical "
                f"names, so write '{{{name}}}' (the certifier spells each value one way)."
            )
        names.append(name)
    return tuple(names)


def _check_spec(spec: TargetSpec | None, side: str) -> TargetSpec | None:
    if spec is None or callable(spec):
        return spec
    if isinstance(spec, str):
        template_fields(spec)
        return spec
    if isinstance(spec, Sequence) and all(isinstance(t, str) for t in spec):
        for template in spec:
            template_fields(template)
        return tuple(spec)
    raise ToolsetError(
        f"{side} must be a template string, a list of templates or a function of the "
        f"arguments; got {type(spec).__name__}."
    )


@dataclass(frozen=True, slots=True)
class _Template:
    """A target template parsed once (when the effect is declared): its literal parts and
    fields, so filling it per call is a join, not a ``str.format`` parse."""

    literals: tuple[str, ...]  # one more than fields: the text around each field
    fields: tuple[str, ...]
    unique: tuple[str, ...]  # the fields, each once, in first-use order
    single: str | None = None  # the field of a template with exactly one (the common case)

    @classmethod
    def parse(cls, template: str) -> _Template:
        template_fields(template)  # rejects what a target template may not hold
        literals: list[str] = []
        fields: list[str] = []
        pending = ""
        for literal, name, _, _ in string.Formatter().parse(template):
            pending += literal  # '{{' / '}}' arrive here as single braces
            if name is not None:
                literals.append(pending)
                fields.append(name)
                pending = ""
        literals.append(pending)
        single = fields[0] if len(fields) == 1 else None
        return cls(tuple(literals), tuple(fields), tuple(dict.fromkeys(fields)), single)

    def fill(self, texts: Mapping[str, str]) -> str:
        literals = self.literals
        out = [literals[0]]
        for i, name in enumerate(self.fields, 1):
            out.append(texts[name])
            out.append(literals[i])
        return "".join(out)

    def expand(self, arguments: Mapping[str, Any]) -> list[str]:
        """``"doc:{key}"`` with ``key="a"`` -> ``["doc:a"]``; a list argument expands to one
        target per element (a product for several); a missing argument is unknown. Values
        are inserted verbatim (braces in a value are not re-read)."""
        name = self.single
        if name is not None:  # one field: the same steps as below, without the mapping
            if name not in arguments:
                raise _Unknown(f"argument {name!r} missing")
            value = arguments[name]
            if type(value) is str:
                return [self.literals[0] + value + self.literals[1]]
            if isinstance(value, list | tuple | set | frozenset):
                return self._product(arguments)
            return [self.literals[0] + canonical_text(value) + self.literals[1]]
        texts: dict[str, str] = {}
        for name in self.unique:  # the common case: scalar arguments, one target
            if name not in arguments:
                raise _Unknown(f"argument {name!r} missing")
            value = arguments[name]
            if isinstance(value, list | tuple | set | frozenset):
                return self._product(arguments)
            texts[name] = value if type(value) is str else canonical_text(value)
        return [self.fill(texts)]

    def _product(self, arguments: Mapping[str, Any]) -> list[str]:
        choices: list[list[str]] = []
        size = 1
        for name in self.unique:
            if name not in arguments:
                raise _Unknown(f"argument {name!r} missing")
            value = arguments[name]
            if isinstance(value, list | tuple | set | frozenset):
                texts = list(dict.fromkeys(canonical_text(v) for v in value))
            else:
                texts = [canonical_text(value)]
            size *= len(texts)
            if size > MAX_TARGETS:
                raise _Unknown(f"over {MAX_TARGETS} targets (a product of list arguments)")
            choices.append(texts)
        return [
            self.fill(dict(zip(self.unique, combo, strict=True)))
            for combo in itertools.product(*choices)
        ]


_Compiled = tuple[_Template, ...] | Callable[[Mapping[str, Any]], Iterable[str]] | None


def _compile_spec(spec: TargetSpec | None) -> _Compiled:
    if spec is None or callable(spec):
        return spec
    return tuple(_Template.parse(t) for t in ([spec] if isinstance(spec, str) else spec))


# -- the footprint ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Footprint:
    """The resources one call reads and writes, canonical.

    ``None`` on a side means *unknown* (every resource); ``unknown`` says why (for messages).
    ``error`` is set when the targets could not be resolved at all: the call is not
    certifiable. The empty target ``""`` is never stored: a side that would hold it is
    unknown (it names the root of every hierarchy).
    """

    writes: frozenset[str] | None
    reads: frozenset[str] | None
    unknown: str = ""
    error: str | None = None

    @classmethod
    def failed(cls, error: str) -> Footprint:
        return cls(None, None, "", error)

    @property
    def writes_anything(self) -> bool:
        return self.writes is None or bool(self.writes)

    @property
    def reads_anything(self) -> bool:
        return self.reads is None or bool(self.reads)


class _Unknown(Exception):
    """A side of the footprint is unknown (missing argument, over the expansion bound)."""


@dataclass(frozen=True)
class Effect:
    """What calling a tool does to the world, as far as concurrency is concerned.

    ``read_only``: changes nothing (implies idempotent and not destructive).
    ``idempotent``: calling it twice with the same arguments leaves the same state as once.
    ``destructive``: may delete or overwrite data it did not create (MCP's destructiveHint).
    ``open_world``: talks to something outside the harness's process (cannot be fingerprinted).
    ``write_targets``: the resources a call writes; ``None`` on a tool that is not read-only
    means *unknown* (every resource).
    ``read_targets``: the resources a call reads (its result and its writes may depend on
    them); ``None`` means unknown (every resource) — also for a writer: declare
    ``read_targets=()`` on a blind write that reads nothing.
    ``canonical``: how the tool's store folds names (a :class:`Fold` for every string
    argument, or a mapping argument -> fold); see the module docstring.
    ``annotated``: whether anybody declared this effect (an unannotated tool is the worst case).
    ``accepts_idempotency_key``: the tool takes an ``idempotency_key`` keyword (never shown to
    the model) and applies a write at most once per key, so a call whose outcome is in doubt
    may be retried with the same key (:mod:`harness.journal`). ``@tool`` sets it when the
    function has an ``idempotency_key`` parameter.
    ``speculable``: the toolset opts this idempotent, keyed tool in to *certified speculation*
    (arm F+spec, :mod:`harness.speculation`): a call whose arguments the manifest makes known
    may start before the model emits it, and may have run even if the model never emits it.
    Read-only tools are speculable without it; ``harness certify`` checks the claim (a call
    run twice, and run early, gives the same results and state).
    """

    read_only: bool = False
    idempotent: bool = False
    destructive: bool = True
    open_world: bool = True
    write_targets: TargetSpec | None = None
    read_targets: TargetSpec | None = None
    annotated: bool = False
    canonical: Fold | Mapping[str, Fold] | None = None
    accepts_idempotency_key: bool = False
    speculable: bool = False
    # The target specs compiled once (templates parsed), for footprint().
    _writes: _Compiled = field(default=None, init=False, repr=False, compare=False)
    _reads: _Compiled = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "write_targets", _check_spec(self.write_targets, "write_targets"))
        object.__setattr__(self, "read_targets", _check_spec(self.read_targets, "read_targets"))
        object.__setattr__(self, "canonical", _folds(self.canonical))
        object.__setattr__(self, "_writes", _compile_spec(self.write_targets))
        object.__setattr__(self, "_reads", _compile_spec(self.read_targets))

    @classmethod
    def worst_case(cls) -> Effect:
        """The effect assumed for an unannotated tool."""
        return cls()

    @classmethod
    def declare(
        cls,
        *,
        read_only: bool = False,
        idempotent: bool | None = None,
        destructive: bool | None = None,
        open_world: bool = False,
        write_targets: TargetSpec | None = None,
        read_targets: TargetSpec | None = None,
        canonical: CanonicalSpec | None = None,
        speculable: bool = False,
    ) -> Effect:
        """An explicit annotation. ``read_only`` implies idempotent and not destructive."""
        if read_only and write_targets is not None:
            raise ToolsetError(
                "A read-only tool cannot declare write_targets; drop read_only=True or the targets."
            )
        return cls(
            read_only=read_only,
            idempotent=read_only if idempotent is None else (idempotent or read_only),
            destructive=(not read_only) if destructive is None else destructive and not read_only,
            open_world=open_world,
            write_targets=write_targets,
            read_targets=read_targets,
            annotated=True,
            canonical=_folds(canonical),
            speculable=speculable,
        )

    @classmethod
    def from_mcp(cls, annotations: Mapping[str, Any] | None) -> Effect:
        """Map MCP tool annotations (``readOnlyHint``, ``idempotentHint``, ``destructiveHint``,
        ``openWorldHint``) onto an effect, with MCP's defaults for missing hints. Harness
        extension keys ``writeTargets``, ``readTargets`` (template or list of templates) and
        ``canonical`` (fold steps, e.g. ``"case+nfkc"``, or ``{argument: steps}``),
        ``acceptsIdempotencyKey`` and ``speculable`` are honoured too. Keys may come in either spelling: the
        protocol's camelCase or the snake_case of the SDK's ``model_dump()``."""
        if not annotations:
            return cls.worst_case()
        # The MCP SDK's models dump snake_case (``read_only_hint``); the wire says camelCase.
        annotations = {_camel(key): value for key, value in annotations.items()}
        read_only = bool(annotations.get("readOnlyHint", False))
        targets = annotations.get("writeTargets")
        return cls(
            read_only=read_only,
            idempotent=read_only or bool(annotations.get("idempotentHint", False)),
            destructive=not read_only and bool(annotations.get("destructiveHint", True)),
            open_world=bool(annotations.get("openWorldHint", True)),
            write_targets=None if read_only else targets,
            read_targets=annotations.get("readTargets"),
            annotated=True,
            canonical=_folds(annotations.get("canonical")),
            accepts_idempotency_key=bool(annotations.get("acceptsIdempotencyKey", False)),
            speculable=bool(annotations.get("speculable", False)),
        )

    # -- resolution --------------------------------------------------------------------------

    def fold_for(self, argument: str) -> Fold | None:
        """The fold declared for ``argument`` (``None`` when its spelling is its name)."""
        if self.canonical is None or isinstance(self.canonical, Fold):
            return self.canonical
        return self.canonical.get(argument)

    def name_slots(self) -> Iterator[tuple[str, str, Fold | None]]:
        """Each place a template puts an argument into a name: ``(the template text before
        it, with earlier fields as '{}', the argument, its fold)``. ``"doc:{key}/{field}"``
        gives ``("doc:", "key", …)`` and ``("doc:{}/", "field", …)``. Tools whose slots
        coincide name the same store's resources, so they must fold them alike."""
        for spec in (self.write_targets, self.read_targets):
            if spec is None or callable(spec):
                continue
            for template in [spec] if isinstance(spec, str) else spec:
                before = ""
                for literal, name, _, _ in string.Formatter().parse(template):
                    before += literal.replace("{", "{{").replace("}", "}}")
                    if name is not None:
                        yield before, name, self.fold_for(name)
                        before += "{}"

    def footprint(self, arguments: Mapping[str, Any]) -> Footprint:
        """The canonical targets of a call with these (validated) arguments. Never raises."""
        try:
            folded = arguments if self.canonical is None else self._folded(arguments)
            writes, why_w = (
                (frozenset(), "") if self.read_only else self._side(self._writes, folded, "writes")
            )
            reads, why_r = self._side(self._reads, folded, "reads")
        except Exception as exc:  # a declaration's bug is "not certified", never a crash
            return Footprint.failed(f"{type(exc).__name__}: {exc}")
        if not (why_w or why_r):
            return Footprint(writes, reads)
        return Footprint(writes, reads, "; ".join(w for w in (why_w, why_r) if w))

    def targets(self, arguments: Mapping[str, Any]) -> frozenset[str] | None:
        """The canonical resources a call with these arguments writes: empty for a read-only
        tool, ``None`` when unknown (every resource) or unresolvable."""
        return self.footprint(arguments).writes

    def reads(self, arguments: Mapping[str, Any]) -> frozenset[str] | None:
        """The canonical resources a call with these arguments reads; ``None`` when unknown
        (undeclared, even on a writer) or unresolvable."""
        return self.footprint(arguments).reads

    def _folded(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        if self.canonical is None:
            return arguments
        return {name: self._fold(name, value) for name, value in arguments.items()}

    def _fold(self, name: str, value: Any) -> Any:
        fold = self.fold_for(name)
        return value if fold is None else fold.apply(value)

    def _side(
        self, spec: _Compiled, arguments: Mapping[str, Any], side: str
    ) -> tuple[frozenset[str] | None, str]:
        if spec is None:
            return None, f"{side} undeclared"
        try:
            if callable(spec):
                out = frozenset(_from_function(spec, arguments))
            elif len(spec) == 1:  # the common case: one template
                out = frozenset(spec[0].expand(arguments))
            else:
                targets: set[str] = set()
                for template in spec:
                    targets.update(template.expand(arguments))
                    if len(targets) > MAX_TARGETS:
                        raise _Unknown(f"{side} over {MAX_TARGETS} targets")
                out = frozenset(targets)
        except _Unknown as unknown:
            return None, str(unknown)
        if "" in out:
            return None, f"{side} name the empty target (the root of every resource)"
        return out, ""


def _from_function(
    fn: Callable[[Mapping[str, Any]], Iterable[str]], arguments: Mapping[str, Any]
) -> set[str]:
    produced = fn(arguments)
    if isinstance(produced, str | bytes) or not isinstance(produced, Iterable):
        raise TypeError(f"the target function returned {type(produced).__name__}, not a list")
    out = {canonical_text(t) for t in itertools.islice(produced, MAX_TARGETS + 1)}
    if len(out) > MAX_TARGETS:
        raise _Unknown(f"over {MAX_TARGETS} targets")
    return out


def _camel(key: str) -> str:
    """``read_only_hint`` -> ``readOnlyHint``; a camelCase key is returned unchanged."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
