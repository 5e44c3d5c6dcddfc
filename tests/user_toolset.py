"""A toolset of "your own", loaded by `harness run --toolset tests.user_toolset:...` in tests.

A factory (a fresh store per run), a shared instance, and the wrong things the CLI must
refuse with a clear message.
"""

from __future__ import annotations

from harness import Toolset
from tests.doubles import make_toolset as _make
from tests.doubles import seeded_store

KEYS = ["a", "b", "c"]

#: Every run made by the factory, so tests can look at the stores.
STORES = []


def make_toolset() -> Toolset:
    store = seeded_store(KEYS)
    STORES.append(store)
    return _make(store)


toolset = _make(seeded_store(KEYS))
not_a_toolset = 42


def returns_a_string() -> str:
    return "tools"


def needs_an_argument(store: object) -> Toolset:
    return _make(seeded_store(KEYS))


MANIFEST_TOML = """
[skills.report]
[[skills.report.phases]]
name = "gather"
kind = "fan_out"
tools = ["read_doc"]
slots = "input:keys"
args = { "read_doc.key" = "input:keys" }

[[skills.report.phases]]
name = "write"
kind = "chain"
tools = ["write_doc"]
args = { "write_doc.body" = "result:gather", "write_doc.key" = "input" }

[skills.other]
[[skills.other.phases]]
name = "gather"
kind = "fan_out"
tools = ["read_doc"]
"""
