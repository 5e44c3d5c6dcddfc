"""``python -m benchmarks.mcp_false_fills``: does a kit pass mean F is safe, on real MCP servers?

For each **declaration** of the reference filesystem and memory servers — the honest effects
files in ``toolsets/mcp/`` and variants a new user plausibly writes (a ``mkdir`` without its
parents, a move that names only its destination, a reader that declares it reads nothing,
per-kind targets on a store that rewrites one file) — two things are measured independently:

1. **false fills**: hand-written windows of calls a user's model plausibly emits together
   (:data:`FS_WINDOWS`, :data:`MEMORY_WINDOWS`, not drawn by the kit) are certified by the
   schema-sound certifier under the declaration; each certified window runs serially (S) on
   a fresh state and then concurrently (F) in every start order, three times each, on fresh
   states; a false fill is a certified window whose concurrent results or final state differ
   from the serial run's (time stamps and temporary names masked, as ``harness certify
   --nondeterministic times --nondeterministic temp-names`` masks them);
2. **the kit's verdict**: ``harness certify --mcp-server`` on the same declaration
   (``--examples``, default 25).

The claim under test: every declaration with a false fill is FALSE in the kit, and the
declarations the kit passes have none. The table prints both; exit status 1 when a
declaration with a false fill passes the kit. ``--json OUT`` writes the rows.
Needs the servers: ``npm ci`` in ``toolsets/mcp`` (``make setup`` does it).
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from harness._concurrency import gather
from harness.certify import Certificate, SchemaSoundDetector
from harness.certkit import check_toolset
from harness.certkit.mcp_server import MCPServer
from harness.messages import ToolCall
from harness.skills.manifest import Phase
from harness.tools import Toolset
from harness.tools.execute import ToolResult, execute_call

MCP_DIR = Path(__file__).resolve().parents[1] / "toolsets" / "mcp"
BIN = MCP_DIR / "node_modules" / ".bin"
NOISE = ("times", "temp-names")
REPEATS = 3

Window = list[tuple[str, dict[str, Any]]]

#: Windows a model plausibly emits together on the filesystem server (the default seed:
#: a.txt, Readme.md, café.txt, notes/b.md, notes/deep/c.txt, empty/).
FS_WINDOWS: list[Window] = [
    [("write_file", {"path": "out/x.txt", "content": "x"}), ("create_directory", {"path": "out"})],
    [("create_directory", {"path": "out/deep"}), ("write_file", {"path": "out/y.txt", "content": "y"})],
    [("read_text_file", {"path": "a.txt"}), ("move_file", {"source": "a.txt", "destination": "z.txt"})],
    [("move_file", {"source": "a.txt", "destination": "z.txt"}), ("read_text_file", {"path": "z.txt"})],
    [("write_file", {"path": "a.txt", "content": "new"}), ("get_file_info", {"path": "a.txt"})],
    [("write_file", {"path": "notes/new.md", "content": "n"}), ("list_directory", {"path": "notes"})],
    [("write_file", {"path": "a.txt", "content": "1"}), ("read_text_file", {"path": "/ROOT/a.txt"})],
    [("write_file", {"path": "café.txt", "content": "1"}), ("read_text_file", {"path": "café.txt"})],
    [("edit_file", {"path": "notes/b.md", "edits": [{"oldText": "beta", "newText": "BETA"}]}),
     ("read_text_file", {"path": "notes/b.md"})],
    [("write_file", {"path": "notes/deep/c.txt", "content": "c2"}), ("directory_tree", {"path": "notes"})],
    [("write_file", {"path": "one.txt", "content": "1"}), ("write_file", {"path": "two.txt", "content": "2"}),
     ("read_text_file", {"path": "Readme.md"})],
    [("search_files", {"path": ".", "pattern": "*.txt"}), ("write_file", {"path": "s.txt", "content": "s"})],
]  # fmt: skip

#: Windows on the memory server (an empty graph at first).
MEMORY_WINDOWS: list[Window] = [
    [("create_entities", {"entities": [{"name": "ada", "entityType": "person", "observations": []}]}),
     ("create_entities", {"entities": [{"name": "bob", "entityType": "person", "observations": []}]})],
    [("create_entities", {"entities": [{"name": "ada", "entityType": "person", "observations": []}]}),
     ("create_relations", {"relations": [{"from": "x", "to": "y", "relationType": "knows"}]})],
    [("create_relations", {"relations": [{"from": "x", "to": "y", "relationType": "knows"}]}),
     ("read_graph", {})],
    [("create_entities", {"entities": [{"name": "ada", "entityType": "person", "observations": []}]}),
     ("delete_relations", {"relations": [{"from": "x", "to": "y", "relationType": "knows"}]})],
]  # fmt: skip


def _tables(name: str) -> dict[str, Any]:
    return tomllib.loads((MCP_DIR / name).read_text(encoding="utf-8"))


def _variant(base: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    change(out["tools"])
    return out


def _set(tool: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(tools: dict[str, Any]) -> None:
        for key, value in fields.items():
            if value is None:
                tools[tool].pop(key, None)
            else:
                tools[tool][key] = value

    return change


def _all(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def change(tools: dict[str, Any]) -> None:
        for c in changes:
            c(tools)

    return change


@dataclass(frozen=True)
class Server:
    name: str
    command: list[str]
    env: dict[str, str]
    windows: list[Window]
    declarations: dict[str, dict[str, Any]]


def servers() -> list[Server]:
    fs = _tables("filesystem.effects.toml")
    mem = _tables("memory.effects.toml")
    return [
        Server(
            "filesystem",
            [str(BIN / "mcp-server-filesystem"), "{root}"],
            {},
            FS_WINDOWS,
            {
                "honest": fs,
                "mkdir without ancestors": _variant(fs, _set("create_directory", ancestors=None)),
                "move names its destination only": _variant(
                    fs, _set("move_file", write_targets="file:{destination}")
                ),
                "file info reads nothing": _variant(fs, _set("get_file_info", read_targets=[])),
                "listing reads nothing": _variant(
                    fs,
                    _all(
                        _set("list_directory", read_targets=[]),
                        _set("directory_tree", read_targets=[]),
                        _set("search_files", read_targets=[]),
                    ),
                ),
                "paths without identity": _variant(
                    fs,
                    _all(
                        *(
                            _set(name, identity=None)
                            for name, table in fs["tools"].items()
                            if "identity" in table
                        )
                    ),
                ),
            },
        ),
        Server(
            "memory",
            [str(BIN / "mcp-server-memory")],
            {"MEMORY_FILE_PATH": "{root}/memory.json"},
            MEMORY_WINDOWS,
            {
                "honest": mem,
                "targets per kind of record": _variant(
                    mem,
                    _all(
                        _set("create_entities", write_targets="entity:{entities}"),
                        _set("add_observations", write_targets="entity:{observations}"),
                        _set("delete_entities", write_targets="entity:{entityNames}"),
                        _set("delete_observations", write_targets="entity:{deletions}"),
                        _set("create_relations", write_targets="relation:{relations}"),
                        _set("delete_relations", write_targets="relation:{relations}"),
                    ),
                ),
                "readers read nothing": _variant(
                    mem,
                    _all(
                        _set("read_graph", read_targets=[]),
                        _set("search_nodes", read_targets=[]),
                        _set("open_nodes", read_targets=[]),
                    ),
                ),
            },
        ),
    ]


def _calls(window: Window, root: Path) -> list[ToolCall]:
    out = []
    for i, (name, arguments) in enumerate(window):
        text = json.dumps(arguments).replace("/ROOT", str(root))
        out.append(ToolCall(f"call_{i}", name, text))
    return out


async def _serial(toolset: Toolset, calls: Sequence[ToolCall]) -> list[ToolResult]:
    return [await execute_call(toolset, c) for c in calls]


async def _concurrent(
    toolset: Toolset, calls: Sequence[ToolCall], order: Sequence[int]
) -> list[ToolResult]:
    thunks = [lambda c=c: execute_call(toolset, c) for c in calls]
    return list(await gather(thunks, start_order=order))


def _run(server: MCPServer, calls: list[ToolCall], order: Sequence[int] | None) -> tuple[Any, ...]:
    state = server.new_state(0)
    toolset = server.make_toolset(state)
    if order is None:
        results = anyio.run(_serial, toolset, calls)
    else:
        results = anyio.run(_concurrent, toolset, calls, order)
    return tuple(r.content for r in results), server.fingerprint(state)


def false_fills(server: Server, declaration: dict[str, Any]) -> tuple[int, int, list[str]]:
    """(certified windows, false fills, the false-filling windows' tools)."""
    certified = fills = 0
    which: list[str] = []
    with MCPServer(
        server.command, env=server.env, effects=declaration, nondeterministic=NOISE
    ) as live:
        toolset = live.make_toolset(live.new_state(0))
        phase = Phase("window", "fan_out", tuple(toolset))
        detector = SchemaSoundDetector()
        for window in server.windows:
            calls = _calls(window, live.root)
            if not isinstance(detector.certify(toolset, calls, phase, {}), Certificate):
                continue
            certified += 1
            serial = _run(live, calls, None)
            orders = list(itertools.permutations(range(len(calls))))
            if any(_run(live, calls, order) != serial for order in orders for _ in range(REPEATS)):
                fills += 1
                which.append(" + ".join(name for name, _ in window))
    return certified, fills, which


def kit_verdict(server: Server, declaration: dict[str, Any], examples: int) -> tuple[str, str]:
    with MCPServer(
        server.command, env=server.env, effects=declaration, nondeterministic=NOISE
    ) as live:
        report = check_toolset(live.certifiable(), examples=examples)
    false = ", ".join(f"{c.subject} {c.claim}" for c in report.false)
    verdict = "FALSE" if report.false else ("passed" if not report.unverified else "unverified")
    return verdict, false


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_false_fills", description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--examples", type=int, default=25, help="kit examples per claim (25)")
    parser.add_argument("--json", metavar="OUT", help="write the rows as JSON")
    args = parser.parse_args(argv)
    if not (BIN / "mcp-server-filesystem").exists():
        print(
            "the reference MCP servers are not installed: npm ci in toolsets/mcp", file=sys.stderr
        )
        return 2
    rows: list[dict[str, Any]] = []
    header = f"{'server':<11} {'declaration':<32} {'certified':>9} {'false fills':>11}  kit"
    print(header)
    print("-" * len(header))
    bad = 0
    for server in servers():
        for name, declaration in server.declarations.items():
            started = time.monotonic()
            certified, fills, which = false_fills(server, declaration)
            verdict, claims = kit_verdict(server, declaration, args.examples)
            row = {
                "server": server.name,
                "declaration": name,
                "windows": len(server.windows),
                "certified": certified,
                "false_fills": fills,
                "false_fill_windows": which,
                "kit": verdict,
                "kit_false_claims": claims,
                "seconds": round(time.monotonic() - started, 1),
            }
            rows.append(row)
            missed = fills and verdict != "FALSE"
            bad += bool(missed)
            print(
                f"{server.name:<11} {name:<32} {certified:>4}/{len(server.windows):<4} "
                f"{fills:>11}  {verdict}{' (' + claims + ')' if claims else ''}"
                f"{'  <-- MISSED' if missed else ''}"
            )
    print()
    print(f"declarations with a false fill the kit passed: {bad}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
