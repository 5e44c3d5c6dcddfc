"""``python -m benchmarks.soundness --cases 10000``: no false fill under true declarations.

The schema-sound detector promises that every window it certifies gives the serial arm's
results and final state, as long as the effects and the manifest are true. This command
checks the promise on generated cases (hypothesis, strategy
:func:`tests.strategies.soundness_worlds`): each case is an **honest** toolset over an
in-memory store of documents and slots (its effects are true of its code), an **honest**
manifest, task inputs, and a context-bound scripted agent (it sees only its messages: a
result withheld from it reads as the marker). The agent is run under S, F, F+eager and P; a
**false fill** is a case where any arm's tool results (in transcript order) or final store
differ from S's. The generators produce every class issue 15 lists:

* coercible spellings (``1`` and ``1.0`` for an ``int`` slot),
* aliases under a declared fold (a store that folds keys with NFKC and case; ``A``, ``a``
  and the full-width ``ａ`` name one document),
* list arguments (``tag_many(keys=[...])``),
* mixed granularities (``get`` reads ``doc:{key}``, ``set_field`` writes
  ``doc:{key}/{field}``),
* writers with unset reads (``copy(src, dst)``),
* model deviations from the manifest (an argument the manifest sources from the task input,
  or leaves to the model, that the agent really takes from a result; when that result is
  withheld the agent writes the marker, or — for an input-sourced argument — a guess that is
  not an input value),

and every tool yields to the scheduler a per-call number of times before it reads and
between its read and its write, so calls that do not commute show it when run together.

``--control NAME`` runs the same cases with one of the fixes undone (a deliberately unsound
rule), to show the generators catch it: ``raw_targets`` (targets from the raw JSON, no
validation, coercion, fold or proof keys), ``reads_are_writes`` (a writer without read targets reads what
it writes), ``exact_targets`` (no hierarchy: targets compared as exact strings),
``no_provenance`` (arguments not checked against their sources). The command exits 0 when
the count of false fills is what it should be: 0 without a control, more than 0 with one.

``--family identity`` runs the generators of issue 25 instead
(:mod:`benchmarks.soundness_identity`): spellings of one record by type (instants in
other offsets, paths), closed folds, composite and literal templates, nested models, the
store's own identity, globs, minted-id collections, deep and long arguments; its controls are
``no_type_identity``, ``open_folds``, ``no_store_identity``, ``literal_globs`` and
``recursive_identity``. It exits 0 when there are no false fills and no exceptions (with a
control: when there are some).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import json
import time
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from unittest import mock

import anyio

from benchmarks.soundness_identity import IDENTITY_CONTROLS
from harness.loop import Arm
from harness.loop.task import Task
from harness.messages import Message, ToolSpec
from harness.skills.manifest import Manifest, Skill
from harness.tools import Tool, Toolset, tool

__all__ = (
    "CONTROLS",
    "ArgRecipe",
    "CaseOutcome",
    "PhasePlan",
    "Step",
    "World",
    "main",
    "run_case",
)

MARKER = "[withheld]"
GUESS = "unknown"  # what the agent writes for an input-sourced value it could not see
FIELDS = ("status", "owner", "next", "count")
ARMS: tuple[tuple[str, Arm, bool], ...] = (
    ("F", "F", False),
    ("F+eager", "F", True),
    ("P", "P", False),
)

# -- the world a case lives in -----------------------------------------------------------------


@dataclass(frozen=True)
class ArgRecipe:
    """How the agent really computes one argument.

    ``const``: ``value`` itself. ``input``: ``inputs[ref][index]``, spelled with ``spelling``
    (``as_is``, ``upper``, ``wide`` full-width, ``float`` for an integer). ``result``: the
    field ``ref`` of the result of step ``index`` (a withheld result reads as the marker:
    the agent then writes ``fallback``: the marker, or the guess).
    """

    kind: Literal["const", "input", "result"]
    value: Any = None
    ref: str = ""
    index: int = 0
    spelling: str = "as_is"
    fallback: Literal["marker", "guess"] = "marker"


@dataclass(frozen=True)
class Step:
    """One call the agent makes: a tool and how it computes each argument."""

    tool: str
    args: Mapping[str, ArgRecipe]
    phase: int


@dataclass(frozen=True)
class PhasePlan:
    """One manifest phase: its kind, tools, slot count and declared argument sources."""

    name: str
    kind: Literal["fan_out", "chain"]
    tools: tuple[str, ...]
    slots: int | str | None
    sources: Mapping[str, str]  # "tool.argument" -> source


@dataclass(frozen=True)
class World:
    """One generated case: store, toolset options, manifest, inputs, the agent's steps, and
    the P agent's message groups."""

    seed: int
    fold: bool
    docs: Mapping[str, Mapping[str, Any]]
    slots: Mapping[int, str]
    phases: tuple[PhasePlan, ...]
    steps: tuple[Step, ...]
    inputs: Mapping[str, Any]
    groups: tuple[tuple[int, ...], ...]
    classes: frozenset[str] = field(default_factory=frozenset)


