"""Claims about certified speculation (arm F+spec), on the scripted engine."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings

from harness import Manifest, Task, Toolset, tool
from harness.certify.speculation import folded_call_key, predict, speculation_safe
from harness.errors import HarnessError
from harness.journal import Journal
from harness.loop import FlattenSettings, LoopConfig, run_loop
from harness.loop.config import Policy
from harness.messages import Message, ToolCall
from harness.testing import ScriptedEngine
from harness.tools.effects import Effect
from tests.doubles import MANIFEST, report_task, seeded_store
from tests.strategies import speculation_scripts

pytestmark = pytest.mark.anyio

KEYS = ["a", "b", "c", "d"]
EAGER = FlattenSettings(eager=True)
SPEC = FlattenSettings(eager=True, speculate=True)


class World:
    """A document store whose tools record every start, finish and cancellation."""

    def __init__(self, keys: Sequence[str], *, delay: float = 0.0) -> None:
        self.docs = {k: f"body of {k}" for k in keys}
        self.log: list[str] = []
        self.started: list[tuple[str, str, float]] = []
        self.finished: Counter[tuple[str, str]] = Counter()
        self.cancelled: list[tuple[str, str]] = []
        self.block: set[str] = set()  # keys whose read never ends (until cancelled)
        self.delay = delay
        self.all_blocked = anyio.Event()  # every blocked key has started

    def fingerprint(self) -> str:
        return json.dumps({"docs": self.docs, "log": self.log}, sort_keys=True)

    async def _run(self, name: str, key: str) -> None:
        self.started.append((name, key, time.monotonic()))
        if self.block and self.block <= {k for _, k, _ in self.started}:
            self.all_blocked.set()
        try:
            if key in self.block:
                await anyio.sleep_forever()
            await anyio.sleep(self.delay)
        except anyio.get_cancelled_exc_class():
            self.cancelled.append((name, key))
            raise
        self.finished[(name, key)] += 1

    def toolset(self) -> Toolset:
        @tool(read_only=True, read_targets="doc:{key}")
        async def read_doc(key: str, upper: bool = False) -> dict[str, Any]:
            """Read one document."""
            await self._run("read_doc", key)
            body = self.docs.get(key, "")
            return {"key": key, "body": body.upper() if upper else body}

        @tool(idempotent=True, write_targets="doc:{key}", read_targets=())
        async def write_doc(key: str, body: str) -> str:
            """Write a document (idempotent, takes no key: never speculable)."""
            await self._run("write_doc", key)
            self.docs[key] = body
            return "ok"

        @tool(idempotent=True, write_targets="doc:{key}", read_targets=(), speculable=True)
        async def stamp_doc(key: str, stamp: str, idempotency_key: str | None = None) -> str:
            """Stamp a document (idempotent, keyed, opted in to speculation)."""
            await self._run("stamp_doc", key)
            self.docs[key] = self.docs.get(key, "") + f" [{stamp}]" * (
                stamp not in self.docs.get(key, "")
            )
            return "stamped"

        @tool(write_targets="log", read_targets="log")
        async def append_log(line: str) -> int:
            """Append to the log (not idempotent)."""
            await self._run("append_log", line)
            self.log.append(line)
            return len(self.log)

        return Toolset([read_doc, write_doc, stamp_doc, append_log], name="world")


SPEC_MANIFEST = Manifest.from_dict(
    {
        "skills": {
            "survey": {
                "phases": [
                    {
                        "name": "read",
                        "kind": "fan_out",
                        "tools": ["read_doc"],
                        "slots": "input:keys",
                        "args": {"read_doc.key": "input:keys"},
                    },
                    {
                        "name": "write",
                        "kind": "chain",
                        "tools": ["write_doc", "append_log"],
                        "args": {"write_doc.body": "result:read", "write_doc.key": "input:out"},
                    },
                ]
            },
            "rewrite": {
                "phases": [
                    {
                        "name": "put",
                        "kind": "fan_out",
                        "tools": ["write_doc"],
                        "slots": "input:keys",
                        "args": {"write_doc.key": "input:keys", "write_doc.body": "input:body"},
                    }
                ]
            },
            "stamp": {
                "phases": [
                    {
                        "name": "stamp",
                        "kind": "fan_out",
                        "tools": ["stamp_doc"],
                        "slots": "input:keys",
                        "args": {"stamp_doc.key": "input:keys", "stamp_doc.stamp": "input:stamp"},
                    }
                ]
            },
            "follow_up": {
                "phases": [
                    {
                        "name": "first",
                        "kind": "fan_out",
                        "tools": ["read_doc"],
                        "slots": "input:keys",
                        "args": {"read_doc.key": "input:keys"},
                    },
                    {
                        "name": "second",
                        "kind": "fan_out",
                        "tools": ["read_doc"],
                        "args": {"read_doc.key": "result:first"},
                    },
                ]
            },
        }
    },
    source="tests/test_speculation.py",
)


def _task(skill: str, keys: Sequence[str], **inputs: Any) -> Task:
    return Task(
        id=f"{skill}-{len(keys)}",
        prompt=f"Work on {', '.join(keys)}.",
        skill=skill,
        inputs={"keys": list(keys), **inputs},
    )


def _reads(*keys: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"name": "read_doc", "arguments": {"key": k, **extra}} for k in keys]


def _scripted(replies: list[Any], **engine: Any) -> ScriptedEngine:
    it = iter(replies)

    def script(messages: Sequence[Message], tools: Sequence[Any]) -> Any:
        return next(it, "done")

    return ScriptedEngine(script=script, **engine)


async def _run(
    world: World,
    task: Task,
    flatten: FlattenSettings,
    replies: list[Any] | None = None,
    policy: Policy = "model",
    **engine: Any,
) -> Any:
    return await run_loop(
        _scripted(replies or [], **engine),
        world.toolset(),
        task,
        LoopConfig(arm="F", policy=policy, flatten=flatten),
        manifest=SPEC_MANIFEST,
    )


async def test_a_hit_reuses_the_speculated_result_so_each_tool_runs_once() -> None:
    world = World(KEYS, delay=0.02)
    replies: list[Any] = [[c] for c in _reads(*KEYS)] + ["done"]
    result = await _run(world, _task("survey", KEYS), SPEC, replies, overhead_ms=10)
    assert world.finished == Counter({("read_doc", k): 1 for k in KEYS})
    assert [c.mode for c in result.call_records] == ["speculated"] * len(KEYS)
    (window,) = result.windows
    assert (window.spec_predicted, window.spec_hits, window.spec_misses) == (4, 4, 0)
    assert window.spec_cancelled == 0
    assert result.summary.speculate
    assert result.summary.extra["speculation"]["hits"] == 4


async def test_speculated_calls_start_before_the_model_emits_them() -> None:
    world = World(KEYS)
    replies: list[Any] = [[c] for c in _reads(*KEYS)] + ["done"]
    engine = _scripted(replies, overhead_ms=10)
    await run_loop(
        engine, world.toolset(), _task("survey", KEYS),
        LoopConfig(arm="F", flatten=SPEC), manifest=SPEC_MANIFEST,
    )  # fmt: skip
    last_read = engine.requests[len(KEYS) - 1]
    starts = {key: at for name, key, at in world.started if name == "read_doc"}
    assert starts["d"] < last_read.finished  # d started before the turn that emitted it ended
    assert all(at <= engine.requests[0].finished for at in starts.values())  # prefetched


async def test_a_miss_runs_the_emitted_call_and_the_unmatched_speculation_is_discarded() -> None:
    world = World(KEYS)
    replies: list[Any] = [[c] for c in _reads("a", "b", "c")] + [_reads("d", upper=True)]
    replies.append("done")
    result = await _run(world, _task("survey", KEYS), SPEC, replies, overhead_ms=5)
    d_call = result.calls[3]
    assert json.loads(result.results[d_call.id].content)["body"] == "BODY OF D"
    assert result.call_records[3].mode == "eager"
    (window,) = result.windows
    assert (window.spec_hits, window.spec_misses, window.spec_cancelled) == (3, 1, 1)
    assert window.spec_wasted_s is not None
    assert window.spec_wasted_s >= 0
    assert "body of d" not in json.dumps(result.messages)  # the speculated plain read: unseen


async def test_an_unmatched_speculation_is_cancelled_and_never_visible() -> None:
    world = World(KEYS)
    world.block = {"c", "d"}  # these reads never end unless cancelled
    replies: list[Any] = [[c] for c in _reads("a", "b")] + ["done", "done"]
    result = await _run(world, _task("survey", KEYS), SPEC, replies, overhead_ms=5)
    assert sorted(world.cancelled) == [("read_doc", "c"), ("read_doc", "d")]
    assert [c.name for c in result.calls] == ["read_doc", "read_doc"]
    assert all(r.call_id.startswith("call_") for r in result.call_records)
    assert "body of c" not in json.dumps(result.messages)
    (window,) = result.windows
    assert (window.spec_hits, window.spec_cancelled) == (2, 2)


async def test_a_tool_without_a_safe_effect_never_starts_early() -> None:
    world = World(KEYS)
    writes = [[{"name": "write_doc", "arguments": {"key": k, "body": "x"}}] for k in KEYS]
    engine = _scripted([*writes, "done"], overhead_ms=10)
    result = await run_loop(
        engine, world.toolset(), _task("rewrite", KEYS, body="x"),
        LoopConfig(arm="F", flatten=SPEC), manifest=SPEC_MANIFEST,
    )  # fmt: skip
    assert [w.spec_predicted for w in result.windows] == [0]
    for i, (name, key, at) in enumerate(world.started):
        assert (name, key) == ("write_doc", KEYS[i])
        assert at >= engine.requests[i].finished  # started only once it was emitted


async def test_an_opted_in_keyed_idempotent_tool_is_speculated_at_window_open() -> None:
    world = World(KEYS)
    stamps = [[{"name": "stamp_doc", "arguments": {"key": k, "stamp": "ok"}}] for k in KEYS]
    engine = _scripted([*stamps, "done"], overhead_ms=10)
    result = await run_loop(
        engine, world.toolset(), _task("stamp", KEYS, stamp="ok"),
        LoopConfig(arm="F", flatten=SPEC), manifest=SPEC_MANIFEST,
    )  # fmt: skip
    assert result.windows[0].spec_hits == len(KEYS)
    starts = {key: at for _, key, at in world.started}
    assert starts["d"] < engine.requests[len(KEYS) - 1].started  # before d was generated
    assert starts["a"] >= engine.requests[0].finished  # writes are never prefetched
    assert world.finished == Counter({("stamp_doc", k): 1 for k in KEYS})


def test_only_read_only_or_opted_in_keyed_idempotent_tools_are_speculation_safe() -> None:
    tools = World(KEYS).toolset()
    assert speculation_safe(tools["read_doc"])
    assert speculation_safe(tools["stamp_doc"])
    assert not speculation_safe(tools["write_doc"])
    assert not speculation_safe(tools["append_log"])
    assert not speculation_safe(None)
    assert Effect.from_mcp({"idempotentHint": True, "speculable": True}).speculable


def test_prediction_follows_the_manifest_argument_sources() -> None:
    tools = World(KEYS).toolset()
    read = SPEC_MANIFEST.skill("survey").phases[0]
    assert [p.arguments for p in predict(read, tools, {"keys": KEYS})] == [{"key": k} for k in KEYS]
    second = SPEC_MANIFEST.skill("follow_up").phases[1]
    visible = [json.dumps({"key": "a", "next": "q"})]
    found = {p.arguments["key"] for p in predict(second, tools, {"keys": ["a"]}, visible)}
    assert {"a", "q"} <= found  # predicted from what is visible
    assert all(p.source == "result" for p in predict(second, tools, {}, visible))
    put = SPEC_MANIFEST.skill("rewrite").phases[0]
    assert predict(put, tools, {"keys": KEYS, "body": "x"}) == []  # write_doc is not safe


def test_matching_uses_the_certifier_canonical_form() -> None:
    tools = World(KEYS).toolset()
    assert folded_call_key(
        tools["read_doc"], "read_doc", {"key": "a", "upper": 1}
    ) == folded_call_key(tools["read_doc"], "read_doc", {"upper": True, "key": "a"})


async def test_prediction_from_visible_results_hits_in_a_later_phase() -> None:
    world = World(["a", "b", "q"])
    world.docs["a"] = "q"  # the next document, named in a's result
    replies: list[Any] = [[c] for c in _reads("a", "b")] + [[c] for c in _reads("q")] + ["done"]
    result = await _run(world, _task("follow_up", ["a", "b"]), SPEC, replies, overhead_ms=5)
    assert [c.mode for c in result.call_records] == ["speculated"] * 3
    assert (result.windows[1].spec_predicted or 0) >= 1
    assert world.finished[("read_doc", "q")] == 1


async def test_a_serial_write_invalidates_prefetched_reads() -> None:
    world = World(KEYS)
    write = [{"name": "write_doc", "arguments": {"key": "a", "body": "new"}}]
    replies: list[Any] = [write, *[[c] for c in _reads(*KEYS)], "done"]
    spec = await _run(world, _task("survey", KEYS, out="z"), SPEC, replies, overhead_ms=5)
    plain = World(KEYS)
    eager = await _run(plain, _task("survey", KEYS, out="z"), EAGER, replies, overhead_ms=5)
    assert spec.messages == eager.messages
    assert "new" in spec.results[spec.calls[1].id].content
    assert spec.summary.extra["speculation"]["invalidated"] >= 1


async def test_cancelling_the_run_cancels_its_speculations() -> None:
    world = World(KEYS)
    world.block = set(KEYS)
    engine = _scripted([[c] for c in _reads(*KEYS)], overhead_ms=60_000)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(
                partial(
                    run_loop, engine, world.toolset(), _task("survey", KEYS),
                    LoopConfig(arm="F", flatten=SPEC), manifest=SPEC_MANIFEST,
                )
            )  # fmt: skip
            await world.all_blocked.wait()
            scope.cancel()
    assert sorted(k for _, k in world.cancelled) == KEYS


async def test_with_a_journal_a_speculation_is_journaled_as_speculative_never_as_a_call(
    tmp_path: Path,
) -> None:
    world = World(KEYS)
    world.block = {"d"}
    replies: list[Any] = [[c] for c in _reads("a", "b", "c")] + ["done", "done"]
    directory = tmp_path / "run"
    with Journal.create(directory, "run-spec") as journal:
        first = await run_loop(
            _scripted(list(replies), overhead_ms=5), world.toolset(), _task("survey", KEYS),
            LoopConfig(arm="F", flatten=SPEC), manifest=SPEC_MANIFEST, journal=journal,
        )  # fmt: skip
        state = journal.state
    spec_intents = {c: e for c, e in state.intents.items() if c.startswith("spec_")}
    assert len(spec_intents) == len(KEYS)
    assert all(e["mode"] == "speculative" for e in spec_intents.values())
    assert {c: state.intents[c]["mode"] for c in state.intents if c.startswith("call_")} == {
        "call_0": "speculated", "call_1": "speculated", "call_2": "speculated",
    }  # fmt: skip
    with Journal.resume(directory) as journal:
        again = await run_loop(
            _scripted(list(replies), overhead_ms=5), World(KEYS).toolset(), _task("survey", KEYS),
            LoopConfig(arm="F", flatten=SPEC), manifest=SPEC_MANIFEST, journal=journal,
        )  # fmt: skip
    replayed = again.summary.extra["journal"]["replayed"]
    assert sorted(replayed) == ["call_0", "call_1", "call_2"]  # real calls, from their entries
    assert again.messages == first.messages


def _replies(script: list[Any]) -> list[Any]:
    out: list[Any] = []
    for step in script:
        if step[0] == "read":
            out.append(_reads(step[1], **({"upper": True} if step[2] else {})))
        elif step[0] == "write":
            out.append([{"name": "write_doc", "arguments": {"key": step[1], "body": "w"}}])
        else:
            out.append([{"name": "append_log", "arguments": {"line": step[1]}}])
    return [*out, "done", "done"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(speculation_scripts(KEYS))
def test_F_spec_gives_the_results_transcript_and_store_of_F_for_any_model(
    drawn: tuple[list[str], list[Any]],
) -> None:
    keys, script = drawn
    replies = _replies(script)

    async def one(world: World, flatten: FlattenSettings) -> Any:
        try:
            return await _run(world, _task("survey", keys, out="z"), flatten, list(replies))
        except HarnessError as exc:  # a budget (a stuck model): both arms must hit it alike
            return type(exc).__name__

    async def both() -> tuple[Any, Any, World, World]:
        plain, spec = World(KEYS), World(KEYS)
        return await one(plain, EAGER), await one(spec, SPEC), plain, spec

    f, s, plain, spec = anyio.run(both)
    assert spec.fingerprint() == plain.fingerprint()
    if isinstance(f, str) or isinstance(s, str):
        assert s == f
        return
    assert s.messages == f.messages
    assert {k: r.content for k, r in s.results.items()} == {
        k: r.content for k, r in f.results.items()
    }
    assert spec.fingerprint() == plain.fingerprint()
    assert s.answer == f.answer
    assert [t.prompt_tokens for t in s.turns] == [t.prompt_tokens for t in f.turns]


async def test_F_spec_on_the_gold_policy_matches_F_on_the_shared_doubles() -> None:
    from tests.doubles import make_toolset

    runs = []
    for flatten in (FlattenSettings(), SPEC):
        store = seeded_store(KEYS)
        result = await run_loop(
            ScriptedEngine(), make_toolset(store), report_task(KEYS),
            LoopConfig(arm="F", policy="gold", flatten=flatten), manifest=MANIFEST,
        )  # fmt: skip
        runs.append((result.messages, store.fingerprint(), len(result.turns)))
    assert runs[0] == runs[1]


def test_a_call_with_arguments_that_are_not_json_never_matches() -> None:
    tools = World(KEYS).toolset()
    read = SPEC_MANIFEST.skill("survey").phases[0]
    (first, *_) = predict(read, tools, {"keys": KEYS})
    assert first.tool == "read_doc"
    assert ToolCall("x", "read_doc", "{bad").args.value is None


def test_draft_calls_come_from_the_inputs_not_from_gold_and_skip_calls_made() -> None:
    import json

    from harness.certify.speculation import draft_calls
    from harness.messages import ToolCall
    from harness.skills.manifest import Manifest
    from harness.tools import Toolset, tool

    @tool(read_only=True, read_targets="doc:{key}")
    def read_doc(key: str) -> str:
        return key

    manifest = Manifest.from_dict(
        {
            "skills": {
                "survey": {
                    "phases": [
                        {
                            "name": "read",
                            "kind": "fan_out",
                            "tools": ["read_doc"],
                            "slots": "input:keys",
                            "args": {"read_doc.key": "input:keys"},
                        }
                    ]
                }
            }
        }
    )
    made = [ToolCall("c0", "read_doc", json.dumps({"key": "d1"}))]
    drafts = draft_calls(
        manifest.skill("survey").phases, Toolset([read_doc]), {"keys": ["d1", "d2", "d3"]}, [], made
    )
    assert [d.arguments for d in drafts] == ['{"key": "d2"}', '{"key": "d3"}']
    # A value no input or visible result holds (a gold call the model might make) is never
    # drafted: with no inputs there is nothing to predict.
    assert (
        draft_calls(manifest.skill("survey").phases, Toolset([read_doc]), {"keys": []}, [], [])
        == ()
    )
