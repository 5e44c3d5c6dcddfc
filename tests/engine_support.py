"""Helpers for the engine tests: a tiny random-weight model folder and a fake OpenAI server.

- :func:`build_tiny_model` writes a 2-layer Llama config beside SmolLM2's tokenizer and chat
  template; started with ``load_format="dummy"`` it loads in seconds and decodes noise, which
  is enough for contract tests whose output is constrained (forced calls) or irrelevant.
- :class:`FakeOpenAIServer` is an ``httpx.MockTransport`` handler that answers
  ``/v1/chat/completions`` like a vLLM server: tool calls when asked, ``structured_outputs``
  choices honoured, usage with ``prompt_tokens_details.cached_tokens`` from a prefix memory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import httpx

from harness.testing import cached_prefix

TINY_CONFIG = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
}

#: Engine settings for the tiny model: random weights, a 64 MiB KV cache, short context.
TINY_SETTINGS: dict[str, Any] = {
    "load_format": "dummy",
    "kv_cache_gib": 0.0625,
    "max_model_len": 2048,
    "max_num_batched_tokens": 2048,
}


def build_tiny_model(source: Path, target: Path) -> Path:
    """A random-weight 2-layer Llama folder with ``source``'s tokenizer and chat template."""
    target.mkdir(parents=True, exist_ok=True)
    config = json.loads((source / "config.json").read_text())
    config.update(TINY_CONFIG)
    (target / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (source / name).exists():
            shutil.copy(source / name, target / name)
    return target


READ_DOC = {
    "type": "function",
    "function": {
        "name": "read_doc",
        "description": "Read the document stored under a key.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
    },
}


class FakeOpenAIServer:
    """A ``MockTransport`` handler; ``bodies`` records every request body. A request whose
    last message mentions "slow" hangs until cancelled; with ``barrier = n`` every request
    waits until n requests are in flight (a serialising client deadlocks)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.seen: list[list[str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.barrier: int | None = None
        self._arrived = 0
        self._all_arrived = anyio.Event()

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def _cached(self, tokens: list[str]) -> int:
        return cached_prefix(self.seen, tokens)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if "slow" in str(body["messages"][-1].get("content") or ""):
                await anyio.sleep_forever()  # until the test cancels the request
            if self.barrier is not None:
                self._arrived += 1
                if self._arrived >= self.barrier:
                    self._all_arrived.set()
                await self._all_arrived.wait()
            return self._answer(body)
        finally:
            self.in_flight -= 1

    def _answer(self, body: dict[str, Any]) -> httpx.Response:
        messages = body["messages"]
        last = str(messages[-1].get("content") or "")
        tokens = " ".join(json.dumps(m, sort_keys=True) for m in messages).split()
        cached = self._cached(tokens)
        self.seen.append(tokens)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        structured = body.get("structured_outputs") or {}
        if structured.get("choice"):
            message["content"] = structured["choice"][0]
        elif body.get("tools") and last.startswith("Call "):
            name = body["tools"][0]["function"]["name"]
            message["tool_calls"] = [
                {
                    "id": f"call_{len(self.bodies)}",
                    "type": "function",
                    "function": {"name": name, "arguments": '{"key": "a"}'},
                }
            ]
            finish = "tool_calls"
        else:
            message["content"] = "hello there"
        out_tokens = len(str(message.get("content") or message.get("tool_calls")).split())
        payload = {
            "id": f"chatcmpl-{len(self.bodies)}",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": len(tokens),
                "completion_tokens": max(1, out_tokens),
                "total_tokens": len(tokens) + max(1, out_tokens),
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return sse_response(payload, include_usage=include_usage)
        return httpx.Response(200, json=payload)


def sse_chunks(payload: dict[str, Any], *, include_usage: bool = True) -> list[dict[str, Any]]:
    """The chunks a server streams for a chat-completion ``payload``: the role, the content a
    word at a time, each tool call as a name fragment then argument fragments, the finish
    reason, then (if asked) a last chunk with the usage and no choices."""
    choice = payload["choices"][0]
    message = choice["message"]
    base = {"id": payload["id"], "object": "chat.completion.chunk", "model": payload["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant"})]
    words = str(message.get("content") or "").split(" ")
    for i, word in enumerate(words if message.get("content") else []):
        out.append(chunk({"content": word if i == 0 else " " + word}))
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        head = {"index": index, "id": call["id"], "type": "function"}
        out.append(chunk({"tool_calls": [{**head, "function": {"name": function["name"]}}]}))
        arguments = function["arguments"]
        halves = (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :])
        out.extend(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            for part in halves
        )
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append({**base, "choices": [], "usage": payload["usage"]})
    return out


def sse_response(payload: dict[str, Any], *, include_usage: bool = True) -> httpx.Response:
    """``payload`` as a server-sent-events response, ``data: [DONE]`` last."""
    events = [
        f"data: {json.dumps(c)}\n\n" for c in sse_chunks(payload, include_usage=include_usage)
    ]
    body = "".join(events) + "data: [DONE]\n\n"
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})
