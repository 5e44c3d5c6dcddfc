"""The OpenAI Chat Completions API (``POST /v1/chat/completions``) as a
:class:`~harness.proxy.wire.WireApi`: the proxy's internal form, so every translation is the
identity — the request checked by its typed model (:class:`~harness.proxy.models.ChatBody`)
and forwarded as the client sent it, the answer and its stream chunks as they are, errors in
OpenAI's shape. It is served by the same route
as the other two APIs (:func:`~harness.proxy.wire.wire_endpoint`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from harness.proxy.models import ChatBody, chat_tool_choice, refuse_unknown, validated
from harness.proxy.protocol import ChatRequest, chat_request, error_body, stream_chunks

__all__ = ("ChatApi",)


class ChatApi:
    """Chat Completions as a :class:`~harness.proxy.wire.WireApi`."""

    name = "chat"

    def parse(self, body: Any, *, max_messages: int) -> ChatRequest:
        checked = validated(ChatBody, body)
        refuse_unknown(checked)
        choice = None if checked.tool_choice is None else chat_tool_choice(checked.tool_choice)
        return chat_request(body, tool_choice=choice, max_messages=max_messages)

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
