"""The proxy's typed request models: one pydantic model per wire API — Chat Completions
(:class:`ChatBody`), the Responses API (:class:`ResponsesBody`) and the Anthropic Messages API
(:class:`MessagesBody`) — that say what a request may hold.

A body reaches them through the edge's one validation layer (:mod:`harness.proxy.limits`:
nesting depth, integer digits, finite numbers, lone surrogates, the body's size at the
route) and is then validated in strict mode (JSON's types as they are: ``1`` is no string,
``"1"`` no number, ``0`` no boolean), with bounds on numbers (``max_tokens`` a positive 32-bit
integer, ``seed`` 64 bits, ``temperature`` 0 to 2) and on identifiers (a model, tool or call
name at most :data:`MAX_NAME` characters). :func:`validated` turns the first failure into a
:class:`~harness.proxy.protocol.BadRequest` naming the field by its JSON path in the API's own
terms (``messages[2].content``, ``input[0].call_id``) and what it should be; the route answers it
as a 400 in that API's error shape.

Unknown fields inside a message, a content block, a tool or a call are kept (every model
allows extra fields) and the client's own objects are what the proxy forwards, so nothing
the upstream may understand is lost. An unknown *top-level* field is refused, naming it
(:func:`refuse_unknown`): the proxy does not pass those on and will not ignore them silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from harness.engines.base import NamedTool, OtherToolChoice, ToolChoice
from harness.proxy.protocol import BadRequest

__all__ = (
    "INT32",
    "MAX_NAME",
    "ChatBody",
    "MessagesBody",
    "ResponsesBody",
    "WireModel",
    "refuse_unknown",
    "validated",
)

#: The largest ``max_tokens`` (``max_output_tokens``) accepted: a positive 32-bit integer.
INT32 = 2**31 - 1
_INT64 = 2**63
#: The longest model, tool, call or skill name accepted (they go into headers, logs and ids).
MAX_NAME = 256

Name = Annotated[str, Field(max_length=MAX_NAME)]
MaxTokens = Annotated[int, Field(ge=1, le=INT32)]
Seed = Annotated[int, Field(ge=-_INT64, lt=_INT64)]
Temperature = Annotated[float, Field(ge=0, le=2)]
JsonObject = dict[str, Any]


def _neutral(value: Any) -> AfterValidator:
    """A field the engine has no knob for: accepted only at its neutral ``value``."""

    def check(given: Any) -> Any:
        if given is not None and given != value:
            raise PydanticCustomError(
                "unsupported_value",
                "{given} is not supported by this proxy's engine; omit it or send {neutral}",
                {"given": _short(given), "neutral": json.dumps(value)},
            )
        return given

    return AfterValidator(check)


class WireModel(BaseModel):
    """A JSON object of a request: strict JSON types, unknown fields kept."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


# -- Chat Completions ------------------------------------------------------------------------


class ChatFunctionCall(WireModel):
    name: Name
    arguments: str


class ChatToolCall(WireModel):
    id: Name
    type: Literal["function"] = "function"
    function: ChatFunctionCall


class ChatContentPart(WireModel):
    """A content part (``text``, ``image_url``, ...): passed on as the client sent it."""

    type: Name
    text: str | None = None


class ChatMessage(WireModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ChatContentPart] | None = None
    tool_calls: list[ChatToolCall] | None = None
    tool_call_id: Name | None = None
    name: Name | None = None

    @model_validator(mode="after")
    def _tool_message_names_its_call(self) -> ChatMessage:
        if self.role == "tool" and self.tool_call_id is None:
            raise PydanticCustomError(
                "missing_tool_call_id", "a message of role tool needs a string 'tool_call_id'"
            )
        return self


class ChatFunctionSpec(WireModel):
    name: Name
    description: str | None = None
    parameters: JsonObject | None = None
    strict: bool | None = None


class ChatTool(WireModel):
    type: Literal["function"] = "function"
    function: ChatFunctionSpec


class _FunctionName(WireModel):
    name: Name


