"""Claims about the certifier: D1, D2, D3, both detectors, and the headline property."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Manifest, Task, ToolCall, Toolset, tool
from harness.calls import ToolResult, execute_call
from harness.certify import (
    Certificate,
    PhaseHeuristicDetector,
    Rejection,
    SchemaSoundDetector,
    make_detector,
)
from harness.errors import ConfigError
from harness.window import Windows
from tests.doubles import MANIFEST, Store, make_toolset
from tests.strategies import doc_calls, schedules

FANWRITE = Manifest.from_dict(
    {
        "skills": {
            "all": {
                "phases": [
                    {
                        "name": "any",
                        "kind": "fan_out",
                        "tools": ["read_doc", "write_doc", "append_log"],
                    }
                ]
            }
        }
    }
).skill("all")


def call(i: int, name: str, **args: Any) -> ToolCall:
    return ToolCall(f"call_{i}", name, json.dumps(args, sort_keys=True))


def racy_toolset(store: Store, yields: dict[str, int]) -> Toolset:
    """The doubles toolset with read-modify-write steps split by scheduler yields."""

    async def pause(call_key: str) -> None:
        for _ in range(yields.get(call_key, 0)):
            await anyio.lowlevel.checkpoint()

    @tool(read_only=True, read_targets="doc:{key}")
    async def read_doc(key: str) -> dict[str, Any]:
        """Read."""
        await pause(f"read:{key}")
        return {"key": key, "body": store.docs.get(key, "")}

    @tool(idempotent=True, write_targets="doc:{key}")
    async def write_doc(key: str, body: str) -> str:
        """Write."""
        old = store.docs.get(key, "")
        await pause(f"write:{key}")
        store.docs[key] = body
        return f"{old}->{body}"

    @tool(write_targets="log")
    async def append_log(line: str) -> int:
        """Append."""
        n = len(store.log)
        await pause(f"log:{line}")
        store.log[n:] = [line]  # a lost update when another append ran in between
        return n + 1

    return Toolset([read_doc, write_doc, append_log])


async def run_serial(toolset: Toolset, calls: list[ToolCall]) -> list[ToolResult]:
    return [await execute_call(toolset, c) for c in calls]


async def run_scheduled(
    toolset: Toolset, calls: list[ToolCall], order: list[int]
) -> list[ToolResult]:
    results: dict[str, ToolResult] = {}

    async def one(c: ToolCall) -> None:
        results[c.id] = await execute_call(toolset, c)

    async with anyio.create_task_group() as tg:
        for index in order:
            tg.start_soon(one, calls[index])
    return [results[c.id] for c in calls]


def _yields_for(calls: list[ToolCall], counts: list[int]) -> dict[str, int]:
    out = {}
    for c, k in zip(calls, counts, strict=True):
        args = json.loads(c.arguments)
        key = {"read_doc": "read:{key}", "write_doc": "write:{key}", "append_log": "log:{line}"}[
            c.name
        ]
        out[key.format(**args)] = k
    return out


def initial_store() -> Store:
    return Store(docs={"a": "A", "b": "B"}, log=["start"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=doc_calls(), data=st.data())
def test_any_certified_window_run_concurrently_in_any_order_equals_the_serial_run(
    calls: list[ToolCall], data: st.DataObject
) -> None:
    """The headline property: certification implies commutation, results and state."""
    verdict = SchemaSoundDetector().certify(make_toolset(Store()), calls, FANWRITE.phases[0])
    if not isinstance(verdict, Certificate):
        return
    order, counts = data.draw(schedules(len(calls)))
    yields = _yields_for(calls, counts)

    serial_store, concurrent_store = initial_store(), initial_store()
    serial = anyio.run(run_serial, racy_toolset(serial_store, yields), calls)
    concurrent = anyio.run(run_scheduled, racy_toolset(concurrent_store, yields), calls, order)
    assert [r.content for r in concurrent] == [r.content for r in serial]
    assert concurrent_store.fingerprint() == serial_store.fingerprint()


def test_the_headline_property_can_fail_when_a_window_is_not_certifiable() -> None:
    """The same check on an uncertified window (two appends) does see a difference."""
    calls = [call(0, "append_log", line="l1"), call(1, "append_log", line="l2")]
    verdict = SchemaSoundDetector().certify(make_toolset(Store()), calls, FANWRITE.phases[0])
    assert isinstance(verdict, Rejection)
    yields = {"log:l1": 2, "log:l2": 0}
    serial_store, concurrent_store = initial_store(), initial_store()
    anyio.run(run_serial, racy_toolset(serial_store, yields), calls)
    anyio.run(run_scheduled, racy_toolset(concurrent_store, yields), calls, [0, 1])
    assert serial_store.log != concurrent_store.log


def test_reads_of_any_keys_certify() -> None:
    calls = [
        call(0, "read_doc", key="a"),
        call(1, "read_doc", key="a"),
        call(2, "read_doc", key="b"),
    ]
    verdict = SchemaSoundDetector().certify(make_toolset(Store()), calls, FANWRITE.phases[0])
    assert isinstance(verdict, Certificate)
    assert verdict.n == 3
    assert any(e.startswith("D1") for e in verdict.evidence)


def test_disjoint_writes_certify_and_overlapping_writes_fail_D1() -> None:
    ts = make_toolset(Store())
    ok = [call(0, "write_doc", key="a", body="1"), call(1, "write_doc", key="b", body="2")]
    bad = [call(0, "write_doc", key="a", body="1"), call(1, "write_doc", key="a", body="2")]
    assert isinstance(SchemaSoundDetector().certify(ts, ok, FANWRITE.phases[0]), Certificate)
    verdict = SchemaSoundDetector().certify(ts, bad, FANWRITE.phases[0])
    assert isinstance(verdict, Rejection)
    assert verdict.codes == ("D1_write_conflict",)


def test_two_idempotent_writes_of_different_values_to_one_target_do_not_certify() -> None:
    """Stricter than the paper's wording: idempotent alone is not enough to commute."""
    ts = make_toolset(Store())
    verdict = SchemaSoundDetector().certify(
        ts,
        [call(0, "write_doc", key="a", body="1"), call(1, "write_doc", key="a", body="2")],
        FANWRITE.phases[0],
    )
    assert isinstance(verdict, Rejection)


