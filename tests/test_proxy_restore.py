"""Claims about serial restoration by meaning (harness.proxy.restore): for every workspace
task, the request the upstream gets at the end of a flattened run is byte for byte the one a
serial run sends, whatever the client does to the window that does not change it (arguments
re-serialised, results reordered, ``content`` spelled its own way); a real change passes
through, logged once and counted in the ledger."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from structlog.testing import capture_logs

from benchmarks.proxy_bench import GoldForcing, run_calls, workspace_effects
from harness.bench.workload import WorkloadTask, generate_tasks
from harness.loop.ledger import Ledger
from harness.loop.state import DEFAULT_LOOP_SYSTEM
from harness.messages import Message, ToolCall
from harness.proxy import ProxyConfig, build_app, in_process_client
from harness.proxy.ids import canonical_arguments
from harness.skills.manifest import Manifest
from harness.testing import ScriptedEngine
from harness.toolsets.workspace import load_workspace_manifest

pytestmark = pytest.mark.anyio

TASKS = generate_tasks()


def _without_none(message: Message) -> Message:
    """How the OpenAI SDK's ``model_dump(exclude_none=True)`` keeps a reply."""
    return {k: v for k, v in message.items() if v is not None}


def _respelled(arguments: str) -> str:
    """A client that parses the arguments and writes them back its own way (pydantic-ai's
    compact JSON), keys reversed, integers as floats."""

    def spell(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: spell(value[k]) for k in reversed(list(value))}
        if isinstance(value, list):
            return [spell(v) for v in value]
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    return json.dumps(spell(json.loads(arguments)), separators=(",", ":"))


class Client:
    """An agent loop over raw JSON: ``keep`` is how it stores a reply, ``respell`` how it
    writes a call's arguments back, ``reorder`` the order it sends a reply's results in."""

    def __init__(
        self,
        keep: Callable[[Message], Message] = _without_none,
        respell: Callable[[str], str] | None = None,
        reorder: bool = False,
        inputs: bool = True,
    ) -> None:
        self.keep = keep
        self.respell = respell
        self.reorder = reorder
        self.inputs = inputs

    def stored(self, message: Message) -> Message:
        kept = self.keep(dict(message))
        if self.respell is not None and kept.get("tool_calls"):
            kept["tool_calls"] = [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": self.respell(c["function"]["arguments"]),
                    },
                }
                for c in kept["tool_calls"]
            ]
        return kept

    async def run(self, http: Any, wt: WorkloadTask, arm: str) -> list[Any]:
        toolset, _ = wt.toolset(latency=0.0)
        messages: list[Message] = [
            {"role": "system", "content": DEFAULT_LOOP_SYSTEM},
            {"role": "user", "content": wt.task.prompt},
        ]
        responses = []
        for _ in range(60):
            request = {
                "model": "m",
                "messages": messages,
                "tools": toolset.specs(),
                "harness_skill": wt.skill,
            }
            if self.inputs:
                request["harness_inputs"] = dict(wt.task.inputs)
            response = await http.post(
                "/chat/completions", json=request, headers={"X-Harness-Arm": arm}
            )
            assert response.status_code == 200, response.text
            responses.append(response)
            message = response.json()["choices"][0]["message"]
            messages.append(self.stored(message))
            raw = message.get("tool_calls") or []
            if not raw:
                return responses
            results = await run_calls(toolset, [ToolCall.from_openai(c) for c in raw])
            messages.extend(reversed(results) if self.reorder else results)
        raise AssertionError(f"{wt.id} did not finish in 60 round trips")


def _config(**extra: Any) -> ProxyConfig:
    toolset, _ = TASKS[0].toolset()
    return ProxyConfig(
        effects=workspace_effects(toolset), manifest=load_workspace_manifest(), **extra
    )


async def _last_request(
    client: Client, wt: WorkloadTask, arm: str, config: ProxyConfig | None = None
) -> tuple[str, list[Any], GoldForcing]:
    """The JSON of the last request the upstream got, the client's responses, the engine."""
    engine = GoldForcing(ScriptedEngine(), [wt.task])
    async with in_process_client(build_app(engine, config or _config())) as http:
        responses = await client.run(http, wt, arm)
    inner: Any = engine.inner
    return json.dumps(inner.requests[-1].messages), responses, engine


