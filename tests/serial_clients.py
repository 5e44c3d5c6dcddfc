"""An unmodified agent loop for the draft tests: the OpenAI SDK against the in-process proxy,
running every returned call (concurrently, as frameworks do) and sending the results back,
configured only by headers (the arm, the skill). What one run saw is a :class:`ClientRun`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai

from benchmarks.proxy_bench import run_calls
from harness.loop.state import DEFAULT_LOOP_SYSTEM
from harness.messages import ToolCall
from harness.tools import Toolset


@dataclass
class ClientRun:
    """One conversation as the client saw it: round trips, the windows the proxy returned
    (``X-Harness-Window``), every call it ran, the answer."""

    round_trips: int = 0
    windows: list[int] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    answer: str | None = None


def sdk(http: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=str(http.base_url), api_key="unused", http_client=http, max_retries=0
    )


async def client_loop(
    client: openai.AsyncOpenAI,
    toolset: Toolset,
    prompt: str,
    headers: Mapping[str, str],
    *,
    system: str | None = None,
    max_round_trips: int = 60,
) -> ClientRun:
    """The loop: ``chat.completions.create`` with the toolset's specs, run the calls, repeat
    until an answer."""
    messages: list[Any] = [
        {"role": "system", "content": system or DEFAULT_LOOP_SYSTEM},
        {"role": "user", "content": prompt},
    ]
    run = ClientRun()
    tools: Sequence[Any] = toolset.specs()
    for _ in range(max_round_trips):
        raw = await client.chat.completions.with_raw_response.create(
            model="harness", messages=messages, tools=tools, extra_headers=dict(headers)
        )
        response = raw.parse()
        run.round_trips += 1
        window = int(raw.headers.get("x-harness-window", "0"))
        if window:
            run.windows.append(window)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            run.answer = message.content
            return run
        calls = [ToolCall.from_openai(c.model_dump()) for c in message.tool_calls]
        run.calls.extend(calls)
        messages.extend(await run_calls(toolset, calls))
    raise AssertionError(f"no answer in {max_round_trips} round trips")
