"""Claims about the flattening proxy (harness.proxy), over httpx's ASGI transport and the
scripted engine: the window comes back as one message, the upstream only ever sees the serial
form, and every bad input gets a clear error."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import anyio
import httpx
import pytest

from harness.messages import Message, ToolSpec
from harness.proxy import CallIds, ProxyConfig, build_app, effects_from_dict, in_process_client
from harness.skills.manifest import Manifest
from harness.testing import ScriptedEngine

pytestmark = pytest.mark.anyio

TOOLS: list[ToolSpec] = [
    {
        "type": "function",
        "function": {
            "name": "read_doc",
            "description": "Read one document.",
            "parameters": {
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_report",
            "description": "Write the report.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    },
]
EFFECTS = effects_from_dict(
    {
        "tools": {
            "read_doc": {"read_only": True, "read_targets": "doc:{key}"},
            "write_report": {"write_targets": "report", "read_targets": []},
        }
    }
)
MANIFEST = Manifest.from_dict(
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
                        "name": "report",
                        "kind": "chain",
                        "tools": ["write_report"],
                        "args": {"write_report.text": "model"},
                    },
                ]
            }
        }
    }
)
KEYS = ["a", "b", "c"]


def _calls_so_far(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [c for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or ()]


def survey_script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    """Read each key in turn, then write the report, then answer."""
    done = len(_calls_so_far(messages))
    if done < len(KEYS):
        return {"id": f"up_{done}", "name": "read_doc", "arguments": {"key": KEYS[done]}}
    if done == len(KEYS):
        return {"id": f"up_{done}", "name": "write_report", "arguments": {"text": "all read"}}
    return "done: " + ", ".join(str(m["content"]) for m in messages if m["role"] == "tool")


def make_app(engine: ScriptedEngine, **config: Any):
    return build_app(engine, ProxyConfig(effects=EFFECTS, manifest=MANIFEST, **config))


def opening() -> list[Message]:
    return [
        {"role": "system", "content": "You read documents."},
        {"role": "user", "content": "Survey a, b and c."},
    ]


def body(messages: list[Message], **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": messages,
        "tools": TOOLS,
        "harness_inputs": {"keys": KEYS},
        **extra,
    }


def run_tool(call: dict[str, Any]) -> str:
    arguments = json.loads(call["function"]["arguments"])
    return f"text of {arguments.get('key', arguments.get('text'))}"


async def client_loop(
    client: httpx.AsyncClient,
    *,
    headers: dict[str, str] | None = None,
    messages: list[Message] | None = None,
) -> tuple[list[Message], list[httpx.Response]]:
    """An OpenAI-style agent loop: send, run every returned call, send the results back."""
    messages = messages or opening()
    responses = []
    for _ in range(20):
        response = await client.post("/chat/completions", json=body(messages), headers=headers)
        assert response.status_code == 200, response.text
        responses.append(response)
        message = response.json()["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            return messages, responses
        for call in message["tool_calls"]:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(call)})
    raise AssertionError("the loop did not finish")


async def test_a_certified_window_comes_back_as_one_message_with_parallel_calls() -> None:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as client:
        messages, responses = await client_loop(client)
    first = responses[0]
    calls = first.json()["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"])["key"] for c in calls] == KEYS
    assert first.headers["x-harness-window"] == "3"
    assert first.headers["x-harness-generations"] == "3"
    assert first.headers["x-harness-arm"] == "F"
    # 2 round trips for the window (n + 1 = 4 in S), then the serial report call, then the answer
    assert len(responses) == 3
    assert messages[-1]["content"] == "done: text of a, text of b, text of c, text of all read"


async def test_the_upstream_sees_exactly_the_serial_messages_of_a_pass_through_run() -> None:
    serial_engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(serial_engine)) as client:
        s_messages, s_responses = await client_loop(client, headers={"X-Harness-Arm": "S"})
    flat_engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(flat_engine)) as client:
        f_messages, _ = await client_loop(client)
    assert len(s_responses) == len(KEYS) + 2
    assert all(r.headers["x-harness-window"] == "0" for r in s_responses)
    # the absorb turn and every later turn: byte for byte what S sent upstream
    serial_prompts = [json.dumps(r.messages) for r in serial_engine.requests]
    for request in flat_engine.requests:
        if not any(m.get("content") == "[withheld]" for m in request.messages):
            assert json.dumps(request.messages) in serial_prompts
    assert json.dumps(flat_engine.requests[-1].messages) == serial_prompts[-1]
    # same number of upstream generations, as arm F promises
    assert len(flat_engine.requests) == len(serial_engine.requests)
    assert f_messages[-1]["content"] == s_messages[-1]["content"]


async def test_the_model_never_sees_a_parallel_message() -> None:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as client:
        await client_loop(client)
    for request in engine.requests:
        for message in request.messages:
            assert len(message.get("tool_calls") or ()) <= 1


async def test_window_results_in_any_order_restore_in_emitted_order() -> None:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as client:
        messages = opening()
        first = (await client.post("/chat/completions", json=body(messages))).json()
        message = first["choices"][0]["message"]
        messages.append(message)
        for call in reversed(message["tool_calls"]):
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(call)})
        second = await client.post("/chat/completions", json=body(messages))
    assert second.headers["x-harness-restored"] == "1"
    assert "x-harness-warning" not in second.headers
    seen = engine.requests[-1].messages
    tool_texts = [m["content"] for m in seen if m["role"] == "tool"]
    assert tool_texts == ["text of a", "text of b", "text of c"]


async def test_uncertifiable_traffic_passes_through_untouched() -> None:
    engine = ScriptedEngine(survey_script)
    app = build_app(engine, ProxyConfig())  # no effects, no manifest: nothing certifies
    async with in_process_client(app) as client:
        response = await client.post("/chat/completions", json=body(opening()))
    message = response.json()["choices"][0]["message"]
    assert response.headers["x-harness-window"] == "0"
    assert [c["id"] for c in message["tool_calls"]] == ["up_0"]
    assert engine.requests[0].messages == opening()
    assert engine.requests[0].tools == TOOLS


async def _first_window(client: httpx.AsyncClient) -> list[Message]:
    messages = opening()
    first = (await client.post("/chat/completions", json=body(messages))).json()
    message = first["choices"][0]["message"]
    messages.append(message)
    for call in message["tool_calls"]:
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(call)})
    return messages


async def test_a_forged_or_edited_window_passes_through_with_a_warning() -> None:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as client:
        messages = await _first_window(client)
        edited = copy.deepcopy(messages)
        edited[2]["tool_calls"][1]["function"]["arguments"] = json.dumps({"key": "z"})
        response = await client.post("/chat/completions", json=body(edited))
    assert response.status_code == 200
    assert response.headers["x-harness-restored"] == "0"
    assert "not one this proxy minted" in response.headers["x-harness-warning"]
    assert engine.requests[-1].messages[2] == edited[2]  # untouched, never a wrong rewrite


async def test_ids_minted_by_another_server_do_not_verify() -> None:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine, secret=b"one")) as client:
        messages = await _first_window(client)
    other = ScriptedEngine(survey_script)
    async with in_process_client(make_app(other, secret=b"two")) as client:
        response = await client.post("/chat/completions", json=body(messages))
    assert response.headers["x-harness-restored"] == "0"
    assert "x-harness-warning" in response.headers


def test_minted_ids_are_tamper_evident() -> None:
    from harness.messages import ToolCall

    ids = CallIds(b"secret")
    call = ToolCall("up_1", "read_doc", '{"key": "a"}')
    minted = ids.mint("w1", 0, 2, call)
    verified = ids.verify(ToolCall(minted, call.name, call.arguments))
    assert verified is not None
    assert (verified.window, verified.index, verified.n, verified.upstream_id) == (
        "w1",
        0,
        2,
        "up_1",
    )
    assert ids.verify(ToolCall(minted, call.name, '{"key": "b"}')) is None
    assert ids.verify(ToolCall(minted, "write_report", call.arguments)) is None
    assert ids.verify(ToolCall(minted.replace(".0.2.", ".1.2."), call.name, call.arguments)) is None
    assert CallIds(b"other").verify(ToolCall(minted, call.name, call.arguments)) is None


async def test_results_that_do_not_match_the_window_pass_through_with_a_warning() -> None:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as client:
        messages = await _first_window(client)
        missing = messages[:-1]  # one result short
        response = await client.post("/chat/completions", json=body(missing))
        extra = [*messages, {"role": "tool", "tool_call_id": "nope", "content": "x"}]
        response2 = await client.post("/chat/completions", json=body(extra))
    assert response.headers["x-harness-restored"] == "0"
    assert "2 of its 3 results" in response.headers["x-harness-warning"]
    assert "does not match" in response2.headers["x-harness-warning"]


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"n": 2}, "'n': 2 is not supported"),
        ({"logprobs": True}, "'logprobs'"),
        ({"top_p": 0.5}, "'top_p'"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"tool_choice": "sometimes"}, "tool_choice"),  # no API has it ("required" is served)
        ({"temperature": 7}, "temperature"),
        ({"messages": []}, "messages"),
        ({"messages": [{"content": "no role"}]}, "messages[0]"),
        ({"tools": [{"type": "function"}]}, "tools[0]"),
        ({"harness_inputs": [1]}, "harness_inputs"),
        ({"frequency_penalty": 1}, "'frequency_penalty'"),
        ({"logit_bias": {"1": 2}}, "logit_bias"),  # an unknown field is named, never ignored
        ({"stream": "yes"}, "'stream'"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
        ({"messages": [{"role": "assistant", "tool_calls": [{"id": "1"}]}]}, "tool_calls"),
        ({"harness_arm": "P"}, "harness_arm"),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "read_doc", "parameters": {"type": "objekt"}},
                    }
                ]
            },
            "read_doc",
        ),  # a tool whose parameters are not a JSON Schema
    ],
)
async def test_unsupported_or_malformed_fields_get_a_400_naming_them(
    payload: dict[str, Any], fragment: str
) -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post("/chat/completions", json={**body(opening()), **payload})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert fragment in error["message"]


async def test_malformed_json_is_a_400() -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post(
            "/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]


async def test_an_unknown_skill_is_a_400_naming_the_skills() -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        by_header = await client.post(
            "/chat/completions", json=body(opening()), headers={"X-Harness-Skill": "serch"}
        )
        by_body = await client.post("/chat/completions", json=body(opening(), harness_skill="x"))
    for response in (by_header, by_body):
        assert response.status_code == 400
        assert "survey" in response.json()["error"]["message"]


async def test_a_skill_without_a_manifest_or_without_its_tools_is_a_400() -> None:
    engine = ScriptedEngine(survey_script)
    bare = build_app(engine, ProxyConfig(effects=EFFECTS))
    async with in_process_client(bare) as client:
        no_manifest = await client.post(
            "/chat/completions", json=body(opening(), harness_skill="survey")
        )
    async with in_process_client(make_app(engine)) as client:
        no_tools = await client.post(
            "/chat/completions", json={**body(opening()), "tools": TOOLS[:1]}
        )
        bad_arm = await client.post(
            "/chat/completions", json=body(opening()), headers={"X-Harness-Arm": "P"}
        )
    assert no_manifest.status_code == 400
    assert "--manifest" in no_manifest.json()["error"]["message"]
    assert no_tools.status_code == 400
    assert "write_report" in no_tools.json()["error"]["message"]
    assert bad_arm.status_code == 400
    assert "X-Harness-Arm" in bad_arm.json()["error"]["message"]


async def test_bad_inputs_header_is_a_400() -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post(
            "/chat/completions", json=body(opening()), headers={"X-Harness-Inputs": "[1"}
        )
    assert response.status_code == 400
    assert "X-Harness-Inputs" in response.json()["error"]["message"]


async def test_body_and_message_count_limits_are_enforced() -> None:
    app = make_app(ScriptedEngine(survey_script), max_body_bytes=2000, max_messages=3)
    async with in_process_client(app) as client:
        big = await client.post(
            "/chat/completions", json=body([{"role": "user", "content": "x" * 5000}])
        )
        many = await client.post(
            "/chat/completions", json=body([{"role": "user", "content": "hi"}] * 4)
        )
    assert big.status_code == 413
    assert many.status_code == 400
    assert "limit of 3" in many.json()["error"]["message"]


async def test_an_api_key_is_required_when_set_and_compared_exactly() -> None:
    app = make_app(ScriptedEngine(survey_script), api_key="s3cret")
    async with in_process_client(app) as client:
        none = await client.post("/chat/completions", json=body(opening()))
        wrong = await client.post(
            "/chat/completions", json=body(opening()), headers={"Authorization": "Bearer nope"}
        )
        right = await client.post(
            "/chat/completions", json=body(opening()), headers={"Authorization": "Bearer s3cret"}
        )
        models = await client.get("/models")
        health = await client.get("/health")
    assert none.status_code == wrong.status_code == models.status_code == 401
    assert right.status_code == 200
    assert health.status_code == 200


async def test_models_and_health_answer() -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        models = (await client.get("/models")).json()
        health = (await client.get("/health")).json()
    assert models["data"][0]["id"] == "harness"
    assert health["status"] == "ok"


def refusing_upstream(refusal: str) -> Any:
    """An HTTP upstream at 10.0.0.9 (key ``sk-upstream-key``) whose every connection fails."""
    from harness.engines.openai_http import OpenAIHTTPEngine

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(refusal, request=request)

    return OpenAIHTTPEngine(
        "http://10.0.0.9:8000/v1",
        "m",
        api_key="sk-upstream-key",
        client=httpx.AsyncClient(transport=httpx.MockTransport(refuse)),
        max_retries=0,
    )


async def test_an_upstream_that_is_down_is_a_502_naming_the_url_and_never_the_key() -> None:
    upstream = refusing_upstream("connection refused")
    config = ProxyConfig(
        effects=EFFECTS,
        manifest=MANIFEST,
        upstream="http://10.0.0.9:8000/v1",
        secrets_to_hide=("sk-upstream-key",),
    )
    async with upstream, in_process_client(build_app(upstream, config)) as client:
        response = await client.post("/chat/completions", json=body(opening()))
    assert response.status_code == 502
    message = response.json()["error"]["message"]
    assert "http://10.0.0.9:8000/v1" in message
    assert "sk-upstream-key" not in response.text


async def test_the_upstreams_key_is_never_in_the_proxys_logs_or_ledger(tmp_path: Any) -> None:
    from structlog.testing import capture_logs

    from harness.loop.ledger import Ledger

    upstream = refusing_upstream("refused by sk-upstream-key's host")
    config = ProxyConfig(effects=EFFECTS, manifest=MANIFEST, secrets_to_hide=("sk-upstream-key",))
    ledger = Ledger(tmp_path / "ledger.jsonl")
    with capture_logs() as logs:
        async with (
            upstream,
            in_process_client(build_app(upstream, config, ledger=ledger)) as client,
        ):
            response = await client.post("/chat/completions", json=body(opening()))
    ledger.close()
    assert response.status_code == 502
    assert "sk-upstream-key" not in response.text  # hidden even when the error quotes it
    assert "sk-upstream-key" not in repr(logs)
    path = tmp_path / "ledger.jsonl"
    assert not path.exists() or "sk-upstream-key" not in path.read_text()


async def test_a_streamed_window_arrives_as_one_messages_tool_call_deltas() -> None:
    async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
        response = await client.post(
            "/chat/completions",
            json=body(opening(), stream=True, stream_options={"include_usage": True}),
        )
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    deltas = [d for c in chunks for ch in c["choices"] for d in ch["delta"].get("tool_calls", [])]
    assert sorted({d["index"] for d in deltas}) == [0, 1, 2]
    finish = [ch["finish_reason"] for c in chunks for ch in c["choices"] if ch["finish_reason"]]
    assert finish == ["tool_calls"]
    assert chunks[-1]["usage"]["total_tokens"] > 0


async def test_sixteen_concurrent_clients_all_get_their_own_right_answers() -> None:
    engine = ScriptedEngine(survey_script)
    app = make_app(engine)
    results: dict[int, list[Message]] = {}

    async def one(i: int) -> None:
        async with in_process_client(app) as client:
            messages, responses = await client_loop(client)
        assert len(responses) == 3
        results[i] = messages

    async with anyio.create_task_group() as group:
        for i in range(16):
            group.start_soon(one, i)
    assert len(results) == 16
    assert {m[-1]["content"] for m in results.values()} == {
        "done: text of a, text of b, text of c, text of all read"
    }
    assert engine.max_in_flight > 1


def _manifest(report_source: str, slots: bool) -> Manifest:
    read: dict[str, Any] = {
        "name": "read",
        "kind": "fan_out",
        "tools": ["read_doc"],
        "args": {"read_doc.key": "input:keys"},
    }
    if slots:
        read["slots"] = "input:keys"
    report = {
        "name": "report",
        "kind": "chain",
        "tools": ["write_report"],
        "args": {"write_report.text": report_source},
    }
    return Manifest.from_dict({"skills": {"survey": {"phases": [read, report]}}})


async def test_the_call_that_closed_a_window_is_kept_and_returned_after_the_absorb() -> None:
    engine = ScriptedEngine(survey_script)
    app = build_app(engine, ProxyConfig(effects=EFFECTS, manifest=_manifest("model", False)))
    async with in_process_client(app) as client:
        _messages, responses = await client_loop(client)
    window, carried, final = responses
    assert window.headers["x-harness-window"] == "3"
    assert window.headers["x-harness-generations"] == "4"  # the 4th generated the closing call
    assert carried.headers["x-harness-generations"] == "0"  # it came from the store
    carried_calls = carried.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in carried_calls] == ["write_report"]
    assert carried_calls[0]["id"] == "up_3"  # a serial call keeps the upstream's id
    assert len(engine.requests) == len(KEYS) + 2  # as many generations as S
    assert final.json()["choices"][0]["message"]["content"].startswith("done:")


async def test_a_closing_call_lost_with_its_conversation_is_regenerated_not_lost() -> None:
    # No conversation waits for its client (and no store entry is kept): the request that
    # brings the window's results starts from the client's history, and the closing call the
    # window's last generation produced is generated again after the absorb turn.
    engine = ScriptedEngine(survey_script)
    config = ProxyConfig(
        effects=EFFECTS,
        manifest=_manifest("model", False),
        store_capacity=0,
        conversations_capacity=0,
    )
    async with in_process_client(build_app(engine, config)) as client:
        messages, responses = await client_loop(client)
    assert len(responses) == 3
    assert responses[1].headers["x-harness-generations"] == "1"
    assert messages[-1]["content"] == "done: text of a, text of b, text of c, text of all read"


async def test_a_call_that_needed_a_withheld_result_is_discarded_and_regenerated() -> None:
    engine = ScriptedEngine(survey_script)
    manifest = _manifest("result:read", False)
    async with in_process_client(
        build_app(engine, ProxyConfig(effects=EFFECTS, manifest=manifest))
    ) as client:
        messages, responses = await client_loop(client)
    window = responses[0]
    assert window.headers["x-harness-window"] == "3"
    # arm F discards the call when its admission is handled: after the window's results are
    # back (the request that brings them counts it), exactly as the loop does
    assert [r.headers["x-harness-discards"] for r in responses] == ["0", "1", "0"]
    # the absorb turn regenerated write_report with every result in view
    report = responses[1].json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in report] == ["write_report"]
    assert responses[1].headers["x-harness-generations"] == "1"
    assert messages[-1]["content"].startswith("done:")


async def test_every_turn_and_window_goes_to_the_ledger(tmp_path: Any) -> None:
    from harness.loop.ledger import Ledger

    path = tmp_path / "proxy.jsonl"
    ledger = Ledger(path, log=False)
    engine = ScriptedEngine(survey_script)
    app = build_app(engine, ProxyConfig(effects=EFFECTS, manifest=MANIFEST), ledger=ledger)
    async with in_process_client(app) as client:
        await client_loop(client)
    ledger.close()
    records = Ledger.read_jsonl(path)
    kinds = [r["kind"] for r in records]
    assert kinds.count("turn") == len(engine.requests)
    assert kinds.count("window") == 1
    # every call the client ran, as the loop records them: the window's and the serial report
    calls = [r for r in records if r["kind"] == "call"]
    assert [(c["tool"], c["mode"]) for c in calls] == [
        *[("read_doc", "window")] * len(KEYS),
        ("write_report", "serial"),
    ]
    window = next(r for r in records if r["kind"] == "window")
    assert window["n"] == len(KEYS)
    assert window["closed_by"] != "client_results"  # the certifier's own reason, as in the loop
    assert kinds.count("run") == 1  # the conversation's summary, when it ended in its answer


async def test_parallel_tool_calls_false_gets_one_call_per_response_passed_through() -> None:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as client:
        response = await client.post(
            "/chat/completions", json=body(opening(), parallel_tool_calls=False)
        )
    assert response.headers["x-harness-arm"] == "S"
    assert response.headers["x-harness-window"] == "0"
    calls = response.json()["choices"][0]["message"]["tool_calls"]
    assert [c["id"] for c in calls] == ["up_0"]  # the upstream's own call, as it came
    assert len(engine.requests) == 1
    assert engine.requests[0].settings.parallel_tool_calls is False


@pytest.mark.parametrize("parallel", [True, None], ids=["true", "absent"])
async def test_parallel_tool_calls_true_or_absent_lets_the_proxy_flatten(
    parallel: bool | None,
) -> None:
    engine = ScriptedEngine(survey_script)
    extra = {} if parallel is None else {"parallel_tool_calls": parallel}
    async with in_process_client(make_app(engine)) as client:
        response = await client.post("/chat/completions", json=body(opening(), **extra))
    assert response.headers["x-harness-arm"] == "F"
    assert response.headers["x-harness-window"] == "3"
    assert len(response.json()["choices"][0]["message"]["tool_calls"]) == 3
    # the upstream is a serial model: it is asked for one call per turn
    assert all(r.settings.parallel_tool_calls is False for r in engine.requests)


async def test_a_pass_through_asked_for_parallel_calls_asks_the_upstream_for_them() -> None:
    engine = ScriptedEngine(survey_script)
    async with in_process_client(make_app(engine)) as client:
        response = await client.post(
            "/chat/completions",
            json=body(opening(), parallel_tool_calls=True),
            headers={"X-Harness-Arm": "S"},
        )
    assert response.headers["x-harness-arm"] == "S"
    assert engine.requests[0].settings.parallel_tool_calls is True


async def test_extra_routes_are_mounted_behind_the_same_key() -> None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def ping(request: Request) -> JSONResponse:
        return JSONResponse({"pong": True})

    app = build_app(
        ScriptedEngine(survey_script),
        ProxyConfig(api_key="k"),
        extra_routes=[Route("/v1/ping", ping)],
    )
    async with in_process_client(app) as client:
        denied = await client.get("/ping")
        allowed = await client.get("/ping", headers={"Authorization": "Bearer k"})
    assert denied.status_code == 401
    assert allowed.json() == {"pong": True}


async def test_several_upstreams_keep_each_conversation_on_one_replica() -> None:
    from harness.engines.openai_http import OpenAIHTTPEngine

    served: dict[str, list[str]] = {}

    def replica(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)
        reply = survey_script(sent["messages"], sent.get("tools", []))
        conversation = sent["messages"][1]["content"]
        served.setdefault(conversation, []).append(request.url.host)
        if isinstance(reply, str):
            message: dict[str, Any] = {"role": "assistant", "content": reply}
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": reply["id"],
                        "type": "function",
                        "function": {
                            "name": reply["name"],
                            "arguments": json.dumps(reply["arguments"]),
                        },
                    }
                ],
            }
        usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        return httpx.Response(
            200,
            json={
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage,
            },
        )

    upstream = OpenAIHTTPEngine(
        ["http://replica-a/v1", "http://replica-b/v1"],
        "m",
        client=httpx.AsyncClient(transport=httpx.MockTransport(replica)),
    )
    async with upstream, in_process_client(make_app(upstream)) as client:  # type: ignore[arg-type]
        for i in range(4):
            messages = [
                {"role": "system", "content": "You read documents."},
                {"role": "user", "content": f"Survey a, b and c ({i})."},
            ]
            _, responses = await client_loop(client, messages=messages)
            assert responses[0].headers["x-harness-window"] == "3"
    assert len(served) == 4
    assert all(len(set(hosts)) == 1 for hosts in served.values())  # prefix-affine
    assert all(len(hosts) == len(KEYS) + 2 for hosts in served.values())


def survey_completion(sent: dict[str, Any]) -> httpx.Response:
    """A Chat Completions response to request body ``sent``, its reply from
    ``survey_script``: what a serial upstream answers."""
    reply = survey_script(sent["messages"], sent.get("tools", []))
    message: dict[str, Any] = {"role": "assistant", "content": reply}
    if not isinstance(reply, str):
        call = {
            "id": reply["id"],
            "type": "function",
            "function": {"name": reply["name"], "arguments": json.dumps(reply["arguments"])},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return httpx.Response(200, json={"choices": [choice], "usage": {}})


def recording_upstream(bodies: list[dict[str, Any]], *, models_status: int = 200) -> Any:
    """An HTTP upstream that runs ``survey_script``, recording every chat request body."""
    from harness.engines.openai_http import OpenAIHTTPEngine

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(models_status, json={"object": "list", "data": []})
        sent = json.loads(request.content)
        bodies.append(sent)
        return survey_completion(sent)

    return OpenAIHTTPEngine(
        "http://upstream/v1",
        "default",
        client=httpx.AsyncClient(transport=httpx.MockTransport(handle)),
        max_retries=0,
    )


_FORWARDED = ("max_tokens", "temperature", "parallel_tool_calls", "tool_choice")


@pytest.mark.parametrize("arm", ["S", "F"])
async def test_the_clients_model_is_forwarded_and_nothing_it_did_not_send_is_injected(
    arm: str,
) -> None:
    bodies: list[dict[str, Any]] = []
    upstream = recording_upstream(bodies)
    request = {**body(opening()), "model": "client-model"}
    async with upstream, in_process_client(make_app(upstream)) as client:
        response = await client.post(
            "/chat/completions", json=request, headers={"X-Harness-Arm": arm}
        )
    assert response.status_code == 200, response.text
    assert bodies
    for sent in bodies:
        assert sent["model"] == "client-model"
        assert "max_tokens" not in sent
        assert "temperature" not in sent
        assert "tool_choice" not in sent
        # arm F asks its serial upstream for one call per turn (the proxy's own setting)
        assert sent.get("parallel_tool_calls") == (False if arm == "F" else None)


async def test_what_the_client_sends_is_forwarded_as_sent() -> None:
    bodies: list[dict[str, Any]] = []
    upstream = recording_upstream(bodies)
    sent = {"max_tokens": 77, "temperature": 0.5, "tool_choice": "auto"}
    async with upstream, in_process_client(make_app(upstream)) as client:
        await client.post(
            "/chat/completions",
            json=body(opening(), parallel_tool_calls=False, **sent),
        )
    (forwarded,) = bodies
    assert {k: forwarded[k] for k in _FORWARDED} == {**sent, "parallel_tool_calls": False}


async def test_an_upstream_model_maps_every_clients_model() -> None:
    bodies: list[dict[str, Any]] = []
    upstream = recording_upstream(bodies)
    config = ProxyConfig(effects=EFFECTS, manifest=MANIFEST, upstream_model="served-name")
    async with upstream, in_process_client(build_app(upstream, config)) as client:
        response = await client.post("/chat/completions", json=body(opening()))
    assert response.json()["model"] == "m"  # the client hears back the name it sent
    assert {b["model"] for b in bodies} == {"served-name"}


@pytest.mark.parametrize(("status", "health"), [(200, "ok"), (401, "down")])
async def test_health_reports_whether_the_upstream_answers(status: int, health: str) -> None:
    upstream = recording_upstream([], models_status=status)
    config = ProxyConfig(upstream="http://upstream/v1")
    async with upstream, in_process_client(build_app(upstream, config)) as client:
        response = await client.get("/health")
    assert response.json()["upstream_status"] == health
    assert response.status_code == (200 if health == "ok" else 503)
    if health == "down":
        assert "HTTP 401" in response.json()["error"]


async def test_health_of_an_upstream_that_is_down_is_503_naming_it() -> None:
    upstream = refusing_upstream("connection refused")
    config = ProxyConfig(upstream="http://10.0.0.9:8000/v1", secrets_to_hide=("sk-upstream-key",))
    async with upstream, in_process_client(build_app(upstream, config)) as client:
        response = await client.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    assert "http://10.0.0.9:8000/v1" in response.json()["error"]


async def test_each_request_and_every_upstream_failure_is_logged() -> None:
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        async with in_process_client(make_app(ScriptedEngine(survey_script))) as client:
            await client_loop(client)
        upstream = refusing_upstream("connection refused")
        async with upstream, in_process_client(build_app(upstream, ProxyConfig())) as client:
            failed = await client.post("/chat/completions", json=body(opening()))
    requests = [e for e in logs if e["event"] == "request"]
    assert [(e["status"], e["kind"], e["window"]) for e in requests] == [
        (200, "flattening", 3),
        (200, "absorb", 0),
        (200, "serial", 0),
        (502, None, 0),
    ]
    assert all(e["log_level"] == "info" and e["wall_s"] >= 0 for e in requests)
    assert failed.status_code == 502
    (failure,) = [e for e in logs if e["event"] == "upstream_failed"]
    assert failure["log_level"] == "warning"
    assert "connection refused" in failure["detail"]


async def test_without_inputs_the_calls_run_on_their_own_and_the_proxy_says_so() -> None:
    # A value the manifest sources from an input the request lacks cannot be proven to be
    # one (the model may have read it from a withheld result), so no window forms.
    from structlog.testing import capture_logs

    def without_inputs(request: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in request.items() if k != "harness_inputs"}

    with_inputs = ScriptedEngine(survey_script)
    async with in_process_client(make_app(with_inputs)) as client:
        _, told = await client_loop(client)
    engine = ScriptedEngine(survey_script)
    with capture_logs() as logs:
        async with in_process_client(make_app(engine)) as client:
            messages = opening()
            responses = []
            for _ in range(10):
                response = await client.post(
                    "/chat/completions", json=without_inputs(body(messages))
                )
                responses.append(response)
                message = response.json()["choices"][0]["message"]
                messages.append(message)
                if not message.get("tool_calls"):
                    break
                for call in message["tool_calls"]:
                    messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": run_tool(call)}
                    )
    assert messages[-1]["content"] == told[-1].json()["choices"][0]["message"]["content"]
    assert all("no inputs" in r.headers["x-harness-warning"] for r in responses)
    assert all(r.headers["x-harness-window"] == "0" for r in responses)
    assert told[0].headers["x-harness-window"] == "3"  # (with inputs: one window of 3)
    assert "no inputs" not in told[0].headers.get("x-harness-warning", "")
    assert len([e for e in logs if e["event"] == "no_inputs"]) == 1  # said once


# -- conversations: one run of the loop per conversation, waiting for its client ---------------


def _closed_by_next_phase() -> ProxyConfig:
    """No slot count: the window closes when write_report (the next phase) is generated, so a
    waiting conversation handles that call after the absorb without a new generation, and a
    cold start generates it again (one more generation): the two are told apart."""
    return ProxyConfig(effects=EFFECTS, manifest=_manifest("model", False))


def _with_results(response: httpx.Response) -> list[Message]:
    """The opening, the window the proxy returned and the client's results."""
    message = response.json()["choices"][0]["message"]
    results: list[Message] = [
        {"role": "tool", "tool_call_id": c["id"], "content": run_tool(c)}
        for c in message["tool_calls"]
    ]
    return [*opening(), message, *results]


