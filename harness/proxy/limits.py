"""The proxy's edge: JSON from a client decoded once, with limits, so nothing behind it sees
input it cannot handle.

:func:`decode_json` parses a request body (or a JSON header, or a call's argument string)
and refuses, as a :class:`~harness.proxy.protocol.BadRequest` (a 400 in the route's own
error shape), what would otherwise fail deep inside the proxy as a 500: nesting deeper than
:attr:`Limits.max_depth` (Python's parser and every recursive walk after it have a stack),
a number with more than :attr:`Limits.max_int_digits` digits, ``NaN`` / ``Infinity`` or a
number too large for a float (JSON has none; the upstream would get invalid JSON), and a
string holding a lone surrogate such as ``\\ud800`` (it cannot be written as UTF-8, so
neither the upstream nor a hash could take it). Each message says the fact, the number and
the fix, and nothing of the server (no path, no Python hint).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from harness._bounded_json import NotFinite, NumberTooLong, number_hooks
from harness.proxy.protocol import BadRequest

__all__ = ("Limits", "check_arguments", "decode_json")


@dataclass(frozen=True)
class Limits:
    """What the edge accepts: ``max_depth`` (objects and arrays nested in one another, the
    body itself the first) and ``max_int_digits`` (digits of one integer)."""

    max_depth: int = 64
    max_int_digits: int = 1000


def _loads(text: str | bytes, limits: Limits) -> Any:
    """``json.loads`` with the number limits (:func:`harness._bounded_json.number_hooks`:
    raises ``NumberTooLong``, ``NotFinite``, ``RecursionError`` or ``ValueError``)."""
    return json.loads(text, **number_hooks(limits.max_int_digits))


def decode_json(text: str | bytes, *, what: str, limits: Limits, param: str | None = None) -> Any:
    """``text`` parsed and checked (see the module docstring); ``what`` names it in an
    error (``"The request body"``, ``"X-Harness-Inputs"``), ``param`` is the error's
    parameter."""
    try:
        value = _decoded(text, what, limits, param)
    except ValueError as exc:
        raise BadRequest(f"{what} is not valid JSON: {exc}.", param=param) from None
    check_value(value, what=what, limits=limits, param=param, texts=_may_hold_surrogates(text))
    return value


#: What a lone surrogate can come from in JSON text: a ``\\uD800``-``\\uDFFF`` escape.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def _may_hold_surrogates(text: str | bytes) -> bool:
    """Whether decoding ``text`` can have given a lone surrogate — an escape of one, or its
    bytes (``json.loads`` decodes bytes with ``surrogatepass``) —, else its strings need no
    check: a scan in C instead of a walk over every string."""
    if isinstance(text, bytes):
        return b"\xed" in text or _SURROGATE_ESCAPE_BYTES.search(text) is not None
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
    return _SURROGATE_ESCAPE.search(text) is not None


def _decoded(text: str | bytes, what: str, limits: Limits, param: str | None) -> Any:
    """``text`` parsed, every limit but plain invalid JSON (a ``ValueError``) refused."""
    try:
        return _loads(text, limits)
    except NumberTooLong as exc:
        raise BadRequest(
            f"{what} holds an integer of {exc.digits:,} digits, over this server's limit of "
            f"{limits.max_int_digits:,}; send such a number as a string.",
            param=param,
        ) from None
    except NotFinite as exc:
        raise BadRequest(
            f"{what} holds the number {exc.text!r}, which JSON cannot carry (not finite); "
            "send a finite number, or the value as a string.",
            param=param,
        ) from None
    except RecursionError:
        raise BadRequest(_too_deep(what, limits, None), param=param) from None


def check_value(
    value: Any,
    *,
    what: str,
    limits: Limits,
    param: str | None = None,
    texts: bool = True,
) -> None:
    """Refuse ``value`` (decoded JSON) nested deeper than ``limits.max_depth`` or, with
    ``texts``, holding a string with a lone surrogate, naming where (iteratively: no recursion
    to overflow). Only containers are walked unless ``texts``; a path is spelled only for an
    error (each entry links to its parent's)."""
    # (item, depth, parent entry, key in the parent)
    stack: list[tuple[Any, int, Any, str | int | None]] = [(value, 0, None, None)]
    while stack:
        entry = stack.pop()
        item, depth = entry[0], entry[1]
        if isinstance(item, str):
            if not item.isascii():
                _check_text(item, what, _path(entry), param)
            continue
        if isinstance(item, dict):
            if depth >= limits.max_depth:
                raise BadRequest(_too_deep(what, limits, _path(entry)), param=param)
            for key, child in item.items():
                if texts and not key.isascii():
                    _check_text(key, what, _path(entry), param)
                if isinstance(child, dict | list) or (texts and isinstance(child, str)):
                    stack.append((child, depth + 1, entry, key))
        elif isinstance(item, list):
            if depth >= limits.max_depth:
                raise BadRequest(_too_deep(what, limits, _path(entry)), param=param)
            for index, child in enumerate(item):
                if isinstance(child, dict | list) or (texts and isinstance(child, str)):
                    stack.append((child, depth + 1, entry, index))


def _path(entry: tuple[Any, int, Any, str | int | None]) -> tuple[str | int, ...]:
    """The keys from the top to ``entry`` (see :func:`check_value`)."""
    keys: list[str | int] = []
    while entry is not None and entry[3] is not None:
        keys.append(entry[3])
        entry = entry[2]
    return tuple(reversed(keys))


def check_arguments(arguments: str, *, what: str, limits: Limits, param: str | None) -> None:
    """A call's argument string: when it is JSON, the same limits as the body (it is parsed
    again behind the edge); text that is not JSON is the model's own and passes."""
    if (
        len(arguments) <= limits.max_int_digits
        and arguments.count("[") + arguments.count("{") <= limits.max_depth
        and "\\u" not in arguments
    ):
        return  # cannot nest too deep, hold too long a number or a surrogate escape
    try:
        value = _decoded(arguments, what, limits, param)
    except ValueError:
        return
    check_value(value, what=what, limits=limits, param=param)


def _check_text(text: str, what: str, path: tuple[str | int, ...], param: str | None) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = text[exc.start]
        raise BadRequest(
            f"{what} holds a lone surrogate ({ascii(char)[1:-1]}) at {_where(path)}: text must "
            "be valid Unicode; send the character as a complete UTF-16 pair or drop it.",
            param=param,
        ) from None


def _too_deep(what: str, limits: Limits, path: tuple[str | int, ...] | None) -> str:
    at = f" (at {_where(path)})" if path else ""
    return (
        f"{what} is nested more than {limits.max_depth} levels deep{at}, over this server's "
        "limit; flatten the value, or raise harness serve --max-depth."
    )


def _where(path: tuple[str | int, ...]) -> str:
    """A JSON path like ``messages[1].content`` (bounded)."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else f".{key}" if out else str(key)
    out = out or "the top level"
    return out if len(out) <= 120 else out[:60] + "..." + out[-57:]
