"""Effects: what a tool call does to the world, and the resources it reads and writes.

An :class:`Effect` is a tool's declaration (``read_only``, ``idempotent``, ``destructive``,
``open_world``) plus two *target specs*, ``write_targets`` and ``read_targets``: how to name,
from a call's arguments, the resources it writes and reads. The certifier (D1) trusts them;
``harness certify`` checks them. This module turns a call's arguments into its
:class:`Footprint` — the canonical read and write target sets — and nothing else; how two
footprints conflict lives in :mod:`harness.certify.conflicts`.

**Target specs.** A template such as ``"doc:{key}/status"``, several templates, or a function
``arguments -> targets``. A template's fields are argument names only: no positional
(``{}``), attribute, index, conversion (``!r``) or format spec (``:03d``) — those are
rejected when the effect is declared. A list (or tuple, set) argument names one record per
element; several list arguments expand to their product.

**Distinct only by proof.** A target is a *namespace* (the template's text up to its first
``:`` before any field, lower case) and a tuple of *components*: the rest of the template
and its fields' values, split at ``/`` and ``:`` the way a path join splits them (empty and
``.`` components dropped; ``..``, or a value that starts with ``/``, makes the target its
namespace). Each component is a **proof key** (:func:`harness.tools.identity.proof_key`): a plain
ASCII name or a number, with every spelling a store may merge merged; a component outside
that closed set makes the target its whole namespace, so it overlaps everything there.
Values are read from the *validated* arguments (what the tool function receives) by
:func:`harness.tools.identity.value_text`: datetimes, booleans, ``None`` and containers are
outside the set. A declared fold (``canonical=``) runs on whole values first; a store's own
key (``identity=``, per argument, on the whole value unless declared with
:func:`~harness.tools.identity.each`) fills whole components exactly. The target is written
``namespace + "/".join(components)``: components hold no separator, so the text is never
parsed again, and a prefix of components is an ancestor (see :mod:`harness.certify.conflicts`).
Over-approximating overlap costs parallelism, never correctness.

**Wildcards and bounds.** A template with a glob character (``*``, ``?``, ``[``) names
every resource from the glob on: ``doc:*`` is the namespace ``doc:``, ``doc:{key}/*`` is
``doc:<key>/``. A body longer than 2,048 characters or of more than
:data:`MAX_TARGET_DEPTH` components is its namespace; a target longer than
:data:`MAX_TARGET_LENGTH` characters is cut back to its ancestor within the bound.

**Unknown is everything.** ``write_targets=None`` on a tool that is not read-only, and
``read_targets=None`` on any tool, mean *unknown*: that side of the footprint is ``None``
(every resource). A writer that declares no read targets therefore conflicts with every
other call in its window that writes anything (see :mod:`harness.certify.conflicts`); declare
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
import functools
import itertools
import json
import numbers
import re
import string
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from harness._bounded_json import MAX_DEPTH, nesting
from harness.errors import ToolsetError
from harness.tools.identity import (
    FOLD_STEPS,
    MAX_KEYED_TEXT,
    Each,
    Fold,
    exact_key,
    identity_text,
    number_text,
    proof_key,
    value_text,
)

__all__ = (
    "FOLD_STEPS",
    "GLOB_CHARS",
    "MAX_TARGETS",
    "MAX_TARGET_DEPTH",
    "MAX_TARGET_LENGTH",
    "Effect",
    "Fold",
    "Footprint",
    "TargetSpec",
    "WriteTargets",
    "bound_target",
    "canonical_text",
    "literal_target",
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
        return number_text(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return number_text(value.total_seconds())
    if isinstance(value, PurePath):
        return value.as_posix()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    if nesting(value) > MAX_DEPTH:  # (arguments are parsed to this depth: nothing deeper)
        raise TypeError(f"a value nested deeper than {MAX_DEPTH} levels has no canonical form")
    return json.dumps(_canonical_json(value), sort_keys=True, separators=(",", ":"))


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


#: Characters that make a template a wildcard: ``doc:*`` names every ``doc:`` resource.
GLOB_CHARS = "*?["
#: A target longer than this (characters), or nested deeper than :data:`MAX_TARGET_DEPTH`
#: separators, is cut back to its ancestor within the bound (an ancestor overlaps everything
#: the target overlaps: over-approximating costs parallelism, never correctness).
MAX_TARGET_LENGTH = 512
MAX_TARGET_DEPTH = 64
_SEPARATOR_CHARS = "/:."


def _cut_to_separator(text: str) -> str:
    """The longest prefix of ``text`` that ends with a separator ("" when it has none): the
    namespace a target lies in."""
    cut = max(text.rfind(c) for c in _SEPARATOR_CHARS)
    return text[: cut + 1]


def bound_target(text: str) -> str:
    """``text``, or its ancestor within :data:`MAX_TARGET_LENGTH` characters and
    :data:`MAX_TARGET_DEPTH` separators (see there)."""
    if len(text) > MAX_TARGET_LENGTH:
        text = _cut_to_separator(text[: MAX_TARGET_LENGTH + 1])
        if len(text) > MAX_TARGET_LENGTH:  # it ended with a separator at the bound
            text = _cut_to_separator(text[:-1])
    seps = 0
    for i, c in enumerate(text):
        if c in _SEPARATOR_CHARS:
            seps += 1
            if seps > MAX_TARGET_DEPTH:
                return text[:i]
    return text


#: Characters that split a target's body into components: ``doc:{key}/status`` has the
#: components ``key`` and ``status``; ``cal:{user}:{day}`` has ``user`` and ``day``.
_COMPONENT_SEPARATORS = re.compile("[/:]")
#: The text between them.
_NAMES = re.compile("[^/:]+")


def _fold_names(fold: Callable[[str], str], text: str) -> str:
    """``text`` with each name between separators folded on its own."""
    return _NAMES.sub(lambda match: fold(match.group()), text)


#: The longest body text a target is built from (characters); a longer one is unknown.
_MAX_BODY = 4 * MAX_TARGET_LENGTH
#: The most text one template's targets may take to build, over every target of a product
#: of list arguments (characters); more is unknown, so one call costs bounded work.
_MAX_EXPANSION = 1 << 15


def _text_size(value: _Value) -> int:
    if value.exact is not None:
        return sum(len(c) + 1 for c in value.exact)
    return len(value.text or "")


class _Cut(Exception):
    """A component cannot be proven distinct: the target is its whole namespace."""


@dataclass(frozen=True, slots=True)
class _Value:
    """What fills one field: the text a store reads (structured into components when the
    target is filled), or the components the store's own ``identity=`` gave (exact, each
    one component); neither when the value is outside the proof set (unknown)."""

    text: str | None = None
    exact: tuple[str, ...] | None = None
    #: The text is how a *number store* reads the value (an integral float's digits), not how
    #: every store spells it inside a longer name: provable only alone in its component.
    alone_only: bool = False


_UNKNOWN_VALUE = _Value()


def _component(segment: str) -> str | None:
    """One component of a body: skipped (``None``) when empty or ``.``, its proof key, or
    :class:`_Cut` when it is ``..`` or cannot be proven distinct."""
    if segment in ("", "."):
        return None
    if segment == "..":  # (a parent: the path may leave everything before it)
        raise _Cut
    key = proof_key(segment)
    if key is None:
        raise _Cut
    return key


@dataclass(frozen=True, slots=True)
class _Template:
    """A target template parsed once (when the effect is declared).

    A target is a **namespace** (the template's text up to its first ``:``, when that comes
    before any field: ``doc:``) and a tuple of **components**. The body after the namespace
    is the literal text and the fields' values in order; it splits into components at ``/``
    and ``:`` only, the way a path join splits it (an empty or ``.`` component is dropped,
    ``..`` or an absolute value cuts the target to its namespace), and each component is a
    proof key (:func:`harness.tools.identity.proof_key`) or the target is cut to its namespace. A
    field whose store key is declared (``identity=``) fills whole components of its own. The
    target is written ``namespace + "/".join(components)``: components never hold a ``/`` or
    ``:``, so the text is never parsed again, and a prefix of components is an ancestor."""

    literals: tuple[str, ...]  # one more than fields: the body text around each field
    fields: tuple[str, ...]
    unique: tuple[str, ...]  # the fields, each once, in first-use order
    namespace: str  # "doc:" (lower case), or "" for a template without one
    glob: bool  # the template was cut at a glob character
    # The common case, one field alone in its component: the encoded text before and after
    # it ("doc:", "/status"); None otherwise, or when the literal text cannot be proven.
    single: tuple[str, str, str] | None = None

    @classmethod
    def parse(cls, template: str) -> _Template:
        template_fields(template)  # rejects what a target template may not hold
        literals: list[str] = []
        fields: list[str] = []
        pending = ""
        glob = False
        for literal, name, _, _ in string.Formatter().parse(template):
            stars = [i for i in (literal.find(c) for c in GLOB_CHARS) if i >= 0]
            if stars:  # a wildcard: everything from the glob on is any name
                pending += literal[: min(stars)]
                glob = True
                break
            pending += literal  # '{{' / '}}' arrive here as single braces
            if name is not None:
                literals.append(pending)
                fields.append(name)
                pending = ""
        literals.append(pending)
        colon = literals[0].find(":")
        namespace = ""
        if colon >= 0:
            key = namespace_key(literals[0][:colon])
            if key is None:
                raise ToolsetError(
                    f"target template {template!r}: the namespace "
                    f"{literals[0][:colon]!r} is not a plain name. Write it in ASCII "
                    "letters, digits, '.', '_' and '-' (parts may be joined by '/')."
                )
            namespace = key
        if fields and colon < 0 and any(":" in literal for literal in literals[1:]):
            raise ToolsetError(
                f"target template {template!r}: an argument comes before the first ':', so "
                "the namespace is data ('{app}/cfg:{key}' with app='web' is the key "
                "'web/cfg:k' that 'web/cfg:{key}' names) and the harness cannot prove which "
                "namespace a call touches. Put the namespace first as literal text "
                "('doc:{key}'), or declare a target function that returns whole targets "
                "(lambda args: [f\"{args['ns']}:{args['key']}\"])."
            )
        literals[0] = literals[0][colon + 1 :]
        made = cls(tuple(literals), tuple(fields), tuple(dict.fromkeys(fields)), namespace, glob)
        if len(fields) == 1 and not glob:
            before, after = literals
            alone = (not before or before[-1] in "/:") and (not after or after[0] in "/:")
            if alone:
                try:
                    head = made._components([before])
                    tail = made._components([after])
                except _Cut:
                    return made
                prefix = namespace + "".join(c + "/" for c in head)
                suffix = "".join("/" + c for c in tail)
                object.__setattr__(made, "single", (fields[0], prefix, suffix))
        return made

    @staticmethod
    def _components(texts: Sequence[str]) -> list[str]:
        out: list[str] = []
        for segment in _COMPONENT_SEPARATORS.split("".join(texts)):
            key = _component(segment)
            if key is not None:
                out.append(key)
        return out

    def expand(self, arguments: Mapping[str, Any], ident: _Identities) -> list[str]:
        """The targets of a call: each field filled with its argument's value (a list
        argument: one target per element, a product for several); a missing argument is
        unknown (the side is every resource, :class:`_Unknown`); a value outside the proof
        set cuts the target to its namespace."""
        single = self.single
        if single is not None:
            name, prefix, suffix = single
            value = arguments.get(name)
            if type(value) is str and ident.plain(name):  # the common case
                try:
                    key = _component(value) if "/" not in value and ":" not in value else ""
                except _Cut:
                    return [self.namespace]
                if key:
                    return [bound_target(prefix + key + suffix)]
        if not self.fields:
            return [self._literal(ident)]
        choices: list[list[_Value]] = []
        size = 1
        for name in self.unique:
            if name not in arguments:
                raise _Unknown(f"argument {name!r} missing")
            values = ident.values(name, arguments[name])
            size *= len(values)
            if size > MAX_TARGETS:
                raise _Unknown(f"over {MAX_TARGETS} targets (a product of list arguments)")
            choices.append(values)
        sizes = (max(map(_text_size, v), default=0) for v in choices)
        longest = dict(zip(self.unique, sizes, strict=True))
        work = size * (sum(map(len, self.literals)) + sum(longest[f] for f in self.fields))
        if work > _MAX_EXPANSION:
            raise _Unknown(f"over {_MAX_EXPANSION} characters of targets to build")
        return [
            self._fill(dict(zip(self.unique, combo, strict=True)))
            for combo in itertools.product(*choices)
        ]

    def _literal(self, ident: _Identities) -> str:
        """A template with no field: its text through every fold the tool declares (a store
        folds every name it keys); spellings that folds disagree on are the namespace."""
        body = self.literals[0]
        filled = set()
        for fold in ident.all_folds():
            # A store folds a name it is given whole (``latest``), and the literal names it
            # within a longer text (``latest/status``): both readings must agree.
            filled.add(self._fill({}, body=fold(body)))
            filled.add(self._fill({}, body=_fold_names(fold, body)))
        return filled.pop() if len(filled) == 1 else self.namespace

    def _fill(self, values: Mapping[str, _Value], body: str | None = None) -> str:
        namespace = self.namespace
        done: list[str] = []  # components closed so far
        current: list[str] = []  # text of the component being built
        literals = self.literals if body is None else (body,)
        try:
            for i, literal in enumerate(literals):
                self._append(literal, done, current)
                if i == len(self.fields) or body is not None:
                    continue
                value = values[self.fields[i]]
                if value.exact is not None:  # the store's own keys: whole components
                    after = literals[i + 1]
                    if "".join(current) or (after and after[0] not in "/:"):
                        raise _Cut  # (an exact key must not share a component)
                    done.extend(value.exact)
                    current.clear()
                    continue
                text = value.text
                if value.alone_only and (
                    "".join(current) or (literals[i + 1] and literals[i + 1][0] not in "/:")
                ):
                    raise _Cut  # (7.0 is '7.0-x' to an f-string and '7-x' to JavaScript)
                if text is None or text.startswith("/") or ":" in text:
                    # unknown; absolute (a join restarts the path there); or a ':' that a
                    # store may parse (a time, a URL, a drive) rather than name
                    raise _Cut
                self._append(text, done, current)
            if self.glob:
                current.clear()  # (the glob's own component is any name)
            elif current:
                key = _component("".join(current))
                if key is not None:
                    done.append(key)
        except _Cut:
            return namespace
        text = namespace + "/".join(done)
        if self.glob and done:
            text += "/"
        return bound_target(text)

    @staticmethod
    def _append(text: str, done: list[str], current: list[str]) -> None:
        if len(text) > _MAX_BODY:
            raise _Cut  # (too long to prove anything about: bounded work per call)
        parts = _COMPONENT_SEPARATORS.split(text)
        if len(done) + len(parts) > MAX_TARGET_DEPTH:
            raise _Cut  # (a later '..' could leave any ancestor within the bound)
        current.append(parts[0])
        for part in parts[1:]:
            key = _component("".join(current))
            if key is not None:
                done.append(key)
            current.clear()
            current.append(part)


def _exact_components(out: Any) -> tuple[str, ...] | None:
    """The components of a store key returned by an ``identity=`` function: a string is
    split at ``/`` and ``:`` (a hierarchy), each part exact; a tuple or list is one
    component per element; any other value one component, spelled by Python's equality
    (:func:`harness.tools.identity.identity_text`: ``1 == 1.0 == True``, one instant in any
    offset). ``None`` when a part has no spelling the harness can vouch for."""
    if isinstance(out, str):
        if len(out) > MAX_KEYED_TEXT:
            return None
        parts: list[Any] = [p for p in _COMPONENT_SEPARATORS.split(out) if p not in ("", ".")]
    elif isinstance(out, list | tuple):
        parts = list(out)
    else:
        parts = [out]
    if len(parts) > MAX_TARGET_DEPTH or _keyed_text(parts) > MAX_KEYED_TEXT:
        return None  # (a key too big to vouch for in bounded work)
    keys: list[str] = []
    for part in parts:
        text = part if isinstance(part, str) else identity_text(part)
        key = None if text is None else exact_key(text)
        if key is None:
            return None
        keys.append(key)
    return tuple(keys)


def _keyed_text(value: Any) -> int:
    """How many characters of text a value gives a fold or a store key to read (strings at
    the top level or in a list; other values are bounded by :func:`value_text`)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list | tuple | set | frozenset):
        return sum(len(v) for v in value if isinstance(v, str))
    return 0


