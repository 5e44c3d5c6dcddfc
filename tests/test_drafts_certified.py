"""From zero to a certified window without writing the files by hand (issue 45, done when):
20 serial runs of an unmodified client through a proxy that flattens nothing yet are its
ledger; ``harness init`` drafts the effects (from the toolset or the MCP server) and the
manifest (from that ledger) and certifies them; the proxy serving the drafts flattens the
same windows as the hand-written files (never a window they would not), the client ends with
the serial run's store, and gets each window in 2 round trips.

The workspace runs on the scripted engine forcing each task's gold calls; the reference
filesystem MCP server (node, ``toolsets/mcp``; skipped without it) on a scripted serial model
that reads the files the prompt names, one per turn."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from benchmarks.proxy_bench import GoldForcing, workspace_effects
from harness.bench.workload import WorkloadTask, generate_tasks
from harness.loop.ledger import Ledger
from harness.messages import Message, ToolSpec
from harness.proxy import ProxyConfig, build_app, in_process_client
from harness.skills.manifest import load_manifest
from harness.testing import ScriptedEngine
from harness.tools.effects_file import load_effects
from harness.toolsets.workspace import fingerprint, load_workspace_manifest
from tests.serial_clients import ClientRun, client_loop, sdk

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[1]
MCP_DIR = ROOT / "toolsets" / "mcp"
FILESYSTEM = MCP_DIR / "node_modules" / ".bin" / "mcp-server-filesystem"
EXAMPLES = "8"


def _init(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "init", "--examples", EXAMPLES, *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


def _twenty_fan_out_tasks() -> list[WorkloadTask]:
    """The workload's 16 fan-out tasks and 4 more from another seed: 20 serial runs."""
    first = [t for t in generate_tasks(0) if t.kind == "fan_out"]
    more = [t for t in generate_tasks(1) if t.kind == "fan_out"][:4]
    return first + more


async def _workspace_run(
    client: Any, wt: WorkloadTask, headers: dict[str, str]
) -> tuple[ClientRun, str, bool]:
    toolset, state = wt.toolset(latency=0.0)
    run = await client_loop(client, toolset, wt.task.prompt, headers, system=wt.task.system)
    return run, fingerprint(state), wt.score(run.calls, state, run.answer)


def _drafted_skill(manifest_path: Path, tool: str) -> str:
    manifest = load_manifest(manifest_path)
    (name,) = [n for n, s in manifest.skills.items() if any(tool in p.tools for p in s.phases)]
    return name


async def test_workspace_drafts_from_twenty_serial_traces_flatten_as_the_hand_written_files(
    tmp_path: Path,
) -> None:
    tasks = _twenty_fan_out_tasks()
    engine = GoldForcing(ScriptedEngine(), [t.task for t in tasks])
    ledger_path = tmp_path / "ledger.jsonl"
    serial: dict[str, tuple[ClientRun, str]] = {}
    # 1. serve pass-through (no effects, no manifest: nothing certifies) with a ledger
    ledger = Ledger(ledger_path, log=False)
    async with in_process_client(build_app(engine, ProxyConfig(), ledger=ledger)) as http:
        client = sdk(http)
        for wt in tasks:
            run, store, ok = await _workspace_run(client, wt, {})
            assert ok, wt.id
            assert run.windows == []  # nothing flattened yet
            assert run.round_trips == sum(len(s) for s in wt.task.gold_steps) + 1
            serial[wt.task.prompt] = (run, store)
    ledger.close()

    # 2. draft and certify: the effects from the toolset, the manifest from the ledger
    effects, skills = tmp_path / "effects.toml", tmp_path / "skills.toml"
    done = _init("--toolset", "harness.toolsets.workspace", "--traces", str(ledger_path),
                 "-o", str(effects), "--manifest-output", str(skills))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "fan-out phase(s) found in 20 chat(s)" in done.stderr
    assert " 0 refused" in done.stderr
    drafted = load_effects(effects)
    assert set(drafted) == set(workspace_effects(tasks[0].toolset()[0]))

    # 3. serve the hand-written files and the drafts: the same windows, the serial store
    hand = ProxyConfig(
        effects=workspace_effects(tasks[0].toolset()[0]), manifest=load_workspace_manifest()
    )
    draft = ProxyConfig(effects=drafted, manifest=load_manifest(skills))
    flattened = 0
    async with (
        in_process_client(build_app(engine, hand)) as hand_http,
        in_process_client(build_app(engine, draft)) as draft_http,
    ):
        for wt in tasks:
            s_run, s_store = serial[wt.task.prompt]
            tool = s_run.calls[0].name
            h_run, h_store, h_ok = await _workspace_run(
                sdk(hand_http), wt, {"X-Harness-Skill": wt.skill}
            )
            d_run, d_store, d_ok = await _workspace_run(
                sdk(draft_http), wt, {"X-Harness-Skill": _drafted_skill(skills, tool)}
            )
            assert h_ok, wt.id
            assert d_ok, wt.id
            assert d_store == h_store == s_store, wt.id
            assert d_run.windows == h_run.windows == list(wt.windows), wt.id
            assert d_run.round_trips == 2 * len(d_run.windows), wt.id
            flattened += len(d_run.windows)
    assert flattened == 20
    assert not engine.parallel_shown  # the upstream only ever saw the serial transcript


