"""Claims about the typed request models (harness.proxy.models): a mistake anywhere is a 400
naming the field by its JSON path in the API's own terms and saying what it should be (of a
union's alternatives, the one the value got furthest into); unknown fields inside a message or
a tool reach the upstream as the client sent them, an unknown top-level field is refused; a
wrong path or method is answered in the error shape of the API the path names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.messages import Completion, Timings, Usage
from harness.proxy import in_process_client
from harness.proxy.models import ChatBody, MessagesBody, ResponsesBody, validated
from harness.proxy.protocol import BadRequest
from harness.testing import ScriptedEngine
from tests.test_proxy import TOOLS, make_app, opening, survey_script
from tests.test_proxy_tool_choice import app_over, recording


def refusal(model: Any, body: Any) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        validated(model, body)
    return caught.value


USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("model", "body", "param", "said"),
    [
        (
            ChatBody,
            {"messages": [{"role": "user", "content": 5}]},
            "messages[0].content",
            "must be a string or a list (got 5)",
        ),
        (
            ChatBody,
            {"messages": [{"role": "user", "content": [{"text": "x"}]}]},
            "messages[0].content[0].type",
            "field required",
        ),
        (
            ChatBody,
            {"messages": [{"role": "robot"}]},
            "messages[0].role",
            "'system', 'developer', 'user', 'assistant' or 'tool'",
        ),
        (ChatBody, {"messages": USER, "stop": [1]}, "stop[0]", "a valid string (got 1)"),
        (ChatBody, {"messages": USER, "stream": 1}, "stream", "a valid boolean (got 1)"),
        (ChatBody, {"messages": USER, "max_tokens": 1.0}, "max_tokens", "a valid integer"),
        (ChatBody, {"messages": USER, "model": "m" * 300}, "model", "at most 256 characters"),
        (
            ChatBody,
            {"messages": [{"role": "tool", "content": "x"}]},
            "messages[0]",
            "needs a string 'tool_call_id'",
        ),
        (
            ResponsesBody,
            {"input": [{"type": "input_image", "image_url": "x"}]},
            "input[0]",
            "takes message, function_call and function_call_output items",
        ),
        (
            ResponsesBody,
            {"input": [{"role": "user", "content": [{"type": "input_image"}]}]},
            "input[0].content[0].type",
            "'input_text', 'output_text' or 'text' (got \"input_image\")",
        ),
        (
            ResponsesBody,
            {"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]},
            "input[0].call_id",
            "field required",
        ),
        (ResponsesBody, {"input": []}, "input", "a non-empty list of items"),
        (
            ResponsesBody,
            {"input": "x", "tools": [{"type": "web_search"}]},
            "tools[0]",
            "function tools only",
        ),
        (
            MessagesBody,
            {
                "max_tokens": 8,
                "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}],
            },
            "messages[0].content[0]",
            "takes text and tool_result blocks",
        ),
        (
            MessagesBody,
            {"max_tokens": "8", "messages": USER},
            "max_tokens",
            'a valid integer (got "8")',
        ),
        (MessagesBody, {"messages": USER}, "max_tokens", "field required"),
        (
            MessagesBody,
            {"max_tokens": 8, "messages": USER, "tool_choice": {"type": "tool"}},
            "tool_choice",
            "needs a 'name'",
        ),
        (
            MessagesBody,
            {
                "max_tokens": 8,
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": []}],
                    }
                ],
            },
            "messages[0].content[0].input",
            "a valid dictionary",
        ),
    ],
)
def test_a_mistake_is_named_by_its_json_path_and_what_it_should_be(
    model: Any, body: dict[str, Any], param: str, said: str
) -> None:
    bad = refusal(model, body)
    assert bad.status == 400
    assert bad.param == param
    assert bad.message.startswith(f"'{param}': ")
    assert said in bad.message


def test_a_body_that_is_not_an_object_says_what_it_is() -> None:
    assert refusal(ChatBody, [1]).message == "The request body must be a JSON object, not a list."


@pytest.mark.anyio
async def test_unknown_fields_inside_messages_and_tools_reach_the_upstream_as_sent() -> None:
    bodies: list[dict[str, Any]] = []
    messages = [
        *opening(),
        {"role": "user", "content": "and d", "name": "ann", "x_trace": {"id": 7}},
    ]
    tools = [{**TOOLS[0], "x_owner": "docs"}, TOOLS[1]]
    sent = {"model": "m", "messages": messages, "tools": tools, "harness_arm": "S"}
    async with recording(bodies) as upstream, in_process_client(app_over(upstream)) as client:
        response = await client.post("/chat/completions", json=sent)
        refused = await client.post("/chat/completions", json={**sent, "x_top": 1})
    assert response.status_code == 200, response.text
    ((upstream_body),) = bodies
    assert upstream_body["messages"] == messages
    assert upstream_body["tools"] == tools
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "x_top"


@pytest.mark.anyio
async def test_stream_options_include_obfuscation_is_accepted() -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post(
            "/chat/completions",
            json={
                "model": "m",
                "messages": USER,
                "stream": True,
                "stream_options": {"include_usage": True, "include_obfuscation": False},
            },
        )
    assert response.status_code == 200, response.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/chat/completions", 405),
        ("DELETE", "/responses", 405),
        ("GET", "/messages", 405),
        ("POST", "/nothing", 404),
        ("POST", "/v2/messages", 404),
        ("POST", "/messages/count_tokens", 404),
    ],
)
async def test_a_wrong_path_or_method_is_answered_in_the_apis_own_shape(
    method: str, path: str, status: int
) -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.request(method, path, content=json.dumps({}))
    assert response.status_code == status
    body = response.json()
    if "/messages" in path:
        assert body["type"] == "error"
        assert body["error"]["type"] == (
            "not_found_error" if status == 404 else "invalid_request_error"
        )
    else:
        assert body["error"]["type"] == "invalid_request_error"


def _rambling(messages: Any, tools: Any) -> Completion:
    """An upstream that never finishes within its budget: every reply cut, no call."""
    return Completion("and then, and then", (), Usage(10, 0, 256), Timings(), "length")


@pytest.mark.anyio
@pytest.mark.parametrize("arm", ["F", "S"])
async def test_a_reply_cut_at_max_tokens_is_the_clients_answer_as_the_serial_run_gives_it(
    arm: str,
) -> None:
    engine = ScriptedEngine(_rambling)
    async with in_process_client(make_app(engine)) as client:
        response = await client.post(
            "/chat/completions",
            json={"model": "m", "messages": opening(), "tools": TOOLS, "harness_arm": arm},
        )
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "and then, and then"
    assert len(engine.requests) == 1  # one generation, not the loop's retries
