"""Claims about smolagents' ``ToolCallingAgent``, unmodified, through a served proxy (it is a
synchronous client: it runs in a worker thread against the proxy on a loopback socket). It
sends ``tool_choice: "required"`` on every request and keeps its history as text
(``Calling tools:`` / ``Observation:``): through the proxy it gets the window of three reads
in one response, the window is restored to the text the serial run's client sends, every
upstream request after the window is the serial run's byte for byte, and the answer is the
serial run's. The upstream is an HTTP upstream (httpx's MockTransport) running a script.

smolagents is an optional extra (``pip install agent-harness[clients]``): the test skips,
saying so, without it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import httpx
import pytest
from structlog.testing import capture_logs

from harness.engines.openai_http import OpenAIHTTPEngine
from harness.proxy import ProxyConfig, build_app
from harness.proxy.serve import serve
from tests.doubles import SURVEY_EFFECTS, SURVEY_KEYS, SURVEY_MANIFEST

smolagents = pytest.importorskip(
    "smolagents", reason="smolagents is not installed (pip install 'agent-harness[clients]')"
)
pytest.importorskip("openai", reason="smolagents' OpenAIModel needs the openai client")


pytestmark = pytest.mark.anyio

KEYS, EFFECTS, MANIFEST = SURVEY_KEYS, SURVEY_EFFECTS, SURVEY_MANIFEST


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def script(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Read each key, then give the final answer (smolagents' final_answer tool) made of the
    observations; calls held as tool calls or as smolagents' text both count."""
    done = 0
    for message in messages:
        if message.get("role") == "assistant":
            done += len(message.get("tool_calls") or ()) + _text(message).count("'function':")
    if done < len(KEYS):
        name, arguments = "read_doc", {"key": KEYS[done]}
    else:
        observed = [_text(m) for m in messages if m.get("role") in ("user", "tool")][1:]
        name, arguments = "final_answer", {"answer": " | ".join(observed)}
    call = {
        "id": f"up_{done}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def upstream(sent: list[dict[str, Any]]) -> OpenAIHTTPEngine:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        choice = {"index": 0, "message": script(body["messages"]), "finish_reason": "tool_calls"}
        return httpx.Response(200, json={"choices": [choice], "usage": {}})

    return OpenAIHTTPEngine(
        "http://upstream/v1",
        "default",
        client=httpx.AsyncClient(transport=httpx.MockTransport(handle)),
        max_retries=0,
    )


tool = smolagents.tool


@tool
def read_doc(key: str) -> str:
    """Read one document.

    Args:
        key: The document's key.
    """
    return f"text of {key}"


def run_agent(url: str, headers: dict[str, str]) -> Any:
    model = smolagents.OpenAIModel(
        model_id="m",
        api_base=url,
        api_key="unused",
        client_kwargs={"default_headers": headers, "max_retries": 0},
    )
    agent = smolagents.ToolCallingAgent(
        tools=[read_doc], model=model, max_steps=8, verbosity_level=0
    )
    try:
        return agent.run("Read documents a, b and c, then answer.")
    finally:
        model.client.close()


async def agent_through_proxy(arm: str) -> tuple[Any, list[dict[str, Any]], list[Any]]:
    """The agent's answer, the upstream's request bodies, and the proxy's request events."""
    sent: list[dict[str, Any]] = []
    engine = upstream(sent)
    app = build_app(engine, ProxyConfig(effects=EFFECTS, manifest=MANIFEST))
    urls: list[str] = []
    listening = anyio.Event()

    def on_listen(url: str) -> None:
        urls.append(url)
        listening.set()

    headers = {"X-Harness-Arm": arm, "X-Harness-Inputs": json.dumps({"keys": list(KEYS)})}
    with capture_logs() as logs:
        async with engine, anyio.create_task_group() as group:
            group.start_soon(lambda: serve(app, "127.0.0.1", 0, on_listen=on_listen))
            await listening.wait()
            answer = await anyio.to_thread.run_sync(run_agent, urls[0], headers)
            group.cancel_scope.cancel()
    return answer, sent, [e for e in logs if e["event"] == "request"]


async def test_smolagents_gets_a_window_in_one_response_and_the_serial_answer() -> None:
    flat_answer, flat, flat_requests = await agent_through_proxy("F")
    serial_answer, serial, serial_requests = await agent_through_proxy("S")
    assert serial_answer == " | ".join(f"Observation:\ntext of {key}" for key in KEYS)
    assert flat_answer == serial_answer
    assert all(b["tool_choice"] == "required" for b in flat + serial)
    # the three reads in one response: 2 round trips where the serial run makes 4
    assert [(e["window"], e["restored"]) for e in flat_requests] == [(3, 0), (0, 1)]
    assert len(serial_requests) == len(KEYS) + 1
    assert len(serial) == len(KEYS) + 1  # one generation per step
    assert len(flat) == len(KEYS) + 1  # the same generations, the reads in one window
    # after the window, the upstream gets exactly what the serial run's client sent
    assert json.dumps(flat[-1]["messages"]) == json.dumps(serial[-1]["messages"])
    assert not any("hx." in json.dumps(b["messages"]) for b in flat)