async def test_a_waiting_conversation_continues_without_a_new_generation() -> None:
    engine = ScriptedEngine(survey_script)
    app = build_app(engine, _closed_by_next_phase())
    async with in_process_client(app) as client:
        messages, responses = await client_loop(client)
        assert len(app.state.proxy.conversations) == 0  # the run ended with its answer
    assert [r.headers["x-harness-generations"] for r in responses] == ["4", "0", "1"]
    assert messages[-1]["content"].startswith("done:")


async def test_without_its_lifespan_the_proxy_answers_every_request_from_the_history() -> None:
    from structlog.testing import capture_logs

    engine = ScriptedEngine(survey_script)
    app = build_app(engine, _closed_by_next_phase())
    transport = httpx.ASGITransport(app=app)  # no lifespan: nothing can wait between requests
    with capture_logs() as logs:
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy/v1") as client:
            messages, responses = await client_loop(client)
    assert [r.headers["x-harness-generations"] for r in responses] == ["4", "1", "1"]
    assert messages[-1]["content"].startswith("done:")
    assert [e["event"] for e in logs].count("no_lifespan") == 1  # said once, not per request


async def test_an_idle_conversation_is_dropped_and_its_client_cold_starts() -> None:
    engine = ScriptedEngine(survey_script)
    config = _closed_by_next_phase()
    config.idle_s = 0.05
    app = build_app(engine, config)
    async with in_process_client(app) as client:
        response = await client.post("/chat/completions", json=body(opening()))
        assert response.headers["x-harness-window"] == "3"
        await anyio.sleep(0.2)  # the client takes longer than idle_s to run its calls
        messages = _with_results(response)
        absorb = await client.post("/chat/completions", json=body(messages))
        assert absorb.status_code == 200, absorb.text
        assert absorb.headers["x-harness-generations"] == "1"  # write_report generated again
        assert app.state.proxy.conversations.evicted == 1


