"""What the certification kit needs from the workspace beyond the core contract.

:func:`resources` gives one fingerprint per resource, named exactly as the tools' targets name
them (``"doc:{key}/{field}"`` and ``"catalog"``), so ``harness certify`` can check that a call
changes nothing outside its declared write targets. :func:`example_values` gives argument
values that exist in a fresh store, so generated calls mostly hit real documents instead of
failing with "no document with key ...".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from harness.toolsets.workspace.store import FIELDS, OWNERS, TAGS, WorkspaceState

__all__ = ("example_values", "resources")


def resources(state: WorkspaceState) -> dict[str, str]:
    """Every resource of the store and its value as canonical JSON: ``catalog`` (the sorted
    keys) and ``doc:{key}/{field}`` for every field of every document."""
    out = {"catalog": json.dumps(state.keys())}
    for key, doc in state.snapshot().items():
        for name in FIELDS:
            out[f"doc:{key}/{name}"] = json.dumps(doc[name], sort_keys=True)
    return out


def example_values(state: WorkspaceState) -> Mapping[str, Sequence[Any]]:
    """Values to favour when generating arguments: a few keys of the store (few on purpose,
    so windows often touch one document in different fields — what per-field targets must
    get right), the seeded owners and tags, and two note texts."""
    return {
        "key": state.keys()[:6],
        "owner": OWNERS,
        "tag": TAGS,
        "text": ("checked", "needs review"),
    }
