"""The write-ahead journal: one conformance suite for every backend, then the executor that
replays, retries in-doubt calls with their key, or surfaces them as outcome_unknown."""

from __future__ import annotations

import functools
import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness.engines.base import GenerationSettings
from harness.errors import JournalError, ReplayDivergence
from harness.journal import Journal, completion_from_entry, idempotency_key, prompt_hash
from harness.journal.backends import BACKENDS
from harness.journal.execution import JournaledCalls, retry_is_safe
from harness.messages import Completion, ToolCall, Usage
from harness.tools import Toolset, tool
from harness.tools.execute import ToolResult

pytestmark = pytest.mark.anyio


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Any:
    return request.param


def _call(call_id: str, name: str = "write", **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments or {"key": "a"}, sort_keys=True))


def _result(call: ToolCall, content: str = "ok") -> ToolResult:
    return ToolResult(call.id, call.name, content, value={"echo": content})


# -- conformance: every backend ----------------------------------------------------------------


async def test_entries_come_back_in_the_order_they_were_written(tmp_path: Path, backend: Any):
    run = tmp_path / "run"
    with Journal.create(run, "run-1", meta={"task": "t"}, backend=backend) as journal:
        completion = Completion(
            None, (_call("call_0"),), Usage(10, 2, 3), finish_reason="tool_calls"
        )
        journal.record_turn(0, "call", "hash0", completion)
        journal.record_intent(_call("call_0"), key="k0", turn=0, mode="serial", window=None)
        journal.record_outcome(_result(_call("call_0")))
        journal.record_intent(_call("call_1"), key="k1", turn=1, mode="window", window=0)
        journal.record_window(0, ["call_1"], "slots")
    with Journal.resume(run) as again:
        state = again.replay
        assert state.run_id == "run-1"
        assert again.meta == {"task": "t"}
        assert completion_from_entry(state.turns[0]["completion"]) == completion
        assert list(state.intents) == ["call_0", "call_1"]
        assert list(state.outcomes) == ["call_0"]
        assert state.in_doubt == ["call_1"]
        assert state.windows[0]["call_ids"] == ["call_1"]
        assert state.attempts == 1
        assert again.state.attempts == 2  # the resume itself is journaled


async def test_a_killed_writer_loses_nothing_it_made_durable(tmp_path: Path, backend: Any):
    run = tmp_path / "run"
    Journal.create(run, "run-1", backend=backend).close()
    durable = 40
    pid = os.fork()
    if pid == 0:  # the child: write, then die mid-burst without any cleanup
        try:
            journal = Journal.resume(run)
            for i in range(durable):
                journal.record_intent(
                    _call(f"call_{i}"), key=f"k{i}", turn=i, mode="serial", window=None
                )
            for i in range(10_000):  # killed somewhere in here, or after
                journal.record_window(i, [f"call_{i}"], "x")
                if i == 50:
                    os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(3)
    _, status = await anyio.to_thread.run_sync(os.waitpid, pid, 0)
    assert os.WIFSIGNALED(status)
    assert os.WTERMSIG(status) == signal.SIGKILL
    with Journal.resume(run) as journal:
        state = journal.replay
        assert list(state.intents) == [f"call_{i}" for i in range(durable)]
        assert sorted(state.windows) == list(range(len(state.windows)))  # a prefix, no holes
        journal.record_end(finished=True, error=None, answer="done")
    with Journal.resume(run) as journal:
        assert journal.replay.finished  # appending after the kill left a readable journal


async def test_a_torn_last_entry_is_skipped_and_the_next_one_is_kept(tmp_path: Path):
    run = tmp_path / "run"
    with Journal.create(run, "run-1") as journal:
        journal.record_intent(_call("call_0"), key="k", turn=0, mode="serial", window=None)
    with (run / "journal.jsonl").open("a") as f:
        f.write('{"kind": "outcome", "call_id": "call_0", "con')  # killed mid-write
    with Journal.resume(run) as journal:
        assert journal.replay.skipped == 1
        assert journal.replay.in_doubt == ["call_0"]
        journal.record_outcome(_result(_call("call_0")))
    with Journal.resume(run) as journal:
        assert journal.replay.in_doubt == []


async def test_a_second_writer_is_refused(tmp_path: Path, backend: Any):
    run = tmp_path / "run"
    with (
        Journal.create(run, "run-1", backend=backend),
        pytest.raises(JournalError, match=r"being written by pid \d+"),
    ):
        Journal.resume(run)
    Journal.resume(run).close()  # released on close


async def test_opening_the_wrong_directory_says_what_to_do(tmp_path: Path, backend: Any):
    with pytest.raises(JournalError, match="holds no run journal"):
        Journal.resume(tmp_path / "nothing")
    Journal.create(tmp_path / "run", "run-1", backend=backend).close()
    with pytest.raises(JournalError, match="already holds a run's journal; resume it"):
        Journal.create(tmp_path / "run", "run-2", backend=backend)
    with Journal.open(tmp_path / "run", "ignored") as journal:
        assert journal.resumed
        assert journal.run_id == "run-1"


