"""Claims about the certification kit's check of the speculation opt-in (Effect.speculable)."""

from __future__ import annotations

from typing import Any

import anyio.lowlevel

from harness import Toolset, tool
from harness.certkit import CertifiableToolset, check_toolset
from harness.certkit._kit import Kit
from harness.certkit._speculable import check_speculable
from tests.broken_toolsets import Desk, _certifiable, _doc, _toolset


def _with(make_tool: Any) -> CertifiableToolset:
    def make(state: Desk) -> Toolset:
        stamp = make_tool(state)
        return _toolset(state, **{stamp.name: stamp})

    return _certifiable(make)


def _claim(cert: CertifiableToolset) -> Any:
    kit = Kit.start(
        cert, seed=0, examples=25, deadline=None, database=None, max_window=5, detector=None
    )
    (name,) = [n for n, t in kit.toolset.items() if t.effect.speculable]
    return check_speculable(kit, name)


def test_the_kit_plans_the_speculable_claim_for_an_opted_in_tool() -> None:
    def make(state: Desk) -> Any:
        @tool(idempotent=True, write_targets="doc:{key}/status", read_targets=(), speculable=True)
        async def approve(key: str) -> str:
            """Idempotent, but takes no key."""
            return "ok"

        return approve

    report = check_toolset(_with(make), examples=2)
    assert [c.status for c in report.claims if c.claim == "speculable"] == ["FALSE"]


def test_a_keyed_idempotent_opted_in_tool_passes_the_speculable_claim() -> None:
    def make(state: Desk) -> Any:
        @tool(idempotent=True, write_targets="doc:{key}/status", read_targets=(), speculable=True)
        async def approve(key: str, idempotency_key: str | None = None) -> dict[str, Any]:
            """Approve a document (idempotent; keyed)."""
            await anyio.lowlevel.checkpoint()
            _doc(state, key)["status"] = "approved"
            return {"key": key, "status": "approved"}

        return approve

    assert _claim(_with(make)).status == "passed"


def test_an_opted_in_tool_that_counts_its_calls_is_caught_running_twice() -> None:
    def make(state: Desk) -> Any:
        @tool(idempotent=True, write_targets="counter", read_targets=(), speculable=True)
        async def bump(key: str, idempotency_key: str | None = None) -> int:
            """Claims idempotence, but counts every call, key or not."""
            await anyio.lowlevel.checkpoint()
            state.counter += 1
            return state.counter

        return bump

    claim = _claim(_with(make))
    assert claim.status == "FALSE"
    assert "twice" in claim.counterexample.message


def test_an_opted_in_tool_with_an_undeclared_read_is_caught_running_early() -> None:
    def make(state: Desk) -> Any:
        @tool(idempotent=True, write_targets="doc:{key}/status", read_targets=(), speculable=True)
        async def approve_tagged(key: str, idempotency_key: str | None = None) -> str:
            """Approves a tagged document; reads its tags without declaring it."""
            await anyio.lowlevel.checkpoint()
            doc = _doc(state, key)
            doc["status"] = "approved" if doc["tags"] else "review"
            return str(doc["status"])

        return approve_tagged

    claim = _claim(_with(make))
    assert claim.status == "FALSE"
    assert "before" in claim.counterexample.message


def test_an_opt_in_without_an_idempotency_key_is_refused() -> None:
    def make(state: Desk) -> Any:
        @tool(idempotent=True, write_targets="doc:{key}/status", read_targets=(), speculable=True)
        async def approve(key: str) -> str:
            """Idempotent, but takes no key."""
            _doc(state, key)["status"] = "approved"
            return "ok"

        return approve

    claim = _claim(_with(make))
    assert claim.status == "FALSE"
    assert "idempotency key" in claim.counterexample.message
