"""Claims about harness.engines._pdeathsig: a forked child that calls ``die_with_parent`` ends
when its parent is SIGKILLed, whether the parent forked from its main thread (the kernel's
parent-death signal) or from another thread (the polling fallback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")
ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import os, sys, threading, time
from harness.engines._pdeathsig import die_with_parent

def fork():
    pid = os.fork()
    if pid == 0:
        die_with_parent()
        time.sleep(120)
        os._exit(0)
    print(pid, flush=True)

if sys.argv[1] == "thread":
    worker = threading.Thread(target=fork)
    worker.start()
    worker.join()
else:
    fork()
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("where", ["main", "thread"])
def test_a_forked_child_ends_within_seconds_of_its_parents_sigkill(where: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", SCRIPT, where],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(0.2)
        assert not _gone(child)  # alive while its parent is
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 5
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(child)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
