"""Serial restoration: the client's history with every flattened window put back in the serial
form the model saw.

The client holds a window as one assistant message with parallel ``tool_calls`` (minted ids,
:mod:`harness.proxy.ids`) followed by one tool message per call, in any order. Before the
upstream sees the history again, each such window becomes what arm S would have sent: call,
result, call, result ... in emitted order, each assistant message the client's own message
with one call (its upstream id back) and each tool message the client's own with the upstream
id, so the model never sees a parallel message and the prefix cache stays warm.

A window is restored only when it is exactly the proxy's: every call id verifies, the calls
are the window's ``n`` calls in order, and the tool messages right after it answer each call
once and nothing else. Anything else — ids that do not verify, a window the client split or
merged, results missing or extra — is left untouched and reported as a warning (the caller
says so in a response header): never a wrong rewrite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.engines.base import Message, ToolCall
from harness.proxy.ids import CallIds, MintedId
from harness.proxy.store import WindowStore

__all__ = ("Restoration", "RestoredWindow", "restore_serial")


@dataclass(frozen=True)
class RestoredWindow:
    """One window found in the history: its key, its calls (upstream ids) and the client's
    result texts, in emitted order; ``last``: nothing follows its results in the history."""

    key: str
    calls: tuple[ToolCall, ...]
    results: tuple[str, ...]
    last: bool


@dataclass
class Restoration:
    """The serial history, the windows restored and the warnings about what was not."""

    messages: list[Message]
    windows: list[RestoredWindow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def window_ids(self) -> frozenset[str]:
        """The upstream ids of every restored window's calls."""
        return frozenset(c.id for w in self.windows for c in w.calls)


def restore_serial(
    messages: Sequence[Message], ids: CallIds, store: WindowStore | None = None
) -> Restoration:
    """``messages`` with every verified window in serial form (see the module docstring)."""
    out = Restoration([])
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
        restored = _restore_one(message, messages[at + 1 : results_end], ids, store, out)
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
) -> tuple[list[Message], RestoredWindow] | None:
    calls = []
    for raw in message["tool_calls"]:
        if not isinstance(raw, dict):
            return None
        calls.append(ToolCall.from_openai(raw))
    if not any(ids.looks_minted(c.id) for c in calls):
        return None  # not ours: untouched, no warning
    verified: list[MintedId] = []
    for call in calls:
        minted = ids.verify(call)
        if minted is None:
            out.warnings.append(
                f"call id {call.id[:40]!r} is not one this proxy minted for that call (forged, "
                "edited, or minted by another server); its message was passed through as sent"
            )
            return None
        verified.append(minted)
    key, n = verified[0].window, verified[0].n
    if (
        any(m.window != key or m.n != n or m.index != i for i, m in enumerate(verified))
        or len(verified) != n
    ):
        out.warnings.append(
            f"window {key} came back with {len(verified)} of its {n} calls or out of order; "
            "it was passed through as sent"
        )
        return None
    by_id: dict[str, Message] = {}
    for result in results:
        call_id = str(result.get("tool_call_id", ""))
        if call_id in by_id or call_id not in {c.id for c in calls}:
            out.warnings.append(
                f"window {key}: tool result for {call_id[:40]!r} does not match the window's "
                "calls (unknown or repeated id); it was passed through as sent"
            )
            return None
        by_id[call_id] = result
    if len(by_id) != n:
        out.warnings.append(
            f"window {key}: {len(by_id)} of its {n} results came back; it was passed through "
            "as sent"
        )
        return None
    pending = store.get(key) if store is not None else None
    contents = pending.contents if pending is not None and pending.contents else ()
    serial: list[Message] = []
    upstream_calls = []
    texts = []
    for i, (call, minted) in enumerate(zip(calls, verified, strict=True)):
        upstream = ToolCall(minted.upstream_id, call.name, call.arguments)
        upstream_calls.append(upstream)
        assistant = {k: v for k, v in message.items() if k != "tool_calls"}
        if contents:
            assistant["content"] = contents[i]
        elif i > 0:
            assistant["content"] = None
        assistant["tool_calls"] = [{**message["tool_calls"][i], "id": upstream.id}]
        serial.append(assistant)
        if call.id in by_id:
            result = by_id[call.id]
            serial.append({**result, "tool_call_id": upstream.id})
            texts.append(_text(result.get("content")))
    return serial, RestoredWindow(key, tuple(upstream_calls), tuple(texts), False)


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