def store_key(world: World, key: str) -> str:
    """How the store names a document: folded (NFKC, case) when the world folds."""
    if not world.fold:
        return key
    return unicodedata.normalize("NFKC", key).upper().casefold()


@dataclass
class Store:
    docs: dict[str, dict[str, Any]]
    slots: dict[int, str]

    def fingerprint(self) -> str:
        blob = json.dumps({"docs": self.docs, "slots": self.slots}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def new_store(world: World) -> Store:
    return Store(copy.deepcopy({k: dict(v) for k, v in world.docs.items()}), dict(world.slots))


class _Binding:
    """The world and store the cached tools act on (one run at a time)."""

    def __init__(self) -> None:
        self._world: World | None = None
        self._store: Store | None = None

    def bind(self, world: World, store: Store) -> None:
        self._world, self._store = world, store

    @property
    def world(self) -> World:
        assert self._world is not None
        return self._world

    @property
    def store(self) -> Store:
        assert self._store is not None
        return self._store


_TOOLSETS: dict[bool, tuple[_Binding, Toolset]] = {}


def make_toolset(world: World, store: Store) -> Toolset:
    """The honest toolset over ``store`` (see :func:`_build_toolset`). Building tools costs
    far more than running a case, so one toolset per fold setting is built and rebound."""
    if world.fold not in _TOOLSETS:
        binding = _Binding()
        _TOOLSETS[world.fold] = binding, _build_toolset(binding, world.fold)
    binding, toolset = _TOOLSETS[world.fold]
    binding.bind(world, store)
    return toolset


def _build_toolset(binding: _Binding, folds: bool) -> Toolset:
    """The honest toolset: every effect below is true of the code under it."""
    fold = {"key": "nfkc+case", "src": "nfkc+case", "dst": "nfkc+case", "keys": "nfkc+case"}
    canonical = fold if folds else None

    async def pause(*parts: Any) -> None:
        # A per-call number of scheduler yields, the same in every arm: before a read up to
        # seven (so a concurrent write can land first), between a read and its write up to two.
        digest = hashlib.sha256(
            json.dumps([binding.world.seed, *parts], default=str).encode()
        ).digest()
        top = 3 if str(parts[0]).endswith(":mid") else 8
        for _ in range(digest[0] % top):
            await anyio.lowlevel.checkpoint()

    def doc(key: str) -> dict[str, Any]:
        found = binding.store.docs.get(store_key(binding.world, key))
        if found is None:
            raise LookupError(f"no document {key!r}")
        return found

    @tool(read_only=True, read_targets="doc:{key}", canonical=canonical)
    async def get(key: str) -> dict[str, Any]:
        """Read a whole document."""
        await pause("get", key)
        return {"key": store_key(binding.world, key), **doc(key)}

    @tool(read_only=True, read_targets="doc:{key}/{field}", canonical=canonical)
    async def get_field(key: str, field: Literal["status", "owner", "next", "count"]) -> Any:
        """Read one field."""
        await pause("get_field", key, field)
        return {field: doc(key)[field]}

    @tool(idempotent=True, write_targets="doc:{key}/{field}", read_targets=(), canonical=canonical)
    async def set_field(key: str, field: Literal["status", "owner"], value: str) -> Any:
        """Overwrite one field; returns what it wrote."""
        await pause("set_field", key, field, value)
        target = doc(key)
        await pause("set_field:mid", key, field, value)
        target[field] = value
        return {"key": key, field: value}

    @tool(write_targets="doc:{key}/count", read_targets="doc:{key}/count", canonical=canonical)
    async def bump(key: str, n: int) -> Any:
        """Add ``n`` to a counter; returns the new count."""
        await pause("bump", key, n)
        old = doc(key)["count"]
        await pause("bump:mid", key, n)
        doc(key)["count"] = old + n
        return {"count": old + n}

    @tool(
        idempotent=True,
        destructive=False,
        write_targets="doc:{keys}/tags",
        read_targets="doc:{keys}/tags",
        canonical=canonical,
    )
    async def tag_many(keys: list[str], tag: str) -> Any:
        """Add a tag to several documents; returns how many tags each has."""
        await pause("tag_many", keys, tag)
        before = [sorted(doc(k)["tags"]) for k in keys]
        await pause("tag_many:mid", keys, tag)
        for k, tags in zip(keys, before, strict=True):
            doc(k)["tags"] = sorted({*tags, tag})
        return [len(doc(k)["tags"]) for k in keys]

    @tool(write_targets="doc:{dst}", canonical=canonical)  # reads unset: unknown (src)
    async def copy_doc(src: str, dst: str) -> Any:
        """Copy a whole document over another."""
        await pause("copy", src, dst)
        body = copy.deepcopy(doc(src))
        await pause("copy:mid", src, dst)
        binding.store.docs[store_key(binding.world, dst)] = body
        return {"copied": src, "to": dst}

    @tool(idempotent=True, write_targets="slot:{slot}", read_targets=())
    async def put_slot(slot: int, value: str) -> Any:
        """Overwrite a numbered slot."""
        await pause("put_slot", slot, value)
        binding.store.slots[slot] = value
        return {"slot": slot, "value": value}

    @tool(read_only=True, read_targets="slot:{slot}")
    async def get_slot(slot: int) -> Any:
        """Read a numbered slot."""
        await pause("get_slot", slot)
        return {"slot": slot, "value": binding.store.slots.get(slot, "")}

    tools: tuple[Tool, ...] = (
        get,
        get_field,
        set_field,
        bump,
        tag_many,
        copy_doc,
        put_slot,
        get_slot,
    )
    return Toolset(tools, name="soundness")


def make_skill(world: World) -> Skill:
    phases = [
        {
            "name": p.name,
            "kind": p.kind,
            "tools": list(p.tools),
            **({"slots": p.slots} if p.slots is not None else {}),
            "args": dict(p.sources),
        }
        for p in world.phases
    ]
    manifest = Manifest.from_dict({"skills": {"case": {"phases": phases}}}, source="soundness")
    return manifest.skill("case")


# -- the context-bound agent ---------------------------------------------------------------------


def _spell(value: Any, spelling: str) -> Any:
    if spelling == "upper" and isinstance(value, str):
        return value.upper()
    if spelling == "wide" and isinstance(value, str):
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value)
    if spelling == "float" and isinstance(value, int):
        return float(value)
    return value