def test_the_same_idempotent_write_twice_does_not_certify() -> None:
    """Same final state either way, but a write that reports what it replaced returns
    different results in the two orders (hypothesis found this)."""
    ts = make_toolset(Store())
    same = [call(0, "write_doc", key="a", body="1"), call(1, "write_doc", key="a", body="1")]
    verdict = SchemaSoundDetector().certify(ts, same, FANWRITE.phases[0])
    assert isinstance(verdict, Rejection)
    assert verdict.codes == ("D1_write_conflict",)


def test_a_read_and_a_write_of_the_same_document_fail_D1() -> None:
    ts = make_toolset(Store())
    verdict = SchemaSoundDetector().certify(
        ts,
        [call(0, "read_doc", key="a"), call(1, "write_doc", key="a", body="x")],
        FANWRITE.phases[0],
    )
    assert isinstance(verdict, Rejection)
    assert verdict.codes == ("D1_read_write_conflict",)


def test_an_unannotated_writer_never_shares_a_window() -> None:
    @tool
    async def mystery(x: int) -> int:
        """Nobody said what this does."""
        return x

    ts = Toolset([mystery])
    phase = (
        Manifest.from_dict(
            {"skills": {"m": {"phases": [{"name": "m", "kind": "fan_out", "tools": ["mystery"]}]}}}
        )
        .skill("m")
        .phases[0]
    )
    verdict = SchemaSoundDetector().certify(
        ts, [call(0, "mystery", x=1), call(1, "mystery", x=2)], phase
    )
    assert isinstance(verdict, Rejection)
    assert verdict.codes == ("D1_unknown_write_targets",)


def test_a_chain_phase_fails_D3_and_an_in_window_result_placeholder_fails_D2() -> None:
    ts = make_toolset(Store())
    chain = MANIFEST.skill("chain").phases[0]
    verdict = SchemaSoundDetector().certify(
        ts, [call(0, "read_doc", key="a"), call(1, "read_doc", key="b")], chain
    )
    assert isinstance(verdict, Rejection)
    assert verdict.conditions == {"D3", "D2"}
    assert "D3_chain_phase" in verdict.codes
    assert "D2_result_placeholder" in verdict.codes


def test_no_manifest_phase_fails_D3_for_the_schema_sound_detector() -> None:
    verdict = SchemaSoundDetector().certify(
        make_toolset(Store()), [call(0, "read_doc", key="a")] * 2, None
    )
    assert isinstance(verdict, Rejection)
    assert "D3_no_phase" in verdict.codes


def test_the_tracker_closes_a_window_on_its_slot_count() -> None:
    from harness.certify import SchemaSoundDetector as D

    tracker = Windows(
        D().tracker(make_toolset(Store()), MANIFEST.skill("report"), {"keys": ["a", "b"]})
    )
    first = tracker.admit(call(0, "read_doc", key="a"))
    second = tracker.admit(call(1, "read_doc", key="b"))
    assert (first.admission.action, first.admission.completes) == ("join", None)
    assert second.admission.action == "join"
    assert second.admission.completes is not None
    assert second.admission.completes.closed_by == "slot_closure"
    assert second.admission.completes.call_ids == ("call_0", "call_1")


def test_the_tracker_closes_on_a_phase_change_and_discards_a_dependent_call() -> None:
    tracker = Windows(
        SchemaSoundDetector().tracker(make_toolset(Store()), MANIFEST.skill("report_unslotted"), {})
    )
    tracker.admit(call(0, "read_doc", key="a"))
    tracker.admit(call(1, "read_doc", key="b"))
    verdict = tracker.admit(call(2, "write_doc", key="s", body="?"))
    assert verdict.admission.action == "discard"
    assert verdict.admission.closes is not None
    assert verdict.admission.closes.n == 2
    assert verdict.admission.failures[0].condition == "D2"


