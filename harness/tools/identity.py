"""Identity: when two argument values name one record of a store.

The certifier may run two calls together only when it can **prove** they touch different
records (issue 40). This module owns that proof, for the certifier (:mod:`harness.tools.effects`
builds a call's targets with it) and for the certification kit:

- :func:`proof_key` — the key of one name component, from a small closed set of forms (plain
  ASCII names and numbers) whose distinctness no store's folding can undo; every spelling a
  store may merge (case, ``.``/``_``/``-``, leading zeros, numeric spellings) has one key,
  and anything else has none (the target is then its whole namespace);
- :func:`value_text` — the text a store reads for a validated scalar, or ``None`` outside
  the set (datetimes, booleans, ``None``, containers: declare ``identity=``);
- :func:`exact_key` — a name the store's own ``identity=`` function gave, exact;
- :func:`each` (``identity=`` per element of a list) and :func:`under_root` (the key of a
  file store rooted at a directory).

What follows is :func:`identity_text`: a value's spelling under Python's equality (one
spelling for ``1``, ``1.0`` and ``True``; one instant in any offset), used for what a
store's own ``identity=`` function returns and for counting a manifest's distinct slots.

**The value's type** (:func:`identity_text`), applied to the *validated* value — what the tool
function receives after JSON Schema validation and its pydantic model:

=====================================  ======================================================
value                                  identity
=====================================  ======================================================
``str``                                itself, through the argument's fold (below)
``int``, ``float``, ``Decimal``,       its numeric value: ``1``, ``1.0``, ``True``,
``Fraction``, ``bool``                 ``Decimal("1.00")`` are all ``1``
``Enum``                               the identity of its value
aware ``datetime``                     the UTC instant, ``2026-01-01T08:00:00Z``: the same
                                       instant in any offset is one identity
aware ``time`` with a fixed offset     the UTC time of day, ``08:00:00Z``
naive ``datetime`` / ``time``, a time  **unknown**: the harness cannot know which zone the
whose zone has no fixed offset         store reads it in (declare ``identity=``)
``date``                               ISO 8601, ``2026-01-01``
``UUID``                               lower-case hyphenated
``timedelta``                          its length in seconds, as a number
``PurePath`` (``Path``)                a normalised POSIX path (:func:`normalise_path`)
``None``                               ``null``
mappings, lists, tuples, sets,         canonical JSON of the identities of their parts,
pydantic models, dataclasses           folded on every string leaf and key (a mapping whose
                                       keys fold together is unknown)
anything else                          **unknown**
=====================================  ======================================================

An unknown identity never certifies with anything that touches its namespace: the target it
would have filled is cut back to the namespace (see :mod:`harness.tools.effects`). Over-approximating
overlap only costs parallelism; under-approximating it is a wrong answer.

**The store's folds** (:class:`Fold`): the name transformations a store applies before it
keys a record (case, Unicode normalisation, whitespace, path forms, or a custom function). A
fold is *closed*: it is applied until it reaches a fixed point, so ``f(f(x)) == f(x)`` for
every string (a fold whose steps cycle settles on the least string of the cycle). ``case``
is Unicode's NFKC_Casefold extended to cover stores that fold with ``upper()`` too: NFKD,
``upper``, ``casefold``, NFKC.

**The store's own key** (``identity=`` on a tool, per argument): a callable the store itself
uses to key its records. It replaces the type rule and the fold for that argument.

**Total and bounded.** :func:`identity_text` is iterative (no recursion limit), visits at most
:data:`MAX_NODES` parts and never raises: anything it cannot decide is unknown.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import fractions
import json
import math
import numbers
import posixpath
import re
import unicodedata
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from harness.errors import ToolsetError

__all__ = (
    "FOLD_STEPS",
    "MAX_NAME",
    "MAX_NODES",
    "Each",
    "Fold",
    "InRoot",
    "UnderRoot",
    "each",
    "exact_key",
    "identity_text",
    "in_root",
    "normalise_path",
    "number_text",
    "proof_key",
    "under_root",
    "value_text",
)

#: The most parts (leaves, keys, containers) one value may have; a bigger value is unknown.
MAX_NODES = 4096
#: The longest identity one value may have (characters); a longer one is unknown.
MAX_IDENTITY = 1 << 16
#: How many times a fold is applied at most while looking for its fixed point or cycle.
_MAX_FOLD_ROUNDS = 32
#: Numbers beyond these (decimal exponent, significant digits) are never expanded to digits.
_MAX_EXPONENT = 64
_MAX_DIGITS = 128


# -- paths -----------------------------------------------------------------------------------


def normalise_path(text: str) -> str:
    """A path's lexical POSIX normal form: ``.`` segments and repeated slashes dropped (a
    leading ``//`` too), ``..`` resolved against the segment before it (``/..`` is ``/``),
    a trailing slash dropped. A relative path that resolves to nothing is ``.``. Symlinks are
    not followed: ``a/../b`` is ``b`` even where ``a`` is a symlink (a store that resolves
    links declares ``identity=``)."""
    if not text:
        return text
    absolute = text.startswith("/")
    parts: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not absolute:
                parts.append(part)
            continue
        parts.append(part)
    body = "/".join(parts)
    if absolute:
        return "/" + body
    return body or "."


# -- folds -----------------------------------------------------------------------------------


def _case(text: str) -> str:
    # NFKC_Casefold (NFKD, casefold, NFKC) with upper() in front of casefold(): a store that
    # keys with upper() merges 'ı' and 'i' (both 'I'), casefold() alone does not.
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize("NFKC", decomposed.upper().casefold())


def _whitespace(text: str) -> str:
    return " ".join(text.split())


FOLD_STEPS: Mapping[str, Callable[[str], str]] = {
    "case": _case,
    "nfc": lambda text: unicodedata.normalize("NFC", text),
    "nfkc": lambda text: unicodedata.normalize("NFKC", text),
    "strip": str.strip,
    "whitespace": _whitespace,
    "path": normalise_path,
}


def _closed(fn: Callable[[str], str], text: str) -> str:
    """``fn`` applied until it reaches a fixed point; on a cycle, the least string of it (so
    the closure is idempotent whatever ``fn`` does)."""
    seen: dict[str, int] = {}
    order: list[str] = []
    current = text
    for _ in range(_MAX_FOLD_ROUNDS):
        if current in seen:
            return min(order[seen[current] :])
        seen[current] = len(order)
        order.append(current)
        nxt = fn(current)
        if not isinstance(nxt, str):
            raise TypeError(f"the fold returned {type(nxt).__name__}, not str")
        if nxt == current:
            return current
        current = nxt
    raise ValueError(f"the fold did not settle within {_MAX_FOLD_ROUNDS} rounds")


@dataclass(frozen=True)
class Fold:
    """How a tool's store folds names: steps applied in order to a string argument (or to
    each string leaf of a list, mapping or model argument) before targets are filled, and
    again until nothing changes (a fold is closed: ``fold(fold(x)) == fold(x)``).

    ``case`` letters without case (NFKC_Casefold, covering stores that fold with ``lower``,
    ``upper``, ``casefold`` or NFKC_Casefold); ``nfc`` / ``nfkc`` Unicode normalisation;
    ``strip`` leading/trailing whitespace; ``whitespace`` strip and collapse runs of
    whitespace to one space; ``path`` lexical POSIX path normalisation
    (:func:`normalise_path`). ``custom`` is a function for any other folding; two folds are
    the same fold when their steps and custom function are equal.

    Contract (what the certification kit verifies): for every two spellings ``x``, ``y`` of
    an argument that the tool's store treats as one resource, ``fold(x) == fold(y)``.
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
    def of(cls, spec: Fold | str | Sequence[str] | Callable[[str], str]) -> Fold:
        """``"case"``, ``"case+nfkc"``, ``["case", "nfkc"]``, a function or a :class:`Fold`."""
        if isinstance(spec, Fold):
            return spec
        if isinstance(spec, str):
            return cls(tuple(s.strip() for s in spec.split("+") if s.strip()))
        if callable(spec):
            return cls(custom=spec)
        return cls(tuple(spec))

    def _once(self, text: str) -> str:
        for step in self.steps:
            text = FOLD_STEPS[step](text)
        if self.custom is not None:
            text = self.custom(text)
        return text

    def __call__(self, text: str) -> str:
        return _closed(self._once, text)

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


