"""Criticality gating: which LLM nodes get extra passes (CRP-SPEC-022 §6, amending SPEC-021 §3).

============================  ===============================================================
micro-task                    what the fabric runs
============================  ===============================================================
TRIVIAL                       one pass
SIMPLE                        one pass
MODERATE, low stakes          one pass (speed first)
MODERATE, high stakes         batched consensus, N=3 at temperatures 0.3/0.6/0.9 (mode 1)
CRITICAL                      batched consensus, N=5 at 0.3/0.45/0.6/0.75/0.9, **and**
                              mandatory verification: the node's own verifiers, or
                              :func:`~harness.fabric.verify.non_empty` if it declares none
============================  ===============================================================

Consensus never runs on TRIVIAL or SIMPLE nodes (§4), not even on repair. A vote *agrees*
when the winning answer has a strict majority of the samples requested (a failed sample counts
as a dissent), or, with ``GatingPolicy.agreement``, at least that share of them; otherwise the
node is ``contested`` (see :mod:`harness.fabric.result`). "High stakes" is the
caller's call: ``Node.high_stakes`` when set, else the policy's ``high_stakes`` function, else
low. Tool and verify nodes are not gated (they run no model).

CRITICAL uses N=5 because a 5-way vote still has a strict majority after two dissenting
samples, and on a batching engine the two extra samples cost about nothing in wall time; the
mandatory verifier stands in for SPEC-021's mode 2/3 (debate / decompose-and-verify), which
need a second model role this fabric does not assume.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.errors import ConfigError
from harness.fabric.consensus import DEFAULT_TEMPERATURES, Comparator, Vote
from harness.fabric.graph import Criticality, Node
from harness.fabric.verify import Verifier, non_empty

__all__ = ("CRITICAL_TEMPERATURES", "Gate", "GatingPolicy")

#: N=5 over the spec's range for CRITICAL nodes.
CRITICAL_TEMPERATURES: tuple[float, ...] = (0.3, 0.45, 0.6, 0.75, 0.9)


@dataclass(frozen=True)
class Gate:
    """What one LLM node runs: ``temperatures`` empty = one pass at the run's settings;
    otherwise one batched sample per temperature and a vote. ``verifiers``: checks the
    policy adds (on CRITICAL nodes that declare none)."""

    mode: str
    temperatures: tuple[float, ...] = ()
    verifiers: tuple[Verifier, ...] = ()

    @property
    def samples(self) -> int:
        return max(1, len(self.temperatures))


SINGLE = Gate("single")


@dataclass(frozen=True)
class GatingPolicy:
    """The gating table above, with every number configurable.

    ``same`` is the vote's comparator (default: :func:`~harness.fabric.consensus.equivalent`);
    a node's own ``Node.same`` takes precedence.
    ``agreement``: the share of the samples requested the winner needs (``None``: a strict
    majority). Turning consensus off altogether is a mechanism switch
    (:class:`~harness.fabric.config.Mechanisms`).
    """

    consensus_temperatures: tuple[float, ...] = DEFAULT_TEMPERATURES
    critical_temperatures: tuple[float, ...] = CRITICAL_TEMPERATURES
    critical_verifiers: tuple[Verifier, ...] = field(default_factory=lambda: (non_empty(),))
    high_stakes: Callable[[Node], bool] | None = None
    same: Comparator | None = None
    agreement: float | None = None

    def __post_init__(self) -> None:
        if self.agreement is not None and not 0 < self.agreement <= 1:
            raise ConfigError(
                f"GatingPolicy.agreement is {self.agreement}; use a share in (0, 1], e.g. 0.6, "
                "or None for a strict majority."
            )
        for name in ("consensus_temperatures", "critical_temperatures"):
            temps = getattr(self, name)
            if len(temps) < 2:
                raise ConfigError(
                    f"GatingPolicy.{name} has {len(temps)} temperature(s); a consensus needs "
                    "at least 2 (e.g. (0.3, 0.6, 0.9))."
                )
            if any(t < 0 for t in temps):
                raise ConfigError(f"GatingPolicy.{name} has a negative temperature: {temps}.")

    def is_high_stakes(self, node: Node) -> bool:
        if node.high_stakes is not None:
            return node.high_stakes
        return bool(self.high_stakes(node)) if self.high_stakes is not None else False

    def gate(self, node: Node) -> Gate:
        """What ``node`` runs on its first attempt."""
        if node.kind != "llm":
            return SINGLE
        if node.criticality is Criticality.CRITICAL:
            extra = () if node.verifiers else self.critical_verifiers
            return Gate("consensus+verify", self.critical_temperatures, extra)
        if node.criticality is Criticality.MODERATE and self.is_high_stakes(node):
            return Gate("consensus", self.consensus_temperatures)
        return SINGLE

    def repair_gate(self, node: Node, escalate: bool) -> Gate:
        """What a repair attempt runs: the first gate, escalated to N=3 consensus for a
        MODERATE node that ran once when ``escalate``; never consensus on TRIVIAL/SIMPLE."""
        first = self.gate(node)
        if (
            escalate
            and node.kind == "llm"
            and not first.temperatures
            and node.criticality is Criticality.MODERATE
        ):
            return Gate("consensus", self.consensus_temperatures)
        return first

    def disagreement(self, ballot: Vote, requested: int) -> str | None:
        """Why ``ballot`` (over the samples that came back, of ``requested``) is no consensus,
        or ``None`` when it agrees (see the module docstring)."""
        share = ballot.support / requested
        if self.agreement is None:
            if 2 * ballot.support > requested:
                return None
            need = "a strict majority"
        else:
            if share >= self.agreement - 1e-9:
                return None
            need = f"an agreement of {self.agreement:g}"
        lost = requested - ballot.n
        failed = f", {lost} failed" if lost else ""
        return (
            f"no consensus: {requested} samples{failed}, {len(ballot.groups)} different "
            f"answer(s), the most common given by {ballot.support} (agreement {share:.2f}; "
            f"needs {need})"
        )
