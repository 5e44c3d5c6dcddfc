"""Hostile input, generated: for each of the three APIs, hypothesis sends the ASGI app random
JSON bodies, valid requests with one field (anywhere, at any depth) replaced by a random value
of any type, deleted, nested thousands deep, made huge or given a lone surrogate, bodies that
are not JSON or not UTF-8, and random harness headers. Whatever comes in, the answer is never
a 5xx: it is served (2xx) or refused with a 4xx in that API's own error shape, saying nothing
of the server (no path, no Python hint)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.proxy import in_process_client
from harness.testing import ScriptedEngine
from tests.test_proxy import KEYS, TOOLS, make_app, opening, survey_script

APIS = {
    "chat": "/chat/completions",
    "responses": "/responses",
    "messages": "/messages",
}
FLAT_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
ANTHROPIC_TOOLS = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS
]
LEAKS = ("/work", "site-packages", ".py", "set_int_max_str_digits", "Traceback")
#: Where a value is spliced into the JSON text as it is (deep nesting, huge or odd numbers).
HOLE = "__HOLE__"
DELETE = object()
FUZZ = settings(
    max_examples=120,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def base(api: str) -> dict[str, Any]:
    """A valid request of ``api`` that reaches the loop: a history with a call and its
    result, tools, settings and the harness's own fields."""
    inputs = {"keys": KEYS}
    if api == "chat":
        return {
            "model": "m",
            "messages": [
                *opening(),
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "up_0",
                            "type": "function",
                            "function": {"name": "read_doc", "arguments": '{"key": "a"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "up_0", "content": "text of a"},
            ],
            "tools": TOOLS,
            "tool_choice": "auto",
            "temperature": 0,
            "max_tokens": 64,
            "stream": False,
            "harness_inputs": inputs,
        }
    if api == "responses":
        return {
            "model": "m",
            "instructions": "You read documents.",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Survey a, b and c."}]},
                {"type": "function_call", "call_id": "up_0", "name": "read_doc", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "up_0", "output": "text of a"},
            ],
            "tools": FLAT_TOOLS,
            "tool_choice": "auto",
            "max_output_tokens": 64,
            "store": False,
            "harness_inputs": inputs,
        }
    return {
        "model": "m",
        "max_tokens": 64,
        "system": "You read documents.",
        "messages": [
            {"role": "user", "content": "Survey a, b and c."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "up_0", "name": "read_doc", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "up_0", "content": "text of a"}],
            },
        ],
        "tools": ANTHROPIC_TOOLS,
        "tool_choice": {"type": "auto"},
        "harness_inputs": inputs,
    }


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (the top level excluded)."""
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in items:
        yield (*prefix, key)
        yield from paths(child, (*prefix, key))


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A copy of ``value`` with the value at ``path`` replaced (or deleted: ``DELETE``)."""
    copy = json.loads(json.dumps(value))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if new is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return copy


surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
texts = st.text(max_size=12) | st.text(alphabet=st.characters() | surrogates, max_size=6)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)
#: Spliced as JSON text: nesting past any limit, numbers JSON or Python cannot carry.
raw_values = st.one_of(
    st.integers(min_value=60, max_value=5000).map(lambda n: "[" * n + "]" * n),
    st.integers(min_value=60, max_value=3000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.integers(min_value=1000, max_value=6000).map(lambda n: "9" * n),
    st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "-Infinity", '"\\ud800"', '"a\\udfff"']),
    st.integers(min_value=10_000, max_value=300_000).map(lambda n: json.dumps("x" * n)),
)


def encode(value: Any, raw: str | None, *, ascii_only: bool) -> bytes:
    text = json.dumps(value, ensure_ascii=ascii_only)
    if raw is not None:
        text = text.replace(json.dumps(HOLE), raw)
    return text.encode("utf-8", "surrogatepass")


async def answer(api: str, content: bytes, headers: dict[str, bytes] | None = None) -> Any:
    app = make_app(ScriptedEngine(survey_script), max_body_bytes=2_000_000)
    async with in_process_client(app) as client:
        return await client.post(APIS[api], content=content, headers=headers or {})


def check(api: str, response: Any) -> None:
    """Never a 5xx; an error in the API's own shape, saying nothing of the server."""
    assert response.status_code < 500, (response.status_code, response.text[:2000])
    if response.status_code < 400:
        return  # served (what the client sent may be echoed, paths and all)
    text = response.text
    for leak in LEAKS:
        assert leak not in text, (leak, text[:2000])
    data = response.json()
    if api == "messages":
        assert data["type"] == "error", data
        assert isinstance(data["error"]["type"], str), data
        assert isinstance(data["error"]["message"], str), data
    else:
        assert isinstance(data["error"]["type"], str), data
        assert isinstance(data["error"]["message"], str), data
        assert "param" in data["error"], data


def run(api: str, content: bytes, headers: dict[str, bytes] | None = None) -> None:
    response = anyio.run(answer, api, content, headers)
    check(api, response)


@pytest.mark.parametrize("api", APIS)
def test_each_base_request_is_served(api: str) -> None:
    response = anyio.run(answer, api, json.dumps(base(api)).encode())
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("api", APIS)
@FUZZ
@given(data=st.data(), ascii_only=st.booleans())
def test_any_field_replaced_by_anything_is_never_a_5xx(
    api: str, data: st.DataObject, ascii_only: bool
) -> None:
    body = base(api)
    path = data.draw(st.sampled_from(list(paths(body))), label="path")
    kind = data.draw(st.sampled_from(["value", "delete", "raw"]), label="kind")
    raw = None
    if kind == "value":
        new: Any = data.draw(json_values, label="value")
    elif kind == "delete":
        new = DELETE
    else:
        new, raw = HOLE, data.draw(raw_values, label="raw")
    run(api, encode(replaced(body, path, new), raw, ascii_only=ascii_only))


@pytest.mark.parametrize("api", APIS)
@FUZZ
@given(value=json_values, ascii_only=st.booleans())
def test_any_json_body_is_never_a_5xx(api: str, value: Any, ascii_only: bool) -> None:
    run(api, encode(value, None, ascii_only=ascii_only))


@pytest.mark.parametrize("api", APIS)
@FUZZ
@given(
    field=st.sampled_from(["model", "harness_skill", "harness_arm", "harness_inputs", "stream"]),
    raw=raw_values,
)
def test_a_top_level_field_made_hostile_is_never_a_5xx(api: str, field: str, raw: str) -> None:
    run(api, encode({**base(api), field: HOLE}, raw, ascii_only=True))


@pytest.mark.parametrize("api", APIS)
@FUZZ
@given(content=st.binary(max_size=200))
def test_bytes_that_are_not_json_are_never_a_5xx(api: str, content: bytes) -> None:
    run(api, content)


header_values = st.binary(max_size=40).map(
    lambda b: bytes(c for c in b if c >= 0x20 and c != 0x7F)
) | st.sampled_from(
    [b'{"keys": ["a"]}', b"[]", b"S", b"F", b"P", b"survey", b"nope", b'{"keys": 5}', b"{" * 200]
)


@pytest.mark.parametrize("api", APIS)
@FUZZ
@given(
    headers=st.dictionaries(
        st.sampled_from(
            [
                "x-harness-inputs",
                "x-harness-arm",
                "x-harness-skill",
                "content-type",
                "content-length",
            ]
        ),
        header_values,
        max_size=3,
    )
)
def test_hostile_headers_are_never_a_5xx(api: str, headers: dict[str, bytes]) -> None:
    headers.pop("content-length", None)  # the transport sets it from the body
    run(api, json.dumps(base(api)).encode(), headers)
