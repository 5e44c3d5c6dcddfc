"""Claims about LlamaIndex's ``FunctionAgent`` (over its ``OpenAI`` LLM), unmodified, through
the in-process proxy against a scripted upstream: the agent runs a window's three reads from
one response (plain and streaming), the upstream's request after the window is the serial
run's (the same agent, ``X-Harness-Arm: S``) byte for byte, and the answer is the serial
run's, with 3 requests where the serial run makes 5.

LlamaIndex's OpenAI integration needs openai < 3, which the other clients' extra does not
allow beside it, so it lives in a venv of its own: ``make clients-llamaindex`` builds
``build/venv-llamaindex`` (the ``clients-llamaindex`` extra) and ``make check`` runs this file
there. In any other environment the test skips and says so."""

from __future__ import annotations

import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from harness.proxy import in_process_client
from harness.testing import ScriptedEngine
from tests.test_proxy import KEYS, make_app, survey_script

_WHY = (
    "LlamaIndex is not installed here (it needs openai < 3): `make clients-llamaindex` builds "
    "build/venv-llamaindex, and `build/venv-llamaindex/bin/pytest tests/test_proxy_llamaindex.py` "
    "runs this test"
)
workflow = pytest.importorskip("llama_index.core.agent.workflow", reason=_WHY)
llms = pytest.importorskip("llama_index.llms.openai", reason=_WHY)

pytestmark = [
    pytest.mark.anyio,
    # llama-index-workflows walks its agent's members, pydantic's deprecated ones too (the
    # proxy's own models are checked with warnings as errors by every other proxy test)
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning"),
]


async def read_doc(key: str) -> str:
    """Read one document."""
    return f"text of {key}"


async def write_report(text: str) -> str:
    """Write the report."""
    return f"text of {text}"


async def agent_through_proxy(
    arm: str, *, streaming: bool
) -> tuple[str, ScriptedEngine, list[Any]]:
    """The agent's answer, the upstream, and the proxy's request events."""
    engine = ScriptedEngine(survey_script)
    app = make_app(engine)
    headers = {"X-Harness-Arm": arm, "X-Harness-Inputs": json.dumps({"keys": KEYS})}
    with capture_logs() as logs:
        async with in_process_client(app) as http:
            llm = llms.OpenAI(
                model="gpt-4o-mini",  # a name the integration knows; the proxy passes it on
                api_base=str(http.base_url),
                api_key="unused",
                async_http_client=http,
                max_retries=0,
                default_headers=headers,
            )
            agent = workflow.FunctionAgent(
                tools=[read_doc, write_report],
                llm=llm,
                system_prompt="You read documents.",
                streaming=streaming,
            )
            result = await agent.run(user_msg="Survey a, b and c.")
    answer = str(result.response.content)
    return answer, engine, [e for e in logs if e["event"] == "request"]


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streaming"])
async def test_a_llamaindex_function_agent_gets_the_window_in_one_response_and_the_serial_answer(
    streaming: bool,
) -> None:
    flat_answer, flat, flat_requests = await agent_through_proxy("F", streaming=streaming)
    serial_answer, serial, serial_requests = await agent_through_proxy("S", streaming=streaming)
    assert serial_answer == "done: text of a, text of b, text of c, text of all read"
    assert flat_answer == serial_answer
    assert [e["window"] for e in flat_requests] == [len(KEYS), 0, 0]
    assert flat_requests[1]["restored"] == 1
    assert len(serial_requests) == len(KEYS) + 2
    assert len(flat.requests) == len(serial.requests)  # the same generations
    assert json.dumps(flat.requests[-1].messages) == json.dumps(serial.requests[-1].messages)
    for request in flat.requests:
        assert all(len(m.get("tool_calls") or ()) <= 1 for m in request.messages)
