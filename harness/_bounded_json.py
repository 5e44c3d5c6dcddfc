"""JSON read with limits: what crosses a boundary is parsed once, totally, in bounded time.

:func:`loads_bounded` is ``json.loads`` with limits on nesting, the length of a number and
the size of the text. Anything past a limit raises :class:`JSONLimitError` (a
``ValueError``) with a sentence that says which limit and by how much — never a
``RecursionError``, never Python's own integer-digit error, never seconds of work: a
5,000-digit integer is refused before Python converts it, ``1e400`` (infinite as a float)
is refused, and nesting is measured without recursion.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = (
    "MAX_DEPTH",
    "MAX_NUMBER_CHARS",
    "MAX_TEXT_CHARS",
    "JSONLimitError",
    "NotFinite",
    "NumberTooLong",
    "loads_bounded",
    "nesting",
    "number_hooks",
)

#: The deepest nesting of objects and arrays a value may have.
MAX_DEPTH = 64
#: The most digits of a number in a call's arguments: 100 is beyond any id or amount.
MAX_NUMBER_CHARS = 100
#: The longest text parsed (characters).
MAX_TEXT_CHARS = 8 * 2**20


class JSONLimitError(ValueError):
    """The text is JSON past one of the limits (the message says which)."""


class NumberTooLong(JSONLimitError):
    """A number literal with more digits than allowed (``digits``: how many it has)."""

    def __init__(self, digits: int, limit: int) -> None:
        super().__init__(f"an integer of {digits} digits (at most {limit} are read)")
        self.digits = digits


class NotFinite(JSONLimitError):
    """``NaN``, ``Infinity`` or a number too large for a float (``text``: its spelling)."""

    def __init__(self, text: str) -> None:
        super().__init__(f"the number {text} is not finite (JSON has none)")
        self.text = text


def number_hooks(max_digits: int) -> dict[str, Any]:
    """``json.loads`` keyword arguments that read numbers within limits: an integer of more
    than ``max_digits`` digits raises :class:`NumberTooLong` before Python converts it (so
    never Python's own digit-limit error), a real of more than ``max_digits`` characters
    too, and ``NaN``, ``Infinity`` or a real beyond the double range :class:`NotFinite`.
    The one reading of numbers for every edge (call arguments, the proxy's requests)."""

    def integer(text: str) -> int:
        digits = len(text) - text.startswith("-")
        if digits > max_digits:
            raise NumberTooLong(digits, max_digits)
        return int(text)

    def real(text: str) -> float:
        if len(text) > max_digits + 8:  # (sign, point, exponent)
            raise NumberTooLong(len(text), max_digits)
        value = float(text)
        if not math.isfinite(value):
            raise NotFinite(text[:40])
        return value

    def constant(text: str) -> Any:
        raise NotFinite(text)

    return {"parse_int": integer, "parse_float": real, "parse_constant": constant}


def loads_bounded(text: str) -> Any:
    """``json.loads(text)`` within the limits above; raises ``json.JSONDecodeError`` for
    text that is not JSON and :class:`JSONLimitError` for JSON past a limit."""
    if len(text) > MAX_TEXT_CHARS:
        raise JSONLimitError(f"{len(text):,} characters (at most {MAX_TEXT_CHARS:,} are read)")
    try:
        value = json.loads(text, **number_hooks(MAX_NUMBER_CHARS))
    except RecursionError:
        raise JSONLimitError(f"nested deeper than {MAX_DEPTH} levels") from None
    depth = nesting(value)
    if depth > MAX_DEPTH:
        raise JSONLimitError(f"nested {depth} levels deep (at most {MAX_DEPTH})")
    return value


def nesting(value: Any) -> int:
    """How deeply mappings and sequences (lists, tuples, sets) nest in ``value`` (0 for a
    scalar); iterative."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple | set | frozenset):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest
