"""An arm label: the arm a run or job ran under plus F's two switches, as one typed value.

It sits below the loop (the ledger's run records name theirs: ``RunRecord.label``);
:mod:`harness.loop` exports it.

The six labels are ``S``, ``F``, ``F+eager`` (F with eager dispatch), ``F+spec`` (F+eager with
certified speculation), ``P`` and ``P+V``; :data:`ARM_LABELS` lists them, in that order.
:meth:`ArmLabel.parse` reads one (``ConfigError`` naming the six for anything else),
``str()`` prints it back, and :meth:`ArmLabel.of` names what a run with the given arm and
switches ran (the switches only count for F, and speculation runs its misses eagerly).
:data:`ARM_LABEL_NAMES` is their text, for command-line choices and table columns.

>>> label = ArmLabel.parse("F+spec")
>>> label.arm, label.eager, label.speculate
('F', True, True)
>>> str(label)
'F+spec'
>>> str(ArmLabel.of("F", eager=False, speculate=True))
'F+spec'
>>> [str(a) for a in ARM_LABELS]
['S', 'F', 'F+eager', 'F+spec', 'P', 'P+V']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from harness.errors import ConfigError

__all__ = ("ARMS", "ARM_LABELS", "ARM_LABEL_NAMES", "Arm", "ArmLabel")

Arm = Literal["S", "F", "P", "P+V"]
ARMS: tuple[Arm, ...] = ("S", "F", "P", "P+V")


@dataclass(frozen=True)
class ArmLabel:
    """One of the six labels. ``eager`` and ``speculate`` are F's
    (:class:`~harness.loop.FlattenSettings`); ``speculate`` comes with ``eager``
    (``F+spec`` is F+eager with speculation). Any other combination is a ``ConfigError``.

    The six are also class attributes, for code that keys a table by label:
    ``ArmLabel.S``, ``ArmLabel.F``, ``ArmLabel.F_EAGER``, ``ArmLabel.F_SPEC``, ``ArmLabel.P``,
    ``ArmLabel.P_V``."""

    S: ClassVar[ArmLabel]
    F: ClassVar[ArmLabel]
    F_EAGER: ClassVar[ArmLabel]
    F_SPEC: ClassVar[ArmLabel]
    P: ClassVar[ArmLabel]
    P_V: ClassVar[ArmLabel]

    arm: Arm
    eager: bool = False
    speculate: bool = False

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ConfigError(f"Unknown arm {self.arm!r}; choose one of {', '.join(ARMS)}.")
        if self.arm != "F" and (self.eager or self.speculate):
            raise ConfigError(f"Eager dispatch and speculation are arm F's, not {self.arm}'s.")
        if self.speculate and not self.eager:
            raise ConfigError("F+spec is F+eager with speculation: speculate needs eager.")

    @classmethod
    def parse(cls, text: str) -> ArmLabel:
        """The label ``text`` names: one of ``S``, ``F``, ``F+eager``, ``F+spec``, ``P``,
        ``P+V``."""
        for label in ARM_LABELS:
            if str(label) == text:
                return label
        names = ", ".join(str(label) for label in ARM_LABELS)
        raise ConfigError(f"Unknown arm label {text!r}; choose one of {names}.")

    @classmethod
    def of(cls, arm: Arm, *, eager: bool = False, speculate: bool = False) -> ArmLabel:
        """What a run of ``arm`` with these switches ran, as the loop runs it: the switches
        count only for F, and speculation runs its misses eagerly (``F+spec``)."""
        if arm != "F":
            return cls(arm)
        return cls("F", eager=eager or speculate, speculate=speculate)

    def __str__(self) -> str:
        if self.speculate:
            return "F+spec"
        return f"{self.arm}+eager" if self.eager else self.arm


ArmLabel.S = ArmLabel("S")
ArmLabel.F = ArmLabel("F")
ArmLabel.F_EAGER = ArmLabel("F", eager=True)
ArmLabel.F_SPEC = ArmLabel("F", eager=True, speculate=True)
ArmLabel.P = ArmLabel("P")
ArmLabel.P_V = ArmLabel("P+V")
#: The six labels, in the order the CLI, the benchmarks and the reports list them.
ARM_LABELS: tuple[ArmLabel, ...] = (
    ArmLabel.S,
    ArmLabel.F,
    ArmLabel.F_EAGER,
    ArmLabel.F_SPEC,
    ArmLabel.P,
    ArmLabel.P_V,
)
#: Their text, for command-line choices and table columns.
ARM_LABEL_NAMES: tuple[str, ...] = tuple(str(label) for label in ARM_LABELS)
