"""Forked engine processes die with their parent, even when the parent is SIGKILLed.

vLLM's engine core and its worker are forked from the process that opens the engine
(:mod:`harness.engines.vllm`), the worker from the engine core. A parent that closes its
engine stops them; a parent that is killed (SIGKILL, the OOM killer, a test runner's timeout)
cannot, and nothing in vLLM watches for it: the engine core and worker (gigabytes) would run
on with no parent.

:func:`die_with_parent`, called in a freshly forked engine process, makes the kernel send it
SIGKILL when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``, through ctypes). The kernel
ties that signal to the parent's *thread* that forked, so it is armed only when the fork came
from the parent's main thread; otherwise (and off Linux) a daemon thread polls the parent's
pid every :data:`POLL_S` seconds instead. A parent that died before the signal was armed is
caught by comparing the parent pid with the one noted before the fork.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

__all__ = ("POLL_S", "die_with_parent", "note_parent")

#: How often a child without ``PR_SET_PDEATHSIG`` checks that its parent lives.
POLL_S = 0.5
_PR_SET_PDEATHSIG = 1

#: The forking process's pid and whether it forks from its main thread (noted before a fork).
_parent: tuple[int, bool] | None = None


def note_parent() -> None:
    """Before a fork: note who is forking (an ``os.register_at_fork`` ``before`` hook)."""
    global _parent
    _parent = (os.getpid(), threading.current_thread() is threading.main_thread())


def _arm_pdeathsig() -> bool:
    """Ask the kernel for SIGKILL when the parent dies; True if it said yes."""
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    return False


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    _kill_self()


def die_with_parent() -> None:
    """In a forked child: end this process when the parent that forked it dies (see the
    module docstring). Does nothing if no fork was noted."""
    if _parent is None:
        return
    parent, from_main_thread = _parent
    if not (from_main_thread and _arm_pdeathsig()):
        threading.Thread(target=_watch, args=(parent,), daemon=True, name="die-with-parent").start()
    if os.getppid() != parent:  # the parent died before anything was armed
        _kill_self()


os.register_at_fork(before=note_parent)