# -- identity of a value ---------------------------------------------------------------------


class _Unknown(Exception):
    """The value has no identity the harness can vouch for."""


def number_text(value: Any) -> str:
    """One spelling per numeric value (``1``, ``1.0``, ``True``, ``Decimal("1.00")`` are ``1``)."""
    exact: fractions.Fraction
    if isinstance(value, Decimal):
        if not value.is_finite():  # Decimal("Infinity") == float("inf")
            return "nan" if value.is_nan() else repr(float(value))
        if abs(value.adjusted()) > _MAX_EXPONENT or len(value.as_tuple().digits) > _MAX_DIGITS:
            return str(value.normalize())  # exact, and never a number of millions of digits
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
        return number_text(c.real) if c.imag == 0 else repr(c)
    if exact.denominator == 1:
        return str(exact.numerator)
    as_float = float(exact)
    if fractions.Fraction(as_float) == exact:
        return repr(as_float)
    return f"{exact.numerator}/{exact.denominator}"


def _instant(value: datetime.datetime) -> str:
    offset = value.utcoffset()
    if offset is None:
        raise _Unknown("a naive datetime (its zone is the store's)")
    utc = (value.replace(tzinfo=None) - offset).isoformat()
    return utc + "Z"


def _time_of_day(value: datetime.time) -> str:
    offset = value.utcoffset()  # None for a naive time and for a zone with no fixed offset
    if offset is None:
        raise _Unknown("a time without a fixed UTC offset")
    moment = datetime.datetime.combine(datetime.date(2000, 1, 2), value.replace(tzinfo=None))
    return (moment - offset).time().isoformat() + "Z"