def test_the_tracker_caps_a_window_at_its_size_limit() -> None:
    tracker = Windows(
        SchemaSoundDetector(max_window=2).tracker(
            make_toolset(Store()), MANIFEST.skill("report_unslotted"), {}
        )
    )
    tracker.admit(call(0, "read_doc", key="a"))
    capped = tracker.admit(call(1, "read_doc", key="b"))
    assert capped.admission.completes is not None
    assert capped.admission.completes.closed_by == "size_cap"


def test_the_phase_heuristic_certifies_reads_without_a_manifest_and_can_false_fill() -> None:
    """Reads whose keys really come from each other's results still get certified."""
    ts = make_toolset(Store())
    chained = [call(0, "read_doc", key="a"), call(1, "read_doc", key="body-of-a")]
    assert isinstance(PhaseHeuristicDetector().certify(ts, chained, None), Certificate)
    chain_phase = MANIFEST.skill("chain").phases[0]
    assert isinstance(SchemaSoundDetector().certify(ts, chained, chain_phase), Rejection)


def test_the_phase_heuristic_catches_a_call_that_quotes_the_withheld_marker() -> None:
    detector = PhaseHeuristicDetector()
    tracker = Windows(detector.tracker(make_toolset(Store()), None, {}))
    tracker.admit(call(0, "read_doc", key="a"))
    verdict = tracker.admit(call(1, "read_doc", key=detector.marker))
    assert verdict.admission.action == "discard"


def test_an_unknown_detector_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="schema_sound"):
        make_detector("psychic")


def test_certification_never_reads_results() -> None:
    """D1-D3 look at names, arguments, effects and the manifest only: a Task is enough."""
    task = Task(id="t", prompt="p", skill="report", inputs={"keys": ["a"]})
    tracker = Windows(
        SchemaSoundDetector().tracker(
            make_toolset(Store()), MANIFEST.skill(task.skill or ""), task.inputs
        )
    )
    verdict = tracker.admit(call(0, "read_doc", key="a"))
    assert verdict.admission.action == "join"
    assert verdict.admission.completes is not None


AMBIGUOUS = Manifest.from_dict(
    {
        "skills": {
            "two_reads": {
                "phases": [
                    {"name": "gather", "kind": "fan_out", "tools": ["read_doc"]},
                    {
                        "name": "follow",
                        "kind": "fan_out",
                        "tools": ["read_doc"],
                        "args": {"read_doc.key": "result:gather"},
                    },
                ]
            }
        }
    }
).skill("two_reads")


def test_a_call_that_may_belong_to_a_later_dependent_phase_is_never_windowed() -> None:
    """An open-ended fan-out phase followed by a phase that reuses its tool on its results:
    the second read may be the dependent one, so it must not join the first read's window."""
    tracker = Windows(SchemaSoundDetector().tracker(make_toolset(Store()), AMBIGUOUS, {}))
    first = tracker.admit(call(0, "read_doc", key="a"))
    second = tracker.admit(call(1, "read_doc", key="from-a"))
    assert first.admission.action == "serial"
    assert first.admission.failures[0].code == "D3_ambiguous_phase"
    assert second.admission.action == "serial"
    assert tracker.open_calls == ()


def test_a_slot_count_resolves_the_ambiguity() -> None:
    slotted = Manifest.from_dict(
        {
            "skills": {
                "s": {
                    "phases": [
                        {"name": "gather", "kind": "fan_out", "tools": ["read_doc"], "slots": 2},
                        {
                            "name": "follow",
                            "kind": "chain",
                            "tools": ["read_doc"],
                            "args": {"read_doc.key": "result:gather"},
                        },
                    ]
                }
            }
        }
    ).skill("s")
    tracker = Windows(SchemaSoundDetector().tracker(make_toolset(Store()), slotted, {}))
    assert tracker.admit(call(0, "read_doc", key="a")).admission.action == "join"
    closing = tracker.admit(call(1, "read_doc", key="b"))
    assert closing.admission.completes is not None
    assert tracker.admit(call(2, "read_doc", key="from-a")).admission.action == "serial"


def test_batch_and_online_certification_report_an_over_filled_phase_with_the_same_code() -> None:
    ts = make_toolset(Store())
    phase = MANIFEST.skill("report").phases[0]  # fan_out read_doc, slots = input:keys
    inputs = {"keys": ["a"]}
    calls = [call(0, "read_doc", key="a"), call(1, "read_doc", key="b")]
    batch = SchemaSoundDetector().certify(ts, calls, phase, inputs)
    assert isinstance(batch, Rejection)
    assert "D3_over_slots" in batch.codes
    online = Windows(SchemaSoundDetector().tracker(ts, MANIFEST.skill("report"), inputs))
    online.admit(calls[0])
    second = online.admit(calls[1])
    assert second.admission.action == "serial"
    assert second.admission.failures[0].code == "D3_over_slots"
