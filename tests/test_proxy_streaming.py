"""Claims about ``stream: true`` through the proxy: a window streams as one message's tool-call
deltas that the OpenAI SDK's own streaming (``create(stream=True)`` and the ``.stream()``
helper) assembles into one message with parallel calls; a pass-through text turn streams
delta by delta as the upstream decodes it; upstream failures are an error response before
the first delta and an error event after it."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import anyio
import openai
import pytest

from harness.engines.base import GenerationSettings
from harness.errors import EngineRequestError
from harness.messages import Completion, Message, ToolSpec
from harness.proxy import build_app, in_process_client
from harness.testing import ScriptedEngine
from tests.test_proxy import KEYS, TOOLS, make_app, opening, survey_script

pytestmark = pytest.mark.anyio


def _sdk(http: Any) -> Any:
    return openai.AsyncOpenAI(
        base_url=str(http.base_url), api_key="unused", http_client=http, max_retries=0
    )


async def _streamed_survey(http: Any, **extra: Any) -> list[Any]:
    """Every chunk of the survey's first request, streamed through the SDK."""
    stream = await _sdk(http).chat.completions.create(
        model="m",
        messages=opening(),
        tools=TOOLS,
        stream=True,
        extra_body={"harness_inputs": {"keys": KEYS}},
        **extra,
    )
    return [chunk async for chunk in stream]


async def test_the_sdk_assembles_a_streamed_window_into_one_message_with_parallel_calls() -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as http:
        stream = await _streamed_survey(http, stream_options={"include_usage": True})
        calls: dict[int, dict[str, str]] = {}
        finish = None
        usage = None
        for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                for delta in choice.delta.tool_calls or ():
                    call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] += delta.id or ""
                    if delta.function is not None:
                        call["name"] += delta.function.name or ""
                        call["arguments"] += delta.function.arguments or ""
    assert finish == "tool_calls"
    assert [json.loads(calls[i]["arguments"]) for i in sorted(calls)] == [{"key": k} for k in KEYS]
    assert all(c["id"].startswith("hx.") and c["name"] == "read_doc" for c in calls.values())
    assert usage is not None
    assert usage.prompt_tokens > 0


async def test_the_sdk_stream_helper_gives_the_window_as_its_final_message() -> None:
    http = in_process_client(make_app(ScriptedEngine(survey_script)))
    async with (
        http,
        _sdk(http).chat.completions.stream(
            model="m",
            messages=opening(),
            tools=TOOLS,
            extra_body={"harness_inputs": {"keys": KEYS}},
        ) as stream,
    ):
        async for _ in stream:
            pass
        final = await stream.get_final_completion()
    message = final.choices[0].message
    assert message.tool_calls is not None
    assert [json.loads(c.function.arguments)["key"] for c in message.tool_calls] == KEYS
    assert final.choices[0].finish_reason == "tool_calls"


class GatedEngine(ScriptedEngine):
    """Streams ``first``, then waits for ``go`` before streaming ``rest``: a proxy that
    buffered the reply would never deliver ``first`` before the reply was done."""

    def __init__(self) -> None:
        super().__init__()
        self.go = anyio.Event()

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> AsyncGenerator[str | Completion, None]:
        yield "Hello, "
        await self.go.wait()
        yield "world."
        yield Completion("Hello, world.", finish_reason="stop")


async def _asgi_stream(app: Any, payload: dict[str, Any], on_body: Any) -> tuple[int, bytes]:
    """Drive the ASGI app directly (httpx's ASGI transport buffers a response): the status
    and every body piece as the app sends it, each handed to ``on_body`` when it arrives."""
    raw = json.dumps(payload).encode()
    sent = False
    status = 0
    body = b""

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, body
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body += message.get("body", b"")
            await on_body(message.get("body", b""))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    await app(scope, receive, send)
    return status, body


@pytest.mark.timeout(30)
async def test_a_pass_through_text_turn_streams_delta_by_delta() -> None:
    engine = GatedEngine()
    app = build_app(engine)
    seen: list[str] = []

    async def on_body(piece: bytes) -> None:
        text = piece.decode()
        seen.append(text)
        if '"Hello, "' in text:
            engine.go.set()  # the first delta reached the client before the reply ended

    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    status, body = await _asgi_stream(app, payload, on_body)
    assert status == 200
    events = [json.loads(e[6:]) for e in body.decode().split("\n\n") if e.startswith("data: {")]
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in events if c.get("choices")
    )
    assert text == "Hello, world."
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    assert body.decode().endswith("data: [DONE]\n\n")
    assert app.state.proxy.overheads.summary()["pass_through"]["requests"] == 1


async def test_the_sdk_streams_a_pass_through_answer_and_it_reads_as_the_reply() -> None:
    engine = ScriptedEngine(lambda messages, tools: "line one\nline two\n")
    async with in_process_client(build_app(engine)) as http:
        stream = await _sdk(http).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert "".join(pieces) == "line one\nline two\n"
    assert len([p for p in pieces if p]) == 2  # the upstream's two deltas, not one buffer


class BrokenStream(ScriptedEngine):
    def __init__(self, *, after_first: bool) -> None:
        super().__init__()
        self.after_first = after_first

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> AsyncGenerator[str | Completion, None]:
        if self.after_first:
            yield "partial "
        raise EngineRequestError("connection reset by the upstream sk-secret-upstream")


async def test_a_stream_that_cannot_start_is_a_502_naming_the_upstream() -> None:
    from harness.proxy import ProxyConfig

    config = ProxyConfig(
        upstream="http://10.0.0.9:8000/v1", secrets_to_hide=("sk-secret-upstream",)
    )
    async with in_process_client(build_app(BrokenStream(after_first=False), config)) as http:
        response = await http.post(
            "/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        )
    assert response.status_code == 502
    assert "http://10.0.0.9:8000/v1" in response.text
    assert "sk-secret-upstream" not in response.text


async def test_a_stream_broken_after_its_first_delta_ends_with_an_error_event() -> None:
    from harness.proxy import ProxyConfig

    config = ProxyConfig(
        upstream="http://10.0.0.9:8000/v1", secrets_to_hide=("sk-secret-upstream",)
    )
    async with in_process_client(build_app(BrokenStream(after_first=True), config)) as http:
        stream = await _sdk(http).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(openai.APIError) as caught:
            async for _ in stream:
                pass
    assert "http://10.0.0.9:8000/v1" in str(caught.value)
    assert "sk-secret-upstream" not in str(caught.value)


async def test_a_streamed_pass_through_call_with_tools_arrives_whole() -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as http:
        chunks = await _streamed_survey(http, extra_headers={"X-Harness-Arm": "S"})
    deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or ()]
    assert [d.id for d in deltas if d.id] == ["up_0"]  # one serial call, the upstream's id
    assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {"key": "a"}