# -- the reference filesystem MCP server ----------------------------------------------------

#: The files a fresh state of the kit's server directory holds (harness.certkit.mcp_server).
FILES = ("a.txt", "Readme.md", "notes/b.md", "notes/deep/c.txt")

HAND_MANIFEST = """\
version = 1

[skills.read_files]
description = "Read the files the user names, then summarise them."

[[skills.read_files.phases]]
name = "read"
kind = "fan_out"
tools = ["read_text_file"]
slots = "input:paths"
[skills.read_files.phases.args]
"read_text_file.path" = "input:paths"

[skills.read_files.inputs.paths]
from = "prompt"
pattern = "([\\\\w./-]+\\\\.(?:txt|md))"
all = true
"""


def _named_files(messages: Sequence[Message]) -> list[str]:
    prompt = next(str(m.get("content")) for m in messages if m.get("role") == "user")
    return re.findall(r"[\w./-]+\.(?:txt|md)", prompt)


def _serial_reader(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    """A serial model: one read_text_file per turn, for each file the prompt names, in order;
    then the answer (withheld results count: the window's markers are tool messages)."""
    done = sum(m.get("role") == "tool" for m in messages)
    names = _named_files(messages)
    if done < len(names):
        return {"name": "read_text_file", "arguments": {"path": names[done]}}
    return f"Read {len(names)} files."


def _prompts(count: int) -> list[str]:
    """``count`` prompts naming 2 to 4 of the seeded files, in varied orders."""
    out = []
    for i in range(count):
        n = 2 + i % 3
        picked = [FILES[(i + j) % len(FILES)] for j in range(n)]
        out.append(f"Read {', '.join(picked[:-1])} and {picked[-1]}, then summarise them.")
    return out


@pytest.mark.skipif(not FILESYSTEM.exists(), reason="`npm ci` in toolsets/mcp (make setup)")
async def test_filesystem_server_drafts_from_twenty_serial_traces_flatten_as_the_hand_written_files(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp", reason="the MCP SDK (extra 'mcp') is not installed")
    from harness.certkit.mcp_server import MCPServer

    command = f"{FILESYSTEM} {{root}}"
    prompts = _prompts(20)
    engine = ScriptedEngine(script=_serial_reader)
    ledger_path = tmp_path / "ledger.jsonl"
    with MCPServer(command) as server:
        ledger = Ledger(ledger_path, log=False)
        async with in_process_client(build_app(engine, ProxyConfig(), ledger=ledger)) as http:
            serial = []
            for i, prompt in enumerate(prompts):
                toolset = server.make_toolset(server.new_state(i))
                run = await client_loop(sdk(http), toolset, prompt, {})
                assert run.windows == []
                assert run.round_trips == len(run.calls) + 1
                serial.append(run)
        ledger.close()

        effects, skills = tmp_path / "fs.toml", tmp_path / "skills.toml"
        done = _init("--mcp-server", command, "--trust-hints", "--traces", str(ledger_path),
                     "--nondeterministic", "times", "--nondeterministic", "temp-names",
                     "-o", str(effects), "--manifest-output", str(skills))  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "1 fan-out phase(s) found in 20 chat(s)" in done.stderr
        root = str(server.root)
        hand_manifest = tmp_path / "hand.toml"
        hand_manifest.write_text(HAND_MANIFEST)
        hand = ProxyConfig(
            effects=load_effects(MCP_DIR / "filesystem.effects.toml", root=root),
            manifest=load_manifest(hand_manifest),
        )
        drafted = tomllib.loads(effects.read_text())
        assert "read_text_file" in drafted["tools"]
        draft = ProxyConfig(
            effects=load_effects(effects, root=root), manifest=load_manifest(skills)
        )
        async with (
            in_process_client(build_app(engine, hand)) as hand_http,
            in_process_client(build_app(engine, draft)) as draft_http,
        ):
            for i, (prompt, s_run) in enumerate(zip(prompts, serial, strict=True)):
                toolset = server.make_toolset(server.new_state(i))
                h_run = await client_loop(sdk(hand_http), toolset, prompt, {})
                d_run = await client_loop(sdk(draft_http), toolset, prompt, {})
                n = len(s_run.calls)
                assert h_run.windows == [n], prompt
                assert d_run.windows == h_run.windows, prompt
                assert d_run.round_trips == 2, prompt
                seen = [(c.name, c.arguments) for c in d_run.calls]
                assert seen == [(c.name, c.arguments) for c in s_run.calls], prompt
                assert d_run.answer == s_run.answer == h_run.answer
