"""``python -m benchmarks.reference_stores``: the certifier against models of real stores.

The soundness rule (issue 40) is *distinct only by proof*: two calls may run together only
when the harness can prove they touch different records. This checks that rule where it can
fail: against **reference stores**, small executable models of how real stores key their
records, each with the **honest** declarations a careful user writes for it (the targets a
tool really touches, in the docs' own terms), and a generator of **hostile spellings** that
real stores merge.

For each store model, pairs of calls are drawn from a small pool of records spelled many
ways; for every pair the certifier lets run together (both footprints resolve and
:func:`harness.certify.conflicts.conflict` finds nothing), the model computes the records each call
touches the way the store does; a **false fill** is a pair whose records overlap (equal, or
one holds the other). A pair the certifier keeps apart is never wrong (it only costs
parallelism); the report counts those too, so a rule that refuses everything is visible.

Store models (:data:`STORES`):

``posix``      a file system rooted at ``/srv``, paths joined the standard library's way
               (``os.path.join`` then ``normpath``: an absolute part restarts the path, an
               empty part adds a slash, ``.``/``..`` resolve); ``write_at(dir, name)`` on
               ``file:{dir}/{name}``, ``write(path)`` on ``file:{path}``, ``write_p(path: Path)``
               on ``file:{path}``, ``mkdir(path)`` making its parents (``file:{path}``)
``rooted``     the same file system, declared with the store's own key
               (``identity=under_root("/srv")``): a relative and an absolute spelling of one
               file are one record, so they may certify apart from other files
``object``     an object store keyed by raw strings: ``(bucket, key)`` exactly as sent;
               ``put(bucket, key)`` on ``obj:{bucket}/{key}``, ``put_main(key)`` on
               ``obj:main/{key}``
``folding``    a store keying NFKC_Casefold of the name (declared ``canonical="case"``):
               ``put(key)`` on ``doc:{key}``, ``put_field(key, field)`` on
               ``doc:{key}/{field}``, ``touch_readme()`` on ``doc:Readme``
``composite``  a store keyed by a joined composite: ``put_pair(a, b)`` on ``kv:{a}-{b}``
               (the store keys ``f"{a}-{b}"``), ``put(key)`` on ``kv:{key}``,
               ``put_parts(parts: list)`` keyed ``"".join(parts)`` (declared with
               ``identity=``)
``numeric``    a store keyed by a number's value: ``put(n: float)`` and ``put_i(i: int)`` on
               ``num:{n}``, ``put_s(s: str)`` on ``num:{s}`` (the store parses it with
               ``Decimal``)
``js_number``  a store in a JavaScript server, keyed by ``Number(value)`` (a JSON number is a
               double; text is read by ``Number()``: ``0x10``, ``0b1``, ``0o7``, ``1e3``,
               ``Infinity``): ``put(n: float)``, ``put_i(i: int)`` and ``put_s(s: str)`` on
               ``num:{n}`` (the same honest declarations as ``numeric``); integers past 2**53
               and decimals past 17 digits round onto one record
``folds``      one store per pair, drawn from every fold the proof claims to cover: exact
               text, case, PEP 503 separators, slugs (separators unified and trimmed),
               natural keys (leading zeros of digit runs), a PEP 440-like composite of all
               three, and the number readers ``int()``, ``int(text, 0)``, ``float()``,
               ``Decimal()`` and ``Number()``; the numeric store's tools on ``num:``;
               spellings are drawn from an alphabet of
               digits, signs, ``e``, ``x``, ``.``, ``_`` and ``-`` and from one another
               through the folds, so most pairs are near-collisions

Hostile spellings (:data:`SPELLING_CLASSES`): case, Unicode forms and confusables
(NFC/NFD, full-width, compatibility ligatures, the Kelvin sign, dotless ``ı``), padding and
whitespace, separators inside values (``/``, ``.``, ``-``, ``_``, ``:``), numeric spellings
(leading zeros, ``1e3``, ``+7``, ``7.0``, ``7_0``), path forms (absolute under the root,
empty, ``.``/``..``, repeated and trailing slashes, escapes above the root), collections,
and huge values (10,000-character names, 5,000-digit numbers, ``1e4000000``).

``--cases N`` pairs per store (default 100,000); ``--stores`` a subset; ``--seed``;
``--json OUT`` writes the tally. Exit status 1 when any false fill is found. The unit tests
run a smaller number (``tests/test_reference_stores.py``).

Controls (``--control NAME``) each undo one rule of the proof and must find false fills, so
the check can fail: ``raw_components`` (a component is its raw text, no proof key and no
fold), ``per_element_identity`` (``identity=`` applied to each element of a list, the rule
before issue 40), ``join_absolute`` (an absolute value joined under the text before it
instead of cutting the target to its namespace).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import posixpath
import random
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path, PurePosixPath
from typing import Any
from unittest import mock

from harness.certify.conflicts import conflict
from harness.tools import Tool, Toolset, tool
from harness.tools.effects import Footprint
from harness.tools.identity import under_root

__all__ = (
    "CONTROLS",
    "SPELLING_CLASSES",
    "STORES",
    "StoreModel",
    "StoreTally",
    "run_store",
)

Record = tuple[Any, ...]
Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class StoreModel:
    """A store: honest tools, the records a call touches as the store keys them, whether
    two records overlap, and a generator of calls with hostile spellings."""

    name: str
    toolset: Toolset
    records: Callable[[str, Mapping[str, Any]], frozenset[Record]]
    related: Callable[[Record, Record], bool]
    spell: Callable[[random.Random], Call]
    #: Whether a call's records may be cached by its arguments (not when the store is drawn
    #: per pair).
    cacheable: bool = True


# -- spellings ---------------------------------------------------------------------------------

SPELLING_CLASSES = (
    "case",
    "unicode",
    "padding",
    "separators",
    "numeric",
    "paths",
    "collections",
    "huge",
)

_BASES = ("a", "b", "readme", "notes", "x1", "7", "report", "é")


def _case(rng: random.Random, text: str) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c for c in text)


_CONFUSABLES = {
    "a": ("ａ", "𝐚", "a"),
    "b": ("ｂ", "𝐛"),
    "e": ("ｅ", "e"),
    "i": ("ı", "ｉ", "𝚤"),
    "k": ("K", "ｋ"),  # the Kelvin sign folds to k
    "r": ("ｒ",),
    "x": ("ｘ",),
    "é": ("é", "é", "É"),
    "fi": ("ﬁ",),
    "1": ("１", "¹"),
    "7": ("７", "⁷"),
}


def _unicode(rng: random.Random, text: str) -> str:
    out = text
    for plain, forms in _CONFUSABLES.items():
        if plain in out and rng.random() < 0.7:
            out = out.replace(plain, rng.choice(forms), 1)
    form = rng.randrange(4)
    if form == 3:
        return out
    return unicodedata.normalize(("NFC", "NFD", "NFKC")[form], out)


def _padding(rng: random.Random, text: str) -> str:
    pads = (" ", "  ", "\t", "\u00a0", "\n", "0", "00")
    left, right = rng.choice((*pads, "")), rng.choice((*pads, ""))
    if left.startswith("0") and not text[:1].isdigit():
        left = ""
    if right.startswith("0"):
        right = ""
    return left + text + right


def _separators(rng: random.Random, text: str) -> str:
    sep = rng.choice(("/", ".", "-", "_", ":", "//", "\\", "/./", ".."))
    other = rng.choice(_BASES)
    return rng.choice((text + sep + other, other + sep + text, text + sep))


def _numeric(rng: random.Random, text: str) -> Any:
    n = rng.choice((7, 70, 1000, 0, 15))
    forms: list[Any] = [
        str(n),
        "0" + str(n),
        "00" + str(n),
        f"{n}.0",
        f"{n}.00",
        f"+{n}",
        f"{n}e0",
        f"{n / 10}e1",
        str(n)[:1] + "_" + str(n)[1:] if len(str(n)) > 1 else str(n),
        n,
        float(n),
        f"{n / 1000}e3",
    ]
    return rng.choice(forms)


def _path(rng: random.Random, text: str) -> str:
    forms = (
        text,
        "./" + text,
        text + "/",
        "/srv/" + text,
        "/srv//" + text,
        "sub/../" + text,
        "sub/" + text,
        "sub//" + text,
        "x/../../srv/" + text,
        "../srv/" + text,
        "/" + text,
        "",
        ".",
        "..",
        "/",
        "sub",
        "sub/.",
    )
    return rng.choice(forms)


def _huge(rng: random.Random, text: str) -> Any:
    return rng.choice(
        (
            text * 2500,
            "9" * 5000,
            "1e4000000",
            "a/" * 3000 + text,
            text + "x" * 10_000,
        )
    )


def spelling(rng: random.Random, base: str, classes: Sequence[str] = SPELLING_CLASSES) -> Any:
    """One spelling of ``base`` (a record name) from one or two hostile classes."""
    value: Any = base
    for _ in range(rng.choice((1, 1, 2))):
        kind = rng.choice(classes)
        if not isinstance(value, str):
            break
        if kind == "case":
            value = _case(rng, value)
        elif kind == "unicode":
            value = _unicode(rng, value)
        elif kind == "padding":
            value = _padding(rng, value)
        elif kind == "separators":
            value = _separators(rng, value)
        elif kind == "numeric":
            value = _numeric(rng, value)
        elif kind == "paths":
            value = _path(rng, value)
        elif kind == "huge":
            value = _huge(rng, value) if rng.random() < 0.2 and len(value) < 64 else value
        # ("collections" is drawn by the stores that take lists)
    return value


def _text(rng: random.Random, classes: Sequence[str] = SPELLING_CLASSES) -> str:
    value = spelling(rng, rng.choice(_BASES), classes)
    return value if isinstance(value, str) else str(value)


# -- posix --------------------------------------------------------------------------------------

ROOT = "/srv"


def _mkdir_targets(args: Mapping[str, Any]) -> list[str]:
    """What a careful user declares for ``mkdir -p``: the path and every ancestor it may
    create (the path's prefixes)."""
    parts = str(args["path"]).split("/")
    return ["file:" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _posix_toolset() -> Toolset:
    @tool(write_targets="file:{dir}/{name}", read_targets="file:{dir}/{name}", canonical="path")
    def write_at(dir: str, name: str) -> str:
        """Write ``name`` inside ``dir`` (joined with os.path.join under /srv)."""
        return "ok"

    @tool(write_targets="file:{path}", read_targets="file:{path}", canonical="path")
    def write(path: str) -> str:
        """Write a file by its path under /srv."""
        return "ok"

    @tool(write_targets="file:{path}", read_targets="file:{path}", canonical="path")
    def write_p(path: Path) -> str:
        """Write a file by its path under /srv (a Path argument)."""
        return "ok"

    @tool(write_targets=_mkdir_targets, read_targets=_mkdir_targets, canonical="path")
    def mkdir(path: str) -> str:
        """Make a directory and its parents under /srv."""
        return "ok"

    return Toolset([write_at, write, write_p, mkdir], name="posix")


def _resolve(*parts: str) -> str:
    return posixpath.normpath(posixpath.join(ROOT, *parts))


def _posix_records(name: str, args: Mapping[str, Any]) -> frozenset[Record]:
    """``("w", path)`` for what a call changes, ``("r", path)`` for what it depends on: a
    write depends on its parent directory existing; ``mkdir -p`` creates every missing
    directory between the root and its path."""
    if name == "write_at":
        target = _resolve(args["dir"], args["name"])
    else:
        path = args["path"]
        target = _resolve(path.as_posix() if isinstance(path, PurePosixPath) else str(path))
    out = {("w", target), ("r", posixpath.dirname(target))}
    if name == "mkdir":
        parent = posixpath.dirname(target)
        while parent.startswith(ROOT + "/") and ("w", parent) not in out:
            out.add(("w", parent))
            parent = posixpath.dirname(parent)
    return frozenset(out)


def _posix_related(a: Record, b: Record) -> bool:
    """Two writes overlap when one path is the other or lies under it; a write and a
    parent's existence only when they name one directory."""
    if "w" not in (a[0], b[0]):
        return False
    x, y = str(a[1]), str(b[1])
    if x == y:
        return True
    if a[0] != b[0]:
        return False
    short, long = sorted((x, y), key=len)
    return long.startswith(short.rstrip("/") + "/")


def _posix_spell(rng: random.Random) -> Call:
    classes = ("paths", "paths", "separators", "case", "unicode", "padding", "huge")
    kind = rng.choice(("write_at", "write", "write_p", "mkdir"))
    if kind == "write_at":
        base = rng.choice(_BASES)
        return kind, {"dir": _path(rng, rng.choice(("sub", "", ".", "/srv"))), "name": base}
    return kind, {"path": _text(rng, classes)}


def _rooted_toolset() -> Toolset:
    key = under_root(ROOT)

    @tool(
        write_targets="file:{dir}/{name}", read_targets="file:{dir}/{name}", identity={"dir": key}
    )
    def write_at(dir: str, name: str) -> str:
        """Write ``name`` inside ``dir`` (the store's own key for ``dir``)."""
        return "ok"

    @tool(write_targets="file:{path}", read_targets="file:{path}", identity={"path": key})
    def write(path: str) -> str:
        """Write a file by its path under /srv (the store's own key)."""
        return "ok"

    @tool(write_targets="file:{path}", read_targets="file:{path}", identity={"path": key})
    def write_p(path: Path) -> str:
        """Write a file by its path under /srv (a Path argument, the store's own key)."""
        return "ok"

    def mkdir_targets(args: Mapping[str, Any]) -> list[str]:
        # The directory, and each parent it may create (the root itself exists).
        path = key(args["path"])
        out = ["file:" + path]
        parent = posixpath.dirname(path)
        while parent.startswith(ROOT + "/"):
            out.append("file:" + parent)
            parent = posixpath.dirname(parent)
        return out

    @tool(write_targets=mkdir_targets, read_targets=mkdir_targets)
    def mkdir(path: str) -> str:
        """Make a directory and its parents under /srv."""
        return "ok"

    return Toolset([write_at, write, write_p, mkdir], name="rooted")


# -- object store -------------------------------------------------------------------------------


def _object_toolset() -> Toolset:
    @tool(write_targets="obj:{bucket}/{key}", read_targets="obj:{bucket}/{key}")
    def put(bucket: str, key: str) -> str:
        """Put an object (keyed by the raw bucket and key)."""
        return "ok"

    @tool(write_targets="obj:main/{key}", read_targets="obj:main/{key}")
    def put_main(key: str) -> str:
        """Put an object in the bucket 'main'."""
        return "ok"

    return Toolset([put, put_main], name="object")


def _object_records(name: str, args: Mapping[str, Any]) -> frozenset[Record]:
    bucket = args["bucket"] if name == "put" else "main"
    return frozenset({(bucket, args["key"])})


def _object_spell(rng: random.Random) -> Call:
    key = _text(rng)
    if rng.random() < 0.5:
        return "put_main", {"key": key}
    bucket = rng.choice(("main", "main/x", "Main", "main/", "logs"))
    return "put", {"bucket": bucket, "key": key}


# -- folding store ------------------------------------------------------------------------------


def _nfkc_casefold(text: str) -> str:
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKD", text).casefold())


def _folding_toolset() -> Toolset:
    @tool(write_targets="doc:{key}", read_targets="doc:{key}", canonical="case")
    def put(key: str) -> str:
        """Write a document (the store folds case and Unicode compatibility forms)."""
        return "ok"

    @tool(
        write_targets="doc:{key}/{field}",
        read_targets="doc:{key}/{field}",
        canonical="case",
    )
    def put_field(key: str, field: str) -> str:
        """Write one field of a document."""
        return "ok"

    @tool(write_targets="doc:Readme", read_targets="doc:Readme", canonical="case")
    def touch_readme() -> str:
        """Touch the readme document."""
        return "ok"

    return Toolset([put, put_field, touch_readme], name="folding")


def _folding_records(name: str, args: Mapping[str, Any]) -> frozenset[Record]:
    if name == "touch_readme":
        return frozenset({("readme",)})
    key = _nfkc_casefold(args["key"])
    if name == "put_field":
        return frozenset({(key, _nfkc_casefold(args["field"]))})
    return frozenset({(key,)})


def _tuple_related(a: Record, b: Record) -> bool:
    short, long = sorted((a, b), key=len)
    return long[: len(short)] == short


def _folding_spell(rng: random.Random) -> Call:
    classes = ("case", "unicode", "unicode", "separators", "padding", "huge")
    kind = rng.choice(("put", "put", "put_field", "touch_readme"))
    if kind == "touch_readme":
        return kind, {}
    if kind == "put_field":
        return kind, {"key": _text(rng, classes), "field": _text(rng, classes)}
    return kind, {"key": _text(rng, classes)}


# -- composite store ----------------------------------------------------------------------------


def _joined(parts: Sequence[str]) -> str:
    return "".join(parts)


def _composite_toolset() -> Toolset:
    @tool(write_targets="kv:{a}-{b}", read_targets="kv:{a}-{b}")
    def put_pair(a: str, b: str) -> str:
        """Write the record keyed f'{a}-{b}'."""
        return "ok"

    @tool(write_targets="kv:{key}", read_targets="kv:{key}")
    def put(key: str) -> str:
        """Write the record keyed by ``key``."""
        return "ok"

    @tool(write_targets="kvp:{parts}", read_targets="kvp:{parts}", identity={"parts": _joined})
    def put_parts(parts: list[str]) -> str:
        """Write the record of the ``kvp`` store keyed by the parts concatenated."""
        return "ok"

    return Toolset([put_pair, put, put_parts], name="composite")


def _composite_records(name: str, args: Mapping[str, Any]) -> frozenset[Record]:
    if name == "put_pair":
        return frozenset({(f"{args['a']}-{args['b']}",)})
    if name == "put_parts":  # a store of its own (kvp:), keyed by the joined parts
        return frozenset({("parts", _joined(args["parts"]))})
    return frozenset({(args["key"],)})


def _composite_spell(rng: random.Random) -> Call:
    pool = ("a", "b", "ab", "a-b", "b-a", "a-b-a", "", "-", "a-", "-b")
    kind = rng.choice(("put_pair", "put", "put_parts"))
    if kind == "put_pair":
        return kind, {"a": rng.choice(pool), "b": rng.choice(pool)}
    if kind == "put_parts":  # one of a few records, split into parts at random places
        word = rng.choice(("ab", "abc", "a-b", "ba"))
        cuts = sorted(rng.sample(range(len(word) + 1), rng.choice((0, 1, 2))))
        bounds = [0, *cuts, len(word)]
        return kind, {"parts": [word[i:j] for i, j in itertools.pairwise(bounds)]}
    return kind, {"key": rng.choice(pool) if rng.random() < 0.7 else _text(rng)}


# -- numeric store ------------------------------------------------------------------------------


def _numeric_toolset() -> Toolset:
    @tool(write_targets="num:{n}", read_targets="num:{n}")
    def put(n: float) -> str:
        """Write the record keyed by the number's value."""
        return "ok"

    @tool(write_targets="num:{i}", read_targets="num:{i}")
    def put_i(i: int) -> str:
        """Write the record keyed by the integer."""
        return "ok"

    @tool(write_targets="num:{s}", read_targets="num:{s}")
    def put_s(s: str) -> str:
        """Write the record keyed by the number the text spells (Decimal)."""
        return "ok"

    return Toolset([put, put_i, put_s], name="numeric")


def _number(value: Any) -> Any:
    try:
        return Decimal(str(value).strip()).normalize()
    except (ArithmeticError, ValueError):
        return str(value)


def _numeric_records(name: str, args: Mapping[str, Any]) -> frozenset[Record]:
    value = args["n"] if name == "put" else args["i"] if name == "put_i" else args["s"]
    return frozenset({(_number(value),)})


def _numeric_spell(rng: random.Random) -> Call:
    value = _numeric(rng, "")
    kind = rng.choice(("put", "put_i", "put_s", "put_s"))
    if kind == "put_s":
        return kind, {"s": str(value) if rng.random() < 0.9 else _text(rng)}
    if kind == "put_i":
        try:
            return kind, {"i": int(Decimal(str(value)))}
        except (InvalidOperation, ValueError):
            return kind, {"i": 7}
    try:
        return kind, {"n": float(value)}
    except ValueError:
        return kind, {"n": 7.0}


# -- a JavaScript store keyed by Number(value) ----------------------------------------------------

_JS_RADIX = {"0x": 16, "0o": 8, "0b": 2}


def js_number(value: Any) -> float | str:
    """``Number(value)`` as a JavaScript server reads a JSON value or a string: a double
    (``NaN`` as the text ``"NaN"``, one record for every value ``Number()`` cannot read)."""
    if isinstance(value, bool) or value is None:
        return "NaN"
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:
            return math.copysign(math.inf, value)
    text = str(value).strip(" \t\n\r\v\f")
    if text == "":
        return 0.0
    radix = _JS_RADIX.get(text[:2].lower())
    if radix is not None:
        digits = text[2:]
        if re.fullmatch("[0-9a-fA-F]+", digits):
            with contextlib.suppress(ValueError):  # (a digit beyond the base: NaN)
                return float(int(digits, radix))
        return "NaN"
    if text in ("Infinity", "+Infinity", "-Infinity"):
        return -math.inf if text[0] == "-" else math.inf
    if not _JS_DECIMAL.match(text):
        return "NaN"
    return float(text)


_JS_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")


def _js_records(name: str, args: Mapping[str, Any]) -> frozenset[Record]:
    value = args["n"] if name == "put" else args["i"] if name == "put_i" else args["s"]
    number = js_number(value)
    return frozenset({(0.0 if number == 0 else number,)})  # (String(-0) is "0")


_NEAR = (2**53, 2**53 + 1, 2**53 + 2, 2**63, 2**63 + 1, 10**17, 10**17 + 1)


def _js_spell(rng: random.Random) -> Call:
    n = rng.choice((7, 16, 1000, 0, 2**53, 2**53 + 1, 2**63 + 1, 10**17 + 1))
    forms: list[Any] = [
        n,
        str(n),
        float(n),
        rng.choice(_NEAR),
        str(rng.choice(_NEAR)),
        hex(n),
        hex(n).upper().replace("0X", "0x"),
        oct(n),
        bin(n),
        f"{n}e0",
        f"{float(n)!r}",
        "0.1",
        "0.1000000000000000055511151231257827",
        0.1,
        "-0",
        "Infinity",
        "1e400",
        "1" + "0" * 400,
    ]
    value = rng.choice(forms)
    kind = rng.choice(("put", "put_i", "put_s", "put_s"))
    if kind == "put_s":
        return kind, {"s": str(value)}
    if kind == "put_i":
        return kind, {"i": value if isinstance(value, int) else n}
    try:
        return kind, {"n": float(value)}
    except (ValueError, OverflowError):
        return kind, {"n": float(n)}


# -- every fold the proof covers, one store per pair ----------------------------------------


def _pep503(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _natural(text: str) -> str:
    return re.sub(r"(?<![0-9])0+(?=[0-9])", "", text)


def _read(reader: Callable[[str], Any], numeric: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A store reading its key with ``reader`` (text) or ``numeric`` (a JSON number); keys
    compare as Python numbers do (``7 == 7.0 == Decimal(7)``)."""

    def key(value: Any) -> Any:
        try:
            number = reader(value) if isinstance(value, str) else numeric(value)
        except (ValueError, ArithmeticError):
            return None  # the store refuses the call: it touches nothing
        return number if math.isfinite(number) else str(number)

    return key


#: How each store keys a record (a value as the tool receives it -> the store's key).
FOLDS: Mapping[str, Callable[[Any], Any]] = {
    "exact": lambda v: str(v),
    "case": lambda v: str(v).lower(),
    "pep503": lambda v: _pep503(str(v)),
    "slug": lambda v: _pep503(str(v)).strip("-"),
    "natural": lambda v: _natural(str(v)),
    "pep440": lambda v: _natural(_pep503(str(v)).strip("-")),
    "int": _read(int, int),
    "int0": _read(lambda t: int(t, 0), int),
    "float": _read(float, float),
    "decimal": _read(Decimal, Decimal),
    "js": lambda v: _js_key(v) if isinstance(v, str) else float(v),
}


def _js_key(text: str) -> Any:
    """``Number(text)``; a text it cannot read (``NaN``) is refused, as a store that validates
    its keys refuses it (one ``NaN`` record for every name is a store keyed by more than the
    text: see the docs' *What to declare*)."""
    number = js_number(text)
    return None if number == "NaN" else number


_FOLD_ALPHABET = "0017abex._-+E"
_FOLD_POOL = (
    "7", "07", "0x7", "0X07", "0o7", "0b111", "7.0", "7.", ".7", "0.7", "+7", "-7", "7_0", "70",
    "1e3", "1E3", "1000", "1.e3", "1-e3", "1e-3", "1e.3", "inf", "Infinity", "nan", "NaN",
    "1-5", "1.5", "1_5", "15", "1.05", "v1.05", "v1.5", "00x10", "0x10", "16", "a-b", "a_b",
    "A.B", "a--b", "ab", "_7", "7-", "2026-01-02", "2026.1.2", "9007199254740993",
    "9007199254740992", "0x20000000000000", "x07", "x7", "e7", "E-7",
)  # fmt: skip


def _fold_text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(_FOLD_POOL)
    return "".join(rng.choice(_FOLD_ALPHABET) for _ in range(rng.randint(1, 6)))


def _folds_model() -> StoreModel:
    """The ``folds`` store: the two calls of a pair share one store, drawn for the pair (the
    first call of each pair draws it; ``_run_store`` spells a pair's calls in turn)."""
    state: dict[str, Any] = {"calls": 0, "fold": "exact", "last": "7"}

    def spell(rng: random.Random) -> Call:
        first = state["calls"] % 2 == 0
        state["calls"] += 1
        if first:
            state["fold"] = rng.choice(sorted(FOLDS))
            text = _fold_text(rng)
        else:  # near the first: a fold of it, a fold of it re-spelled, or a fresh text
            text = state["last"]
            for _ in range(rng.randint(0, 2)):
                fold = FOLDS[rng.choice(("case", "pep503", "slug", "natural", "pep440"))]
                text = str(fold(text))
            if rng.random() < 0.3:
                text = _fold_text(rng)
        state["last"] = text
        # (the numeric store's tools: put_s(s: str), put_i(i: int), put(n: float))
        kind = rng.choice(("put_s", "put_s", "put_i", "put"))
        if kind == "put_s":
            return kind, {"s": text}
        try:
            number = float(text)
        except ValueError:
            return "put_s", {"s": text}
        if kind == "put_i" and math.isfinite(number) and number == int(number):
            return kind, {"i": int(number)}
        return ("put", {"n": number}) if math.isfinite(number) else ("put_s", {"s": text})

    def records(name: str, args: Mapping[str, Any]) -> frozenset[Record]:
        value = args["s"] if name == "put_s" else args["i"] if name == "put_i" else args["n"]
        key = FOLDS[state["fold"]](value)
        return frozenset() if key is None else frozenset({(state["fold"], key)})

    return StoreModel("folds", _numeric_toolset(), records, _equal, spell, cacheable=False)


def _equal(a: Record, b: Record) -> bool:
    return a == b


STORES: Mapping[str, Callable[[], StoreModel]] = {
    "posix": lambda: StoreModel(
        "posix", _posix_toolset(), _posix_records, _posix_related, _posix_spell
    ),
    "rooted": lambda: StoreModel(
        "rooted", _rooted_toolset(), _posix_records, _posix_related, _posix_spell
    ),
    "object": lambda: StoreModel(
        "object", _object_toolset(), _object_records, _equal, _object_spell
    ),
    "folding": lambda: StoreModel(
        "folding", _folding_toolset(), _folding_records, _tuple_related, _folding_spell
    ),
    "composite": lambda: StoreModel(
        "composite", _composite_toolset(), _composite_records, _equal, _composite_spell
    ),
    "numeric": lambda: StoreModel(
        "numeric", _numeric_toolset(), _numeric_records, _equal, _numeric_spell
    ),
    "js_number": lambda: StoreModel(
        "js_number", _numeric_toolset(), _js_records, _equal, _js_spell
    ),
    "folds": _folds_model,
}


# -- controls: each undoes one rule -------------------------------------------------------------


@contextlib.contextmanager
def _raw_components() -> Iterator[None]:
    from benchmarks.soundness_identity import IDENTITY_CONTROLS

    with IDENTITY_CONTROLS["raw_components"]():
        yield


@contextlib.contextmanager
def _per_element_identity() -> Iterator[None]:
    from harness.tools import effects
    from harness.tools.identity import Each

    original = effects._Identities.values

    def values(self: Any, name: str, value: Any) -> Any:
        keyed = self.identity.get(name)
        if keyed is not None and not isinstance(keyed, Each):
            self = effects._Identities(self.folds, {**self.identity, name: Each(keyed)})
        return original(self, name, value)

    with mock.patch.object(effects._Identities, "values", values):
        yield


@contextlib.contextmanager
def _join_absolute() -> Iterator[None]:
    from harness.tools import effects

    original = effects._Identities._typed

    def typed(self: Any, name: str, value: Any) -> Any:
        found = original(self, name, value)
        if found.text is not None and found.text.startswith("/"):
            return effects._Value(found.text.lstrip("/"))
        return found

    with mock.patch.object(effects._Identities, "_typed", typed):
        yield


CONTROLS: Mapping[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "raw_components": _raw_components,
    "per_element_identity": _per_element_identity,
    "join_absolute": _join_absolute,
}


# -- the check ----------------------------------------------------------------------------------


@dataclass
class StoreTally:
    store: str
    pairs: int = 0
    refused: int = 0  # a call's footprint did not resolve (not certifiable)
    apart: int = 0  # the certifier kept the pair apart (a conflict)
    together: int = 0  # the certifier let the pair run together
    false_fills: int = 0
    first: list[str] = field(default_factory=list)  # the first few false fills, shown whole
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "pairs": self.pairs,
            "refused": self.refused,
            "apart": self.apart,
            "together": self.together,
            "false_fills": self.false_fills,
            "first": self.first,
            "seconds": round(self.seconds, 2),
        }


def _footprint(t: Tool, args: Mapping[str, Any]) -> tuple[Footprint, Mapping[str, Any] | None]:
    checked = t.check(dict(args))
    return t.footprint(dict(args)), checked.values


def run_store(
    name: str, cases: int, seed: int = 0, *, keep: int = 5, control: str | None = None
) -> StoreTally:
    """Draw ``cases`` pairs of calls on store ``name`` and count false fills (under
    ``control``, one rule undone: :data:`CONTROLS`)."""
    with CONTROLS[control]() if control else contextlib.nullcontext():
        return _run_store(name, cases, seed, keep)


def _run_store(name: str, cases: int, seed: int, keep: int) -> StoreTally:
    store = STORES[name]()
    rng = random.Random(f"{seed}:{name}")
    tally = StoreTally(name)
    start = time.perf_counter()
    memo: dict[str, tuple[Footprint, frozenset[Record] | None]] = {}

    def resolve(call: Call) -> tuple[Footprint, frozenset[Record] | None]:
        key = json.dumps(call, sort_keys=True, default=str)
        if key in memo:
            return memo[key]
        tool_ = store.toolset[call[0]]
        footprint, values = _footprint(tool_, call[1])
        records = None if values is None else store.records(call[0], values)
        if (
            store.cacheable and len(memo) < 20_000 and len(key) < 200
        ):  # (short calls recur; huge ones do not)
            memo[key] = (footprint, records)
        return footprint, records

    for _ in range(cases):
        a, b = store.spell(rng), store.spell(rng)
        tally.pairs += 1
        fa, ra = resolve(a)
        fb, rb = resolve(b)
        if fa.error is not None or fb.error is not None or ra is None or rb is None:
            tally.refused += 1
            continue
        if conflict(fa, fb) is not None:
            tally.apart += 1
            continue
        tally.together += 1
        if any(store.related(x, y) for x in ra for y in rb):
            tally.false_fills += 1
            if len(tally.first) < keep:
                tally.first.append(
                    f"{a[0]}({_show(a[1])}) and {b[0]}({_show(b[1])}) touch "
                    f"{sorted(map(str, ra))} and {sorted(map(str, rb))}; targets "
                    f"{sorted(fa.writes or ())} and {sorted(fb.writes or ())}"
                )
    tally.seconds = time.perf_counter() - start
    return tally


def _show(args: Mapping[str, Any]) -> str:
    text = json.dumps(args, ensure_ascii=True)
    return text if len(text) <= 200 else text[:200] + f"… ({len(text)} characters)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.reference_stores",
        description="Check the certifier against models of real stores with hostile spellings.",
    )
    parser.add_argument("--cases", type=int, default=100_000, help="pairs per store")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--stores", nargs="+", choices=sorted(STORES), default=list(STORES), help="store models"
    )
    parser.add_argument("--json", type=Path, help="write the tally as JSON here")
    parser.add_argument(
        "--control", choices=sorted(CONTROLS), help="undo one rule (must find false fills)"
    )
    args = parser.parse_args(argv)
    tallies = []
    print(f"{'store':<10} {'pairs':>8} {'refused':>8} {'apart':>8} {'together':>9} {'false':>6}")
    for name in args.stores:
        t = run_store(name, args.cases, args.seed, control=args.control)
        tallies.append(t)
        print(
            f"{t.store:<10} {t.pairs:>8} {t.refused:>8} {t.apart:>8} {t.together:>9} "
            f"{t.false_fills:>6}   ({t.seconds:.1f} s)"
        )
        for line in t.first:
            print(f"    false fill: {line}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([t.as_dict() for t in tallies], indent=1) + "\n")
    return 1 if any(t.false_fills for t in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
