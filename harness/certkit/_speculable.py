"""The speculable claim of the certification kit: a tool opted in to certified speculation
(``Effect.speculable``, arm F+spec, :mod:`harness.certify.speculation`) may run before the model emits
its call, and may run although the model then emits the same call.

For hypothesis-drawn arguments of the tool and a drawn call of any other tool that D1 says it
commutes with (so a window could hold both), on fresh states:

* **twice**: the call run twice with the *same* idempotency key (a speculation, then the
  model's call had it not matched) leaves the same state, and returns the same result, as
  run once;
* **early**: the call run *before* the other call leaves the same state and gives both calls
  the same results as run after it (a speculation starts before calls the model emits first).

A tool that opts in without being idempotent and taking an idempotency key is refused
outright: speculation never starts it (:func:`~harness.certify.speculation.speculation_safe`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Protocol

import anyio
from hypothesis import reject
from hypothesis import strategies as st

from harness.certify.d1 import conflicts_with
from harness.certkit._base import Falsified, KitView, tool_call
from harness.certkit._report import ClaimResult, Counterexample, Outcome
from harness.tools.execute import execute_call
from harness.tools.toolset import Toolset

__all__ = ("check_speculable",)

#: One call with the idempotency key it runs with (``None``: the tool takes none).
_Keyed = tuple[str, Mapping[str, Any], str | None]


class _StatefulKit(KitView, Protocol):
    @property
    def cert(self) -> Any: ...

    @property
    def seed(self) -> int: ...

    def snapshot(self, state: Any) -> Any: ...


def _run(kit: _StatefulKit, calls: Sequence[_Keyed]) -> tuple[tuple[str, ...], Hashable]:
    """Run ``calls`` one by one on a fresh state: their result texts and the final state."""
    state = kit.cert.new_state(kit.seed)
    toolset: Toolset = kit.cert.make_toolset(state)

    async def go() -> tuple[str, ...]:
        out = []
        for index, (name, arguments, key) in enumerate(calls):
            call = tool_call(index, name, arguments)
            out.append((await execute_call(toolset, call, idempotency_key=key)).content)
        return tuple(out)

    results = anyio.run(go)
    return results, kit.snapshot(state).fingerprint


def check_speculable(kit: _StatefulKit, name: str) -> ClaimResult:
    tool = kit.toolset[name]
    effect = tool.effect
    if not (effect.idempotent and effect.accepts_idempotency_key):
        missing = " and ".join(
            w
            for w, bad in (
                ("idempotent", not effect.idempotent),
                ("takes an idempotency key", not effect.accepts_idempotency_key),
            )
            if bad
        )
        return ClaimResult(
            "speculable", "FALSE", 0, name, None, "",
            Counterexample(
                calls=(),
                message=f"'{name}' opts in to speculation (speculable=True) but is not {missing}.",
                expected=Outcome("idempotent, with an idempotency_key parameter"),
                actual=Outcome(f"not {missing}"),
                fix=f"Drop speculable=True from '{name}', or make it idempotent and give it an "
                "idempotency_key parameter that applies a write at most once per key.",
            ),
        )  # fmt: skip
    if not kit.cert.stateful or effect.open_world or tool.fn is None:
        return ClaimResult(
            "speculable", "unverified", 0, name, None,
            "its state cannot be reset and fingerprinted (no state factory, open_world, or no "
            "implementation)",
        )  # fmt: skip
    others = sorted(n for n in kit.strategies if kit.toolset[n].fn is not None)
    other = st.sampled_from(others).flatmap(lambda n: st.tuples(st.just(n), kit.strategies[n]))
    key = "speculation-check/1"

    def body(drawn: tuple[Mapping[str, Any], tuple[str, Mapping[str, Any]]]) -> None:
        arguments, (other_name, other_arguments) = drawn
        first, second = tool_call(0, other_name, other_arguments), tool_call(1, name, arguments)
        if conflicts_with(kit.toolset, [first], second):
            reject()  # no window holds both: speculation never runs one before the other
        mine: _Keyed = (name, arguments, key)
        theirs: _Keyed = (other_name, other_arguments, None)
        once, twice = _run(kit, [mine]), _run(kit, [mine, mine])
        if once[1] != twice[1] or once[0][0] != twice[0][1]:
            raise Falsified(
                Counterexample(
                    calls=((name, arguments),),
                    message=f"'{name}' is speculable but running it twice with the same "
                    "idempotency key differs from running it once.",
                    expected=Outcome("run once", once[0], str(once[1])),
                    actual=Outcome("run twice, same key", twice[0], str(twice[1])),
                    fix=f"Drop speculable=True from '{name}', or make a second call with the "
                    "same key change nothing and return the first call's result.",
                )
            )
        late, early = _run(kit, [theirs, mine]), _run(kit, [mine, theirs])
        if late[1] != early[1] or late[0] != (early[0][1], early[0][0]):
            raise Falsified(
                Counterexample(
                    calls=((other_name, other_arguments), (name, arguments)),
                    message=f"'{name}' is speculable but running it before '{other_name}' "
                    "(which it commutes with, by its declared targets) changes a result or the "
                    "state.",
                    expected=Outcome(f"'{other_name}' first", late[0], str(late[1])),
                    actual=Outcome(f"'{name}' first (results in the same order)",
                                   (early[0][1], early[0][0]), str(early[1])),
                    fix=f"Declare what '{name}' reads and writes (read_targets, write_targets) "
                    f"so that D1 keeps the calls apart, or drop speculable=True.",
                )
            )  # fmt: skip

    return kit._result("speculable", st.tuples(kit.strategies[name], other), body, tool=name)
