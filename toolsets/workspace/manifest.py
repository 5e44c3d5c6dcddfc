"""Finding and loading the workspace skill manifest (``manifests/workspace.toml``).

The manifest lives in the repository's ``manifests/`` folder (the project is installed
editable, so the path is found from this file). :func:`load_workspace_manifest` parses it with
:func:`harness.manifest.load_manifest` and then checks it against the toolset: every tool a
phase names exists, and every ``"tool.argument"`` key names a real argument of that tool.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import ManifestError
from harness.manifest import Manifest, load_manifest
from harness.tools import Toolset
from toolsets.workspace.store import new_state
from toolsets.workspace.tools import make_toolset

__all__ = ("MANIFEST_PATH", "check_arguments", "load_workspace_manifest")

#: Where the workspace manifest ships: ``<repo>/manifests/workspace.toml``.
MANIFEST_PATH = Path(__file__).resolve().parents[2] / "manifests" / "workspace.toml"


def check_arguments(manifest: Manifest, toolset: Toolset) -> None:
    """Every ``"tool.argument"`` source key must name an argument the tool's schema has."""
    manifest.check_tools(toolset)
    for skill in manifest.skills.values():
        for phase in skill.phases:
            for tool_name, argument in phase.args:
                known = sorted(toolset[tool_name].parameters.get("properties", {}))
                if argument not in known:
                    raise ManifestError(
                        f"{manifest.source}: skill {skill.name!r}, phase {phase.name!r}, field "
                        f"'args.{tool_name}.{argument}': {tool_name!r} has no argument "
                        f"{argument!r}; its arguments are {known}."
                    )


def load_workspace_manifest(path: str | Path | None = None) -> Manifest:
    """The workspace skills, validated against the workspace toolset.

    ``path`` defaults to :data:`MANIFEST_PATH`. Raises :class:`~harness.errors.ManifestError`
    naming the file, skill, phase and field when it does not validate.
    """
    target = MANIFEST_PATH if path is None else Path(path)
    if not target.is_file():
        raise ManifestError(
            f"Workspace manifest {str(target)!r} does not exist. It ships in the repository's "
            "manifests/ folder: run from a checkout installed with `pip install -e . --no-deps`, "
            "or pass the manifest's path explicitly."
        )
    manifest = load_manifest(target)
    check_arguments(manifest, make_toolset(new_state(0, size=2)))
    return manifest