class ChatNamedChoice(WireModel):
    """``{"type": "function", "function": {"name": ...}}``."""

    type: Literal["function"]
    function: _FunctionName


class ChatOtherChoice(WireModel):
    """Another ``tool_choice`` object (``allowed_tools``, ...): passed on as sent."""

    type: Name

    @model_validator(mode="after")
    def _not_a_function(self) -> ChatOtherChoice:
        if self.type == "function":
            raise PydanticCustomError(
                "named_function", "a tool_choice of type 'function' needs {'function': {'name'}}"
            )
        return self


def _chat_choice_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "mode"
    if isinstance(value, dict):
        return "function" if value.get("type") == "function" else "object"
    return None


ChatToolChoice = Annotated[
    Annotated[Literal["auto", "none", "required"], Tag("mode")]
    | Annotated[ChatNamedChoice, Tag("function")]
    | Annotated[ChatOtherChoice, Tag("object")],
    Discriminator(
        _chat_choice_kind,
        custom_error_type="tool_choice",
        custom_error_message="tool_choice must be 'auto', 'none', 'required' or an object such "
        "as {'type': 'function', 'function': {'name': ...}}",
    ),
]


class StreamOptions(BaseModel):
    """``include_usage``; ``include_obfuscation`` is accepted (the proxy pads no event)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    include_usage: bool | None = None
    include_obfuscation: bool | None = None


class _HarnessFields(WireModel):
    """The harness's own fields (what the OpenAI SDK's ``extra_body`` sends)."""

    harness_skill: Name | None = None
    harness_inputs: JsonObject | None = None
    harness_arm: Literal["S", "F"] | None = None


class ChatBody(_HarnessFields):
    """A Chat Completions request (``POST /v1/chat/completions``)."""

    model: Name = ""
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ChatTool] | None = None
    tool_choice: ChatToolChoice | None = None
    parallel_tool_calls: bool | None = None
    temperature: Temperature | None = None
    max_tokens: MaxTokens | None = None
    max_completion_tokens: MaxTokens | None = None
    seed: Seed | None = None
    stop: str | list[str] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: Annotated[int | None, _neutral(1)] = None
    user: str | None = None
    metadata: JsonObject | None = None
    top_p: Annotated[float | None, _neutral(1)] = None
    presence_penalty: Annotated[float | None, _neutral(0)] = None
    frequency_penalty: Annotated[float | None, _neutral(0)] = None
    logprobs: Annotated[bool | None, _neutral(False)] = None
    store: Annotated[bool | None, _neutral(False)] = None  # the proxy stores no completions


def chat_tool_choice(choice: Any) -> ToolChoice:
    """A validated Chat Completions ``tool_choice`` as the engine seam's type."""
    if isinstance(choice, ChatNamedChoice):
        return NamedTool(choice.function.name)
    if isinstance(choice, ChatOtherChoice):
        return OtherToolChoice(choice.model_dump())
    return choice  # type: ignore[no-any-return]


# -- the Responses API -----------------------------------------------------------------------