class _Identities:
    """An effect's identity rules, per argument: its ``identity=`` function (the store's own
    key, exact), else its fold and its type (:func:`harness.tools.identity.value_text`)."""

    __slots__ = ("folds", "identity")

    def __init__(
        self,
        folds: Fold | Mapping[str, Fold] | None,
        identity: Mapping[str, Callable[[Any], Any]] | None,
    ) -> None:
        self.folds = folds
        self.identity = identity or {}

    def fold(self, name: str) -> Fold | None:
        if self.folds is None or isinstance(self.folds, Fold):
            return self.folds
        return self.folds.get(name)

    def all_folds(self) -> list[Callable[[str], str]]:
        """Every distinct fold the effect declares (the identity when it declares none)."""
        if self.folds is None:
            return [str]
        if isinstance(self.folds, Fold):
            return [self.folds]
        return list(dict.fromkeys(self.folds.values())) or [str]

    def plain(self, name: str) -> bool:
        """Whether ``name``'s string values are read as they are (no fold, no identity)."""
        return self.fold(name) is None and name not in self.identity

    def values(self, name: str, value: Any) -> list[_Value]:
        """What fills ``name``'s field: one value, or one per element of a list argument
        (under ``identity=``, only when it is declared with :func:`~harness.tools.identity.each`:
        otherwise the store keys the whole value)."""
        keyed = self.identity.get(name)
        many = isinstance(value, list | tuple | set | frozenset)
        if many and len(value) > MAX_TARGETS:
            raise _Unknown(f"over {MAX_TARGETS} targets (a list argument)")
        if _keyed_text(value) > MAX_KEYED_TEXT:
            return [_UNKNOWN_VALUE]  # (too long to fold or key: bounded work per call)
        if keyed is not None:
            fold = self.fold(name)
            if many and isinstance(keyed, Each):
                return list(dict.fromkeys(self._keyed(keyed.fn, v, fold) for v in value))
            return [self._keyed(keyed, value, fold)]
        if many:
            return list(dict.fromkeys(self._typed(name, v) for v in value))
        return [self._typed(name, value)]

    def _typed(self, name: str, value: Any) -> _Value:
        fold = self.fold(name)
        if fold is not None and isinstance(value, str):
            try:
                value = fold(value)
            except Exception:  # a custom fold that cannot read it: unknown
                return _UNKNOWN_VALUE
        return _Value(value_text(value), alone_only=isinstance(value, float | Decimal))

    @staticmethod
    def _keyed(fn: Callable[[Any], Any], value: Any, fold: Fold | None = None) -> _Value:
        """The store's own key of ``value``; with a fold declared on the argument too, the
        key's text is folded after (a store that keys by path *and* folds case: folding only
        merges keys, so the order can cost parallelism, never a record)."""
        try:
            out = fn(value)
            if fold is not None:
                if isinstance(out, str):
                    out = fold(out)
                elif isinstance(out, list | tuple):
                    out = tuple(fold(p) if isinstance(p, str) else p for p in out)
        except Exception:  # the store's key function (or the fold) cannot read it: unknown
            return _UNKNOWN_VALUE
        return _Value(exact=_exact_components(out))