async def test_for_every_workspace_task_the_restored_absorb_is_byte_for_byte_serial() -> None:
    client = Client()
    for wt in TASKS:
        serial, _, _ = await _last_request(client, wt, "S")
        flat, responses, engine = await _last_request(client, wt, "F")
        assert flat == serial, wt.id
        assert not engine.parallel_shown, wt.id
        windows = [int(r.headers["x-harness-window"]) for r in responses]
        assert [n for n in windows if n] == list(wt.windows), wt.id
        assert all("x-harness-warning" not in r.headers for r in responses), wt.id


async def test_a_client_that_respells_arguments_and_reorders_results_is_restored() -> None:
    plain, respelling = Client(), Client(respell=_respelled, reorder=True)
    restored = 0
    for wt in TASKS:
        serial, _, _ = await _last_request(plain, wt, "S")
        flat, responses, _ = await _last_request(respelling, wt, "F")
        # The serial transcript, byte for byte: the upstream's own argument strings for every
        # call — the window's (restored from the store) and the serial ones (the conversation
        # waiting for this client keeps them) — and the results in emitted order.
        assert flat == serial, wt.id
        assert all("x-harness-warning" not in r.headers for r in responses), wt.id
        restored += sum(int(r.headers["x-harness-restored"]) > 0 for r in responses)
    assert restored >= sum(len(wt.windows) for wt in TASKS)


@pytest.mark.parametrize(
    "keep",
    [lambda m: dict(m), lambda m: {**m, "content": m.get("content") or ""}],
    ids=["content-null", "content-empty-string"],
)
async def test_a_client_that_writes_empty_content_its_own_way_is_restored_in_its_way(
    keep: Callable[[Message], Message],
) -> None:
    client = Client(keep=keep)
    for wt in [t for t in TASKS if t.windows]:
        serial, _, _ = await _last_request(client, wt, "S")
        flat, _, _ = await _last_request(client, wt, "F")
        assert flat == serial, wt.id


def test_canonical_arguments_compare_values_not_spellings() -> None:
    same = ['{"a": 1, "b": [1.0, "x"]}', '{"b":[1,"x"],"a":1.00}', '{ "b" : [1e0, "x"], "a": 1 }']
    assert len({canonical_arguments(s) for s in same}) == 1
    assert canonical_arguments('{"a": 1}') != canonical_arguments('{"a": "1"}')
    assert canonical_arguments('{"a": 1}') != canonical_arguments('{"a": 2}')
    assert canonical_arguments('{"a": true}') != canonical_arguments('{"a": 1}')
    assert canonical_arguments('{"a": "\\u00e9"}') == canonical_arguments('{"a": "é"}')
    assert canonical_arguments("not json") == "not json"


def _edited(arguments: str) -> str:
    value = json.loads(arguments)
    key = next(iter(value))
    return json.dumps({**value, key: f"{value[key]}-edited"})


@pytest.mark.parametrize("change", ["edit", "drop_result"])
async def test_a_real_change_passes_through_logged_once_and_counted_in_the_ledger(
    change: str, tmp_path: Any
) -> None:
    (wt,) = [t for t in TASKS if t.kind == "fan_out" and t.windows == (2,)][:1]
    toolset, _ = wt.toolset(latency=0.0)
    engine = GoldForcing(ScriptedEngine(), [wt.task])
    ledger = Ledger(tmp_path / "proxy.jsonl", log=False)
    messages: list[Message] = [
        {"role": "system", "content": DEFAULT_LOOP_SYSTEM},
        {"role": "user", "content": wt.task.prompt},
    ]
    request = {
        "model": "m",
        "tools": toolset.specs(),
        "harness_skill": wt.skill,
        "harness_inputs": dict(wt.task.inputs),
    }
    with capture_logs() as logs:
        async with in_process_client(build_app(engine, _config(), ledger=ledger)) as http:
            for _ in range(4):  # serial calls until the window comes back
                window = await http.post(
                    "/chat/completions", json={**request, "messages": messages}
                )
                message = _without_none(window.json()["choices"][0]["message"])
                calls = [ToolCall.from_openai(c) for c in message["tool_calls"]]
                messages.append(message)
                messages.extend(await run_calls(toolset, calls))
                if window.headers["x-harness-window"] != "0":
                    break
            if change == "edit":
                first = message["tool_calls"][0]["function"]
                first["arguments"] = _edited(first["arguments"])
            else:
                messages.pop()
            answers = [
                await http.post("/chat/completions", json={**request, "messages": messages})
                for _ in range(2)  # the same history twice: reported once
            ]
    ledger.close()
    for answer in answers:
        assert answer.status_code == 200
        assert answer.headers["x-harness-restored"] == "0"
        assert "passed through" in answer.headers["x-harness-warning"]
    warned = [e for e in logs if e["event"] == "window_not_restored"]
    assert len(warned) == 1
    assert warned[0]["log_level"] == "warning"
    assert warned[0]["reason"] == ("edited" if change == "edit" else "results")
    records = [r for r in Ledger.read_jsonl(tmp_path / "proxy.jsonl") if r["kind"] == "unrestored"]
    assert len(records) == 1
    assert records[0]["reason"] == warned[0]["reason"]


