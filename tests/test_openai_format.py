"""Claims about converting OpenAI-format histories, and about runs that continue one."""

from __future__ import annotations

from typing import Any

import pytest

from harness import ConfigError, Task
from harness.loop import LoopConfig, run_loop
from harness.loop.openai_format import messages_from_openai, messages_to_openai
from harness.testing import ScriptedEngine
from tests.doubles import MANIFEST, make_toolset, report_task, seeded_store

KEYS = ["a", "b", "c"]


def earlier_conversation() -> list[dict[str, Any]]:
    return [
        {"role": "developer", "content": "You write summaries."},
        {"role": "user", "content": [{"type": "text", "text": "What does "}, {"type": "text", "text": "x say?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": "read_doc", "arguments": {"key": "x"}}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": '{"key": "x", "body": "hello"}'},
        {"role": "assistant", "content": "x says hello."},
    ]  # fmt: skip


def test_a_history_is_normalised_into_harness_messages() -> None:
    messages = messages_from_openai(earlier_conversation())
    assert messages[0] == {"role": "system", "content": "You write summaries."}
    assert messages[1]["content"] == "What does x say?"
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == '{"key": "x"}'
    assert messages[3]["name"] == "read_doc"  # a tool message gets its call's tool name


def test_harness_messages_go_back_as_plain_openai_messages() -> None:
    back = messages_to_openai(messages_from_openai(earlier_conversation()))
    assert "name" not in back[3]
    assert back[3] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": '{"key": "x", "body": "hello"}',
    }
    assert messages_from_openai(back) == messages_from_openai(earlier_conversation())


def test_sdk_objects_with_model_dump_are_read_as_messages() -> None:
    class SdkMessage:
        def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
            return {"role": "user", "content": "hi"}

    assert messages_from_openai([SdkMessage()]) == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("history", "says"),
    [
        ([{"role": "robot", "content": "x"}], "role 'robot'"),
        ([{"role": "tool", "content": "x"}], "no tool_call_id"),
        ([{"role": "tool", "tool_call_id": "c9", "content": "x"}], "matches no earlier call"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "'image_url'"),
        ([{"role": "user", "content": 3}], "content of type int"),
        ([42], "is a int, not a chat message"),
        (earlier_conversation()[:3], "have no tool message"),
        ([*earlier_conversation()[:3], {"role": "user", "content": "?"}], "before message 3"),
        (earlier_conversation() + earlier_conversation()[2:3], "repeats tool call id 'call_0'"),
        (earlier_conversation()[:4] + earlier_conversation()[3:4], "was answered already"),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}], "has no id"),
        ([{"role": "assistant", "tool_calls": [{"id": "c"}]}], "has no function name"),
        ([{"role": "assistant", "tool_calls": "x"}], "not a non-empty list"),
    ],
)
def test_every_bad_history_is_a_config_error_naming_the_message(
    history: list[Any], says: str
) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace("?", r"\?")):
        messages_from_openai(history)


def test_a_history_that_ends_with_the_models_answer_needs_a_new_prompt() -> None:
    with pytest.raises(ConfigError, match="ends with an assistant message"):
        Task.from_messages(earlier_conversation())
    with pytest.raises(ConfigError, match="no messages and no prompt"):
        Task.from_messages([])
    assert Task.from_messages(earlier_conversation(), prompt="Now more.").history


def continued_task(keys: list[str]) -> Task:
    gold = report_task(keys)
    task = Task.from_messages(
        earlier_conversation(), prompt=gold.prompt, skill="report", inputs={"keys": keys}
    )
    return Task(**{**task.__dict__, "gold_steps": gold.gold_steps, "gold_answer": gold.gold_answer})


@pytest.mark.anyio
@pytest.mark.parametrize("arm", ["S", "F"])
async def test_a_run_continues_an_openai_history_and_returns_openai_messages(arm: str) -> None:
    store = seeded_store(KEYS)
    engine = ScriptedEngine()
    result = await run_loop(
        engine,
        make_toolset(store),
        continued_task(KEYS),
        LoopConfig(arm=arm, policy="gold"),  # type: ignore[arg-type]
        manifest=MANIFEST,
    )
    first = engine.requests[0].messages
    assert first[:5] == messages_from_openai(earlier_conversation())
    assert first[5] == {"role": "user", "content": continued_task(KEYS).prompt}
    assert "call_0" not in {c.id for c in result.calls}  # the history's id is not reused
    assert store.docs["summary"] == "a + b + c"
    new = result.openai_messages(new_only=True)
    assert new[0]["role"] == "user"
    assert new[-1] == {
        "role": "assistant",
        "content": "Summary written.",
    }
    assert result.openai_messages()[
        : len(result.openai_messages()) - len(new)
    ] == messages_to_openai(messages_from_openai(earlier_conversation()))
    assert [w.n for w in result.windows] == ([len(KEYS)] if arm == "F" else [])


@pytest.mark.anyio
async def test_a_continued_run_gives_the_same_messages_in_S_and_F() -> None:
    runs = []
    for arm in ("S", "F"):
        result = await run_loop(
            ScriptedEngine(),
            make_toolset(seeded_store(KEYS)),
            continued_task(KEYS),
            LoopConfig(arm=arm, policy="gold"),  # type: ignore[arg-type]
            manifest=MANIFEST,
        )
        runs.append(result.openai_messages())
    assert runs[0] == runs[1]


def test_the_openai_sdks_own_message_objects_are_read_as_a_history() -> None:
    chat = pytest.importorskip("openai.types.chat")
    reply = chat.ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "read_doc", "arguments": '{"key": "a"}'}}
            ],
        }
    )  # fmt: skip
    history = [{"role": "user", "content": "Read a."}, reply]
    history.append({"role": "tool", "tool_call_id": "c1", "content": "alpha"})
    messages = messages_from_openai(history)
    assert messages[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_doc", "arguments": '{"key": "a"}'}}
        ],
    }  # fmt: skip
    assert messages[2]["name"] == "read_doc"
