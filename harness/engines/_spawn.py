"""Start vLLM's engine core without re-running the user's script.

vLLM's CPU platform starts its engine core with the ``spawn`` start method. A spawned child
first re-imports the parent's ``__main__`` module (to find functions pickled by reference), so
a script that opens the engine at module level — no ``if __name__ == "__main__":`` guard —
runs again in the child, tries to start a second engine while the child is still
bootstrapping, and the engine core dies ("An attempt has been made to start a new process
before the current process has finished its bootstrapping phase").

The engine core's entry point and its arguments are all vLLM's own objects, so the child never
needs the user's ``__main__``. :func:`spawn_without_main` drops the "re-import ``__main__``"
step from the preparation data of every process spawned inside it: the script runs once, with
or without the guard, and the engine core also starts faster (it skips the script's imports).
"""

from __future__ import annotations

import contextlib
import multiprocessing.spawn
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ("spawn_without_main",)

_MAIN_KEYS = ("init_main_from_name", "init_main_from_path")
_lock = threading.Lock()


@contextlib.contextmanager
def spawn_without_main() -> Iterator[None]:
    """Processes spawned inside this block do not re-import the parent's ``__main__``."""
    with _lock:
        original = multiprocessing.spawn.get_preparation_data

        def preparation_data(name: str) -> dict[str, Any]:
            data: dict[str, Any] = original(name)
            for key in _MAIN_KEYS:
                data.pop(key, None)
            return data

        multiprocessing.spawn.get_preparation_data = preparation_data
        try:
            yield
        finally:
            multiprocessing.spawn.get_preparation_data = original
