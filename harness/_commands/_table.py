"""The per-arm table ``harness run`` prints (one row per job: turns, calls, windows, tokens,
seconds, whether it met its gold label)."""

from __future__ import annotations

from typing import Any

__all__ = ("render_table",)


def render_table(jobs: list[dict[str, Any]]) -> str:
    head = (
        "arm",
        "turns",
        "calls",
        "windows",
        "discards",
        "prompt",
        "cached",
        "billed",
        "engine s",
        "wall s",
        "ok",
    )
    rows = [head]
    for job in jobs:
        s = job["summary"]
        windows = ",".join(str(len(w["call_ids"])) for w in job["windows"]) or "-"
        rows.append((
            job["label"], str(s.get("turns", 0)), str(s.get("calls", 0)), windows,
            str(s.get("discards", s.get("repairs", 0))), str(s.get("prompt_tokens", 0)), str(s.get("cached_tokens", 0)),
            str(s.get("billed_tokens", 0)), f"{s.get('engine_s', 0.0):.2f}", f"{s.get('wall_s', 0.0):.2f}",
            "yes" if job["success"] else "NO",
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
