"""The transcript of a run: the chat the engine sees, in the OpenAI message format.

It is what the serial arm would see, message for message, except that while a window is open
each of its calls' tool messages holds the window's marker; :meth:`Transcript.fill` puts the
result in its place when the window is revealed (the absorb turn).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.engines.base import Completion, Message, ToolCall

__all__ = ("Transcript",)


class Transcript:
    """The messages of one run and where each call's result sits among them."""

    def __init__(self, system: str, prompt: str) -> None:
        self.messages: list[Message] = [
            {"role": "system", "content": system},
            {"role": "user", "content": prompt},
        ]
        self._result_at: dict[str, int] = {}

    @property
    def tool_messages(self) -> int:
        """Tool messages so far (results and markers: every call emitted and kept)."""
        return sum(1 for m in self.messages if m["role"] == "tool")

    def append_calls(self, completion: Completion, calls: Sequence[ToolCall]) -> None:
        """The assistant message carrying ``calls`` (of ``completion``)."""
        message = completion.to_message()
        message["tool_calls"] = [c.to_openai() for c in calls]
        self.messages.append(message)

    def append_result(self, call: ToolCall, content: str) -> None:
        """``call``'s tool message: its result, or a marker standing in for it."""
        self._result_at[call.id] = len(self.messages)
        self.messages.append(
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
        )

    def fill(self, call: ToolCall, content: str) -> None:
        """Replace ``call``'s marker by its result."""
        at = self._result_at[call.id]  # a new dict: never mutate a message an engine holds
        self.messages[at] = {**self.messages[at], "content": content}

    def append_answer(self, completion: Completion) -> None:
        self.messages.append(completion.to_message())

    def append_cut_off(self, completion: Completion, limit: int) -> None:
        """A reply cut at ``limit`` tokens, and the note that tells the model so."""
        self.messages.append(completion.to_message())
        self.messages.append(
            {
                "role": "user",
                "content": (
                    f"Your reply was cut off at {limit} tokens. "
                    "Reply with one tool call or a short final answer."
                ),
            }
        )
