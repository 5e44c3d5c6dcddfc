"""Claims about hostile input (harness.proxy.limits, the one request path of
harness.proxy.wire): deep nesting anywhere, lone surrogates, huge or non-finite numbers get
a 4xx in the API's own error shape — never a 5xx, never the server's paths or a Python hint
— and a bug inside the proxy is a 500 in that shape too, logged, saying nothing of the
server."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from structlog.testing import capture_logs

from harness.proxy import in_process_client
from harness.proxy.serve import serve
from harness.testing import ScriptedEngine
from tests.test_proxy import TOOLS, body, make_app, opening, survey_script

pytestmark = pytest.mark.anyio

FLAT_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
ANTHROPIC_TOOLS = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS
]
#: Stands in for a value spliced into the JSON text as it is (not as a JSON string).
HOLE = "__HOLE__"
#: What no error may show: a path on the server, Python's own advice.
LEAKS = ("/work", "site-packages", ".py", "set_int_max_str_digits", "Traceback")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_objects(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def deep_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def chat(**extra: Any) -> dict[str, Any]:
    return body(opening(), **extra)


def responses(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "input": "Survey a, b and c.", "tools": FLAT_TOOLS, **extra}


def messages(**extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Survey a, b and c."}],
        "tools": ANTHROPIC_TOOLS,
        **extra,
    }


def spliced(request: dict[str, Any], hole: str) -> str:
    """``request`` as JSON text with ``hole`` written where :data:`HOLE` stands."""
    return json.dumps(request).replace(json.dumps(HOLE), hole)


API_OF = {"/chat/completions": chat, "/responses": responses, "/messages": messages}


def assert_api_error(path: str, response: Any, status: int = 400) -> str:
    """The API's own error shape with ``status``; the message, checked for leaks."""
    assert response.status_code == status, response.text
    error = response.json()
    if path == "/messages":
        assert error["type"] == "error"
        message = error["error"]["message"]
    else:
        message = error["error"]["message"]
    assert not any(leak in message for leak in LEAKS), message
    return str(message)


@pytest.mark.parametrize("path", list(API_OF))
@pytest.mark.parametrize(
    ("hole", "said"),
    [
        (nested(5000), "nested more than 64 levels"),  # past Python's own parser
        (nested(100), "nested more than 64 levels"),  # parses; over the limit
        (nested_objects(1000), "nested more than 64 levels"),
        ("1" + "0" * 5000, "5,001 digits"),
        ("NaN", "'NaN'"),
        ("1e999", "not finite"),
        ('"\\ud800"', "lone surrogate (\\ud800)"),
        ('{"\\udfff": 1}', "lone surrogate (\\udfff)"),
    ],
)
async def test_hostile_json_in_any_field_is_a_400_in_the_apis_own_shape(
    path: str, hole: str, said: str
) -> None:
    request = API_OF[path](metadata={"note": HOLE})
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post(
            path, content=spliced(request, hole), headers={"content-type": "application/json"}
        )
    assert said in assert_api_error(path, response)


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/chat/completions", "max_tokens"),
        ("/chat/completions", "temperature"),
        ("/chat/completions", "seed"),
        ("/messages", "max_tokens"),
        ("/messages", "temperature"),
        ("/responses", "max_output_tokens"),
    ],
)
async def test_a_setting_too_large_for_any_upstream_is_a_400_not_a_502(
    path: str, field: str
) -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post(path, json={**API_OF[path](), field: 10**900})
    message = assert_api_error(path, response)
    assert field in message
    assert len(message) < 400  # the number is not echoed whole


@pytest.mark.parametrize("path", list(API_OF))
async def test_a_tool_schema_94_objects_deep_is_a_400(path: str) -> None:
    tool = {"name": "deep", "parameters": deep_schema(94)}
    tools: Any = {
        "/chat/completions": [{"type": "function", "function": tool}],
        "/responses": [{"type": "function", **tool}],
        "/messages": [{"name": "deep", "input_schema": tool["parameters"]}],
    }[path]
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post(path, json=API_OF[path](tools=tools))
    assert "nested more than 64 levels" in assert_api_error(path, response)


@pytest.mark.parametrize("path", list(API_OF))
@pytest.mark.parametrize("depth", [100, 5000])
async def test_a_deeply_nested_inputs_header_is_a_400_naming_the_header(
    path: str, depth: int
) -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post(
            path,
            json=API_OF[path](),
            headers={"X-Harness-Inputs": '{"keys": ' + nested(depth) + "}"},
        )
    message = assert_api_error(path, response)
    assert "X-Harness-Inputs is nested more than 64 levels" in message


