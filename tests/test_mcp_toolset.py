"""Claims about tools from a real MCP server process (tests/mcp_server.py, over stdio)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from harness import ConfigError, Task
from harness.loop import LoopConfig, run_loop
from harness.messages import ToolCall
from harness.testing import ScriptedEngine
from harness.tools.execute import execute_call
from tests import doubles
from tests.doubles import MANIFEST

pytest.importorskip("mcp")

from harness.tools.mcp import MCPToolset, open_mcp_toolset

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SERVER = [str(Path(__file__).with_name("mcp_server.py"))]
KEYS = ["a", "b", "c"]


def report_task() -> Task:
    return doubles.report_task(KEYS)


def server(**options: Any) -> Any:
    return open_mcp_toolset(sys.executable, SERVER, **options)


async def run(toolset: MCPToolset, arm: str) -> Any:
    return await run_loop(
        ScriptedEngine(),
        toolset,
        report_task(),
        LoopConfig(arm=arm, policy="gold"),  # type: ignore[arg-type]
        manifest=MANIFEST,
    )


def wide(result: Any) -> list[int]:
    """The sizes of the windows that ran more than one call together."""
    return [w.n for w in result.windows if w.n > 1]


async def test_the_servers_tools_load_with_schemas_and_their_hints_in_force_nowhere() -> None:
    async with server() as toolset:
        assert list(toolset) == [
            "read_doc", "list_docs", "write_doc", "append_log", "fail", "lies_read_only"
        ]  # fmt: skip
        assert toolset["read_doc"].parameters["required"] == ["key"]
        assert toolset["read_doc"].description == "Read one document."
        # the SDK gives snake_case annotations; the hints are read from them ...
        assert toolset.hints["read_doc"].read_only
        assert toolset.hints["write_doc"].idempotent
        assert not toolset.hints["append_log"].idempotent
        # ... and by default none of them is in force: every tool is the worst case
        assert all(not t.effect.annotated and not t.effect.read_only for t in toolset.values())
        assert toolset.confirmed == frozenset()


async def test_calls_give_structured_text_and_error_results_the_model_sees() -> None:
    async with server() as toolset:
        read = await execute_call(toolset, ToolCall("1", "read_doc", '{"key": "a"}'))
        assert (read.is_error, read.value) == (False, {"key": "a", "body": "body of a"})
        assert read.content == '{"body": "body of a", "key": "a"}'
        listed = await execute_call(toolset, ToolCall("2", "list_docs", "{}"))
        assert listed.content == "a, b, c, d"
        failed = await execute_call(toolset, ToolCall("3", "fail", '{"reason": "no"}'))
        assert failed.is_error
        assert failed.error_kind == "tool_raised"
        assert "cannot do that: no" in failed.content
        bad = await execute_call(toolset, ToolCall("4", "read_doc", '{"key": 3}'))
        assert (bad.is_error, bad.error_kind) == (True, "bad_arguments")  # never sent


async def test_a_window_over_mcp_tools_certifies_only_after_the_annotations_are_confirmed() -> None:
    async with server() as toolset:
        untrusted = await run(toolset, "F")
    assert wide(untrusted) == []  # hints alone certify nothing: F ran one call at a time
    async with server(trust_annotations=True) as toolset:
        trusted = await run(toolset, "F")
    assert wide(trusted) == [len(KEYS)]
    async with server(effects={"read_doc": {"read_only": True}}) as toolset:
        declared = await run(toolset, "F")
        assert toolset.confirmed == {"read_doc"}
    assert wide(declared) == [len(KEYS)]


async def test_S_and_F_over_a_real_mcp_server_give_the_same_results_and_final_state() -> None:
    outcomes = []
    for arm in ("S", "F"):
        async with server(trust_annotations=True) as toolset:
            result = await run(toolset, arm)
            after = await execute_call(toolset, ToolCall("x", "read_doc", '{"key": "summary"}'))
        outcomes.append(
            (
                [(c.name, c.arguments) for c in result.calls],
                [result.results[c.id].content for c in result.calls],
                result.answer,
                after.content,
                result.openai_messages(),
            )
        )
        if arm == "F":
            assert wide(result) == [len(KEYS)]
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][3] == '{"body": "a + b + c", "key": "summary"}'


async def test_trusting_puts_the_servers_hints_in_force_even_a_lie() -> None:
    async with server() as toolset:
        trusted = toolset.trusting(["lies_read_only"])
        assert trusted["lies_read_only"].effect.read_only  # what a certification run must catch
        assert not trusted["append_log"].effect.annotated
        assert trusted.confirmed == {"lies_read_only"}
        with pytest.raises(Exception, match="No such MCP tool"):
            toolset.trusting(["nope"])


@pytest.mark.parametrize(
    ("effects", "says"),
    [
        ({"nope": {"read_only": True}}, "does not list"),
        ({"read_doc": {"readonly": True}}, "unknown field(s) ['readonly']"),
        ({"read_doc": 3}, "give an Effect or a mapping"),
    ],
)
async def test_bad_effects_are_config_errors(effects: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        async with server(effects=effects):
            pass  # pragma: no cover - never reached
    assert says in str(caught.value)


async def test_mcp_hints_in_an_effects_mapping_may_use_either_spelling() -> None:
    async with server(effects={"read_doc": {"read_only_hint": True}}) as toolset:
        assert toolset["read_doc"].effect.read_only
        assert toolset["read_doc"].effect.annotated


async def test_a_server_command_that_cannot_start_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="Cannot start the MCP server"):
        async with open_mcp_toolset("/no/such/server-binary"):
            pass  # pragma: no cover - never reached


async def test_without_the_mcp_sdk_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(ConfigError, match=r"agent-harness\[mcp\]"):
        async with open_mcp_toolset(sys.executable, SERVER):
            pass  # pragma: no cover - never reached


async def test_toolset_from_mcp_reads_a_real_servers_session_like_toolset_from_mcp() -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from harness.tools import Toolset

    params = StdioServerParameters(command=sys.executable, args=SERVER)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        toolset = await Toolset.from_mcp(session, effects={"read_doc": {"read_only": True}})
        assert isinstance(toolset, MCPToolset)
        assert toolset.confirmed == frozenset({"read_doc"})
        assert toolset["read_doc"].effect.read_only
        assert not toolset["write_doc"].effect.annotated  # hints alone certify nothing
        read = await execute_call(toolset, ToolCall("1", "read_doc", '{"key": "b"}'))
        assert (read.is_error, read.value) == (False, {"key": "b", "body": "body of b"})


async def test_toolset_from_mcp_without_the_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from harness.tools import Toolset

    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(ConfigError, match=r"agent-harness\[mcp\]"):
        await Toolset.from_mcp(object())
