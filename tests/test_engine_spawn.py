"""A script that opens the default engine at module level, with no ``__main__`` guard, works.

vLLM starts its engine core with the ``spawn`` method, whose child re-imports the parent's
``__main__``; an unguarded script used to start a second engine there and die with vLLM's
bootstrapping error (see :mod:`harness.engines._spawn`). Marked ``engine``: it starts the tiny
random-weight engine in a subprocess (run it under the engine lock).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.engine_support import TINY_SETTINGS

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

SCRIPT = """\
import anyio

from harness import GenerationSettings, open_default_engine

print("script body ran", flush=True)


async def main():
    async with open_default_engine({model!r}, **{settings!r}) as engine:
        chat = [{{"role": "user", "content": "hi"}}]
        completion = await engine.generate(chat, [], GenerationSettings(max_tokens=4))
        print("generated", completion.usage.completion_tokens, flush=True)


anyio.run(main)
"""


def test_a_script_that_opens_the_engine_at_module_level_runs_once_and_generates(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(SCRIPT.format(model=str(tiny_model_dir), settings=TINY_SETTINGS))
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    tail = textwrap.shorten(done.stderr[-4000:], 4000)
    assert done.returncode == 0, f"the script failed: {tail}"
    assert done.stdout.count("script body ran") == 1, "the engine core re-ran the script"
    assert "generated 4" in done.stdout
