"""The note store of docs/your-tasks.md: one read-only tool and one idempotent write.

    cd docs/examples
    harness run --toolset notes_tools:make_toolset --manifest skills.toml \\
        --prompt "Read the notes alpha, beta and gamma, then write a one-line digest to the note 'digest'." \\
        --inputs '{"keys": ["alpha", "beta", "gamma"]}'
"""

from __future__ import annotations

from harness import Toolset, tool

NOTES = {
    "alpha": "ships Monday",
    "beta": "needs review",
    "gamma": "blocked on legal",
}


def make_toolset() -> Toolset:
    """A fresh store per run, so every arm starts from the same notes."""
    store = dict(NOTES)

    @tool(read_only=True, read_targets="note:{key}")
    async def read_note(key: str) -> str:
        """Read one note by its key."""
        if key not in store:
            raise KeyError(f"no note {key!r}; the notes are {sorted(store)}")
        return store[key]

    @tool(idempotent=True, write_targets="note:{key}", read_targets=())
    async def write_note(key: str, text: str) -> str:
        """Write (or overwrite) the note ``key`` with ``text``."""
        store[key] = text
        return f"wrote {key}"

    return Toolset([read_note, write_note])
