"""Claims about LangGraph's prebuilt ReAct agent (``create_react_agent`` over LangChain's
``ChatOpenAI``), unmodified, through the in-process proxy: its ``ToolNode`` runs a window's
three reads concurrently from one response, the upstream's request after the window is the
serial run's (the same agent, ``X-Harness-Arm: S``) byte for byte, and the answer is the
serial run's, with 3 requests where the serial run makes 5.

LangGraph is an optional extra (``pip install agent-harness[clients]``): the test skips,
saying so, without it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from harness.proxy import in_process_client
from harness.testing import ScriptedEngine
from tests.test_proxy import KEYS, make_app, survey_script

prebuilt = pytest.importorskip(
    "langgraph.prebuilt", reason="LangGraph is not installed (pip install 'agent-harness[clients]')"
)
langchain_openai = pytest.importorskip(
    "langchain_openai", reason="langchain-openai is not installed (the clients extra)"
)
tools = pytest.importorskip("langchain_core.tools", reason="langchain-core is not installed")

pytestmark = pytest.mark.anyio


@tools.tool
async def read_doc(key: str) -> str:
    """Read one document."""
    return f"text of {key}"


@tools.tool
async def write_report(text: str) -> str:
    """Write the report."""
    return f"text of {text}"


async def agent_through_proxy(arm: str) -> tuple[str, ScriptedEngine, list[Any]]:
    """The agent's answer, the upstream, and the proxy's request events."""
    engine = ScriptedEngine(survey_script)
    app = make_app(engine)
    headers = {"X-Harness-Arm": arm, "X-Harness-Inputs": json.dumps({"keys": KEYS})}
    with capture_logs() as logs:
        async with in_process_client(app) as http:
            model = langchain_openai.ChatOpenAI(
                model="m",
                base_url=str(http.base_url),
                api_key="unused",
                http_async_client=http,
                max_retries=0,
                default_headers=headers,
            )
            agent = prebuilt.create_react_agent(model, [read_doc, write_report])
            state = await agent.ainvoke(
                {"messages": [("system", "You read documents."), ("user", "Survey a, b and c.")]}
            )
    answer = str(state["messages"][-1].content)
    return answer, engine, [e for e in logs if e["event"] == "request"]


# LangGraph 1.x moved it to langchain.agents.create_agent and warns; the users run this
@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
async def test_a_langgraph_react_agent_gets_the_window_in_one_response_and_the_serial_answer() -> (
    None
):
    flat_answer, flat, flat_requests = await agent_through_proxy("F")
    serial_answer, serial, serial_requests = await agent_through_proxy("S")
    assert serial_answer == "done: text of a, text of b, text of c, text of all read"
    assert flat_answer == serial_answer
    assert [e["window"] for e in flat_requests] == [len(KEYS), 0, 0]
    assert flat_requests[1]["restored"] == 1
    assert len(serial_requests) == len(KEYS) + 2
    assert len(flat.requests) == len(serial.requests)  # the same generations
    assert json.dumps(flat.requests[-1].messages) == json.dumps(serial.requests[-1].messages)
    for request in flat.requests:
        assert all(len(m.get("tool_calls") or ()) <= 1 for m in request.messages)
