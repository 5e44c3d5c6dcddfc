"""Tools from an MCP server: list them, call them, and decide whose word their effects take.

:func:`toolset_from_mcp` (also ``await Toolset.from_mcp(session)`` or
``await MCPToolset.from_mcp(session)``) reads an initialised
``mcp.ClientSession``'s tool list (every page) into an :class:`MCPToolset`: each tool's name,
description and input schema; calling a tool sends ``tools/call`` over the session. A result
becomes what the model sees: the structured content when the server sends it (rendered as
JSON), else the text blocks joined (other blocks are named, not shown); a result with
``isError`` becomes an error result the model can act on, like every tool mistake
(:mod:`harness.tools.execute`). :func:`open_mcp_toolset` starts a server process over stdio and
yields its toolset, closing both on exit.

**Annotations are hints, not proof.** MCP's tool annotations (``readOnlyHint``,
``idempotentHint``, ``destructiveHint``, ``openWorldHint``; either spelling, see
:meth:`harness.tools.effects.Effect.from_mcp`) come from a server you may not trust. So by default
they certify nothing: every tool runs under the worst-case effect, no window certifies, and
arm F behaves as S. What they claim is kept in :attr:`MCPToolset.hints`. Confirm them in one
of three ways:

* ``effects={"read_doc": Effect.declare(read_only=True), ...}``: your own declaration per
  tool (an :class:`~harness.tools.effects.Effect`, or a mapping of its fields such as
  ``{"read_only": True}`` or of MCP hints such as ``{"readOnlyHint": True}``); it wins over
  the server's hint;
* ``trust_annotations=True``: take the server's hints as they are (a server you run);
* certify them: run the certification kit on ``toolset.trusting()`` (e.g.
  :func:`harness.testing.certify_toolset`) and use that toolset once the kit passes.

``await Toolset.from_mcp(session)`` (:meth:`harness.tools.Toolset.from_mcp`) is the same as
:func:`toolset_from_mcp`: it imports this module when called (this module builds on
:mod:`harness.tools`, so :mod:`harness.tools` does not import it).

The ``mcp`` SDK is the optional extra ``mcp`` (``pip install 'agent-harness[mcp]'``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TextIO

from harness.errors import ConfigError, ToolsetError
from harness.tools.effects import Effect
from harness.tools.toolset import Tool, Toolset

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = ("MCPToolError", "MCPToolset", "open_mcp_toolset", "toolset_from_mcp")

_EXTRA_HINT = "install the MCP extra: `pip install 'agent-harness[mcp]'`"
#: The fields of :meth:`Effect.declare` an ``effects`` mapping may give.
_DECLARE_FIELDS = (
    "read_only",
    "idempotent",
    "destructive",
    "open_world",
    "write_targets",
    "read_targets",
    "canonical",
)
#: How many pages of tools/list are read before the server is taken to loop.
_MAX_PAGES = 100


class MCPToolError(Exception):
    """A ``tools/call`` result with ``isError``: the server's message, shown to the model."""


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"MCP tools need the MCP SDK (the 'mcp' package); {_EXTRA_HINT}."
        ) from None


class MCPToolset(Toolset):
    """A toolset whose tools call an MCP server. ``hints``: the effect each tool's
    annotations claim (what :meth:`trusting` applies); ``confirmed``: the tools whose effect
    is in force (declared by you, or trusted)."""

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        name: str,
        hints: Mapping[str, Effect],
        confirmed: Iterable[str],
    ) -> None:
        super().__init__(tools, name=name)
        self.hints = dict(hints)
        self.confirmed = frozenset(confirmed)

    @classmethod
    async def from_mcp(cls, session: ClientSession, **options: Any) -> MCPToolset:
        """:func:`toolset_from_mcp` (``options``: ``effects``, ``trust_annotations``, ``name``,
        ``timeout_s``)."""
        return await toolset_from_mcp(session, **options)

    def trusting(self, names: Iterable[str] | None = None) -> MCPToolset:
        """The same tools with the server's hinted effects in force (for ``names``, default
        every tool not confirmed otherwise): what to certify, or to use once you trust it."""
        chosen = set(self.hints) - self.confirmed if names is None else set(names)
        unknown = chosen - set(self)
        if unknown:
            raise ToolsetError(f"No such MCP tool(s) {sorted(unknown)}; tools: {list(self)}.")
        tools = [t.with_effect(self.hints[n]) if n in chosen else t for n, t in self.items()]
        return MCPToolset(
            tools, name=self.name, hints=self.hints, confirmed=self.confirmed | chosen
        )


def _effect_of(name: str, declared: Effect | Mapping[str, Any]) -> Effect:
    if isinstance(declared, Effect):
        return declared if declared.annotated else replace(declared, annotated=True)
    if not isinstance(declared, Mapping):
        raise ConfigError(
            f"effects[{name!r}] is a {type(declared).__name__}; give an Effect or a mapping "
            "such as {'read_only': True}."
        )
    if any(key.endswith(("Hint", "_hint")) for key in declared):
        return Effect.from_mcp(declared)
    known = set(_DECLARE_FIELDS)
    unknown = sorted(set(declared) - known)
    if unknown:
        raise ConfigError(
            f"effects[{name!r}] has unknown field(s) {unknown}; an effect has "
            f"{', '.join(sorted(known))} (or MCP hints such as readOnlyHint)."
        )
    return Effect.declare(**declared)


