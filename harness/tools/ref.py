"""A toolset named on the command line: ``MODULE:ATTR`` or ``path/to/file.py:ATTR``.

``ATTR`` is a :class:`~harness.tools.Toolset`, or a factory (a callable taking no
arguments) that returns one. A factory is called once per run, so each run gets fresh tool
state (a batch of tasks never shares an in-memory store); a Toolset instance is shared by
every run. :func:`load_toolset` raises :class:`~harness.errors.ConfigError` for every mistake
(no colon, module not found, attribute missing, not a toolset, a factory that fails), naming
what it tried and the fix, never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from harness.errors import ConfigError, HarnessError
from harness.tools.toolset import Toolset

__all__ = ("ToolsetFactory", "load_toolset")

#: What :func:`load_toolset` gives: call it for the toolset of one run.
ToolsetFactory = Callable[[], Toolset]
T = TypeVar("T")


def _module(name: str, ref: str) -> object:
    if name.endswith(".py") or "/" in name:
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"--toolset {ref!r}: no file {str(path)!r}.")
        spec = importlib.util.spec_from_file_location(f"_harness_toolset_{path.stem}", path)
        if spec is None or spec.loader is None:  # pragma: no cover - a .py path always loads
            raise ConfigError(f"--toolset {ref!r}: {str(path)!r} cannot be imported.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        _run(lambda: spec.loader.exec_module(module), ref)  # type: ignore[union-attr]
        return module
    if str(Path.cwd()) not in sys.path and "" not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # as `python -m` would: the current folder
    try:
        return _run(lambda: importlib.import_module(name), ref)
    except ModuleNotFoundError as exc:
        missing = exc.name or name
        hint = (
            "check the spelling, or run from the folder that holds it (or set PYTHONPATH)"
            if missing == name.split(".")[0] or missing == name
            else f"it imports {missing!r}, which is not installed"
        )
        raise ConfigError(f"--toolset {ref!r}: module {name!r} not found ({hint}).") from None


def _run(step: Callable[[], T], ref: str, doing: str = "importing it") -> T:
    try:
        return step()
    except (HarnessError, ModuleNotFoundError):
        raise
    except Exception as exc:
        raise ConfigError(
            f"--toolset {ref!r}: {doing} raised {type(exc).__name__}: {exc}; fix it so that "
            "it works with no arguments."
            if doing != "importing it"
            else f"--toolset {ref!r}: importing it raised {type(exc).__name__}: {exc}; fix the "
            "module so that it imports."
        ) from None


def load_toolset(ref: str) -> ToolsetFactory:
    """The factory of the toolset ``ref`` names (module docstring). The factory is called
    once here, so a broken one fails now, before any run starts."""
    module_name, colon, attr = ref.rpartition(":")
    if not colon or not module_name or not attr:
        raise ConfigError(
            f"--toolset {ref!r} is not MODULE:ATTR; name a module and the Toolset (or factory) "
            "in it, e.g. --toolset mytools:toolset or --toolset tools.py:make_toolset."
        )
    module = _module(module_name, ref)
    target: object = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            public = sorted(n for n in vars(module) if not n.startswith("_"))
            raise ConfigError(
                f"--toolset {ref!r}: module {module_name!r} has no attribute {attr!r}; it "
                f"has {', '.join(public[:20]) or 'nothing public'}."
            ) from None
    if isinstance(target, Toolset):
        toolset = target
        factory: ToolsetFactory = lambda: toolset  # noqa: E731 - the shared instance
        return factory
    if not callable(target):
        raise ConfigError(
            f"--toolset {ref!r} is a {type(target).__name__}, not a Toolset or a factory that "
            "returns one; point it at a harness.Toolset (or a function returning one)."
        )

    def build() -> Toolset:
        made = _run(target, ref, "calling the factory")
        if not isinstance(made, Toolset):
            raise ConfigError(
                f"--toolset {ref!r}: the factory returned a {type(made).__name__}, not a "
                "harness.Toolset; return Toolset([...]) from it."
            )
        return made

    build()
    return build
