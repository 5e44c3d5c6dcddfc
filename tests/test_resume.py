"""A journaled run that is stopped resumes without repeating a write; budgets end runs typed."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness import Task, Toolset, tool
from harness.errors import ReplayDivergence, UsageLimitExceeded
from harness.journal import Journal
from harness.loop import LoopConfig, run_loop
from harness.loop.ledger import CallRecord, Ledger, RunRecord, SettledRecord
from harness.loop.task import GoldCall
from harness.testing import ScriptedEngine

pytestmark = pytest.mark.anyio


class World:
    """Notes that outlive a run (as a database would), and a gate that can hold one note."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.runs: list[str] = []
        self.keys: dict[str, str] = {}
        self.hold: str | None = None
        self.gate = anyio.Event()

    def toolset(self, *, keyed: bool) -> Toolset:
        async def wait_if_held(text: str) -> None:
            if text == self.hold:
                await self.gate.wait()

        @tool(write_targets="notes")
        async def note(text: str) -> int:
            """Append a note (not idempotent, takes no key)."""
            self.runs.append(text)
            await wait_if_held(text)
            self.notes.append(text)
            return len(self.notes)

        @tool(write_targets="notes")
        async def keyed_note(text: str, idempotency_key: str | None = None) -> int:
            """Append a note once per idempotency key."""
            self.runs.append(text)
            await wait_if_held(text)
            if idempotency_key not in self.keys:
                self.keys[idempotency_key or ""] = text
                self.notes.append(text)
            return len(self.notes)

        return Toolset([keyed_note if keyed else note])


def _task(name: str, texts: list[str]) -> Task:
    return Task(
        id="notes",
        prompt="Write the notes " + ", ".join(texts) + ".",
        gold_steps=tuple((GoldCall(name, {"text": t}),) for t in texts),
        gold_answer="Done.",
    )


async def _stopped_run(journal_dir: Path, world: World, *, keyed: bool, at: str) -> Ledger:
    """Run the task with a journal and stop it (cancel) while the note ``at`` is running."""
    name = "keyed_note" if keyed else "note"
    world.hold = at
    ledger = Ledger(log=False)
    journal = Journal.create(journal_dir, "run-1")
    try:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await run_loop(
                    ScriptedEngine(), world.toolset(keyed=keyed),
                    _task(name, ["a", "b", "c"]), LoopConfig(arm="S", policy="gold"),
                    ledger=ledger, journal=journal,
                )  # fmt: skip

            tg.start_soon(run)
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    finally:
        journal.close()
    world.hold = None
    return ledger


async def _resume(journal_dir: Path, world: World, *, keyed: bool) -> tuple[Any, ScriptedEngine]:
    name = "keyed_note" if keyed else "note"
    engine = ScriptedEngine()
    with Journal.resume(journal_dir) as journal:
        result = await run_loop(
            engine, world.toolset(keyed=keyed), _task(name, ["a", "b", "c"]),
            LoopConfig(arm="S", policy="gold"), journal=journal,
        )  # fmt: skip
    return result, engine


async def test_a_stopped_run_is_recorded_as_not_finished(tmp_path: Path):
    ledger = await _stopped_run(tmp_path / "run", World(), keyed=False, at="b")
    summary = next(r for r in ledger.records if isinstance(r, RunRecord))
    assert summary.finished is False
    assert summary.error is not None
    assert summary.error.startswith("Cancelled")
    with Journal.resume(tmp_path / "run") as journal:
        assert journal.replay.end is not None
        assert journal.replay.end["finished"] is False


async def test_a_resumed_run_replays_what_is_journaled_and_never_runs_it_again(tmp_path: Path):
    world = World()
    await _stopped_run(tmp_path / "run", world, keyed=True, at="b")
    assert world.notes == ["a"]
    result, engine = await _resume(tmp_path / "run", world, keyed=True)
    assert result.summary.finished
    assert world.runs == ["a", "b", "b", "c"]  # a never again; b (in doubt) once more
    assert world.notes == ["a", "b", "c"]
    journal = result.summary.extra["journal"]
    assert journal["replayed"] == ["call_0"]
    assert journal["retried"] == ["call_1"]
    assert journal["turns_replayed"] == 2  # the turns that emitted a and b
    assert len(engine.requests) == 2  # only the turns after them: c, then the answer


async def test_an_in_doubt_write_that_is_not_safe_to_repeat_reaches_the_model_and_the_ledger(
    tmp_path: Path,
):
    world = World()
    await _stopped_run(tmp_path / "run", world, keyed=False, at="b")
    result, engine = await _resume(tmp_path / "run", world, keyed=False)
    assert world.runs == ["a", "b", "c"]  # b was not run again
    assert world.notes == ["a", "c"]  # (its write never landed: the model is told so)
    unknown = [r for r in result.call_records if r.error_kind == "outcome_unknown"]
    assert [r.call_id for r in unknown] == ["call_1"]
    seen = engine.requests[0].messages
    assert any("outcome of this 'note' call is unknown" in str(m["content"]) for m in seen)


async def test_resuming_a_finished_run_executes_and_generates_nothing(tmp_path: Path):
    world = World()
    with Journal.create(tmp_path / "run", "run-1") as journal:
        first = await run_loop(
            ScriptedEngine(), world.toolset(keyed=False), _task("note", ["a", "b"]),
            LoopConfig(arm="S", policy="gold"), journal=journal,
        )  # fmt: skip
    engine = ScriptedEngine()
    with Journal.resume(tmp_path / "run") as journal:
        again = await run_loop(
            engine, world.toolset(keyed=False), _task("note", ["a", "b"]),
            LoopConfig(arm="S", policy="gold"), journal=journal,
        )  # fmt: skip
    assert engine.requests == []
    assert world.notes == ["a", "b"]
    assert again.answer == first.answer
    assert again.messages == first.messages


