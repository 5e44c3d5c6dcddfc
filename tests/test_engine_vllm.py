"""Claims about the in-process vLLM engine beyond the shared contract (all marked ``engine``).

Real-model claims run on the session's shared SmolLM2 engine; claims that kill or close an
engine start their own tiny random-weight one (same processes, same code paths).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness.engines.base import GenerationSettings
from harness.engines.vllm import VLLMEngine
from harness.errors import ContextWindowExceeded, EngineDeadError, EngineRequestError
from harness.messages import Completion, Message, ToolCall
from tests.engine_support import READ_DOC, TINY_SETTINGS

pytestmark = [pytest.mark.anyio, pytest.mark.engine, pytest.mark.timeout(600)]
psutil = pytest.importorskip("psutil")

TOOLS = [READ_DOC]


def _vllm_children() -> set[int]:
    """Live (non-zombie) vLLM processes below this one."""
    alive = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name().startswith("VLLM") and child.status() != psutil.STATUS_ZOMBIE:
                alive.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return alive


async def test_greedy_generation_is_deterministic(real_engine: VLLMEngine) -> None:
    chat: list[Message] = [{"role": "user", "content": "Name three colours of the rainbow."}]
    settings = GenerationSettings(max_tokens=24, temperature=0.0)
    first = await real_engine.generate(chat, [], settings)
    again = await real_engine.generate(chat, [], settings)
    assert first.content == again.content
    assert first.usage.completion_tokens == again.usage.completion_tokens
    assert first.content


async def test_every_earlier_turn_of_a_growing_chat_is_served_from_the_prefix_cache(
    real_engine: VLLMEngine,
) -> None:
    block = real_engine.settings.block_size
    chat: list[Message] = [
        {"role": "system", "content": "You look documents up. Session 41."},
        {"role": "user", "content": "Read document a, then document b, then answer."},
    ]
    before = real_engine.cache_stats()
    prompts = []
    for key in ("a", "b"):
        gold = (ToolCall(f"call_{key}", "read_doc", f'{{"key": "{key}"}}'),)
        turn = await real_engine.generate(chat, TOOLS, GenerationSettings(forced=gold))
        prompts.append(turn.usage)
        chat += [
            turn.to_message(),
            {"role": "tool", "tool_call_id": f"call_{key}", "content": f"text of {key} " * 20},
        ]
    last = await real_engine.generate(
        chat, TOOLS, GenerationSettings(forced=(), forced_answer="ok")
    )
    # Each turn's prompt starts with the previous turn's prompt, byte for byte: every full
    # block of it is a hit.
    assert prompts[1].cached_tokens >= prompts[0].prompt_tokens // block * block
    assert last.usage.cached_tokens >= prompts[1].prompt_tokens // block * block
    after = real_engine.cache_stats()
    assert after.hits - before.hits >= prompts[1].cached_tokens + last.usage.cached_tokens
    assert 0.0 < after.hit_rate <= 1.0


async def test_a_reply_the_model_chose_renders_back_into_a_cache_hit(
    real_engine: VLLMEngine,
) -> None:
    chat: list[Message] = [
        {"role": "user", "content": "Call read_doc with the key 'q' to read document q."}
    ]
    first = await real_engine.generate(chat, TOOLS, GenerationSettings(max_tokens=48))
    assert first.tool_calls, first
    chat += [
        first.to_message(),
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "q"},
    ]
    second = await real_engine.generate(chat, TOOLS, GenerationSettings(max_tokens=48))
    block = real_engine.settings.block_size
    assert second.usage.cached_tokens >= first.usage.prompt_tokens // block * block


async def test_concurrent_requests_are_decoded_together_not_one_after_another(
    real_engine: VLLMEngine,
) -> None:
    replies: list[Completion] = []

    async def one(i: int) -> None:
        chat: list[Message] = [{"role": "user", "content": f"Reply {i}."}]
        answer = f"Answer {i}: " + "lorem ipsum " * 12
        settings = GenerationSettings(forced=(), forced_answer=answer)
        replies.append(await real_engine.generate(chat, [], settings))

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    wall = time.monotonic() - started
    # Serialised requests have disjoint decode intervals: their decode times add up to less
    # than the wall time. Batched ones overlap, so the sum is several times the wall time.
    assert sum(r.timings.decode_s for r in replies) > wall


async def test_the_model_worker_runs_on_the_cpus_the_thread_plan_chose(
    real_engine: VLLMEngine,
) -> None:
    # The worker is forked from a process whose OpenMP runtime has read its environment
    # already: vLLM's binding variables alone would leave it on every CPU (issue 43).
    plan = real_engine.settings.thread_plan()
    workers = [psutil.Process(pid) for pid in _vllm_children()]
    workers = [w for w in workers if w.name().startswith("VLLM::Worker")]
    assert workers
    for worker in workers:
        assert tuple(sorted(worker.cpu_affinity())) == (
            plan.cpus or tuple(range(os.cpu_count() or 1))
        )


async def test_a_prompt_longer_than_the_context_is_a_request_error_and_the_engine_goes_on(
    real_engine: VLLMEngine,
) -> None:
    huge: list[Message] = [{"role": "user", "content": "word " * 9000}]
    # A request error of its own kind: the run outgrew the context (a budget, not a fault).
    with pytest.raises(ContextWindowExceeded, match="max_model_len"):
        await real_engine.generate(huge, [], GenerationSettings(max_tokens=4))
    ok = await real_engine.generate(
        [{"role": "user", "content": "Hi"}], [], GenerationSettings(max_tokens=4)
    )
    assert ok.usage.completion_tokens >= 1


async def test_invalid_generation_settings_are_a_request_error(real_engine: VLLMEngine) -> None:
    with pytest.raises(EngineRequestError, match="Bad generation settings"):
        await real_engine.generate(
            [{"role": "user", "content": "Hi"}], [], GenerationSettings(temperature=-1.0)
        )


async def _in_flight_then(engine: VLLMEngine, action: Any) -> list[BaseException]:
    """Start a long request, run ``action`` once it is in flight, return what it raised."""
    errors: list[BaseException] = []
    chat: list[Message] = [{"role": "user", "content": "Tell a long story."}]

    async def long_request() -> None:
        try:
            await engine.generate(chat, [], GenerationSettings(max_tokens=1800))
        except EngineDeadError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(long_request)
        await anyio.wait_all_tasks_blocked()
        await anyio.sleep(0.3)
        await action()
    return errors


async def test_when_the_engine_core_dies_every_request_fails_with_engine_dead(
    tiny_model_dir: Path,
) -> None:
    before = _vllm_children()
    async with await VLLMEngine.start(tiny_model_dir, **TINY_SETTINGS) as engine:
        started = _vllm_children() - before
        core = [pid for pid in started if psutil.Process(pid).name() == "VLLM::EngineCore"]
        assert len(core) == 1

        async def kill() -> None:
            os.kill(core[0], signal.SIGKILL)

        errors = await _in_flight_then(engine, kill)
        assert len(errors) == 1
        assert "died" in str(errors[0])
        with pytest.raises(EngineDeadError, match="dead"):
            await engine.generate([{"role": "user", "content": "Hi"}], [], GenerationSettings())
    # Closing a dead engine also ends its orphaned worker.
    assert not (_vllm_children() & started)


async def test_closing_the_engine_leaves_no_process_behind(tiny_model_dir: Path) -> None:
    before = _vllm_children()
    engine = await VLLMEngine.start(tiny_model_dir, **TINY_SETTINGS)
    started = _vllm_children() - before
    assert len(started) >= 2  # the engine core and its worker
    errors = await _in_flight_then(engine, engine.aclose)
    assert len(errors) == 1
    assert engine.closed
    await engine.aclose()  # idempotent
    assert not (_vllm_children() & started)


def test_a_quiet_engine_prints_nothing_from_start_to_close(tiny_model_dir: Path) -> None:
    """The default (``quiet``) engine, in a fresh process as a user's script starts it: vLLM's
    and torch's start-up chatter (deprecation warnings, the worker's NUMA note, the weight
    loading bars) reaches neither stdout nor stderr."""
    import subprocess
    import sys

    script = (
        "import anyio\n"
        "from harness.engines.base import GenerationSettings\n"
        "from harness.engines.vllm import VLLMEngine\n"
        "from tests.engine_support import TINY_SETTINGS\n"
        "async def main():\n"
        f"    engine = await VLLMEngine.start({str(tiny_model_dir)!r}, **TINY_SETTINGS)\n"
        "    chat = [{'role': 'user', 'content': 'hi'}]\n"
        "    await engine.generate(chat, [], GenerationSettings(max_tokens=4, temperature=0.0))\n"
        "    await engine.aclose()\n"
        "anyio.run(main)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "TORCH_CPP"))}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
        cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == ""