def _leaf(value: Any, fold: Fold | None) -> str:
    """The identity of a scalar (raises :class:`_Unknown` for anything else)."""
    if isinstance(value, str):
        return value if fold is None else fold(value)
    if value is None:
        return "null"
    if isinstance(value, enum.Enum):
        return _leaf(value.value, fold)
    if isinstance(value, numbers.Number):
        return number_text(value)
    if isinstance(value, datetime.datetime):
        return _instant(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.time):
        return _time_of_day(value)
    if isinstance(value, datetime.timedelta):
        return number_text(value.total_seconds())
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, PurePath):
        return normalise_path(value.as_posix())
    raise _Unknown(f"{type(value).__name__} has no known identity")


def _parts(value: Any) -> Mapping[Any, Any] | Sequence[Any] | None:
    """A container's parts: a mapping for mappings, models and dataclasses, a sequence for
    lists and tuples, a sorted tuple marker for sets; ``None`` for a scalar."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, list | tuple):
        return value
    fields = getattr(type(value), "model_fields", None)
    if isinstance(fields, Mapping) and not isinstance(value, type):
        return {name: getattr(value, name, None) for name in fields}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None


def identity_text(value: Any, fold: Fold | None = None) -> str | None:
    """The identity of a validated value (see the module docstring), its string leaves and
    mapping keys through ``fold``; ``None`` when it is unknown. Never raises; iterative."""
    try:
        if isinstance(value, str):
            return value if fold is None else fold(value)
        if _parts(value) is None and not isinstance(value, set | frozenset):
            return _leaf(value, fold)
        text = _nested(value, fold)
    except (_Unknown, ValueError, TypeError, ArithmeticError, RecursionError):
        return None
    except Exception:  # a custom fold or a model's attribute that raises: unknown
        return None
    return text if len(text) <= MAX_IDENTITY else None


def _nested(value: Any, fold: Fold | None) -> str:
    """Canonical JSON of a container's identities, built with an explicit stack."""
    out: list[str] = []
    length = 0
    nodes = 0
    # Each entry is a value to encode, or a piece of text to emit (wrapped in a 1-tuple).
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is tuple and len(item) == 1 and type(item[0]) is _Text:
            out.append(item[0])
            length += len(item[0])
            if length > MAX_IDENTITY:
                raise _Unknown("too long")
            continue
        nodes += 1
        if nodes > MAX_NODES:
            raise _Unknown(f"more than {MAX_NODES} parts")
        if isinstance(item, set | frozenset):
            leaves = sorted(json.dumps(_leaf(v, fold)) for v in item)
            stack.append((_Text("[" + ",".join(leaves) + "]"),))
            continue
        parts = _parts(item)
        if parts is None:
            stack.append((_Text(json.dumps(_leaf(item, fold))),))
            continue
        if isinstance(parts, Mapping):
            keyed = [(_leaf(k, fold), v) for k, v in parts.items()]
            keys = [k for k, _ in keyed]
            if len(set(keys)) != len(keys):
                raise _Unknown("two keys fold to one")
            keyed.sort(key=lambda kv: kv[0])
            pieces: list[Any] = [(_Text("{"),)]
            for i, (k, v) in enumerate(keyed):
                pieces.append((_Text(("," if i else "") + json.dumps(k) + ":"),))
                pieces.append(v)
            pieces.append((_Text("}"),))
        else:
            pieces = [(_Text("["),)]
            for i, v in enumerate(parts):
                if i:
                    pieces.append((_Text(","),))
                pieces.append(v)
            pieces.append((_Text("]"),))
        stack.extend(reversed(pieces))
    return "".join(out)