def _annotations(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if isinstance(raw, Mapping):
        return dict(raw)
    dump = getattr(raw, "model_dump", None)
    return dict(dump(exclude_none=True)) if callable(dump) else None


def _render(result: Any) -> Any:
    """A ``CallToolResult``'s content as the tool's return value."""
    blocks = list(getattr(result, "content", None) or ())
    texts: list[str] = []
    for block in blocks:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            texts.append(text)
            continue
        resource = getattr(block, "resource", None)
        inner = getattr(resource, "text", None)
        if isinstance(inner, str):
            texts.append(inner)
        else:
            texts.append(f"[{getattr(block, 'type', 'unknown')} content not shown]")
    if getattr(result, "is_error", False) or getattr(result, "isError", False):
        raise MCPToolError("\n".join(texts) or "the server reported an error")
    structured = getattr(result, "structured_content", None)
    if structured is None:
        structured = getattr(result, "structuredContent", None)
    if structured is not None:
        return structured
    return "\n".join(texts)


def _caller(session: ClientSession, name: str, timeout_s: float | None) -> Any:
    async def call(**arguments: Any) -> Any:
        result = await session.call_tool(name, arguments, read_timeout_seconds=timeout_s)
        return _render(result)

    call.__name__ = name
    return call


async def _list_tools(session: ClientSession) -> list[Any]:
    from mcp import types

    listed: list[Any] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        listed.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return listed
    raise ToolsetError(
        f"The MCP server's tool list ran past {_MAX_PAGES} pages (its cursor never ends); "
        "the server is at fault."
    )


async def toolset_from_mcp(
    session: ClientSession,
    *,
    name: str = "mcp",
    effects: Mapping[str, Effect | Mapping[str, Any]] | None = None,
    trust_annotations: bool = False,
    timeout_s: float | None = 30.0,
) -> MCPToolset:
    """The tools of the MCP server behind ``session`` (initialised), as an
    :class:`MCPToolset` (module docstring: annotations certify nothing until confirmed by
    ``effects`` or ``trust_annotations``). ``timeout_s``: each call's deadline."""
    _require_mcp()
    effects = dict(effects or {})
    listed = await _list_tools(session)
    names = [str(t.name) for t in listed]
    unknown = sorted(set(effects) - set(names))
    if unknown:
        raise ConfigError(
            f"effects names tool(s) {unknown} that the MCP server does not list; it lists "
            f"{', '.join(names)}."
        )
    tools: list[Tool] = []
    hints: dict[str, Effect] = {}
    confirmed: list[str] = []
    for listed_tool in listed:
        tool_name = str(listed_tool.name)
        hints[tool_name] = Effect.from_mcp(_annotations(listed_tool.annotations))
        if tool_name in effects:
            effect = _effect_of(tool_name, effects[tool_name])
            confirmed.append(tool_name)
        elif trust_annotations:
            effect = hints[tool_name]
            confirmed.append(tool_name)
        else:
            effect = Effect.worst_case()
        schema = getattr(listed_tool, "input_schema", None) or {"type": "object"}
        tools.append(
            Tool(
                name=tool_name,
                parameters=schema,
                fn=_caller(session, tool_name, timeout_s),
                description=str(listed_tool.description or ""),
                effect=effect,
                timeout_s=None if timeout_s is None else timeout_s + 1.0,
            )
        )
    return MCPToolset(tools, name=name, hints=hints, confirmed=confirmed)


@asynccontextmanager
async def open_mcp_toolset(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    name: str = "mcp",
    effects: Mapping[str, Effect | Mapping[str, Any]] | None = None,
    trust_annotations: bool = False,
    timeout_s: float | None = 30.0,
    errlog: TextIO | None = None,
) -> AsyncIterator[MCPToolset]:
    """Start the MCP server ``command args`` over stdio, initialise a session and yield its
    toolset (see :func:`toolset_from_mcp`); the session and the process end on exit.
    ``errlog``: where the server's stderr goes (default: this process's stderr)."""
    _require_mcp()
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=command, args=list(args), env=dict(env) if env is not None else None, cwd=cwd
    )
    try:
        async with AsyncExitStack() as stack:
            try:
                client = stdio_client(params) if errlog is None else stdio_client(params, errlog)
                read, write = await stack.enter_async_context(client)
            except OSError as exc:
                raise ConfigError(
                    f"Cannot start the MCP server {command!r}: {exc.strerror or exc}; check "
                    "the command."
                ) from None
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            yield await toolset_from_mcp(
                session,
                name=name,
                effects=effects,
                trust_annotations=trust_annotations,
                timeout_s=timeout_s,
            )
    except BaseExceptionGroup as group:  # the SDK's task groups wrap what was raised inside
        lone = _lone(group)
        if lone is None:
            raise
        raise lone from lone.__cause__


def _lone(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception a (nested) exception group holds, or None when it holds more."""
    leaves = list(group.exceptions)
    while len(leaves) == 1 and isinstance(leaves[0], BaseExceptionGroup):
        leaves = list(leaves[0].exceptions)
    return leaves[0] if len(leaves) == 1 else None
