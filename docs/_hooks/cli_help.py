"""MkDocs hook: the command-line reference is generated from the parser itself.

A line ``<!-- harness-help: engine prepare -->`` in a page becomes a ``text`` block holding
``harness engine prepare --help`` exactly as the installed ``harness`` prints it (at 100
columns), so the reference cannot drift from the code. A marker that names no command fails
the build. ``tests/test_docs.py`` checks that every command has a marker.
"""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

__all__ = ("MARKER", "command_parsers", "on_page_markdown", "render_help")

#: ``<!-- harness-help: PATH -->`` on a line of its own; PATH is empty for ``harness`` itself.
MARKER = re.compile(r"^<!-- harness-help:(?P<path>[^>]*)-->[ \t]*$", re.MULTILINE)

#: The width the help is wrapped at, whatever terminal builds the site.
COLUMNS = "100"


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command of ``harness`` by its path: ``""`` (the root), ``"run"``,
    ``"engine prepare"``, … in the order ``--help`` lists them."""
    from harness._commands.cli import COMMANDS, build_parser

    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        found[path] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}".strip())

    found[""] = build_parser()
    # The CLI builds only the command its argv names (so `harness --help` imports none), so
    # each command's parser comes from a parser built for that command.
    for name in COMMANDS:
        for action in build_parser([name])._actions:
            if isinstance(action, argparse._SubParsersAction):
                walk(action.choices[name], name)
    return found


def render_help(parser: argparse.ArgumentParser) -> str:
    """``parser.format_help()`` wrapped at :data:`COLUMNS` columns."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS
    try:
        return parser.format_help()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def expand(markdown: str, parsers: dict[str, argparse.ArgumentParser]) -> str:
    """Replace every marker of ``markdown`` with its command's help (a ``text`` block)."""

    def block(match: re.Match[str]) -> str:
        path = " ".join(match["path"].split())
        if path not in parsers:
            known = ", ".join(repr(p) for p in parsers if p)
            raise ValueError(f"no command 'harness {path}'; the commands are {known}")
        command = f"harness {path}".strip()
        return f"```text\n$ {command} --help\n{render_help(parsers[path]).rstrip()}\n```"

    return MARKER.sub(block, markdown)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if not MARKER.search(markdown):
        return markdown
    try:
        return expand(markdown, command_parsers())
    except ValueError as exc:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_path}: {exc}") from exc
