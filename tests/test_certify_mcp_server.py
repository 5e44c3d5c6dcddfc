"""The certification kit on real MCP servers, certified directly (``harness certify
--mcp-server``): the reference filesystem and memory servers (node, installed by ``make
setup`` into ``toolsets/mcp``; these tests skip without them).

Honest declarations (``toolsets/mcp/*.effects.toml``) pass; declarations under which arm F
would differ from S are flagged, each by the claim that sees it; text that varies between
runs is reported as such, not blamed on a declaration."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.certkit import CertificationReport, check_toolset
from harness.certkit.mcp_server import MCPServer
from harness.certkit.nondeterminism import MASK, normaliser
from harness.errors import ConfigError
from harness.tools.effects_file import effects_from_dict

pytest.importorskip("mcp", reason="the MCP SDK (extra 'mcp') is not installed")
pytest.importorskip("hypothesis", reason="the kit needs hypothesis (extra 'certify')")

MCP_DIR = Path(__file__).resolve().parents[1] / "toolsets" / "mcp"
FILESYSTEM = MCP_DIR / "node_modules" / ".bin" / "mcp-server-filesystem"
MEMORY = MCP_DIR / "node_modules" / ".bin" / "mcp-server-memory"
FS_EFFECTS = MCP_DIR / "filesystem.effects.toml"
MEMORY_EFFECTS = MCP_DIR / "memory.effects.toml"
MEMORY_ENV = {"MEMORY_FILE_PATH": "{root}/memory.json"}
NOISE = ("times", "temp-names")
EXAMPLES = 15

needs_servers = pytest.mark.skipif(
    not (FILESYSTEM.exists() and MEMORY.exists()),
    reason="the reference MCP servers are not installed: `npm ci` in toolsets/mcp "
    "(make setup does it when npm is present)",
)


def _toml_tables(path: Path) -> dict[str, object]:
    import tomllib

    return tomllib.loads(path.read_text(encoding="utf-8"))


def _certify(
    command: list[str],
    effects: dict[str, object] | Path,
    *,
    env: dict[str, str] | None = None,
    nondeterministic: tuple[str, ...] = NOISE,
    examples: int = EXAMPLES,
) -> CertificationReport:
    with MCPServer(command, env=env, effects=effects, nondeterministic=nondeterministic) as server:
        return check_toolset(server.certifiable(), examples=examples)


def _statuses(report: CertificationReport) -> dict[tuple[str, str], str]:
    return {(c.subject, c.claim): c.status for c in report.claims}


@pytest.fixture
def in_empty_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    assert list(tmp_path.iterdir()) == [], "the kit wrote into the working directory"


@needs_servers
@pytest.mark.usefixtures("in_empty_dir")
def test_honest_filesystem_declarations_pass_every_claim() -> None:
    report = _certify([str(FILESYSTEM), "{root}"], FS_EFFECTS)
    assert report.ok, report.render()
    assert not report.unverified, report.render()
    assert ("windows of all tools", "commutes") in _statuses(report)
    assert len(report.claims) >= 40


@needs_servers
def test_a_directory_maker_without_ancestors_is_flagged() -> None:
    effects = _toml_tables(FS_EFFECTS)
    del effects["tools"]["create_directory"]["ancestors"]  # type: ignore[index]
    report = _certify([str(FILESYSTEM), "{root}"], effects)
    assert _statuses(report)[("create_directory", "write_targets")] == "FALSE", report.render()
    # (two spellings that create one parent conflict only through it: identity and
    # targets_canonical may see it too; nothing else is blamed)
    assert {c.subject for c in report.false} <= {"create_directory", "windows of all tools"}


@needs_servers
def test_a_move_that_declares_only_its_destination_is_flagged() -> None:
    effects = _toml_tables(FS_EFFECTS)
    effects["tools"]["move_file"]["write_targets"] = "file:{destination}"  # type: ignore[index]
    report = _certify([str(FILESYSTEM), "{root}"], effects)
    assert _statuses(report)[("move_file", "write_targets")] == "FALSE", report.render()
    (claim,) = [c for c in report.false if c.subject == "move_file"]
    assert claim.counterexample is not None
    assert "write_targets of 'move_file'" in claim.counterexample.fix


@needs_servers
def test_unmasked_temporary_names_are_reported_as_nondeterministic_not_false() -> None:
    """write_file's error names a random temporary file: without a mask the kit cannot judge
    idempotence from results, says so, and names the preset that masks it."""
    report = _certify([str(FILESYSTEM), "{root}"], FS_EFFECTS, nondeterministic=("times",))
    assert report.ok, report.render()
    noisy = [c for c in report.unverified if c.counterexample is not None]
    assert noisy, report.render()
    for claim in noisy:
        assert claim.counterexample is not None
        assert claim.counterexample.nondeterministic
        assert "--nondeterministic temp-names" in claim.counterexample.fix
        assert "idempotent=False" not in claim.counterexample.fix


@needs_servers
@pytest.mark.usefixtures("in_empty_dir")
def test_honest_memory_declarations_pass() -> None:
    report = _certify([str(MEMORY)], MEMORY_EFFECTS, env=MEMORY_ENV)
    assert report.ok, report.render()
    assert not report.unverified, report.render()


@needs_servers
def test_per_entity_targets_on_the_memory_server_lose_writes_and_are_flagged() -> None:
    """The server rewrites its one file on every call: two writers naming different entities
    run together under F and one write is lost. The kit's window claim sees the lost write,
    and the write-target claim names the file to declare."""
    effects = _toml_tables(MEMORY_EFFECTS)
    tools = effects["tools"]
    tools["create_entities"]["write_targets"] = "entity:{entities}"  # type: ignore[index]
    tools["add_observations"]["write_targets"] = "entity:{observations}"  # type: ignore[index]
    tools["delete_entities"]["write_targets"] = "entity:{entityNames}"  # type: ignore[index]
    report = _certify([str(MEMORY)], effects, env=MEMORY_ENV)
    statuses = _statuses(report)
    assert statuses[("windows of all tools", "commutes")] == "FALSE", report.render()
    assert statuses[("create_entities", "write_targets")] == "FALSE"
    (claim,) = [c for c in report.false if c.subject == "create_entities"]
    assert claim.counterexample is not None
    assert "file:memory.json" in claim.counterexample.fix


@needs_servers
def test_a_lie_whose_writers_all_fail_in_the_kits_directory_is_unverified_not_passed() -> None:
    """MEMORY_FILE_PATH in a directory the default seed lacks: every write fails (ENOENT),
    so the per-entity lie above has nothing to be caught on. It must not pass: each writer's
    claims and the window are unverified, naming the tool and its first error."""
    effects = _toml_tables(MEMORY_EFFECTS)
    effects["tools"]["create_entities"]["write_targets"] = "entity:{entities}"  # type: ignore[index]
    env = {"MEMORY_FILE_PATH": "{root}/data/memory.json"}
    report = _certify([str(MEMORY)], effects, env=env, examples=5)
    assert report.ok, report.render()  # nothing FALSE: nothing was seen
    claims = {(c.subject, c.claim): c for c in report.claims}
    for key in (("create_entities", "write_targets"), ("windows of all tools", "commutes")):
        assert claims[key].status == "unverified", report.render()
        assert "never succeeded" in claims[key].reason
        assert "ENOENT" in claims[key].reason
    writers = {"create_entities", "create_relations", "add_observations", "delete_entities"}
    assert not [c for c in report.passed if c.tool in writers and c.claim != "targets_canonical"]


@needs_servers
@pytest.mark.usefixtures("in_empty_dir")
def test_harness_certify_takes_a_server_command() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "certify",
            "--mcp-server",
            str(MEMORY),
            "--mcp-env",
            "MEMORY_FILE_PATH={root}/memory.json",
            "--effects",
            str(MEMORY_EFFECTS),
            "--examples",
            "5",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"]
    assert report["summary"]["false"] == 0
    assert "Knowledge Graph MCP Server" not in done.stderr  # the server's banner is kept


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["certify"], "Name what to certify"),
        (["certify", "harness.toolsets.workspace", "--mcp-server", "x"], "not both"),
        (["certify", "harness.toolsets.workspace", "--trust-hints"], "--mcp-server only"),
        (["certify", "harness.toolsets.workspace", "--effects", "no.toml"], "Cannot read effects"),
        (["certify", "--mcp-server", "x {root}", "--mcp-env", "NOEQUALS"], "KEY=VALUE"),
        (["certify", "--mcp-server", "x {root}", "--nondeterministic", "("], "neither a preset"),
        (["certify", "--mcp-server", "x {root}", "--nondeterministic", ".*"], "empty text"),
        (["certify", "harness.toolsets.workspace", "--no-root"], "--mcp-server only"),
        (["certify", "--mcp-server", "srv /home/me/project"], "has no {root}"),
        (["certify", "--mcp-server", "srv", "--mcp-env", "DB=/home/me/db"], "has no {root}"),
        (["init", "--mcp-server", "srv /home/me/project"], "has no {root}"),
    ],
)
def test_certify_usage_errors_exit_2_and_say_why(argv: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_server_that_does_not_start_is_a_clear_error_quoting_its_stderr() -> None:
    """The log lives in the kit's temporary directory, gone when the kit ends: the error
    quotes its last lines instead of naming it."""
    from harness.errors import ToolsetError

    script = "import sys; print('cannot open the database', file=sys.stderr); sys.exit(3)"
    with (
        MCPServer([sys.executable, "-c", script, "{root}"]) as server,
        pytest.raises(ToolsetError) as raised,
    ):
        server.new_state(0)
    message = str(raised.value)
    assert "did not start" in message
    assert "cannot open the database" in message
    assert "server.log" not in message


@needs_servers
def test_a_command_without_root_is_refused_before_the_server_touches_anything(
    tmp_path: Path,
) -> None:
    """A pasted server command names the user's real directory: the kit would run every
    example there (overwriting files) while diffing its own, empty one, and pass. Refused,
    exit 2, nothing written; --no-root runs it as it is (for a server with no state on disk)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("precious\n")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "certify", "--mcp-server", f"{FILESYSTEM} {project}",
         "--effects", str(FS_EFFECTS), "--examples", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "has no {root}" in done.stderr
    assert "--no-root" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in project.iterdir()) == ["a.txt"]
    assert (project / "a.txt").read_text() == "precious\n"
    with pytest.raises(ConfigError, match="has no"):
        MCPServer([str(MEMORY)], env={"MEMORY_FILE_PATH": str(project / "memory.json")})
    MCPServer([str(MEMORY)], env={"MEMORY_FILE_PATH": "{root}/memory.json"})  # accepted
    MCPServer([sys.executable, "-c", "pass"], no_root=True)  # accepted: the user said so


