"""Claims that no embedded-engine process outlives its owner (all marked ``engine``): a
SIGKILLed parent's engine core and worker exit on their own within seconds, and ``harness
serve`` stopped by SIGTERM or SIGINT closes its engine before it exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]
psutil = pytest.importorskip("psutil")
ROOT = Path(__file__).resolve().parents[1]

HOLD_AN_ENGINE = """
import json, sys, anyio
from harness.engines.vllm import VLLMEngine
from tests.engine_support import TINY_SETTINGS

async def main():
    engine = await VLLMEngine.start(sys.argv[1], **TINY_SETTINGS)
    print(json.dumps(sorted(engine._pids)), flush=True)
    await anyio.sleep(600)

anyio.run(main)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int], seconds: float) -> list[int]:
    """The pids still running after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while any(not _gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if not _gone(p)]


def _engine_pids(pid: int) -> list[int]:
    out = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if child.name().startswith("VLLM"):
                out.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return out


def _stop(process: subprocess.Popen[str], pids: list[int]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()
    for pid in pids:  # never leave one behind, even when the claim failed
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_sigkilled_parents_engine_processes_exit_on_their_own_within_seconds(
    tiny_model_dir: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "TORCH_CPP"))}
    env["PYTHONPATH"] = str(ROOT)
    parent = subprocess.Popen(
        [sys.executable, "-c", HOLD_AN_ENGINE, str(tiny_model_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        pids = json.loads(parent.stdout.readline())
        assert len(pids) >= 2  # the engine core and its worker
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert _wait_gone(pids, 10) == []
    finally:
        _stop(parent, pids)
        if parent.stdout is not None:
            parent.stdout.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_harness_serve_stopped_by_a_signal_leaves_no_engine_process(signum: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from harness._commands.cli import main; raise SystemExit(main())",
            "serve",
            "--port",
            "0",
            "--no-fabric",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    pids: list[int] = []
    try:
        assert process.stdout is not None
        json.loads(process.stdout.readline())  # listening: the engine is up
        pids = _engine_pids(process.pid)
        assert len(pids) >= 2
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
        assert process.returncode == 128 + signum, err
        assert "Traceback" not in err
        assert _wait_gone(pids, 5) == []
    finally:
        _stop(process, pids)
