"""Claims about ``tool_choice`` through the proxy (harness.proxy.upstream), on all three wire
APIs, over an HTTP upstream (httpx's MockTransport running the survey script) that records
every request body: ``"required"`` reaches the upstream with every generation and a window is
still gathered; ``"none"`` and a named function are passed on and served serially; an
upstream that cannot take a ``tool_choice`` is served serially and the response says so —
never a 400 for a value the upstream itself accepts."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from harness.engines.openai_http import OpenAIHTTPEngine
from harness.proxy import ProxyConfig, build_app, in_process_client
from harness.testing import ScriptedEngine
from tests.test_proxy import (
    EFFECTS,
    KEYS,
    MANIFEST,
    TOOLS,
    body,
    opening,
    survey_completion,
    survey_script,
)

pytestmark = pytest.mark.anyio

FLAT_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
ANTHROPIC_TOOLS = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS
]
NAMED = {"type": "function", "function": {"name": "read_doc"}}


def recording(bodies: list[dict[str, Any]], *, tool_format: str = "openai") -> OpenAIHTTPEngine:
    """An HTTP upstream running ``survey_script`` that records each chat request body."""

    def handle(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)
        bodies.append(sent)
        return survey_completion(sent)

    return OpenAIHTTPEngine(
        "http://upstream/v1",
        "default",
        client=httpx.AsyncClient(transport=httpx.MockTransport(handle)),
        max_retries=0,
        tool_format=tool_format,  # type: ignore[arg-type]
    )


def app_over(engine: Any) -> Any:
    return build_app(engine, ProxyConfig(effects=EFFECTS, manifest=MANIFEST))


async def test_required_reaches_the_upstream_with_every_generation_and_a_window_is_gathered() -> (
    None
):
    bodies: list[dict[str, Any]] = []
    async with recording(bodies) as upstream, in_process_client(app_over(upstream)) as client:
        response = await client.post(
            "/chat/completions", json=body(opening(), tool_choice="required")
        )
    assert response.status_code == 200, response.text
    assert response.headers["x-harness-arm"] == "F"
    assert response.headers["x-harness-window"] == str(len(KEYS))
    assert "x-harness-warning" not in response.headers
    calls = response.json()["choices"][0]["message"]["tool_calls"]
    assert len(calls) == len(KEYS)  # a gathered window is one or more calls: "required" met
    assert len(bodies) == len(KEYS)
    assert [b["tool_choice"] for b in bodies] == ["required"] * len(KEYS)
    assert all(b["parallel_tool_calls"] is False for b in bodies)


@pytest.mark.parametrize("choice", ["none", NAMED])
async def test_none_and_a_named_function_are_passed_on_and_served_serially(choice: Any) -> None:
    bodies: list[dict[str, Any]] = []
    async with recording(bodies) as upstream, in_process_client(app_over(upstream)) as client:
        response = await client.post("/chat/completions", json=body(opening(), tool_choice=choice))
    assert response.status_code == 200, response.text
    assert response.headers["x-harness-arm"] == "S"
    assert response.headers["x-harness-window"] == "0"
    ((sent),) = bodies
    assert sent["tool_choice"] == choice
    warning = response.headers.get("x-harness-warning", "")
    if choice == "none":
        assert "tool_choice" not in warning
    else:
        assert "function 'read_doc' is served serially" in warning


async def test_an_object_the_proxy_does_not_know_is_passed_on_as_sent_not_refused() -> None:
    bodies: list[dict[str, Any]] = []
    allowed = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {}}]},
    }
    async with recording(bodies) as upstream, in_process_client(app_over(upstream)) as client:
        response = await client.post("/chat/completions", json=body(opening(), tool_choice=allowed))
    assert response.status_code == 200, response.text
    assert response.headers["x-harness-arm"] == "S"
    assert "served serially" in response.headers["x-harness-warning"]
    assert [b["tool_choice"] for b in bodies] == [allowed]


@pytest.mark.parametrize("engine", ["scripted", "harness-format"])
async def test_an_upstream_that_takes_no_tool_choice_is_served_serially_and_says_so(
    engine: str,
) -> None:
    bodies: list[dict[str, Any]] = []
    upstream: Any = (
        ScriptedEngine(survey_script)
        if engine == "scripted"
        else recording(bodies, tool_format="harness")
    )
    async with upstream, in_process_client(app_over(upstream)) as client:
        response = await client.post(
            "/chat/completions", json=body(opening(), tool_choice="required")
        )
    assert response.status_code == 200, response.text
    assert response.headers["x-harness-arm"] == "S"
    warning = response.headers["x-harness-warning"]
    assert "tool_choice 'required' was not passed on" in warning
    assert "not enforced" in warning
    assert all("tool_choice" not in b for b in bodies)  # never "auto" in its place


@pytest.mark.parametrize(
    ("choice", "param"),
    [
        ("sometimes", "tool_choice"),
        (3, "tool_choice"),
        ({"function": {"name": "x"}}, "tool_choice.type"),
        ({"type": "function"}, "tool_choice.function"),
    ],
)
async def test_a_tool_choice_no_api_accepts_is_a_400_naming_it(choice: Any, param: str) -> None:
    async with in_process_client(app_over(ScriptedEngine(survey_script))) as client:
        response = await client.post("/chat/completions", json=body(opening(), tool_choice=choice))
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param


async def test_a_conversation_whose_tool_choice_changes_starts_again_from_its_history() -> None:
    bodies: list[dict[str, Any]] = []
    async with recording(bodies) as upstream, in_process_client(app_over(upstream)) as client:
        messages = opening()
        first = await client.post("/chat/completions", json=body(messages, tool_choice="required"))
        message = first.json()["choices"][0]["message"]
        messages.append(message)
        for call in message["tool_calls"]:
            key = json.loads(call["function"]["arguments"])["key"]
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": key})
        before = len(bodies)
        second = await client.post("/chat/completions", json=body(messages, tool_choice="auto"))
    assert second.status_code == 200, second.text
    assert second.headers["x-harness-restored"] == "1"
    assert bodies[before]["tool_choice"] == "auto"  # the absorb turn asked with the new choice
    assert bodies[before]["messages"][-1]["role"] == "tool"


# -- the Responses and Messages APIs ------------------------------------------------------------


def responses_body(choice: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "input": [{"role": "user", "content": "Survey a, b and c."}],
        "tools": FLAT_TOOLS,
        "tool_choice": choice,
        "harness_inputs": {"keys": KEYS},
    }


def messages_body(choice: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Survey a, b and c."}],
        "tools": ANTHROPIC_TOOLS,
        "tool_choice": choice,
        "harness_inputs": {"keys": KEYS},
    }


@pytest.mark.parametrize(
    ("path", "request_body", "forwarded", "window"),
    [
        ("/responses", responses_body("required"), "required", len(KEYS)),
        ("/responses", responses_body("none"), "none", 0),
        ("/responses", responses_body({"type": "function", "name": "read_doc"}), NAMED, 0),
        ("/messages", messages_body({"type": "any"}), "required", len(KEYS)),
        ("/messages", messages_body({"type": "auto"}), "auto", len(KEYS)),
        ("/messages", messages_body({"type": "none"}), "none", 0),
        ("/messages", messages_body({"type": "tool", "name": "read_doc"}), NAMED, 0),
        (
            "/messages",
            messages_body({"type": "any", "disable_parallel_tool_use": True}),
            "required",
            0,
        ),
    ],
)
async def test_each_apis_tool_choice_reaches_the_upstream_in_chat_spelling(
    path: str, request_body: dict[str, Any], forwarded: Any, window: int
) -> None:
    bodies: list[dict[str, Any]] = []
    async with recording(bodies) as upstream, in_process_client(app_over(upstream)) as client:
        response = await client.post(path, json=request_body)
    assert response.status_code == 200, response.text
    assert response.headers["x-harness-window"] == str(window)
    assert {json.dumps(b["tool_choice"]) for b in bodies} == {json.dumps(forwarded)}


@pytest.mark.parametrize("choice", [{"type": "some"}, {"type": "tool"}, 7])
async def test_a_messages_tool_choice_anthropic_refuses_is_a_400_in_its_shape(choice: Any) -> None:
    async with in_process_client(app_over(ScriptedEngine(survey_script))) as client:
        response = await client.post("/messages", json=messages_body(choice))
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error"
    assert "tool_choice" in error["error"]["message"]
