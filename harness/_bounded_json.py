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
    "loads_bounded",
)

#: The deepest nesting of objects and arrays a value may have.
MAX_DEPTH = 64
#: The longest number literal (characters): 100 digits is beyond any id or amount.
MAX_NUMBER_CHARS = 100
#: The longest text parsed (characters).
MAX_TEXT_CHARS = 8 * 2**20


class JSONLimitError(ValueError):
    """The text is JSON past one of the limits (the message says which)."""


def _integer(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise JSONLimitError(
            f"an integer of {len(text)} digits (at most {MAX_NUMBER_CHARS} are read)"
        )
    return int(text)


def _real(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise JSONLimitError(
            f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS} are read)"
        )
    value = float(text)
    if not math.isfinite(value):
        raise JSONLimitError(f"the number {text} is out of range")
    return value


def _constant(text: str) -> Any:
    raise JSONLimitError(f"{text} is not a JSON number")


def loads_bounded(text: str) -> Any:
    """``json.loads(text)`` within the limits above; raises ``json.JSONDecodeError`` for
    text that is not JSON and :class:`JSONLimitError` for JSON past a limit."""
    if len(text) > MAX_TEXT_CHARS:
        raise JSONLimitError(f"{len(text):,} characters (at most {MAX_TEXT_CHARS:,} are read)")
    try:
        value = json.loads(text, parse_int=_integer, parse_float=_real, parse_constant=_constant)
    except RecursionError:
        raise JSONLimitError(f"nested deeper than {MAX_DEPTH} levels") from None
    depth = nesting(value)
    if depth > MAX_DEPTH:
        raise JSONLimitError(f"nested {depth} levels deep (at most {MAX_DEPTH})")
    return value


def nesting(value: Any) -> int:
    """How deeply objects and arrays nest in ``value`` (0 for a scalar); iterative."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest
