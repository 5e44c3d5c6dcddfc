"""Arm F gives exactly S's results and final state where a window meets a discard or a budget:
a discarded reply does not count toward the stuck guard, a discarded call takes the later calls
of its reply with it, and no window call runs that S would not have reached (the mistake and
tool-failure budgets)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from harness import Manifest, Task, Toolset, UsageLimitExceeded, tool
from harness.certify.window import Window
from harness.loop import FlattenSettings, LoopConfig, run_loop
from harness.loop.budgets import Budgets
from harness.messages import ToolCall
from harness.testing import ScriptedEngine
from harness.tools.execute import ToolResult, ToolsetExecutor

pytestmark = pytest.mark.anyio

ARMS = (("S", False), ("F", False), ("F", True))


async def _race() -> None:
    for _ in range(3):
        await anyio.lowlevel.checkpoint()


def _results(messages: Sequence[dict[str, Any]]) -> list[str]:
    return [str(m.get("content", "")) for m in messages if m.get("role") == "tool"]


async def _run(
    arm: str, eager: bool, toolset: Toolset, script: Any, manifest: Manifest, inputs: dict[str, Any]
) -> Any:
    config = LoopConfig(arm=arm, max_turns=100, flatten=FlattenSettings(eager=eager))  # type: ignore[arg-type]
    task = Task(id="t", prompt="p", skill="s", inputs=inputs)
    return await run_loop(ScriptedEngine(script), toolset, task, config, manifest=manifest)


# -- a discarded reply is not a repeat (max_identical_calls) ---------------------------------


def _jobs(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="job:{name}", read_targets="job:{name}")
    async def submit(name: str) -> str:
        """Submit a job; its id is its name."""
        await _race()
        store[f"job:{name}"] = 0
        return name

    @tool(write_targets="job:{job}", read_targets="job:{job}")
    async def poll(job: str) -> str:
        """Poll a job (done after two polls)."""
        store[f"job:{job}"] += 1
        return "done" if store[f"job:{job}"] >= 2 else "running"

    return Toolset([submit, poll])


JOBS = Manifest.from_dict({"skills": {"s": {"phases": [
    {"name": "submit", "kind": "fan_out", "tools": ["submit"],
     "args": {"submit.name": "input:names"}},
    {"name": "wait", "kind": "chain", "tools": ["poll"], "args": {"poll.job": "result:submit"}},
]}}})  # fmt: skip


def _poller(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Any:
    res = _results(messages)
    if len(res) < 2:
        return {"name": "submit", "arguments": {"name": "xy"[len(res)]}}
    if res[-1] != "done":
        return {"name": "poll", "arguments": {"job": "y"}}
    return "done"


@pytest.mark.parametrize(("arm", "eager"), ARMS)
async def test_a_discarded_call_and_its_regeneration_count_once_toward_the_stuck_guard(
    arm: str, eager: bool
) -> None:
    store: dict[str, Any] = {}
    result = await _run(arm, eager, _jobs(store), _poller, JOBS, {"names": ["x", "y"]})
    assert result.answer == "done"
    assert store == {"job:x": 0, "job:y": 2}
    assert result.summary.discards == (1 if arm == "F" else 0)


# -- a discarded call takes the later calls of its reply with it -----------------------------


def _docs(store: dict[str, Any]) -> Toolset:
    store.setdefault("doc:a", "next is b")
    store["log"] = []

    @tool(read_only=True, read_targets="doc:{key}")
    async def read_doc(key: str) -> str:
        """Read a document."""
        return str(store.get(f"doc:{key}", ""))

    @tool(idempotent=True, write_targets="doc:{key}/status", read_targets=())
    async def set_status(key: str, status: str) -> str:
        """Set a document's status."""
        store[f"doc:{key}/status"] = status
        return status

    @tool(write_targets="log", read_targets=["log", "doc"])
    async def note(text: str) -> str:
        """Append to the audit log, with how many statuses are set."""
        await _race()
        n = sum(1 for k in store if k.endswith("/status"))
        store["log"].append(f"{text} ({n} set)")
        return f"logged with {n} statuses set"

    return Toolset([read_doc, set_status, note])


DOCS = Manifest.from_dict({"skills": {"s": {"phases": [
    {"name": "read", "kind": "fan_out", "tools": ["read_doc"],
     "args": {"read_doc.key": "input:keys"}},
    {"name": "act", "kind": "fan_out", "tools": ["set_status", "note"],
     "args": {"set_status.key": "result:read", "set_status.status": "model",
              "note.text": "model"}},
]}}})  # fmt: skip


