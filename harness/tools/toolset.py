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

import contextlib
import copy
import functools
import importlib
import inspect
import json
import re
import typing
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, overload

import jsonschema
import pydantic

from harness.errors import ToolsetError
from harness.messages import ToolSpec
from harness.tools._schema_check import Check, compile_check
from harness.tools._thread import ToolThread
from harness.tools.effects import (
    CanonicalSpec,
    Effect,
    Fold,
    Footprint,
    TargetSpec,
    namespace_key,
    template_fields,
)
from harness.tools.identity import Each, InRoot, UnderRoot

__all__ = (
    "IDEMPOTENCY_KEY_ARG",
    "Effect",
    "Fold",
    "Tool",
    "ToolThread",
    "Toolset",
    "WriteTargets",
    "tool",
)

#: The old name of :data:`harness.tools.effects.TargetSpec` (effects live in :mod:`harness.tools.effects`;
#: ``Effect`` and ``WriteTargets`` are re-exported here so existing imports keep working).
WriteTargets = TargetSpec

ToolFn = Callable[..., Any]
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_T = TypeVar("_T")
#: The keyword through which a tool that accepts one receives its idempotency key.
IDEMPOTENCY_KEY_ARG = "idempotency_key"
#: How many calls' checked arguments a tool keeps between certification and execution.
_CHECKED_CACHE = 512


