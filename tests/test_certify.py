"""Claims about the certifier: D1, D2, D3, both detectors, and the headline property."""

from __future__ import annotations

import functools
import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Manifest, Task, ToolCall, Toolset, tool
from harness.certify import (
    Certificate,
    PhaseHeuristicDetector,
    Rejection,
    SchemaSoundDetector,
    make_detector,
)
from harness.certify.window import Windows
from harness.errors import ConfigError
from harness.tools.execute import ToolResult, execute_call
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

    @tool(idempotent=True, write_targets="doc:{key}", read_targets="doc:{key}")
    async def write_doc(key: str, body: str) -> str:
        """Write."""
        old = store.docs.get(key, "")
        await pause(f"write:{key}")
        store.docs[key] = body
        return f"{old}->{body}"

    @tool(write_targets="log", read_targets="log")
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


# --------------------------------------------------------------------------------------------
# Issue 15: no false fill under true declarations; certification total and fast

ONE_PHASE = Manifest.from_dict(
    {
        "skills": {
            "s": {
                "phases": [
                    {
                        "name": "p",
                        "kind": "fan_out",
                        "tools": ["put", "get", "copy", "put_slot", "probe"],
                        "args": {"put.key": "input:keys"},
                    }
                ]
            }
        }
    }
).skill("s")


def issue15_toolset() -> Toolset:
    @tool(idempotent=True, write_targets="doc:{key}/status", read_targets=(), canonical="case")
    def put(key: str, status: str) -> str:
        """Set a status (the store folds key case)."""
        return "ok"

    @tool(read_only=True, read_targets="doc:{key}", canonical="case")
    def get(key: str) -> str:
        """Read a whole document."""
        return "ok"

    @tool(write_targets="doc:{dst}", canonical={"src": "case", "dst": "case"})
    def copy(src: str, dst: str) -> str:
        """Copy one document over another (reads undeclared: unknown)."""
        return "ok"

    @tool(idempotent=True, write_targets="slot:{n}", read_targets=())
    def put_slot(n: int, value: str) -> str:
        """Write a numbered slot."""
        return "ok"

    @tool(idempotent=True, write_targets=lambda a: [f"slot:{a['n']}"], read_targets=())
    def probe(n: int) -> str:
        """Targets from a function that assumes ``n`` is there."""
        return "ok"

    return Toolset([put, get, copy, put_slot, probe])


def certify_calls(*calls: ToolCall, inputs: dict[str, Any] | None = None) -> Any:
    return SchemaSoundDetector().certify(
        issue15_toolset(), list(calls), ONE_PHASE.phases[0], inputs or {"keys": ["a", "b"]}
    )


def test_item1_coercible_spellings_of_one_slot_do_not_certify_together() -> None:
    verdict = certify_calls(
        call(0, "put_slot", n=1, value="x"), call(1, "put_slot", n=1.0, value="y")
    )
    assert isinstance(verdict, Rejection)
    assert verdict.codes == ("D1_write_conflict",)


def test_item1_aliases_under_a_declared_fold_do_not_certify_together() -> None:
    verdict = certify_calls(
        call(0, "put", key="a", status="x"), call(1, "put", key="A", status="y")
    )
    assert isinstance(verdict, Rejection)
    assert verdict.codes == ("D1_write_conflict",)


def test_item2_a_writer_with_unset_reads_does_not_share_a_window_with_another_write() -> None:
    verdict = certify_calls(call(0, "copy", src="a", dst="b"), call(1, "put", key="a", status="x"))
    assert isinstance(verdict, Rejection)
    assert "D1_unknown_read_targets" in verdict.codes


def test_item3_a_whole_document_read_and_a_field_write_do_not_certify_together() -> None:
    verdict = certify_calls(call(0, "get", key="a"), call(1, "put", key="a", status="x"))
    assert isinstance(verdict, Rejection)
    assert verdict.codes == ("D1_read_write_conflict",)
    other = certify_calls(call(0, "get", key="b"), call(1, "put", key="a", status="x"))
    assert isinstance(other, Certificate)


def test_item4_an_input_sourced_argument_outside_the_inputs_is_refused() -> None:
    verdict = certify_calls(
        call(0, "put", key="a", status="x"), call(1, "put", key="z", status="y")
    )
    assert isinstance(verdict, Rejection)
    assert "D2_provenance" in verdict.codes


def test_item4_online_a_deviating_call_is_discarded_while_a_window_is_open() -> None:
    from harness.certify.provenance import TurnView

    windows = Windows(
        SchemaSoundDetector().tracker(issue15_toolset(), ONE_PHASE, {"keys": ["a", "b"]})
    )
    assert windows.admit(call(0, "put", key="a", status="x"), TurnView()).admission.action == (
        "join"
    )
    refused = windows.admit(call(1, "put", key="from-a-result", status="x"), TurnView()).admission
    assert refused.action == "discard"
    assert refused.closes is not None
    assert refused.failures[0].code == "D2_provenance"
    again = windows.admit(call(2, "put", key="from-a-result", status="x"), TurnView()).admission
    assert again.action == "serial"  # no window open: nothing was withheld from it


