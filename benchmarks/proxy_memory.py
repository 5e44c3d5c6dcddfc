"""The proxy's memory under abandoned conversations: RSS against conversations left waiting.

It starts a proxy (``harness.proxy`` under uvicorn, in a child process of its own, over a
small scripted engine that reads three documents in one window, then writes a report) and,
as a client, runs ``--conversations`` conversations each up to the point where the proxy
waits for a result it will never get: the window, its results (the first ``--result-mb``
megabytes, the others a line), then the report call — and the client walks away. After
every ``--every`` conversations it reads the child's resident set size (``VmRSS`` in
``/proc/PID/status``) and prints one line; the last line is a JSON summary (idle RSS, final
RSS, growth). Run it twice to see what the byte budget does::

    python -m benchmarks.proxy_memory                        # the default budget (64 MiB)
    python -m benchmarks.proxy_memory --conversation-mib 100000   # in effect unbounded

The issue's bar: 120 conversations with 3 MB results stay within 150 MB of the idle server.
Linux only (``/proc``); loopback only; the child is stopped when it ends.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ("main", "rss_mib")

_KEYS = ("a", "b", "c")
_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {field: {"type": "string"}},
                "required": [field],
            },
        },
    }
    for name, field in (("read_doc", "key"), ("write_report", "text"))
]


def rss_mib(pid: int) -> float:
    """The resident set size of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


# -- the child: the proxy over a scripted engine ------------------------------------------


def _serve(conversation_mib: float | None) -> int:
    import signal

    import anyio

    # the parent ends this process with SIGTERM when it is done: a quiet exit, not an error
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))

    from harness.engines.base import ClosingContext, GenerationSettings
    from harness.messages import Completion, ToolCall
    from harness.proxy import ProxyConfig, build_app, effects_from_dict
    from harness.proxy.serve import serve
    from harness.skills.manifest import Manifest

    class Survey(ClosingContext):
        """Reads each key, then writes the report, then answers; keeps nothing."""

        name = "survey"

        async def generate(
            self, messages: Sequence[Any], tools: Sequence[Any], settings: GenerationSettings
        ) -> Completion:
            done = sum(len(m.get("tool_calls") or ()) for m in messages)
            if done < len(_KEYS):
                call = ToolCall(f"up_{done}", "read_doc", json.dumps({"key": _KEYS[done]}))
            elif done == len(_KEYS):
                call = ToolCall(f"up_{done}", "write_report", json.dumps({"text": "all read"}))
            else:
                return Completion("done")
            return Completion(None, (call,), finish_reason="tool_calls")

        async def aclose(self) -> None:
            pass

    effects = effects_from_dict(
        {
            "tools": {
                "read_doc": {"read_only": True, "read_targets": "doc:{key}"},
                "write_report": {"write_targets": "report", "read_targets": []},
            }
        }
    )
    manifest = Manifest.from_dict(
        {
            "skills": {
                "survey": {
                    "phases": [
                        {
                            "name": "read",
                            "kind": "fan_out",
                            "tools": ["read_doc"],
                            "slots": len(_KEYS),
                            "args": {"read_doc.key": "model"},
                        },
                        {
                            "name": "report",
                            "kind": "chain",
                            "tools": ["write_report"],
                            "args": {"write_report.text": "model"},
                        },
                    ]
                }
            }
        }
    )
    extra: dict[str, Any] = {}
    if conversation_mib is not None:
        extra["conversations_bytes"] = int(conversation_mib * 1024 * 1024)
    config = ProxyConfig(effects=effects, manifest=manifest, max_body_bytes=64 << 20, **extra)
    app = build_app(Survey(), config)

    def listening(url: str) -> None:
        print(json.dumps({"url": url}), flush=True)

    anyio.run(lambda: serve(app, "127.0.0.1", 0, on_listen=listening))
    return 0


# -- the parent: the client, and the measurements ------------------------------------------


def _conversation(client: Any, index: int, result_bytes: int) -> str:
    """One conversation up to the report call, then abandoned; its last response's arm."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You read documents."},
        {"role": "user", "content": f"Survey a, b and c (conversation {index})."},
    ]
    response = client.post("/chat/completions", json={"messages": messages, "tools": _TOOLS})
    response.raise_for_status()
    message = response.json()["choices"][0]["message"]
    messages.append(message)
    for i, call in enumerate(message["tool_calls"]):
        text = "x" * result_bytes if i == 0 else f"text of call {i}"
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    response = client.post("/chat/completions", json={"messages": messages, "tools": _TOOLS})
    response.raise_for_status()
    return str(response.headers.get("x-harness-window", "?"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.proxy_memory",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "--conversations", type=int, default=120, help="conversations abandoned (default 120)"
    )
    parser.add_argument(
        "--result-mb", type=float, default=3.0, help="size of each one's big result (default 3)"
    )
    parser.add_argument(
        "--conversation-mib",
        type=float,
        default=None,
        help="the proxy's byte budget for waiting conversations (default: the proxy's own, "
        "64 MiB; 100000: in effect unbounded, what the proxy did before it had one)",
    )
    parser.add_argument("--every", type=int, default=10, help="print RSS every N (default 10)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return _serve(args.conversation_mib)
    import httpx

    command = [sys.executable, "-m", "benchmarks.proxy_memory", "--serve"]
    if args.conversation_mib is not None:
        command += ["--conversation-mib", str(args.conversation_mib)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        url = json.loads(child.stdout.readline())["url"]
        with httpx.Client(base_url=url, timeout=120.0) as client:
            _conversation(client, -1, 100)  # warm up: imports, first windows
            time.sleep(0.5)
            idle = rss_mib(child.pid)
            print(f"idle: {idle:.1f} MiB", flush=True)
            rows = []
            result_bytes = int(args.result_mb * 1_000_000)
            for i in range(1, args.conversations + 1):
                _conversation(client, i, result_bytes)
                if i % args.every == 0 or i == args.conversations:
                    rss = rss_mib(child.pid)
                    rows.append({"conversations": i, "rss_mib": round(rss, 1)})
                    print(f"{i:4d} abandoned: {rss:7.1f} MiB (+{rss - idle:.1f})", flush=True)
        final = rows[-1]["rss_mib"]
        print(
            json.dumps(
                {
                    "conversations": args.conversations,
                    "result_mb": args.result_mb,
                    "conversation_mib": args.conversation_mib,
                    "idle_rss_mib": round(idle, 1),
                    "final_rss_mib": final,
                    "growth_mib": round(final - idle, 1),
                    "rows": rows,
                }
            )
        )
    finally:
        child.terminate()
        child.wait(timeout=30)
    return 0


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