def _visible_results(messages: Sequence[Message]) -> list[str | None]:
    """The tool messages in order (one per step emitted so far); ``None`` where withheld."""
    out: list[str | None] = []
    for m in messages:
        if m.get("role") == "tool":
            content = str(m.get("content", ""))
            out.append(None if content == MARKER else content)
    return out


def _value(world: World, recipe: ArgRecipe, seen: Sequence[str | None]) -> Any:
    if recipe.kind == "const":
        return recipe.value
    if recipe.kind == "input":
        return _spell(world.inputs[recipe.ref][recipe.index], recipe.spelling)
    text = seen[recipe.index] if recipe.index < len(seen) else None
    if text is None:
        return MARKER if recipe.fallback == "marker" else GUESS
    try:
        decoded = json.loads(text)
    except ValueError:
        return GUESS
    if isinstance(decoded, dict) and recipe.ref in decoded:
        return decoded[recipe.ref]
    return GUESS  # an error result: the agent has nothing better


def _call(world: World, index: int, seen: Sequence[str | None]) -> dict[str, Any]:
    step = world.steps[index]
    return {
        "name": step.tool,
        "arguments": {name: _value(world, r, seen) for name, r in step.args.items()},
    }


def serial_agent(world: World) -> Callable[[Sequence[Message], Sequence[ToolSpec]], Any]:
    """S and F: one call per turn; the next step is the number of calls made so far."""

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        seen = _visible_results(messages)
        if len(seen) >= len(world.steps):
            return "done"
        return _call(world, len(seen), seen)

    return script


