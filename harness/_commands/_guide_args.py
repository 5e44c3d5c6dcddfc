"""The manifest-guided levers as options (``harness run`` and ``harness bench``).

Each narrows what the model may emit from what the skill's manifest says, identically for every
arm (:mod:`harness.loop.levers`): ``--skill-tools`` offers only the skill's tools,
``--input-enums`` lets an input-sourced argument take only the task input's values, and
``--open-slots`` (which implies ``--input-enums``) lets it take only the values no earlier call
used, turn by turn, in the reply grammar only.
"""

from __future__ import annotations

import argparse

from harness.loop.levers import LEVERS

__all__ = ("GUIDES", "add_guide_arguments", "guides")

#: The option names (``--input-enums`` ...) as ``LoopConfig`` / ``JobSpec`` field names.
GUIDES = LEVERS


def add_guide_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "manifest-guided decoding (the same for every arm; needs the task's manifest skill)"
    )
    group.add_argument(
        "--input-enums",
        action="store_true",
        default=None,
        help="an argument the manifest sources from a task input may only take that input's "
        "values (an enum in the reply grammar and in the tools the prompt shows)",
    )
    group.add_argument(
        "--skill-tools",
        action="store_true",
        default=None,
        help="offer only the tools the skill's phases name",
    )
    group.add_argument(
        "--open-slots",
        action="store_true",
        default=None,
        help="--input-enums, and each turn only the values no earlier call of the tool used "
        "(in the reply grammar only; when none remain, all of them again)",
    )


def guides(args: argparse.Namespace) -> dict[str, bool]:
    """The levers the options set, as ``JobSpec`` fields (all false when not given)."""
    return {name: bool(getattr(args, name, None)) for name in GUIDES}
