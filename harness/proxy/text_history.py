"""Windows a client wrote back as text: recognised and restored to the serial form, or passed
on with the proxy's ids taken out and a warning.

Some agent loops keep their history as text rather than as ``tool_calls`` and tool messages.
smolagents' ``ToolCallingAgent`` writes each step as one assistant message — its
``Tool call <id>: calling '<name>' with arguments: <args>`` lines, then ``Calling tools:``
and the Python ``repr`` of the step's calls (``[{'id': ..., 'type': 'function', 'function':
{'name': ..., 'arguments': {...}}}]``) — and one user message, ``Observation:`` and each
call's result on its own line, the calls and the results ordered by call id. A flattened
window comes back that way as one step holding all its calls, with the proxy's minted ids.

:func:`restore_text` finds every message that holds a minted id (:mod:`harness.proxy.ids`):

- **recognised** (:data:`CALLING`): the listing's calls all verify (tool and argument values)
  and are one whole window, and the next message is ``Observation:`` with one line per call.
  The step becomes what the serial run's client would have written, one step per call in
  emitted order: its own ``Tool call`` line and a one-call listing, with the upstream's id,
  then ``Observation:`` and its result. Any other text of the step stays with its first call.
- **a ReAct transcript** (:data:`ACTION`, no ids): one assistant message whose
  ``Action: <tool>`` / ``Action Input: <arguments>`` blocks are the calls of a stored window
  (:meth:`~harness.proxy.store.WindowStore.find`: tools and argument values, any order),
  then one ``Observation:`` per action: restored as one action and its observation per step,
  in emitted order, the text before the first action kept with it. One whose observations
  cannot be split is passed on as sent and reported.
- **not recognised** (results that span lines, another text form, a window cut or edited):
  the message is passed on as sent except that every minted id in it is replaced by the
  upstream's own id (the upstream never sees the proxy's ids), and reported
  (:class:`~harness.proxy.restore.Unrestored`, reason ``text``: the warning header, a log
  line and a ledger record).

Either way the conversation waiting for that window's results is released at once (its
client will not send them as tool messages), and the request is served serially: a text
history cannot hold a window's withheld results as arm F shows them, so flattening would no
longer send the upstream what the serial client would.
"""

from __future__ import annotations

import ast
import base64
import binascii
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.messages import Message, ToolCall, call_key
from harness.proxy.ids import CallIds, MintedId
from harness.proxy.restore import Unrestored
from harness.proxy.store import WindowStore

__all__ = (
    "ACTION",
    "CALLING",
    "MINTED",
    "OBSERVATION",
    "OBSERVED",
    "TextRestoration",
    "restore_text",
)

#: A minted id anywhere in text: ``hx.<window>.<index>.<n>.<upstream id>.<mac>``.
MINTED = re.compile(r"hx\.[0-9a-f]{16}\.\d{1,4}\.\d{1,4}\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]{22}")
#: What precedes a step's listing of calls (smolagents).
CALLING = "Calling tools:\n"
#: What precedes a step's results (smolagents).
OBSERVATION = "Observation:\n"
#: One ReAct action: ``Action: <tool>`` and the ``Action Input: <arguments>`` after it.
ACTION = re.compile(
    r"^Action:[ \t]*(?P<name>[^\n]+)\nAction Input:[ \t]*(?P<input>.*?)"
    r"(?=\n(?:Action|Observation|Thought):|\Z)",
    re.MULTILINE | re.DOTALL,
)
#: Where one ReAct observation starts.
OBSERVED = re.compile(r"^Observation:[ \t]*", re.MULTILINE)
#: Longest listing parsed (characters): a longer one is not recognised.
_MAX_LISTING = 1_000_000


@dataclass
class TextRestoration:
    """The history with every text window handled: ``windows`` (the keys of those restored),
    ``unrestored`` (those passed on, ids replaced), ``released`` (every window key seen in
    text: their waiting conversations are released)."""

    messages: list[Message]
    windows: list[str] = field(default_factory=list)
    unrestored: list[Unrestored] = field(default_factory=list)

    @property
    def released(self) -> list[str]:
        return [*self.windows, *(u.window for u in self.unrestored)]


