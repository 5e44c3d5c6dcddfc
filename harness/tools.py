"""Tools, their effect annotations, and toolsets.

A :class:`Tool` is a name, a JSON Schema for its arguments, a callable (async or sync) and an
:class:`Effect`: what the call does to the world. The certifier trusts effects to decide which
calls may run concurrently (D1), so the defaults are the worst case, as MCP's are: a tool
nobody annotated is assumed to write everything, destroy, not be idempotent, and reach the
open world. ``harness certify`` checks that annotations are true.

Declare a tool from a typed function with one decorator::

    @tool(read_only=True)
    async def read_doc(key: str) -> dict[str, object]:
        "Read one document."

    @tool(idempotent=True, write_targets="doc:{key}")
    def set_field(key: str, field: str, value: str) -> str: ...

or load OpenAI-style function specs with :meth:`Toolset.from_openai` (MCP's ``annotations``
map onto :class:`Effect` via :meth:`Effect.from_mcp`).
"""

from __future__ import annotations

import inspect
import itertools
import re
import string
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, overload

import jsonschema
import pydantic

from harness._tool_thread import ToolThread
from harness.engines.base import ToolSpec
from harness.errors import ToolsetError

__all__ = ("IDEMPOTENCY_KEY_ARG", "Effect", "Tool", "ToolThread", "Toolset", "WriteTargets", "tool")

#: How to compute the resources a call writes from its arguments: a format template such as
#: ``"doc:{key}"`` (a list-valued argument expands to one target per element), several
#: templates, or a function ``arguments -> targets``.
WriteTargets = str | Sequence[str] | Callable[[Mapping[str, Any]], Iterable[str]]


@dataclass(frozen=True)
class Effect:
    """What calling a tool does to the world, as far as concurrency is concerned.

    ``read_only``: changes nothing (implies idempotent and not destructive).
    ``idempotent``: calling it twice with the same arguments leaves the same state as once.
    ``destructive``: may delete or overwrite data it did not create (MCP's destructiveHint).
    ``open_world``: talks to something outside the harness's process (cannot be fingerprinted).
    ``write_targets``: the resources a call writes, from its arguments; ``None`` on a tool that
    is not read-only means *unknown*, which conflicts with every other write.
    ``read_targets``: the resources a call reads (same forms as ``write_targets``); ``None``
    means unknown (reads everything). Only needed when reads and writes share a window: a
    read and a write of the same resource do not commute, so D1 needs both sides.
    ``annotated``: whether anybody declared this effect (an unannotated tool is the worst case).
    ``accepts_idempotency_key``: the tool takes an ``idempotency_key`` keyword (never shown to
    the model) and applies a write at most once per key, so a call whose outcome is in doubt
    may be retried with the same key (:mod:`harness.journal`). ``@tool`` sets it when the
    function has an ``idempotency_key`` parameter.
    """

    read_only: bool = False
    idempotent: bool = False
    destructive: bool = True
    open_world: bool = True
    write_targets: WriteTargets | None = None
    read_targets: WriteTargets | None = None
    annotated: bool = False
    accepts_idempotency_key: bool = False

    @classmethod
    def worst_case(cls) -> Effect:
        """The effect assumed for an unannotated tool."""
        return cls()

    @classmethod
    def declare(
        cls,
        *,
        read_only: bool = False,
        idempotent: bool | None = None,
        destructive: bool | None = None,
        open_world: bool = False,
        write_targets: WriteTargets | None = None,
        read_targets: WriteTargets | None = None,
    ) -> Effect:
        """An explicit annotation. ``read_only`` implies idempotent and not destructive."""
        if read_only and write_targets is not None:
            raise ToolsetError(
                "A read-only tool cannot declare write_targets; drop read_only=True or the targets."
            )
        return cls(
            read_only=read_only,
            idempotent=read_only if idempotent is None else (idempotent or read_only),
            destructive=(not read_only) if destructive is None else destructive and not read_only,
            open_world=open_world,
            write_targets=write_targets,
            read_targets=read_targets,
            annotated=True,
        )

    @classmethod
    def from_mcp(cls, annotations: Mapping[str, Any] | None) -> Effect:
        """Map MCP tool annotations (``readOnlyHint``, ``idempotentHint``, ``destructiveHint``,
        ``openWorldHint``) onto an effect, with MCP's defaults for missing hints. A harness
        extension keys ``writeTargets`` (template or list of templates) and
        ``acceptsIdempotencyKey`` are honoured too."""
        if not annotations:
            return cls.worst_case()
        read_only = bool(annotations.get("readOnlyHint", False))
        targets = annotations.get("writeTargets")
        return cls(
            read_only=read_only,
            idempotent=read_only or bool(annotations.get("idempotentHint", False)),
            destructive=not read_only and bool(annotations.get("destructiveHint", True)),
            open_world=bool(annotations.get("openWorldHint", True)),
            write_targets=None if read_only else targets,
            read_targets=annotations.get("readTargets"),
            annotated=True,
            accepts_idempotency_key=bool(annotations.get("acceptsIdempotencyKey", False)),
        )

    def targets(self, arguments: Mapping[str, Any]) -> frozenset[str] | None:
        """The resources a call with these arguments writes: empty for a read-only tool,
        ``None`` when unknown (treat as conflicting with every write)."""
        if self.read_only:
            return frozenset()
        return _resolve(self.write_targets, arguments)

    def reads(self, arguments: Mapping[str, Any]) -> frozenset[str] | None:
        """The resources a call with these arguments reads; ``None`` when unknown. A writing
        tool that declares no read targets is taken to read only what it writes."""
        if self.read_targets is None and not self.read_only:
            return self.targets(arguments)
        return _resolve(self.read_targets, arguments)