async def test_a_messages_tool_use_input_479_deep_is_a_400() -> None:
    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "read_doc", "input": HOLE}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
    ]
    request = messages(messages=history)
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post(
            "/messages",
            content=spliced(request, nested_objects(479)),
            headers={"content-type": "application/json"},
        )
    assert "nested more than 64 levels" in assert_api_error("/messages", response)


@pytest.mark.parametrize("where", ["content", "tool result"])
async def test_a_lone_surrogate_in_content_or_a_tool_result_is_a_400_not_a_502(
    where: str,
) -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": HOLE}]
    if where == "tool result":
        call = {"id": "c1", "type": "function", "function": {"name": "read_doc", "arguments": "{}"}}
        history = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": HOLE},
        ]
    request = body(history)
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post(
            "/chat/completions",
            content=spliced(request, '"text \\ud800 more"'),
            headers={"content-type": "application/json"},
        )
    message = assert_api_error("/chat/completions", response)
    assert "lone surrogate" in message
    assert f"messages[{len(history) - 1}].content" in message


async def test_a_call_whose_argument_string_nests_too_deep_is_a_400_naming_it() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "read_doc", "arguments": nested(3000)},
    }
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post("/chat/completions", json=body(history))
    message = assert_api_error("/chat/completions", response)
    assert "messages[1].tool_calls[0].function.arguments is nested" in message


async def test_an_argument_string_that_is_not_json_is_the_models_own_and_passes() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read_doc", "arguments": "[oops"}}
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    app = make_app(ScriptedEngine(lambda messages, tools: "ok"))
    async with in_process_client(app) as client:
        response = await client.post("/chat/completions", json=body(history))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("path", list(API_OF))
async def test_a_bug_inside_the_proxy_is_a_500_in_the_apis_shape_logged_and_saying_nothing(
    path: str,
) -> None:
    app = make_app(ScriptedEngine(survey_script))

    async def broken(request: Any, headers: Any) -> Any:
        raise RuntimeError("cannot open /work/secret/manifest.toml")

    app.state.proxy.complete = broken
    with capture_logs() as logs:
        async with in_process_client(app) as client:
            response = await client.post(path, json=API_OF[path]())
            after = await client.get("/health")
    message = assert_api_error(path, response, status=500)
    assert "RuntimeError" in message
    assert after.status_code == 200  # the server goes on
    (logged,) = [e for e in logs if e["event"] == "internal_error"]
    assert "/work/secret/manifest.toml" in logged["detail"]  # the operator sees it, not the client
    assert "Traceback" in logged["traceback"]


async def test_over_a_socket_a_hostile_request_keeps_the_connection_open() -> None:
    app = make_app(ScriptedEngine(survey_script))
    urls: list[str] = []
    listening = anyio.Event()

    def on_listen(url: str) -> None:
        urls.append(url)
        listening.set()

    hostile = spliced(chat(metadata={"note": HOLE}), nested(5000))
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve(app, "127.0.0.1", 0, on_listen=on_listen))
        await listening.wait()
        limits = httpx.Limits(max_connections=1)
        async with httpx.AsyncClient(base_url=urls[0], timeout=30, limits=limits) as client:
            bad = await client.post(
                "/chat/completions",
                content=hostile,
                headers={"content-type": "application/json"},
            )
            good = await client.post("/chat/completions", json=chat())
        group.cancel_scope.cancel()
    assert bad.status_code == 400
    assert bad.headers.get("connection") != "close"
    assert good.status_code == 200, good.text
    # the second request went over the first one's connection
    assert bad.extensions["network_stream"] is good.extensions["network_stream"]


async def test_a_lone_surrogate_escaped_inside_a_calls_argument_string_is_a_400() -> None:
    # JSON inside JSON: the body's string is valid text, the arguments it holds are not
    call = {"id": "c1", "type": "function", "function": {"name": "read_doc", "arguments": ""}}
    call["function"]["arguments"] = '{"key": "\\ud800"}'  # a backslash escape, not a char
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post("/chat/completions", json=body(history))
    message = assert_api_error("/chat/completions", response)
    assert "messages[1].tool_calls[0].function.arguments holds a lone surrogate" in message
