"""Claims about the loop runner and its four arms, on the scripted engine."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from harness import Completion, GenerationSettings, Task, Toolset, UsageLimitExceeded, tool
from harness.certify import DEFAULT_MARKER
from harness.loop import FlattenSettings, LoopConfig, ResampleSettings, run_loop
from harness.testing import ScriptedEngine
from tests.doubles import MANIFEST, make_toolset, report_task, seeded_store

pytestmark = pytest.mark.anyio

KEYS = ["a", "b", "c", "d"]


async def gold_run(arm: str, keys: list[str] = KEYS, **config: Any):
    store = seeded_store(keys)
    engine = ScriptedEngine()
    result = await run_loop(
        engine,
        make_toolset(store),
        report_task(keys),
        LoopConfig(arm=arm, policy="gold", **config),  # type: ignore[arg-type]
        manifest=MANIFEST,
    )
    return result, engine, store


async def test_F_makes_exactly_as_many_generation_calls_as_S() -> None:
    s, s_engine, _ = await gold_run("S")
    f, f_engine, _ = await gold_run("F")
    assert len(f_engine.requests) == len(s_engine.requests) == len(KEYS) + 2
    assert f.summary.discards == 0
    assert [w.n for w in f.windows] == [len(KEYS)]
    assert s.windows == []


async def test_absorb_turn_context_is_message_for_message_the_serial_context() -> None:
    _, s_engine, _ = await gold_run("S")
    _, f_engine, _ = await gold_run("F")
    absorb = len(KEYS)  # requests 0..n-1 emit the reads; request n is the absorb turn
    assert f_engine.requests[absorb].messages == s_engine.requests[absorb].messages
    assert f_engine.requests[-1].messages == s_engine.requests[-1].messages


async def test_withheld_results_never_appear_before_the_window_closes() -> None:
    _, f_engine, _ = await gold_run("F")
    for request in f_engine.requests[1 : len(KEYS)]:
        tool_messages = [m for m in request.messages if m["role"] == "tool"]
        assert tool_messages
        assert all(m["content"] == DEFAULT_MARKER for m in tool_messages)
        assert not any("body of" in json.dumps(m) for m in request.messages)


async def test_F_and_S_leave_the_same_final_state_and_transcript() -> None:
    s, _, s_store = await gold_run("S")
    f, _, f_store = await gold_run("F")
    e, _, e_store = await gold_run("F", flatten=FlattenSettings(eager=True))
    assert s_store.fingerprint() == f_store.fingerprint() == e_store.fingerprint()
    assert s.messages == f.messages == e.messages
    assert s.answer == f.answer == "Summary written."


async def test_every_call_id_gets_exactly_one_result() -> None:
    for arm in ("S", "F", "P", "P+V"):
        result, _, _ = await gold_run(arm)
        ids = [c["id"] for m in result.messages for c in m.get("tool_calls", [])]
        answered = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
        assert sorted(ids) == sorted(answered), arm
        assert len(set(ids)) == len(ids)


def _rendezvous_toolset() -> tuple[Toolset, dict[str, anyio.Event]]:
    started = {"x": anyio.Event(), "y": anyio.Event()}

    @tool(read_only=True, timeout_s=None)
    async def wait_for(me: str, other: str) -> str:
        """Signal my start, then wait until the other call has started too."""
        started[me].set()
        await started[other].wait()
        return f"{me} met {other}"

    return Toolset([wait_for]), started


def _rendezvous_task() -> Task:
    from harness.loop.task import GoldCall

    return Task(
        id="rendezvous",
        prompt="meet",
        skill="meet",
        inputs={"pair": ["x", "y"]},
        gold_steps=(
            (
                GoldCall("wait_for", {"me": "x", "other": "y"}),
                GoldCall("wait_for", {"me": "y", "other": "x"}),
            ),
        ),
        gold_answer="met",
    )


_MEET = {
    "skills": {
        "meet": {"phases": [{"name": "meet", "kind": "fan_out", "tools": ["wait_for"], "slots": 2}]}
    }
}


async def test_two_certified_calls_that_wait_for_each_other_complete_under_F() -> None:
    from harness import Manifest

    toolset, _ = _rendezvous_toolset()
    result = await run_loop(
        ScriptedEngine(), toolset, _rendezvous_task(), LoopConfig(arm="F", policy="gold"),
        manifest=Manifest.from_dict(_MEET),
    )  # fmt: skip
    assert [r.content for r in result.results.values()] == ["x met y", "y met x"]


async def test_the_same_two_calls_deadlock_under_S() -> None:
    from harness import Manifest

    toolset, started = _rendezvous_toolset()
    with anyio.move_on_after(1.0) as scope:
        await run_loop(
            ScriptedEngine(), toolset, _rendezvous_task(), LoopConfig(arm="S", policy="gold"),
            manifest=Manifest.from_dict(_MEET),
        )  # fmt: skip
    assert scope.cancelled_caught
    assert started["x"].is_set()
    assert not started["y"].is_set()


async def test_eager_dispatch_starts_a_certified_call_before_the_window_closes() -> None:
    store = seeded_store(KEYS)
    engine = ScriptedEngine(overhead_ms=5)  # each generation yields to the event loop
    result = await run_loop(
        engine, make_toolset(store), report_task(KEYS), LoopConfig(arm="F", policy="gold", flatten=FlattenSettings(eager=True)),
        manifest=MANIFEST,
    )  # fmt: skip
    first = next(r for r in result.call_records if r.call_id == "call_0")
    assert first.mode == "eager"
    assert first.started < engine.requests[len(KEYS) - 1].started  # before the last window turn


async def test_without_eager_dispatch_window_calls_start_at_close() -> None:
    store = seeded_store(KEYS)
    engine = ScriptedEngine(overhead_ms=5)
    result = await run_loop(
        engine, make_toolset(store), report_task(KEYS), LoopConfig(arm="F", policy="gold"),
        manifest=MANIFEST,
    )  # fmt: skip
    first = next(r for r in result.call_records if r.call_id == "call_0")
    assert first.mode == "window"
    assert first.started >= engine.requests[len(KEYS) - 1].finished


def _script(replies: list[Any]):
    """A script that replays ``replies`` in order, one per generation."""
    it = iter(replies)

    def script(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Any:
        return next(it)

    return script


async def test_a_call_that_needs_a_withheld_result_is_discarded_regenerated_and_counted() -> None:
    store = seeded_store(["a", "b"])
    replies = [
        {"name": "read_doc", "arguments": {"key": "a"}},
        {"name": "read_doc", "arguments": {"key": "b"}},
        {"name": "write_doc", "arguments": {"key": "s", "body": "guess"}},  # generated blind
        {"name": "write_doc", "arguments": {"key": "s", "body": "body of a + body of b"}},
        "done",
    ]
    engine = ScriptedEngine(_script(replies))
    task = report_task(["a", "b"], skill="report_unslotted")
    result = await run_loop(
        engine, make_toolset(store), task, LoopConfig(arm="F"), manifest=MANIFEST
    )
    assert result.summary.discards == 1
    assert store.docs["s"] == "body of a + body of b"
    assert [w.closed_by for w in result.windows] == ["D2_dependent_call"]
    assert all("guess" not in json.dumps(m) for m in result.messages)
    # The regenerated call saw both results: its request is the absorb turn.
    assert "body of b" in json.dumps(engine.requests[3].messages)


async def test_a_write_conflict_runs_after_the_window_in_emitted_order() -> None:
    store = seeded_store([])
    replies = [
        {"name": "write_doc", "arguments": {"key": "a", "body": "1"}},
        {"name": "write_doc", "arguments": {"key": "b", "body": "2"}},
        {"name": "write_doc", "arguments": {"key": "a", "body": "3"}},  # conflicts with the first
        "done",
    ]
    task = Task(id="w", prompt="write", skill="fanwrite")
    result = await run_loop(
        ScriptedEngine(_script(replies)),
        make_toolset(store),
        task,
        LoopConfig(arm="F"),
        manifest=MANIFEST,
    )
    assert store.docs == {"a": "3", "b": "2"}
    assert [(w.n, w.closed_by) for w in result.windows] == [(2, "D1_conflict")]
    modes = {r.call_id: r.mode for r in result.call_records}
    assert modes == {"call_0": "window", "call_1": "window", "call_2": "serial"}


async def test_non_idempotent_appends_never_share_a_window() -> None:
    store = seeded_store([])
    # The trailing one-call window is still open at the answer: that answer is regenerated.
    replies = [{"name": "append_log", "arguments": {"line": str(i)}} for i in range(3)] + [
        "done"
    ] * 2
    task = Task(id="log", prompt="log", skill="fanwrite")
    result = await run_loop(
        ScriptedEngine(_script(replies)),
        make_toolset(store),
        task,
        LoopConfig(arm="F"),
        manifest=MANIFEST,
    )
    assert store.log == ["0", "1", "2"]
    assert all(w.n == 1 for w in result.windows)
    assert result.summary.discards == 1


async def test_a_final_answer_generated_with_results_withheld_is_regenerated() -> None:
    store = seeded_store(["a"])
    replies = [{"name": "read_doc", "arguments": {"key": "a"}}, "blind answer", "informed answer"]
    task = report_task(["a", "b"], skill="report_unslotted")
    result = await run_loop(
        ScriptedEngine(_script(replies)),
        make_toolset(store),
        task,
        LoopConfig(arm="F"),
        manifest=MANIFEST,
    )
    assert result.answer == "informed answer"
    assert result.summary.discards == 1


async def test_no_window_certifies_on_a_chain() -> None:
    store = seeded_store(["a", "b", "c"])
    replies = [{"name": "read_doc", "arguments": {"key": k}} for k in "abc"] + ["done"]
    task = Task(id="chain", prompt="follow", skill="chain")
    result = await run_loop(
        ScriptedEngine(_script(replies)),
        make_toolset(store),
        task,
        LoopConfig(arm="F"),
        manifest=MANIFEST,
    )
    assert result.windows == []
    assert {r.mode for r in result.call_records} == {"serial"}


async def test_P_runs_a_certified_message_concurrently_as_one_window() -> None:
    result, engine, _ = await gold_run("P")
    assert len(engine.requests) == 3  # reads in one message, the write, the answer
    assert [w.n for w in result.windows] == [len(KEYS)]
    assert all(r.settings.parallel_tool_calls for r in engine.requests)


async def test_P_plus_V_rejects_a_duplicate_window_and_resamples_as_one_batch() -> None:
    store = seeded_store(["a", "b"])
    good = [
        {"name": "read_doc", "arguments": {"key": "a"}},
        {"name": "read_doc", "arguments": {"key": "b"}},
    ]
    bad = [{"name": "read_doc", "arguments": {"key": "a"}}] * 2

    def script(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Any:
        if any(m["role"] == "tool" for m in messages):
            return "done"
        return bad if len(script.calls) == 0 else good  # type: ignore[attr-defined]

    script.calls = []  # type: ignore[attr-defined]

    def counted(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Any:
        reply = script(messages, tools)
        script.calls.append(reply)  # type: ignore[attr-defined]
        return reply

    engine = ScriptedEngine(counted, overhead_ms=5)
    task = report_task(["a", "b"])
    result = await run_loop(
        engine,
        make_toolset(store),
        task,
        LoopConfig(arm="P+V", resample=ResampleSettings(max_resamples=3)),
        manifest=MANIFEST,
    )
    assert result.summary.resamples == 3
    assert engine.max_in_flight == 3  # the three candidates went to the engine together
    assert [len(b) for b in engine.batches if len(b) > 1] == [3]
    assert sorted(json.loads(c.arguments)["key"] for c in result.calls) == ["a", "b"]


async def test_an_unknown_tool_becomes_an_error_result_the_model_sees() -> None:
    replies = [
        {"name": "read_dok", "arguments": {"key": "a"}},
        {"name": "read_doc", "arguments": {"key": "a"}},
        "ok",
    ]
    engine = ScriptedEngine(_script(replies))
    result = await run_loop(engine, make_toolset(seeded_store(["a"])), Task(id="t", prompt="p"))
    first = result.results["call_0"]
    assert first.is_error
    assert "Did you mean 'read_doc'" in first.content
    assert "Unknown tool 'read_dok'" in json.dumps(engine.requests[1].messages)
    assert result.answer == "ok"


async def test_too_many_consecutive_mistakes_end_in_a_typed_error() -> None:
    replies = [{"name": "nope", "arguments": {"attempt": i}} for i in range(10)]
    with pytest.raises(UsageLimitExceeded, match="mistakes in a row"):
        await run_loop(
            ScriptedEngine(_script(replies)), make_toolset(seeded_store([])), Task(id="t", prompt="p"),
            LoopConfig(max_model_errors=2),
        )  # fmt: skip


async def test_a_model_that_never_stops_hits_the_turn_limit() -> None:
    def forever(messages: Any, tools: Any) -> Any:
        turn = sum(m["role"] == "assistant" for m in messages)
        return {"name": "read_doc", "arguments": {"key": "ab"[turn % 2]}}

    with pytest.raises(UsageLimitExceeded, match="limit of 5 turns"):
        await run_loop(
            ScriptedEngine(forever), make_toolset(seeded_store(["a", "b"])), Task(id="t", prompt="p"),
            LoopConfig(max_turns=5),
        )  # fmt: skip


async def test_a_reply_cut_at_max_tokens_is_reported_to_the_model() -> None:
    replies = [Completion(content='{"tool_calls": [{"na', finish_reason="length"), "fine"]
    engine = ScriptedEngine(_script(replies))
    result = await run_loop(
        engine, make_toolset(seeded_store([])), Task(id="t", prompt="p"),
        LoopConfig(generation=GenerationSettings(max_tokens=7)),
    )  # fmt: skip
    assert result.answer == "fine"
    assert result.summary.model_errors == 1
    assert "cut off at 7 tokens" in engine.requests[1].messages[-1]["content"]


async def test_cancelling_a_run_leaves_no_tool_running() -> None:
    started, running, finished = anyio.Event(), [], []

    @tool(read_only=True, timeout_s=None)
    async def hang(key: str) -> str:
        """Never returns."""
        running.append(key)
        if len(running) == 2:
            started.set()
        try:
            await anyio.sleep_forever()
        finally:
            finished.append(key)
        return "unreachable"

    replies = [
        {"name": "hang", "arguments": {"key": "a"}},
        {"name": "hang", "arguments": {"key": "b"}},
    ] + [{"name": "hang", "arguments": {"key": "c"}}] * 5
    skill = {"skills": {"h": {"phases": [{"name": "h", "kind": "fan_out", "tools": ["hang"]}]}}}
    from harness import Manifest

    async with anyio.create_task_group() as tg:

        async def go() -> None:
            await run_loop(
                ScriptedEngine(_script(replies), overhead_ms=1), Toolset([hang]),
                Task(id="h", prompt="p", skill="h"), LoopConfig(arm="F", flatten=FlattenSettings(eager=True), max_window=2),
                manifest=Manifest.from_dict(skill),
            )  # fmt: skip

        tg.start_soon(go)
        await started.wait()
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert sorted(finished) == ["a", "b"]


async def test_a_tool_that_raises_does_not_cancel_its_siblings_in_a_window() -> None:
    calls: list[str] = []

    @tool(read_only=True)
    async def flaky(key: str) -> str:
        """Raises for key 'bad'."""
        await anyio.lowlevel.checkpoint()
        calls.append(key)
        if key == "bad":
            raise RuntimeError("disk on fire")
        return key

    from harness import Manifest

    skill = {
        "skills": {
            "f": {"phases": [{"name": "f", "kind": "fan_out", "tools": ["flaky"], "slots": 3}]}
        }
    }
    replies = [{"name": "flaky", "arguments": {"key": k}} for k in ("x", "bad", "y")] + ["done"]
    result = await run_loop(
        ScriptedEngine(_script(replies)), Toolset([flaky]), Task(id="f", prompt="p", skill="f"),
        LoopConfig(arm="F"), manifest=Manifest.from_dict(skill),
    )  # fmt: skip
    assert sorted(calls) == ["bad", "x", "y"]
    assert result.results["call_1"].is_error
    assert "disk on fire" in result.results["call_1"].content
    assert [result.results[c].content for c in ("call_0", "call_2")] == ["x", "y"]


async def test_ledger_counts_billed_tokens_as_input_plus_output() -> None:
    result, _, _ = await gold_run("S")
    turns = result.turns
    assert result.summary.billed_tokens == sum(t.prompt_tokens + t.completion_tokens for t in turns)
    assert result.summary.turns == len(turns)


async def test_F_bills_fewer_tokens_than_S_on_a_fan_out_window() -> None:
    s, _, _ = await gold_run("S", keys=["a", "b", "c", "d", "e", "f"])
    f, _, _ = await gold_run("F", keys=["a", "b", "c", "d", "e", "f"])
    assert f.summary.billed_tokens < s.summary.billed_tokens


async def test_the_ledger_writes_a_jsonl_trace(tmp_path: Any) -> None:
    from harness.loop.ledger import Ledger

    path = tmp_path / "trace.jsonl"
    ledger = Ledger(path)
    await run_loop(
        ScriptedEngine(), make_toolset(seeded_store(KEYS)), report_task(KEYS),
        LoopConfig(arm="F", policy="gold"), manifest=MANIFEST, ledger=ledger,
    )  # fmt: skip
    ledger.close()
    kinds = [r["kind"] for r in Ledger.read_jsonl(path)]
    assert kinds.count("window") == 1
    assert kinds[-1] == "run"
    assert kinds.count("call") == len(KEYS) + 1


async def test_a_withheld_call_is_recorded_at_the_turn_that_emitted_it() -> None:
    result, _, _ = await gold_run("F")
    turns = {r.call_id: r.turn for r in result.call_records}
    assert [turns[f"call_{k}"] for k in range(len(KEYS) + 1)] == list(range(len(KEYS) + 1))


async def test_a_model_stuck_repeating_one_call_ends_in_a_typed_error() -> None:
    def stuck(messages: Any, tools: Any) -> Any:
        return {"name": "read_doc", "arguments": {"key": "a"}}

    engine = ScriptedEngine(stuck)
    with pytest.raises(UsageLimitExceeded, match="3 turns in a row: it is stuck"):
        await run_loop(engine, make_toolset(seeded_store(["a"])), Task(id="t", prompt="p"))
    assert len(engine.requests) == 3


async def test_a_parallel_arm_gets_a_token_budget_for_a_whole_window() -> None:
    result, engine, _ = await gold_run("P", generation=GenerationSettings(max_tokens=50))
    assert {r.settings.max_tokens for r in engine.requests} == {200}
    assert result.summary.finished


class RecordingExecutor:
    """An executor that runs calls in process and records each call's start and end (what a
    journal does at the execution seam)."""

    def __init__(self, toolset: Toolset) -> None:
        self.toolset = toolset
        self.events: list[tuple[str, str]] = []

    async def execute(self, call: Any) -> Any:
        from harness.tools.execute import execute_call

        self.events.append(("intent", call.id))
        result = await execute_call(self.toolset, call)
        self.events.append(("outcome", call.id))
        return result


@pytest.mark.parametrize("arm", ["S", "F", "P", "P+V"])
async def test_every_call_of_every_arm_goes_through_the_executor_once(arm: str) -> None:
    store = seeded_store(KEYS)
    executor = RecordingExecutor(make_toolset(store))
    result = await run_loop(
        ScriptedEngine(),
        executor.toolset,
        report_task(KEYS),
        LoopConfig(arm=arm, policy="gold"),  # type: ignore[arg-type]
        manifest=MANIFEST,
        executor=executor,
    )
    ids = [c.id for c in result.calls]
    assert sorted(i for kind, i in executor.events if kind == "intent") == sorted(ids)
    assert sorted(i for kind, i in executor.events if kind == "outcome") == sorted(ids)
    for call_id in ids:
        assert executor.events.index(("intent", call_id)) < executor.events.index(
            ("outcome", call_id)
        )


def test_arm_f_without_a_manifest_says_that_no_window_can_certify() -> None:
    from structlog.testing import capture_logs

    store = seeded_store(["a", "b"])

    def model(messages: Any, tools: Any) -> Any:
        return "done"

    async def main() -> None:
        task = report_task(["a", "b"])
        await run_loop(ScriptedEngine(model), make_toolset(store), task, LoopConfig(arm="F"))

    with capture_logs() as logs:
        anyio.run(main)
    (event,) = [e for e in logs if e["event"] == "no_manifest"]
    assert event["log_level"] == "warning"
    assert "manifest=" in event["detail"]
