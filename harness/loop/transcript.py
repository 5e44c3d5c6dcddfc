"""The transcript of a run: the chat the engine sees, in the OpenAI message format.

It is what the serial arm would see, message for message, except that while a window is open
each of its calls' tool messages holds the window's marker; :meth:`Transcript.fill` puts the
result in its place when the window is revealed (the absorb turn).

A run may start from an existing history (``Task.history``, already normalised by
:mod:`harness.loop.openai_format`) instead of a system prompt and a user prompt; its messages come
first and are never changed, and :attr:`Transcript.history_length` says where the run's own
messages begin. An empty ``system`` adds no system message (the proxy keeps a client's history
as the client sent it).

Messages the loop adds for the model alone — a reply cut off at ``max_tokens`` and the note
that tells the model so — are :attr:`Transcript.internal`: a client driving the run from
outside (the proxy's) never sees them, and :meth:`Transcript.client_view` leaves them out.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.loop.openai_format import call_ids
from harness.messages import Completion, Message, ToolCall

__all__ = ("Transcript",)


class Transcript:
    """The messages of one run and where each call's result sits among them."""

    def __init__(self, system: str, prompt: str, history: Sequence[Message] = ()) -> None:
        if history:
            self.messages: list[Message] = [dict(m) for m in history]
            if system and self.messages[0]["role"] != "system":
                self.messages.insert(0, {"role": "system", "content": system})
            self.history_length = len(self.messages)
            if prompt:
                self.messages.append({"role": "user", "content": prompt})
        else:
            self.messages = [{"role": "system", "content": system}] if system else []
            self.messages.append({"role": "user", "content": prompt})
            self.history_length = 0
        #: Call ids the history already uses (the run's own calls get others).
        self.taken_ids = call_ids(self.messages)
        self._result_at: dict[str, int] = {}
        #: Indices of the messages the loop added for the model alone (see the module docstring).
        self.internal: set[int] = set()

    @property
    def tool_messages(self) -> int:
        """Tool messages of this run so far (results and markers: every call emitted and
        kept; a history's tool messages are not counted)."""
        return sum(1 for m in self.messages[self.history_length :] if m["role"] == "tool")

    def emitted_calls(self) -> list[ToolCall]:
        """Every call this run put in the context so far (a history's calls not counted),
        withheld ones included."""
        return [
            ToolCall.from_openai(raw)
            for m in self.messages[self.history_length :]
            if m["role"] == "assistant"
            for raw in m.get("tool_calls") or []
        ]

    def visible_results(self, marker: str) -> tuple[str, ...]:
        """The result texts in the context now (markers of withheld results left out): what
        the turn about to be handled could see, for provenance."""
        return tuple(
            str(m.get("content", ""))
            for m in self.messages
            if m["role"] == "tool" and m.get("content") != marker
        )

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
        """A reply cut at ``limit`` tokens, and the note that tells the model so (both
        :attr:`internal`)."""
        self.internal.update((len(self.messages), len(self.messages) + 1))
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

    def client_view(self) -> list[Message]:
        """The messages without the :attr:`internal` ones: what a client driving the run
        from outside holds (results in place of markers once it has them)."""
        return [m for i, m in enumerate(self.messages) if i not in self.internal]