def namespace_key(text: str) -> str | None:
    """The namespace a target's text before its first ``:`` names: its name normal form
    (each part between ``/`` a proof key, :func:`harness.tools.identity.proof_key`) and the
    ``:``, so the collection ``todo_items`` and its member ``todo-items:17`` meet
    (``todo.items`` and ``todo.items:17``). ``None`` when a part cannot be proven (the
    namespace may be any); ``":"`` for an empty one."""
    if not text:
        return ":"
    keys = []
    for part in text.split("/"):
        key = proof_key(part)
        if key is None:
            return None
        keys.append(key)
    return "/".join(keys) + ":"


def literal_target(text: str) -> str:
    """A target named by text (what a target function returns), structured like a template
    with no field: ``"doc:a/b"`` is the namespace ``doc:`` and the components ``a``, ``b``.
    A namespace that cannot be proven (``"my ns:a"``) is every resource (``""``)."""
    colon = text.find(":")
    namespace = ""
    if colon >= 0:
        key = namespace_key(text[:colon])
        if key is None:
            return ""
        namespace = key
    template = _Template((text[colon + 1 :],), (), (), namespace, False)
    return template._fill({})


_Compiled = tuple[_Template, ...] | Callable[[Mapping[str, Any]], Iterable[str]] | None


def _compile_spec(spec: TargetSpec | None) -> _Compiled:
    if spec is None or callable(spec):
        return spec
    return tuple(_Template.parse(t) for t in ([spec] if isinstance(spec, str) else spec))


