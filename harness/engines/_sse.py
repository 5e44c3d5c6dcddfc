"""Server-sent events of an OpenAI-compatible ``/v1/chat/completions`` stream.

:func:`events` turns the response's lines into the JSON payloads of its ``data:`` events
(until ``data: [DONE]``); :class:`ChatStream` folds those chunks (text deltas, tool-call
fragments by index, the finish reason, the final ``usage`` chunk that
``stream_options.include_usage`` asks for) back into the body a non-streaming request would
have returned, so the engine parses both the same way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.errors import EngineRequestError

__all__ = ("ChatStream", "events")


async def events(lines: AsyncIterator[str], url: str) -> AsyncGenerator[dict[str, Any], None]:
    """The JSON payload of every ``data:`` event of an SSE body, until ``[DONE]`` or the end.
    Comments (``:``), ``event:``/``id:``/``retry:`` fields and blank keep-alives are skipped;
    a multi-line ``data`` is joined with newlines, as the SSE specification says."""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r")
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line or not data:
            continue  # a comment, another field, or a blank line with no event pending
        payload, data = "\n".join(data), []
        if payload.strip() == "[DONE]":
            return
        yield _parse(payload, url)
    if data and "\n".join(data).strip() != "[DONE]":
        yield _parse("\n".join(data), url)


def _parse(payload: str, url: str) -> dict[str, Any]:
    try:
        chunk = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise EngineRequestError(
            f"{url} streamed an event that is not JSON ({exc.msg}): {payload[:200]!r}"
        ) from exc
    if not isinstance(chunk, dict):
        raise EngineRequestError(f"{url} streamed {chunk!r}, not an object.")
    error = chunk.get("error")
    if error:
        message = error.get("message") if isinstance(error, Mapping) else error
        raise EngineRequestError(f"{url} failed the request mid-stream: {message}")
    return chunk


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class ChatStream:
    """Accumulates a chat-completion stream; :meth:`add` returns each chunk's text delta."""

    id: str = ""
    text: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Mapping[str, Any] | None = None
    chunks: int = 0

    def add(self, chunk: Mapping[str, Any]) -> str:
        self.chunks += 1
        self.id = self.id or str(chunk.get("id") or "")
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            return ""
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta") or {}
        for raw in delta.get("tool_calls") or ():
            if isinstance(raw, Mapping):
                self._call_fragment(raw)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text.append(content)
            return content
        return ""

    def _call_fragment(self, raw: Mapping[str, Any]) -> None:
        index = int(raw.get("index", len(self.calls)))
        call = self.calls.setdefault(index, _Call())
        call.id = call.id or str(raw.get("id") or "")
        function = raw.get("function") or {}
        if function.get("name"):
            call.name += str(function["name"])
        if function.get("arguments"):
            call.arguments.append(str(function["arguments"]))

    def body(self) -> dict[str, Any]:
        """The ``/chat/completions`` body the stream stands for."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_{index}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                }
                for index, call in sorted(self.calls.items())
            ]
        body: dict[str, Any] = {
            "id": self.id,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
        }
        if self.usage is not None:
            body["usage"] = dict(self.usage)
        return body
