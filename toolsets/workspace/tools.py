"""The workspace tools: typed reads and writes over a :class:`WorkspaceState`, with effects.

Every tool declares its effect, and the targets are per *field* of a document
(``"doc:{key}/{field}"``), so D1 can tell apart writes that touch different fields of one
document (they commute) from writes that touch the same one (they do not):

==============  ==========================================  ==================================
tool            effect                                      targets (from the arguments)
==============  ==========================================  ==================================
list_docs       read-only                                   reads ``catalog``
read_doc        read-only                                   reads ``doc:{key}`` (every field:
                                                            ``doc:{key}/status`` lies under it)
get_field       read-only                                   reads ``doc:{key}/{field}``
set_status      idempotent, destructive (overwrites)        writes ``doc:{key}/status``, reads
                                                            nothing (a blind overwrite)
set_owner       idempotent, destructive                     writes ``doc:{key}/owner``, reads -
set_priority    idempotent, destructive                     writes ``doc:{key}/priority``, -
add_tag         idempotent, not destructive (set insert)    writes and reads ``doc:{key}/tags``
append_note     NOT idempotent, not destructive (a log)     writes and reads ``doc:{key}/notes``
==============  ==========================================  ==================================

A writer must say what it reads: undeclared reads are unknown (every resource), and would
keep every write out of its window.

Results are JSON data whose value never depends on the order of calls that commute (a write
returns what it wrote, not what was there before), and ``harness.tools.execute.render_result``
renders them as key-sorted JSON, so S, F, P and P+V see the same bytes.

Each call first sleeps its injected latency (:class:`~harness.toolsets.workspace.latency.Latency`),
then reads or writes the store in one step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import anyio
import pydantic

from harness.tools import Tool, Toolset, tool
from harness.toolsets.workspace.latency import Latency
from harness.toolsets.workspace.store import Field, Status, WorkspaceState

__all__ = ("TOOL_NAMES", "make_toolset")

TOOL_NAMES: tuple[str, ...] = (
    "list_docs",
    "read_doc",
    "get_field",
    "set_status",
    "set_owner",
    "set_priority",
    "add_tag",
    "append_note",
)

Key = Annotated[str, pydantic.Field(min_length=1, description="Document key, e.g. 'd417'.")]
Priority = Annotated[int, pydantic.Field(ge=1, le=5, description="1 (lowest) to 5 (highest).")]
Owner = Annotated[str, pydantic.Field(min_length=1, description="Owner name, e.g. 'ana'.")]
Tag = Annotated[str, pydantic.Field(min_length=1, description="Tag, e.g. 'urgent'.")]
Text = Annotated[str, pydantic.Field(min_length=1, description="The note text, verbatim.")]


def make_toolset(
    state: WorkspaceState,
    *,
    latency: Latency | float | None = None,
    timeout_s: float | None = 30.0,
) -> Toolset:
    """The eight workspace tools bound to ``state`` (see the module docstring for effects).

    ``latency``: ``None`` (none), a fixed ``L`` in seconds, or a :class:`Latency`.
    """
    lat = Latency.of(latency)

    async def pause(name: str, arguments: Mapping[str, Any]) -> None:
        delay = lat.draw(name, arguments)
        if delay > 0:
            await anyio.sleep(delay)

    @tool(read_only=True, read_targets="catalog", timeout_s=timeout_s)
    async def list_docs() -> list[str]:
        """List the keys of every document in the workspace."""
        await pause("list_docs", {})
        return state.keys()

    @tool(read_only=True, read_targets="doc:{key}", timeout_s=timeout_s)  # every field under it
    async def read_doc(key: Key) -> dict[str, Any]:
        """Read one document: its key, title, owner, status, priority, tags, next (the key of
        the next document in its chain, or null) and notes."""
        await pause("read_doc", {"key": key})
        return state.get(key).to_dict()

    @tool(read_only=True, read_targets="doc:{key}/{field}", timeout_s=timeout_s)
    async def get_field(key: Key, field: Field) -> dict[str, Any]:
        """Read one field of one document."""
        await pause("get_field", {"key": key, "field": field})
        return {"key": key, field: state.get(key).to_dict()[field]}

    @tool(
        idempotent=True,
        write_targets="doc:{key}/status",
        read_targets=(),  # a blind overwrite: it returns what it wrote, never what was there
        timeout_s=timeout_s,
    )
    async def set_status(key: Key, status: Status) -> dict[str, Any]:
        """Set the status of one document (draft, review, approved or archived)."""
        await pause("set_status", {"key": key, "status": status})
        state.update(key, status=status)
        return {"key": key, "status": status}

    @tool(
        idempotent=True,
        write_targets="doc:{key}/owner",
        read_targets=(),  # a blind overwrite: it returns what it wrote, never what was there
        timeout_s=timeout_s,
    )
    async def set_owner(key: Key, owner: Owner) -> dict[str, Any]:
        """Set the owner of one document."""
        await pause("set_owner", {"key": key, "owner": owner})
        state.update(key, owner=owner)
        return {"key": key, "owner": owner}

    @tool(
        idempotent=True,
        write_targets="doc:{key}/priority",
        read_targets=(),  # a blind overwrite: it returns what it wrote, never what was there
        timeout_s=timeout_s,
    )
    async def set_priority(key: Key, priority: Priority) -> dict[str, Any]:
        """Set the priority of one document (1 lowest to 5 highest)."""
        if not 1 <= priority <= 5:  # also in the schema; checked here so the store never drifts
            raise ValueError(f"priority must be 1..5, got {priority}")
        await pause("set_priority", {"key": key, "priority": priority})
        state.update(key, priority=priority)
        return {"key": key, "priority": priority}

    @tool(
        idempotent=True,
        destructive=False,
        write_targets="doc:{key}/tags",
        read_targets="doc:{key}/tags",  # a set insert reads the tags it extends
        timeout_s=timeout_s,
    )
    async def add_tag(key: Key, tag: Tag) -> dict[str, Any]:
        """Add a tag to one document (adding a tag it already has changes nothing)."""
        await pause("add_tag", {"key": key, "tag": tag})
        tags = tuple(sorted({*state.get(key).tags, tag}))
        state.update(key, tags=tags)
        return {"key": key, "tags": list(tags)}

    @tool(
        idempotent=False,
        destructive=False,
        write_targets="doc:{key}/notes",
        read_targets="doc:{key}/notes",  # it returns how many notes there are
        timeout_s=timeout_s,
    )
    async def append_note(key: Key, text: Text) -> dict[str, Any]:
        """Append a note to the end of one document's notes (every call adds one more note)."""
        await pause("append_note", {"key": key, "text": text})
        notes = (*state.get(key).notes, text)
        state.update(key, notes=notes)
        return {"key": key, "notes": len(notes)}

    tools: tuple[Tool, ...] = (
        list_docs,
        read_doc,
        get_field,
        set_status,
        set_owner,
        set_priority,
        add_tag,
        append_note,
    )
    return Toolset(tools, name="workspace")
