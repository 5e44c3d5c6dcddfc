"""One contract, every engine: the scripted double, the HTTP engine (over httpx.MockTransport,
never a socket) and the in-process vLLM engine (marked ``engine``; the shared SmolLM2 engine
for generation, a tiny random-weight engine where a test has to close one).

Each claim is a sentence; each runs against every implementation.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from harness.engines.base import Engine, GenerationSettings, StreamingEngine
from harness.engines.openai_http import OpenAIHTTPEngine
from harness.errors import EngineDeadError
from harness.messages import Completion, Message, ToolCall, ToolSpec
from harness.testing import ScriptedEngine
from tests.engine_support import READ_DOC, TINY_SETTINGS, FakeOpenAIServer

pytestmark = pytest.mark.anyio

TOOLS: list[ToolSpec] = [READ_DOC]
CALL_PROMPT: list[Message] = [
    {"role": "user", "content": "Call read_doc with the key 'a' to read document a."}
]
CHAT: list[Message] = [{"role": "user", "content": "Say hello."}]
FINISH_REASONS = {"stop", "tool_calls", "length"}


def _script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    last = str(messages[-1].get("content") or "")
    if "slow" in last:
        return "word " * 100_000  # 100 s of simulated decoding at 1 ms per token
    if tools and last.startswith("Call "):
        return {"name": tools[0]["function"]["name"], "arguments": {"key": "a"}}
    return "hello there"


SLOW_SETTINGS = GenerationSettings(max_tokens=1500)


@dataclass
class Case:
    """One engine under test: ``engine`` for generation; ``fresh()`` opens a disposable one
    (for closing); ``slow_chat`` is a chat the engine takes long enough on to be cancelled."""

    kind: str
    engine: Engine
    fresh: Callable[[], Any]
    slow_chat: list[Message]


def _scripted_fresh() -> Any:
    @asynccontextmanager
    async def fresh() -> AsyncIterator[Engine]:
        async with ScriptedEngine(_script, decode_ms_per_token=1.0) as engine:
            yield engine

    return fresh


def _http_fresh() -> Any:
    @asynccontextmanager
    async def fresh() -> AsyncIterator[Engine]:
        async with httpx.AsyncClient(transport=FakeOpenAIServer().transport()) as client:
            yield OpenAIHTTPEngine("http://fake/v1", "fake", client=client)

    return fresh


def _vllm_fresh(tiny_model_dir: Path) -> Any:
    @asynccontextmanager
    async def fresh() -> AsyncIterator[Engine]:
        from harness.engines.vllm import VLLMEngine

        async with await VLLMEngine.start(tiny_model_dir, **TINY_SETTINGS) as engine:
            yield engine

    return fresh


SLOW_CHAT: list[Message] = [{"role": "user", "content": "A slow question: tell a long story."}]


@pytest.fixture(
    params=[
        "scripted",
        "http",
        pytest.param("vllm", marks=[pytest.mark.engine, pytest.mark.timeout(600)]),
    ],
)
def case(request: pytest.FixtureRequest) -> Case:
    # A sync fixture may pull in async ones; an async fixture may not (anyio's runner).
    return request.getfixturevalue(f"{request.param}_case")  # type: ignore[no-any-return]


@pytest.fixture
async def scripted_case() -> AsyncIterator[Case]:
    async with ScriptedEngine(_script, decode_ms_per_token=1.0) as engine:
        yield Case("scripted", engine, _scripted_fresh(), SLOW_CHAT)


@pytest.fixture
async def http_case() -> AsyncIterator[Case]:
    server = FakeOpenAIServer()
    async with (
        httpx.AsyncClient(transport=server.transport()) as client,
        OpenAIHTTPEngine(
            "http://fake/v1", "fake", client=client, server_supports_structured_outputs=True
        ) as http,
    ):
        yield Case("http", http, _http_fresh(), SLOW_CHAT)


@pytest.fixture
def vllm_case(real_engine: Engine, tiny_model_dir: Path) -> Case:
    return Case("vllm", real_engine, _vllm_fresh(tiny_model_dir), SLOW_CHAT)


def _sane(completion: Completion) -> None:
    usage, timings = completion.usage, completion.timings
    assert usage.prompt_tokens > 0
    assert 0 <= usage.cached_tokens <= usage.prompt_tokens
    assert usage.completion_tokens >= 1
    assert min(timings.total_s, timings.queue_s, timings.prefill_s, timings.decode_s) >= 0
    assert completion.finish_reason in FINISH_REASONS
    if completion.tool_calls:
        assert completion.finish_reason == "tool_calls"


async def test_a_reply_reports_sane_usage_timings_and_finish_reason(case: Case) -> None:
    completion = await case.engine.generate(CHAT, [], GenerationSettings(max_tokens=16))
    _sane(completion)
    assert completion.tool_calls == ()
    assert completion.finish_reason in {"stop", "length"}
    assert isinstance(completion.content, str)


async def test_a_repeated_prompt_reports_cached_tokens_within_the_prompt(case: Case) -> None:
    long_chat: list[Message] = [{"role": "user", "content": "Repeat after me: " + "cache " * 80}]
    await case.engine.generate(long_chat, TOOLS, GenerationSettings(max_tokens=8))
    again = await case.engine.generate(long_chat, TOOLS, GenerationSettings(max_tokens=8))
    _sane(again)
    assert 0 < again.usage.cached_tokens <= again.usage.prompt_tokens


async def test_a_tool_call_is_parsed_into_name_and_json_arguments(case: Case) -> None:
    completion = await case.engine.generate(CALL_PROMPT, TOOLS, GenerationSettings(max_tokens=48))
    _sane(completion)
    assert completion.finish_reason == "tool_calls"
    (call,) = completion.tool_calls
    assert call.name == "read_doc"
    assert call.id
    assert isinstance(call.parsed_arguments(), dict)
    assert "key" in call.parsed_arguments()


async def test_a_forced_gold_call_is_emitted_exactly(case: Case) -> None:
    gold = (
        ToolCall("gold_1", "read_doc", '{"key": "report-7"}'),
        ToolCall("gold_2", "read_doc", '{"key": "notes"}'),
    )
    settings = GenerationSettings(forced=gold, parallel_tool_calls=True, max_tokens=8)
    completion = await case.engine.generate(CHAT, TOOLS, settings)
    _sane(completion)
    assert completion.tool_calls == gold
    assert completion.finish_reason == "tool_calls"


async def test_a_forced_final_answer_is_emitted_exactly(case: Case) -> None:
    settings = GenerationSettings(forced=(), forced_answer="All done: 3 documents.")
    completion = await case.engine.generate(CHAT, TOOLS, settings)
    _sane(completion)
    assert completion.content == "All done: 3 documents."
    assert completion.finish_reason == "stop"


async def test_concurrent_requests_all_complete_with_their_own_replies(case: Case) -> None:
    replies: dict[int, Completion] = {}

    async def one(i: int) -> None:
        gold = (ToolCall(f"gold_{i}", "read_doc", json.dumps({"key": f"doc-{i}"})),)
        chat: list[Message] = [{"role": "user", "content": f"Question number {i}."}]
        replies[i] = await case.engine.generate(chat, TOOLS, GenerationSettings(forced=gold))

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    assert sorted(replies) == list(range(8))
    for i, completion in replies.items():
        _sane(completion)
        assert completion.tool_calls[0].parsed_arguments() == {"key": f"doc-{i}"}


async def test_cancelling_an_in_flight_request_leaves_the_engine_working(case: Case) -> None:
    with anyio.CancelScope() as scope:

        async def cancel_soon() -> None:
            await anyio.wait_all_tasks_blocked()
            await anyio.sleep(0.2)
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_soon)
            await case.engine.generate(case.slow_chat, [], SLOW_SETTINGS)
            pytest.fail("the slow request should have been cancelled")
    assert scope.cancelled_caught
    completion = await case.engine.generate(CHAT, [], GenerationSettings(max_tokens=8))
    _sane(completion)


@pytest.mark.parametrize("how", ["generate", "stream"])
async def test_closing_fails_in_flight_and_later_requests_with_engine_dead(
    case: Case, how: str
) -> None:
    errors: list[BaseException] = []
    async with case.fresh() as engine:

        async def request(chat: list[Message], settings: GenerationSettings) -> None:
            if how == "stream":
                await _drain(engine, chat, [], settings)
            else:
                await engine.generate(chat, [], settings)

        async def in_flight() -> None:
            try:
                await request(case.slow_chat, SLOW_SETTINGS)
            except EngineDeadError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(in_flight)
            await anyio.wait_all_tasks_blocked()
            await anyio.sleep(0.3)
            await engine.aclose()
            if case.kind == "scripted":
                tg.cancel_scope.cancel()  # the double keeps no in-flight requests to fail
        with pytest.raises(EngineDeadError):
            await request(CHAT, GenerationSettings(max_tokens=4))
    assert len(errors) == (0 if case.kind == "scripted" else 1)


# --------------------------------------------------------------------------------------------
# The streaming extension: every engine streams


async def _drain(engine: Engine, chat: list[Message], tools: list[ToolSpec], settings: Any):
    assert isinstance(engine, StreamingEngine)
    deltas: list[str] = []
    final: list[Completion] = []
    async with contextlib.aclosing(engine.stream(chat, tools, settings)) as items:
        async for item in items:
            assert not final, "nothing may follow the Completion"
            if isinstance(item, Completion):
                final.append(item)
            else:
                assert isinstance(item, str)
                deltas.append(item)
    assert len(final) == 1, "a stream ends with exactly one Completion"
    return deltas, final[0]


async def test_a_stream_yields_text_deltas_that_add_up_to_its_final_completion(case: Case) -> None:
    deltas, completion = await _drain(case.engine, CHAT, [], GenerationSettings(max_tokens=16))
    _sane(completion)
    assert completion.tool_calls == ()
    assert "".join(deltas) == completion.content
    assert deltas


async def test_a_streamed_forced_answer_arrives_in_pieces_and_exactly(case: Case) -> None:
    answer = "Step one: read.\nStep two: write.\nStep three: check."
    settings = GenerationSettings(forced=(), forced_answer=answer)
    deltas, completion = await _drain(case.engine, CHAT, [], settings)
    _sane(completion)
    assert completion.content == answer
    assert "".join(deltas) == answer
    assert len(deltas) >= 3


async def test_a_streamed_tool_call_is_parsed_into_the_final_completion(case: Case) -> None:
    _, completion = await _drain(case.engine, CALL_PROMPT, TOOLS, GenerationSettings(max_tokens=48))
    _sane(completion)
    assert completion.finish_reason == "tool_calls"
    (call,) = completion.tool_calls
    assert call.name == "read_doc"
    assert "key" in call.parsed_arguments()


async def test_closing_a_stream_early_leaves_the_engine_working(case: Case) -> None:
    engine = case.engine
    assert isinstance(engine, StreamingEngine)
    settings = GenerationSettings(forced=(), forced_answer="one\ntwo\nthree\nfour\nfive")
    async with contextlib.aclosing(engine.stream(CHAT, [], settings)) as items:
        async for item in items:
            assert isinstance(item, str)
            break
    completion = await engine.generate(CHAT, [], GenerationSettings(max_tokens=8))
    _sane(completion)