def _identity_spec(
    spec: Mapping[str, Callable[[Any], Any]] | None,
) -> Mapping[str, Callable[[Any], Any]] | None:
    if spec is None:
        return None
    if not isinstance(spec, Mapping) or not all(
        isinstance(k, str) and callable(v) for k, v in spec.items()
    ):
        raise ToolsetError(
            "identity= must map argument names to functions (the key the store gives a value), "
            f"e.g. identity={{'when': to_utc}}; got {spec!r}."
        )
    return dict(spec)


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
    (arm F+spec, :mod:`harness.certify.speculation`): a call whose arguments the manifest makes known
    may start before the model emits it, and may have run even if the model never emits it.
    Read-only tools are speculable without it; ``harness certify`` checks the claim (a call
    run twice, and run early, gives the same results and state).
    ``ancestors``: a call also writes every ancestor of each write target (``dir:a/b/c``
    writes ``dir:a`` and ``dir:a/b`` too): it creates the parents it needs, as ``mkdir -p``
    does, so it conflicts with any call under one of them.
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
    identity: Mapping[str, Callable[[Any], Any]] | None = None
    ancestors: bool = False
    # The target specs compiled once (templates parsed), for footprint().
    _writes: _Compiled = field(default=None, init=False, repr=False, compare=False)
    _reads: _Compiled = field(default=None, init=False, repr=False, compare=False)
    _ident: _Identities | None = field(default=None, init=False, repr=False, compare=False)
    _same_sides: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "write_targets", _check_spec(self.write_targets, "write_targets"))
        object.__setattr__(self, "read_targets", _check_spec(self.read_targets, "read_targets"))
        object.__setattr__(self, "canonical", _folds(self.canonical))
        object.__setattr__(self, "identity", _identity_spec(self.identity))
        if self.identity and (callable(self.write_targets) or callable(self.read_targets)):
            raise ToolsetError(
                "identity= applies to target templates, not to a target function (it is "
                "given the arguments as sent): key the values inside the function and drop "
                "identity=, or name the targets with templates such as 'doc:{key}'."
            )
        object.__setattr__(self, "_writes", _compile_spec(self.write_targets))
        object.__setattr__(self, "_reads", _compile_spec(self.read_targets))
        object.__setattr__(self, "_ident", _Identities(self.canonical, self.identity))
        same = self._writes is not None and self._writes == self._reads
        object.__setattr__(self, "_same_sides", same)  # one template set: resolve it once

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
        identity: Mapping[str, Callable[[Any], Any]] | None = None,
        ancestors: bool = False,
    ) -> Effect:
        """An explicit annotation. ``read_only`` implies idempotent and not destructive."""
        if ancestors and (read_only or write_targets is None):
            raise ToolsetError(
                "ancestors=True extends the write targets to their ancestors: declare "
                "write_targets on a tool that writes (not read_only)."
            )
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
            identity=identity,
            ancestors=ancestors,
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

    def identity_for(self, argument: str) -> Callable[[Any], Any] | None:
        """The store's own key function declared for ``argument`` (``identity=``), if any."""
        return None if self.identity is None else self.identity.get(argument)

    def literal_targets(self) -> Iterator[tuple[str, Fold | None]]:
        """Each template with no field (``"doc:README"``) and the fold its text goes
        through (the tool's single ``canonical=`` fold; none for per-argument folds)."""
        whole = self.canonical if isinstance(self.canonical, Fold) else None
        for spec in (self.write_targets, self.read_targets):
            if spec is None or callable(spec):
                continue
            for template in [spec] if isinstance(spec, str) else spec:
                if not template_fields(template):
                    yield template.replace("{{", "{").replace("}}", "}"), whole

    def name_slots(self) -> Iterator[tuple[str, str, Fold | None]]:
        """Each place a template puts an argument into a name: ``(the template text before
        it, with earlier fields as '{}', the argument, its fold)``. ``"doc:{key}/{field}"``
        gives ``("doc:", "key", …)`` and ``("doc:{}/", "field", …)``. Tools whose slots
        coincide name the same store's resources, so they must fold them alike (and key them
        with the same ``identity=`` function, :meth:`identity_for`)."""
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
            writes, why_w = (
                (frozenset(), "")
                if self.read_only
                else self._side(self._writes, arguments, "writes")
            )
            if self._same_sides and not self.read_only and not why_w:
                reads, why_r = writes, ""  # (one template for both sides: resolved once)
            else:
                reads, why_r = self._side(self._reads, arguments, "reads")
        except Exception as exc:  # a declaration's bug is "not certified", never a crash
            return Footprint.failed(f"{type(exc).__name__}: {exc}")
        if self.ancestors and writes:
            writes = writes | _ancestors(writes)
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
            ident = self._ident
            assert ident is not None  # (set in __post_init__)
            if callable(spec):
                out = frozenset(_from_function(spec, self._folded(arguments)))
            elif len(spec) == 1:  # the common case: one template
                out = frozenset(spec[0].expand(arguments, ident))
            else:
                targets: set[str] = set()
                for template in spec:
                    targets.update(template.expand(arguments, ident))
                    if len(targets) > MAX_TARGETS:
                        raise _Unknown(f"{side} over {MAX_TARGETS} targets")
                out = frozenset(targets)
        except _Unknown as unknown:
            return None, str(unknown)
        if "" in out:
            return None, f"{side} name the empty target (the root of every resource)"
        return out, ""


def _ancestors(targets: Iterable[str]) -> frozenset[str]:
    """Every proper ancestor of each target that has at least one component: ``doc:a/b/c``
    gives ``doc:a`` and ``doc:a/b`` (targets are written ``namespace + "/".join(components)``,
    :class:`_Template`, so a prefix of components is an ancestor)."""
    out: set[str] = set()
    for target in targets:
        colon = target.find(":")
        namespace, body = (target[: colon + 1], target[colon + 1 :]) if colon >= 0 else ("", target)
        parts = [p for p in body.split("/") if p]
        out.update(namespace + "/".join(parts[:k]) for k in range(1, len(parts)))
    return frozenset(out)


def _from_function(
    fn: Callable[[Mapping[str, Any]], Iterable[str]], arguments: Mapping[str, Any]
) -> set[str]:
    produced = fn(arguments)
    if isinstance(produced, str | bytes) or not isinstance(produced, Iterable):
        raise TypeError(f"the target function returned {type(produced).__name__}, not a list")
    names = [canonical_text(t) for t in itertools.islice(produced, MAX_TARGETS + 1)]
    if len(names) > MAX_TARGETS:
        raise _Unknown(f"over {MAX_TARGETS} targets")
    if sum(map(len, names)) > _MAX_EXPANSION:
        raise _Unknown(f"over {_MAX_EXPANSION} characters of targets to build")
    return {literal_target(name) for name in names}


def _camel(key: str) -> str:
    """``read_only_hint`` -> ``readOnlyHint``; a camelCase key is returned unchanged."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
