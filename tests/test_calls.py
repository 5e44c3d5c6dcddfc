"""Claims about harness.tools.execute: every model or tool mistake is an error result, never a raise."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import pytest

from harness.messages import ToolCall
from harness.tools import Tool, Toolset, tool
from harness.tools.execute import ToolResult, execute_call, render_result

pytestmark = pytest.mark.anyio


@tool(read_only=True)
async def search(query: str, limit: int = 3) -> dict[str, Any]:
    """Search the documents."""
    return {"query": query, "hits": [f"doc{i}" for i in range(limit)]}


@tool(read_only=True)
def read_doc(key: str) -> str:
    """Read one document."""
    return f"body of {key}"


@tool
async def explode(reason: str) -> str:
    raise ValueError(f"cannot handle {reason}")


TOOLSET = Toolset([search, read_doc, explode], name="demo")


def call(name: str, arguments: str | dict[str, Any], call_id: str = "call_1") -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=call_id, name=name, arguments=text)


def assert_error(result: ToolResult, kind: str, call_id: str = "call_1") -> None:
    assert result.is_error, result
    assert result.error_kind == kind
    assert result.value is None
    assert result.call_id == call_id
    assert result.content.startswith("Error: ")


# --- good calls ------------------------------------------------------------------------------


async def test_a_good_call_returns_its_value_and_its_json_rendering():
    result = await execute_call(TOOLSET, call("search", {"query": "q", "limit": 2}))
    assert not result.is_error
    assert result.error_kind is None
    assert result.value == {"query": "q", "hits": ["doc0", "doc1"]}
    assert result.content == '{"hits": ["doc0", "doc1"], "query": "q"}'
    assert (result.call_id, result.name) == ("call_1", "search")


async def test_a_string_result_is_shown_verbatim():
    result = await execute_call(TOOLSET, call("read_doc", {"key": "a"}))
    assert result.content == "body of a"


async def test_empty_arguments_mean_an_empty_object():
    t = Tool(name="ping", parameters={"type": "object", "properties": {}}, fn=lambda: "pong")
    result = await execute_call(Toolset([t]), call("ping", "  "))
    assert not result.is_error
    assert result.content == "pong"


async def test_a_result_carries_monotonic_start_and_finish_stamps():
    result = await execute_call(TOOLSET, call("read_doc", {"key": "a"}))
    assert result.started > 0
    assert result.finished >= result.started
    assert result.duration_s == result.finished - result.started


async def test_a_result_becomes_the_tool_message_for_the_model():
    result = await execute_call(TOOLSET, call("read_doc", {"key": "a"}, call_id="c9"))
    assert result.to_message() == {
        "role": "tool",
        "tool_call_id": "c9",
        "name": "read_doc",
        "content": "body of a",
    }


async def test_an_error_result_becomes_a_tool_message_too():
    result = await execute_call(TOOLSET, call("nope", {}, call_id="c3"))
    message = result.to_message()
    assert message["tool_call_id"] == "c3"
    assert message["content"] == result.content


# --- rendering -------------------------------------------------------------------------------


def test_rendering_sorts_keys_so_insertion_order_does_not_matter():
    one = {"b": 1, "a": {"y": 2, "x": 3}}
    two = {"a": {"x": 3, "y": 2}, "b": 1}
    assert render_result(one) == render_result(two) == '{"a": {"x": 3, "y": 2}, "b": 1}'


def test_rendering_keeps_non_ascii_text():
    assert render_result({"city": "Zürich"}) == '{"city": "Zürich"}'


def test_rendering_falls_back_to_str_for_non_json_values():
    assert render_result({"when": frozenset()}) == '{"when": "frozenset()"}'


@pytest.mark.parametrize(
    ("value", "text"),
    [("plain", "plain"), (None, "null"), (3, "3"), ([1, "a"], '[1, "a"]'), (True, "true")],
)
def test_rendering_of_simple_values(value, text):
    assert render_result(value) == text


async def test_rendering_is_deterministic_across_calls():
    @tool
    def shuffled(seed: int) -> dict[str, int]:
        keys = ["c", "a", "b"] if seed else ["b", "c", "a"]
        return {k: i for i, k in enumerate(sorted(keys))}

    ts = Toolset([shuffled])
    first = await execute_call(ts, call("shuffled", {"seed": 0}))
    second = await execute_call(ts, call("shuffled", {"seed": 1}))
    assert first.content == second.content


# --- unknown tool ----------------------------------------------------------------------------


async def test_an_unknown_tool_is_an_error_result_with_a_did_you_mean_hint():
    result = await execute_call(TOOLSET, call("serch", {"query": "q"}))
    assert_error(result, "unknown_tool")
    assert "Unknown tool 'serch'." in result.content
    assert "Did you mean 'search'?" in result.content
    assert "Available: search, read_doc, explode." in result.content
    assert result.name == "serch"


async def test_an_unknown_tool_with_no_close_match_lists_the_tools_without_a_hint():
    result = await execute_call(TOOLSET, call("zzzzzz", {}))
    assert_error(result, "unknown_tool")
    assert "Did you mean" not in result.content
    assert "Available: search, read_doc, explode." in result.content


# --- bad JSON, non-object JSON, schema failures ----------------------------------------------


@pytest.mark.parametrize("text", ['{"query": ', "{'query': 'q'}", "query=q", '{"query": "q"}}'])
async def test_invalid_json_is_an_error_result_asking_for_a_json_object(text):
    result = await execute_call(TOOLSET, call("search", text))
    assert_error(result, "bad_json")
    assert "not valid JSON" in result.content
    assert "'search'" in result.content
    assert "send a JSON object" in result.content


async def test_the_bad_json_message_says_where_parsing_failed():
    result = await execute_call(TOOLSET, call("search", '{"query": }'))
    assert "at char 10" in result.content


@pytest.mark.parametrize(
    ("text", "type_name"),
    [('["q"]', "list"), ('"q"', "str"), ("3", "int"), ("null", "NoneType"), ("true", "bool")],
)
async def test_json_that_is_not_an_object_is_an_error_result(text, type_name):
    result = await execute_call(TOOLSET, call("search", text))
    assert_error(result, "bad_json")
    assert "must be a JSON object" in result.content
    assert f"got {type_name}" in result.content


async def test_arguments_failing_the_schema_are_an_error_result_naming_the_argument():
    result = await execute_call(TOOLSET, call("search", {"query": "q", "limit": "many"}))
    assert_error(result, "bad_arguments")
    assert "do not match its schema" in result.content
    assert "limit: 'many' is not of type 'integer'" in result.content


async def test_a_missing_required_argument_is_an_error_result():
    result = await execute_call(TOOLSET, call("search", {}))
    assert_error(result, "bad_arguments")
    assert "'query' is a required property" in result.content


async def test_an_extra_argument_is_an_error_result():
    result = await execute_call(TOOLSET, call("read_doc", {"key": "a", "mode": "fast"}))
    assert_error(result, "bad_arguments")
    assert "'mode'" in result.content


async def test_a_schema_error_report_lists_at_most_five_problems():
    properties = {f"p{i}": {"type": "integer"} for i in range(8)}
    t = Tool(name="many", parameters={"type": "object", "properties": properties})
    bad = {f"p{i}": "x" for i in range(8)}
    result = await execute_call(Toolset([t]), call("many", bad))
    assert_error(result, "bad_arguments")
    assert result.content.count("is not of type") == 5


async def test_a_call_that_fails_validation_never_reaches_the_tool():
    ran: list[str] = []

    @tool
    def record(key: str) -> str:
        ran.append(key)
        return key

    await execute_call(Toolset([record]), call("record", {"key": 1}))
    assert ran == []


# --- a tool that raises ----------------------------------------------------------------------


async def test_a_tool_that_raises_is_an_error_result_naming_the_exception():
    result = await execute_call(TOOLSET, call("explode", {"reason": "this"}))
    assert_error(result, "tool_raised")
    assert result.content == "Error: Tool 'explode' raised ValueError: cannot handle this"


async def test_a_sync_tool_that_raises_is_an_error_result():
    @tool
    def divide(a: int, b: int) -> float:
        return a / b

    result = await execute_call(Toolset([divide]), call("divide", {"a": 1, "b": 0}))
    assert_error(result, "tool_raised")
    assert "ZeroDivisionError" in result.content


async def test_a_tool_raising_its_own_timeout_error_is_reported_as_raised_not_timed_out():
    @tool(timeout_s=60.0)
    async def fetch(url: str) -> str:
        raise TimeoutError("upstream took too long")

    result = await execute_call(Toolset([fetch]), call("fetch", {"url": "u"}))
    assert_error(result, "tool_raised")
    assert "TimeoutError: upstream took too long" in result.content


async def test_a_tool_without_a_timeout_raising_timeout_error_is_an_error_result():
    @tool(timeout_s=None)
    async def fetch(url: str) -> str:
        raise TimeoutError("upstream took too long")

    result = await execute_call(Toolset([fetch]), call("fetch", {"url": "u"}))
    assert_error(result, "tool_raised")


async def test_a_failing_call_does_not_cancel_its_siblings():
    results: dict[str, ToolResult] = {}

    async def run(c: ToolCall) -> None:
        results[c.id] = await execute_call(TOOLSET, c)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, call("explode", {"reason": "x"}, call_id="bad"))
        tg.start_soon(run, call("search", {"query": "q"}, call_id="good"))
    assert results["bad"].is_error
    assert not results["good"].is_error


# --- timeouts --------------------------------------------------------------------------------


async def test_a_tool_that_times_out_is_an_error_result_with_the_fix():
    never = anyio.Event()

    @tool(timeout_s=0.01)
    async def hang(key: str) -> str:
        await never.wait()
        return key

    result = await execute_call(Toolset([hang]), call("hang", {"key": "a"}))
    assert_error(result, "timeout")
    assert "Tool 'hang' timed out after" in result.content
    assert "It is not idempotent: do not call it again" in result.content
    assert "retried" not in result.content
    assert result.outcome_known  # an async tool is stopped: nothing runs on


async def test_a_sync_tool_that_hangs_times_out_too():
    release = threading.Event()

    @tool(timeout_s=0.01)
    def hang(key: str) -> str:
        release.wait(timeout=60)
        return key

    try:
        result = await execute_call(Toolset([hang]), call("hang", {"key": "a"}))
    finally:
        release.set()
    assert_error(result, "timeout")


async def test_a_tool_without_a_timeout_is_not_cut_short():
    @tool(timeout_s=None)
    async def slowish(key: str) -> str:
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        return key

    result = await execute_call(Toolset([slowish]), call("slowish", {"key": "a"}))
    assert not result.is_error
    assert result.content == "a"


# --- size cap --------------------------------------------------------------------------------


def _sized(cap: int | None) -> Toolset:
    @tool(result_cap=cap)
    def blob(n: int) -> str:
        return "x" * n

    return Toolset([blob])


async def test_a_result_over_the_size_cap_is_an_error_result_naming_size_and_cap():
    result = await execute_call(_sized(1000), call("blob", {"n": 1234}))
    assert_error(result, "too_large")
    assert "1,234 characters, over its cap of 1,000" in result.content
    assert "ask for less or raise the tool's result_cap" in result.content


async def test_a_result_exactly_at_the_cap_is_returned():
    result = await execute_call(_sized(1000), call("blob", {"n": 1000}))
    assert not result.is_error
    assert len(result.content) == 1000


async def test_the_cap_counts_the_rendered_json_not_the_raw_value():
    @tool(result_cap=10)
    def keys(n: int) -> list[int]:
        return list(range(n))

    result = await execute_call(Toolset([keys]), call("keys", {"n": 5}))  # "[0, 1, 2, 3, 4]"
    assert_error(result, "too_large")


async def test_no_cap_means_any_size():
    result = await execute_call(_sized(None), call("blob", {"n": 100_000}))
    assert not result.is_error


async def test_a_result_that_cannot_be_rendered_is_an_error_result():
    @tool
    def weird(n: int) -> dict[Any, str]:
        return {(n, n): "tuple keys are not JSON"}

    result = await execute_call(Toolset([weird]), call("weird", {"n": 1}))
    assert_error(result, "tool_raised")
    assert "'weird'" in result.content


# --- cancellation ----------------------------------------------------------------------------


async def test_cancellation_propagates_instead_of_becoming_an_error_result():
    never = anyio.Event()
    started = anyio.Event()
    cancelled: list[bool] = []

    @tool(timeout_s=60.0)
    async def hang(key: str) -> str:
        started.set()
        try:
            await never.wait()
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return key

    results: list[ToolResult] = []

    async def run() -> None:
        results.append(await execute_call(Toolset([hang]), call("hang", {"key": "a"})))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        tg.cancel_scope.cancel()

    assert results == []
    assert cancelled == [True]


async def test_an_outer_deadline_is_not_mistaken_for_the_tools_timeout():
    never = anyio.Event()

    @tool(timeout_s=60.0)
    async def hang(key: str) -> str:
        await never.wait()
        return key

    results: list[ToolResult] = []
    with anyio.move_on_after(0.01) as scope:
        results.append(await execute_call(Toolset([hang]), call("hang", {"key": "a"})))
    assert scope.cancelled_caught
    assert results == []


async def test_a_timed_out_sync_write_is_unknown_until_its_thread_really_ends():
    release = threading.Event()
    store: list[str] = []
    abandoned: list[tuple[str, Any]] = []
    ended = threading.Event()

    # The deadline must fire after a worker thread picked the call up (else it never runs):
    # half a second is ample even on a loaded machine.
    @tool(timeout_s=0.5, write_targets="doc:{key}")
    def write(key: str) -> str:
        release.wait(timeout=60)
        store.append(key)
        return f"wrote {key}"

    def on_abandon(call: ToolCall, thread: Any) -> None:
        abandoned.append((call.id, thread))
        thread.on_end(lambda t: ended.set())

    try:
        result = await execute_call(
            Toolset([write]), call("write", {"key": "a"}), on_abandon=on_abandon
        )
        assert_error(result, "timeout")
        assert not result.outcome_known
        assert "still running in its thread, so whether it took effect is unknown" in (
            result.content
        )
        assert "It is not idempotent: do not call it again" in result.content
        assert "retried" not in result.content
        assert [cid for cid, _ in abandoned] == ["call_1"]
        assert store == []  # told "timed out", not written yet
    finally:
        release.set()
    assert await anyio.to_thread.run_sync(ended.wait, 10)
    assert store == ["a"]  # the write landed after the timeout
    assert result.outcome_known
    assert result.thread is not None
    assert result.thread.value == "wrote a"
    assert result.thread.error is None


async def test_an_idempotent_tool_that_times_out_says_a_second_call_is_safe():
    never = anyio.Event()

    @tool(timeout_s=0.01, idempotent=True, write_targets="doc:{key}")
    async def put(key: str) -> str:
        await never.wait()
        return key

    result = await execute_call(Toolset([put]), call("put", {"key": "a"}))
    assert_error(result, "timeout")
    assert "It is idempotent: calling it again with the same arguments is safe." in (result.content)


async def test_a_cancelled_sync_tool_is_reported_as_abandoned():
    release = threading.Event()
    entered = threading.Event()
    abandoned: list[str] = []

    @tool(timeout_s=60.0)
    def hang(key: str) -> str:
        entered.set()
        release.wait(timeout=60)
        return key

    try:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await execute_call(
                    Toolset([hang]),
                    call("hang", {"key": "a"}),
                    on_abandon=lambda c, t: abandoned.append(c.id),
                )

            tg.start_soon(run)
            await anyio.to_thread.run_sync(entered.wait, 10)
            tg.cancel_scope.cancel()
    finally:
        release.set()
    assert abandoned == ["call_1"]


# --- idempotency keys ------------------------------------------------------------------------


async def test_a_tool_that_accepts_an_idempotency_key_gets_it_and_the_model_never_sees_it():
    seen: list[str | None] = []

    @tool(write_targets="note:{key}")
    async def append(key: str, idempotency_key: str | None = None) -> str:
        seen.append(idempotency_key)
        return key

    assert append.effect.accepts_idempotency_key
    assert "idempotency_key" not in append.parameters["properties"]
    toolset = Toolset([append, search])
    result = await execute_call(toolset, call("append", {"key": "a"}), idempotency_key="run:c1")
    assert not result.is_error
    await execute_call(toolset, call("append", {"key": "a"}))
    assert seen == ["run:c1", None]
    sneaky = await execute_call(toolset, call("append", {"key": "a", "idempotency_key": "x"}))
    assert_error(sneaky, "bad_arguments")  # the model cannot choose the key
    assert not search.effect.accepts_idempotency_key
    hits = await execute_call(toolset, call("search", {"query": "q"}), idempotency_key="k")
    assert not hits.is_error  # a tool that takes no key is not handed one


async def test_a_sync_call_whose_deadline_passes_before_it_starts_never_runs():
    ran: list[str] = []

    @tool(timeout_s=0.05, write_targets="doc:{key}")
    def write(key: str) -> str:
        ran.append(key)
        return key

    limiter = anyio.to_thread.current_default_thread_limiter()
    total = limiter.total_tokens
    limiter.total_tokens = 1
    release = anyio.Event()

    async def hold_the_only_worker(*, task_status: Any) -> None:
        async with limiter:
            task_status.started()
            await release.wait()

    try:
        async with anyio.create_task_group() as tg:
            await tg.start(hold_the_only_worker)  # the call must wait for a worker
            result = await execute_call(Toolset([write]), call("write", {"key": "a"}))
            release.set()
    finally:
        limiter.total_tokens = total
    await anyio.sleep(0.05)
    assert_error(result, "timeout")
    assert "before it started, so it did not run" in result.content
    assert result.outcome_known
    assert ran == []
