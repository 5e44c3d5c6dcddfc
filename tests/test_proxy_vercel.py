"""Claims about the Vercel AI SDK (node: ``generateText`` with tools and a step limit,
``tests/clients/vercel/agent.mjs``), unmodified, through a served proxy on Chat Completions and
on the Responses API: the three reads come in one step (the SDK runs them concurrently), in 2
requests where the serial run (``X-Harness-Arm: S``) makes 4, the upstream's last request
means what the serial run's does (the SDK re-serialises arguments; the window's calls reach the
upstream in its own spelling), and the answer is the serial run's. The upstream is the
scripted engine.

The SDK is a node package: the test skips, saying so, without node or without ``npm install``
in ``tests/clients/vercel``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from harness.messages import Message, ToolSpec
from harness.proxy import ProxyConfig, build_app
from harness.proxy.conversation import message_meaning
from harness.proxy.serve import serve
from harness.testing import ScriptedEngine
from tests.doubles import SURVEY_EFFECTS, SURVEY_KEYS, SURVEY_MANIFEST

CLIENT = Path(__file__).parent / "clients" / "vercel"
NODE = shutil.which("node")
if NODE is None:
    pytest.skip("node is not installed (the Vercel AI SDK runs on node)", allow_module_level=True)
if not (CLIENT / "node_modules" / "ai").is_dir():
    pytest.skip(
        f"the Vercel AI SDK is not installed: run `npm install` in {CLIENT}",
        allow_module_level=True,
    )


pytestmark = pytest.mark.anyio

KEYS, EFFECTS, MANIFEST = SURVEY_KEYS, SURVEY_EFFECTS, SURVEY_MANIFEST


def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    done = sum(len(m.get("tool_calls") or ()) for m in messages)
    if done < len(KEYS):
        return {"id": f"up_{done}", "name": "read_doc", "arguments": {"key": KEYS[done]}}
    return "done: " + ", ".join(str(m["content"]) for m in messages if m["role"] == "tool")


async def sdk_through_proxy(api: str, arm: str) -> tuple[dict[str, Any], ScriptedEngine, list[Any]]:
    """The SDK's result, the upstream, and the proxy's request events."""
    engine = ScriptedEngine(script)
    app = build_app(engine, ProxyConfig(effects=EFFECTS, manifest=MANIFEST))
    urls: list[str] = []
    listening = anyio.Event()

    def on_listen(url: str) -> None:
        urls.append(url)
        listening.set()

    headers = {"X-Harness-Arm": arm, "X-Harness-Inputs": json.dumps({"keys": list(KEYS)})}
    assert NODE is not None
    with capture_logs() as logs:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve(app, "127.0.0.1", 0, on_listen=on_listen))
            await listening.wait()
            with anyio.fail_after(60):
                done = await anyio.run_process(
                    [NODE, "agent.mjs", urls[0], api, json.dumps(headers)], cwd=CLIENT, check=False
                )
            group.cancel_scope.cancel()
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result, engine, [e for e in logs if e["event"] == "request"]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_the_vercel_ai_sdk_gets_the_window_in_one_step_and_the_serial_answer(
    api: str,
) -> None:
    flat, flat_upstream, flat_requests = await sdk_through_proxy(api, "F")
    serial, serial_upstream, serial_requests = await sdk_through_proxy(api, "S")
    assert serial["text"] == "done: text of a, text of b, text of c"
    assert flat["text"] == serial["text"]
    assert flat["steps"][0] == [{"key": k} for k in KEYS]  # one step ran the three reads
    assert len(serial["steps"]) == len(KEYS) + 1
    assert [e["window"] for e in flat_requests] == [len(KEYS), 0]
    assert flat_requests[1]["restored"] == 1
    assert len(serial_requests) == len(KEYS) + 1
    assert len(flat_upstream.requests) == len(serial_upstream.requests)
    # the same messages by meaning: the SDK sends arguments back compacted ({"key":"a"}), and
    # the flattened run's upstream gets its own spelling of a window's calls back
    flat_last, serial_last = flat_upstream.requests[-1], serial_upstream.requests[-1]
    assert [message_meaning(m) for m in flat_last.messages] == [
        message_meaning(m) for m in serial_last.messages
    ]
