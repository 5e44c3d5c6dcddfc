"""Every error the harness raises on purpose.

One root, one subclass per failure an operator can act on::

    HarnessError                      root: catch this to catch everything below
    ├── ConfigError                   bad input from the user: a file, an option, a manifest
    │   ├── ManifestError             a skill manifest that does not validate (names file/phase/field)
    │   ├── JournalError              a run directory that cannot be journaled to or resumed
    │   └── ToolsetError              a toolset that cannot be built (duplicate name, bad schema,
    │                                 a target template naming no argument, folds that disagree)
    ├── EngineError                   the engine could not answer
    │   ├── EngineDeadError           the engine is gone: every in-flight and new request fails fast
    │   └── EngineRequestError        one request failed (bad request, timeout, refused); others go on
    │       └── ContextWindowExceeded the chat outgrew the engine's context window (max_model_len)
    ├── UsageLimitExceeded            a budget ran out: turns, tokens, wall clock, model mistakes, discards
    ├── Interrupted                   SIGINT/SIGTERM stopped a command; what finished is on disk
    ├── NodeFailed                    a fabric node gave no usable output (verifier, tool error, input)
    └── ReplayDivergence              a replayed/scripted run saw a request it did not expect

Model mistakes (unknown tool, bad JSON, schema failure, a tool that raises or times out) are
*not* exceptions: they become error results the model sees, bounded by a retry budget that ends
in :class:`UsageLimitExceeded`.

Every error carries optional context (``run_id``, ``call_id``, ``tool``, ``turn``) and pickles
cleanly, so it can cross process boundaries (vLLM's engine core, a worker pool).
"""

from __future__ import annotations

from typing import Any

__all__ = (
    "ConfigError",
    "ContextWindowExceeded",
    "EngineDeadError",
    "EngineError",
    "EngineRequestError",
    "HarnessError",
    "Interrupted",
    "JournalError",
    "ManifestError",
    "NodeFailed",
    "ReplayDivergence",
    "ToolsetError",
    "UsageLimitExceeded",
)


class HarnessError(Exception):
    """Root of every error the harness raises on purpose."""

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        call_id: str | None = None,
        tool: str | None = None,
        turn: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.run_id = run_id
        self.call_id = call_id
        self.tool = tool
        self.turn = turn

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions with keyword-only constructor arguments do not pickle by default.
        return (_rebuild, (type(self), self.message, self.context()))

    def context(self) -> dict[str, Any]:
        """The non-empty context fields, for logs and ledgers."""
        fields = {
            "run_id": self.run_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "turn": self.turn,
        }
        return {k: v for k, v in fields.items() if v is not None}

    def __str__(self) -> str:
        ctx = self.context()
        if not ctx:
            return self.message
        where = ", ".join(f"{k}={v}" for k, v in ctx.items())
        return f"{self.message} [{where}]"


def _rebuild(cls: type[HarnessError], message: str, context: dict[str, Any]) -> HarnessError:
    return cls(message, **context)


class ConfigError(HarnessError):
    """A user-supplied file, option or value is wrong; the message says which and how to fix it."""


class ManifestError(ConfigError):
    """A skill manifest does not validate; the message names the file, the phase and the field."""


class JournalError(ConfigError):
    """A run directory cannot be used: no journal to resume, a journal of another run, or one
    another process is writing; the message names the directory and what to do."""


class ToolsetError(ConfigError):
    """A toolset cannot be built: duplicate tool names, a schema that is not JSON Schema, ..."""


class EngineError(HarnessError):
    """The engine could not produce a completion."""


class EngineDeadError(EngineError):
    """The engine process or core is gone; every in-flight and every new request fails with this."""


class EngineRequestError(EngineError):
    """One request failed (rejected, timed out, malformed); the engine itself is still healthy."""


class ContextWindowExceeded(EngineRequestError):
    """The chat no longer fits the engine's context window (``max_model_len``): the engine is
    healthy and the request was well formed; the run outgrew what the engine can read (a loop
    that kept going, e.g. a model that never finishes). A benchmark counts it like a budget
    under the model policy: the model could not solve the task within the context."""


class UsageLimitExceeded(HarnessError):
    """A run used up a budget: turns, billed tokens, its wall-clock deadline, consecutive model
    mistakes, D2 discards or P+V resamples; the message says which and what to change."""


class Interrupted(HarnessError):
    """A signal (``signum``: SIGINT, SIGTERM) stopped a command: its runs were cancelled, their
    journals flushed and the engine shut down; the message says how to resume."""

    def __init__(self, message: str, *, signum: int | None = None, **context: Any) -> None:
        super().__init__(message, **context)
        self.signum = signum

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_interrupted, (self.message, self.signum, HarnessError.context(self)))


def _rebuild_interrupted(message: str, signum: int | None, context: dict[str, Any]) -> Interrupted:
    return Interrupted(message, signum=signum, **context)


class NodeFailed(HarnessError):
    """A node of the parallel execution fabric gave no usable output: its verifier kept
    rejecting it after the repair budget, its tool call returned an error, or an input it
    consumes failed. ``node`` names it; the message says why and how many attempts ran."""

    def __init__(self, message: str, *, node: str | None = None, **context: Any) -> None:
        super().__init__(message, **context)
        self.node = node

    def context(self) -> dict[str, Any]:
        fields = super().context()
        if self.node is not None:
            fields["node"] = self.node
        return fields


class ReplayDivergence(HarnessError):
    """A scripted or replayed run received a request that its script does not cover."""
