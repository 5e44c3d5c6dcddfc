"""A journal that was damaged, deleted or belongs to another run is refused, never silently
restarted; one that cannot be written stops the run with a one-line JournalError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import JournalError
from harness.journal import Journal
from harness.loop import LoopConfig, run_loop
from harness.testing import ScriptedEngine
from tests.test_resume import World, _task

pytestmark = pytest.mark.anyio


async def _finished_run(run: Path, world: World, texts: list[str]) -> None:
    with Journal.create(run, "run-1") as journal:
        await run_loop(
            ScriptedEngine(), world.toolset(keyed=False), _task("note", texts),
            LoopConfig(arm="S", policy="gold"), journal=journal,
        )  # fmt: skip


def _lines(run: Path) -> list[str]:
    return (run / "journal.jsonl").read_text().splitlines()


def _line_of(run: Path, kind: str, call_id: str) -> int:
    """The 0-based index of the ``kind`` entry of ``call_id``."""
    for i, line in enumerate(_lines(run)):
        entry = json.loads(line)
        if entry["kind"] == kind and entry.get("call_id") == call_id:
            return i
    raise AssertionError(f"no {kind} of {call_id}")


def _rewrite(run: Path, lines: list[str]) -> None:
    (run / "journal.jsonl").write_text("".join(line + "\n" for line in lines))


async def test_a_journal_damaged_before_its_tail_is_refused_with_the_line_and_what_was_lost(
    tmp_path: Path,
):
    run = tmp_path / "run"
    await _finished_run(run, World(), ["a", "b", "c"])
    lines = _lines(run)
    at = _line_of(run, "intent", "call_1")
    lines[at] = lines[at][: len(lines[at]) // 2]  # cut in the middle of the file
    _rewrite(run, lines)
    with pytest.raises(JournalError) as caught:
        Journal.resume(run)
    message = str(caught.value)
    assert f"damaged at line {at + 1} (1 unreadable entry, with " in message
    assert "--resume-damaged" in message
    assert "\n" not in message
    Journal.resume(run, damaged="continue").close()  # the lock was released on refusal


async def test_a_journal_with_entries_missing_in_the_middle_is_refused(tmp_path: Path):
    run = tmp_path / "run"
    await _finished_run(run, World(), ["a", "b", "c"])
    lines = _lines(run)
    at = _line_of(run, "outcome", "call_0")
    del lines[at : at + 2]  # two whole lines gone: every line left parses
    _rewrite(run, lines)
    with pytest.raises(JournalError, match=rf"damaged at line {at + 1} \(2 missing entries"):
        Journal.resume(run)


async def test_a_torn_tail_ended_by_a_resume_is_not_damage(tmp_path: Path):
    run = tmp_path / "run"
    Journal.create(run, "run-1").close()
    with (run / "journal.jsonl").open("a") as f:
        f.write('{"kind": "intent", "call_id": "call_0", "too')  # killed mid-append
    Journal.resume(run).close()  # ends the torn line, appends its resume entry after it
    with (run / "journal.jsonl").open("a") as f:
        f.write('{"kind": "intent", "call_id": "call_1", "too')  # killed again
    with Journal.resume(run) as journal:
        assert journal.replay.skipped == 2
        assert journal.damage is None


async def test_resuming_past_damage_turns_every_unsafe_call_behind_it_into_outcome_unknown(
    tmp_path: Path,
):
    run = tmp_path / "run"
    world = World()
    texts = ["a", "b", "c"]
    await _finished_run(run, world, texts)
    lines = _lines(run)
    # The records of call_1 (its intent and its outcome) and of the end are lost; the turns
    # after it are readable, so the run had got past call_1.
    lost = {_line_of(run, "intent", "call_1"), _line_of(run, "outcome", "call_1")}
    lines = [line[:10] if i in lost else line for i, line in enumerate(lines)]
    lines = [line for line in lines if '"kind": "end"' not in line]
    _rewrite(run, lines)
    with Journal.resume(run, damaged="continue") as journal:
        result = await run_loop(
            ScriptedEngine(), world.toolset(keyed=False), _task("note", texts),
            LoopConfig(arm="S", policy="gold"), journal=journal,
        )  # fmt: skip
    assert world.runs == texts  # nothing ran twice
    assert [r.error_kind for r in result.call_records] == [None, "outcome_unknown", None]
    assert "journal was damaged" in result.results["call_1"].content
    assert result.summary.extra["journal"]["unknown"] == ["call_1"]
    with Journal.resume(run) as journal:  # the damage was acknowledged: no flag needed again
        assert journal.damage is not None
        assert "call_1" in journal.replay.outcomes


async def test_a_journal_of_another_run_is_refused(tmp_path: Path):
    Journal.create(tmp_path / "run", "run-1").close()
    with pytest.raises(JournalError, match="holds the journal of run 'run-1', not of 'run-2'"):
        Journal.resume(tmp_path / "run", run_id="run-2")
