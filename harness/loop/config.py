"""How to run a loop: the arm, the policy, the budgets, and each arm's own settings grouped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from harness.certify import DEFAULT_MARKER, DEFAULT_MAX_WINDOW, WindowRules
from harness.engines.base import GenerationSettings
from harness.errors import ConfigError
from harness.loop.arm_label import ARMS, Arm

__all__ = (
    "ARMS",
    "Arm",
    "FlattenSettings",
    "LoopConfig",
    "ParallelSettings",
    "Policy",
    "ResampleSettings",
)

Policy = Literal["model", "gold", "oracle"]
POLICY_NAMES: tuple[Policy, ...] = ("model", "gold", "oracle")


@dataclass(frozen=True)
class FlattenSettings:
    """Arm F. ``eager``: start a certified call the moment it is emitted (else at window
    close). ``speculate``: arm F+spec — also start the calls of a fan-out phase that the
    manifest makes known and whose tools are safe to run early, before the model emits them
    (:mod:`harness.loop.speculative`; its misses run eagerly). ``max_discards``: calls
    discarded under D2 (generated while a result they needed was withheld) before the run ends
    in :class:`~harness.errors.UsageLimitExceeded`."""

    eager: bool = False
    speculate: bool = False
    max_discards: int = 8


@dataclass(frozen=True)
class ParallelSettings:
    """Arms P and P+V. ``token_factor``: one message carries a whole window, so its
    generation budget is ``max_tokens`` times this."""

    token_factor: int = 4


@dataclass(frozen=True)
class ResampleSettings:
    """Arm P+V: a window the validator rejects is resampled, up to ``max_resamples``
    candidates, as one batch (``batched``) or one by one, at ``temperature``."""

    max_resamples: int = 3
    batched: bool = True
    temperature: float = 0.7


@dataclass(frozen=True)
class LoopConfig:
    """How to run a loop. Every budget ends in a typed error, never a silent stop."""

    arm: Arm = "S"
    policy: Policy = "model"
    detector: str = "schema_sound"
    max_turns: int = 40
    max_model_errors: int = 3
    #: Tool calls in a row that raised or timed out (the tool's failure, not a model mistake)
    #: before the run ends in :class:`~harness.errors.UsageLimitExceeded` naming the tool.
    max_tool_failures: int = 3
    max_identical_calls: int = 3
    #: The window's rules (:class:`~harness.certify.WindowRules`, their one owner), given
    #: field by field; read them together as :attr:`window_rules`.
    max_window: int = DEFAULT_MAX_WINDOW
    marker: str = DEFAULT_MARKER
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    flatten: FlattenSettings = field(default_factory=FlattenSettings)
    parallel: ParallelSettings = field(default_factory=ParallelSettings)
    resample: ResampleSettings = field(default_factory=ResampleSettings)
    #: Constrain every argument the skill's manifest sources from a task input to that
    #: input's values (an enum in the reply grammar, the same for every arm):
    #: :mod:`harness.loop.levers`. Needs a manifest skill; off by default.
    input_enums: bool = False
    #: Offer the model only the tools the skill's manifest phases name (the same tools for
    #: every arm and every turn, so the prompt prefix stays stable). Needs a manifest skill;
    #: off by default.
    skill_tools: bool = False
    #: ``input_enums`` and, turn by turn, only the values no earlier call of the tool used
    #: (a fan-out phase fills each input slot once), in the reply grammar only:
    #: :func:`harness.loop.levers.open_slot_specs`. Needs a manifest skill; off by default.
    open_slots: bool = False
    #: Wall-clock deadline of one run (of one attempt, when resumed), in seconds; None: none.
    max_wall_s: float | None = None
    #: Billed tokens (input + output of every turn) one run may spend; None: no budget.
    max_billed_tokens: int | None = None
    #: The ids calls get in the transcript: ``run`` (``call_0``, ``call_1``, ...: the same in
    #: every arm, so arms compare) or ``engine`` (the engine's own, unless empty or already
    #: used: the proxy's, whose transcript is its client's).
    call_ids: Literal["run", "engine"] = "run"

    @property
    def window_rules(self) -> WindowRules:
        """The marker and the window limit as one object, for the detector, the arms and the
        validator of this run."""
        return WindowRules(marker=self.marker, max_window=self.max_window)

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ConfigError(f"Unknown arm {self.arm!r}; choose one of {', '.join(ARMS)}.")
        if self.policy not in POLICY_NAMES:
            choices = " or ".join(repr(p) for p in POLICY_NAMES)
            raise ConfigError(f"Unknown policy {self.policy!r}; choose {choices}.")
        if self.max_turns < 1 or self.max_window < 1:
            raise ConfigError("max_turns and max_window must be at least 1.")
        if self.call_ids not in ("run", "engine"):
            raise ConfigError(f"Unknown call_ids {self.call_ids!r}; choose 'run' or 'engine'.")
        if self.max_wall_s is not None and self.max_wall_s <= 0:
            raise ConfigError(f"max_wall_s must be more than 0 seconds, got {self.max_wall_s}.")
        if self.max_billed_tokens is not None and self.max_billed_tokens < 1:
            raise ConfigError(
                f"max_billed_tokens must be at least 1, got {self.max_billed_tokens}."
            )
