"""The fabric over HTTP: responses carry the four CRP-PEF-* headers in the spec's format, bad
input is a 400 with an OpenAI-style error body (harness.fabric.http)."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette")

from starlette.applications import Starlette
from starlette.routing import Mount

from harness.engines.base import GenerationSettings
from harness.errors import ConfigError, EngineDeadError
from harness.fabric import FabricConfig
from harness.fabric.http import FABRIC_PATH, fabric_app, fabric_routes
from harness.testing import ScriptedEngine, fabric_demo_engine

pytestmark = pytest.mark.anyio

#: CRP-SPEC-022 §7's formats: "4/14", "5.7x", "18400", "0.45".
HEADER_FORMATS = {
    "CRP-PEF-Layers": r"\d+/\d+",
    "CRP-PEF-Batch-Efficiency": r"\d+\.\dx",
    "CRP-PEF-Wall-Clock-Ms": r"\d+",
    "CRP-PEF-Compute-Vs-Naive": r"\d+\.\d+",
}
SIZED = FabricConfig(model_params=135e6, baseline_params=70e9)


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fabric")


@pytest.fixture
async def demo() -> AsyncIterator[Any]:
    async with fabric_demo_engine(overhead_ms=2) as engine:
        yield engine


async def test_a_task_run_answers_with_the_four_pef_headers_in_the_specs_format(demo):
    async with _client(fabric_app(demo, config=SIZED)) as client:
        response = await client.post(FABRIC_PATH, json={"task": "Explain tides."})
    assert response.status_code == 200
    for name, pattern in HEADER_FORMATS.items():
        assert re.fullmatch(pattern, response.headers[name]), (name, response.headers[name])
    body = response.json()
    assert body["object"] == "fabric.run"
    assert body["model"] == "scripted-demo"
    assert body["ok"] is True
    assert body["answer"]
    assert [n["id"] for n in body["nodes"]] == ["T1", "T2", "T3", "T4"]
    assert body["figures"]["headers"] == {k: response.headers[k] for k in HEADER_FORMATS}


async def test_the_headers_are_the_figures_of_the_run_in_the_body(demo):
    async with _client(fabric_app(demo, config=SIZED)) as client:
        body = (await client.post(FABRIC_PATH, json={"task": "Explain tides."})).json()
    figures = body["figures"]
    depth, total = figures["headers"]["CRP-PEF-Layers"].split("/")
    assert (int(depth), int(total)) == (figures["depth"], figures["total"]) == (3, 4)
    assert figures["headers"]["CRP-PEF-Batch-Efficiency"] == (
        f"{figures['inferences'] / figures['rounds']:.1f}x"
    )
    assert int(figures["headers"]["CRP-PEF-Wall-Clock-Ms"]) == round(figures["wall_clock_ms"])


async def test_the_compute_header_is_left_out_when_the_server_does_not_know_its_model_size(demo):
    async with _client(fabric_app(demo)) as client:
        response = await client.post(FABRIC_PATH, json={"task": "Explain tides."})
    assert response.status_code == 200
    assert "CRP-PEF-Compute-Vs-Naive" not in response.headers
    for name in ("CRP-PEF-Layers", "CRP-PEF-Batch-Efficiency", "CRP-PEF-Wall-Clock-Ms"):
        assert re.fullmatch(HEADER_FORMATS[name], response.headers[name])


async def test_a_steps_dag_runs_without_planner_or_composer(demo):
    steps = [
        {"id": "a", "prompt": "List facts."},
        {"id": "b", "prompt": "Define a term.", "criticality": "trivial"},
        {
            "id": "c",
            "prompt": "Draft.",
            "deps": ["a", "b"],
            "criticality": "moderate",
            "high_stakes": True,
        },
    ]
    async with _client(fabric_app(demo, config=SIZED)) as client:
        response = await client.post(FABRIC_PATH, json={"steps": steps, "task": "Tides."})
    body = response.json()
    assert response.status_code == 200
    assert body["plan"] is None
    assert body["answer"] is None
    assert [n["id"] for n in body["nodes"]] == ["a", "b", "c"]
    assert [n["inferences"] for n in body["nodes"]] == [1, 1, 3]  # c: batched consensus N=3
    assert body["figures"]["inferences"] == 5
    assert response.headers["CRP-PEF-Layers"] == "2/3"
    assert re.fullmatch(r"\d+\.\d+", response.headers["CRP-PEF-Compute-Vs-Naive"])


async def test_a_steps_dag_without_a_task_has_no_naive_pass_to_compare_with(demo):
    async with _client(fabric_app(demo, config=SIZED)) as client:
        response = await client.post(FABRIC_PATH, json={"steps": [{"id": "a", "prompt": "x"}]})
    assert response.status_code == 200
    assert "CRP-PEF-Compute-Vs-Naive" not in response.headers


async def test_a_request_can_ask_for_the_naive_baseline_and_its_settings(demo):
    async with _client(fabric_app(demo, config=SIZED)) as client:
        fabric = (await client.post(FABRIC_PATH, json={"task": "Tides."})).json()
        naive = (
            await client.post(
                FABRIC_PATH, json={"task": "Tides.", "naive": True, "max_tokens": 16, "seed": 3}
            )
        ).json()
    assert naive["figures"]["inferences"] == fabric["figures"]["inferences"]
    # one request at a time: every inference is its own round
    assert naive["figures"]["rounds"] == naive["figures"]["inferences"]
    assert fabric["figures"]["rounds"] < fabric["figures"]["inferences"]


async def test_a_mechanism_switched_off_in_the_request_changes_the_run(demo):
    async with _client(fabric_app(demo, config=SIZED)) as client:
        body = (
            await client.post(
                FABRIC_PATH, json={"task": "Tides.", "mechanisms": {"consensus": False}}
            )
        ).json()
    assert all(n["inferences"] == 1 for n in body["nodes"])


BAD = [
    pytest.param(b"{", None, "invalid_json", id="not-json"),
    pytest.param(b"[]", None, "invalid_type", id="not-an-object"),
    pytest.param(b"{}", "task", "missing", id="no-task-no-steps"),
    pytest.param(b'{"task": "  "}', "task", "missing", id="blank-task"),
    pytest.param(b'{"task": 3}', "task", "string_type", id="task-not-a-string"),
    pytest.param(b'{"tsk": "x"}', "tsk", "extra_forbidden", id="unknown-field"),
    pytest.param(b'{"task": "x", "max_tokens": 0}', "max_tokens", None, id="max-tokens-0"),
    pytest.param(b'{"task": "x", "max_tokens": 99999}', "max_tokens", None, id="over-the-cap"),
    pytest.param(b'{"task": "x", "max_tokens": "8"}', "max_tokens", None, id="string-number"),
    pytest.param(b'{"task": "x", "agreement": 1.5}', "agreement", None, id="agreement-1.5"),
    pytest.param(b'{"task": "x", "temperature": -1}', "temperature", None, id="negative-temp"),
    pytest.param(
        b'{"task": "x", "mechanisms": {"turbo": true}}',
        "mechanisms.turbo",
        None,
        id="unknown-mechanism",
    ),
    pytest.param(b'{"task": "x", "plan": "T1<T9: go"}', "plan", None, id="plan-bad-dependency"),
    pytest.param(b'{"steps": []}', "steps", None, id="no-steps"),
    pytest.param(
        b'{"steps": [{"id": "a", "prompt": "x", "deps": ["zz"]}]}',
        "steps",
        None,
        id="unknown-dependency",
    ),
    pytest.param(
        b'{"steps": [{"id": "a", "prompt": "x", "deps": ["a"]}]}',
        "steps",
        None,
        id="self-dependency",
    ),
    pytest.param(
        b'{"steps": [{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}]}',
        "steps",
        None,
        id="duplicate-id",
    ),
    pytest.param(
        b'{"steps": [{"id": "a", "prompt": "x", "criticality": "huge"}]}',
        "steps.0.criticality",
        None,
        id="unknown-criticality",
    ),
    pytest.param(b'{"steps": [{"id": "a"}]}', "steps.0.prompt", None, id="step-without-prompt"),
    pytest.param(
        b'{"task": "x", "plan": "T1: a", "steps": [{"id": "a", "prompt": "x"}]}',
        "plan",
        None,
        id="plan-and-steps",
    ),
]


@pytest.mark.parametrize(("raw", "param", "code"), BAD)
async def test_bad_input_is_a_400_with_an_openai_style_error_body(demo, raw, param, code):
    async with _client(fabric_app(demo, config=SIZED)) as client:
        response = await client.post(
            FABRIC_PATH, content=raw, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    assert len(error["message"]) > 20
    assert not any(k.startswith("crp-pef") for k in response.headers)


async def test_a_dead_engine_is_a_503_with_a_server_error_body():
    def dead(messages: Any, tools: Any) -> Any:
        raise EngineDeadError("the engine core died; restart it.")

    async with ScriptedEngine(script=dead) as engine, _client(fabric_app(engine)) as client:
        response = await client.post(FABRIC_PATH, json={"task": "x"})
    assert response.status_code == 503
    assert response.json()["error"]["type"] == "server_error"
    assert "died" in response.json()["error"]["message"]


async def test_a_failing_step_is_data_a_200_with_ok_false():
    def empty(messages: Any, tools: Any) -> Any:
        return ""

    async with ScriptedEngine(script=empty) as engine:
        config = FabricConfig(settings=GenerationSettings(max_tokens=8, constrain=False))
        async with _client(fabric_app(engine, config=config)) as client:
            steps = [{"id": "a", "prompt": "x", "criticality": "critical"}]
            response = await client.post(FABRIC_PATH, json={"steps": steps, "max_repairs": 0})
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is False
    assert body["nodes"][0]["status"] == "failed"
    assert response.headers["CRP-PEF-Layers"] == "1/1"


async def test_only_post_is_served(demo):
    async with _client(fabric_app(demo)) as client:
        response = await client.get(FABRIC_PATH)
    assert response.status_code == 405


async def test_the_routes_mount_into_a_larger_app_under_any_path(demo):
    app = Starlette(routes=[Mount("/api", routes=fabric_routes(demo, path="/fabric"))])
    async with _client(app) as client:
        response = await client.post("/api/fabric", json={"task": "Tides."})
    assert response.status_code == 200
    assert response.headers["CRP-PEF-Layers"] == "3/4"


def test_without_starlette_the_endpoint_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "starlette", None)
    with pytest.raises(ConfigError, match=r"agent-harness\[serve\]"):
        fabric_routes(ScriptedEngine())


def test_a_cap_below_one_token_is_a_config_error():
    with pytest.raises(ConfigError, match="max_tokens_cap"):
        fabric_routes(ScriptedEngine(), max_tokens_cap=0)


@pytest.mark.engine
@pytest.mark.timeout(600)
async def test_on_the_real_engine_the_endpoint_returns_the_four_headers(real_engine: Any) -> None:
    config = FabricConfig(
        settings=GenerationSettings(max_tokens=8, constrain=False),
        model_params=135e6,
        baseline_params=70e9,
    )
    steps = [
        {"id": "T1", "prompt": "Name a colour."},
        {"id": "T2", "prompt": "Name a fruit."},
        {"id": "T3", "prompt": "Combine them.", "deps": ["T1", "T2"]},
    ]
    async with _client(fabric_app(real_engine, config=config)) as client:
        response = await client.post(
            FABRIC_PATH, json={"task": "Name a colour and a fruit.", "steps": steps}, timeout=600
        )
    assert response.status_code == 200, response.text
    for name, pattern in HEADER_FORMATS.items():
        assert re.fullmatch(pattern, response.headers[name]), (name, response.headers[name])
    body = response.json()
    assert response.headers["CRP-PEF-Layers"] == "2/3"
    assert body["figures"]["inferences"] == 3
    assert body["model"] == real_engine.name


async def test_harness_serve_mounts_the_fabric_beside_the_proxy_behind_the_same_key(demo):
    import argparse

    from harness._commands.serve import _fabric
    from harness.proxy import ProxyConfig, build_app

    args = argparse.Namespace(no_fabric=False, model_params=None, model=None, upstream=None)
    app = build_app(demo, ProxyConfig(api_key="k"), extra_routes=_fabric(args, demo))
    async with _client(app) as client:
        refused = await client.post(FABRIC_PATH, json={"task": "Explain tides."})
        response = await client.post(
            FABRIC_PATH, json={"task": "Explain tides."}, headers={"Authorization": "Bearer k"}
        )
    assert refused.status_code == 401
    assert response.status_code == 200
    for name, pattern in HEADER_FORMATS.items():  # the packaged model's size is the default
        assert re.fullmatch(pattern, response.headers[name]), (name, response.headers[name])
    off = argparse.Namespace(no_fabric=True, model_params=None, model=None, upstream=None)
    assert _fabric(off, demo) == []
