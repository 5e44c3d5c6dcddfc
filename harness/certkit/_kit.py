"""The kit that runs the claims :mod:`harness.certkit` checks, as hypothesis properties over
real executions, and the per-tool claims (``read_only``, ``idempotent``, ``write_targets``).
The other claims live beside it, one module each: :mod:`~harness.certkit._canonical`
(``targets_canonical``, ``identity``), :mod:`~harness.certkit._commutes`,
:mod:`~harness.certkit._d2`, :mod:`~harness.certkit._speculable`.

:class:`Kit` holds one toolset under test: its contract, the tools bound to a first fresh
state (for schemas and effects only), an argument strategy per tool, and the hypothesis
settings. :meth:`Kit.plan` lists one job per claim; each job runs one hypothesis property and
returns a :class:`~harness.certkit.ClaimResult`. A property that finds a false claim raises
:class:`Falsified` carrying a :class:`~harness.certkit.Counterexample`; hypothesis shrinks the
example and re-raises the minimal one, which the job reports.

Every execution runs on a fresh state (``new_state(seed)``) through
:func:`harness.tools.execute.execute_call`, so validation and error results are exactly the loop's.
A single call's execution is memoised by ``(tool, arguments)``: the read-only, idempotence and
write-target claims of one tool share it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import anyio.lowlevel
from hypothesis import HealthCheck, Verbosity, given, reject, settings
from hypothesis import Phase as HypothesisPhase
from hypothesis import example as hypothesis_example
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from harness._concurrency import gather
from harness.certify import Detector, SchemaSoundDetector
from harness.certkit._aliases import alias_table, seed_table, target_arguments
from harness.certkit._base import (
    Call,
    Falsified,
    Observed,
    Snapshot,
    change_lines,
    changed_resources,
    declared_writes,
    nondeterministic_counterexample,
    not_covered,
    not_overlapping,
    outcome_text,
    short,
    tool_call,
)
from harness.certkit._canonical import check_identity, check_targets_canonical, identity_arguments
from harness.certkit._commutes import check_commutes
from harness.certkit._contract import CertifiableToolset
from harness.certkit._d2 import check_d2
from harness.certkit._report import ClaimName, ClaimResult, Counterexample, Outcome
from harness.certkit._schema_strategies import arguments_strategy, explicit_arguments
from harness.certkit._speculable import check_speculable
from harness.errors import ToolsetError
from harness.messages import ToolCall
from harness.skills.manifest import ArgSource, Manifest, Phase
from harness.tools.execute import ToolResult, execute_call
from harness.tools.toolset import Tool, Toolset

__all__ = ("Falsified", "Kit")

Job = Callable[[], ClaimResult]
SYNTHETIC = "all tools"


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
    #: Per tool, argument objects every per-tool claim tries first (each example value and
    #: its other spellings once): a collision the examples hold is met on purpose.
    explicit: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _memo: dict[str, Observed] = field(default_factory=dict)
    #: Per tool, since the claim running began: [calls that succeeded, calls that returned
    #: an error, the first error's text] (:meth:`_judged`).
    _tally: dict[str, list[Any]] = field(default_factory=dict)
    _never_succeeded: int = 0

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
        # arguments that feed targets and have no example values start from the kit's own
        # values for their type; every example gets its other spellings beside it
        examples_table = {**seed_table(toolset, examples_table), **examples_table}
        aliases = alias_table(toolset, examples_table)
        explicit: dict[str, list[dict[str, Any]]] = {}
        for name, tool in toolset.items():
            explicit[name] = explicit_arguments(name, tool.parameters, examples_table, aliases)
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
            explicit=explicit,
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
        self._count(results)
        return Observed(results, before, self.snapshot(state))

    def once(self, name: str, arguments: Mapping[str, Any]) -> Observed:
        key = json.dumps([name, arguments], sort_keys=True, default=str)
        if key not in self._memo:
            self._memo[key] = self.execute([(name, arguments)])
        else:  # the claim running sees this outcome too
            self._count(self._memo[key].results)
        return self._memo[key]

    def _count(self, results: Sequence[ToolResult]) -> None:
        for result in results:
            tally = self._tally.setdefault(result.name, [0, 0, ""])
            if result.is_error:
                tally[1] += 1
                tally[2] = tally[2] or outcome_text(result)
            else:
                tally[0] += 1

    def _judged(self, job: Job, subjects: Sequence[str]) -> Job:
        """``job``, whose pass counts only if some tool of ``subjects`` succeeded at least
        once in it: a claim checked only on calls that all returned an error (the fresh
        state lacks what the tool needs) has seen nothing, so it is unverified, naming the
        tool and its first error."""

        def run() -> ClaimResult:
            self._tally = {}
            result = job()
            tried = [n for n in subjects if n in self._tally]
            if result.status != "passed" or not tried:
                return result
            if any(self._tally[n][0] for n in tried):
                return result
            calls = sum(self._tally[n][1] for n in tried)
            first = " ".join(self._tally[tried[0]][2].split())
            first = first if len(first) <= 160 else first[:159] + "…"
            if len(tried) == 1:
                who = f"'{tried[0]}' never succeeded: all {calls} calls returned an error"
            else:
                who = (
                    f"{', '.join(tried)} never succeeded: all {calls} calls returned an "
                    f"error ('{tried[0]}')"
                )
            self._never_succeeded += 1
            if self._never_succeeded == 1:
                self.notes.append(
                    "a claim whose tool never succeeded (every call returned an error on the "
                    "kit's fresh states) is unverified, not passed: the state lacks what the "
                    "tool needs; seed it (new_state, or --seed-dir for an MCP server)"
                )
            return replace(
                result,
                status="unverified",
                reason=f"{who}, the first {first!r}",
            )

        return run

    # ---------------------------------------------------------------------- driver

    def prove(
        self,
        strategy: st.SearchStrategy[Any],
        body: Callable[[Any], None],
        examples: int | None = None,
        explicit: Sequence[Any] = (),
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
        prop = given(strategy)(test)
        for value in explicit:
            prop = hypothesis_example(value)(prop)
        prop = hypothesis_seed(self.seed)(configured(prop))
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
        explicit = (
            self.explicit.get(tool, []) if tool and strategy is self.strategies.get(tool) else []
        )
        passed, counterexample, unsatisfiable = self.prove(strategy, body, examples, explicit)
        if counterexample is not None and counterexample.nondeterministic:
            why = "its results vary between runs on fresh states; see below"
            return ClaimResult(claim, "unverified", passed, tool, phase, why, counterexample)
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
            for job in self._tool_jobs(name, tool):
                yield self._judged(job, [name])
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
        if identity_arguments(tool):
            claims.append("identity")
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
            elif claim == "identity":
                yield functools.partial(check_identity, self, name)
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

    def eligible(self, names: Sequence[str]) -> list[str]:
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
        everything = self.eligible(list(self.toolset))
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
                tools = tuple(self.eligible(phase.tools))
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
                members = self.eligible(phase.tools)
                writers = [n for n in members if not self.toolset[n].effect.read_only]
                yield self._judged(
                    functools.partial(check_commutes, self, label, phase), writers or members
                )

    # ------------------------------------------------------------------ per-tool claims

    def check_read_only(self, name: str) -> ClaimResult:
        def body(arguments: Mapping[str, Any]) -> None:
            run = self.once(name, arguments)
            if run.before.fingerprint == run.after.fingerprint:
                return
            changed = changed_resources(run.before.resources, run.after.resources)
            lines = change_lines(run.before.resources, run.after.resources, changed)
            wrote = f" (it wrote {', '.join(sorted(changed))})" if changed else ""
            raise Falsified(
                Counterexample(
                    calls=((name, arguments),),
                    message=f"'{name}' is annotated read-only but this call changed the state{wrote}.",
                    expected=Outcome("state before the call", (), short(run.before.fingerprint)),
                    actual=Outcome(
                        "state after the call",
                        (outcome_text(run.results[0]),),
                        short(run.after.fingerprint),
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
            if outcome_text(once.results[0]) != outcome_text(twice.results[0]):
                # the first call of both runs is the same call on a fresh state
                first = Observed(once.results, once.before, once.after)
                second = Observed(twice.results[:1], twice.before, twice.after)
                raise Falsified(nondeterministic_counterexample([(name, arguments)], first, second))
            same_state = once.after.fingerprint == twice.after.fingerprint
            same_result = outcome_text(once.results[0]) == outcome_text(twice.results[1])
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
            changed = changed_resources(once.after.resources, twice.after.resources)
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
                        (outcome_text(once.results[0]),),
                        short(once.after.fingerprint),
                    ),
                    actual=Outcome(
                        "called twice (results of the first and the second call)",
                        tuple(outcome_text(r) for r in twice.results),
                        short(twice.after.fingerprint),
                        tuple(
                            line.replace("changed ", "differs ", 1).replace(" → ", " (once) vs ", 1)
                            + " (twice)"
                            for line in change_lines(
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
            first, second = (outcome_text(r) for r in run.results)
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
        tool = self.toolset[name]

        def body(arguments: Mapping[str, Any]) -> None:
            declared = declared_writes(tool, arguments)
            if declared is None:
                reject()  # the targets are unknown for these arguments: no claim to check
            assert declared is not None
            run = self.once(name, arguments)
            changed = changed_resources(run.before.resources, run.after.resources)
            outside = not_covered(changed, declared)
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
                coarse = sorted(not_overlapping(outside, declared) ^ outside)
                if coarse:  # the store reports a resource that holds a declared target
                    fix += (
                        f" The store reports {coarse}, which holds what '{name}' declares: "
                        "if the call wrote only the declared part, make resources(state) "
                        "report resources as finely as the targets name them."
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
                        (outcome_text(run.results[0]),),
                        short(run.after.fingerprint),
                        change_lines(run.before.resources, run.after.resources, changed),
                    ),
                    fix=fix,
                )
            )

        return self._result("write_targets", self.strategies[name], body, tool=name)


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
