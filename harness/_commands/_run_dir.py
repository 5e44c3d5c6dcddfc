"""The directory of a journaled ``harness run``: ``DIR/run.json`` (the options that define the
run, so ``--resume DIR`` needs no others) and one folder per arm, or per job of a batch.

Every failure to use it is a one-line :class:`~harness.errors.JournalError` (exit 2): a
directory that cannot be written, one that holds a run already, one that holds none, or arm
folders that show a journal was deleted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import JournalError
from harness.journal import io_error

__all__ = ("arm_folder", "check_arm_folders", "record_run", "recorded_run", "resume_hint")


def record_run(directory: Path, options: Mapping[str, Any]) -> Path:
    """Start the journaled run in ``directory``: write ``run.json`` (refused when the directory
    holds a run already)."""
    if (directory / "run.json").exists():
        raise JournalError(
            f"{directory} holds a journaled run already; resume it with `harness run --resume "
            f"{directory}` or choose another directory."
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        text = json.dumps(dict(options), indent=2, default=str) + "\n"
        (directory / "run.json").write_text(text, encoding="utf-8")
    except OSError as exc:
        raise io_error(directory, exc, "create") from None
    return directory


def recorded_run(directory: Path) -> dict[str, Any]:
    """The options ``run.json`` in ``directory`` recorded (a missing or unreadable one is
    refused: nothing runs)."""
    path = directory / "run.json"
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        reason = "it does not exist" if not path.exists() else str(exc)
        raise JournalError(
            f"{directory} is not a journaled `harness run` ({path}: {reason}); nothing ran. "
            "Check the path, or start one with `harness run ... --journal DIR`."
        ) from None
    if not isinstance(recorded, dict):
        raise JournalError(f"{path} is not a run's options (a JSON object); nothing ran.")
    return recorded


def arm_folder(directory: Path, label: str) -> Path:
    """Where arm ``label`` of the run in ``directory`` keeps its journal (and store)."""
    return directory / label.replace("+", "_")


def check_arm_folders(directory: Path, labels: Sequence[str]) -> None:
    """Arms run one after another, each journaled in its folder as it starts: an arm with no
    folder before one that has a folder lost its journal. Resuming would run its writes again."""
    present = [arm_folder(directory, label).exists() for label in labels]
    for i, label in enumerate(labels):
        if not present[i] and any(present[i + 1 :]):
            later = labels[present.index(True, i + 1)]
            raise JournalError(
                f"Arm {label}'s folder {arm_folder(directory, label)} is gone although arm "
                f"{later}, which runs after it, started: its journal was deleted and resuming "
                "would run its writes again. Nothing ran; restore the folder or start over in "
                "a new directory."
            )


def resume_hint(directory: Path | None) -> str:
    """What an interrupted ``harness run`` says about the work it leaves."""
    if directory is not None:
        return (
            f"each arm's journal in {directory} is flushed: continue with "
            f"`harness run --resume {directory}`."
        )
    return "arms that finished are printed above (run with --journal DIR to make it resumable)."