def _resolve(spec: WriteTargets | None, arguments: Mapping[str, Any]) -> frozenset[str] | None:
    if spec is None:
        return None
    if callable(spec):
        return frozenset(str(t) for t in spec(arguments))
    templates = [spec] if isinstance(spec, str) else list(spec)
    out: set[str] = set()
    for template in templates:
        expanded = _expand_template(template, arguments)
        if expanded is None:
            return None
        out.update(expanded)
    return frozenset(out)


def _expand_template(template: str, arguments: Mapping[str, Any]) -> list[str] | None:
    """``"doc:{key}"`` with ``key="a"`` -> ``["doc:a"]``; a list argument expands to one target
    per element; a missing argument makes the targets unknown (``None``)."""
    names = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    choices: list[list[Any]] = []
    for name in names:
        if name not in arguments:
            return None
        value = arguments[name]
        choices.append(list(value) if isinstance(value, list | tuple) else [value])
    return [
        template.format(**dict(zip(names, combo, strict=True)))
        for combo in itertools.product(*choices)
    ]


ToolFn = Callable[..., Any]
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: The keyword through which a tool that accepts one receives its idempotency key.
IDEMPOTENCY_KEY_ARG = "idempotency_key"


@dataclass(frozen=True)
class Tool:
    """A callable the model may invoke: name, description, argument schema, effect.

    ``fn`` is called with the validated arguments as keywords; it may be async or sync (sync
    functions run in a worker thread). ``fn=None`` makes a declared-only tool (e.g. BFCL
    functions): calling it returns ``stub_result``.
    ``timeout_s``: a call running longer becomes an error result. ``result_cap``: a result
    whose text is longer (characters) becomes an error result.
    """

    name: str
    parameters: Mapping[str, Any]
    fn: ToolFn | None = None
    description: str = ""
    effect: Effect = field(default_factory=Effect.worst_case)
    timeout_s: float | None = 30.0
    result_cap: int | None = 16_000
    stub_result: Any = "ok"
    model: type[pydantic.BaseModel] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ToolsetError(
                f"Tool name {self.name!r} is not valid: use 1-64 ASCII letters, digits, '_', '-' "
                "or '.' (what OpenAI-compatible servers accept)."
            )
        try:
            jsonschema.Draft202012Validator.check_schema(dict(self.parameters))
        except jsonschema.SchemaError as exc:
            raise ToolsetError(
                f"Tool {self.name!r} has an argument schema that is not JSON Schema: {exc.message}",
                tool=self.name,
            ) from None
        if self.parameters.get("type", "object") != "object":
            raise ToolsetError(
                f"Tool {self.name!r}: its argument schema must describe a JSON object "
                f"(type 'object'), not {self.parameters.get('type')!r}.",
                tool=self.name,
            )

    def spec(self) -> ToolSpec:
        """The OpenAI function spec the model is shown."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }

    def validation_errors(self, arguments: Any) -> list[str]:
        """Why these arguments do not satisfy the schema (empty list when they do)."""
        validator = jsonschema.Draft202012Validator(dict(self.parameters))
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
        out = []
        for error in errors:
            where = "/".join(str(p) for p in error.path) or "(arguments)"
            out.append(f"{where}: {error.message}")
        return out

    @property
    def runs_in_thread(self) -> bool:
        """A sync function: it runs in a worker thread that a timeout cannot stop."""
        return self.fn is not None and not inspect.iscoroutinefunction(self.fn)

    async def invoke(
        self,
        arguments: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        thread: ToolThread | None = None,
    ) -> Any:
        """Run the tool on already-validated arguments (no timeout here: see ``harness.calls``).

        ``idempotency_key`` is passed on (as the ``idempotency_key`` keyword, ``None`` when the
        caller has none) only to a tool whose effect accepts one. ``thread`` watches a sync function's worker thread: it is
        told when the function really returns or raises, even after this call was abandoned.
        """
        if self.fn is None:
            return self.stub_result
        kwargs: dict[str, Any] = dict(arguments)
        if self.model is not None:
            validated = self.model.model_validate(kwargs)
            kwargs = {name: getattr(validated, name) for name in type(validated).model_fields}
        if self.effect.accepts_idempotency_key:  # None: the caller keeps no journal
            kwargs[IDEMPOTENCY_KEY_ARG] = idempotency_key
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**kwargs)
        import anyio.to_thread

        fn = self.fn
        watch = thread or ToolThread()

        def work() -> Any:
            if not watch.begin():  # abandoned before a worker picked it up: never run it
                return None
            try:
                value = fn(**kwargs)
            except BaseException as exc:
                watch.end(None, exc)
                raise
            watch.end(value, None)
            return value

        # abandon_on_cancel: a timeout or cancellation returns at once instead of waiting for
        # a hung thread; the thread runs on until its function returns, and ``thread`` says
        # when it does (the outcome of such a call is unknown until then).
        result = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        if inspect.isawaitable(result):
            return await result
        return result

    def with_effect(self, effect: Effect) -> Tool:
        return replace(self, effect=effect)


def _schema_from_function(fn: ToolFn) -> tuple[dict[str, Any], type[pydantic.BaseModel]]:
    hints = typing.get_type_hints(fn, include_extras=True)  # keep Annotated constraints
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if pname == IDEMPOTENCY_KEY_ARG:  # the harness passes it; the model never sees it
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolsetError(f"Tool function {fn.__name__!r} cannot take *args or **kwargs.")
        annotation = hints.get(pname, Any)
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, default)
    model = pydantic.create_model(
        f"{fn.__name__}_arguments",
        __config__=pydantic.ConfigDict(extra="forbid"),
        **fields,
    )
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema, model


@overload
def tool(fn: ToolFn, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool | None = None,
    idempotent: bool | None = None,
    destructive: bool | None = None,
    open_world: bool | None = None,
    write_targets: WriteTargets | None = None,
    read_targets: WriteTargets | None = None,
    timeout_s: float | None = 30.0,
    result_cap: int | None = 16_000,
) -> Callable[[ToolFn], Tool]: ...


def tool(
    fn: ToolFn | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool | None = None,
    idempotent: bool | None = None,
    destructive: bool | None = None,
    open_world: bool | None = None,
    write_targets: WriteTargets | None = None,
    read_targets: WriteTargets | None = None,
    timeout_s: float | None = 30.0,
    result_cap: int | None = 16_000,
) -> Tool | Callable[[ToolFn], Tool]:
    """Make a :class:`Tool` from a typed function; the argument schema comes from its
    signature (pydantic), the description from its docstring.

    With no effect keyword the tool is *unannotated* (worst case). Any effect keyword makes an
    explicit annotation (:meth:`Effect.declare`). A parameter named ``idempotency_key`` is
    left out of the schema: the harness fills it (run id + call id, the same on a retry) and
    the effect is marked ``accepts_idempotency_key``.
    """

    def build(func: ToolFn) -> Tool:
        schema, model = _schema_from_function(func)
        declared = any(
            v is not None
            for v in (read_only, idempotent, destructive, open_world, write_targets, read_targets)
        )
        effect = (
            Effect.declare(
                read_only=bool(read_only),
                idempotent=idempotent,
                destructive=destructive,
                open_world=bool(open_world),
                write_targets=write_targets,
                read_targets=read_targets,
            )
            if declared
            else Effect.worst_case()
        )
        if IDEMPOTENCY_KEY_ARG in inspect.signature(func).parameters:
            effect = replace(effect, accepts_idempotency_key=True)
        return Tool(
            name=name or func.__name__,
            parameters=schema,
            fn=func,
            description=description or inspect.cleandoc(func.__doc__ or ""),
            effect=effect,
            timeout_s=timeout_s,
            result_cap=result_cap,
            model=model,
        )

    if fn is not None:
        return build(fn)
    return build


class Toolset(Mapping[str, Tool]):
    """Named tools. A mapping from tool name to :class:`Tool`."""

    def __init__(self, tools: Iterable[Tool], *, name: str = "toolset") -> None:
        self.name = name
        self._tools: dict[str, Tool] = {}
        for t in tools:
            if t.name in self._tools:
                raise ToolsetError(f"Toolset {name!r} has two tools named {t.name!r}.")
            self._tools[t.name] = t

    def __getitem__(self, key: str) -> Tool:
        return self._tools[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolset({self.name!r}, tools={list(self._tools)})"

    def specs(self) -> list[ToolSpec]:
        """OpenAI function specs of every tool, in declaration order."""
        return [t.spec() for t in self._tools.values()]

    @classmethod
    def from_openai(
        cls,
        specs: Iterable[Mapping[str, Any]],
        handlers: Mapping[str, ToolFn] | None = None,
        *,
        name: str = "toolset",
        stub_result: Any = "ok",
    ) -> Toolset:
        """Load OpenAI-style function specs (``{"type": "function", "function": {...}}`` or the
        bare ``{"name", "description", "parameters"}`` form). MCP-style ``annotations`` on a
        spec (or on its ``function``) become its effect; unannotated specs are the worst
        case. Tools without a handler return ``stub_result`` when called."""
        handlers = handlers or {}
        tools = []
        for raw in specs:
            function = raw.get("function", raw)
            if not isinstance(function, Mapping) or "name" not in function:
                raise ToolsetError(f"Not an OpenAI function spec (no 'name'): {dict(raw)!r:.200}")
            annotations = function.get("annotations", raw.get("annotations"))
            parameters = function.get("parameters") or {"type": "object", "properties": {}}
            if not isinstance(parameters, Mapping):
                raise ToolsetError(
                    f"Tool {function['name']!r} has 'parameters' of type "
                    f"{type(parameters).__name__}; it must be a JSON Schema object.",
                    tool=str(function["name"]),
                )
            tools.append(
                Tool(
                    name=str(function["name"]),
                    description=str(function.get("description", "")),
                    parameters=parameters,
                    fn=handlers.get(str(function["name"])),
                    effect=Effect.from_mcp(annotations),
                    stub_result=stub_result,
                )
            )
        unknown = set(handlers) - {t.name for t in tools}
        if unknown:
            raise ToolsetError(f"Handlers for tools that have no spec: {sorted(unknown)}.")
        return cls(tools, name=name)
