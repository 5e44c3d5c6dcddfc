"""Fresh cases for issue 40, written as a new user would from docs/certification.md: a file
server shaped like the reference MCP filesystem server (paths relative to a root or absolute
under it, Unicode names normalised to NFC by the server, ``create_directory`` making its
parents, ``move_file``, ``list_directory``, ``get_file_info``), declared honestly under the
proof rule, and sequences of calls that touch one file under different spellings. Every arm
must give the serial run's results and final state (or not certify), and none may raise.
"""

from __future__ import annotations

import posixpath
import random
import unicodedata
from collections.abc import Mapping
from typing import Any

import anyio.lowlevel
import pytest

from benchmarks.soundness_identity import differences, run_arms
from harness import Toolset, tool
from harness.tools.identity import under_root

ROOT = "/srv"
_ROOTED = under_root(ROOT)


def _key(path: str) -> str:
    """How the server keys a file: joined under the root, normalised, NFC."""
    return unicodedata.normalize("NFC", _ROOTED(path))


def _ancestors_and_self(args: Mapping[str, Any]) -> list[str]:
    """What ``create_directory`` may create: the directory and every parent under the root
    (the user's target function, keyed as the server keys paths)."""
    path = _key(args["path"])
    out = [f"file:{path}"]
    parent = posixpath.dirname(path)
    while parent.startswith(ROOT + "/"):
        out.append(f"file:{parent}")
        parent = posixpath.dirname(parent)
    return out


def file_server(store: dict[str, Any]) -> Toolset:
    store.setdefault("dirs", [ROOT])
    store.setdefault("files", {})
    key = {"path": _key}

    def exists(directory: str) -> bool:
        return directory in store["dirs"]

    @tool(write_targets="file:{path}", read_targets="file:{path}", identity=key)
    async def write_file(path: str, content: str) -> str:
        """Write a file (its directory must exist)."""
        target = _key(path)
        present, before = exists(posixpath.dirname(target)), store["files"].get(target)
        await anyio.lowlevel.checkpoint()  # (the server stats, then writes)
        if not present:
            return f"error: no directory for {path}"
        store["files"][target] = content
        return f"wrote {path} (was {before!r})"

    @tool(read_only=True, read_targets="file:{path}", identity=key)
    async def read_text_file(path: str) -> str:
        """Read a file."""
        await anyio.lowlevel.checkpoint()
        return str(store["files"].get(_key(path), "error: no such file"))

    @tool(read_only=True, read_targets="file:{path}", identity=key)
    async def list_directory(path: str) -> str:
        """List a directory's files and directories."""
        base = _key(path)
        await anyio.lowlevel.checkpoint()
        names = [p for p in [*store["files"], *store["dirs"]] if posixpath.dirname(p) == base]
        return ", ".join(sorted(names)) or "(empty)"

    @tool(write_targets=_ancestors_and_self, read_targets=_ancestors_and_self)
    async def create_directory(path: str) -> str:
        """Create a directory and its parents."""
        target = _key(path)
        made = []
        while target not in store["dirs"] and target.startswith(ROOT + "/"):
            made.append(target)
            target = posixpath.dirname(target)
        await anyio.lowlevel.checkpoint()
        store["dirs"].extend(d for d in reversed(made) if d not in store["dirs"])
        return f"created {len(made)}"

    @tool(
        write_targets=["file:{source}", "file:{destination}"],
        read_targets=["file:{source}", "file:{destination}"],
        identity={"source": _key, "destination": _key},
    )
    async def move_file(source: str, destination: str) -> str:
        """Move a file."""
        a, b = _key(source), _key(destination)
        content = store["files"].get(a)
        await anyio.lowlevel.checkpoint()
        if content is None or a not in store["files"]:
            return "error: no such file"
        del store["files"][a]
        store["files"][b] = content
        return "moved"

    return Toolset([write_file, read_text_file, list_directory, create_directory, move_file])


_SPELLINGS = {
    "notes.txt": ["notes.txt", "./notes.txt", "/srv/notes.txt", "a/../notes.txt"],
    "a/b.txt": ["a/b.txt", "a//b.txt", "/srv/a/b.txt", "./a/./b.txt"],
    "a/c/d.txt": ["a/c/d.txt", "/srv/a/c/d.txt", "a/./c//d.txt"],
    "café.md": ["caf\u00e9.md", "cafe\u0301.md", "/srv/cafe\u0301.md"],
}


def _call(rng: random.Random, record: str) -> tuple[str, dict[str, Any]]:
    spell = rng.choice(_SPELLINGS[record])
    kind = rng.choice(["write", "write", "read", "list", "mkdir", "move"])
    if kind == "write":
        return "write_file", {"path": spell, "content": str(rng.randrange(9))}
    if kind == "read":
        return "read_text_file", {"path": spell}
    if kind == "list":
        return "list_directory", {"path": posixpath.dirname(spell) or "."}
    if kind == "mkdir":
        return "create_directory", {"path": posixpath.dirname(spell) or "a"}
    other = rng.choice(_SPELLINGS[rng.choice(list(_SPELLINGS))])
    return "move_file", {"source": spell, "destination": other}


@pytest.mark.parametrize("seed", range(40))
def test_a_file_server_declared_as_the_docs_say_runs_every_arm_like_the_serial_one(
    seed: int,
) -> None:
    rng = random.Random(seed)
    records = rng.sample(list(_SPELLINGS), rng.randint(1, 3))
    calls = [_call(rng, rng.choice(records)) for _ in range(rng.randint(2, 5))]
    runs = run_arms(file_server, calls)
    assert not any(run.error for run in runs.values()), {a: r.error for a, r in runs.items()}
    assert differences(runs) == {}, calls


def test_distinct_files_of_the_file_server_still_run_together() -> None:
    calls = [("write_file", {"path": f"/srv/{n}.txt", "content": n}) for n in "abc"]
    calls += [("read_text_file", {"path": "d.txt"})]
    runs = run_arms(file_server, calls)
    assert differences(runs) == {}
    assert runs["F"].windows == 1


def test_the_same_cases_find_a_difference_when_hierarchy_is_undone() -> None:
    from benchmarks.soundness import CONTROLS

    found = 0
    with CONTROLS["exact_targets"]():  # a directory no longer holds the files under it
        for seed in range(40):
            rng = random.Random(seed)
            records = rng.sample(list(_SPELLINGS), rng.randint(1, 3))
            calls = [_call(rng, rng.choice(records)) for _ in range(rng.randint(2, 5))]
            found += bool(differences(run_arms(file_server, calls)))
    assert found >= 1  # the cases can fail: a create_directory beside a write under it
