"""Call arguments are parsed totally and in bounded time (issue 40, item 4): past a limit the
call is a model mistake — the error result the model sees, in every arm — never an exception
out of run_loop or batch certification."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from harness import Task, Toolset, tool
from harness._bounded_json import MAX_DEPTH, JSONLimitError, loads_bounded, nesting
from harness.loop import LoopConfig, run_loop
from harness.messages import Arguments, ToolCall
from harness.testing import ScriptedEngine

HOSTILE = {
    "a 5,000-digit integer": '{"key": ' + "9" * 5000 + "}",
    "a float beyond the double range": '{"key": 1e400}',
    "NaN": '{"key": NaN}',
    "a list nested 500 deep": '{"key": ' + "[" * 500 + "]" * 500 + "}",
    "an object nested past the limit": '{"key": '
    + '{"a": ' * (MAX_DEPTH + 1)
    + "1"
    + "}" * (MAX_DEPTH + 1)
    + "}",
}


@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_arguments_are_a_model_mistake_with_a_sentence(raw: str) -> None:
    parsed = Arguments.parse(raw, "put")
    assert parsed.value is None
    assert parsed.problem is not None
    assert parsed.problem.startswith("Arguments for 'put' are refused:")
    with pytest.raises(ValueError):  # the other readers of a call's arguments: a ValueError
        ToolCall("c1", "put", raw).parsed_arguments()


def test_values_within_the_limits_parse_as_json_loads_does() -> None:
    text = json.dumps({"a": [1, 2.5, {"b": "c" * 1000}], "n": 10**99, "deep": [[[[]]]]})
    assert loads_bounded(text) == json.loads(text)
    assert nesting(loads_bounded(text)) == 5  # the object, then four lists
    with pytest.raises(JSONLimitError):
        loads_bounded(json.dumps({"n": 10**100}))  # 101 digits


@pytest.mark.parametrize("arm", ["S", "F", "P"])
@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
def test_no_arm_raises_on_hostile_arguments_and_the_model_sees_why(arm: str, raw: str) -> None:
    @tool(idempotent=True, write_targets="doc:{key}", read_targets=())
    async def put(key: Any) -> str:
        """Store a value."""
        return "ok"

    def model(messages: Any, tools: Any) -> Any:
        if any(m["role"] == "tool" for m in messages):
            return "done"
        return ToolCall("c1", "put", raw)

    async def main() -> str:
        task = Task(id="t", prompt="put", skill=None, inputs={})
        result = await run_loop(ScriptedEngine(model), Toolset([put]), task, LoopConfig(arm=arm))
        (tool_message,) = [m for m in result.messages if m["role"] == "tool"]
        return str(tool_message["content"])

    assert "are refused" in anyio.run(main)