def restore_text(
    messages: Sequence[Message], ids: CallIds, store: WindowStore | None = None
) -> TextRestoration:
    """``messages`` with every window written as text restored or scrubbed (see the module
    docstring); a history without minted ids or a stored window's actions in its text comes
    back as it is."""
    out = TextRestoration([])
    at = 0
    while at < len(messages):
        message = messages[at]
        text = _text(message)
        following = messages[at + 1] if at + 1 < len(messages) else None
        if text is not None and store is not None and not MINTED.search(text):
            react = _react_step(message, text, following, store)
            if isinstance(react, tuple):
                out.messages.extend(react[0])
                out.windows.append(react[1])
                at += 2
                continue
            if react is not None:
                out.messages.append(message)
                _report(
                    out,
                    react,
                    "in a form this proxy does not restore (its results are "
                    "not one 'Observation:' per action)",
                    scrubbed=False,
                )
                at += 1
                continue
        if text is None or not MINTED.search(text):
            out.messages.append(message)
            at += 1
            continue
        restored = _restore_step(message, text, following, ids)
        if restored is not None:
            serial, key = restored
            out.messages.extend(serial)
            out.windows.append(key)
            at += 2
            continue
        out.messages.append(_with_text(message, _scrubbed(text)))
        _report(
            out,
            _window_of(text),
            "in a form this proxy does not restore (it restores smolagents' 'Calling tools:' "
            "/ 'Observation:' steps with one result line per call, and ReAct 'Action:' / "
            "'Observation:' steps with one observation per action)",
            scrubbed=True,
        )
        at += 1
    return out


def _report(out: TextRestoration, key: str, why: str, *, scrubbed: bool) -> None:
    if key in {u.window for u in out.unrestored}:
        return
    ids = ", the proxy's ids replaced by the upstream's," if scrubbed else ""
    out.unrestored.append(
        Unrestored(
            key,
            "text",
            f"window {key} came back written as text {why}; it was passed on as sent{ids} "
            "and served serially",
        )
    )


def _react_step(
    message: Message, text: str, following: Message | None, store: WindowStore
) -> tuple[list[Message], str] | str | None:
    """One ReAct step holding a whole stored window's actions: its serial steps and the
    window's key; only the key when its observations cannot be split (one per action);
    None when it is no window of this proxy's."""
    if message.get("role") != "assistant" or message.get("tool_calls"):
        return None
    actions = list(ACTION.finditer(text))
    if len(actions) < 2:
        return None
    calls = [(a.group("name").strip(), a.group("input").strip()) for a in actions]
    key = store.find(calls)
    if key is None:
        return None
    if following is None or following.get("role") not in ("user", "tool"):
        return key
    observed = _text(following)
    parts = OBSERVED.split(observed) if observed is not None else []
    if len(parts) != len(actions) + 1 or parts[0].strip():
        return key
    pending = store.get(key)
    emitted = list(zip(pending.names, pending.arguments, strict=True)) if pending else []
    place = {call_key(n, a): i for i, (n, a) in enumerate(emitted)}
    order = sorted(
        range(len(actions)),
        key=lambda j: place.get(call_key(*calls[j]), j),
    )
    lead = text[: actions[0].start()]
    marks = OBSERVED.findall(observed or "")
    serial: list[Message] = []
    for step, j in enumerate(order):
        action = actions[j].group(0).rstrip("\n")
        serial.append(_with_text(message, (lead if step == 0 else "") + action))
        serial.append(_with_text(following, marks[j] + parts[j + 1].rstrip("\n")))
    return serial, key


