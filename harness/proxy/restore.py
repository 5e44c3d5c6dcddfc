"""Serial restoration: the client's history with every flattened window put back in the serial
form the model saw.

The client holds a window as one assistant message with parallel ``tool_calls`` (minted ids,
:mod:`harness.proxy.ids`) followed by one tool message per call, in any order. Before the
upstream sees the history again, each such window becomes what arm S would have sent: call,
result, call, result ... in emitted order, each assistant message the client's own message
with one call (its upstream id back) and each tool message the client's own with the upstream
id, so the model never sees a parallel message and the prefix cache stays warm.

A window is recognised by meaning, not by bytes: every call id verifies against the call's
tool and the *value* of its arguments (:func:`~harness.messages.canonical_arguments`), so a
client that re-serialises the arguments (pydantic-ai, LangChain), sends the tool messages in
another order or spells an empty ``content`` its own way still gets its window restored. The
upstream gets its own argument strings back (kept in the store,
:mod:`harness.proxy.store`), and every restored message has the shape the client gives its
other messages: the restored transcript is, byte for byte, what the client would have sent in
a serial run.

Only a real change is refused: ids that do not verify (an argument's value edited, a forged
or foreign id), a window the client split or merged, results missing or extra. That window is
left untouched and reported (:class:`Unrestored`; the caller logs it, counts it in the ledger
and says so in a response header): never a wrong rewrite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.loop.ledger import UnrestoredReason
from harness.messages import Message, ToolCall
from harness.proxy.ids import CallIds, MintedId
from harness.proxy.store import WindowStore

__all__ = ("Restoration", "RestoredWindow", "Unrestored", "restore_serial")

#: Why a window was not restored: ``edited`` (an id does not verify for its call: arguments
#: or tool changed, forged, or minted by another server), ``reshaped`` (calls missing, split
#: or out of order), ``results`` (results missing, unknown or repeated), ``text`` (written
#: back as text in a form :mod:`harness.proxy.text_history` does not restore).
Reason = UnrestoredReason
#: "No key" (the client leaves ``content`` out of an assistant message with calls).
_ABSENT = object()


@dataclass(frozen=True)
class RestoredWindow:
    """One window found in the history: its key, its calls (upstream ids) and the client's
    result texts, in emitted order; ``last``: nothing follows its results in the history."""

    key: str
    calls: tuple[ToolCall, ...]
    results: tuple[str, ...]
    last: bool


@dataclass(frozen=True)
class Unrestored:
    """A window that came back changed and was passed through as sent: its ``window`` key
    (as its ids name it), the ``reason`` and a sentence saying what was wrong."""

    window: str
    reason: Reason
    message: str


@dataclass
class Restoration:
    """The serial history, the windows restored and those that were not."""

    messages: list[Message]
    windows: list[RestoredWindow] = field(default_factory=list)
    unrestored: list[Unrestored] = field(default_factory=list)
    #: Keys of the windows restored from text (:mod:`harness.proxy.text_history`).
    text_windows: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """What was not restored, one sentence per window."""
        return [u.message for u in self.unrestored]


def restore_serial(
    messages: Sequence[Message], ids: CallIds, store: WindowStore | None = None
) -> Restoration:
    """``messages`` with every verified window in serial form (see the module docstring)."""
    out = Restoration([])
    empty = _empty_content(messages)
    at = 0
    while at < len(messages):
        message = messages[at]
        raw_calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not raw_calls or not isinstance(raw_calls, list):
            out.messages.append(message)
            at += 1
            continue
        results_end = at + 1
        while results_end < len(messages) and messages[results_end].get("role") == "tool":
            results_end += 1
        restored = _restore_one(message, messages[at + 1 : results_end], ids, store, out, empty)
        if restored is None:
            out.messages.extend(messages[at:results_end])
        else:
            serial, window = restored
            out.messages.extend(serial)
            out.windows.append(
                RestoredWindow(
                    window.key, window.calls, window.results, results_end == len(messages)
                )
            )
        at = results_end
    return out


def _restore_one(
    message: Message,
    results: Sequence[Message],
    ids: CallIds,
    store: WindowStore | None,
    out: Restoration,
    empty: object,
) -> tuple[list[Message], RestoredWindow] | None:
    calls = []
    for raw in message["tool_calls"]:
        if not isinstance(raw, dict):
            return None
        calls.append(ToolCall.from_openai(raw))
    if not any(ids.looks_minted(c.id) for c in calls):
        return None  # not ours: untouched, no warning
    verified = _verified(calls, ids, out)
    if verified is None:
        return None
    key, n = verified[0].window, verified[0].n
    by_id = _results_by_id(results, calls, key, n, out)
    if by_id is None:
        return None
    pending = store.get(key) if store is not None else None
    contents = pending.contents if pending is not None and pending.contents else ()
    originals = pending.arguments if pending is not None and len(pending.arguments) == n else ()
    serial: list[Message] = []
    upstream_calls = []
    texts = []
    for i, (call, minted) in enumerate(zip(calls, verified, strict=True)):
        arguments = originals[i] if originals else call.arguments
        upstream = ToolCall(minted.upstream_id, call.name, arguments)
        upstream_calls.append(upstream)
        raw = message["tool_calls"][i]
        function = {**raw["function"], "arguments": arguments}
        entry = {**raw, "id": upstream.id, "function": function}
        serial.append(_assistant(message, i, contents, empty, entry))
        result = by_id[call.id]
        serial.append({**result, "tool_call_id": upstream.id})
        texts.append(_text(result.get("content")))
    return serial, RestoredWindow(key, tuple(upstream_calls), tuple(texts), False)


def _verified(calls: Sequence[ToolCall], ids: CallIds, out: Restoration) -> list[MintedId] | None:
    """What each minted id of a window's message says, when every call verifies and the
    window came back whole and in order; else ``None`` (why is noted in ``out``)."""
    verified: list[MintedId] = []
    for call in calls:
        minted = ids.verify(call)
        if minted is None:
            out.unrestored.append(
                Unrestored(
                    _claimed_window(call.id, calls),
                    "edited",
                    f"call id {call.id[:40]!r} is not one this proxy minted for that call "
                    f"({call.name} with these argument values: edited, forged, or minted by "
                    "another server); its message was passed through as sent",
                )
            )
            return None
        verified.append(minted)
    key, n = verified[0].window, verified[0].n
    if (
        any(m.window != key or m.n != n or m.index != i for i, m in enumerate(verified))
        or len(verified) != n
    ):
        out.unrestored.append(
            Unrestored(
                key,
                "reshaped",
                f"window {key} came back with {len(verified)} of its {n} calls or out of "
                "order; it was passed through as sent",
            )
        )
        return None
    return verified


def _results_by_id(
    results: Sequence[Message], calls: Sequence[ToolCall], key: str, n: int, out: Restoration
) -> dict[str, Message] | None:
    """Window ``key``'s tool results by call id, when each of its ``n`` calls has exactly one;
    else ``None`` (why is noted in ``out``)."""
    by_id: dict[str, Message] = {}
    for result in results:
        call_id = str(result.get("tool_call_id", ""))
        if call_id in by_id or call_id not in {c.id for c in calls}:
            out.unrestored.append(
                Unrestored(
                    key,
                    "results",
                    f"window {key}: tool result for {call_id[:40]!r} does not match the "
                    "window's calls (unknown or repeated id); it was passed through as sent",
                )
            )
            return None
        by_id[call_id] = result
    if len(by_id) != n:
        out.unrestored.append(
            Unrestored(
                key,
                "results",
                f"window {key}: {len(by_id)} of its {n} results came back; it was passed "
                "through as sent",
            )
        )
        return None
    return by_id


def _assistant(
    message: Message,
    index: int,
    contents: Sequence[str | None],
    empty: object,
    entry: dict[str, Any],
) -> Message:
    """The window's ``index``-th call as its own assistant message, shaped as the client
    shapes its messages: the client's own fields in its order, the call's text (the first
    call's as the client sent it, the others' from the store) and, for a call without text,
    ``content`` as the client writes an empty one (``empty``; :data:`_ABSENT`: no key)."""
    text: object = message.get("content", _ABSENT)
    if index > 0:
        stored = contents[index] if index < len(contents) else None
        text = stored if stored else empty
    assistant: Message = {}
    if text is not _ABSENT and "content" not in message:
        assistant["content"] = text  # the client wrote no key for the first call
    for k, v in message.items():
        if k == "content":
            if text is not _ABSENT:
                assistant[k] = text
        elif k != "tool_calls":
            assistant[k] = v
    assistant["tool_calls"] = [entry]
    return assistant


def _empty_content(messages: Sequence[Message]) -> object:
    """How the client writes the ``content`` of an assistant message with calls and no text:
    the first such message in the history says (no key: :data:`_ABSENT`; else its value,
    ``None`` or ``""``); with none, ``None`` (what the proxy's own replies carry)."""
    for message in messages:
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        content = message.get("content", _ABSENT)
        if content is _ABSENT or content is None or content == "" or content == []:
            return content
    return None


def _claimed_window(call_id: str, calls: Sequence[ToolCall]) -> str:
    """The window a call id that did not verify claims to belong to (for reports only)."""
    for call in (call_id, *(c.id for c in calls)):
        parts = call.split(".")
        if len(parts) == 6:
            return parts[1]
    return call_id[:40]


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