class _Text(str):
    """A piece of encoded text on :func:`_nested`'s stack (never a value to encode)."""

    __slots__ = ()


# -- proof of distinctness -------------------------------------------------------------------
#
# The certifier lets two calls run together only when it can *prove* they touch different
# records. A target is a namespace and a tuple of components; each component is a **proof
# key**: a name from a small closed set of forms whose distinctness no store's folding can
# undo. Anything outside that set is unknown, and an unknown component makes the target its
# whole namespace (it overlaps every record there): over-approximating costs parallelism,
# never correctness.

#: The characters of a plain name: ASCII letters, digits, ``.``, ``_`` and ``-``.
_PLAIN = re.compile(r"[A-Za-z0-9._-]+\Z")
#: An integer in digits only (no sign, no ``_``, no point, no base prefix): the *number* form.
_INTEGER = re.compile(r"[0-9]+\Z")
#: Text some number reader reads (``int()``, ``int(text, 0)``, ``float()``, ``Decimal()``,
#: JavaScript's ``Number()``), case-insensitively; a superset (it needs a digit or a word).
_READABLE = re.compile(
    r"[+-]?(?:[0-9_]*\.?[0-9_]*(?:e[+-]?[0-9_]*)?|0[xob][0-9a-f_]*|s?nan|inf(?:inity)?)\Z",
    re.IGNORECASE,
)
_WORDS = frozenset({"nan", "snan", "inf", "infinity"})
#: Runs of the characters stores unify or drop (``a-b``, ``a_b``, ``a.b``, ``a__b``).
_RUNS = re.compile(r"[._-]+")
#: Leading zeros of a run of digits (``007`` is ``7``; ``0.5`` keeps its zero).
_ZEROS = re.compile(r"(?<![0-9])0+(?=[0-9])")
#: The longest plain name (characters); a longer one is unknown (a store may truncate it).
MAX_NAME = 128
#: The longest text a fold or a store key is computed from (characters); a longer value is
#: unknown before any fold runs, so one call never costs more than bounded work.
MAX_KEYED_TEXT = 8192


def proof_key(text: str) -> str | None:
    """The proof key of one name component, or ``None`` when its distinctness cannot be
    proven.

    Two forms are provable, and their keys are built so that no fold a store applies can
    make two components with different keys one record:

    - **a number**: digits only, with no leading zero (``7``, ``0``). Its key is its value
      *as a double* (2**53 + 1 is 2**53, as a JavaScript server or a ``float``-keyed store
      reads it).
    - **a name**: letters, digits, ``.``, ``_``, ``-`` (at most :data:`MAX_NAME`
      characters) that no number reader reads, before or after the name folds. Its key is
      its **name normal form**: lower case, every run of ``.``/``_``/``-`` one ``.``,
      leading and trailing ones dropped, leading zeros of each run of digits dropped — the
      composite of every case, separator (PEP 503 style, slugs) and leading-zero (PEP 440
      release segments, natural keys) fold, in any order.

    Every other text is ``None``: a character outside the alphabet (spaces, ``/``, ``:``,
    ``\\``, non-ASCII letters, confusables), an empty or over-long name, and every text a
    number reader reads other than the number form (``007``, ``+7``, ``-7``, ``7.0``, ``1e3``,
    ``7_0``, ``.5``, ``0x10``, ``inf``, ``nan``): a signed, fractional, grouped or based
    spelling is one number to a numeric store and another text to a name store (``0xE00``
    is 3584 to ``int(text, 0)`` and ``0xE0`` to a store dropping leading zeros; ``011`` is
    9 to YAML 1.1), and no single key serves both. Why the two forms cannot meet: a number
    reader reads no name (and no name's normal form), and a name's normal form is never
    digits only, so a name fold never makes a name a number's spelling."""
    if not text or len(text) > MAX_NAME:
        return None
    if _INTEGER.match(text):
        if len(text) > 1 and text[0] == "0":
            return None  # (``011`` is 11 to ``int()`` and 9 to YAML 1.1 and ``strtol``)
        return _integer_text(int(text))
    if not _PLAIN.match(text) or _reads_as_number(text):
        return None
    key = _ZEROS.sub("", _RUNS.sub(".", text.lower()).strip("."))
    if not key or key.isdigit() or _reads_as_number(key):
        return None  # (``_7`` is ``7`` to a store that drops edge separators)
    return key