async def test_a_resumed_run_whose_task_changed_is_a_replay_divergence(tmp_path: Path):
    world = World()
    with Journal.create(tmp_path / "run", "run-1") as journal:
        await run_loop(
            ScriptedEngine(), world.toolset(keyed=False), _task("note", ["a"]),
            LoopConfig(arm="S", policy="gold"), journal=journal,
        )  # fmt: skip
    with Journal.resume(tmp_path / "run") as journal, pytest.raises(ReplayDivergence):
        await run_loop(
            ScriptedEngine(), world.toolset(keyed=False), _task("note", ["z"]),
            LoopConfig(arm="S", policy="gold"), journal=journal,
        )  # fmt: skip


async def test_the_wall_clock_deadline_ends_a_run_with_what_to_change():
    world = World()
    world.hold = "b"  # never released: the run would hang
    with pytest.raises(UsageLimitExceeded, match=r"deadline of 0\.2 s.*max_wall_s"):
        await run_loop(
            ScriptedEngine(), world.toolset(keyed=False), _task("note", ["a", "b"]),
            LoopConfig(arm="S", policy="gold", max_wall_s=0.2),
        )  # fmt: skip


async def test_the_token_budget_ends_a_run_with_what_to_change():
    world = World()
    ledger = Ledger(log=False)
    with pytest.raises(UsageLimitExceeded, match=r"over its budget of 50.*max_billed_tokens"):
        await run_loop(
            ScriptedEngine(), world.toolset(keyed=False), _task("note", ["a", "b", "c"]),
            LoopConfig(arm="S", policy="gold", max_billed_tokens=50), ledger=ledger,
        )  # fmt: skip
    summary = next(r for r in ledger.records if isinstance(r, RunRecord))
    assert summary.billed_tokens > 50
    assert not summary.finished


async def test_a_sync_write_that_outlives_its_timeout_is_settled_in_the_ledger():
    release = threading.Event()
    landed: list[str] = []

    @tool(write_targets="x", timeout_s=0.5)  # the deadline fires after a worker picked it up
    def slow(text: str) -> str:
        release.wait(timeout=60)
        landed.append(text)
        return text

    ledger = Ledger(log=False)
    task = Task(
        id="slow", prompt="p", gold_steps=((GoldCall("slow", {"text": "a"}),),), gold_answer="ok"
    )
    result = await run_loop(
        ScriptedEngine(), Toolset([slow]), task, LoopConfig(arm="S", policy="gold"), ledger=ledger
    )
    call = next(r for r in ledger.records if isinstance(r, CallRecord))
    assert call.error_kind == "timeout"
    assert call.outcome_known is False
    assert result.summary.extra["unsettled_calls"] == ["call_0"]
    assert landed == []
    release.set()
    thread = result.results["call_0"].thread
    assert thread is not None
    assert await anyio.to_thread.run_sync(thread.wait, 10)
    settled = [r for r in ledger.records if isinstance(r, SettledRecord)]
    assert [(r.call_id, r.outcome) for r in settled] == [("call_0", "returned")]
    assert landed == ["a"]


async def test_in_doubt_calls_do_not_spend_the_model_mistake_budget(tmp_path: Path):
    world = World()
    texts = ["a", "b", "c", "d", "e"]
    with Journal.create(tmp_path / "run", "run-1") as journal:
        await run_loop(
            ScriptedEngine(), world.toolset(keyed=False), _task("note", texts),
            LoopConfig(arm="S", policy="gold"), journal=journal,
        )  # fmt: skip
    path = tmp_path / "run" / "journal.jsonl"
    # As if killed after every call started and before any outcome was journaled (the turns
    # after the first would have seen outcomes, so they were never journaled either).
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    kept = [
        e for e in entries
        if e["kind"] != "outcome" and not (e["kind"] == "turn" and e["turn"] > 0)
    ]  # fmt: skip
    for seq, entry in enumerate(kept):  # numbered as a writer that never wrote them would
        entry["seq"] = seq
    path.write_text("".join(json.dumps(e) + "\n" for e in kept))
    with Journal.resume(tmp_path / "run") as journal:
        result = await run_loop(
            ScriptedEngine(), world.toolset(keyed=False), _task("note", texts),
            LoopConfig(arm="S", policy="gold", max_model_errors=1), journal=journal,
        )  # fmt: skip
    assert result.summary.finished
    assert [r.error_kind for r in result.call_records] == ["outcome_unknown"] * 5
    assert result.summary.model_errors == 0


async def test_a_call_in_doubt_stays_on_the_record_when_a_later_attempt_replays_it(
    tmp_path: Path,
):
    world = World()
    await _stopped_run(tmp_path / "run", world, keyed=False, at="b")
    await _resume(tmp_path / "run", world, keyed=False)
    third, engine = await _resume(tmp_path / "run", world, keyed=False)
    journal = third.summary.extra["journal"]
    assert journal["attempt"] == 3
    assert journal["unknown"] == []  # nothing was in doubt in this attempt...
    assert journal["history"] == {  # ...but the record still says what happened before
        "call_1": [
            {"attempt": 1, "event": "started"},
            {"attempt": 1, "event": "in_doubt"},
            {"attempt": 2, "event": "outcome_unknown"},
            {"attempt": 3, "event": "replayed"},
        ]
    }
    assert world.runs == ["a", "b", "c"]
    assert engine.requests == []
