"""Result text that varies from run to run, and how the kit masks it.

The kit compares results across runs on fresh states (once and twice, serial and
concurrent). Text that differs on every run however the calls are scheduled — a time, a
temporary file's random name, a UUID — would make those comparisons fail for no fault of the
declarations. A toolset marks it (``harness certify --nondeterministic``, or
:class:`~harness.certkit.mcp_server.MCPServer`'s ``nondeterministic``): each pattern's matches
become ``<nondeterministic>`` before results are compared. A masked difference cannot be seen,
so mark only what is really noise. Unmarked, the kit tells noise from a real difference by
running the same calls twice on fresh states (:func:`harness.certkit._base.varying`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from harness.errors import ConfigError

__all__ = ("MASK", "NONDETERMINISTIC_PRESETS", "normaliser")

#: Named patterns for ``nondeterministic``: what a server's results commonly hold that is
#: different on every run.
NONDETERMINISTIC_PRESETS: Mapping[str, str] = {
    # ISO 8601 (2026-12-06T07:58:54.123Z), JavaScript's Date.toString() and toUTCString(),
    # RFC 2822, and epoch seconds or milliseconds standing alone.
    "times": (
        r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
        r"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),? (?:\d{1,2} )?"
        r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (?:\d{1,2} )?\d{4}"
        r" \d{2}:\d{2}:\d{2}(?: GMT[+-]\d{4}(?: \([^)]*\))?| GMT)?"
        r"|\b1[6-9]\d{8}(?:\d{3})?\b"
    ),
    # a temporary file's random part: name.1a2b3c4d.tmp, tmp-12345-AbCdEf, /tmp/tmpk3j_x9
    "temp-names": r"\.[0-9a-z]{6,}\.tmp\b|\btmp[-_.]?[0-9A-Za-z_-]{5,}\b",
    "uuids": r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
}
MASK = "<nondeterministic>"


def normaliser(patterns: Sequence[str]) -> Callable[[str], str]:
    """The text normalisation ``patterns`` asks for: each preset name (see
    :data:`NONDETERMINISTIC_PRESETS`) or regular expression's matches become ``<nondeterministic>``."""
    compiled: list[re.Pattern[str]] = []
    for pattern in patterns:
        source = NONDETERMINISTIC_PRESETS.get(pattern, pattern)
        try:
            compiled.append(re.compile(source))
        except re.error as exc:
            presets = ", ".join(NONDETERMINISTIC_PRESETS)
            raise ConfigError(
                f"--nondeterministic {pattern!r} is neither a preset ({presets}) nor a regular "
                f"expression: {exc}."
            ) from None
        if compiled[-1].fullmatch(""):
            raise ConfigError(
                f"--nondeterministic {pattern!r} matches the empty text: it would mask "
                "everything; anchor it to what really varies."
            )

    def normalise(text: str) -> str:
        for regex in compiled:
            text = regex.sub(MASK, text)
        return text

    return normalise