def _reads_as_number(text: str) -> bool:
    """Whether some number reader may read ``text`` (over-approximated)."""
    return bool(_READABLE.match(text)) and (
        any(c.isdigit() for c in text) or text.lower().lstrip("+-") in _WORDS
    )


def _integer_text(value: int) -> str | None:
    """How a store spells an integer argument, even inside a composite (``f"{a}-{b}"``): its
    digits, or past 2**53 the digits of the double a JavaScript server turns it into (one
    text for every integer that rounds to one double; ``None`` past 64 decimal orders)."""
    if abs(value) <= 2**53:
        return str(value)
    if value.bit_length() > _MAX_INTEGER_BITS:
        return None
    return str(int(float(value)))


#: 10**64 < 2**213: integers within 64 decimal orders, as every other bound here.
_MAX_INTEGER_BITS = 213


def exact_key(text: str) -> str | None:
    """A name the store's own ``identity=`` function gave: its proof key when it is plain,
    else an exact, injective escape of it (``%`` and the UTF-8 bytes in hex, never equal to a
    proof key). ``None`` for text that cannot be encoded (a lone surrogate)."""
    key = proof_key(text)
    if key is not None:
        return key
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return "%" + "".join(chr(b) if (48 <= b <= 57 or 97 <= b <= 122) else f"%{b:02X}" for b in data)


def value_text(value: Any) -> str | None:
    """The text a store reads for a validated scalar value, or ``None`` when the value is
    not in the closed set of forms whose distinctness the harness can prove.

    In the set: strings (as they are), integers (within 64 decimal orders; past 2**53
    spelled as the double they round to), finite floats and
    decimals (within 64 decimal orders), fractions that are integers, ``StrEnum`` and
    ``IntEnum`` members (their value; another enum is outside: ``str()`` spells it
    ``Color.RED``),
    UUIDs (lower-case hyphenated), dates (ISO 8601) and paths (POSIX text). Out of it:
    ``bool`` and ``None`` (stores key them as numbers, words or not at all), datetimes,
    times and durations (a store keys a moment in its own zone or granularity: declare
    ``identity=``), collections and models, anything else."""
    if isinstance(value, enum.Enum):
        # A StrEnum or IntEnum is its value wherever a store spells it; another Enum (a
        # (str, Enum) mixin too) is "Color.RED" to str() and f-strings and its value to a
        # store that reads .value.
        if isinstance(value, enum.StrEnum | enum.IntEnum):
            return value_text(value.value)
        return None
    if type(value) is str:
        return value
    if isinstance(value, str):  # a subclass may spell itself otherwise in an f-string
        return value if str(value) == str.__str__(value) else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return _integer_text(value)
    if isinstance(value, float | Decimal | fractions.Fraction):
        # An integral value is its digits (``7.0`` is the record ``7`` is); any other is
        # read by a number store and a name store differently: outside the set.
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, Decimal) and not value.is_finite():
            return None
        integral = value == int(value) and abs(value) < 10**_MAX_EXPONENT
        return _integer_text(int(value)) if integral else None
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.time | datetime.timedelta):
        return None
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, PurePath):
        return value.as_posix()
    return None


@dataclass(frozen=True)
class Each:
    """``identity={"keys": each(fn)}``: the store keys every *element* of a list argument
    with ``fn`` (one record per element). Without it, ``identity=`` receives the whole value
    (a list argument names the one record its whole value keys)."""

    fn: Callable[[Any], Any]

    def __call__(self, value: Any) -> Any:
        return self.fn(value)


def each(fn: Callable[[Any], Any]) -> Each:
    """Mark an ``identity=`` function as applied to each element of a list argument."""
    return Each(fn)


@dataclass(frozen=True)
class UnderRoot:
    """The key of a file store rooted at ``root`` that joins paths the standard library's
    way: a relative path lies under the root, an absolute one is itself, ``.``/``..`` and
    repeated slashes resolve lexically (symlinks are not followed). Use it as the store's
    own key, ``identity={"path": under_root("/srv")}``, so ``a/b`` and ``/srv/a/b`` are one
    record. Two keys with the same root are equal (tools may share it)."""

    root: str

    def __call__(self, path: Any) -> str:
        text = path.as_posix() if isinstance(path, PurePath) else str(path)
        if len(text) > MAX_KEYED_TEXT:
            raise ValueError("a path too long to key")  # (unknown: bounded work per call)
        return posixpath.normpath(posixpath.join(self.root, text))


def under_root(root: str) -> UnderRoot:
    """The store key of a file system rooted at ``root`` (see :class:`UnderRoot`); the root
    must be absolute (a relative one means a different directory to every process)."""
    if not posixpath.isabs(root):
        raise ValueError(
            f"under_root({root!r}): the root must be an absolute path (a relative root "
            "depends on the store's working directory); write the directory the store joins "
            "paths under, e.g. under_root('/srv/data')."
        )
    return UnderRoot(posixpath.normpath(root))


@dataclass(frozen=True)
class InRoot:
    """The key of a file store confined to ``root``, relative to it: a path under the root is
    its path from the root (``a/b``, ``./a//b`` and ``/srv/a/b`` are all ``a/b``; the root
    itself is ``.``, the whole store), joined and resolved lexically as :class:`UnderRoot`
    does. A path outside the root (a rooted server refuses it, or it escapes by ``..``) has
    no key the harness can vouch for: its target is the whole namespace, so the call runs
    alone. Targets keyed this way name a record the same way wherever the root is mounted,
    which is how the certification kit names an MCP server's files
    (:mod:`harness.certkit.mcp_server`).

    The path is joined and resolved on the text as sent; a path starting with ``~`` (which
    the reference server expands to the home directory) is outside. Each name of the result
    is then keyed as a forgiving file system may key it, NFKC-casefolded (the ``case``
    fold; a name that folds to a separator, ``.`` or ``..`` is outside): a server that maps two Unicode forms of a name onto one file (the reference MCP
    filesystem server matches entries in NFC) or ignores case is covered; on one that does
    not, two such names only run one after the other (sound, a little less parallel)."""

    root: str

    def __call__(self, path: Any) -> Any:
        text = path.as_posix() if isinstance(path, PurePath) else str(path)
        if len(text) > MAX_KEYED_TEXT:
            raise ValueError("a path too long to key")  # (unknown: bounded work per call)
        if text == "~" or text.startswith("~/"):
            return _OUTSIDE  # (the reference server expands '~' to the home directory)
        # The path resolves as the server resolves it, on the text as sent; only then is
        # each name folded (a full-width '／' folds to '/': a name, never a separator).
        joined = posixpath.normpath(posixpath.join(self.root, text))
        if joined == self.root:
            return "."
        prefix = self.root.rstrip("/") + "/"
        if not joined.startswith(prefix):
            return _OUTSIDE
        names = []
        for name in joined[len(prefix) :].split("/"):
            folded = _closed(_case, name)
            if folded in ("", ".", "..") or "/" in folded:
                return _OUTSIDE
            names.append(folded)
        return "/".join(names)


class _Outside:
    """What :class:`InRoot` keys a path outside its root with: no spelling, so the target is
    cut to its namespace."""

    def __repr__(self) -> str:
        return "<outside the root>"


_OUTSIDE = _Outside()


def in_root(root: str) -> InRoot:
    """The store key of a file system confined to ``root``, relative to it (see
    :class:`InRoot`)."""
    return InRoot(posixpath.normpath(root))