def test_item4_the_marker_is_refused_under_any_source_and_by_both_detectors() -> None:
    quoting = call(1, "put_slot", n=2, value="[withheld]")
    schema = certify_calls(call(0, "put_slot", n=1, value="x"), quoting)
    assert isinstance(schema, Rejection)
    assert "D2_quotes_marker" in schema.codes
    heuristic = Windows(PhaseHeuristicDetector().tracker(issue15_toolset(), None, {}))
    heuristic.admit(call(0, "get", key="a"))
    assert heuristic.admit(call(1, "get", key="x [withheld]")).admission.action == "discard"


def test_item4_the_text_of_a_finished_withheld_result_is_refused() -> None:
    from harness.certify.provenance import TurnView

    windows = Windows(SchemaSoundDetector().tracker(issue15_toolset(), ONE_PHASE, {"keys": ["a"]}))
    windows.admit(call(0, "put_slot", n=1, value="x"), TurnView())
    leaked = windows.admit(
        call(1, "put_slot", n=2, value="id-7731"), TurnView((), ("id-7731",))
    ).admission
    assert leaked.action == "discard"
    assert leaked.failures[0].code == "D2_quotes_marker"


def test_item5_batch_certify_enforces_slot_counts_like_the_tracker() -> None:
    slotted = Manifest.from_dict(
        {
            "skills": {
                "s": {"phases": [{"name": "p", "kind": "fan_out", "tools": ["get"], "slots": 2}]}
            }
        }
    ).skill("s")
    calls = [call(i, "get", key=k) for i, k in enumerate("abc")]
    verdict = SchemaSoundDetector().certify(issue15_toolset(), calls, slotted.phases[0], {})
    assert isinstance(verdict, Rejection)
    assert "D3_over_slots" in verdict.codes
    two = SchemaSoundDetector().certify(issue15_toolset(), calls[:2], slotted.phases[0], {})
    assert isinstance(two, Certificate)


def test_item6_a_target_function_that_raises_is_not_certified_and_never_raises() -> None:
    verdict = certify_calls(call(0, "probe", n=1), call(1, "probe", n=2))
    assert isinstance(verdict, Certificate)
    broken = ToolCall("call_1", "probe", json.dumps({"n": "eight"}))  # schema-invalid
    verdict = certify_calls(call(0, "probe", n=1), broken)
    assert isinstance(verdict, Rejection)
    assert "D1_bad_arguments" in verdict.codes


def test_item7_each_calls_footprint_is_computed_once_per_admission() -> None:
    from unittest import mock

    from harness.tools import Tool

    calls = [call(i, "get", key=k) for i, k in enumerate("abcdefgh")]
    with mock.patch.object(Tool, "footprint", autospec=True, side_effect=Tool.footprint) as spy:
        windows = Windows(SchemaSoundDetector().tracker(issue15_toolset(), FANWRITE_GET, {}))
        for c in calls:
            assert windows.admit(c).admission.action == "join"
    assert spy.call_count == len(calls)  # not once per pair


