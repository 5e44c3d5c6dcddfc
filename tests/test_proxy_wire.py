"""Claims about the proxy's Responses API (``/v1/responses``) and Messages API
(``/v1/messages``), driven by the official ``openai`` and ``anthropic`` clients over httpx's
ASGI transport and the scripted engine: a window comes back as one response with several
function calls / tool_use blocks, the results go back in any order and with re-serialised
arguments, the upstream sees exactly what a Chat Completions loop (and so the serial run)
shows it, streams parse, and every mistake is that API's 400."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseErrorEvent, ResponseFunctionToolCall

from harness.messages import Completion
from harness.proxy import ProxyConfig, build_app, in_process_client, messages_api, responses_api
from harness.testing import ScriptedEngine
from tests.test_proxy import KEYS, TOOLS, client_loop, make_app, opening, run_tool, survey_script
from tests.test_proxy_streaming import BrokenStream

pytestmark = pytest.mark.anyio

UPSTREAM = "http://10.0.0.9:8000/v1"
SECRET = "sk-secret-upstream"
SYSTEM = str(opening()[0]["content"])
TASK = str(opening()[1]["content"])
INPUTS = {"harness_inputs": {"keys": KEYS}}
ANSWER = "done: text of a, text of b, text of c, text of all read"
#: The tools in the Responses API's flat form and the Messages API's form.
FLAT_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
ANTHROPIC_TOOLS = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]


def _seen(engine: ScriptedEngine) -> list[str]:
    """Every upstream request's messages, as JSON."""
    return [json.dumps(r.messages) for r in engine.requests]


def _no_parallel(engine: ScriptedEngine) -> None:
    for request in engine.requests:
        for message in request.messages:
            assert len(message.get("tool_calls") or ()) <= 1


async def _chat_run() -> ScriptedEngine:
    """The same task through Chat Completions (whose restoration test_proxy compares with S)."""
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as http:
        messages, _ = await client_loop(http)
    assert messages[-1]["content"] == ANSWER
    return engine


def _compact(arguments: str) -> str:
    """Arguments re-serialised as pydantic-ai does: same value, other bytes."""
    return json.dumps(json.loads(arguments), separators=(",", ":"))


# -- the Responses API --------------------------------------------------------------------------


def _openai(http: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=str(http.base_url), api_key="unused", http_client=http, max_retries=0
    )


async def _streamed_response(client: openai.AsyncOpenAI, **kwargs: Any) -> tuple[Any, list[Any]]:
    stream = await client.responses.create(stream=True, **kwargs)
    events = [event async for event in stream]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    return events[-1].response, events


async def responses_loop(
    client: openai.AsyncOpenAI,
    *,
    stream: bool = False,
    reverse: bool = False,
    compact: bool = False,
    arm: str | None = None,
) -> tuple[list[Any], list[Any], list[dict[str, str]]]:
    """A Responses-API agent loop: send, run every function call, send the outputs back
    (``reverse``: in reverse order; ``compact``: a window's calls with their arguments
    re-serialised — a serial call's bytes reach the upstream as the client sends them).
    Returns the input items, the responses and each response's X-Harness headers."""
    items: list[Any] = [{"role": "user", "content": TASK}]
    responses: list[Any] = []
    headers: list[dict[str, str]] = []
    extra = {"X-Harness-Arm": arm} if arm else {}
    for _ in range(20):
        kwargs: dict[str, Any] = {
            "model": "m",
            "instructions": SYSTEM,
            "input": items,
            "tools": FLAT_TOOLS,
            "extra_body": INPUTS,
            "extra_headers": extra,
        }
        if stream:
            response, _ = await _streamed_response(client, **kwargs)
            headers.append({})
        else:
            raw = await client.responses.with_raw_response.create(**kwargs)
            headers.append({k: v for k, v in raw.headers.items() if k.startswith("x-harness")})
            response = raw.parse()
        responses.append(response)
        calls = [o for o in response.output if o.type == "function_call"]
        for item in response.output:
            dumped = item.model_dump(exclude_none=True)
            if compact and item.type == "function_call" and item.call_id.startswith("hx."):
                dumped["arguments"] = _compact(dumped["arguments"])
            items.append(dumped)
        if not calls:
            return items, responses, headers
        outputs = [
            {
                "type": "function_call_output",
                "call_id": c.call_id,
                "output": run_tool({"function": {"arguments": c.arguments}}),
            }
            for c in calls
        ]
        items.extend(reversed(outputs) if reverse else outputs)
    raise AssertionError("the loop did not finish")


