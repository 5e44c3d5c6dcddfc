"""Claims about the window owner: membership, certificates, execution at close or eager."""

from __future__ import annotations

import json

import anyio
import pytest

from harness.certify import SchemaSoundDetector
from harness.certify.window import Window, Windows
from harness.errors import ConfigError
from harness.messages import ToolCall
from harness.tools.execute import ToolsetExecutor
from tests.doubles import MANIFEST, Store, make_toolset, seeded_store


def read(i: int, key: str) -> ToolCall:
    return ToolCall(f"call_{i}", "read_doc", json.dumps({"key": key}))


def test_a_draft_window_tracks_its_calls_but_cannot_run_them() -> None:
    window = Window("gather")
    window.add(read(0, "a"))
    assert [c.id for c in window.calls] == ["call_0"]
    with pytest.raises(ConfigError, match="draft window"):
        anyio.run(window.results)


def test_replay_closes_each_window_with_the_certificate_of_exactly_its_calls() -> None:
    tracker = SchemaSoundDetector().tracker(
        make_toolset(Store()), MANIFEST.skill("report"), {"keys": ["a", "b"]}
    )
    closed = Windows(tracker).replay([read(0, "a"), read(1, "b")], readmit_discarded=False)
    assert len(closed) == 1
    window = closed[0]
    assert window.certificate is not None
    assert window.certificate.closed_by == "slot_closure"
    assert window.certificate.call_ids == tuple(c.id for c in window.calls) == ("call_0", "call_1")


def test_a_closed_window_accepts_no_more_calls() -> None:
    tracker = SchemaSoundDetector().tracker(
        make_toolset(Store()), MANIFEST.skill("report"), {"keys": ["a"]}
    )
    step = Windows(tracker).admit(read(0, "a"))
    assert step.completed is not None
    with pytest.raises(ConfigError, match="closed"):
        step.completed.add(read(1, "b"))


def test_at_close_execution_runs_every_call_and_returns_results_in_emitted_order() -> None:
    store = seeded_store(["a", "b", "c"])
    window = Window("gather", executor=ToolsetExecutor(make_toolset(store)))
    for i, key in enumerate(["c", "a", "b"]):
        window.add(read(i, key))
        window.dispatch(read(i, key))  # no task group: nothing starts before the close
    results = anyio.run(window.results)
    assert [r.call_id for r in results] == ["call_0", "call_1", "call_2"]
    assert all(not r.is_error for r in results)
    assert window.mode == "window"
