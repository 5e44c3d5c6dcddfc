"""Benchmarks run as modules end on Ctrl-C with exit status 130 and a line, not a traceback."""

from __future__ import annotations

import pytest

from benchmarks._entry import run_main


def _interrupted() -> int:
    raise KeyboardInterrupt


def test_ctrl_c_in_a_benchmark_exits_130_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        run_main(_interrupted)
    assert stopped.value.code == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted (SIGINT): stopped; exit status 130"


def test_a_benchmarks_own_exit_status_is_kept() -> None:
    with pytest.raises(SystemExit) as stopped:
        run_main(lambda: 3)
    assert stopped.value.code == 3