async def _responses_run(**kwargs: Any) -> tuple[ScriptedEngine, list[Any], list[Any], list[Any]]:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as http:
        items, responses, headers = await responses_loop(_openai(http), **kwargs)
    return engine, items, responses, headers


async def test_a_responses_window_comes_back_as_one_response_with_several_function_calls() -> None:
    engine, _, responses, headers = await _responses_run()
    first = responses[0]
    calls = [o for o in first.output if o.type == "function_call"]
    assert [json.loads(c.arguments)["key"] for c in calls] == KEYS
    assert len({c.call_id for c in calls}) == 3
    assert all(c.call_id.startswith("hx.") for c in calls)  # minted by the proxy
    assert headers[0]["x-harness-window"] == "3"
    assert headers[1]["x-harness-restored"] == "1"
    assert "x-harness-warning" not in headers[1]
    assert first.status == "completed"
    assert first.usage is not None
    assert first.usage.total_tokens > 0
    # 2 round trips for the window, the serial report call, the answer
    assert len(responses) == 3
    assert responses[-1].output_text == ANSWER
    _no_parallel(engine)
    # The upstream saw, request by request, what a Chat Completions loop shows it.
    assert _seen(engine) == _seen(await _chat_run())


async def test_through_responses_the_absorb_request_is_the_serial_transcript() -> None:
    flat, *_ = await _responses_run()
    serial, _, s_responses, s_headers = await _responses_run(arm="S")
    assert len(s_responses) == len(KEYS) + 2
    assert all(h["x-harness-window"] == "0" for h in s_headers)
    assert _seen(flat)[-1] == _seen(serial)[-1]
    assert len(flat.requests) == len(serial.requests)
    _no_parallel(serial)


async def test_responses_outputs_in_another_order_with_reserialised_arguments_are_restored() -> (
    None
):
    plain, *_ = await _responses_run()
    engine, items, responses, headers = await _responses_run(reverse=True, compact=True)
    assert headers[1]["x-harness-restored"] == "1"
    assert "x-harness-warning" not in headers[1]
    assert responses[-1].output_text == ANSWER
    sent = [i for i in items if i.get("type") == "function_call_output"]
    assert [s["output"] for s in sent[:3]] == ["text of c", "text of b", "text of a"]
    # the upstream got its own argument strings back and the results in emitted order
    assert _seen(engine) == _seen(plain)
    _no_parallel(engine)


async def test_a_streamed_responses_loop_parses_with_the_sdk_and_matches_the_plain_one() -> None:
    plain, _, p_responses, _ = await _responses_run()
    engine, _, responses, _ = await _responses_run(stream=True)
    assert [[o.type for o in r.output] for r in responses] == [
        [o.type for o in r.output] for r in p_responses
    ]
    assert responses[-1].output_text == ANSWER
    assert _seen(engine) == _seen(plain)