def _block_kind(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else None


class ResponsesTextPart(WireModel):
    type: Literal["input_text", "output_text", "text"]
    text: str


ResponsesContent = str | list[ResponsesTextPart]


class ResponsesMessage(WireModel):
    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: ResponsesContent


class ResponsesFunctionCall(WireModel):
    type: Literal["function_call"]
    call_id: Name
    name: Name
    arguments: str


class ResponsesFunctionOutput(WireModel):
    type: Literal["function_call_output"]
    call_id: Name
    output: ResponsesContent


def _item_kind(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    kind = value.get("type", "message" if "role" in value else None)
    return kind if isinstance(kind, str) else None


ResponsesItem = Annotated[
    Annotated[ResponsesMessage, Tag("message")]
    | Annotated[ResponsesFunctionCall, Tag("function_call")]
    | Annotated[ResponsesFunctionOutput, Tag("function_call_output")],
    Discriminator(
        _item_kind,
        custom_error_type="unsupported_item",
        custom_error_message="this proxy takes message, function_call and "
        "function_call_output items (it stores nothing an item reference could name; images, "
        "files and reasoning items are not passed on)",
    ),
]


class ResponsesTool(WireModel):
    type: Literal["function"]
    name: Name
    description: str | None = None
    parameters: JsonObject | None = None
    strict: bool | None = None


ResponsesFunctionTool = Annotated[
    Annotated[ResponsesTool, Tag("function")],
    Discriminator(
        _block_kind,
        custom_error_type="unsupported_tool",
        custom_error_message="this proxy serves function tools only ({'type': 'function', "
        "'name': ..., 'parameters': ...})",
    ),
]


class ResponsesNamedChoice(WireModel):
    type: Literal["function"]
    name: Name


class ResponsesOtherChoice(WireModel):
    type: Name


ResponsesToolChoice = Annotated[
    Annotated[Literal["auto", "none", "required"], Tag("mode")]
    | Annotated[ResponsesNamedChoice, Tag("function")]
    | Annotated[ResponsesOtherChoice, Tag("object")],
    Discriminator(
        _chat_choice_kind,
        custom_error_type="tool_choice",
        custom_error_message="tool_choice must be 'auto', 'none', 'required' or an object such "
        "as {'type': 'function', 'name': ...}",
    ),
]


class _PlainText(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    type: Literal["text"]


class ResponsesText(BaseModel):
    """``text``: the plain text format only (no structured output)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    format: _PlainText | None = None


def _absent(reason: str) -> AfterValidator:
    def check(given: Any) -> Any:
        if given is not None:
            raise PydanticCustomError("unsupported_field", reason)
        return given

    return AfterValidator(check)


def _falsy(reason: str) -> AfterValidator:
    def check(given: Any) -> Any:
        if given:
            raise PydanticCustomError("unsupported_value", reason)
        return given

    return AfterValidator(check)


_STORES_NOTHING = (
    "not supported: this proxy stores no responses or conversations; send the whole "
    "conversation in 'input' (and store: false)"
)


class ResponsesBody(_HarnessFields):
    """A Responses API request (``POST /v1/responses``)."""

    model: Name = ""
    input: str | list[ResponsesItem]
    instructions: str | None = None
    tools: list[ResponsesFunctionTool] | None = None
    tool_choice: ResponsesToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: MaxTokens | None = None
    temperature: Temperature | None = None
    top_p: Annotated[float | None, _neutral(1)] = None
    stream: bool | None = None
    metadata: JsonObject | None = None
    user: str | None = None
    store: Annotated[
        bool | None,
        _falsy("store: true is not supported: this proxy stores no responses; send false"),
    ] = None
    include: Annotated[
        list[str] | None, _falsy("'include' is not supported by this proxy; omit it")
    ] = None
    text: ResponsesText | None = None
    truncation: Literal["disabled"] | None = None
    previous_response_id: Annotated[str | None, _absent(_STORES_NOTHING)] = None
    conversation: Annotated[Any, _absent(_STORES_NOTHING)] = None
    background: Annotated[
        bool | None, _falsy("background: true is not supported by this proxy; omit it")
    ] = None

    @field_validator("input")
    @classmethod
    def _input_not_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise PydanticCustomError(
                "empty_input", "must be a string or a non-empty list of items"
            )
        return value


def responses_tool_choice(choice: Any) -> ToolChoice:
    """A validated Responses ``tool_choice`` as the engine seam's type (``allowed_tools`` in
    Chat Completions' spelling, for a server upstream)."""
    if isinstance(choice, ResponsesNamedChoice):
        return NamedTool(choice.name)
    if isinstance(choice, ResponsesOtherChoice):
        value = choice.model_dump()
        if value.get("type") == "allowed_tools":
            rest = {k: v for k, v in value.items() if k != "type"}
            if isinstance(rest.get("tools"), list):
                rest["tools"] = [_chat_function(t) for t in rest["tools"]]
            value = {"type": "allowed_tools", "allowed_tools": rest}
        return OtherToolChoice(value)
    return choice  # type: ignore[no-any-return]


def _chat_function(tool: Any) -> Any:
    """A Responses function reference ``{"type": "function", "name"}`` in Chat Completions'
    spelling (anything else as it is)."""
    if isinstance(tool, dict) and tool.get("type") == "function" and "function" not in tool:
        return {"type": "function", "function": {"name": tool.get("name")}}
    return tool


# -- the Anthropic Messages API --------------------------------------------------------------


class AnthropicText(WireModel):
    """A ``text`` block (``cache_control`` and other fields accepted, without effect)."""

    type: Literal["text"]
    text: str


class AnthropicToolUse(WireModel):
    type: Literal["tool_use"]
    id: Name
    name: Name
    input: JsonObject = Field(default_factory=dict)


class AnthropicToolResult(WireModel):
    type: Literal["tool_result"]
    tool_use_id: Name
    content: str | list[AnthropicText] = ""
    is_error: bool | None = None


UserBlock = Annotated[
    Annotated[AnthropicText, Tag("text")] | Annotated[AnthropicToolResult, Tag("tool_result")],
    Discriminator(
        _block_kind,
        custom_error_type="unsupported_block",
        custom_error_message="this proxy takes text and tool_result blocks from the user "
        "(images, documents and other blocks are not passed on)",
    ),
]
AssistantBlock = Annotated[
    Annotated[AnthropicText, Tag("text")] | Annotated[AnthropicToolUse, Tag("tool_use")],
    Discriminator(
        _block_kind,
        custom_error_type="unsupported_block",
        custom_error_message="this proxy takes text and tool_use blocks from the assistant "
        "(thinking and server tool blocks are not passed on)",
    ),
]


class AnthropicUserMessage(WireModel):
    role: Literal["user"]
    content: str | list[UserBlock]


class AnthropicAssistantMessage(WireModel):
    role: Literal["assistant"]
    content: str | list[AssistantBlock]


def _role(value: Any) -> str | None:
    role = value.get("role") if isinstance(value, dict) else None
    return role if isinstance(role, str) else None


AnthropicMessage = Annotated[
    Annotated[AnthropicUserMessage, Tag("user")]
    | Annotated[AnthropicAssistantMessage, Tag("assistant")],
    Discriminator(
        _role,
        custom_error_type="role",
        custom_error_message="a message must be an object with role 'user' or 'assistant'",
    ),
]


class AnthropicTool(WireModel):
    """A client tool; a server tool (``type`` other than ``custom``) is refused."""

    type: Literal["custom"] | None = None
    name: Name
    description: str | None = None
    input_schema: JsonObject | None = None


def _client_tool(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    return "custom" if value.get("type") in (None, "custom") else None


AnthropicClientTool = Annotated[
    Annotated[AnthropicTool, Tag("custom")],
    Discriminator(
        _client_tool,
        custom_error_type="unsupported_tool",
        custom_error_message="a tool must be a client tool {'name', 'description', "
        "'input_schema'}; this proxy runs no server tools",
    ),
]


class AnthropicToolChoice(WireModel):
    type: Literal["auto", "any", "none", "tool"]
    name: Name | None = None
    disable_parallel_tool_use: bool | None = None

    @model_validator(mode="after")
    def _tool_is_named(self) -> AnthropicToolChoice:
        if self.type == "tool" and self.name is None:
            raise PydanticCustomError("tool_choice", "tool_choice of type 'tool' needs a 'name'")
        return self


class MessagesBody(_HarnessFields):
    """A Messages API request (``POST /v1/messages``)."""

    model: Name = ""
    max_tokens: MaxTokens
    system: str | list[AnthropicText] | None = None
    messages: list[AnthropicMessage] = Field(min_length=1)
    tools: list[AnthropicClientTool] | None = None
    tool_choice: Literal["auto", "any", "none"] | AnthropicToolChoice | None = None
    temperature: Temperature | None = None
    top_p: Annotated[float | None, _neutral(1)] = None
    stop_sequences: list[str] | None = None
    stream: bool | None = None
    metadata: JsonObject | None = None


#: Anthropic's ``tool_choice`` types as Chat Completions' modes (``tool``: a named tool).
_ANTHROPIC_MODES: dict[str, ToolChoice] = {"auto": "auto", "any": "required", "none": "none"}


def messages_tool_choice(choice: str | AnthropicToolChoice) -> ToolChoice:
    """A validated Messages ``tool_choice`` as the engine seam's type."""
    kind = choice if isinstance(choice, str) else choice.type
    if isinstance(choice, AnthropicToolChoice) and choice.type == "tool":
        assert choice.name is not None  # checked by the model
        return NamedTool(choice.name)
    return _ANTHROPIC_MODES[kind]


# -- validation and its errors ---------------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], body: Any) -> M:
    """``body`` (decoded JSON, within the edge's limits) as ``model``; the first failure a
    :class:`~harness.proxy.protocol.BadRequest` naming the field's JSON path (``param``)."""
    if not isinstance(body, dict):
        raise BadRequest(f"The request body must be a JSON object, not {_kind(body)}.")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise _bad_request(exc, body) from None


def refuse_unknown(value: BaseModel) -> None:
    """Refuse ``value``'s unknown top-level fields, naming them (see the module docstring)."""
    unknown = sorted(value.model_extra or ())
    if unknown:
        names = ", ".join(repr(_bounded(str(k), 60)) for k in unknown[:10])
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        raise BadRequest(
            f"Unsupported field(s) {names}{more}: this proxy does not pass them on and will not "
            "ignore them silently; remove them.",
            param=_bounded(str(unknown[0]), 60),
        )


#: What an error type says the value should have been (for a union's alternatives).
_EXPECTED = {
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "none_required": "null",
}


def _bad_request(exc: ValidationError, body: Any) -> BadRequest:
    # The first failing field; of a union's alternatives, those that got furthest into the
    # value (a list of blocks that failed at one block, not "should be a string").
    located = [
        (_json_path(body, e["loc"], missing=e["type"] == "missing"), e)
        for e in exc.errors(include_url=False)
    ]
    top = located[0][0]
    subtree = [(p, e) for p, e in located if p[: len(top)] == top]
    path = max((p for p, _ in subtree), key=len)
    alternatives = [e for p, e in subtree if p == path]
    # an alternative the value's type matched says more than those whose type it is not
    matched = [e for e in alternatives if not _mismatch(e)]
    alternatives = matched or alternatives
    first = alternatives[0]
    expected = [_EXPECTED.get(e["type"]) for e in alternatives]
    if len(alternatives) > 1 and all(expected):
        said = " or ".join(dict.fromkeys(e for e in expected if e))
        message = f"must be {said}"
    else:
        message = first["msg"][:1].lower() + first["msg"][1:]
    where = _spell(path)
    got = ""
    if first["type"] not in ("missing", "unsupported_field", "unsupported_value") and path:
        got = f" (got {_short(first['input'])})"
    subject = f"'{where}'" if where else "The request body"
    return BadRequest(f"{subject}: {message}{got}.", param=where or None)


def _mismatch(error: Any) -> bool:
    """``error`` says only that the value is not of the alternative's type."""
    kind = error["type"]
    return kind in _EXPECTED or (kind == "literal_error" and not isinstance(error["input"], str))


def _json_path(body: Any, loc: Sequence[int | str], *, missing: bool) -> tuple[int | str, ...]:
    """The keys of ``loc`` that are keys in ``body`` — a union's member names and tags are
    not — and, for a ``missing`` field, its name."""
    out: list[int | str] = []
    value = body
    for key in loc[:-1] if missing else loc:
        if isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
            value = value[key]
        elif not (isinstance(value, Mapping) and isinstance(key, str) and key in value):
            continue
        else:
            value = value[key]
        out.append(key)
    if missing and loc:
        out.append(loc[-1])
    return tuple(out)


def _spell(path: tuple[int | str, ...]) -> str:
    """A JSON path like ``messages[1].content`` (bounded)."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else f".{key}" if out else str(key)
    return _bounded(out, 120)


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit // 2] + "..." + text[-(limit // 2) + 3 :]


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