async def test_a_journal_of_another_format_is_refused(tmp_path: Path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "journal.jsonl").write_text('{"kind": "run", "format": 99, "run_id": "r"}\n')
    with pytest.raises(JournalError, match="format 99"):
        Journal.resume(run)


async def test_a_late_outcome_is_recorded_even_after_the_journal_closed(
    tmp_path: Path, backend: Any
):
    from harness.tools import ToolThread

    run = tmp_path / "run"
    thread = ToolThread()
    call = _call("call_0")
    journal = Journal.create(run, "run-1", backend=backend)
    journal.record_intent(call, key="k", turn=0, mode="serial", window=None)
    thread.on_end(lambda t: journal.record_settled(call, t))
    journal.close()
    threading.Thread(target=thread.end, args=({"wrote": "a"}, None)).start()
    assert thread.wait(10)
    with Journal.resume(run) as again:
        assert again.replay.settled["call_0"]["status"] == "returned"
        assert again.replay.settled["call_0"]["value"] == {"wrote": "a"}


def test_idempotency_keys_are_deterministic_and_unique_per_call():
    assert idempotency_key("run-1", "call_3") == idempotency_key("run-1", "call_3")
    assert idempotency_key("run-1", "call_3") != idempotency_key("run-1", "call_4")
    assert idempotency_key("run-1", "call_3") != idempotency_key("run-2", "call_3")


def test_the_prompt_hash_changes_with_the_chat_or_the_settings():
    chat = [{"role": "user", "content": "hi"}]
    base = prompt_hash(chat, [], GenerationSettings())
    assert base == prompt_hash([dict(chat[0])], [], GenerationSettings())
    assert base != prompt_hash([{"role": "user", "content": "hi!"}], [], GenerationSettings())
    assert base != prompt_hash(chat, [], GenerationSettings(max_tokens=8))


# -- the executor ------------------------------------------------------------------------------