async def test_a_streamed_window_is_the_responses_events_of_each_call() -> None:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as http:
        response, events = await _streamed_response(
            _openai(http),
            model="m",
            instructions=SYSTEM,
            input=TASK,
            tools=FLAT_TOOLS,
            extra_body=INPUTS,
        )
    kinds = [e.type for e in events]
    per_call = [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    assert kinds == ["response.created", "response.in_progress", *per_call * 3, kinds[-1]]
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [d.call_id for d in done] == [o.call_id for o in response.output]
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert [json.loads(d)["key"] for d in deltas] == KEYS


async def test_a_streamed_text_pass_through_arrives_delta_by_delta_as_responses_events() -> None:
    engine = ScriptedEngine(lambda messages, tools: "line one\nline two\n")
    async with in_process_client(make_app(engine)) as http:
        response, events = await _streamed_response(_openai(http), model="m", input="hi")
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) == 2  # the scripted upstream streams one line at a time
    assert "".join(deltas) == response.output_text == "line one\nline two\n"
    assert response.usage is not None
    assert response.usage.output_tokens > 0


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"model": "m", "input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"model": "m", "input": "hi", "store": True}, "store"),
        ({"model": "m", "input": []}, "'input'"),
        ({"model": "m", "input": [{"type": "item_reference", "id": "x"}]}, "item_reference"),
        ({"model": "m", "input": "hi", "tools": [{"type": "web_search"}]}, "function tools"),
        ({"model": "m", "input": "hi", "reasoning_effort": "low"}, "reasoning_effort"),
        ({"model": "m", "input": "hi", "tool_choice": "sometimes"}, "tool_choice"),
        ({"model": "m", "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ],
)
async def test_a_bad_responses_request_is_a_400_in_openai_error_shape(
    body: dict[str, Any], said: str
) -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as http:
        response = await http.post("/responses", json=body)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert said in error["message"]
        rest = {k: v for k, v in body.items() if k not in ("model", "input")}
        with pytest.raises(openai.BadRequestError) as raised:
            await _openai(http).responses.create(
                model=body["model"], input=body["input"], extra_body=rest
            )
        assert said in raised.value.message


async def test_responses_bodies_that_are_not_json_are_a_400_not_a_traceback() -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as http:
        response = await http.post("/responses", content=b"{not json")
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]


async def test_a_responses_reply_cut_at_max_output_tokens_is_an_incomplete_response() -> None:
    engine = ScriptedEngine(lambda messages, tools: Completion("cut sh", finish_reason="length"))
    async with in_process_client(make_app(engine)) as http:
        response = await _openai(http).responses.create(model="m", input="hi", max_output_tokens=2)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "cut sh"
    assert engine.requests[0].settings.max_tokens == 2


async def test_a_responses_stream_broken_after_its_first_delta_ends_with_error_events() -> None:
    config = ProxyConfig(upstream=UPSTREAM, secrets_to_hide=(SECRET,))
    async with in_process_client(build_app(BrokenStream(after_first=True), config)) as http:
        stream = await _openai(http).responses.create(model="m", input="hi", stream=True)
        events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds[-2:] == ["error", "response.failed"]
    assert "response.output_text.delta" in kinds
    error = events[-2]
    assert isinstance(error, ResponseErrorEvent)
    assert UPSTREAM in error.message
    assert SECRET not in error.message


async def test_a_responses_upstream_that_cannot_start_is_a_502_in_openai_shape() -> None:
    config = ProxyConfig(upstream=UPSTREAM, secrets_to_hide=(SECRET,))
    async with in_process_client(build_app(BrokenStream(after_first=False), config)) as http:
        with pytest.raises(openai.APIStatusError) as raised:
            await _openai(http).responses.create(model="m", input="hi", stream=True)
    assert raised.value.status_code == 502
    assert UPSTREAM in raised.value.message
    assert SECRET not in raised.value.message


async def test_parallel_tool_calls_false_on_responses_passes_through_one_call() -> None:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as http:
        raw = await _openai(http).responses.with_raw_response.create(
            model="m",
            instructions=SYSTEM,
            input=TASK,
            tools=FLAT_TOOLS,  # type: ignore[arg-type]
            parallel_tool_calls=False,
            extra_body=INPUTS,
        )
    assert raw.headers["x-harness-arm"] == "S"
    (call,) = raw.parse().output
    assert isinstance(call, ResponseFunctionToolCall)
    assert call.call_id == "up_0"  # the upstream's own call, not a minted window