async def test_without_inputs_no_window_forms_and_nothing_is_discarded() -> None:
    """The figures docs/proxy.md quotes: over the 48 workspace tasks' 40 windows, upstream
    generations S 361, F 361; F without inputs 361 and no window (every window's keys are
    sourced from an input the proxy lacks, so no call can be proven to take one: each runs
    on its own), and windows again when the manifest says where the inputs are written in the
    prompt (``[skills.NAME.inputs.FIELD]``, harness.skills.input_sources)."""
    manifest = load_workspace_manifest()
    unread = Manifest(
        {name: replace(skill, inputs={}) for name, skill in manifest.skills.items()},
        manifest.source,
    )
    toolset, _ = TASKS[0].toolset()
    blind = ProxyConfig(effects=workspace_effects(toolset), manifest=unread)
    totals = {"S": 0, "F": 0, "F without inputs": 0, "F, inputs read from the prompt": 0}
    unproven = [0]  # windows that do not form: an argument sourced from a missing input
    for wt in TASKS:
        runs = {}
        for name, client, arm, config in (
            ("S", Client(), "S", None),
            ("F", Client(), "F", None),
            ("F without inputs", Client(inputs=False), "F", blind),
            ("F, inputs read from the prompt", Client(inputs=False), "F", None),
        ):
            _, responses, engine = await _last_request(client, wt, arm, config)
            runs[name] = (engine.generations, responses)
            totals[name] += engine.generations
        generations, responses = runs["F without inputs"]
        windows = [int(r.headers["x-harness-window"]) for r in responses]
        formed = [n for n in windows if n]
        assert all(n in wt.windows for n in formed), wt.id  # a window that forms is whole
        assert runs["F"][0] == runs["S"][0], wt.id
        assert runs["S"][0] <= generations <= runs["S"][0] + len(wt.windows), wt.id
        unproven[0] += len(wt.windows) - len(formed)
        read, responses = runs["F, inputs read from the prompt"]
        assert read == runs["S"][0], wt.id
        skill = manifest.skill(wt.skill)
        counted = {str(p.slots)[6:] for p in skill.phases if isinstance(p.slots, str)}
        if counted <= set(skill.inputs):  # every slot count's input is read: nothing to say
            assert not any("x-harness-warning" in r.headers for r in responses), wt.id
    assert totals == {
        "S": 361,
        "F": 361,
        "F without inputs": 361,
        "F, inputs read from the prompt": 361,
    }
    assert unproven == [40]  # every window's keys come from the inputs the proxy lacks


def test_the_proxys_settings_fields_leave_older_journals_prompt_hashes_unchanged() -> None:
    """``GenerationSettings.model``, ``unsent`` and ``tool_choice`` (the proxy's pass-through manners) at
    their defaults hash as before they existed: a journal written earlier still resumes."""
    from harness.engines.base import GenerationSettings
    from harness.journal import prompt_hash

    chat: list[Message] = [{"role": "user", "content": "hi"}]
    before = "7ce3090752a510999c770eb3e000109b7a2ea161061e9b1ca49a3d704884a478"
    assert prompt_hash(chat, [], GenerationSettings()) == before
    assert prompt_hash(chat, [], GenerationSettings(model="m")) != before
    assert prompt_hash(chat, [], GenerationSettings(unsent=frozenset({"max_tokens"}))) != before
    assert prompt_hash(chat, [], GenerationSettings(tool_choice="required")) != before