def test_presets_mask_what_varies_and_nothing_else() -> None:
    mask = normaliser(["times", "temp-names", "uuids"])
    text = (
        "created: Sun Dec 06 2026 07:58:54 GMT+0000 (Coordinated Universal Time)\n"
        "at 2026-12-06T07:58:54.123Z, rename '/r/a.txt.3862d9cc882cc7afdd2406c2fed1eac7.tmp'"
        " id 123e4567-e89b-12d3-a456-426614174000 size: 2"
    )
    masked = mask(text)
    assert masked.count(MASK) == 4, masked
    assert "size: 2" in masked
    assert "/r/a.txt" in masked
    assert mask("plain words 42 and a.txt") == "plain words 42 and a.txt"


def test_an_effects_file_keys_paths_under_its_root_and_writes_ancestors() -> None:
    effects = effects_from_dict(
        {
            "root": "/srv",
            "tools": {
                "mkdir": {"write_targets": "file:{path}", "identity": {"path": "path"}, "ancestors": True},
                "read_many": {
                    "read_only": True,
                    "read_targets": "file:{paths}",
                    "identity": {"paths": "each path"},
                },
            },
        }
    )  # fmt: skip
    assert effects["mkdir"].targets({"path": "/srv/a/b"}) == frozenset({"file:a", "file:a/b"})
    assert effects["mkdir"].targets({"path": "a/./b"}) == frozenset({"file:a", "file:a/b"})
    assert effects["mkdir"].targets({"path": "/etc/x"}) == frozenset(
        {"file:"}
    )  # outside: the namespace
    assert effects["read_many"].reads({"paths": ["a", "/srv/b"]}) == frozenset({"file:a", "file:b"})
    with pytest.raises(ConfigError, match="add root"):
        effects_from_dict({"tools": {"t": {"read_only": True, "identity": {"p": "path"}}}})
    with pytest.raises(ConfigError, match="must be one of"):
        effects_from_dict({"root": "/srv", "tools": {"t": {"identity": {"p": "exact"}}}})
    with pytest.raises(ConfigError, match="absolute"):
        effects_from_dict({"root": "srv", "tools": {}})