async def test_leaving_the_lifespan_cancels_the_waiting_conversations(tmp_path: Any) -> None:
    from harness.loop.ledger import Ledger

    ledger = Ledger(tmp_path / "proxy.jsonl", log=False)
    engine = ScriptedEngine(survey_script)
    app = build_app(engine, _closed_by_next_phase(), ledger=ledger)
    async with in_process_client(app) as client:
        response = await client.post("/chat/completions", json=body(opening()))
        assert response.headers["x-harness-window"] == "3"
        assert len(app.state.proxy.conversations) == 1
    assert len(app.state.proxy.conversations) == 0
    ledger.close()
    runs = [r for r in Ledger.read_jsonl(tmp_path / "proxy.jsonl") if r["kind"] == "run"]
    assert len(runs) == 1
    assert not runs[0]["finished"]  # recorded as stopped, not lost
    assert "Cancelled" in runs[0]["error"]


async def test_an_edited_history_starts_a_new_run_from_it() -> None:
    engine = ScriptedEngine(survey_script)
    app = build_app(engine, _closed_by_next_phase())
    async with in_process_client(app) as client:
        response = await client.post("/chat/completions", json=body(opening()))
        messages = _with_results(response)
        messages[1] = {"role": "user", "content": "Survey a, b and c, please."}  # edited
        absorb = await client.post("/chat/completions", json=body(messages))
        assert absorb.status_code == 200, absorb.text
        assert absorb.headers["x-harness-generations"] == "1"  # not the waiting run's answer
        # the upstream was shown the edited history, not the waiting run's transcript
        assert engine.requests[-1].messages[1]["content"] == "Survey a, b and c, please."
