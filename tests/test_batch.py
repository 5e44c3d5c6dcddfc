"""Claims about the one batch helper: ordered gather and the batched sample."""

from __future__ import annotations

import anyio
import pytest

from harness._concurrency import gather, settled
from harness.messages import ToolCall

pytestmark = pytest.mark.anyio


async def test_gather_returns_results_in_thunk_order_whatever_the_start_and_finish_order() -> None:
    started: list[int] = []
    finished: list[int] = []
    gates = [anyio.Event() for _ in range(3)]
    gates[2].set()

    async def one(i: int) -> int:
        started.append(i)
        await gates[i].wait()
        finished.append(i)
        if i > 0:  # each releases the one before it: they finish 2, 1, 0
            gates[i - 1].set()
        return i * 10

    out = await gather([lambda i=i: one(i) for i in range(3)], start_order=[1, 2, 0])
    assert out == [0, 10, 20]
    assert started == [1, 2, 0]
    assert finished == [2, 1, 0]


async def test_a_settled_failure_is_returned_and_its_siblings_still_finish() -> None:
    async def boom() -> int:
        raise ValueError("no")

    async def fine() -> int:
        await anyio.lowlevel.checkpoint()
        return 1

    out = await gather([lambda: settled(boom), lambda: settled(fine)])
    assert isinstance(out[0], ValueError)
    assert out[1] == 1


def test_arguments_are_parsed_once_and_carry_the_raw_text() -> None:
    call = ToolCall("c", "read_doc", '{"key": "a"}')
    assert call.args is call.args
    assert call.args.raw == '{"key": "a"}'
    assert call.args.value == {"key": "a"}
    assert ToolCall("c", "t", "  ").args.value == {}
    bad = ToolCall("c", "t", "[1]").args
    assert bad.value is None
    assert bad.problem is not None
    assert "JSON object" in bad.problem