def test_a_path_key_on_a_list_argument_is_refused_with_each_path_as_the_fix() -> None:
    """identity = { paths = "path" } on an array argument would key the whole list as one
    odd file name (its files get no targets of their own, and F false-fills): refused where
    the effect meets the tool's schema, and the other way round too."""
    from harness.errors import ToolsetError
    from harness.proxy import toolset_for
    from harness.tools import Toolset

    specs = [
        {"name": "read_many", "parameters": {"type": "object", "properties": {
            "paths": {"type": "array", "items": {"type": "string"}}}}},
        {"name": "read_one", "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}}}},
    ]  # fmt: skip
    wrong = effects_from_dict(
        {"root": "/srv", "tools": {"read_many": {"read_only": True, "read_targets": "file:{paths}",
                                                 "identity": {"paths": "path"}}}}
    )  # fmt: skip
    with pytest.raises(ToolsetError, match='paths = "each path"'):
        Toolset.from_openai(specs)["read_many"].with_effect(wrong["read_many"])
    with pytest.raises(ConfigError, match="each path"):
        toolset_for(specs, wrong)  # the proxy: harness serve --effects
    backwards = effects_from_dict(
        {"root": "/srv", "tools": {"read_one": {"read_only": True, "read_targets": "file:{path}",
                                                "identity": {"path": "each path"}}}}
    )  # fmt: skip
    with pytest.raises(ToolsetError, match='path = "path"'):
        Toolset.from_openai(specs)["read_one"].with_effect(backwards["read_one"])


@needs_servers
def test_the_kit_refuses_a_path_key_on_the_servers_list_argument(tmp_path: Path) -> None:
    text = FS_EFFECTS.read_text(encoding="utf-8")
    assert 'identity = { paths = "each path" }' in text
    wrong = tmp_path / "fs.effects.toml"
    wrong.write_text(text.replace('{ paths = "each path" }', '{ paths = "path" }'))
    done = subprocess.run(
        [sys.executable, "-m", "harness", "certify", "--mcp-server", f"{FILESYSTEM} {{root}}",
         "--effects", str(wrong), "--examples", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"Effects file {wrong} does not fit the server's tools" in done.stderr
    assert "'read_multiple_files'" in done.stderr
    assert 'paths = "each path"' in done.stderr


def test_the_kit_refuses_an_effects_file_the_proxy_refuses(tmp_path: Path) -> None:
    """The kit replaces the file's root with its own directory, but a file with identity and
    no root is one `harness serve --effects` refuses: the kit says the same, not a pass."""
    from harness.tools.effects_file import load_effects

    rootless = tmp_path / "fs.effects.toml"
    rootless.write_text(
        '[tools.read_one]\nread_only = true\nread_targets = "file:{path}"\n'
        'identity = { path = "path" }\n'
    )
    with pytest.raises(ConfigError) as served:
        load_effects(rootless)
    server = MCPServer([sys.executable, "-c", "pass", "{root}"], effects=rootless)
    with pytest.raises(ConfigError) as kit:
        server.__enter__()
    assert str(kit.value) == str(served.value)
    assert "add root" in str(kit.value)
    tables = _toml_tables(rootless)
    with pytest.raises(ConfigError, match="add root"), MCPServer(["x", "{root}"], effects=tables):
        pass


@needs_servers
def test_the_false_fill_benchmark_sees_lost_writes_and_none_under_honest_effects() -> None:
    """benchmarks/mcp_false_fills measures F against S on hand-written windows, apart from
    the kit: it must be able to fail (per-kind targets on the memory server lose a write)."""
    from benchmarks.mcp_false_fills import false_fills, servers

    memory = next(s for s in servers() if s.name == "memory")
    certified, fills, _ = false_fills(memory, memory.declarations["honest"])
    assert fills == 0
    certified, fills, which = false_fills(memory, memory.declarations["targets per kind of record"])
    assert certified >= 1
    assert fills >= 1, which


# -- harness init: drafted, then certified ----------------------------------------------------


def _init(*extra: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "init", "--mcp-server", f"{FILESYSTEM} {{root}}",
         "--nondeterministic", "times", "--nondeterministic", "temp-names",
         "--examples", "8", *extra],
        capture_output=True, text=True, timeout=600, cwd=cwd,
    )  # fmt: skip


@needs_servers
def test_init_drafts_the_filesystem_servers_effects_from_its_hints_and_certifies_them(
    tmp_path: Path,
) -> None:
    out = tmp_path / "fs.effects.toml"
    done = _init("--trust-hints", "--root", "/srv/project", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "14 tools declared and certified, 0 refused" in done.stderr
    drafted = effects_from_dict(_toml_tables(out))
    assert drafted["read_text_file"].read_only
    assert drafted["write_file"].targets({"path": "/srv/project/a.txt"}) == frozenset(
        {"file:a.txt"}
    )
    assert drafted["create_directory"].targets({"path": "n/m"}) == frozenset({"file:n", "file:n/m"})
    assert drafted["read_multiple_files"].reads({"paths": ["a", "b"]}) == frozenset(
        {"file:a", "file:b"}
    )
    assert "# draft: read-only: the server's readOnlyHint" in out.read_text()


@needs_servers
def test_init_refuses_a_declaration_the_kit_falsifies_and_says_why(tmp_path: Path) -> None:
    out = tmp_path / "fs.effects.toml"
    done = _init("--trust-hints", "--read-only", "write_file", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "1 refused" in done.stderr
    text = out.read_text()
    assert "# REFUSED by the kit" in text
    assert "read_only FALSE" in text
    drafted = effects_from_dict(_toml_tables(out))
    assert "write_file" not in drafted  # the refused declaration is a comment only
    assert drafted["read_text_file"].read_only


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--read-only", "no_such_tool"], "does not list"),
        (["--root", "relative/dir"], "absolute"),
        (["--examples", "0"], "at least 1"),
    ],
)
@needs_servers
def test_init_usage_errors_exit_2(extra: list[str], message: str) -> None:
    done = _init(*extra)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_init_never_overwrites_a_file_without_force(tmp_path: Path) -> None:
    out = tmp_path / "mine.toml"
    out.write_text("# my own\n")
    done = _init("-o", str(out))
    assert done.returncode == 2
    assert "--force" in done.stderr
    assert out.read_text() == "# my own\n"


def test_a_draft_names_paths_and_leaves_what_it_cannot_key_undeclared() -> None:
    from harness.certkit.draft_effects import draft_effects, render_effects
    from harness.tools import Toolset

    specs = [
        {"name": "save", "parameters": {"type": "object", "properties": {
            "file_path": {"type": "string"}, "text": {"type": "string"}}}},
        {"name": "make_dir", "parameters": {"type": "object", "properties": {
            "dir": {"type": "string"}}}},
        {"name": "ping", "parameters": {"type": "object", "properties": {
            "host": {"type": "string"}}}},
        {"name": "lookup", "parameters": {"type": "object", "properties": {
            "q": {"type": "string"}}}},
    ]  # fmt: skip
    draft = draft_effects(Toolset.from_openai(specs), read_only=["lookup"], root="/r")
    tables = draft.tables()
    assert tables["root"] == "/r"
    assert tables["tools"]["save"]["write_targets"] == "file:{file_path}"
    assert tables["tools"]["make_dir"]["ancestors"] is True
    assert "ping" not in tables["tools"]  # nothing keys it: the worst case
    assert tables["tools"]["lookup"] == {"read_only": True}
    text = render_effects(draft, source="a test")
    assert "# [tools.ping] left undeclared" in text
    assert effects_from_dict(tables)["save"].targets({"file_path": "/r/x"}) == frozenset({"file:x"})


@needs_servers
def test_init_certifies_a_manifest_drafted_from_traces_with_the_effects(tmp_path: Path) -> None:
    """Serial runs that read files one per turn become a fan-out phase; the kit certifies the
    drafted effects with that phase's windows (D2 and commutes for the phase)."""
    chats = []
    for names in (["a.txt", "notes/b.md"], ["Readme.md", "a.txt", "notes/deep/c.txt"]):
        messages: list[dict[str, object]] = [
            {"role": "user", "content": f"Read {' and '.join(names)} please."}
        ]
        for name in names:
            call = {"name": "read_text_file", "arguments": json.dumps({"path": name})}
            messages.append({"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": call}]})  # fmt: skip
            messages.append({"role": "tool", "tool_call_id": "c", "content": "text"})
        chats.append({"messages": messages})
    traces = tmp_path / "runs.jsonl"
    traces.write_text("\n".join(json.dumps(c) for c in chats))
    effects, skills = tmp_path / "fs.toml", tmp_path / "skills.toml"
    done = _init("--trust-hints", "--traces", str(traces), "-o", str(effects),
                 "--manifest-output", str(skills))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 fan-out phase(s) found in 2 chat(s)" in done.stderr
    assert "14 tools declared and certified" in done.stderr
    assert "read_text_file_each_path" in skills.read_text()
