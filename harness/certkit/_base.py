"""What the certification kit's claim modules share: a drawn call, the exception a property
raises on a false claim, and the view of the kit the D2 claim needs (so it does not import
the kit that imports it)."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol

from harness.certify import Detector
from harness.certkit._report import ClaimName, ClaimResult, Counterexample
from harness.engines.base import ToolCall
from harness.tools import Toolset

__all__ = ("Call", "Falsified", "KitView", "changed_resources", "tool_call")

#: One drawn call: the tool's name and its arguments.
Call = tuple[str, Mapping[str, Any]]


class Falsified(Exception):
    """Raised inside a property: the claim is false for this example."""

    def __init__(self, counterexample: Counterexample) -> None:
        super().__init__(counterexample.message)
        self.counterexample = counterexample


def tool_call(index: int, name: str, arguments: Mapping[str, Any]) -> ToolCall:
    """The drawn call as the loop would see it: ``call_<index>``, key-sorted JSON arguments."""
    return ToolCall(f"call_{index}", name, json.dumps(dict(arguments), sort_keys=True))


def changed_resources(
    before: Mapping[str, Hashable] | None, after: Mapping[str, Hashable] | None
) -> set[str]:
    """The resources whose fingerprint differs between two ``resources(state)`` maps."""
    if before is None or after is None:
        return set()
    return {k for k in set(before) | set(after) if before.get(k) != after.get(k)}


class KitView(Protocol):
    """What a claim module needs of the kit."""

    @property
    def toolset(self) -> Toolset: ...

    @property
    def detector(self) -> Detector: ...

    @property
    def max_window(self) -> int: ...

    @property
    def strategies(self) -> Mapping[str, Any]: ...

    def once(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """One call run alone on a fresh state (memoised): an ``Observed``."""

    def _result(
        self,
        claim: ClaimName,
        strategy: Any,
        body: Callable[[Any], None],
        *,
        tool: str | None = None,
        phase: str | None = None,
        note: str = "",
        empty: str = ...,
        examples: int | None = None,
    ) -> ClaimResult: ...