@dataclass(frozen=True, slots=True)
class Checked:
    """A call's arguments checked against one tool: ``valid`` against its schema, and the
    values the tool function receives (``values``; ``None`` when invalid or when the tool's
    model rejects them: ``rejection`` says why)."""

    valid: bool
    values: dict[str, Any] | None = None
    rejection: Exception | None = None


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
        problem = _schema_problem(self.parameters)
        if problem is not None:
            raise ToolsetError(
                f"Tool {self.name!r} has an argument schema that is not JSON Schema: {problem}",
                tool=self.name,
            )
        if self.parameters.get("type", "object") != "object":
            raise ToolsetError(
                f"Tool {self.name!r}: its argument schema must describe a JSON object "
                f"(type 'object'), not {self.parameters.get('type')!r}.",
                tool=self.name,
            )
        self._check_target_fields()
        self._check_path_keys()

    def _check_target_fields(self) -> None:
        """Every field of a target template names an argument the schema declares (a typo
        would make the targets unknown on every call)."""
        properties = self.parameters.get("properties")
        if not isinstance(properties, Mapping):
            return
        for side in ("write_targets", "read_targets"):
            spec = getattr(self.effect, side)
            if spec is None or callable(spec):
                continue
            for template in [spec] if isinstance(spec, str) else spec:
                missing = [f for f in template_fields(template) if f not in properties]
                if missing:
                    raise ToolsetError(
                        f"Tool {self.name!r}: {side} template {template!r} uses {missing}, "
                        f"which are not arguments (the schema has {sorted(properties)}).",
                        tool=self.name,
                    )

    def _check_path_keys(self) -> None:
        """A path key (:func:`~harness.tools.identity.in_root`, an effects file's ``"path"``)
        keys one path: on an argument the schema types as an array it would key the whole
        list as one odd file name (``"['a.txt', 'b.md']"``), so the list's files get no
        targets of their own; ``each`` keys every element. Kept apart the other way too: an
        element-wise key on a string-only argument."""
        properties = self.parameters.get("properties")
        if not isinstance(properties, Mapping) or not self.effect.identity:
            return
        for argument, key in self.effect.identity.items():
            schema = properties.get(argument)
            kind = schema.get("type") if isinstance(schema, Mapping) else None
            types = (
                {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else set()
            )
            if isinstance(key, InRoot | UnderRoot) and types and types <= {"array", "null"}:
                raise ToolsetError(
                    f"Tool {self.name!r}: identity of {argument!r} keys one path, but the "
                    f"argument is an array (a list of paths): key each element, "
                    f'identity = {{ {argument} = "each path" }} in an effects file '
                    "(each(in_root(...)) in Python).",
                    tool=self.name,
                )
            if (
                isinstance(key, Each)
                and isinstance(key.fn, InRoot | UnderRoot)
                and types
                and types <= {"string", "null"}
            ):
                raise ToolsetError(
                    f"Tool {self.name!r}: identity of {argument!r} keys each element of a "
                    f"list, but the argument is a string (one path): write "
                    f'identity = {{ {argument} = "path" }} in an effects file '
                    "(in_root(...) in Python).",
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

    @functools.cached_property
    def _validator(self) -> jsonschema.protocols.Validator:
        return jsonschema.Draft202012Validator(dict(self.parameters))

    @functools.cached_property
    def _fast_check(self) -> Check | None:
        return compile_check(self.parameters)

    @functools.cached_property
    def _checked(self) -> dict[tuple[str, str], Checked]:
        return {}

    def is_valid(self, arguments: Any) -> bool:
        """Whether ``arguments`` satisfy the schema (a check compiled once per tool for the
        common keywords, :mod:`harness.tools._schema_check`; ``jsonschema`` for the rest)."""
        fast = self._fast_check
        if fast is not None:
            verdict = fast(arguments)
            if verdict is not None:
                return verdict
        return bool(self._validator.is_valid(arguments))

    def validation_errors(self, arguments: Any) -> list[str]:
        """Why these arguments do not satisfy the schema (empty list when they do)."""
        if self.is_valid(arguments):
            return []
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
        out = []
        for error in errors:
            where = "/".join(str(p) for p in error.path) or "(arguments)"
            out.append(f"{where}: {error.message}")
        return out

    @property
    def runs_in_thread(self) -> bool:
        """A sync function: it runs in a worker thread that a timeout cannot stop."""
        return self.fn is not None and not inspect.iscoroutinefunction(self.fn)

    def coerce(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the tool function receives them: through the tool's pydantic
        model when it has one (``1.0`` for an ``int`` becomes ``1``, a UUID string a
        ``UUID``, defaults filled in), else as given. Raises ``pydantic.ValidationError``."""
        kwargs: dict[str, Any] = dict(arguments)
        if self.model is not None:
            validated = self.model.model_validate(kwargs)
            kwargs = {name: getattr(validated, name) for name in type(validated).model_fields}
        return kwargs

    def check(self, arguments: Any, *, call: tuple[str, str] | None = None) -> Checked:
        """Validate and coerce ``arguments`` once. ``call`` (the call's id and raw argument
        text) keeps the result until :meth:`invoke` runs that call with the same ``call``,
        which then reuses the coerced values instead of computing them again."""
        if call is not None and (kept := self._checked.get(call)) is not None:
            return kept
        if not isinstance(arguments, Mapping) or not self.is_valid(arguments):
            checked = Checked(False)
        else:
            try:
                checked = Checked(True, self.coerce(arguments))
            except Exception as exc:
                checked = Checked(True, None, exc)
        if call is not None:
            cache = self._checked
            if len(cache) >= _CHECKED_CACHE:  # oldest first: calls run soon after admission
                with contextlib.suppress(StopIteration, RuntimeError, KeyError):
                    del cache[next(iter(cache))]
            cache[call] = checked
        return checked

    def footprint(self, arguments: Any, *, call: tuple[str, str] | None = None) -> Footprint:
        """The canonical targets of a call with these (parsed, not yet validated) arguments,
        filled from the values the tool would receive. Never raises: arguments that fail the
        schema or the tool's model give a footprint with an ``error`` (not certifiable; the
        call then gets the same error result it gets in the serial arm). ``call``: as for
        :meth:`check`."""
        try:
            checked = self.check(arguments, call=call)
        except Exception as exc:  # e.g. arguments nested past the validator's recursion limit
            return Footprint.failed(f"the arguments cannot be checked ({type(exc).__name__})")
        if not checked.valid:
            return Footprint.failed("the arguments do not match the tool's schema")
        if checked.values is None:
            return Footprint.failed(f"the tool's model rejects the arguments ({checked.rejection})")
        return self.effect.footprint(checked.values)

    async def invoke(
        self,
        arguments: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        thread: ToolThread | None = None,
        call: tuple[str, str] | None = None,
    ) -> Any:
        """Run the tool on already-validated arguments (no timeout here: see ``harness.tools.execute``).

        ``idempotency_key`` is passed on (as the ``idempotency_key`` keyword, ``None`` when the
        caller has none) only to a tool whose effect accepts one. ``thread`` watches a sync
        function's worker thread: it is told when the function really returns or raises, even
        after this call was abandoned. ``call`` (id, raw arguments): reuse the values
        :meth:`check` coerced for this call when it was certified (taken: used once).
        """
        kept = self._checked.pop(call, None) if call is not None else None
        if self.fn is None:
            return self.stub_result
        if kept is not None and kept.values is not None:
            kwargs = dict(kept.values)
        else:
            kwargs = self.coerce(arguments)
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


#: Argument schemas already checked against the JSON Schema meta-schema (canonical JSON text):
#: the check costs ~20 ms a tool, and a toolset factory rebuilds the same tools per state.
_VALID_SCHEMAS: set[str] = set()


def _schema_problem(parameters: Mapping[str, Any]) -> str | None:
    """Why ``parameters`` is not a JSON Schema (Draft 2020-12), or ``None``."""
    try:
        text = json.dumps(parameters, sort_keys=True)
    except (TypeError, ValueError):
        text = None
    if text is not None and text in _VALID_SCHEMAS:
        return None
    try:
        jsonschema.Draft202012Validator.check_schema(dict(parameters))
    except jsonschema.SchemaError as exc:
        return str(exc.message)
    if text is not None:
        if len(_VALID_SCHEMAS) >= _SCHEMAS_MAX:
            _VALID_SCHEMAS.clear()
        _VALID_SCHEMAS.add(text)
    return None


#: Argument models by what determines them (see :func:`_schema_key`): a toolset factory that
#: defines its tools as closures over fresh state (``make_toolset(state)``, as the certification
#: kit calls once per example) builds the same pydantic model once, not once per call.
_SCHEMAS: dict[Hashable, tuple[dict[str, Any], type[pydantic.BaseModel]]] = {}
_SCHEMAS_MAX = 4096


def _schema_key(fn: ToolFn) -> Hashable | None:
    """What a function's argument schema depends on: its code, defaults, annotations and
    module globals; ``None`` when some of it is unhashable (then nothing is cached)."""
    try:
        key = (
            getattr(fn, "__code__", None) or fn,
            getattr(fn, "__defaults__", None),
            tuple(sorted((getattr(fn, "__kwdefaults__", None) or {}).items())),
            tuple(getattr(fn, "__annotations__", {}).items()),
            id(getattr(fn, "__globals__", None)),
            fn.__name__,
        )
        hash(key)
    except TypeError:
        return None
    return key


def _schema_from_function(fn: ToolFn) -> tuple[dict[str, Any], type[pydantic.BaseModel]]:
    key = _schema_key(fn)
    cached = _SCHEMAS.get(key) if key is not None else None
    if cached is None:
        cached = _build_schema(fn)
        if key is not None:
            if len(_SCHEMAS) >= _SCHEMAS_MAX:
                _SCHEMAS.clear()
            _SCHEMAS[key] = cached
    schema, model = cached
    return copy.deepcopy(schema), model


def _build_schema(fn: ToolFn) -> tuple[dict[str, Any], type[pydantic.BaseModel]]:
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
    canonical: CanonicalSpec | None = None,
    speculable: bool | None = None,
    identity: Mapping[str, Callable[[Any], Any]] | None = None,
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
    canonical: CanonicalSpec | None = None,
    speculable: bool | None = None,
    identity: Mapping[str, Callable[[Any], Any]] | None = None,
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
            for v in (
                read_only,
                idempotent,
                destructive,
                open_world,
                write_targets,
                read_targets,
                canonical,
                speculable,
                identity,
            )
        )
        effect = (
            Effect.declare(
                read_only=bool(read_only),
                idempotent=idempotent,
                destructive=destructive,
                open_world=bool(open_world),
                write_targets=write_targets,
                read_targets=read_targets,
                canonical=canonical,
                speculable=bool(speculable),
                identity=identity,
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
        self._check_folds()

    def _check_folds(self) -> None:
        """Tools whose templates put an argument into the same place of a name (``doc:{…}``)
        name one store's resources, so they must fold that name the same way and key it with
        the same ``identity=`` function: otherwise ``write("ABC")`` and ``read("abc")`` get
        disjoint targets for one resource. A template with no field (``doc:README``) inside
        such a namespace must fold its text the same way too."""
        seen: dict[str, tuple[Fold | None, Any, str]] = {}
        for t in self._tools.values():
            for raw_slot, argument, fold in t.effect.name_slots():
                slot = _lower_namespace(raw_slot)
                keyed = t.effect.identity_for(argument)
                if isinstance(keyed, Each):  # a list's elements are keyed by the same function
                    keyed = keyed.fn
                first = seen.setdefault(slot, (fold, keyed, t.name))
                if first[0] != fold:
                    raise ToolsetError(
                        f"Tools {first[2]!r} and {t.name!r} both name resources "
                        f"'{slot}{{…}}' but fold the name differently ({first[0] or 'none'} vs "
                        f"{fold or 'none'}, argument {argument!r}). A store folds names for "
                        "every tool: declare the same canonical=... on both.",
                        tool=t.name,
                    )
                if first[1] != keyed:
                    raise ToolsetError(
                        f"Tools {first[2]!r} and {t.name!r} both name resources "
                        f"'{slot}{{…}}' but key them with different identity= functions "
                        f"(argument {argument!r}). A store keys its records one way: declare "
                        "the same identity=... on both.",
                        tool=t.name,
                    )
        self._check_keyed_namespaces(seen)
        namespaces = [(slot, f, owner) for slot, (f, _, owner) in seen.items() if "{" not in slot]
        for t in self._tools.values():
            for literal, fold in t.effect.literal_targets():
                for slot, slot_fold, owner in namespaces:
                    if slot and literal.startswith(slot) and literal != slot and slot_fold != fold:
                        raise ToolsetError(
                            f"Tool {t.name!r} names the resource {literal!r} in the namespace "
                            f"'{slot}' that {owner!r} folds with {slot_fold or 'none'}, but its "
                            f"own fold is {fold or 'none'}. A store folds names for every tool: "
                            f"declare canonical={str(slot_fold or '')!r} on {t.name!r} too.",
                            tool=t.name,
                        )

    def _check_keyed_namespaces(self, seen: Mapping[str, tuple[Fold | None, Any, str]]) -> None:
        """A namespace whose records a tool keys with ``identity=`` (``file:{path}`` under
        ``under_root``) is named by that key only: another template naming the same
        namespace another way (``file:docs/{name}``, a literal ``file:readme``) names its
        records in another spelling, which the proof cannot compare."""
        keyed: dict[str, tuple[str, str]] = {}
        for slot, (_, key, owner) in seen.items():
            space = _namespace_of(slot)
            if key is not None and space:
                keyed.setdefault(space, (slot, owner))
        others = [(slot, owner) for slot, (_, _, owner) in seen.items()]
        others += [
            (re.split(r"[*?\[]", _lower_namespace(literal))[0], t.name)  # (a glob: from there on)
            for t in self._tools.values()
            for literal, _ in t.effect.literal_targets()
        ]
        for slot, owner in others:
            first = keyed.get(_namespace_of(slot))
            # (a field below a keyed one, 'file:{dir}/{name}', names records under its key)
            if first is not None and slot != first[0] and not slot.startswith(first[0] + "{}"):
                raise ToolsetError(
                    f"Tool {owner!r} names the namespace '{_namespace_of(slot)}' as "
                    f"'{slot}…', but {first[1]!r} keys its records with identity= at "
                    f"'{first[0]}{{…}}': one store's records must be named one way. Declare "
                    f"{owner!r}'s target as '{first[0]}{{argument}}' with the same identity=, "
                    "or as a target function returning the store's own keys.",
                    tool=owner,
                )

    def __getitem__(self, key: str) -> Tool:
        return self._tools[key]

    # Mapping's own versions go through __getitem__ and an exception; the certifier asks on
    # every call.
    def __contains__(self, key: object) -> bool:
        return key in self._tools

    @overload
    def get(self, key: str, /) -> Tool | None: ...
    @overload
    def get(self, key: str, /, default: Tool | _T) -> Tool | _T: ...
    def get(self, key: str, /, default: Any = None) -> Any:
        return self._tools.get(key, default)

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
    async def from_mcp(cls, session: Any, **options: Any) -> Toolset:
        """The tools of the MCP server behind ``session`` (an initialised
        ``mcp.ClientSession``): an :class:`~harness.tools.mcp.MCPToolset`, whose calls go
        to the server as ``tools/call``. Its annotations certify nothing until you confirm
        them (``effects={...}`` or ``trust_annotations=True``; ``options`` are those of
        :func:`~harness.tools.mcp.toolset_from_mcp`). Needs the ``mcp`` extra
        (``pip install 'agent-harness[mcp]'``): without it, a
        :class:`~harness.errors.ConfigError` naming the extra."""
        # Imported when called: harness.tools.mcp builds on this module (and the mcp SDK
        # is an optional extra), so neither is imported with harness.tools.
        module = importlib.import_module("harness.tools.mcp")
        toolset: Toolset = await module.toolset_from_mcp(session, **options)
        return toolset

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


def _namespace_of(slot: str) -> str:
    """The namespace a template's text names (``doc:`` of ``doc:{}/``), as targets write it
    (:func:`~harness.tools.effects.namespace_key`); ``""`` when it has none (a field comes
    first)."""
    colon = slot.find(":")
    brace = slot.find("{")
    if colon < 0 or (0 <= brace < colon):
        return ""
    return namespace_key(slot[:colon]) or ""


def _lower_namespace(slot: str) -> str:
    """``slot`` with its namespace written as targets write it (``FILE:`` and ``file:`` are
    ``file:``, ``Todo_Items:`` is ``todo.items:``)."""
    space = _namespace_of(slot)
    return space + slot[slot.find(":") + 1 :] if space else slot
