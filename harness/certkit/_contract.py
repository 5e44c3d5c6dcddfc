"""What the certification kit needs from a toolset, and loading one by the name the command
line gives it (a module, ``pkg.mod:obj``, or an OpenAI/MCP spec file). See
:mod:`harness.certkit` for the contract.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.errors import ConfigError
from harness.tools.toolset import Toolset

__all__ = ("CertifiableToolset", "as_certifiable", "load_certifiable")


@dataclass(frozen=True)
class CertifiableToolset:
    """What the kit needs from a toolset (see the module docstring for each function).

    ``fingerprint=None`` means the state cannot be fingerprinted (tools that live outside the
    process): only idempotence via results is checked. :meth:`from_toolset` wraps a bare
    :class:`~harness.tools.Toolset` that way.
    """

    new_state: Callable[[int], Any]
    make_toolset: Callable[[Any], Toolset]
    fingerprint: Callable[[Any], Hashable] | None
    resources: Callable[[Any], Mapping[str, Hashable]] | None = None
    example_values: Callable[[Any], Mapping[str, Sequence[Any]]] | None = None
    argument_strategies: Callable[[Any], Mapping[str, Any]] | None = None
    name: str | None = None

    @property
    def stateful(self) -> bool:
        """Whether each example can run on a fresh, fingerprinted state."""
        return self.fingerprint is not None

    @classmethod
    def from_toolset(cls, toolset: Toolset) -> CertifiableToolset:
        """A toolset with no state factory: its state cannot be reset or fingerprinted."""
        return cls(
            new_state=lambda seed: None, make_toolset=lambda state: toolset, fingerprint=None
        )

    @classmethod
    def from_object(cls, obj: Any) -> CertifiableToolset:
        """A module or object with ``new_state``, ``make_toolset`` and ``fingerprint`` (and
        optionally ``resources``, ``example_values``, ``argument_strategies``)."""
        missing = [
            n
            for n in ("new_state", "make_toolset", "fingerprint")
            if not callable(getattr(obj, n, None))
        ]
        if missing:
            raise ConfigError(
                f"{_describe(obj)} is not a certifiable toolset: it lacks {', '.join(missing)}. "
                "Provide new_state(seed), make_toolset(state) and fingerprint(state) "
                "(see harness.certkit), or pass a CertifiableToolset."
            )

        def optional(name: str) -> Any:
            value = getattr(obj, name, None)
            return value if callable(value) else None

        return cls(
            new_state=obj.new_state,
            make_toolset=obj.make_toolset,
            fingerprint=obj.fingerprint,
            resources=optional("resources"),
            example_values=optional("example_values"),
            argument_strategies=optional("argument_strategies"),
            name=getattr(obj, "__name__", None) if isinstance(obj, ModuleType) else None,
        )


def _describe(obj: Any) -> str:
    if isinstance(obj, ModuleType):
        return f"Module {obj.__name__!r}"
    return f"{type(obj).__name__} {obj!r:.60}"


def as_certifiable(obj: Any) -> CertifiableToolset:
    """Accept a :class:`CertifiableToolset`, a :class:`~harness.tools.Toolset` (no state), a
    module or object with the contract's functions, a zero-argument factory of one of those,
    or a TOOLSET string (see :func:`load_certifiable`)."""
    if isinstance(obj, CertifiableToolset):
        return obj
    if isinstance(obj, Toolset):
        return CertifiableToolset.from_toolset(obj)
    if isinstance(obj, str | Path):
        return load_certifiable(str(obj))
    if hasattr(obj, "make_toolset") or isinstance(obj, ModuleType):
        return CertifiableToolset.from_object(obj)
    if callable(obj):
        try:
            made = obj()
        except TypeError as exc:
            raise ConfigError(
                f"{_describe(obj)} is callable but not a zero-argument factory ({exc}); pass a "
                "CertifiableToolset, a Toolset, or a module with new_state/make_toolset/fingerprint."
            ) from None
        if callable(made) and not isinstance(made, Toolset | CertifiableToolset):
            raise ConfigError(f"{_describe(obj)} returned another callable; return a toolset.")
        return as_certifiable(made)
    raise ConfigError(
        f"{_describe(obj)} is not a toolset: pass a CertifiableToolset, a Toolset, or a module "
        "with new_state/make_toolset/fingerprint."
    )


def load_certifiable(spec: str) -> CertifiableToolset:
    """Load ``TOOLSET`` as the command line names it: an importable module
    (``harness.toolsets.workspace``), an object in one (``pkg.mod:obj``), or an OpenAI/MCP-style spec
    file (``tools.json``: a list of function specs, or ``{"tools": [...]}`` as MCP's
    ``tools/list`` returns it)."""
    if spec.endswith(".json") or (("/" in spec or "\\" in spec) and Path(spec).exists()):
        return CertifiableToolset.from_toolset(_load_spec_file(Path(spec)))
    module_name, _, attribute = spec.partition(":")
    if not module_name or (":" in spec and not attribute):
        raise ConfigError(
            f"TOOLSET {spec!r} is malformed: write 'pkg.module' or 'pkg.module:object'."
        )
    module = _import(module_name, spec)
    if not attribute:
        return CertifiableToolset.from_object(module)
    obj: Any = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ConfigError(
                f"TOOLSET {spec!r}: module {module_name!r} has no attribute {attribute!r}."
            )
        obj = getattr(obj, part)
    return as_certifiable(obj)


def _import(module_name: str, spec: str) -> ModuleType:
    hint = (
        "Pass an importable module ('harness.toolsets.workspace'), 'pkg.module:object', or an "
        "OpenAI/MCP spec file ending in .json."
    )
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(f"TOOLSET {spec!r}: no module named {exc.name!r}. {hint}") from None
        raise ConfigError(
            f"TOOLSET {spec!r}: importing {module_name!r} failed because it needs the missing "
            f"module {exc.name!r}; install it."
        ) from None
    except Exception as exc:
        raise ConfigError(
            f"TOOLSET {spec!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from None


def _load_spec_file(path: Path) -> Toolset:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"Spec file {str(path)!r} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Spec file {str(path)!r} cannot be read: {exc}.") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"Spec file {str(path)!r} is not JSON: {exc.msg} at line {exc.lineno}."
        ) from None
    raw = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise ConfigError(
            f"Spec file {str(path)!r} must hold a list of OpenAI function specs or "
            '{"tools": [...]} as MCP\'s tools/list returns it.'
        )
    specs = []
    for item in raw:
        if "inputSchema" in item and "parameters" not in item:  # MCP's spelling
            item = {**item, "parameters": item["inputSchema"]}
        specs.append(item)
    return Toolset.from_openai(specs, name=path.stem)
