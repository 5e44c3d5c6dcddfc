"""The workspace: a typed read/write document store, its tools and its skill manifest.

The workload (``harness/bench/workload.py``), the certification kit and the CLI use this contract::

    from harness.toolsets.workspace import new_state, make_toolset, fingerprint

    state = new_state(seed)            # a seeded in-memory store (same seed, same bytes)
    toolset = make_toolset(state)      # harness Toolset bound to that store
    ...                                # run calls (harness.tools.execute.execute_call, the loop)
    fingerprint(state)                 # SHA-256 hex of the store: compare final states

* ``new_state(seed: int = 0, *, size: int = 24) -> WorkspaceState`` — the state factory.
  ``state.snapshot()`` is plain JSON data, ``state.copy()`` an independent copy.
* ``make_toolset(state, *, latency=None, timeout_s=30.0) -> Toolset`` — eight tools:
  reads ``list_docs``, ``read_doc``, ``get_field`` (read-only, with read targets); idempotent
  writes ``set_status``, ``set_owner``, ``set_priority``, ``add_tag``; and the non-idempotent
  ``append_note``. Targets are per document field, ``"doc:{key}/{field}"`` (table in
  :mod:`harness.toolsets.workspace.tools`). ``latency`` is a fixed ``L`` in seconds or a
  :class:`Latency` (``N(L, σ_L)`` drawn per ``(seed, call)``, spent in ``anyio.sleep``).
* ``fingerprint(state) -> str`` — equal iff the stores are equal.
* ``load_workspace_manifest(path=None) -> Manifest`` — ``manifests/workspace.toml``, checked
  against the toolset's tool and argument names.
* ``resources(state)`` and ``example_values(state)`` — for the certification kit
  (:mod:`harness.toolsets.workspace.certification`): ``harness certify harness.toolsets.workspace``.

Every effect declaration is true: a certified window (D1 on these effects) run concurrently
in any order leaves the same results and the same fingerprint as the serial run.
"""

from __future__ import annotations

from harness.toolsets.workspace.certification import example_values, resources
from harness.toolsets.workspace.latency import Latency
from harness.toolsets.workspace.manifest import (
    MANIFEST_PATH,
    check_arguments,
    load_workspace_manifest,
)
from harness.toolsets.workspace.store import (
    FIELDS,
    OWNERS,
    STATUSES,
    TAGS,
    Document,
    WorkspaceState,
    fingerprint,
    new_state,
)
from harness.toolsets.workspace.tools import TOOL_NAMES, make_toolset

__all__ = (
    "FIELDS",
    "MANIFEST_PATH",
    "OWNERS",
    "STATUSES",
    "TAGS",
    "TOOL_NAMES",
    "Document",
    "Latency",
    "WorkspaceState",
    "check_arguments",
    "example_values",
    "fingerprint",
    "load_workspace_manifest",
    "make_toolset",
    "new_state",
    "resources",
)
