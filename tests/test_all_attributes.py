"""Every public module declares a tuple ``__all__`` whose names exist (cf. anyio's test)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import harness

#: Third-party packages behind optional extras; a module that needs one that is not installed
#: is skipped, not failed (engines import them lazily, so this should not happen in practice).
OPTIONAL = {"vllm", "torch", "transformers", "gguf", "matplotlib"}


def _public_modules() -> list[str]:
    walked = pkgutil.walk_packages(harness.__path__, prefix="harness.")
    names = [
        info.name for info in walked if not any(p.startswith("_") for p in info.name.split("."))
    ]
    return sorted(["harness", *names])


PUBLIC_MODULES = _public_modules()


def _import(name: str) -> object:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.partition(".")[0] in OPTIONAL:
            pytest.skip(f"{name} needs the optional package {exc.name!r}")
        raise


def test_the_walk_finds_the_core_modules():
    for name in (
        "harness.tools",
        "harness.tools.execute",
        "harness.skills.manifest",
        "harness.errors",
    ):
        assert name in PUBLIC_MODULES
    assert not [n for n in PUBLIC_MODULES if "._" in n]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_module_has_a_tuple_all_whose_names_exist(name):
    module = _import(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, tuple), f"{name}.__all__ must be a tuple"
    missing = [attr for attr in exported if not hasattr(module, attr)]
    assert missing == [], f"{name}.__all__ names attributes that do not exist"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    assert all(isinstance(attr, str) for attr in exported)


def test_the_package_all_is_a_tuple_whose_names_resolve():
    assert isinstance(harness.__all__, tuple)
    for attr in harness.__all__:
        assert getattr(harness, attr) is not None, attr


def test_the_package_re_exports_the_same_objects_as_their_modules():
    for attr in harness.__all__:
        obj = getattr(harness, attr)
        home = getattr(obj, "__module__", None)
        if home is None or not home.startswith("harness."):
            continue  # type aliases and typing constructs have no useful home module
        assert getattr(importlib.import_module(home), attr) is obj, attr