def test_an_assistant_message_and_the_function_calls_after_it_are_one_chat_message() -> None:
    chat = responses_api.chat_body(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "reading", "annotations": []}],
                },
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c2", "output": "two"},
                {"type": "function_call_output", "call_id": "c1", "output": "one"},
            ],
        }
    )
    messages = chat["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[1]["content"] == "reading"
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["c1", "c2"]
    assert [m["tool_call_id"] for m in messages[2:]] == ["c2", "c1"]  # as the client sent them


# -- the Messages API ---------------------------------------------------------------------------

try:
    import anthropic
    import httpx2  # the anthropic client's HTTP library

    HAVE_ANTHROPIC = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_ANTHROPIC = False
needs_anthropic = pytest.mark.skipif(
    not HAVE_ANTHROPIC, reason="the anthropic client is not installed (pip install anthropic)"
)


def _anthropic(app: Any, api_key: str = "unused") -> Any:
    """The official client over the app in process (its own HTTP library's ASGI transport)."""
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://harness.in-process"
    )
    return anthropic.AsyncAnthropic(
        base_url="http://harness.in-process", api_key=api_key, http_client=http, max_retries=0
    )


async def messages_loop(
    client: Any, *, stream: bool = False, reverse: bool = False, arm: str | None = None
) -> tuple[list[dict[str, Any]], list[Any], list[dict[str, str]]]:
    """A Messages-API agent loop: send, run every tool_use, send the tool_results back."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    replies: list[Any] = []
    headers: list[dict[str, str]] = []
    extra = {"X-Harness-Arm": arm} if arm else {}
    for _ in range(20):
        kwargs: dict[str, Any] = {
            "model": "m",
            "max_tokens": 512,
            "system": SYSTEM,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
            "extra_body": INPUTS,
            "extra_headers": extra,
        }
        if stream:
            async with client.messages.stream(**kwargs) as streamed:
                reply = await streamed.get_final_message()
            headers.append({})
        else:
            raw = await client.messages.with_raw_response.create(**kwargs)
            headers.append({k: v for k, v in raw.headers.items() if k.startswith("x-harness")})
            reply = await raw.parse()
        replies.append(reply)
        messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
        uses = [b for b in reply.content if b.type == "tool_use"]
        if not uses:
            return messages, replies, headers
        results = [
            {
                "type": "tool_result",
                "tool_use_id": b.id,
                "content": [
                    {
                        "type": "text",
                        "text": run_tool({"function": {"arguments": json.dumps(b.input)}}),
                    }
                ],
            }
            for b in uses
        ]
        messages.append({"role": "user", "content": results[::-1] if reverse else results})
    raise AssertionError("the loop did not finish")


async def _messages_run(**kwargs: Any) -> tuple[ScriptedEngine, list[Any], list[Any], list[Any]]:
    engine = ScriptedEngine(survey_script)
    async with _anthropic(make_app(engine)) as client:
        messages, replies, headers = await messages_loop(client, **kwargs)
    return engine, messages, replies, headers


@needs_anthropic
async def test_a_messages_window_comes_back_as_one_message_with_several_tool_use_blocks() -> None:
    engine, _, replies, headers = await _messages_run()
    first = replies[0]
    assert first.stop_reason == "tool_use"
    assert [b.type for b in first.content] == ["tool_use"] * 3
    assert [b.input for b in first.content] == [{"key": k} for k in KEYS]
    assert headers[0]["x-harness-window"] == "3"
    assert headers[1]["x-harness-restored"] == "1"
    assert "x-harness-warning" not in headers[1]
    assert len(replies) == 3
    assert replies[-1].stop_reason == "end_turn"
    assert replies[-1].content[0].text == ANSWER
    assert replies[-1].usage.output_tokens > 0
    _no_parallel(engine)
    assert _seen(engine) == _seen(await _chat_run())


@needs_anthropic
async def test_messages_results_in_another_order_restore_and_match_the_serial_run() -> None:
    flat, _, _, headers = await _messages_run(reverse=True)
    serial, _, s_replies, s_headers = await _messages_run(arm="S")
    assert headers[1]["x-harness-restored"] == "1"
    assert "x-harness-warning" not in headers[1]
    assert len(s_replies) == len(KEYS) + 2
    assert all(h["x-harness-window"] == "0" for h in s_headers)
    assert _seen(flat)[-1] == _seen(serial)[-1]
    assert len(flat.requests) == len(serial.requests)
    _no_parallel(flat)


@needs_anthropic
async def test_a_streamed_messages_loop_parses_with_the_sdk_and_matches_the_plain_one() -> None:
    plain, _, p_replies, _ = await _messages_run()
    engine, _, replies, _ = await _messages_run(stream=True)
    assert [[b.model_dump() for b in r.content] for r in replies][1:] == [
        [b.model_dump() for b in r.content] for r in p_replies
    ][1:]
    assert [b.input for b in replies[0].content] == [{"key": k} for k in KEYS]
    assert [r.stop_reason for r in replies] == [r.stop_reason for r in p_replies]
    assert _seen(engine) == _seen(plain)


@needs_anthropic
async def test_a_streamed_text_pass_through_arrives_delta_by_delta_as_messages_events() -> None:
    engine = ScriptedEngine(lambda messages, tools: "line one\nline two\n")
    async with _anthropic(make_app(engine)) as client:
        stream = await client.messages.create(
            model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    deltas = [e.delta.text for e in events if e.type == "content_block_delta"]
    assert deltas == ["line one\n", "line two\n"]
    assert events[-2].delta.stop_reason == "end_turn"


@needs_anthropic
async def test_disable_parallel_tool_use_passes_through_one_call_at_a_time() -> None:
    engine = ScriptedEngine(survey_script)
    async with _anthropic(make_app(engine)) as client:
        raw = await client.messages.with_raw_response.create(
            model="m",
            max_tokens=64,
            system=SYSTEM,
            messages=[{"role": "user", "content": TASK}],
            tools=ANTHROPIC_TOOLS,
            tool_choice={"type": "auto", "disable_parallel_tool_use": True},
            extra_body=INPUTS,
        )
    assert raw.headers["x-harness-arm"] == "S"
    assert [b.type for b in (await raw.parse()).content] == ["tool_use"]


@needs_anthropic
@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
        ({"model": "m", "max_tokens": 8, "messages": []}, "messages"),
        (
            {
                "model": "m",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "hi"}],
                "tool_choice": {"type": "sometimes"},
            },
            "tool_choice",
        ),
        (
            {
                "model": "m",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}],
            },
            "image",
        ),
        (
            {
                "model": "m",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "hi"}],
                "top_k": 5,
            },
            "top_k",
        ),
    ],
)
async def test_a_bad_messages_request_is_a_400_in_anthropic_error_shape(
    body: dict[str, Any], said: str
) -> None:
    app = make_app(ScriptedEngine(survey_script))
    async with in_process_client(app) as http:
        response = await http.post("/messages", json=body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert said in error["error"]["message"]
    if "max_tokens" not in body:
        return  # the client itself requires it
    rest = {k: v for k, v in body.items() if k not in ("model", "messages", "max_tokens")}
    async with _anthropic(app) as client:
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.messages.create(
                model=body["model"],
                messages=body["messages"],
                max_tokens=body["max_tokens"],
                extra_body=rest,
            )
    assert said in str(raised.value)


@needs_anthropic
async def test_the_anthropic_clients_api_key_header_is_accepted() -> None:
    app = make_app(ScriptedEngine(lambda messages, tools: "ok"), api_key="sekrit")
    async with _anthropic(app, api_key="sekrit") as client:
        reply = await client.messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.content[0].text == "ok"
    async with in_process_client(app) as http:
        wrong = await http.post("/messages", headers={"x-api-key": "nope"}, json={})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["type"] == "authentication_error"


@needs_anthropic
async def test_a_messages_reply_cut_at_max_tokens_says_so() -> None:
    engine = ScriptedEngine(lambda messages, tools: Completion("cut sh", finish_reason="length"))
    async with _anthropic(make_app(engine)) as client:
        reply = await client.messages.create(
            model="m", max_tokens=2, messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.stop_reason == "max_tokens"
    assert reply.content[0].text == "cut sh"


@needs_anthropic
async def test_a_messages_stream_broken_after_its_first_delta_raises_in_the_client() -> None:
    config = ProxyConfig(upstream=UPSTREAM, secrets_to_hide=(SECRET,))
    async with _anthropic(build_app(BrokenStream(after_first=True), config)) as client:
        stream = await client.messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(anthropic.APIError) as raised:
            async for _ in stream:
                pass
    assert UPSTREAM in str(raised.value)
    assert SECRET not in str(raised.value)


@needs_anthropic
async def test_a_messages_upstream_that_cannot_start_is_a_502_in_anthropic_shape() -> None:
    config = ProxyConfig(upstream=UPSTREAM, secrets_to_hide=(SECRET,))
    app = build_app(BrokenStream(after_first=False), config)
    async with in_process_client(app) as http:
        response = await http.post(
            "/messages",
            json={
                "model": "m",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "hi"}],
                "stream": True,
            },
        )
    assert response.status_code == 502
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "api_error"
    assert UPSTREAM in response.text
    assert SECRET not in response.text


def test_tool_results_are_tool_messages_in_the_order_sent_and_the_text_follows() -> None:
    chat = messages_api.chat_body(
        {
            "model": "m",
            "max_tokens": 8,
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "x"}}],
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "reading"},
                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"b": 1, "a": 2}},
                        {"type": "tool_use", "id": "t2", "name": "f", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t2", "content": "two"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "no such doc"}],
                            "is_error": True,
                        },
                        {"type": "text", "text": "and then?"},
                    ],
                },
            ],
        }
    )
    assert chat["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "reading",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"b": 1, "a": 2}'},
                },
                {"id": "t2", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "t2", "content": "two"},
        {"role": "tool", "tool_call_id": "t1", "content": "Error: no such doc"},
        {"role": "user", "content": "and then?"},
    ]


# -- the OpenAI Agents SDK ----------------------------------------------------------------------


@pytest.mark.skipif(
    importlib.util.find_spec("agents") is None,
    reason="the OpenAI Agents SDK is not installed (pip install 'agent-harness[clients]')",
)
@pytest.mark.parametrize("streamed", [False, True])
async def test_an_agents_sdk_agent_on_its_default_responses_model_gets_a_window_in_one_turn(
    streamed: bool,
) -> None:
    import agents  # seconds to import: only here

    engine = ScriptedEngine(survey_script)
    ran: list[str] = []

    @agents.function_tool
    async def read_doc(key: str) -> str:
        """Read one document."""
        ran.append(key)
        return f"text of {key}"

    @agents.function_tool
    async def write_report(text: str) -> str:
        """Write the report."""
        ran.append(text)
        return f"text of {text}"

    agent = agents.Agent(
        name="surveyor",
        instructions=SYSTEM,
        tools=[read_doc, write_report],
        model="m",  # a model name: the default provider's Responses model
        model_settings=agents.ModelSettings(extra_body=INPUTS),
    )
    async with in_process_client(make_app(engine)) as http:
        provider = agents.OpenAIProvider(openai_client=_openai(http))
        config = agents.RunConfig(model_provider=provider, tracing_disabled=True)
        if streamed:
            result: Any = agents.Runner.run_streamed(agent, TASK, run_config=config)
            async for _ in result.stream_events():
                pass
        else:
            result = await agents.Runner.run(agent, TASK, run_config=config)
    assert result.final_output == ANSWER
    assert all(
        str(r.response_id).startswith("resp_") for r in result.raw_responses
    )  # /v1/responses
    assert ran == [*KEYS, "all read"]
    # the window in one model turn (the agent ran its 3 calls together), then the report, the answer
    assert len(result.raw_responses) == 3
    calls = [o for o in result.raw_responses[0].output if o.type == "function_call"]
    assert len(calls) == 3
    _no_parallel(engine)
    assert _seen(engine) == _seen(await _chat_run())
