"""Claims about harness.tools: schemas from typed functions, effects, targets and toolsets."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import anyio
import pydantic
import pytest

from harness.certify.d1 import call_footprint
from harness.errors import ToolsetError
from harness.messages import ToolCall
from harness.tools import Effect, Tool, Toolset, tool
from harness.tools.effects import Footprint
from harness.tools.execute import execute_call

OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


# --- @tool: schema, description, invocation ------------------------------------------------


def test_tool_derives_a_json_schema_from_the_function_signature():
    @tool
    def search(query: str, limit: int = 10, tags: list[str] | None = None) -> list[str]:
        return []

    schema = dict(search.parameters)
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"] == {"type": "string"}
    assert schema["properties"]["limit"] == {"type": "integer", "default": 10}
    assert set(schema["properties"]) == {"query", "limit", "tags"}


def test_derived_schema_forbids_extra_arguments():
    @tool
    def read_doc(key: str) -> str:
        return key

    assert read_doc.parameters["additionalProperties"] is False
    assert read_doc.validation_errors({"key": "a", "bogus": 1}) != []


def test_derived_schema_drops_pydantic_titles():
    @tool
    def read_doc(key: str) -> str:
        return key

    assert "title" not in read_doc.parameters
    assert all("title" not in prop for prop in read_doc.parameters["properties"].values())


def test_derived_schema_of_a_function_without_arguments_still_has_properties():
    @tool
    def now() -> str:
        return "noon"

    assert now.parameters["properties"] == {}
    assert now.validation_errors({}) == []


def test_derived_schema_keeps_literal_choices():
    @tool
    def sort(order: Literal["asc", "desc"]) -> str:
        return order

    assert sort.validation_errors({"order": "asc"}) == []
    assert sort.validation_errors({"order": "sideways"}) != []


def test_tool_takes_its_name_and_description_from_the_function():
    @tool
    def read_doc(key: str) -> str:
        """Read one document.

        Returns its body.
        """
        return key

    assert read_doc.name == "read_doc"
    assert read_doc.description == "Read one document.\n\nReturns its body."


def test_tool_keywords_override_name_and_description():
    @tool(name="docs.read", description="Fetch a doc.")
    def read_doc(key: str) -> str:
        """Ignored."""
        return key

    assert (read_doc.name, read_doc.description) == ("docs.read", "Fetch a doc.")


def test_tool_rejects_functions_with_star_args():
    def spread(*keys: str) -> str:
        return ""

    with pytest.raises(ToolsetError, match="spread"):
        tool(spread)


def test_tool_rejects_functions_with_star_star_kwargs():
    def anything(**kwargs: str) -> str:
        return ""

    with pytest.raises(ToolsetError, match="anything"):
        tool(anything)


def test_spec_is_the_openai_function_spec():
    @tool(description="Read.")
    def read_doc(key: str) -> str:
        return key

    spec = read_doc.spec()
    assert spec["type"] == "function"
    assert spec["function"]["name"] == "read_doc"
    assert spec["function"]["description"] == "Read."
    assert spec["function"]["parameters"] == dict(read_doc.parameters)


@pytest.mark.anyio
async def test_an_async_tool_is_awaited_with_its_arguments_as_keywords():
    @tool
    async def add(a: int, b: int) -> int:
        await anyio.lowlevel.checkpoint()
        return a + b

    assert await add.invoke({"a": 2, "b": 3}) == 5


@pytest.mark.anyio
async def test_a_sync_tool_runs_in_a_worker_thread():
    loop_thread = threading.get_ident()

    @tool
    def where() -> int:
        return threading.get_ident()

    assert await where.invoke({}) != loop_thread


@pytest.mark.anyio
async def test_invoke_fills_defaults_the_model_left_out():
    @tool
    def page(query: str, limit: int = 10) -> dict[str, Any]:
        return {"query": query, "limit": limit}

    assert await page.invoke({"query": "x"}) == {"query": "x", "limit": 10}


@pytest.mark.anyio
async def test_invoke_converts_json_values_to_the_annotated_types():
    @tool
    def count(keys: tuple[str, ...]) -> str:
        return type(keys).__name__

    assert await count.invoke({"keys": ["a", "b"]}) == "tuple"


@pytest.mark.anyio
async def test_a_sync_callable_returning_an_awaitable_is_awaited():
    async def inner(x: int) -> int:
        return x * 2

    t = Tool(name="double", parameters=OBJECT, fn=lambda x: inner(x))
    assert await t.invoke({"x": 4}) == 8


@pytest.mark.anyio
async def test_a_declared_only_tool_returns_its_stub_result():
    t = Tool(name="bfcl_fn", parameters=OBJECT, stub_result={"status": "done"})
    assert await t.invoke({}) == {"status": "done"}


# --- effects: the worst case and declarations ---------------------------------------------


def test_an_unannotated_tool_is_the_worst_case():
    @tool
    def mystery(key: str) -> str:
        return key

    effect = mystery.effect
    assert not effect.annotated
    assert not effect.read_only
    assert not effect.idempotent
    assert effect.destructive
    assert effect.open_world
    assert effect.write_targets is None
    assert effect.targets({"key": "a"}) is None


def test_a_tool_built_directly_defaults_to_the_worst_case():
    assert Tool(name="t", parameters=OBJECT).effect == Effect.worst_case()


def test_read_only_implies_idempotent_and_not_destructive():
    @tool(read_only=True)
    def read_doc(key: str) -> str:
        return key

    assert read_doc.effect.annotated
    assert read_doc.effect.read_only
    assert read_doc.effect.idempotent
    assert not read_doc.effect.destructive


def test_read_only_wins_over_contradicting_idempotent_and_destructive():
    effect = Effect.declare(read_only=True, idempotent=False, destructive=True)
    assert effect.idempotent
    assert not effect.destructive


def test_a_read_only_tool_writes_nothing():
    assert Effect.declare(read_only=True).targets({"key": "a"}) == frozenset()


def test_read_only_with_write_targets_is_a_toolset_error():
    with pytest.raises(ToolsetError, match="read-only"):

        @tool(read_only=True, write_targets="doc:{key}")
        def read_doc(key: str) -> str:
            return key


def test_declaring_only_idempotent_keeps_the_tool_destructive_and_its_targets_unknown():
    effect = Effect.declare(idempotent=True)
    assert effect.annotated
    assert effect.idempotent
    assert not effect.read_only
    assert effect.destructive
    assert effect.targets({"key": "a"}) is None


def test_an_explicit_non_destructive_writer_stays_non_destructive():
    assert not Effect.declare(destructive=False).destructive


# --- write targets ---------------------------------------------------------------------------


def test_a_write_target_template_formats_the_arguments():
    effect = Effect.declare(write_targets="doc:{key}")
    assert effect.targets({"key": "a", "body": "..."}) == frozenset({"doc:a"})


def test_a_template_with_two_fields_uses_both_arguments():
    effect = Effect.declare(write_targets="doc:{ns}/{key}")
    assert effect.targets({"ns": "n", "key": "k"}) == frozenset({"doc:n/k"})


def test_a_list_argument_expands_to_one_target_per_element():
    effect = Effect.declare(write_targets="doc:{key}")
    assert effect.targets({"key": ["a", "b", "c"]}) == frozenset({"doc:a", "doc:b", "doc:c"})


def test_two_list_arguments_expand_to_their_product():
    effect = Effect.declare(write_targets="{ns}/{key}")
    assert effect.targets({"ns": ["x", "y"], "key": ["1", "2"]}) == frozenset(
        {"x/1", "x/2", "y/1", "y/2"}
    )


def test_a_namespace_filled_by_an_argument_is_refused_with_what_to_declare():
    # '{ns}:{key}' with ns="doc" is the store key 'doc:a' that 'doc:{key}' names: the
    # namespace would be data, so the template is refused and the message says what to do.
    with pytest.raises(ToolsetError, match="target function"):
        Effect.declare(write_targets="{ns}:{key}")
    with pytest.raises(ToolsetError, match="target function"):  # 'web/cfg:k' either way
        Effect.declare(write_targets="{app}/cfg:{key}")
    by_function = Effect.declare(write_targets=lambda a: [f"{a['ns']}:{a['key']}"])
    assert by_function.targets({"ns": "doc", "key": "a"}) == frozenset({"doc:a"})


def test_an_empty_list_argument_writes_nothing():
    effect = Effect.declare(write_targets="doc:{key}")
    assert effect.targets({"key": []}) == frozenset()


def test_a_missing_argument_makes_the_targets_unknown():
    effect = Effect.declare(write_targets="doc:{key}")
    assert effect.targets({"other": "a"}) is None


def test_one_unresolvable_template_among_several_makes_the_targets_unknown():
    effect = Effect.declare(write_targets=["doc:{key}", "index:{shard}"])
    assert effect.targets({"key": "a"}) is None


def test_several_templates_give_the_union_of_their_targets():
    effect = Effect.declare(write_targets=("doc:{key}", "index"))
    assert effect.targets({"key": "a"}) == frozenset({"doc:a", "index"})


def test_a_template_without_fields_is_a_constant_target():
    assert Effect.declare(write_targets="log").targets({}) == frozenset({"log"})


def test_a_callable_computes_targets_from_the_arguments():
    def targets(arguments: Mapping[str, Any]) -> list[str]:
        return [f"row:{i}" for i in range(arguments["start"], arguments["stop"])]

    effect = Effect.declare(write_targets=targets)
    assert effect.targets({"start": 1, "stop": 3}) == frozenset({"row:1", "row:2"})


def test_callable_targets_are_strings_even_if_the_callable_returns_other_values():
    effect = Effect.declare(write_targets=lambda args: [args["n"], args["n"] + 1])
    assert effect.targets({"n": 7}) == frozenset({"7", "8"})


def test_tool_decorator_passes_write_targets_to_the_effect():
    @tool(idempotent=True, write_targets="doc:{key}")
    def set_field(key: str, field: str, value: str) -> str:
        return "ok"

    assert set_field.effect.targets({"key": "k", "field": "f", "value": "v"}) == frozenset(
        {"doc:k"}
    )
    assert set_field.effect.idempotent
    assert set_field.effect.annotated


# --- read targets ----------------------------------------------------------------------------


def test_declared_read_targets_expand_like_write_targets():
    effect = Effect.declare(read_only=True, read_targets="doc:{key}")
    assert effect.reads({"key": ["a", "b"]}) == frozenset({"doc:a", "doc:b"})


def test_a_read_only_tool_without_read_targets_reads_unknown_resources():
    assert Effect.declare(read_only=True).reads({"key": "a"}) is None


def test_the_worst_case_reads_unknown_resources():
    assert Effect.worst_case().reads({"key": "a"}) is None


def test_a_missing_argument_makes_the_read_targets_unknown():
    effect = Effect.declare(read_only=True, read_targets="doc:{key}")
    assert effect.reads({}) is None


def test_a_writer_without_read_targets_reads_unknown_resources():
    """Issue 15, item 2: unset reads are unknown, not "what it writes" (copy(a->b) reads a)."""
    effect = Effect.declare(write_targets="doc:{key}")
    assert effect.reads({"key": "a"}) is None


def test_a_blind_writer_declares_that_it_reads_nothing():
    effect = Effect.declare(write_targets="doc:{key}", read_targets=())
    assert effect.reads({"key": "a"}) == frozenset()


def test_tool_decorator_passes_read_targets_to_the_effect():
    @tool(read_only=True, read_targets="doc:{key}")
    def read_doc(key: str) -> str:
        return key

    assert read_doc.effect.reads({"key": "k"}) == frozenset({"doc:k"})


def test_read_targets_alone_are_an_annotation_and_are_kept():
    @tool(read_targets="doc:{key}")
    def touch(key: str) -> str:
        return key

    assert touch.effect.annotated
    assert touch.effect.read_targets == "doc:{key}"
    assert touch.effect.reads({"key": "k"}) == frozenset({"doc:k"})


# --- MCP annotations -------------------------------------------------------------------------


@pytest.mark.parametrize("annotations", [None, {}])
def test_missing_mcp_annotations_are_the_worst_case(annotations):
    assert Effect.from_mcp(annotations) == Effect.worst_case()


def test_mcp_defaults_apply_to_hints_that_are_left_out():
    # MCP: readOnlyHint false, destructiveHint true, idempotentHint false, openWorldHint true.
    effect = Effect.from_mcp({"title": "Some tool"})
    assert effect.annotated
    assert not effect.read_only
    assert effect.destructive
    assert not effect.idempotent
    assert effect.open_world
    assert effect.targets({}) is None


def test_mcp_read_only_hint_implies_idempotent_and_not_destructive():
    effect = Effect.from_mcp({"readOnlyHint": True, "destructiveHint": True})
    assert effect.read_only
    assert effect.idempotent
    assert not effect.destructive
    assert effect.targets({"x": 1}) == frozenset()


def test_mcp_hints_map_one_to_one_on_a_writing_tool():
    effect = Effect.from_mcp(
        {"idempotentHint": True, "destructiveHint": False, "openWorldHint": False}
    )
    assert (effect.read_only, effect.idempotent, effect.destructive, effect.open_world) == (
        False,
        True,
        False,
        False,
    )


def test_mcp_write_targets_extension_is_honoured():
    effect = Effect.from_mcp({"idempotentHint": True, "writeTargets": "doc:{key}"})
    assert effect.targets({"key": "a"}) == frozenset({"doc:a"})


def test_mcp_write_targets_list_extension_is_honoured():
    effect = Effect.from_mcp({"writeTargets": ["doc:{key}", "index"]})
    assert effect.targets({"key": "a"}) == frozenset({"doc:a", "index"})


def test_mcp_read_targets_extension_is_honoured():
    effect = Effect.from_mcp({"readOnlyHint": True, "readTargets": "doc:{key}"})
    assert effect.reads({"key": "a"}) == frozenset({"doc:a"})


# --- tool names and schemas ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["read_doc", "read-doc", "docs.read", "R2D2"])
def test_valid_tool_names_are_accepted(name):
    assert Tool(name=name, parameters=OBJECT).name == name


@pytest.mark.parametrize("name", ["", "read doc", "read/doc", "read(doc)", "doc:read", "a\n"])
def test_invalid_tool_names_are_a_toolset_error(name):
    with pytest.raises(ToolsetError, match="not valid"):
        Tool(name=name, parameters=OBJECT)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "nonsense"},
        {"type": "object", "properties": {"x": {"type": 5}}},
        {"type": "object", "required": "key"},
        {"minLength": -1},
    ],
)
def test_an_invalid_json_schema_is_a_toolset_error_naming_the_tool(schema):
    with pytest.raises(ToolsetError, match="'broken'") as info:
        Tool(name="broken", parameters=schema)
    assert info.value.tool == "broken"


def test_validation_errors_name_the_argument_path():
    t = Tool(
        name="t",
        parameters={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
    )
    assert t.validation_errors({"n": 1}) == []
    [problem] = t.validation_errors({"n": "one"})
    assert problem.startswith("n: ")
    [missing] = t.validation_errors({})
    assert missing.startswith("(arguments): ")
    assert "'n'" in missing


def test_with_effect_returns_a_copy_with_the_new_effect():
    t = Tool(name="t", parameters=OBJECT)
    annotated = t.with_effect(Effect.declare(read_only=True))
    assert annotated.effect.read_only
    assert not t.effect.read_only
    assert annotated.name == t.name


# --- Toolset ---------------------------------------------------------------------------------


def _tool(name: str) -> Tool:
    return Tool(name=name, parameters=OBJECT)


def test_a_toolset_is_a_mapping_in_declaration_order():
    ts = Toolset([_tool("b"), _tool("a"), _tool("c")], name="demo")
    assert list(ts) == ["b", "a", "c"]
    assert len(ts) == 3
    assert ts["a"].name == "a"
    assert "z" not in ts
    assert [s["function"]["name"] for s in ts.specs()] == ["b", "a", "c"]
    assert "demo" in repr(ts)


def test_duplicate_tool_names_are_a_toolset_error_naming_tool_and_toolset():
    with pytest.raises(ToolsetError, match=r"'demo'.*'a'"):
        Toolset([_tool("a"), _tool("b"), _tool("a")], name="demo")


def test_an_empty_toolset_is_allowed():
    assert len(Toolset([])) == 0


# --- Toolset.from_openai ---------------------------------------------------------------------

READ_SPEC: dict[str, Any] = {
    "name": "read_doc",
    "description": "Read a document.",
    "parameters": {
        "type": "object",
        "properties": {"key": {"type": "string"}},
        "required": ["key"],
    },
}


def test_from_openai_accepts_the_wrapped_spec_shape():
    ts = Toolset.from_openai([{"type": "function", "function": READ_SPEC}])
    t = ts["read_doc"]
    assert t.description == "Read a document."
    assert dict(t.parameters) == READ_SPEC["parameters"]


def test_from_openai_accepts_the_bare_spec_shape():
    ts = Toolset.from_openai([READ_SPEC], name="bare")
    assert list(ts) == ["read_doc"]
    assert ts.name == "bare"


def test_from_openai_round_trips_through_specs():
    ts = Toolset.from_openai([READ_SPEC])
    assert Toolset.from_openai(ts.specs()).specs() == ts.specs()


def test_from_openai_without_parameters_takes_no_arguments():
    ts = Toolset.from_openai([{"name": "ping"}])
    assert ts["ping"].validation_errors({}) == []


def test_from_openai_unannotated_specs_are_the_worst_case():
    ts = Toolset.from_openai([READ_SPEC])
    assert ts["read_doc"].effect == Effect.worst_case()


def test_from_openai_reads_annotations_inside_function():
    spec = {"type": "function", "function": {**READ_SPEC, "annotations": {"readOnlyHint": True}}}
    assert Toolset.from_openai([spec])["read_doc"].effect.read_only


def test_from_openai_reads_annotations_beside_function():
    spec = {"type": "function", "function": READ_SPEC, "annotations": {"readOnlyHint": True}}
    assert Toolset.from_openai([spec])["read_doc"].effect.read_only


def test_from_openai_maps_annotations_with_mcp_defaults():
    spec = {**READ_SPEC, "annotations": {"idempotentHint": True, "writeTargets": "doc:{key}"}}
    effect = Toolset.from_openai([spec])["read_doc"].effect
    assert effect == Effect.from_mcp({"idempotentHint": True, "writeTargets": "doc:{key}"})
    assert effect.destructive
    assert effect.targets({"key": "k"}) == frozenset({"doc:k"})


@pytest.mark.anyio
async def test_from_openai_tools_without_handlers_return_the_stub_result():
    ts = Toolset.from_openai([READ_SPEC], stub_result={"ok": True})
    assert await ts["read_doc"].invoke({"key": "a"}) == {"ok": True}


@pytest.mark.anyio
async def test_from_openai_calls_the_handler_given_for_a_tool():
    async def read_doc(key: str) -> str:
        return f"body of {key}"

    ts = Toolset.from_openai([READ_SPEC], {"read_doc": read_doc})
    assert await ts["read_doc"].invoke({"key": "a"}) == "body of a"


def test_from_openai_handlers_for_unknown_tools_are_a_toolset_error():
    with pytest.raises(ToolsetError, match="read_dok"):
        Toolset.from_openai([READ_SPEC], {"read_dok": lambda key: key})


def test_from_openai_a_spec_without_a_name_is_a_toolset_error():
    with pytest.raises(ToolsetError, match="no 'name'"):
        Toolset.from_openai([{"type": "function", "function": {"description": "x"}}])


def test_from_openai_duplicate_names_are_a_toolset_error():
    with pytest.raises(ToolsetError, match="two tools named 'read_doc'"):
        Toolset.from_openai([READ_SPEC, {"type": "function", "function": READ_SPEC}])


def test_from_openai_an_invalid_name_is_a_toolset_error():
    with pytest.raises(ToolsetError, match="not valid"):
        Toolset.from_openai([{**READ_SPEC, "name": "read doc"}])


def test_from_openai_an_invalid_schema_is_a_toolset_error():
    with pytest.raises(ToolsetError, match="not JSON Schema"):
        Toolset.from_openai([{**READ_SPEC, "parameters": {"type": "objekt"}}])


@pytest.mark.parametrize("parameters", ["object", ["key"], 7])
def test_from_openai_parameters_that_are_not_a_schema_object_are_a_toolset_error(parameters):
    with pytest.raises(ToolsetError, match="read_doc"):
        Toolset.from_openai([{**READ_SPEC, "parameters": parameters}])


def test_an_mcp_extension_key_declares_that_a_tool_accepts_idempotency_keys():
    from harness.tools import Effect

    assert Effect.from_mcp({"acceptsIdempotencyKey": True}).accepts_idempotency_key
    assert not Effect.from_mcp({"idempotentHint": True}).accepts_idempotency_key


def test_mcp_annotations_in_the_sdks_snake_case_map_like_the_protocols_camel_case() -> None:
    camel = {
        "readOnlyHint": False,
        "idempotentHint": True,
        "destructiveHint": False,
        "openWorldHint": False,
        "writeTargets": "doc:{key}",
    }
    snake = {
        "read_only_hint": False,
        "idempotent_hint": True,
        "destructive_hint": False,
        "open_world_hint": False,
        "write_targets": "doc:{key}",
    }
    effect = Effect.from_mcp(snake)
    assert effect == Effect.from_mcp(camel)
    assert effect.idempotent
    assert not effect.destructive
    assert not effect.open_world
    assert effect.targets({"key": "a"}) == Effect.from_mcp(camel).targets({"key": "a"})


_COERCED: list[Any] = []


def _count_coercion(value: Any) -> Any:
    _COERCED.append(value)
    return value


CountedInt = Annotated[int, pydantic.BeforeValidator(_count_coercion)]


@pytest.mark.anyio
async def test_arguments_certified_are_coerced_once_and_the_tool_receives_those_values() -> None:
    received: list[int] = []

    @tool(idempotent=True, write_targets="doc:{n}", read_targets=())
    async def put(n: CountedInt) -> str:
        received.append(n)
        return "ok"

    _COERCED.clear()
    toolset = Toolset([put])
    call = ToolCall("c1", "put", '{"n": 7.0}')
    footprint = call_footprint(toolset, call)
    assert isinstance(footprint, Footprint)
    assert footprint.writes == {"doc:7"}
    result = await execute_call(toolset, call)
    assert (result.is_error, received, len(_COERCED)) == (False, [7], 1)
    await execute_call(toolset, call)  # the kept values are used once: a rerun coerces again
    assert len(_COERCED) == 2
