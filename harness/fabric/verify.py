"""Verifiers: deterministic checks on a finished node's output, run off the critical path.

A :data:`Verifier` is any callable ``(NodeResult) -> Verdict | bool`` (sync or async). The
executor runs a node's verifiers as soon as the node has produced its output, in the node's
own task: nodes that do not consume that output are dispatched regardless; nodes that do
consume it wait until every verifier has passed (the output is *released*). A rejection
triggers the repair policy; a verifier that raises counts as a rejection (its exception is
the reason), never as a pass.

Built-ins: :func:`non_empty`, :func:`matches`, :func:`json_schema` and :func:`predicate`
(a caller's function with a reason).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import jsonschema

if TYPE_CHECKING:
    from harness.fabric.result import NodeResult

__all__ = (
    "Verdict",
    "Verifier",
    "json_schema",
    "matches",
    "non_empty",
    "predicate",
    "run_verifier",
    "verifier_name",
)


@dataclass(frozen=True)
class Verdict:
    """One verifier's decision on one output: ``passed`` and, when not, why."""

    passed: bool
    reason: str = ""
    verifier: str = ""


Verifier = Callable[["NodeResult"], "Verdict | bool | Awaitable[Verdict | bool]"]


def verifier_name(verifier: Callable[..., Any]) -> str:
    """A readable name: ``name`` attribute, else the function's qualified name."""
    name = getattr(verifier, "name", None) or getattr(verifier, "__qualname__", None)
    return str(name or type(verifier).__name__)


async def run_verifier(verifier: Callable[[Any], Any], subject: Any) -> Verdict:
    """Run one verifier (sync or async) on ``subject``; exceptions become a failed verdict."""
    name = verifier_name(verifier)
    try:
        outcome = verifier(subject)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:  # a broken check must never pass an output silently
        return Verdict(False, f"verifier {name} raised {type(exc).__name__}: {exc}", name)
    if isinstance(outcome, Verdict):
        return outcome if outcome.verifier else Verdict(outcome.passed, outcome.reason, name)
    if isinstance(outcome, bool):
        return Verdict(outcome, "" if outcome else f"{name} rejected the output", name)
    return Verdict(
        False,
        f"verifier {name} returned {type(outcome).__name__}, not a Verdict or bool; fix the check",
        name,
    )


@dataclass(frozen=True)
class _NonEmpty:
    name: str = "non_empty"

    def __call__(self, result: NodeResult) -> Verdict:
        if result.text.strip():
            return Verdict(True, verifier=self.name)
        return Verdict(False, "the output is empty", self.name)


def non_empty() -> Verifier:
    """The output text is not blank (the default mandatory check on CRITICAL nodes)."""
    return _NonEmpty()


@dataclass(frozen=True)
class _Matches:
    pattern: re.Pattern[str]
    name: str

    def __call__(self, result: NodeResult) -> Verdict:
        if self.pattern.search(result.text):
            return Verdict(True, verifier=self.name)
        return Verdict(False, f"the output does not match /{self.pattern.pattern}/", self.name)


def matches(pattern: str, flags: int = 0) -> Verifier:
    """The output text contains a match of the regular expression ``pattern``."""
    return _Matches(re.compile(pattern, flags), f"matches({pattern!r})")


@dataclass(frozen=True)
class _JSONSchema:
    schema: Mapping[str, Any]
    name: str = "json_schema"

    def __call__(self, result: NodeResult) -> Verdict:
        value = result.value
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                return Verdict(
                    False, f"the output is not JSON ({exc.msg} at char {exc.pos})", self.name
                )
        validator = jsonschema.Draft202012Validator(dict(self.schema))
        problems = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
        if not problems:
            return Verdict(True, verifier=self.name)
        where = "/".join(str(p) for p in problems[0].path) or "(root)"
        return Verdict(
            False,
            f"the output fails its JSON schema at {where}: {problems[0].message}"
            + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""),
            self.name,
        )


def json_schema(schema: Mapping[str, Any]) -> Verifier:
    """The output (LLM text parsed as JSON, or a tool's raw value) validates against
    ``schema`` (JSON Schema 2020-12). A schema that is not JSON Schema raises
    ``jsonschema.SchemaError`` here, where it is written, not mid-run."""
    jsonschema.Draft202012Validator.check_schema(dict(schema))
    return _JSONSchema(schema)


@dataclass(frozen=True)
class _Predicate:
    fn: Callable[[NodeResult], bool]
    reason: str
    name: str

    def __call__(self, result: NodeResult) -> Verdict:
        if self.fn(result):
            return Verdict(True, verifier=self.name)
        return Verdict(False, self.reason, self.name)


def predicate(
    fn: Callable[[NodeResult], bool], reason: str, *, name: str | None = None
) -> Verifier:
    """A caller's yes/no check; ``reason`` says what a rejection means (shown on repair)."""
    return _Predicate(fn, reason, name or verifier_name(fn))
