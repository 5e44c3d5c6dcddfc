"""The claims :mod:`harness.certkit` checks, as hypothesis properties over real executions.

:class:`Kit` holds one toolset under test: its contract, the tools bound to a first fresh
state (for schemas and effects only), an argument strategy per tool, and the hypothesis
settings. :meth:`Kit.plan` lists one job per claim; each job runs one hypothesis property and
returns a :class:`~harness.certkit.ClaimResult`. A property that finds a false claim raises
:class:`Falsified` carrying a :class:`~harness.certkit.Counterexample`; hypothesis shrinks the
example and re-raises the minimal one, which the job reports.

Every execution runs on a fresh state (``new_state(seed)``) through
:func:`harness.calls.execute_call`, so validation and error results are exactly the loop's.
A single call's execution is memoised by ``(tool, arguments)``: the read-only, idempotence and
write-target claims of one tool share it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
from hypothesis import HealthCheck, Verbosity, given, reject, settings
from hypothesis import Phase as HypothesisPhase
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from harness._schema_strategies import arguments_strategy
from harness.calls import ToolResult, execute_call
from harness.certify import Certificate, Detector, SchemaSoundDetector
from harness.certify.d1 import conflicts_with
from harness.certify.d2 import placeholder_failure
from harness.certkit._aliases import alias_table, check_targets_canonical, target_arguments
from harness.certkit._base import Call, Falsified, changed_resources, tool_call
from harness.certkit._contract import CertifiableToolset
from harness.certkit._d2 import check_d2
from harness.certkit._report import ClaimName, ClaimResult, Counterexample, Outcome
from harness.certkit._speculable import check_speculable
from harness.engines.base import ToolCall
from harness.engines.batch import gather
from harness.errors import ToolsetError
from harness.manifest import ArgSource, Manifest, Phase
from harness.tools import Tool, Toolset

__all__ = ("Falsified", "Kit")

Job = Callable[[], ClaimResult]
SYNTHETIC = "all tools"
#: A commutation claim gets this many times the examples of a per-tool claim: the space of
#: windows (tools x arguments x schedules) is much larger than one tool's arguments.
COMMUTES_FACTOR = 2
DEPENDENCY_FIX = (
    "if one call's argument comes from another call's result, mark it result:PHASE in the "
    "manifest (D2); if they share a resource, declare it in write/read targets (D1)."
)


@dataclass(frozen=True)
class Snapshot:
    fingerprint: Hashable | None
    resources: Mapping[str, Hashable] | None


@dataclass(frozen=True)
class Observed:
    """What running calls on a fresh state gave: their results, the state before and after."""

    results: tuple[ToolResult, ...]
    before: Snapshot
    after: Snapshot


async def _serial(toolset: Toolset, calls: Sequence[ToolCall]) -> tuple[ToolResult, ...]:
    return tuple([await execute_call(toolset, c) for c in calls])


async def _concurrent(
    toolset: Toolset, calls: Sequence[ToolCall], order: Sequence[int], yields: Sequence[int]
) -> tuple[ToolResult, ...]:
    """Start the calls in ``order``; call ``i`` first yields to the scheduler ``yields[i]``
    times, so its tool starts after others have run up to their next checkpoint."""

    async def one(index: int) -> ToolResult:
        for _ in range(yields[index]):
            await anyio.lowlevel.checkpoint()
        return await execute_call(toolset, calls[index])

    thunks = [functools.partial(one, i) for i in range(len(calls))]
    return tuple(await gather(thunks, start_order=order))


#: How long the kit waits for the thread of an abandoned sync call before it judges the state.
SETTLE_S = 60.0


def _settle(results: Sequence[ToolResult]) -> None:
    """Wait until every abandoned sync call's thread has ended: a sync tool that timed out
    keeps running (and writing) in its thread, so the state is judged only after it ends.
    A thread still running after :data:`SETTLE_S` is an error (the kit cannot judge)."""
    for result in results:
        thread = result.thread
        if thread is not None and not thread.wait(SETTLE_S):
            raise ToolsetError(
                f"Tool '{result.name}' timed out and its thread was still running "
                f"{SETTLE_S:.0f} s later; the kit judges a call only after it ends: make the "
                "tool return, or raise its timeout_s.",
                tool=result.name,
            )


def _outcome_text(result: ToolResult) -> str:
    return result.content


def _short(value: Hashable | None) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else repr(value)
    return text[:12] if isinstance(value, str) and len(text) >= 32 else text[:60]


_changed = changed_resources


def _clip(value: Any, width: int = 60) -> str:
    text = "(absent)" if value is None else value if isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _change_lines(
    before: Mapping[str, Hashable] | None, after: Mapping[str, Hashable] | None, keys: set[str]
) -> tuple[str, ...]:
    if before is None or after is None:
        return ()
    return tuple(
        f"changed {k}: {_clip(before.get(k))} → {_clip(after.get(k))}" for k in sorted(keys)
    )


def _find_falsified(exc: BaseException) -> Falsified | None:
    """The :class:`Falsified` inside what hypothesis raised (it may wrap it in a group when a
    failure did not reproduce)."""
    if isinstance(exc, Falsified):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _find_falsified(inner)
        if found is not None:
            return found
    return None


@dataclass
class Kit:
    """One toolset under test (see the module docstring)."""

    cert: CertifiableToolset
    seed: int
    examples: int
    deadline: float | None
    database: Any
    max_window: int
    detector: Detector
    toolset: Toolset
    strategies: dict[str, st.SearchStrategy[Any]]
    strategy_errors: dict[str, str]
    notes: list[str] = field(default_factory=list)
    _memo: dict[str, Observed] = field(default_factory=dict)

    @classmethod
    def start(
        cls,
        cert: CertifiableToolset,
        *,
        seed: int,
        examples: int,
        deadline: float | None,
        database: Any,
        max_window: int,
        detector: Detector | None,
    ) -> Kit:
        state = _call_contract("new_state", cert.new_state, seed)
        toolset = _call_contract("make_toolset", cert.make_toolset, state)
        if not isinstance(toolset, Toolset):
            raise ToolsetError(
                f"make_toolset(state) returned {type(toolset).__name__}, not a harness Toolset."
            )
        examples_table = (
            _call_contract("example_values", cert.example_values, state)
            if cert.example_values
            else {}
        )
        overrides = (
            _call_contract("argument_strategies", cert.argument_strategies, state)
            if cert.argument_strategies
            else {}
        )
        strategies: dict[str, st.SearchStrategy[Any]] = {}
        errors: dict[str, str] = {}
        aliases = alias_table(toolset, examples_table)
        for name, tool in toolset.items():
            try:
                strategies[name] = arguments_strategy(
                    name,
                    tool.parameters,
                    examples=examples_table,
                    overrides=overrides,
                    aliases=aliases,
                )
            except Exception as exc:  # an exotic schema: report it, check the rest
                errors[name] = f"cannot generate arguments from its schema: {exc}"
        return cls(
            cert=cert,
            seed=seed,
            examples=examples,
            deadline=deadline,
            database=database,
            max_window=max_window,
            detector=detector or SchemaSoundDetector(),
            toolset=toolset,
            strategies=strategies,
            strategy_errors=errors,
        )

    # ------------------------------------------------------------------ executions

    def snapshot(self, state: Any) -> Snapshot:
        if self.cert.fingerprint is None:
            return Snapshot(None, None)
        fp = _call_contract("fingerprint", self.cert.fingerprint, state)
        res = (
            dict(_call_contract("resources", self.cert.resources, state))
            if self.cert.resources
            else None
        )
        return Snapshot(fp, res)

    def execute(
        self,
        calls: Sequence[Call],
        *,
        order: Sequence[int] | None = None,
        yields: Sequence[int] | None = None,
    ) -> Observed:
        """Run ``calls`` on a fresh state: serially in emitted order, or concurrently."""
        state = _call_contract("new_state", self.cert.new_state, self.seed)
        toolset = _call_contract("make_toolset", self.cert.make_toolset, state)
        tool_calls = [tool_call(i, n, a) for i, (n, a) in enumerate(calls)]
        before = self.snapshot(state)
        if order is None:
            results = anyio.run(_serial, toolset, tool_calls)
        else:
            results = anyio.run(_concurrent, toolset, tool_calls, order, yields or [0] * len(calls))
        _settle(results)
        return Observed(results, before, self.snapshot(state))

    def once(self, name: str, arguments: Mapping[str, Any]) -> Observed:
        key = json.dumps([name, arguments], sort_keys=True, default=str)
        if key not in self._memo:
            self._memo[key] = self.execute([(name, arguments)])
        return self._memo[key]

    # ---------------------------------------------------------------------- driver

    def prove(
        self,
        strategy: st.SearchStrategy[Any],
        body: Callable[[Any], None],
        examples: int | None = None,
    ) -> tuple[int, Counterexample | None, bool]:
        """Run one property: (examples that passed before any failure, the minimal
        counterexample or ``None``, whether no valid example could be generated)."""
        passed = 0
        failing = False

        def test(value: Any) -> None:
            nonlocal passed, failing
            try:
                body(value)
            except Falsified:
                failing = True
                raise
            if not failing:
                passed += 1

        configured = settings(
            max_examples=examples or self.examples,
            deadline=None if self.deadline is None else self.deadline * 1000,
            database=self.database,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
            report_multiple_bugs=False,
            print_blob=False,
            phases=(
                HypothesisPhase.explicit,
                HypothesisPhase.reuse,
                HypothesisPhase.generate,
                HypothesisPhase.shrink,
            ),
        )
        prop = hypothesis_seed(self.seed)(configured(given(strategy)(test)))
        try:
            prop()
        except Unsatisfiable:
            return passed, None, True
        except Exception as exc:
            found = _find_falsified(exc)
            if found is None:
                raise
            ce = found.counterexample
            if found is not exc:  # hypothesis wrapped it: the failure did not reproduce
                ce = Counterexample(
                    ce.calls, ce.message, ce.expected, ce.actual, ce.fix, flaky=True
                )
            return passed, ce, False
        return passed, None, passed == 0

    def _result(
        self,
        claim: ClaimName,
        strategy: st.SearchStrategy[Any],
        body: Callable[[Any], None],
        *,
        tool: str | None = None,
        phase: str | None = None,
        note: str = "",
        empty: str = "no valid example could be generated",
        examples: int | None = None,
    ) -> ClaimResult:
        passed, counterexample, unsatisfiable = self.prove(strategy, body, examples)
        if counterexample is not None:
            return ClaimResult(claim, "FALSE", passed, tool, phase, note, counterexample)
        if unsatisfiable:
            return ClaimResult(claim, "unverified", passed, tool, phase, empty)
        return ClaimResult(claim, "passed", passed, tool, phase, note)

    # ------------------------------------------------------------------------ plan

    def plan(self, manifest: Manifest | None) -> Iterator[Job]:
        """One job per claim, in report order: tools, then windows, then D2 per skill."""
        if not self.cert.stateful:
            self.notes.append(
                "no state factory or fingerprint (a spec file or a bare Toolset): the kit cannot "
                "give each example a fresh state, so only idempotence is checked, from results"
            )
        elif self.cert.resources is None:
            self.notes.append(
                "the toolset has no resources(state): write targets cannot be checked"
            )
        for name, tool in self.toolset.items():
            yield from self._tool_jobs(name, tool)
        yield from self._window_jobs(manifest)
        if manifest is not None:
            for skill in manifest.skills.values():
                if any(p.is_fan_out for p in skill.phases):
                    yield functools.partial(check_d2, self, skill)

    def _tool_jobs(self, name: str, tool: Tool) -> Iterator[Job]:
        effect = tool.effect
        claims: list[ClaimName] = []
        if effect.read_only:
            claims.append("read_only")
        if effect.idempotent:
            claims.append("idempotent")
        if effect.write_targets is not None and not effect.read_only:
            claims.append("write_targets")
            if target_arguments(tool):
                claims.append("targets_canonical")
        if not effect.annotated:
            self.notes.append(f"'{name}' is unannotated: it claims nothing (worst case)")
        for claim in claims:
            reason = self._unverifiable(name, tool, claim)
            if reason:
                yield functools.partial(ClaimResult, claim, "unverified", 0, name, None, reason)
            elif claim == "read_only":
                yield functools.partial(self.check_read_only, name)
            elif claim == "idempotent":
                yield functools.partial(self.check_idempotent, name)
            elif claim == "targets_canonical":
                yield functools.partial(check_targets_canonical, self, name)
            else:
                yield functools.partial(self.check_write_targets, name)
        if effect.speculable and not effect.read_only:  # read-only tools need no opt-in
            yield functools.partial(check_speculable, self, name)

    def _unverifiable(self, name: str, tool: Tool, claim: ClaimName) -> str:
        if tool.fn is None:
            return "declared only: the spec has no implementation to run"
        if name in self.strategy_errors:
            return self.strategy_errors[name]
        outside = not self.cert.stateful or tool.effect.open_world
        if outside and claim != "idempotent":
            return (
                "open_world: its state lives outside the process and cannot be fingerprinted"
                if self.cert.stateful
                else "no state factory: the state cannot be reset or fingerprinted"
            )
        if claim == "write_targets" and self.cert.resources is None:
            return "the toolset has no resources(state) to diff"
        return ""

    def _eligible(self, names: Sequence[str]) -> list[str]:
        return [
            n
            for n in names
            if n in self.toolset
            and self.toolset[n].fn is not None
            and not self.toolset[n].effect.open_world
            and n in self.strategies
        ]

    def _window_jobs(self, manifest: Manifest | None) -> Iterator[Job]:
        phases: list[tuple[str, Phase]] = []
        everything = self._eligible(list(self.toolset))
        if everything:
            # an argument the manifest marks as a result of its own fan-out phase stays out of
            # the synthetic windows too, as the certifier keeps it out of that phase's windows
            own_results = {
                key: ArgSource("result", SYNTHETIC)
                for skill in (manifest.skills.values() if manifest else ())
                for phase in skill.phases
                if phase.is_fan_out
                for key, source in phase.args.items()
                if source.is_result_placeholder and source.ref == phase.name
            }
            phases.append(
                (SYNTHETIC, Phase(SYNTHETIC, "fan_out", tuple(everything), args=own_results))
            )
        seen = {tuple(everything)}
        for skill in manifest.skills.values() if manifest else ():
            for phase in skill.phases:
                tools = tuple(self._eligible(phase.tools))
                if phase.is_fan_out and tools and tools not in seen:
                    seen.add(tools)
                    phases.append((f"{skill.name}.{phase.name}", phase))
        left_out = sorted(set(self.toolset) - set(everything))
        if left_out and self.cert.stateful:
            self.notes.append(
                f"left out of windows (open_world, declared only or no arguments): {left_out}"
            )
        for label, phase in phases:
            if not self.cert.stateful:
                reason = "no state factory: the state cannot be reset or fingerprinted"
                yield functools.partial(
                    ClaimResult, "commutes", "unverified", 0, None, label, reason
                )
            else:
                yield functools.partial(self.check_commutes, label, phase)

    # ------------------------------------------------------------------ per-tool claims

    def check_read_only(self, name: str) -> ClaimResult:
        def body(arguments: Mapping[str, Any]) -> None:
            run = self.once(name, arguments)
            if run.before.fingerprint == run.after.fingerprint:
                return
            changed = _changed(run.before.resources, run.after.resources)
            lines = _change_lines(run.before.resources, run.after.resources, changed)
            wrote = f" (it wrote {', '.join(sorted(changed))})" if changed else ""
            raise Falsified(
                Counterexample(
                    calls=((name, arguments),),
                    message=f"'{name}' is annotated read-only but this call changed the state{wrote}.",
                    expected=Outcome("state before the call", (), _short(run.before.fingerprint)),
                    actual=Outcome(
                        "state after the call",
                        (_outcome_text(run.results[0]),),
                        _short(run.after.fingerprint),
                        lines,
                    ),
                    fix=f"Drop read_only=True from '{name}' and declare what it writes "
                    f"(write_targets=...), or make the tool stop writing{wrote}.",
                )
            )

        return self._result("read_only", self.strategies[name], body, tool=name)

    def check_idempotent(self, name: str) -> ClaimResult:
        tool = self.toolset[name]
        if not self.cert.stateful or tool.effect.open_world:
            return self._idempotent_by_results(name)

        def body(arguments: Mapping[str, Any]) -> None:
            once = self.once(name, arguments)
            twice = self.execute([(name, arguments), (name, arguments)])
            same_state = once.after.fingerprint == twice.after.fingerprint
            same_result = _outcome_text(once.results[0]) == _outcome_text(twice.results[1])
            if same_state and same_result:
                return
            what = " and ".join(
                w
                for w, bad in (
                    ("a different state", not same_state),
                    ("a different result", not same_result),
                )
                if bad
            )
            changed = _changed(once.after.resources, twice.after.resources)
            if tool.effect.read_only:
                fix = f"Drop read_only=True from '{name}' (read-only implies idempotent), or make it stop writing"
            else:
                fix = (
                    f"Mark '{name}' idempotent=False (the harness then never retries or re-runs "
                    "it), or make a repeated call change nothing (set semantics, not append)"
                )
            if same_state:
                fix += ", or return what the call leaves (the state), not what it did"
            annotated = "read-only (so idempotent)" if tool.effect.read_only else "idempotent"
            raise Falsified(
                Counterexample(
                    calls=((name, arguments),),
                    message=f"'{name}' is annotated {annotated} but calling it twice gives {what} than calling it once.",
                    expected=Outcome(
                        "called once",
                        (_outcome_text(once.results[0]),),
                        _short(once.after.fingerprint),
                    ),
                    actual=Outcome(
                        "called twice (results of the first and the second call)",
                        tuple(_outcome_text(r) for r in twice.results),
                        _short(twice.after.fingerprint),
                        tuple(
                            line.replace("changed ", "differs ", 1).replace(" → ", " (once) vs ", 1)
                            + " (twice)"
                            for line in _change_lines(
                                once.after.resources, twice.after.resources, changed
                            )
                        ),
                    ),
                    fix=fix + ".",
                )
            )

        return self._result("idempotent", self.strategies[name], body, tool=name)

    def _idempotent_by_results(self, name: str) -> ClaimResult:
        def body(arguments: Mapping[str, Any]) -> None:
            run = self.execute([(name, arguments), (name, arguments)])
            first, second = (_outcome_text(r) for r in run.results)
            if first == second:
                return
            raise Falsified(
                Counterexample(
                    calls=((name, arguments),),
                    message=f"'{name}' is annotated idempotent but a repeated call returned a different result.",
                    expected=Outcome("first call", (first,)),
                    actual=Outcome("repeated call", (second,)),
                    fix=f"Mark '{name}' idempotent=False (the harness then never retries or "
                    "re-runs it), or make a repeated call change nothing and return what the call "
                    "leaves, not what it did.",
                )
            )

        result = self._result("idempotent", self.strategies[name], body, tool=name)
        if result.status == "passed":
            return ClaimResult(
                "idempotent", "passed", result.examples, name, None,
                "results only: the state cannot be fingerprinted",
            )  # fmt: skip
        return result

    def check_write_targets(self, name: str) -> ClaimResult:
        effect = self.toolset[name].effect

        def body(arguments: Mapping[str, Any]) -> None:
            declared = effect.targets(arguments)
            if declared is None:
                reject()  # the targets are unknown for these arguments: no claim to check
            assert declared is not None
            run = self.once(name, arguments)
            changed = _changed(run.before.resources, run.after.resources)
            outside = changed - declared
            unseen = not changed and run.before.fingerprint != run.after.fingerprint
            if not outside and not unseen:
                return
            if unseen:
                message = (
                    f"'{name}' changed the state, but none of the resources that resources(state) "
                    "lists: the write cannot be checked against its targets."
                )
                fix = "Make resources(state) cover the whole state (every resource the tools can write)."
            else:
                message = (
                    f"'{name}' declares write targets {sorted(declared)} but this call also "
                    f"changed {sorted(outside)}."
                )
                fix = (
                    f"Add {sorted(outside)} (as templates over the arguments) to the "
                    f"write_targets of '{name}', or make the tool stop writing them."
                )
            raise Falsified(
                Counterexample(
                    calls=((name, arguments),),
                    message=message,
                    expected=Outcome(
                        "declared write targets", (), None, tuple(sorted(declared)) or ("(none)",)
                    ),
                    actual=Outcome(
                        "what the call changed",
                        (_outcome_text(run.results[0]),),
                        _short(run.after.fingerprint),
                        _change_lines(run.before.resources, run.after.resources, changed),
                    ),
                    fix=fix,
                )
            )

        return self._result("write_targets", self.strategies[name], body, tool=name)

    # ----------------------------------------------------------------- window claims

    def draw_window(self, data: st.DataObject, phase: Phase) -> list[Call]:
        """A window the detector certifies in ``phase``: calls are drawn one by one and a
        call that would break D1/D2 is left out (rejects when fewer than two remain)."""
        tools = self._eligible(phase.tools)
        size = data.draw(st.integers(2, self.max_window), label="window size")
        window: list[Call] = []
        calls: list[ToolCall] = []
        for _ in range(size):
            name = data.draw(st.sampled_from(tools), label="tool")
            arguments = data.draw(self.strategies[name], label=f"{name} arguments")
            call = tool_call(len(calls), name, arguments)
            if placeholder_failure(phase, call) or conflicts_with(self.toolset, calls, call):
                continue
            window.append((name, arguments))
            calls.append(call)
        if len(window) < 2:
            reject()
        if not isinstance(self.detector.certify(self.toolset, calls, phase, {}), Certificate):
            reject()
        return window

    def check_commutes(self, label: str, phase: Phase) -> ClaimResult:
        def body(data: st.DataObject) -> None:
            window = self.draw_window(data, phase)
            order = data.draw(st.permutations(range(len(window))), label="start order")
            yields = data.draw(
                st.lists(st.integers(0, 3), min_size=len(window), max_size=len(window)),
                label="yields before each call",
            )
            serial = self.execute(window)
            expected = [_outcome_text(r) for r in serial.results]
            # the drawn schedule, then the emitted order reversed (the likeliest to differ)
            reverse = list(range(len(window)))[::-1]
            for start, pauses in ((order, yields), (reverse, [0] * len(window))):
                concurrent = self.execute(window, order=start, yields=pauses)
                got = [_outcome_text(r) for r in concurrent.results]
                if got != expected or serial.after.fingerprint != concurrent.after.fingerprint:
                    raise Falsified(
                        self._commutation_counterexample(window, start, pauses, serial, concurrent)
                    )

        return self._result(
            "commutes",
            st.data(),
            body,
            examples=COMMUTES_FACTOR * self.examples,
            phase=label,
            empty="no window of 2+ calls certifies in this phase, so none runs concurrently",
        )

    def _commutation_counterexample(
        self,
        window: list[Call],
        order: Sequence[int],
        yields: Sequence[int],
        serial: Observed,
        concurrent: Observed,
    ) -> Counterexample:
        differing = [
            i
            for i, (x, y) in enumerate(zip(serial.results, concurrent.results, strict=True))
            if _outcome_text(x) != _outcome_text(y)
        ]
        state_differs = serial.after.fingerprint != concurrent.after.fingerprint
        parts = (
            [f"the results of {', '.join(f'#{i} {window[i][0]}' for i in differing)}"]
            if differing
            else []
        )
        if state_differs:
            parts.append("the final state")
        names = sorted({window[i][0] for i in differing} or {n for n, _ in window})
        message = (
            f"A certified window of {len(window)} calls is not order-independent: "
            f"{' and '.join(parts)} differ between the serial run and a concurrent one "
            f"({', '.join(repr(n) for n in names)})."
        )
        state_lines = _change_lines(
            serial.after.resources,
            concurrent.after.resources,
            _changed(serial.after.resources, concurrent.after.resources),
        )
        return Counterexample(
            calls=tuple(window),
            message=message,
            expected=Outcome(
                "serial, in emitted order",
                tuple(_outcome_text(r) for r in serial.results),
                _short(serial.after.fingerprint),
            ),
            actual=Outcome(
                f"concurrent, started in order {list(order)} with {list(yields)} scheduler yields",
                tuple(_outcome_text(r) for r in concurrent.results),
                _short(concurrent.after.fingerprint),
                tuple(
                    line.replace("changed ", "differs ", 1).replace(" → ", " (serial) vs ", 1)
                    + " (concurrent)"
                    for line in state_lines
                ),
            ),
            fix=self._commutation_fix(window, differing, serial),
        )

    def _commutation_fix(self, window: list[Call], differing: list[int], serial: Observed) -> str:
        """What to change: undeclared writes (seen through ``resources``), else undeclared
        reads or the general advice, with the D2 alternative (a result the manifest does not
        mark as one), first when an argument of one call is a value another call returns."""
        advice, seen_writing = self._targets_fix(window, differing)
        if seen_writing:
            return advice
        used = _result_as_argument(window, [_outcome_text(r) for r in serial.results])
        if used:
            return f"{used}{DEPENDENCY_FIX} {advice}"
        return f"{advice} {DEPENDENCY_FIX[:1].upper()}{DEPENDENCY_FIX[1:]}"

    def _targets_fix(self, window: list[Call], differing: list[int]) -> tuple[str, bool]:
        """The advice, and whether ``resources`` showed a call writing what it does not declare."""
        if self.cert.resources is not None:
            writes: list[set[str]] = []
            undeclared = []
            for name, arguments in window:
                run = self.once(name, arguments)
                changed = _changed(run.before.resources, run.after.resources)
                writes.append(changed)
                extra = changed - (self.toolset[name].effect.targets(arguments) or frozenset())
                if extra:
                    undeclared.append(f"'{name}' writes {sorted(extra)}, which it does not declare")
            if undeclared:
                return (
                    "; ".join(undeclared) + ": declare them as write targets (then D1 keeps these "
                    "calls apart), or stop the tool writing them.",
                    True,
                )
            for i in differing:
                name, arguments = window[i]
                others = set().union(*(w for j, w in enumerate(writes) if j != i))
                unread = others - (self.toolset[name].effect.reads(arguments) or frozenset())
                if unread:
                    return (
                        f"'{name}' returns a different result when another call of the window "
                        f"writes {sorted(unread)}, which '{name}' does not declare as read "
                        f"targets: add what it really reads to its read_targets (then D1 keeps "
                        "it apart from those writes), or make it read only what it declares.",
                        False,
                    )
        names = sorted({n for n, _ in window})
        who = (
            f"'{names[0]}'" if len(names) == 1 else "one of " + " and ".join(repr(n) for n in names)
        )
        return (
            f"These calls certified as independent (their declared targets are disjoint) but do "
            f"not commute, so {who} touches state it does not declare. If a result depends on "
            "hidden state (a counter, a clock, the order of calls), make it depend only on the "
            "arguments and the declared targets, or declare that state as a write target of "
            "every call that touches it; if a call reads what another writes, add it to its "
            "read_targets.",
            False,
        )


def _leaves(value: Any) -> Iterator[Any]:
    """The scalar values in a decoded JSON result."""
    if isinstance(value, dict | list):
        for inner in value.values() if isinstance(value, dict) else value:
            yield from _leaves(inner)
    elif not isinstance(value, bool):
        yield value


def _decoded(content: str) -> Any:
    try:
        return json.loads(content)
    except json.JSONDecodeError:
        return content


def _result_as_argument(window: Sequence[Call], results: Sequence[str]) -> str:
    """A sentence when an argument of one call is a value another call of the window returns
    (serially): likely a result the manifest does not mark as one; else ``""``."""
    leaves = [set(_leaves(_decoded(r))) for r in results]
    for i, (name, arguments) in enumerate(window):
        for argument, value in sorted(arguments.items()):
            if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
                continue
            for j, (other, _) in enumerate(window):
                if j != i and value in leaves[j]:
                    return (
                        f"#{i} '{name}' gets {argument}={json.dumps(value)}, which #{j} '{other}' "
                        "returns: "
                    )
    return ""


def _call_contract(what: str, fn: Callable[[Any], Any] | None, argument: Any) -> Any:
    """Call one of the toolset's contract functions; its failure is the toolset's error."""
    assert fn is not None
    try:
        return fn(argument)
    except Exception as exc:
        raise ToolsetError(
            f"The toolset's {what}() raised {type(exc).__name__}: {exc}; the certification kit "
            "cannot run without it."
        ) from exc
