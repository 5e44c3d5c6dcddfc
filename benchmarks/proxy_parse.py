"""What checking a request costs at the proxy's edge, per wire API: the body decoded with the
edge's limits (:mod:`harness.proxy.limits`) and parsed by its API's typed model
(:mod:`harness.proxy.models`) into the chat request, in thread CPU microseconds (the median of
``--rounds`` rounds), on a short history (3 messages: a call and its result) and a long one
(``--messages``, the call and result repeated).

    python -m benchmarks.proxy_parse [--messages 101] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from harness.proxy.chat_api import ChatApi
from harness.proxy.limits import Limits, decode_json
from harness.proxy.messages_api import MessagesApi
from harness.proxy.responses_api import ResponsesApi
from harness.proxy.wire import WireApi

_CALL = {"id": "up_0", "type": "function", "function": {"name": "read_doc", "arguments": "{}"}}
_TOOL = {"name": "read_doc", "parameters": {"type": "object", "properties": {}}}


def body(api: str, repeats: int) -> dict[str, Any]:
    """A request of ``api``: a user turn, then ``repeats`` times a call and its result."""
    if api == "chat":
        turns: list[Any] = [
            {"role": "assistant", "content": None, "tool_calls": [_CALL]},
            {"role": "tool", "tool_call_id": "up_0", "content": "text of a"},
        ]
        user: dict[str, Any] = {"role": "user", "content": "Survey a, b and c."}
        tools: list[dict[str, Any]] = [{"type": "function", "function": _TOOL}]
        return {"model": "m", "messages": [user, *turns * repeats], "tools": tools}
    if api == "responses":
        turns = [
            {"type": "function_call", "call_id": "up_0", "name": "read_doc", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "up_0", "output": "text of a"},
        ]
        user = {"role": "user", "content": [{"type": "input_text", "text": "Survey a."}]}
        tools = [{"type": "function", **_TOOL}]
        return {"model": "m", "input": [user, *turns * repeats], "tools": tools}
    turns = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "up_0", "name": "read_doc", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "up_0", "content": "text of a"}],
        },
    ]
    tools = [{"name": "read_doc", "input_schema": _TOOL["parameters"]}]
    user = {"role": "user", "content": "Survey a, b and c."}
    return {"model": "m", "max_tokens": 64, "messages": [user, *turns * repeats], "tools": tools}


def cost_us(api: WireApi, raw: bytes, rounds: int) -> float:
    """Median thread CPU microseconds of one decode-and-parse of ``raw``."""
    reps = max(10, 20_000 // max(1, len(raw) // 50))
    samples = []
    for _ in range(rounds):
        started = time.thread_time()
        for _ in range(reps):
            api.parse(decode_json(raw, what="b", limits=Limits()), max_messages=100_000)
        samples.append((time.thread_time() - started) / reps * 1e6)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=101, help="the long history's length")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    apis: dict[str, WireApi] = {
        "chat": ChatApi(),
        "responses": ResponsesApi(),
        "messages": MessagesApi(),
    }
    print(f"{'api':10s} {'messages':>8s} {'bytes':>8s} {'cpu_us':>8s}")
    for name, api in apis.items():
        for repeats in (1, max(1, (args.messages - 1) // 2)):
            raw = json.dumps(body(name, repeats)).encode()
            print(
                f"{name:10s} {1 + 2 * repeats:8d} {len(raw):8d} {cost_us(api, raw, args.rounds):8.1f}"
            )


if __name__ == "__main__":
    main()
