"""Finding and loading the workspace skill manifest (``manifests/workspace.toml``).

The manifest lives in the repository's ``manifests/`` folder and ships as package data beside
this module (``workspace.toml`` here is a symlink to it; the wheel carries a copy), so it is
found in an editable and a wheel install alike. :func:`load_workspace_manifest` parses it with
:func:`harness.skills.manifest.load_manifest` and then checks it against the toolset: every tool a
phase names exists, and every ``"tool.argument"`` key names a real argument of that tool.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import ManifestError
from harness.skills.manifest import Manifest, load_manifest
from harness.tools import Toolset
from harness.toolsets.workspace.store import new_state
from harness.toolsets.workspace.tools import make_toolset

__all__ = ("MANIFEST_PATH", "check_arguments", "load_workspace_manifest")

#: The packaged workspace manifest (in the repository: ``manifests/workspace.toml``).
MANIFEST_PATH = Path(__file__).with_name("workspace.toml")


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
            f"Workspace manifest {str(target)!r} does not exist; pass the manifest's path, or "
            f"None for the packaged one ({MANIFEST_PATH})."
        )
    manifest = load_manifest(target)
    check_arguments(manifest, make_toolset(new_state(0, size=2)))
    return manifest
