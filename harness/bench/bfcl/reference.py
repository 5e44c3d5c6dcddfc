"""BFCL's own AST checker, imported from the installed ``bfcl-eval`` package.

:func:`reference_checker` loads ``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` — BFCL's
code, unchanged — and calls its ``ast_checker`` the way BFCL's evaluation runner does for a
function-calling model's decoded output (``[{name: {param: value}}, ...]``, Python language,
the entry's BFCL v4 category name). It is the oracle the scorer
(:mod:`harness.bench.bfcl.checker`) is measured against and the judge of data quirks.

One import is replaced. The checker module imports ``bfcl_eval.constants.model_config`` only
to ask, for the model being scored, whether dots in function names become underscores; that
module imports every model handler BFCL ships and with them BFCL's full dependency tree (API
clients for a dozen vendors, tree-sitter, ...), which the ``--no-deps`` install leaves out.
While the checker module loads, a stand-in for ``model_config`` answers the one question the
way BFCL's config does for function-calling models (``underscore_to_dot=True``: this
harness's tool names have dots as underscores); ``sys.modules`` is restored afterwards.
"""

from __future__ import annotations

import copy
import importlib
import importlib.resources
import importlib.util
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from harness.bench.bfcl.categories import bfcl_name
from harness.bench.bfcl.data import INSTALL_HINT, PACKAGE, BFCLDataError

__all__ = ("ReferenceChecker", "reference_checker")

#: The model name handed to BFCL's checker (the stand-in config answers for any name).
MODEL_NAME: Final = "agent-harness-fc"
_CHECKER: Final = "eval_checker/ast_eval/ast_checker.py"
_CONFIG_MODULE: Final = "bfcl_eval.constants.model_config"


@dataclass(frozen=True)
class _FunctionCallingConfig:
    underscore_to_dot: bool = True


class _AnyModel(dict[str, _FunctionCallingConfig]):
    def __missing__(self, key: str) -> _FunctionCallingConfig:
        return _FunctionCallingConfig()


@dataclass(frozen=True)
class ReferenceChecker:
    """BFCL's ``ast_checker`` bound to its ``Language.PYTHON``; call it with a category, the
    entry's function docs, a decoded output and the ground truth. It returns BFCL's result
    dict (``valid``, ``error``, ``error_type``); where BFCL's code raises (it does on some
    malformed inputs) the result is invalid with ``error_type`` ``"reference:raised:<Type>"``."""

    ast_checker: Callable[..., dict[str, Any]]
    python: Any
    source: str

    def __call__(
        self,
        category: str,
        functions: Sequence[Mapping[str, Any]],
        output: Sequence[Mapping[str, Any]],
        ground_truth: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        try:
            return self.ast_checker(
                copy.deepcopy(list(functions)),
                copy.deepcopy(list(output)),
                copy.deepcopy(list(ground_truth)),
                self.python,
                bfcl_name(category),
                MODEL_NAME,
            )
        except Exception as exc:  # BFCL's code on inputs it does not expect
            return {
                "valid": False,
                "error": [f"{type(exc).__name__}: {exc}"],
                "error_type": f"reference:raised:{type(exc).__name__}",
            }


def reference_checker(package: str = PACKAGE) -> ReferenceChecker:
    """BFCL's checker from the installed package (see the module docstring)."""
    return _load(package)


_cache: dict[str, ReferenceChecker] = {}


def _load(package: str) -> ReferenceChecker:
    if package in _cache:
        return _cache[package]
    try:
        path = importlib.resources.files(package) / _CHECKER
    except ModuleNotFoundError:
        raise BFCLDataError(
            f"BFCL's checker comes from the PyPI package bfcl-eval, and Python package "
            f"{package!r} is not installed; install it with `{INSTALL_HINT}`."
        ) from None
    if not path.is_file():
        raise BFCLDataError(
            f"Package {package!r} has no {_CHECKER}; install a release that ships BFCL's AST "
            f"checker: `{INSTALL_HINT}`."
        )
    stand_in = types.ModuleType(_CONFIG_MODULE)
    stand_in.MODEL_CONFIG_MAPPING = _AnyModel()  # type: ignore[attr-defined]
    saved = sys.modules.get(_CONFIG_MODULE)
    sys.modules[_CONFIG_MODULE] = stand_in
    try:
        spec = importlib.util.spec_from_file_location("_bfcl_reference_ast_checker", str(path))
        if spec is None or spec.loader is None:  # pragma: no cover - a file path always has one
            raise BFCLDataError(f"Cannot load BFCL's checker from {path}.")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        language = importlib.import_module(f"{package}.constants.enums").Language
    except ImportError as exc:
        raise BFCLDataError(
            f"BFCL's checker in {path} cannot be imported ({exc}); this harness was checked "
            f"against bfcl-eval 2026.3.23: `pip install --no-deps bfcl-eval==2026.3.23`."
        ) from None
    finally:
        if saved is None:
            del sys.modules[_CONFIG_MODULE]
        else:
            sys.modules[_CONFIG_MODULE] = saved
    checker = ReferenceChecker(module.ast_checker, language.PYTHON, str(path))
    _cache[package] = checker
    return checker
