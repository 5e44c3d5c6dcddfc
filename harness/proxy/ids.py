"""Call ids the proxy mints for the calls of a window it flattened: tamper-evident, stateless.

A flattened window goes to the client as one assistant message whose parallel ``tool_calls``
carry minted ids. Each id says which window it belongs to, its place in the window, the
window's size and the id the upstream gave the call (what the serial transcript holds)::

    hx.<window>.<index>.<n>.<upstream id, base64url>.<mac>

``mac`` is a keyed hash (HMAC-SHA256, truncated to 128 bits) of all of that *and* the call's
tool name and the canonical JSON of its arguments (:func:`~harness.messages.canonical_arguments`,
the one answer to "is this the same call?") under a
per-server secret, so when the client sends the window back the proxy recognises its own
windows without keeping them, and a client cannot forge one or edit a call inside one: an id
that does not verify is not the proxy's, and the message it is in passes through untouched.
A client that only re-serialises the arguments (another key order, whitespace, ``1.0`` for
``1``) has not edited them: the id still verifies.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from harness.messages import ToolCall, canonical_arguments

__all__ = ("CallIds", "MintedId", "canonical_arguments")

PREFIX = "hx"
_MAC_BYTES = 16
_VERDICTS_KEPT = 8192


@dataclass(frozen=True)
class MintedId:
    """What a verified minted id says."""

    window: str
    index: int
    n: int
    upstream_id: str


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def _unb64(text: str) -> str:
    padded = text + "=" * (-len(text) % 4)
    return base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8")


class CallIds:
    """Mints and verifies window call ids under ``secret`` (default: random per server, so a
    restarted proxy no longer recognises old windows: they pass through)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(32)
        #: Verdicts already reached, by (id, name, arguments): a client resends its whole
        #: history every turn, so each window's ids would be verified again on every request.
        self._verdicts: OrderedDict[tuple[str, str, str], MintedId | None] = OrderedDict()

    def window_key(self, conversation: str, calls: Sequence[ToolCall]) -> str:
        """A short key naming one window: keyed by the conversation and its calls' ids."""
        text = "\x1f".join([conversation, *(c.id for c in calls)])
        return hmac.new(self._secret, text.encode("utf-8"), hashlib.sha256).hexdigest()[:16]

    def _mac(self, body: str, call: ToolCall) -> str:
        arguments = canonical_arguments(call.arguments)
        message = "\x1f".join((body, call.name, arguments)).encode("utf-8", "surrogatepass")
        digest = hmac.new(self._secret, message, hashlib.sha256).digest()[:_MAC_BYTES]
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def mint(self, window: str, index: int, n: int, call: ToolCall) -> str:
        """The id the client sees for ``call``, the ``index``-th of ``n`` in ``window``."""
        body = f"{PREFIX}.{window}.{index}.{n}.{_b64(call.id)}"
        return f"{body}.{self._mac(body, call)}"

    @staticmethod
    def looks_minted(call_id: str) -> bool:
        """Shaped like a minted id (not yet verified)."""
        return call_id.startswith(PREFIX + ".") and call_id.count(".") == 5

    def verify(self, call: ToolCall) -> MintedId | None:
        """What ``call``'s id says, if the proxy minted it for this call (the same tool, the
        same arguments by value); else None."""
        if not self.looks_minted(call.id):
            return None
        key = (call.id, call.name, call.arguments)
        if key in self._verdicts:
            self._verdicts.move_to_end(key)
            return self._verdicts[key]
        verdict = self._verify(call)
        self._verdicts[key] = verdict
        if len(self._verdicts) > _VERDICTS_KEPT:
            self._verdicts.popitem(last=False)
        return verdict

    def _verify(self, call: ToolCall) -> MintedId | None:
        body, _, mac = call.id.rpartition(".")
        expected = self._mac(body, call)
        if not hmac.compare_digest(mac.encode("ascii", "replace"), expected.encode("ascii")):
            return None
        _, window, index, n, encoded = body.split(".")
        try:
            return MintedId(window, int(index), int(n), _unb64(encoded))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