def parallel_agent(world: World) -> Callable[[Sequence[Message], Sequence[ToolSpec]], Any]:
    """P: one message per group of steps (a group never holds a step that needs another
    step of the group: that would be the model's parallel-calling gap, not the certifier's)."""

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        seen = _visible_results(messages)
        done = len(seen)
        for group in world.groups:
            if group[0] == done:
                return [_call(world, i, seen) for i in group]
        return "done"

    return script


# -- running a case ------------------------------------------------------------------------------


@dataclass
class ArmRun:
    pairs: list[tuple[str, str, str]]  # (tool, arguments, result) in transcript order
    fingerprint: str
    windows: int
    repairs: int  # discards (calls regenerated after an absorb turn)
    error: str | None = None


@dataclass
class CaseOutcome:
    """What one case showed: which arms differ from S, and how many windows certified."""

    mismatches: dict[str, str]
    windows: dict[str, int]
    repairs: dict[str, int]

    @property
    def false_fill(self) -> bool:
        return bool(self.mismatches)


def _transcript(messages: Sequence[Message]) -> list[tuple[str, str, str]]:
    calls: dict[str, tuple[str, str]] = {}
    out = []
    for m in messages:
        for c in m.get("tool_calls") or ():
            fn = c["function"]
            calls[c["id"]] = (fn["name"], json.dumps(json.loads(fn["arguments"]), sort_keys=True))
        if m.get("role") == "tool":
            name, arguments = calls[str(m["tool_call_id"])]
            out.append((name, arguments, str(m.get("content", ""))))
    return out


def _config(arm: Arm, eager: bool) -> Any:
    from harness.loop import FlattenSettings, LoopConfig

    return LoopConfig(arm=arm, max_turns=200, flatten=FlattenSettings(eager=eager, max_discards=64))


async def _run_arm(world: World, arm: Arm, eager: bool) -> ArmRun:
    from harness.loop import run_loop
    from harness.testing import ScriptedEngine

    store = new_store(world)
    toolset = make_toolset(world, store)
    agent = parallel_agent(world) if arm == "P" else serial_agent(world)
    task = Task(id=f"case-{world.seed}", prompt="solve", skill="case", inputs=dict(world.inputs))
    config = _config(arm, eager)
    config = _with_budgets(config)
    try:
        result = await run_loop(
            ScriptedEngine(agent), toolset, task, config, manifest=make_skill(world)
        )
    except Exception as exc:  # a crash is a finding, reported as a mismatch
        return ArmRun([], store.fingerprint(), 0, 0, f"{type(exc).__name__}: {exc}")
    windows = sum(1 for w in result.windows if w.n >= 2)
    return ArmRun(
        _transcript(result.messages), store.fingerprint(), windows, result.summary.discards
    )


def _with_budgets(config: Any) -> Any:
    """Mistakes (error results) are part of the cases: never end a run on them."""
    from dataclasses import replace

    return replace(
        config, max_model_errors=10**6, max_identical_calls=10**6, max_tool_failures=10**6
    )


def run_case(world: World) -> CaseOutcome:
    """Run ``world`` under S, F, F+eager and P; compare each with S."""

    async def main() -> dict[str, ArmRun]:
        out = {"S": await _run_arm(world, "S", False)}
        for label, arm, eager in ARMS:
            out[label] = await _run_arm(world, arm, eager)
        return out

    runs = anyio.run(main)
    serial = runs["S"]
    mismatches: dict[str, str] = {}
    for label, run in runs.items():
        if run.error is not None:
            mismatches[label] = f"raised {run.error}"
        elif label != "S" and run.pairs != serial.pairs:
            first = next(
                (
                    i
                    for i, (a, b) in enumerate(zip(run.pairs, serial.pairs, strict=False))
                    if a != b
                ),
                min(len(run.pairs), len(serial.pairs)),
            )
            mine = run.pairs[first] if first < len(run.pairs) else None
            theirs = serial.pairs[first] if first < len(serial.pairs) else None
            mismatches[label] = f"result #{first}: {mine} vs S {theirs}"
        elif label != "S" and run.fingerprint != serial.fingerprint:
            mismatches[label] = "final store differs from S"
    return CaseOutcome(
        mismatches,
        {k: r.windows for k, r in runs.items()},
        {k: r.repairs for k, r in runs.items()},
    )


