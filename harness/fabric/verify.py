"""Verifiers: deterministic checks on a finished node's output, run off the critical path.

A :data:`Verifier` is any callable ``(output) -> Verdict | bool`` (sync or async), where the
output is anything with ``text`` and ``value`` (:class:`Checked`; the fabric passes the node's
:class:`~harness.fabric.result.NodeResult`). The executor runs a node's verifiers as soon as
the node has produced its output, in the node's own task: nodes that do not consume that
output are dispatched regardless; nodes that do consume it wait until every verifier has
passed (the output is *released*). A rejection triggers the repair policy; a verifier that
raises, returns something else or runs past its timeout counts as a rejection (the reason
says which), never as a pass.

Built-ins: :func:`non_empty`, :func:`matches`, :func:`json_schema` and :func:`predicate`
(a caller's function with a reason).
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import jsonschema

__all__ = (
    "Checked",
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


class Checked(Protocol):
    """What a verifier checks: an output's ``text`` and its raw ``value`` (a node's result)."""

    @property
    def text(self) -> str: ...

    @property
    def value(self) -> Any: ...


Verifier = Callable[[Checked], "Verdict | bool | Awaitable[Verdict | bool]"]


def verifier_name(verifier: Callable[..., Any]) -> str:
    """A readable name: ``name`` attribute, else the function's qualified name."""
    name = getattr(verifier, "name", None) or getattr(verifier, "__qualname__", None)
    return str(name or type(verifier).__name__)


async def run_verifier(
    verifier: Callable[[Any], Any], subject: Any, *, timeout_s: float | None = None
) -> Verdict:
    """Run one verifier (sync or async) on ``subject``; an exception, or no answer within
    ``timeout_s`` seconds, is a failed verdict. With a timeout, a sync verifier runs in a
    worker thread (so a blocking check cannot hold the run; on timeout it is abandoned)."""
    name = verifier_name(verifier)
    outcome: Any = None
    try:
        with anyio.move_on_after(timeout_s) as scope:
            if timeout_s is not None and not _is_async(verifier):
                call = functools.partial(verifier, subject)
                outcome = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
            else:
                outcome = verifier(subject)
            if inspect.isawaitable(outcome):
                outcome = await outcome
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:  # a broken check must never pass an output silently
        return Verdict(False, f"verifier {name} raised {type(exc).__name__}: {exc}", name)
    if scope.cancelled_caught:
        return Verdict(
            False,
            f"verifier {name} gave no verdict within {timeout_s:g} s; make it faster or raise "
            "FabricConfig.verifier_timeout_s",
            name,
        )
    if isinstance(outcome, Verdict):
        return outcome if outcome.verifier else Verdict(outcome.passed, outcome.reason, name)
    if isinstance(outcome, bool):
        return Verdict(outcome, "" if outcome else f"{name} rejected the output", name)
    return Verdict(
        False,
        f"verifier {name} returned {type(outcome).__name__}, not a Verdict or bool; fix the check",
        name,
    )


def _is_async(verifier: Callable[..., Any]) -> bool:
    call = getattr(verifier, "__call__", None)  # noqa: B004 - an object's async __call__
    return inspect.iscoroutinefunction(verifier) or inspect.iscoroutinefunction(call)


@dataclass(frozen=True)
class _NonEmpty:
    name: str = "non_empty"

    def __call__(self, result: Checked) -> Verdict:
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

    def __call__(self, result: Checked) -> Verdict:
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

    def __call__(self, result: Checked) -> Verdict:
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
    fn: Callable[[Checked], bool]
    reason: str
    name: str

    def __call__(self, result: Checked) -> Verdict:
        if self.fn(result):
            return Verdict(True, verifier=self.name)
        return Verdict(False, self.reason, self.name)


def predicate(fn: Callable[[Checked], bool], reason: str, *, name: str | None = None) -> Verifier:
    """A caller's yes/no check; ``reason`` says what a rejection means (shown on repair)."""
    return _Predicate(fn, reason, name or verifier_name(fn))