FANWRITE_GET = Manifest.from_dict(
    {"skills": {"s": {"phases": [{"name": "p", "kind": "fan_out", "tools": ["get"]}]}}}
).skill("s")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=doc_calls(max_size=6), slots=st.one_of(st.none(), st.integers(1, 6)), data=st.data())
def test_batch_certify_agrees_with_the_online_tracker_on_any_block_of_calls(
    calls: list[ToolCall], slots: int | None, data: st.DataObject
) -> None:
    """Item 5: one decision procedure. Batch certifies a block iff the online tracker, at the
    start of that phase, admits every call into one window, with the same reason codes."""
    keys = data.draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4))
    raw = {
        "name": "p",
        "kind": "fan_out",
        "tools": ["read_doc", "write_doc", "append_log"],
        "args": {"read_doc.key": "input:keys"} if data.draw(st.booleans()) else {},
    }
    if slots is not None:
        raw["slots"] = slots
    skill = Manifest.from_dict({"skills": {"s": {"phases": [raw]}}}).skill("s")
    toolset, inputs = make_toolset(Store()), {"keys": keys}
    verdict = SchemaSoundDetector().certify(toolset, calls, skill.phases[0], inputs)
    windows = Windows(
        SchemaSoundDetector(max_window=max(len(calls), 1)).tracker(toolset, skill, inputs)
    )
    admissions = [windows.admit(c).admission for c in calls]
    one_window = (
        all(a.action == "join" for a in admissions)
        and all(a.closes is None for a in admissions)
        and all(a.completes is None for a in admissions[:-1])
    )
    assert isinstance(verdict, Certificate) == one_window
    online_codes = {f.code for a in admissions for f in a.failures}
    if isinstance(verdict, Rejection):
        assert online_codes <= set(verdict.codes)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    arguments=st.lists(
        st.one_of(
            st.just("{"),
            st.just("[]"),
            st.just(""),
            st.dictionaries(
                st.sampled_from(["n", "key", "value", "extra"]),
                st.one_of(
                    st.integers(-2, 2),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=3),
                    st.none(),
                    st.lists(st.integers(0, 3), max_size=2),
                ),
                max_size=3,
            ).map(json.dumps),
        ),
        min_size=1,
        max_size=4,
    ),
    names=st.lists(st.sampled_from(["probe", "put_slot", "nope"]), min_size=4, max_size=4),
)
def test_item6_random_valid_and_invalid_arguments_never_raise_out_of_any_arm(
    arguments: list[str], names: list[str]
) -> None:
    """Total: whatever the model writes, every arm ends with S's results, never a crash."""
    from harness.loop import FlattenSettings, LoopConfig, run_loop
    from harness.testing import ScriptedEngine

    emitted = [ToolCall(f"c{i}", names[i], a) for i, a in enumerate(arguments)]

    def script(messages: Any, tools: Any) -> Any:
        done = sum(m["role"] == "tool" for m in messages)
        return [emitted[done]] if done < len(emitted) else "done"

    def parallel(messages: Any, tools: Any) -> Any:
        return emitted if not any(m["role"] == "tool" for m in messages) else "done"

    task = Task(id="t", prompt="p", skill="s", inputs={"keys": ["a"]})
    outcomes = {}
    for arm, eager in (("S", False), ("F", False), ("F", True), ("P", False)):
        config = LoopConfig(
            arm=arm,  # type: ignore[arg-type]
            flatten=FlattenSettings(eager=eager),
            max_model_errors=99,
            max_identical_calls=99,
        )
        engine = ScriptedEngine(parallel if arm == "P" else script)
        result = anyio.run(
            functools.partial(run_loop, engine, issue15_toolset(), task, config, manifest=ONE_PHASE)
        )
        outcomes[(arm, eager)] = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert all(o == outcomes[("S", False)] for o in outcomes.values())


def test_item4_provenance_holds_under_every_phase_a_call_may_belong_to() -> None:
    """Found by the 10,000-case run: a call that an open-ended phase and a later phase both
    list was checked against the later phase's sources only (``model``: free), so a value the
    agent guessed while the result it needed was withheld ran after the window."""
    skill = Manifest.from_dict(
        {
            "skills": {
                "s": {
                    "phases": [
                        {
                            "name": "p0",
                            "kind": "fan_out",
                            "tools": ["get", "put_slot"],
                            "args": {"put_slot.value": "input:owner"},
                        },
                        {
                            "name": "p1",
                            "kind": "fan_out",
                            "tools": ["put_slot"],
                            "args": {"put_slot.value": "model"},
                        },
                    ]
                }
            }
        }
    ).skill("s")
    from harness.certify.provenance import TurnView

    windows = Windows(SchemaSoundDetector().tracker(issue15_toolset(), skill, {"owner": "ana"}))
    assert windows.admit(call(0, "get", key="a"), TurnView()).admission.action == "join"
    guessed = windows.admit(call(1, "put_slot", n=1, value="unknown"), TurnView()).admission
    assert guessed.action == "discard"
    assert guessed.failures[0].code == "D2_provenance"


def test_the_window_rules_have_one_owner_that_the_loop_and_the_detectors_follow() -> None:
    from harness.certify import DEFAULT_MARKER, DEFAULT_MAX_WINDOW, WindowRules
    from harness.loop import LoopConfig
    from harness.proxy import ProxyConfig

    assert LoopConfig().window_rules == WindowRules(DEFAULT_MARKER, DEFAULT_MAX_WINDOW)
    defaults = (SchemaSoundDetector(), PhaseHeuristicDetector())
    assert [(d.marker, d.max_window) for d in defaults] == [
        (DEFAULT_MARKER, DEFAULT_MAX_WINDOW)
    ] * 2
    assert ProxyConfig().max_window == DEFAULT_MAX_WINDOW
    rules = LoopConfig(max_window=3, marker="[later]").window_rules
    for name in ("schema_sound", "phase_heuristic"):
        detector = make_detector(name, rules)
        assert isinstance(detector, SchemaSoundDetector | PhaseHeuristicDetector)
        assert (detector.marker, detector.max_window) == ("[later]", 3)
    old_keywords = make_detector("schema_sound", max_window=4, marker="[m]")
    assert isinstance(old_keywords, SchemaSoundDetector)
    assert (old_keywords.marker, old_keywords.max_window) == ("[m]", 4)
