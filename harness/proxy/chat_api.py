"""The OpenAI Chat Completions API (``POST /v1/chat/completions``) as a
:class:`~harness.proxy.wire.WireApi`: the proxy's internal form, so every translation is the
identity — the request checked by :func:`~harness.proxy.protocol.parse_request`, the answer
and its stream chunks as they are, errors in OpenAI's shape. It is served by the same route
as the other two APIs (:func:`~harness.proxy.wire.wire_endpoint`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from harness.proxy.protocol import ChatRequest, error_body, parse_request, stream_chunks

__all__ = ("ChatApi",)


class ChatApi:
    """Chat Completions as a :class:`~harness.proxy.wire.WireApi`."""

    name = "chat"

    def parse(self, body: Any, *, max_messages: int) -> ChatRequest:
        return parse_request(body, max_messages=max_messages)

    def error(self, message: str, *, status: int, kind: str, param: str | None) -> dict[str, Any]:
        return error_body(message, kind=kind, param=param)

    def response(self, request: ChatRequest, chat: Mapping[str, Any]) -> dict[str, Any]:
        return dict(chat)

    def events(self, request: ChatRequest, chat: Mapping[str, Any]) -> Iterator[str]:
        return stream_chunks(chat, include_usage=request.include_usage)

    async def translate(
        self, request: ChatRequest, chunks: AsyncIterator[str]
    ) -> AsyncIterator[str]:
        async for chunk in chunks:
            yield chunk