# -- deliberately unsound rules (controls) -------------------------------------------------------


@contextlib.contextmanager
def _raw_targets() -> Iterator[None]:
    from harness.tools.effects import Footprint

    def footprint(self: Tool, arguments: Any, **_: Any) -> Footprint:
        if not isinstance(arguments, Mapping):
            return Footprint.failed("not a mapping")
        raw = dict(arguments)

        def spell(value: Any) -> Any:
            if isinstance(value, list):
                return [json.dumps(v) if not isinstance(v, str) else v for v in value]
            return value if isinstance(value, str) else json.dumps(value)

        effect = self.effect
        plain = type(effect)(
            read_only=effect.read_only,
            idempotent=effect.idempotent,
            destructive=effect.destructive,
            open_world=effect.open_world,
            write_targets=effect.write_targets,
            read_targets=effect.read_targets,
            annotated=effect.annotated,
        )
        return plain.footprint({k: spell(v) for k, v in raw.items()})

    from harness.tools import effects

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(Tool, "footprint", footprint))
        # (and components as written: proof keys would merge the raw spellings again)
        stack.enter_context(mock.patch.object(effects, "proof_key", lambda text: text or None))
        yield


@contextlib.contextmanager
def _reads_are_writes() -> Iterator[None]:
    from harness.tools.effects import Effect, Footprint

    original = Effect.footprint

    def footprint(self: Effect, arguments: Mapping[str, Any]) -> Footprint:
        found = original(self, arguments)
        if self.read_targets is None and not self.read_only and found.error is None:
            return Footprint(found.writes, found.writes, found.unknown)
        return found

    with mock.patch.object(Effect, "footprint", footprint):
        yield


@contextlib.contextmanager
def _exact_targets() -> Iterator[None]:
    with mock.patch("harness.certify.conflicts.ancestors", return_value=()):
        yield


@contextlib.contextmanager
def _no_provenance() -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for module in ("harness.certify.schema_sound", "harness.certify.phase_heuristic"):
            stack.enter_context(mock.patch(f"{module}.provenance_failures", return_value=[]))
        yield


CONTROLS: Mapping[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "raw_targets": _raw_targets,
    "reads_are_writes": _reads_are_writes,
    "exact_targets": _exact_targets,
    "no_provenance": _no_provenance,
}


# -- the command ---------------------------------------------------------------------------------


@dataclass
class Tally:
    cases: int = 0
    false_fills: int = 0
    windows: int = 0
    repairs: int = 0
    by_class: dict[str, int] = field(default_factory=dict)
    first: str | None = None


