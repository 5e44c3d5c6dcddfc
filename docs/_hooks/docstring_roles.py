"""Griffe extension: Sphinx roles in docstrings become cross-links in the API reference.

The package's docstrings name other objects the Sphinx way (``:class:`~harness.tools.Tool```,
``:func:`run_loop```). Markdown would print the role verbatim; this turns each into an
optional autorefs link: a link when the target is documented on some page, plain code when
it is not (so a reference to a private helper never breaks the strict build).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ("ROLE", "SphinxRoles", "to_autorefs")

ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):"
    r"`(?P<tilde>~?)(?P<target>[\w.]+?)(?P<call>\(\))?`"
)


def to_autorefs(text: str, module: str) -> str:
    """``text`` with every Sphinx role replaced by an optional autorefs link; a target with no
    dot is taken to live in ``module``."""

    def link(match: re.Match[str]) -> str:
        target = match["target"]
        shown = target.rsplit(".", 1)[-1] if match["tilde"] else target
        identifier = target if "." in target else f"{module}.{target}"
        call = match["call"] or ""
        return f'<autoref identifier="{identifier}" optional><code>{shown}{call}</code></autoref>'

    return ROLE.sub(link, text)


class SphinxRoles(griffe.Extension):
    """Rewrites roles in every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_autorefs(obj.docstring.value, obj.module.path)
