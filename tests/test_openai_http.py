"""Claims about the OpenAI-compatible HTTP engine beyond the shared contract: what it sends,
how it retries and how it fails. Every test uses httpx.MockTransport, never a socket."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

from harness.engines.base import GenerationSettings
from harness.engines.openai_http import OpenAIHTTPEngine
from harness.errors import ConfigError, EngineDeadError, EngineRequestError
from harness.messages import Completion, ToolCall
from tests.engine_support import READ_DOC, FakeOpenAIServer

pytestmark = pytest.mark.anyio

CHAT = [{"role": "user", "content": "Say hello."}]
OK = {
    "id": "chatcmpl-1",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 1},
}


def _engine(handler: Callable[[httpx.Request], Any], **kwargs: Any) -> OpenAIHTTPEngine:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    kwargs.setdefault("backoff_s", 0.0)
    return OpenAIHTTPEngine("http://server.test/v1", "m", client=client, **kwargs)


async def test_the_request_carries_tools_parallel_flag_and_sampling_settings() -> None:
    server = FakeOpenAIServer()
    async with (
        httpx.AsyncClient(transport=server.transport()) as client,
        OpenAIHTTPEngine("http://server.test/v1/", "m", client=client, api_key="k") as engine,
    ):
        settings = GenerationSettings(
            max_tokens=33, temperature=0.5, seed=7, parallel_tool_calls=True, stop=("END",)
        )
        await engine.generate(CHAT, [READ_DOC], settings)
    (body,) = server.bodies
    assert body["model"] == "m"
    assert body["messages"] == CHAT
    assert body["tools"] == [READ_DOC]
    assert body["parallel_tool_calls"] is True
    assert body["tool_choice"] == "auto"
    assert (body["max_tokens"], body["temperature"], body["seed"], body["stop"]) == (
        33,
        0.5,
        7,
        ["END"],
    )


async def test_the_api_key_is_sent_as_a_bearer_token_to_chat_completions() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=OK)

    async with _engine(handler, api_key="sk-test") as engine:
        await engine.generate(CHAT, [], GenerationSettings())
    assert str(seen[0].url) == "http://server.test/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer sk-test"


async def test_cached_tokens_come_from_prompt_tokens_details() -> None:
    payload = dict(
        OK,
        usage={
            "prompt_tokens": 50,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 32},
        },
    )
    async with _engine(lambda r: httpx.Response(200, json=payload)) as engine:
        completion = await engine.generate(CHAT, [], GenerationSettings())
    assert (completion.usage.prompt_tokens, completion.usage.cached_tokens) == (50, 32)
    assert completion.usage.completion_tokens == 3
    assert completion.timings.total_s >= 0


async def test_a_server_without_usage_details_reports_zero_cached_tokens() -> None:
    payload = dict(
        OK, usage={"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": None}
    )
    async with _engine(lambda r: httpx.Response(200, json=payload)) as engine:
        completion = await engine.generate(CHAT, [], GenerationSettings())
    assert completion.usage.cached_tokens == 0


async def test_rate_limits_and_server_errors_are_retried_with_backoff_then_succeed() -> None:
    statuses = iter([429, 503, 500])
    attempts: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(anyio.current_time())
        status = next(statuses, 200)
        if status != 200:
            return httpx.Response(status, json={"error": {"message": "busy"}})
        return httpx.Response(200, json=OK)

    async with _engine(handler, max_retries=3) as engine:
        completion = await engine.generate(CHAT, [], GenerationSettings())
    assert completion.content == "hi"
    assert len(attempts) == 4


async def test_retries_are_bounded_and_the_last_error_is_reported() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(503, json={"error": {"message": "overloaded"}})

    async with _engine(handler, max_retries=2) as engine:
        with pytest.raises(EngineRequestError, match=r"3 attempt\(s\).*HTTP 503: overloaded"):
            await engine.generate(CHAT, [], GenerationSettings())
    assert calls == 3


def test_backoff_grows_exponentially_and_honours_retry_after_up_to_the_cap() -> None:
    engine = OpenAIHTTPEngine("http://x/v1", "m", backoff_s=0.5, max_backoff_s=8.0)
    assert [engine._delay(i, None) for i in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    asks_3 = httpx.Response(429, headers={"Retry-After": "3"})
    asks_60 = httpx.Response(429, headers={"Retry-After": "60"})
    assert engine._delay(0, asks_3) == 3.0
    assert engine._delay(0, asks_60) == 8.0


async def test_a_client_error_fails_at_once_with_the_status_and_the_server_message() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(400, json={"error": {"message": "max_tokens is too large"}})

    async with _engine(handler) as engine:
        with pytest.raises(EngineRequestError, match="HTTP 400: max_tokens is too large"):
            await engine.generate(CHAT, [], GenerationSettings())
    assert calls == 1


async def test_a_plain_text_error_body_is_reported_verbatim() -> None:
    async with _engine(lambda r: httpx.Response(404, text="no such route")) as engine:
        with pytest.raises(EngineRequestError, match="HTTP 404: no such route"):
            await engine.generate(CHAT, [], GenerationSettings())


async def test_an_unreachable_server_is_engine_dead_and_names_the_url() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    async with _engine(handler, max_retries=1) as engine:
        with pytest.raises(EngineDeadError, match=r"http://server.test/v1/chat/completions"):
            await engine.generate(CHAT, [], GenerationSettings())


async def test_a_timeout_is_retried_then_a_request_error() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ReadTimeout("timed out", request=request)

    async with _engine(handler, max_retries=1, timeout_s=2.5) as engine:
        with pytest.raises(EngineRequestError, match=r"no answer within 2.5 s"):
            await engine.generate(CHAT, [], GenerationSettings())
    assert calls == 2


async def test_a_body_that_is_not_json_is_a_request_error() -> None:
    async with _engine(lambda r: httpx.Response(200, text="<html>")) as engine:
        with pytest.raises(EngineRequestError, match="not JSON"):
            await engine.generate(CHAT, [], GenerationSettings())


async def test_forcing_gold_calls_without_structured_outputs_is_a_config_error() -> None:
    async with _engine(lambda r: httpx.Response(200, json=OK)) as engine:
        gold = GenerationSettings(forced=(ToolCall("g", "read_doc", '{"key": "a"}'),))
        with pytest.raises(ConfigError, match="in-process engine"):
            await engine.generate(CHAT, [READ_DOC], gold)


async def test_forced_calls_go_to_a_vllm_server_as_a_one_choice_constraint() -> None:
    server = FakeOpenAIServer()
    gold = (ToolCall("g", "read_doc", '{"key": "a"}'),)
    async with (
        httpx.AsyncClient(transport=server.transport()) as client,
        OpenAIHTTPEngine(
            "http://server.test/v1", "m", client=client, server_supports_structured_outputs=True
        ) as engine,
    ):
        completion = await engine.generate(CHAT, [READ_DOC], GenerationSettings(forced=gold))
    assert completion.tool_calls == gold
    body = server.bodies[0]
    assert body["structured_outputs"] == {
        "choice": ['{"tool_calls": [{"name": "read_doc", "arguments": {"key": "a"}}]}']
    }
    assert body["tool_choice"] == "none"


async def test_a_server_that_ignores_the_constraint_is_caught() -> None:
    gold = GenerationSettings(forced=(ToolCall("g", "read_doc", '{"key": "a"}'),))
    async with _engine(
        lambda r: httpx.Response(200, json=OK), server_supports_structured_outputs=True
    ) as engine:
        with pytest.raises(EngineRequestError, match="diverged"):
            await engine.generate(CHAT, [READ_DOC], gold)


async def test_the_harness_tool_format_renders_tools_into_the_prompt_and_parses_the_reply() -> None:
    reply = '{"tool_calls": [{"name": "read_doc", "arguments": {"key": "z"}}]}'
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        message = {"role": "assistant", "content": reply}
        return httpx.Response(
            200, json=dict(OK, choices=[{"message": message, "finish_reason": "stop"}])
        )

    async with _engine(
        handler, tool_format="harness", server_supports_structured_outputs=True
    ) as engine:
        completion = await engine.generate(CHAT, [READ_DOC], GenerationSettings())
    assert completion.finish_reason == "tool_calls"
    assert completion.tool_calls[0].parsed_arguments() == {"key": "z"}
    body = bodies[0]
    assert "tools" not in body
    assert body["messages"][0]["role"] == "system"
    assert '"name": "read_doc"' in body["messages"][0]["content"]
    assert "anyOf" in body["structured_outputs"]["json"]


async def test_native_tool_calls_come_back_as_tool_calls() -> None:
    server = FakeOpenAIServer()
    async with (
        httpx.AsyncClient(transport=server.transport()) as client,
        OpenAIHTTPEngine("http://server.test/v1", "m", client=client) as engine,
    ):
        chat = [{"role": "user", "content": "Call read_doc please."}]
        completion = await engine.generate(chat, [READ_DOC], GenerationSettings())
    assert completion.finish_reason == "tool_calls"
    assert completion.tool_calls[0].name == "read_doc"
    assert completion.content is None


async def test_concurrent_requests_are_in_flight_together() -> None:
    server = FakeOpenAIServer()
    server.barrier = 6  # every request waits for all six: a serialising engine deadlocks
    async with (
        httpx.AsyncClient(transport=server.transport()) as client,
        OpenAIHTTPEngine("http://server.test/v1", "m", client=client) as engine,
        anyio.create_task_group() as tg,
    ):
        for _ in range(6):
            tg.start_soon(engine.generate, CHAT, [], GenerationSettings())
    assert server.max_in_flight == 6


async def test_an_owned_client_is_closed_with_the_engine_and_an_injected_one_is_not() -> None:
    owned = OpenAIHTTPEngine("http://server.test/v1", "m")
    await owned.aclose()
    assert owned._client.is_closed
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=OK))
    )
    async with client:
        async with OpenAIHTTPEngine("http://server.test/v1", "m", client=client):
            pass
        assert not client.is_closed


def test_bad_engine_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="tool_format"):
        OpenAIHTTPEngine("http://x/v1", "m", tool_format="xml")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_retries"):
        OpenAIHTTPEngine("http://x/v1", "m", max_retries=-1)


@pytest.mark.parametrize(
    "fault",
    [
        lambda r: httpx.ReadError("[Errno 104] Connection reset by peer", request=r),
        lambda r: httpx.RemoteProtocolError("Server disconnected without response", request=r),
        lambda r: httpx.WriteError("[Errno 32] Broken pipe", request=r),
        lambda r: ConnectionResetError(104, "Connection reset by peer"),
    ],
    ids=["read_error", "remote_protocol_error", "write_error", "connection_reset"],
)
async def test_transient_transport_errors_are_retried_then_succeed(
    fault: Callable[[httpx.Request], BaseException],
) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise fault(request)
        return httpx.Response(200, json=OK)

    async with _engine(handler, max_retries=2) as engine:
        completion = await engine.generate(CHAT, [], GenerationSettings())
    assert completion.content == "hi"
    assert calls == 3


async def test_a_connection_that_keeps_breaking_fails_after_the_retry_budget() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.RemoteProtocolError("peer closed connection", request=request)

    async with _engine(handler, max_retries=3) as engine:
        with pytest.raises(EngineRequestError, match=r"4 attempt\(s\).*RemoteProtocolError"):
            await engine.generate(CHAT, [], GenerationSettings())
    assert calls == 4


async def test_a_mistake_on_our_side_of_the_wire_is_not_retried() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.LocalProtocolError("illegal header")

    async with _engine(handler, max_retries=3) as engine:
        with pytest.raises(EngineRequestError, match="cannot be retried"):
            await engine.generate(CHAT, [], GenerationSettings())
    assert calls == 1


def test_jitter_only_shortens_a_delay_and_never_one_the_server_asked_for() -> None:
    engine = OpenAIHTTPEngine("http://x/v1", "m", backoff_s=1.0, max_backoff_s=8.0, jitter=0.25)
    waits = [engine._wait(2, None) for _ in range(200)]
    assert all(3.0 <= w <= 4.0 for w in waits)
    assert len(set(waits)) > 1
    asks_3 = httpx.Response(429, headers={"Retry-After": "3"})
    assert engine._wait(0, asks_3) == 3.0
    with pytest.raises(ConfigError, match="jitter"):
        OpenAIHTTPEngine("http://x/v1", "m", jitter=1.0)


# --------------------------------------------------------------------------------------------
# Streaming (server-sent events)


async def _stream(engine: OpenAIHTTPEngine, chat: Any = CHAT) -> tuple[list[str], Completion]:
    deltas: list[str] = []
    final: Completion | None = None
    async with contextlib.aclosing(engine.stream(chat, [], GenerationSettings())) as items:
        async for item in items:
            if isinstance(item, Completion):
                final = item
            else:
                deltas.append(item)
    assert final is not None
    return deltas, final


def _sse(*events: str) -> httpx.Response:
    return httpx.Response(200, text="".join(events), headers={"content-type": "text/event-stream"})


async def test_a_stream_asks_for_events_and_usage_and_reads_cached_tokens() -> None:
    server = FakeOpenAIServer()
    async with (
        httpx.AsyncClient(transport=server.transport()) as client,
        OpenAIHTTPEngine("http://server.test/v1", "m", client=client) as engine,
    ):
        await _stream(engine)
        deltas, completion = await _stream(engine)
    assert server.bodies[0]["stream"] is True
    assert server.bodies[0]["stream_options"] == {"include_usage": True}
    assert deltas == ["hello", " there"]
    assert completion.content == "hello there"
    assert completion.usage.cached_tokens > 0
    assert completion.finish_reason == "stop"


async def test_a_stream_is_retried_when_the_server_is_busy_before_the_first_event() -> None:
    server = FakeOpenAIServer()
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            return httpx.Response(503, json={"error": {"message": "busy"}})
        return await server.handle(request)

    async with _engine(handler) as engine:
        deltas, completion = await _stream(engine)
    assert calls == 2
    assert "".join(deltas) == completion.content == "hello there"


async def test_a_stream_cut_short_is_a_request_error() -> None:
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": "hel"}}]}
    cut = _sse(f"data: {json.dumps(chunk)}\n\n")
    async with _engine(lambda request: cut) as engine:
        with pytest.raises(EngineRequestError, match="without a finish reason"):
            await _stream(engine)


async def test_an_error_event_mid_stream_is_a_request_error_with_the_servers_message() -> None:
    error = _sse('data: {"error": {"message": "out of memory"}}\n\n')
    async with _engine(lambda request: error) as engine:
        with pytest.raises(EngineRequestError, match="mid-stream: out of memory"):
            await _stream(engine)


async def test_the_event_parser_skips_comments_and_joins_multi_line_data() -> None:
    first = {"id": "c", "choices": [{"index": 0, "delta": {"content": "a"}}]}
    last = {
        "id": "c",
        "choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": "stop"}],
    }
    head, tail = json.dumps(last).split(", ", 1)
    text = (
        ": keep-alive\r\n\r\n"
        f"event: message\r\ndata: {json.dumps(first)}\r\n\r\n"
        f"data: {head},\ndata: {tail}\n\n"
        "data: [DONE]\n\n"
        "data: {not json, never read}\n\n"
    )
    async with _engine(lambda request: _sse(text)) as engine:
        deltas, completion = await _stream(engine)
    assert deltas == ["a", "b"]
    assert completion.content == "ab"


@pytest.mark.anyio
async def test_one_settings_object_builds_the_same_engine_as_the_keywords() -> None:
    from harness.engines.openai_http import HTTPEngineSettings

    settings = HTTPEngineSettings(
        ["http://a:1/v1", "http://b:2/v1"],
        "m",
        api_key="k",
        timeout_s=9.0,
        max_retries=2,
        backoff_s=0.1,
        max_backoff_s=1.0,
        jitter=0.0,
        tool_format="harness",
        server_supports_structured_outputs=True,
        extra_body={"x": 1},
        name="mine",
        routing="round_robin",
        option_names={"base_url": "--upstream"},
    )
    async with OpenAIHTTPEngine.from_settings(settings) as engine:
        assert (engine.base_url, engine.model, engine.name) == ("http://a:1/v1", "m", "mine")
        assert (engine.timeout_s, engine.max_retries, engine.backoff_s) == (9.0, 2, 0.1)
        assert (engine.max_backoff_s, engine.jitter, engine.tool_format) == (1.0, 0.0, "harness")
        assert engine.server_supports_structured_outputs
        assert engine.extra_body == {"x": 1}
        assert engine.router is not None
        assert engine.router.policy == "round_robin"
        assert engine.option_names["base_url"] == "--upstream"
    with pytest.raises(ConfigError, match="tool_format"):
        OpenAIHTTPEngine.from_settings(HTTPEngineSettings("http://a/v1", tool_format="x"))  # type: ignore[arg-type]