class World:
    """A store with three write tools: not idempotent (``note``), idempotent (``put``), and
    not idempotent but keyed (``keyed_note``, which drops a second write with the same key)."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.values: dict[str, str] = {}
        self.keys: set[str] = set()
        self.seen_keys: list[str | None] = []
        self.journal_at_start: list[list[str]] = []
        self.gate: anyio.Event | None = None

        @tool(write_targets="notes")
        async def note(text: str) -> str:
            await self._pause()
            self.notes.append(text)
            return text

        @tool(idempotent=True, write_targets="value:{key}")
        async def put(key: str, value: str) -> str:
            await self._pause()
            self.values[key] = value
            return value

        @tool(write_targets="notes")
        async def keyed_note(text: str, idempotency_key: str | None = None) -> str:
            self.seen_keys.append(idempotency_key)
            await self._pause()
            if idempotency_key not in self.keys:
                self.keys.add(idempotency_key or "")
                self.notes.append(text)
            return text

        self.toolset = Toolset([note, put, keyed_note])

    async def _pause(self) -> None:
        if self.gate is not None:
            await self.gate.wait()


def _journal_kinds(run: Path) -> list[str]:
    return [json.loads(line)["kind"] for line in (run / "journal.jsonl").read_text().splitlines()]


async def test_a_call_is_journaled_before_it_starts_and_after_it_ends(tmp_path: Path):
    world = World()
    run = tmp_path / "run"
    seen: list[list[str]] = []

    @tool(write_targets="notes")
    async def spy(text: str) -> str:
        seen.append(_journal_kinds(run))
        return text

    with Journal.create(run, "run-1") as journal:
        calls = JournaledCalls(journal, Toolset([*world.toolset.values(), spy]))
        result = await calls.execute(_call("call_0", "spy", text="x"), turn=0, mode="serial")
    assert not result.is_error
    assert seen == [["run", "intent"]]  # the intent was on disk when the tool ran
    assert _journal_kinds(run) == ["run", "intent", "outcome"]


async def test_a_journaled_outcome_is_replayed_and_never_executed_again(tmp_path: Path):
    world = World()
    run = tmp_path / "run"
    call = _call("call_0", "note", text="hello")
    with Journal.create(run, "run-1") as journal:
        first = await JournaledCalls(journal, world.toolset).execute(call, turn=0, mode="serial")
    with Journal.resume(run) as journal:
        calls = JournaledCalls(journal, world.toolset)
        again = await calls.execute(call, turn=0, mode="serial")
    assert world.notes == ["hello"]
    assert again.content == first.content
    assert again.value == first.value
    assert calls.replayed == ["call_0"]


async def _kill_mid_call(run: Path, world: World, call: ToolCall) -> None:
    """Start ``call`` through a journal and cancel the run while the tool is running (the
    journal then holds its intent and no outcome, as after a SIGKILL)."""
    world.gate = anyio.Event()
    with Journal.create(run, "run-1") as journal:
        calls = JournaledCalls(journal, world.toolset)
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(calls.execute, call, turn=0, mode="serial"))
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    world.gate = None


async def test_an_in_doubt_call_of_a_keyed_tool_is_retried_with_the_same_key(tmp_path: Path):
    world = World()
    run = tmp_path / "run"
    call = _call("call_0", "keyed_note", text="pay")
    await _kill_mid_call(run, world, call)
    with Journal.resume(run) as journal:
        assert journal.replay.in_doubt == ["call_0"]
        calls = JournaledCalls(journal, world.toolset)
        assert calls.decide(call) == "retry"
        result = await calls.execute(call, turn=0, mode="serial")
    assert not result.is_error
    assert calls.retried == ["call_0"]
    key = idempotency_key("run-1", "call_0")
    assert world.seen_keys == [key, key]
    assert world.notes == ["pay"]


async def test_an_in_doubt_idempotent_call_is_retried(tmp_path: Path):
    world = World()
    run = tmp_path / "run"
    call = _call("call_0", "put", key="a", value="1")
    await _kill_mid_call(run, world, call)
    with Journal.resume(run) as journal:
        calls = JournaledCalls(journal, world.toolset)
        result = await calls.execute(call, turn=0, mode="serial")
    assert not result.is_error
    assert world.values == {"a": "1"}


async def test_an_in_doubt_call_that_is_not_safe_to_repeat_is_surfaced_not_rerun(tmp_path: Path):
    world = World()
    run = tmp_path / "run"
    call = _call("call_0", "note", text="pay")
    await _kill_mid_call(run, world, call)
    with Journal.resume(run) as journal:
        calls = JournaledCalls(journal, world.toolset)
        assert calls.decide(call) == "unknown"
        result = await calls.execute(call, turn=0, mode="serial")
    assert world.notes == []  # not run again
    assert result.is_error
    assert result.error_kind == "outcome_unknown"
    assert "not run again because it is not idempotent" in result.content
    assert calls.unknown == ["call_0"]
    with Journal.resume(run) as journal:  # a second resume says the same, without deciding again
        calls = JournaledCalls(journal, world.toolset)
        again = await calls.execute(call, turn=0, mode="serial")
    assert again.error_kind == "outcome_unknown"
    assert calls.replayed == ["call_0"]


async def test_a_resumed_call_that_differs_from_its_intent_is_a_replay_divergence(tmp_path: Path):
    world = World()
    run = tmp_path / "run"
    await _kill_mid_call(run, world, _call("call_0", "put", key="a", value="1"))
    with Journal.resume(run) as journal:
        calls = JournaledCalls(journal, world.toolset)
        with pytest.raises(ReplayDivergence, match="diverged from its journal"):
            await calls.execute(_call("call_0", "put", key="a", value="2"), turn=0, mode="serial")


async def test_a_timed_out_sync_write_is_journaled_unknown_then_settled(tmp_path: Path):
    release = threading.Event()
    run = tmp_path / "run"

    @tool(timeout_s=0.5, write_targets="x")  # fires after a worker picked the call up
    def slow_write(key: str) -> str:
        release.wait(timeout=60)
        return f"wrote {key}"

    with Journal.create(run, "run-1") as journal:
        calls = JournaledCalls(journal, Toolset([slow_write]))
        try:
            result = await calls.execute(_call("call_0", "slow_write"), turn=0, mode="serial")
            outcome = journal.state.outcomes["call_0"]
            assert outcome["status"] == "unknown"
            assert outcome["error_kind"] == "timeout"
            assert "call_0" not in journal.state.settled
        finally:
            release.set()
        assert result.thread is not None
        assert result.thread.wait(10)
    with Journal.resume(run) as journal:
        assert journal.replay.settled["call_0"]["value"] == "wrote a"
        assert journal.replay.outcomes["call_0"]["error_kind"] == "timeout"  # what the model saw


async def test_a_cancelled_sync_call_whose_thread_ended_later_is_replayed_from_its_late_outcome(
    tmp_path: Path,
):
    release = threading.Event()
    entered = threading.Event()
    runs: list[str] = []
    run = tmp_path / "run"

    @tool(write_targets="x")
    def write(key: str) -> str:
        entered.set()
        release.wait(timeout=60)
        runs.append(key)
        return f"wrote {key}"

    toolset = Toolset([write])
    call = _call("call_0", "write")
    threads: list[Any] = []
    with Journal.create(run, "run-1") as journal:
        calls = JournaledCalls(journal, toolset, on_abandon=lambda c, t: threads.append(t))
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(calls.execute, call, turn=0, mode="serial"))
            await anyio.to_thread.run_sync(entered.wait, 10)
            tg.cancel_scope.cancel()
    release.set()
    assert threads
    assert threads[0].wait(10)
    with Journal.resume(run) as journal:
        calls = JournaledCalls(journal, toolset)
        assert calls.decide(call) == "late"
        result = await calls.execute(call, turn=0, mode="serial")
    assert runs == ["a"]  # once: the late outcome is used, the write is not repeated
    assert result.content == "wrote a"
    assert not result.is_error


def test_only_reads_idempotent_or_keyed_writes_are_safe_to_retry():
    world = World()
    assert not retry_is_safe(world.toolset["note"])
    assert retry_is_safe(world.toolset["put"])
    assert retry_is_safe(world.toolset["keyed_note"])
