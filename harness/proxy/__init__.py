"""The OpenAI-compatible flattening proxy: arm F under an unmodified agent loop.

An agent loop that talks to ``/v1/chat/completions`` points its ``base_url`` (or its
``http_client``) at the proxy. When the model's reply is a call the certifier admits into a
window, the proxy keeps generating (withheld markers standing in for the results) until the
window closes and returns the whole window as one assistant message with parallel
``tool_calls``; the client's loop runs them (concurrently, as agent frameworks do) and sends
the results back; the proxy puts the window back in the serial form the model saw and
generates the absorb turn. The model never sees a parallel message; the client makes two
round trips per window instead of n + 1. Uncertifiable traffic passes through (arm S).

Modules: :mod:`~harness.proxy.app` (the ASGI app, :func:`build_app`), :mod:`~harness.proxy.config`
(:class:`ProxyConfig`), :mod:`~harness.proxy.wire` (the one request path of the three APIs),
:mod:`~harness.proxy.limits` (the edge's limits), :mod:`~harness.proxy.models` (the typed
request models of the three APIs), :mod:`~harness.proxy.upstream`
(``tool_choice``), :mod:`~harness.proxy.text_history` (windows written back as text),
:mod:`~harness.proxy.conversation` (a conversation is one run of the loop, arm F, with the
client as its executor),
:mod:`~harness.proxy.restore` (serial restoration), :mod:`~harness.proxy.ids` (minted,
tamper-evident call ids), :mod:`~harness.proxy.store` (the bounded store),
:mod:`~harness.proxy.effects_file` (``--effects FILE``), :mod:`~harness.proxy.protocol` (the
wire format), :mod:`~harness.proxy.client` (the in-process deployment) and
:mod:`~harness.proxy.serve` (``harness serve`` under uvicorn). Needs the ``serve`` extra.
"""

from __future__ import annotations

from harness.proxy.app import ProxyService, build_app
from harness.proxy.client import IN_PROCESS_BASE_URL, in_process_client
from harness.proxy.config import ProxyConfig
from harness.proxy.effects_file import effects_from_dict, load_effects, toolset_for
from harness.proxy.ids import CallIds

__all__ = (
    "IN_PROCESS_BASE_URL",
    "CallIds",
    "ProxyConfig",
    "ProxyService",
    "build_app",
    "effects_from_dict",
    "in_process_client",
    "load_effects",
    "toolset_for",
)
