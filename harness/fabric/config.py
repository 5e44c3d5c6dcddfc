"""How a fabric run is configured: generation, gating, repair, limits and its mechanisms.

:class:`Mechanisms` switches each of the fabric's mechanisms on or off *alone*, so a
benchmark can attribute a speed-up (or a cost) to each:

==================  ========================================================================
mechanism           off means
==================  ========================================================================
``layering``        one node at a time, in topological order (no two nodes run together)
``batching``        one engine request at a time (consensus samples and ready nodes queue)
``speculation``     the plan is parsed only once the planner has finished
``consensus``       every LLM node runs one pass (gating still adds mandatory verifiers)
``verification``    no verifier runs (outputs are released unchecked, never repaired)
==================  ========================================================================

:meth:`Mechanisms.naive` is the naive baseline: no layering, no batching, no speculation
(one node after another, one request at a time) doing the *same* work (consensus samples and
verification as configured), CRP-SPEC-022 §2.4's "naive sequential".
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from harness.engines.base import GenerationSettings
from harness.errors import ConfigError
from harness.fabric.gating import GatingPolicy
from harness.fabric.verify import Verifier

__all__ = ("NODE_SYSTEM", "FabricConfig", "Mechanisms", "RepairPolicy")

NODE_SYSTEM = (
    "You are one step of a larger task. Do only the step you are given, using the outputs of "
    "earlier steps when they are shown, and answer briefly."
)


@dataclass(frozen=True)
class Mechanisms:
    """Which of the fabric's mechanisms run (all by default); see the module docstring."""

    layering: bool = True
    batching: bool = True
    speculation: bool = True
    consensus: bool = True
    verification: bool = True

    @classmethod
    def naive(cls) -> Mechanisms:
        """The naive baseline: one node after another, one request at a time, no speculation."""
        return cls(layering=False, batching=False, speculation=False)

    @classmethod
    def without(cls, *names: str) -> Mechanisms:
        """Every mechanism but ``names`` (e.g. ``Mechanisms.without("batching")``)."""
        known = [f.name for f in fields(cls)]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConfigError(
                f"Unknown mechanism(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}."
            )
        return cls(**{n: n not in names for n in known})

    @property
    def off(self) -> tuple[str, ...]:
        """The names of the mechanisms switched off."""
        return tuple(f.name for f in fields(self) if not getattr(self, f.name))

    @property
    def is_naive(self) -> bool:
        return not (self.layering or self.batching or self.speculation)


@dataclass(frozen=True)
class RepairPolicy:
    """What a rejected output gets: up to ``max_repairs`` re-runs (0 = surface at once).
    A single-pass re-run samples at ``temperature`` (a fresh seed per attempt) so it can
    differ; ``escalate`` re-runs a MODERATE node as a batched N=3 consensus."""

    max_repairs: int = 2
    escalate: bool = True
    temperature: float = 0.7

    def __post_init__(self) -> None:
        if self.max_repairs < 0:
            raise ConfigError(
                f"RepairPolicy.max_repairs is {self.max_repairs}; use 0 (no repair) or more."
            )


def _positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ConfigError(
            f"FabricConfig.{name} is {value}; use a positive number (or None for no limit)."
        )


@dataclass(frozen=True)
class FabricConfig:
    """How a fabric run generates, gates, repairs, limits and accounts.

    ``settings``: the base generation settings of every LLM node (``constrain`` off: nodes
    answer in free text). ``system``: the system prompt of nodes that set none.
    ``verifiers``: checks run on every LLM node's output besides its own.
    ``mechanisms``: which mechanisms run (:class:`Mechanisms`).
    ``max_in_flight``: the most engine requests the run has in flight at once (a wider layer
    or a bigger consensus queues; ``None``: no cap). ``request_retries``: how many times a
    failed engine request (a consensus sample, a single pass) is sent again, as one more
    batched round, before it counts as failed.
    ``node_timeout_s`` / ``verifier_timeout_s``: default bounds on a node's whole run (every
    attempt) and on one verifier call; past them the node fails / the verdict is a rejection.
    ``model_params``: the model's parameter count, and ``baseline_params`` the naive model's
    (default: the same model), for the compute figure (:mod:`harness.fabric.figures`).
    """

    settings: GenerationSettings = field(
        default_factory=lambda: GenerationSettings(max_tokens=256, constrain=False)
    )
    gating: GatingPolicy = field(default_factory=GatingPolicy)
    repair: RepairPolicy = field(default_factory=RepairPolicy)
    mechanisms: Mechanisms = field(default_factory=Mechanisms)
    system: str = NODE_SYSTEM
    verifiers: tuple[Verifier, ...] = ()
    max_in_flight: int | None = 64
    request_retries: int = 1
    node_timeout_s: float | None = None
    verifier_timeout_s: float | None = 30.0
    model_params: float | None = None
    baseline_params: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "verifiers", tuple(self.verifiers))
        if self.max_in_flight is not None and self.max_in_flight < 1:
            raise ConfigError(
                f"FabricConfig.max_in_flight is {self.max_in_flight}; use 1 or more (or None "
                "for no cap)."
            )
        if self.request_retries < 0:
            raise ConfigError(
                f"FabricConfig.request_retries is {self.request_retries}; use 0 or more."
            )
        _positive("node_timeout_s", self.node_timeout_s)
        _positive("verifier_timeout_s", self.verifier_timeout_s)
        _positive("model_params", self.model_params)
        _positive("baseline_params", self.baseline_params)
