"""The ledger's JSONL trace and the crash-safe JSONL helpers under it."""

from __future__ import annotations

from pathlib import Path

from harness._jsonl import end_torn_line, open_append, read_jsonl
from harness.loop.ledger import Ledger, RunRecord


def _run_record() -> RunRecord:
    return RunRecord(
        "r", "t", "S", "gold", "schema_sound", False, True, None, "ok",
        1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0,
    )  # fmt: skip


def test_appending_after_a_torn_last_line_keeps_the_next_record(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text('{"kind": "turn", "turn": 0}\n{"kind": "call", "call_id": "cal')  # killed
    ledger = Ledger(path, log=False)
    ledger.emit(_run_record())
    ledger.close()
    assert [r["kind"] for r in Ledger.read_jsonl(path)] == ["turn", "run"]


def test_reading_skips_and_counts_lines_torn_by_crashes(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"a": 2, "b\n{"a": 3}\n[1, 2]\n{"a"')
    records, skipped = read_jsonl(path)
    assert records == [{"a": 1}, {"a": 3}]
    assert skipped == 3


def test_ending_a_torn_line_only_touches_files_that_need_it(tmp_path: Path) -> None:
    clean, torn, missing = tmp_path / "clean", tmp_path / "torn", tmp_path / "missing"
    clean.write_text('{"a": 1}\n')
    torn.write_text('{"a": 1}\n{"a"')
    assert not end_torn_line(clean)
    assert end_torn_line(torn)
    assert not end_torn_line(missing)
    assert clean.read_text() == '{"a": 1}\n'
    assert torn.read_text() == '{"a": 1}\n{"a"\n'
    with open_append(torn) as out:
        out.write('{"a": 2}\n')
    assert read_jsonl(torn) == ([{"a": 1}, {"a": 2}], 1)


def test_a_ledger_told_to_keep_n_records_holds_the_newest_and_never_grows_past_twice_n() -> None:
    from harness.loop.ledger import Ledger, TurnRecord

    ledger = Ledger(log=False, keep=10)
    for turn in range(95):
        ledger.emit(TurnRecord(run_id="r", turn=turn, arm="S", purpose="call", n_calls=0))
        assert len(ledger.records) <= 20
    assert ledger.records[-1].turn == 94
    assert [r.turn for r in ledger.records] == list(range(95 - len(ledger.records), 95))