def _restore_step(
    message: Message, text: str, following: Message | None, ids: CallIds
) -> tuple[list[Message], str] | None:
    """One smolagents step holding a whole window, as its serial steps (or None)."""
    if message.get("role") != "assistant" or message.get("tool_calls"):
        return None
    where = text.rfind(CALLING)
    if where < 0:
        return None
    listing = text[where + len(CALLING) :].strip()
    parsed = _listing(listing)
    if parsed is None:
        return None
    items, spelled = parsed
    verified = _verified(items, ids)
    if verified is None:
        return None
    results = _results(following, len(items))
    if results is None:
        return None
    assert following is not None
    prefix, separator = text[:where].rstrip(), text[:where][len(text[:where].rstrip()) :]
    lines = prefix.split("\n") if prefix else []
    own = {
        m.index: _own_line(lines, str(item["id"])) for item, m in zip(items, verified, strict=True)
    }
    rest = "\n".join(line for line in lines if line not in own.values())
    order = sorted(range(len(items)), key=lambda j: verified[j].index)
    serial: list[Message] = []
    for step, j in enumerate(order):
        item, minted = items[j], verified[j]
        upstream = minted.upstream_id
        line = own[minted.index]
        head = [rest] if step == 0 and rest else []
        if line is not None:
            head.append(line.replace(str(item["id"]), upstream))
        one = [{**item, "id": upstream}]
        listing_text = json.dumps(one, ensure_ascii=False) if spelled == "json" else repr(one)
        said = "\n".join(head)
        serial.append(
            _with_text(message, f"{said}{separator if said else ''}{CALLING}{listing_text}")
        )
        serial.append(_with_text(following, OBSERVATION + results[j]))
    return serial, verified[0].window


def _listing(listing: str) -> tuple[list[dict[str, Any]], str] | None:
    """The listed calls and how they were spelled (``repr`` or ``json``), if a list of
    ``{'id', 'function': {'name', 'arguments'}}``."""
    if not listing.startswith("[") or len(listing) > _MAX_LISTING:
        return None
    value: Any
    spelled = "repr"
    try:
        value = ast.literal_eval(listing)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        try:
            value, spelled = json.loads(listing), "json"
        except (ValueError, RecursionError):
            return None
    if not isinstance(value, list) or not value:
        return None
    for item in value:
        function = item.get("function") if isinstance(item, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(item.get("id"), str)
            or not isinstance(function.get("name"), str)
        ):
            return None
    return value, spelled


def _verified(items: list[dict[str, Any]], ids: CallIds) -> list[MintedId] | None:
    """Each listed call's verified id, when they are one whole window (in any order)."""
    verified = []
    for item in items:
        function = item["function"]
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            try:
                arguments = json.dumps(arguments, ensure_ascii=False)
            except (TypeError, ValueError):
                return None
        minted = ids.verify(ToolCall(item["id"], function["name"], arguments))
        if minted is None:
            return None
        verified.append(minted)
    first = verified[0]
    if any(m.window != first.window or m.n != first.n for m in verified):
        return None
    if sorted(m.index for m in verified) != list(range(first.n)):
        return None
    return verified


def _results(message: Message | None, n: int) -> list[str] | None:
    """The ``Observation:`` message's results, one line per call, in listing order."""
    if message is None or message.get("role") not in ("user", "tool"):
        return None
    text = _text(message)
    if text is None or not text.startswith(OBSERVATION):
        return None
    lines = text[len(OBSERVATION) :].split("\n")
    return lines if len(lines) == n else None


def _own_line(lines: Sequence[str], call_id: str) -> str | None:
    for line in lines:
        if line.startswith(f"Tool call {call_id}:"):
            return line
    return None


def _upstream_id(minted: str) -> str | None:
    encoded = minted.split(".")[4]
    try:
        padded = encoded + "=" * (-len(encoded) % 4)
        return base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None


def _scrubbed(text: str) -> str:
    """``text`` with every minted id replaced by the upstream id it carries."""
    return MINTED.sub(lambda m: _upstream_id(m.group(0)) or m.group(0), text)


def _window_of(text: str) -> str:
    found = MINTED.search(text)
    return found.group(0).split(".")[1] if found else ""


def _text(message: Message) -> str | None:
    """A message's text (a string, or text parts joined); None for other content."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        for p in content
    ):
        return "".join(p["text"] for p in content)
    return None


def _with_text(message: Message, text: str) -> Message:
    """``message`` with ``text`` as its content, in the shape it had (a string, or one text
    part)."""
    if isinstance(message.get("content"), list):
        return {**message, "content": [{"type": "text", "text": text}]}
    return {**message, "content": text}