def run_property(
    cases: int,
    *,
    control: str | None = None,
    seed: int | None = 0,
    stop_on_false_fill: bool = False,
    focus: tuple[str, ...] | None = None,
) -> Tally:
    """Generate ``cases`` worlds and run each (see the module docstring). ``focus``: every
    phase uses exactly these tools (aims the generator at one class of case).
    ``stop_on_false_fill``: stop at the first one (a control only needs one)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from tests.strategies import soundness_worlds

    _quiet()
    tally = Tally()
    phases = [Phase.explicit, Phase.generate]  # no shrinking: every false fill is reported

    @settings(
        max_examples=cases,
        deadline=None,
        database=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
    )
    @given(world=soundness_worlds(focus=focus))
    def check(world: World) -> None:
        outcome = run_case(world)
        tally.cases += 1
        tally.windows += outcome.windows.get("F", 0)
        tally.repairs += outcome.repairs.get("F", 0)
        for name in world.classes:
            tally.by_class[name] = tally.by_class.get(name, 0) + 1
        if outcome.false_fill:
            tally.false_fills += 1
            if tally.first is None or stop_on_false_fill:
                tally.first = _describe(world, outcome)
            if stop_on_false_fill:
                raise AssertionError(tally.first)

    if seed is not None:
        check = hseed(seed)(check)
    context = CONTROLS[control]() if control else contextlib.nullcontext()
    with context:
        try:
            check()
        except AssertionError:
            if not stop_on_false_fill:
                raise
    return tally


def _quiet() -> None:
    """The ledger logs every turn at debug level; a property run of thousands of cases
    keeps warnings only."""
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def _describe(world: World, outcome: CaseOutcome) -> str:
    steps = "; ".join(
        f"{s.tool}({', '.join(f'{k}={r.kind}' for k, r in s.args.items())})@{s.phase}"
        for s in world.steps
    )
    return (
        f"seed {world.seed}, fold={world.fold}, phases "
        f"{[(p.name, p.kind, p.slots) for p in world.phases]}, steps [{steps}]: "
        + "; ".join(f"{k}: {v}" for k, v in outcome.mismatches.items())
    )


def _identity_main(args: argparse.Namespace) -> int:
    from benchmarks.soundness_identity import run_identity_property
    from harness._progress import Progress

    _quiet()
    started = time.monotonic()
    bar = Progress(args.cases, "cases", every=max(1, args.cases // 20))
    tally = run_identity_property(
        args.cases, seed=args.seed, control=args.control, progress=lambda _: bar.advance()
    )
    wall = time.monotonic() - started
    rule = f"control {args.control!r}" if args.control else "the certifier"
    print(f"Soundness property, identity family, {rule}: {tally.cases} cases in {wall:.0f} s")
    print(f"  windows certified under F (n >= 2): {tally.windows}")
    print(f"  false fills (F, F+eager or P differs from S): {tally.false_fills}")
    print(f"  cases where an arm raised: {tally.exceptions}")
    for name, count in sorted(tally.by_class.items()):
        bad = tally.false_by_class.get(name, 0)
        print(f"    {name:<15} {count:>6} cases, {bad} false fills")
    if tally.first:
        print(f"  first false fill: {tally.first}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            doc = {**tally.__dict__, "family": "identity", "control": args.control, "wall_s": wall}
            json.dump(doc, fh, indent=2)
    found = tally.false_fills + tally.exceptions
    return 0 if (found > 0 if args.control else found == 0) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.soundness", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--cases", type=int, default=10_000, help="cases to run (default 10000)")
    parser.add_argument(
        "--family",
        choices=("classic", "identity"),
        default="classic",
        help="the generators: classic (issue 15's classes, default) or identity (issue 25's)",
    )
    parser.add_argument(
        "--control",
        choices=sorted({*CONTROLS, *IDENTITY_CONTROLS}),
        help="undo one fix (see above)",
    )
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.cases < 1:
        parser.error("--cases must be at least 1")
    family_controls = IDENTITY_CONTROLS if args.family == "identity" else CONTROLS
    if args.control and args.control not in family_controls:
        parser.error(
            f"--control {args.control} belongs to the other family; for --family "
            f"{args.family} use one of {', '.join(sorted(family_controls))}"
        )
    if args.family == "identity":
        return _identity_main(args)
    started = time.monotonic()
    tally = run_property(args.cases, control=args.control, seed=args.seed)
    wall = time.monotonic() - started
    rule = (
        f"control {args.control!r} (a deliberately unsound rule)"
        if args.control
        else "the certifier"
    )
    print(f"Soundness property, {rule}: {tally.cases} cases in {wall:.0f} s")
    print(f"  windows certified under F (n >= 2): {tally.windows}; F repairs: {tally.repairs}")
    print(f"  false fills (F, F+eager or P differs from S): {tally.false_fills}")
    for name, count in sorted(tally.by_class.items()):
        print(f"    cases with {name}: {count}")
    if tally.first:
        print(f"  first false fill: {tally.first}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({**tally.__dict__, "control": args.control, "wall_s": wall}, fh, indent=2)
    ok = tally.false_fills > 0 if args.control else tally.false_fills == 0
    return 0 if ok else 1


if __name__ == "__main__":
    from benchmarks._entry import run_main

    run_main(main)