def _reviewer(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Any:
    done = [
        c["function"]["name"]
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or ()
    ]
    if not done:
        return {"name": "read_doc", "arguments": {"key": "a"}}
    key = re.findall(r"\w+", _results(messages)[0])[-1]
    want = []
    if "set_status" not in done:
        want.append({"name": "set_status", "arguments": {"key": key, "status": "ok"}})
    if "note" not in done:
        want.append({"name": "note", "arguments": {"text": "reviewed"}})
    return want or "done"


@pytest.mark.parametrize(("arm", "eager"), ARMS)
async def test_the_later_calls_of_a_reply_are_discarded_with_its_discarded_call(
    arm: str, eager: bool
) -> None:
    store: dict[str, Any] = {}
    result = await _run(arm, eager, _docs(store), _reviewer, DOCS, {"keys": ["a", "b"]})
    assert [c.name for c in result.calls] == ["read_doc", "set_status", "note"]
    assert _results(result.messages) == ["next is b", "ok", "logged with 1 statuses set"]
    assert store["log"] == ["reviewed (1 set)"]
    # F: set_status needed the withheld read; note, after it in the same reply, goes with it.
    assert result.summary.discards == (2 if arm == "F" else 0)


# -- no window call runs that S would not have reached (the failure budget) ------------------

KEYS = ["a", "b", "c", "d", "e", "f"]


def _fetcher(store: dict[str, Any], good: set[str]) -> Toolset:
    @tool(idempotent=True, write_targets="seen:{key}", read_targets="doc:{key}")
    async def fetch(key: str) -> str:
        """Fetch a document and mark it seen (raises when it does not exist)."""
        await _race()
        store[f"seen:{key}"] = True
        if key not in good:
            raise KeyError(key)
        return "content of " + key

    return Toolset([fetch])


READS = Manifest.from_dict({"skills": {"s": {"phases": [
    {"name": "read", "kind": "fan_out", "tools": ["fetch"], "slots": "input:keys",
     "args": {"fetch.key": "input:keys"}}]}}})  # fmt: skip


def _reader(keys: list[str]) -> Any:
    def script(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Any:
        n = len(_results(messages))
        return {"name": "fetch", "arguments": {"key": keys[n]}} if n < len(keys) else "done"

    return script


@pytest.mark.parametrize(("arm", "eager"), ARMS)
async def test_a_window_stops_at_the_failure_S_stops_at_and_never_runs_a_call_past_it(
    arm: str, eager: bool
) -> None:
    store: dict[str, Any] = {}
    keys = KEYS[:5]
    with pytest.raises(UsageLimitExceeded, match="4 tool calls in a row"):
        await _run(arm, eager, _fetcher(store, {"e"}), _reader(keys), READS, {"keys": keys})
    assert sorted(store) == ["seen:a", "seen:b", "seen:c", "seen:d"]  # e: never reached


@pytest.mark.parametrize(("arm", "eager"), ARMS)
async def test_a_window_larger_than_the_failure_budget_still_runs_whole_when_calls_succeed(
    arm: str, eager: bool
) -> None:
    store: dict[str, Any] = {}
    good = {"a", "b", "e", "f"}  # c and d fail: a streak of 2, under the budget of 3
    result = await _run(arm, eager, _fetcher(store, good), _reader(KEYS), READS, {"keys": KEYS})
    assert result.answer == "done"
    assert sorted(store) == [f"seen:{k}" for k in KEYS]
    assert [r.n for r in result.windows] == ([6] if arm == "F" else [])
    assert result.summary.turns == 7  # one window, the same generation calls as S


def _budgets(**config: Any) -> Budgets:
    return Budgets(LoopConfig(**config), "t", "r", 40)


def _ok() -> ToolResult:
    return ToolResult("x", "fetch", "ok")


def _failed() -> ToolResult:
    return ToolResult("x", "fetch", "Error", is_error=True, error_kind="tool_raised")


def test_reach_is_what_the_remaining_budget_allows_checked_after_each_reply() -> None:
    budgets = _budgets(max_tool_failures=3, max_model_errors=3)
    one_per_turn = list(range(8))
    assert budgets.reach(one_per_turn, []) == 4  # 4 failures in a row: S stops after the 4th
    assert budgets.reach(one_per_turn, [_ok()] * 4) == 8
    assert budgets.reach(one_per_turn, [_failed()] * 2) == 4
    assert budgets.reach(one_per_turn, [_failed()] * 4) == 4  # S stops here
    assert budgets.reach(one_per_turn, [_failed(), _ok()]) == 6
    # Two calls in one reply: S runs both before it checks.
    assert budgets.reach([0, 1, 2, 3, 3, 4], [_failed()] * 4) == 5
    budgets.count.consecutive_tool_failures = 2
    assert budgets.reach(one_per_turn, []) == 2


async def test_a_window_with_reach_runs_in_runs_and_stops_where_reach_says() -> None:
    store: dict[str, Any] = {}
    budgets = _budgets(max_tool_failures=1, max_model_errors=1)
    calls = [ToolCall(f"call_{i}", "fetch", f'{{"key": "{k}"}}') for i, k in enumerate("abcd")]
    window = Window(
        "read",
        executor=ToolsetExecutor(_fetcher(store, {"a"})),
        reach=lambda cs, rs: budgets.reach(list(range(len(cs))), rs),
    )
    for call in calls:
        window.add(call)
    results = await window.results()
    assert [r.is_error for r in results] == [False, True, True]  # S stops after the 2nd failure
    assert sorted(store) == ["seen:a", "seen:b", "seen:c"]


async def test_read_only_calls_past_the_reach_run_in_the_same_concurrent_run() -> None:
    # A read-only call changes nothing, so the budget need not hold it back: the window
    # runs whole at once, and the results stop where S stops all the same.
    store: dict[str, Any] = {}
    budgets = _budgets(max_tool_failures=1, max_model_errors=1)
    calls = [ToolCall(f"call_{i}", "fetch", f'{{"key": "{k}"}}') for i, k in enumerate("abcd")]
    executor = ToolsetExecutor(_fetcher(store, {"a"}))
    runs: list[int] = []
    execute = executor.execute

    async def counted(call: ToolCall) -> Any:
        runs.append(len(store))
        return await execute(call)

    executor.execute = counted  # type: ignore[method-assign]
    window = Window(
        "read",
        executor=executor,
        reach=lambda cs, rs: budgets.reach(list(range(len(cs))), rs),
        harmless=lambda call: True,
    )
    for call in calls:
        window.add(call)
    results = await window.results()
    assert [r.is_error for r in results] == [False, True, True]  # S stops after the 2nd failure
    assert sorted(store) == ["seen:a", "seen:b", "seen:c", "seen:d"]  # d ran: it is harmless
    assert runs == [0, 0, 0, 0]  # all four started before any finished: one run
