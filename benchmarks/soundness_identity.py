"""The identity family of the soundness property (issue 25): spellings of one record.

``python -m benchmarks.soundness --family identity --cases 10000`` generates cases
of every class of issue 25, each an **honest** toolset (its effects are true of its store)
and a sequence of 2-4 calls that touch 1-3 records of the store under *different spellings*
of the same value, so most cases hold calls that must not certify together:

``instant``        ``add(when: datetime)``, the store keying the UTC instant; spellings in
                   other offsets
``time``           ``add(at: time)``, the UTC time of day
``path_value``     ``add(path: Path)``, the store normalising the path; ``a/./b``, ``a//b/``…
``path_str``       ``add(path: str)`` under ``canonical="path"``; ``//x``, ``x/..``…
``composite``      ``add_in(dir, name)`` on ``file:{dir}/{name}`` beside ``add(path)``
``literal``        ``add(key)`` under ``case`` beside ``bump_readme()`` on ``doc:Readme``
``unicode``        ``add(key)`` under ``case+nfkc``; dotless and mathematical i, Greek with
                   combining marks, full-width letters
``nested``         ``add(key: Key)`` a pydantic model, the fold inside it
``store_identity`` ``add(key)`` with ``identity={"key": fn}``, the store's own key function
``glob``           ``add(key)`` beside ``total()`` declaring ``doc:*``
``collection``     ``add_todo(text)`` writing ``todos`` (the store mints ``todos:<n>``)
``deep``           ``put(key, blob)``, the blob nested 200-900 levels deep
``long``           ``add(key)`` with keys of 2,000-32,000 characters sharing prefixes

Every tool reads its record, yields to the scheduler, then writes it: two calls on one record
run together lose an update, and their results differ from the serial run's. Each case runs
under S, F, F+eager and P (:func:`run_arms`); a **false fill** is an arm whose results or
final store differ from S's, an **exception** an arm that raised.

Controls (``--control``) undo one rule each and must find false fills (or, for
``recursive_identity``, exceptions): ``raw_components`` (no proof keys and no folds: a
component is its raw text and a value ``str(value)``, so spellings a store merges look
distinct),
``recursive_identity`` (arguments parsed without the nesting bound and values spelled
recursively: deep arguments raise from F and P). Since issue 40 the rules of issue 25's other
controls (closed folds, whole-target folds of literal text, globs, ``identity=``) can no
longer give a false fill when undone: a component outside the proof set is its namespace,
whatever a fold makes of it.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import random
import unicodedata
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import anyio.lowlevel
import pydantic

from harness.loop.task import Task
from harness.messages import Message, ToolSpec
from harness.skills.manifest import Manifest
from harness.tools import Toolset, tool
from harness.tools.identity import normalise_path

__all__ = (
    "CLASSES",
    "IDENTITY_CONTROLS",
    "ArmRun",
    "IdentityCase",
    "IdentityTally",
    "differences",
    "generate",
    "run_arms",
    "run_identity_property",
)

Call = tuple[str, Mapping[str, Any]]
UTC = datetime.UTC


# -- running calls under every arm -------------------------------------------------------------


@dataclass
class ArmRun:
    results: list[tuple[str, str, str]]
    state: str
    windows: int
    error: str | None = None


def _transcript(messages: Sequence[Message]) -> list[tuple[str, str, str]]:
    calls: dict[str, tuple[str, str]] = {}
    out = []
    for m in messages:
        for c in m.get("tool_calls") or ():
            fn = c["function"]
            calls[c["id"]] = (fn["name"], fn["arguments"])
        if m.get("role") == "tool":
            name, arguments = calls[str(m["tool_call_id"])]
            out.append((name, arguments, str(m.get("content", ""))))
    return out


def _agent(calls: Sequence[Call], parallel: bool) -> Callable[..., Any]:
    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        done = sum(1 for m in messages if m.get("role") == "tool")
        if done >= len(calls):
            return "done"
        if parallel:
            return [{"name": n, "arguments": dict(a)} for n, a in calls[done:]]
        name, arguments = calls[done]
        return {"name": name, "arguments": dict(arguments)}

    return script


def _manifest(toolset: Toolset) -> Manifest:
    args = {
        f"{t}.{p}": "model" for t in toolset for p in toolset[t].parameters.get("properties", {})
    }
    phase = {"name": "gather", "kind": "fan_out", "tools": sorted(toolset), "args": args}
    return Manifest.from_dict({"skills": {"case": {"phases": [phase]}}}, source="identity")


def run_arms(
    make_toolset: Callable[[dict[str, Any]], Toolset],
    calls: Sequence[Call],
    *,
    state: Mapping[str, Any] | None = None,
) -> dict[str, ArmRun]:
    """Run ``calls`` (one per turn; all in one message under P, then ``done``) under S, F,
    F+eager and P, each on a fresh copy of ``state``, with the manifest's one fan-out phase
    over every tool (every argument the model's: only D1 decides)."""
    from harness.loop import FlattenSettings, LoopConfig, run_loop
    from harness.testing import ScriptedEngine

    async def one(arm: Any, eager: bool) -> ArmRun:
        store: dict[str, Any] = copy.deepcopy(dict(state or {}))
        toolset = make_toolset(store)
        config = LoopConfig(
            arm=arm, max_turns=100, flatten=FlattenSettings(eager=eager, max_discards=16)
        )
        config = replace(
            config, max_model_errors=10**6, max_identical_calls=10**6, max_tool_failures=10**6
        )
        task = Task(id="identity", prompt="solve", skill="case", inputs={})
        engine = ScriptedEngine(_agent(calls, arm == "P"))
        skill = _manifest(toolset).skill("case")
        try:
            result = await run_loop(engine, toolset, task, config, manifest=skill)
        except Exception as exc:  # an arm that raises is a finding
            return ArmRun([], _state(store), 0, f"{type(exc).__name__}: {exc}"[:300])
        windows = sum(1 for w in result.windows if w.n >= 2)
        return ArmRun(_transcript(result.messages), _state(store), windows)

    async def main() -> dict[str, ArmRun]:
        return {
            "S": await one("S", False),
            "F": await one("F", False),
            "F+eager": await one("F", True),
            "P": await one("P", False),
        }

    return anyio.run(main)


def _state(store: Mapping[str, Any]) -> str:
    return json.dumps(store, sort_keys=True, default=str)


def differences(runs: Mapping[str, ArmRun]) -> dict[str, str]:
    """Each arm whose results or final state differ from S's (or that raised), and how."""
    serial = runs["S"]
    out: dict[str, str] = {}
    for label, run in runs.items():
        if run.error is not None:
            out[label] = f"raised {run.error}"
        elif [r[2] for r in run.results] != [r[2] for r in serial.results]:
            out[label] = (
                f"results {[r[2] for r in run.results]} vs S {[r[2] for r in serial.results]}"
            )
        elif run.state != serial.state:
            out[label] = "final store differs from S"
    return out


# -- the classes ---------------------------------------------------------------------------------


async def _race() -> None:
    for _ in range(3):
        await anyio.lowlevel.checkpoint()


def _bump(store: dict[str, Any], record: str, n: int) -> Coroutine[Any, Any, int]:
    async def go() -> int:
        before = store.get(record, 0)
        await _race()
        store[record] = before + n
        return int(before)

    return go()


def _utc(when: datetime.datetime) -> str:
    return when.astimezone(UTC).isoformat()


def _instant(store: dict[str, Any]) -> Toolset:
    # An instant is no proof by itself (a store may drop the offset): the store's own key.
    @tool(write_targets="at:{when}", read_targets="at:{when}", identity={"when": _utc})
    async def add(when: datetime.datetime, n: int) -> int:
        return await _bump(store, _utc(when), n)

    return Toolset([add])


def _utc_time(at: datetime.time) -> str:
    moment = datetime.datetime.combine(datetime.date(2000, 1, 2), at)
    return moment.astimezone(UTC).time().isoformat()


def _time(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="alarm:{at}", read_targets="alarm:{at}", identity={"at": _utc_time})
    async def add(at: datetime.time, n: int) -> int:
        return await _bump(store, _utc_time(at), n)

    return Toolset([add])


def _path_value(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="file:{path}", read_targets="file:{path}")
    async def add(path: Path, n: int) -> int:
        return await _bump(store, normalise_path(path.as_posix()), n)

    return Toolset([add])


def _path_str(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="file:{path}", read_targets="file:{path}", canonical="path")
    async def add(path: str, n: int) -> int:
        return await _bump(store, normalise_path(path), n)

    return Toolset([add])


def _composite(store: dict[str, Any]) -> Toolset:
    folds = {"dir": "path", "name": "path", "path": "path"}

    @tool(write_targets="file:{dir}/{name}", read_targets="file:{dir}/{name}", canonical=folds)
    async def add_in(dir: str, name: str, n: int) -> int:
        return await _bump(store, normalise_path(f"{dir}/{name}"), n)

    @tool(write_targets="file:{path}", read_targets="file:{path}", canonical=folds)
    async def add(path: str, n: int) -> int:
        return await _bump(store, normalise_path(path), n)

    return Toolset([add_in, add])


def _store_case(text: str) -> str:
    """How the stores below fold case: NFKC_Casefold (with upper), repeated until it settles
    (written out here, not through :class:`Fold`, so a control that breaks folds does not
    break the stores)."""
    while True:
        folded = unicodedata.normalize(
            "NFKC", unicodedata.normalize("NFKD", text).upper().casefold()
        )
        folded = unicodedata.normalize("NFKC", folded)
        if folded == text:
            return text
        text = folded


_CASE = _store_case


def _literal(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="doc:{key}", read_targets="doc:{key}", canonical="case")
    async def add(key: str, n: int) -> int:
        return await _bump(store, _CASE(key), n)

    @tool(write_targets="doc:Readme", read_targets="doc:Readme", canonical="case")
    async def bump_readme(n: int) -> int:
        return await _bump(store, _CASE("Readme"), n)

    return Toolset([add, bump_readme])


_UNICODE_FOLD = _store_case


def _unicode(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="doc:{key}", read_targets="doc:{key}", canonical="case+nfkc")
    async def add(key: str, n: int) -> int:
        return await _bump(store, _UNICODE_FOLD(key), n)

    return Toolset([add])


class Key(pydantic.BaseModel):
    """A composite key: a namespace and a name, both case-folded by the store."""

    ns: str
    name: str


def _nested(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="rec:{key}", read_targets="rec:{key}", canonical="case")
    async def add(key: Key, n: int) -> int:
        return await _bump(store, f"{_CASE(key.ns)}/{_CASE(key.name)}", n)

    return Toolset([add])


def _store_key(text: str) -> str:
    return text.split("#")[0].casefold()


def _store_identity(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="doc:{key}", read_targets="doc:{key}", identity={"key": _store_key})
    async def add(key: str, n: int) -> int:
        return await _bump(store, _store_key(key), n)

    return Toolset([add])


def _glob(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="doc:{key}", read_targets="doc:{key}")
    async def add(key: str, n: int) -> int:
        return await _bump(store, key, n)

    @tool(write_targets="doc:*", read_targets="doc:*")
    async def total() -> int:
        seen = sum(store.values())
        await _race()
        for key in store:
            store[key] = 0
        return int(seen)

    return Toolset([add, total])


def _collection(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="todos", read_targets="todos")
    async def add_todo(text: str) -> str:
        minted = len(store)
        await _race()
        store[f"todos:{minted}"] = text
        return f"todos:{minted}"

    @tool(read_only=True, read_targets="todos")
    async def count_todos() -> int:
        return len(store)

    return Toolset([add_todo, count_todos])


def _deep(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="rec:{key}/{blob}", read_targets="rec:{key}/{blob}")
    async def put(key: str, blob: dict[str, Any]) -> int:
        return await _bump(store, key, 1)

    return Toolset([put])


def _long(store: dict[str, Any]) -> Toolset:
    @tool(write_targets="doc:{key}", read_targets="doc:{key}")
    async def add(key: str, n: int) -> int:
        return await _bump(store, key, n)

    return Toolset([add])


# -- spellings -----------------------------------------------------------------------------------


def _instant_spelling(rng: random.Random, record: int) -> str:
    base = datetime.datetime(2026, 1, 1, 8 + record, tzinfo=UTC)
    offset = datetime.timedelta(minutes=rng.choice([0, 60, 120, -300, 330, -570, 840]))
    moment = base.astimezone(datetime.timezone(offset))
    text = moment.isoformat()
    return text.replace("+00:00", "Z") if rng.random() < 0.5 else text


def _time_spelling(rng: random.Random, record: int) -> str:
    return _instant_spelling(rng, record).split("T")[1]


def _path_spelling(rng: random.Random, record: int) -> str:
    name = f"d{record}/f"
    forms = [name, f"./{name}", f"{name}/", f"d{record}//f", f"x/../{name}", f"d{record}/./f"]
    if rng.random() < 0.5:
        return "/" + rng.choice(forms).lstrip("./") if rng.random() < 0.5 else "//" + name
    return rng.choice(forms)


_I_FORMS = ["i", "I", "ı", "𝚤", "ｉ", "Ｉ"]
_GREEK = ["ΐ", "ΐ", "Ϊ́"]


def _unicode_spelling(rng: random.Random, record: int) -> str:
    forms = (_I_FORMS, _GREEK, ["ab", "AB", "ａｂ", "Ab"])[record]
    return rng.choice(forms)


def _case_spelling(rng: random.Random, record: int) -> str:
    word = ["readme", "notes", "todo"][record]
    return "".join(c.upper() if rng.random() < 0.5 else c for c in word)


def _nested_blob(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def _composite_call(rng: random.Random, r: int, n: int) -> Call:
    if rng.random() < 0.5:
        return ("add", {"path": _path_spelling(rng, r), "n": n})
    return ("add_in", {"dir": rng.choice([".", "x/..", "./"]), "name": f"d{r}/f", "n": n})


def _nested_call(rng: random.Random, r: int, n: int) -> Call:
    key = {"ns": _case_spelling(rng, r), "name": _case_spelling(rng, (r + 1) % 3)}
    return ("add", {"key": dict(reversed(key.items())) if rng.random() < 0.5 else key, "n": n})


def _long_call(rng: random.Random, r: int, n: int) -> Call:
    size = rng.choice([2_000, 8_000, 32_000])
    return ("add", {"key": ("k" * size)[: size - 1] + str(r), "n": n})


_CALLS: Mapping[str, Callable[[random.Random, int, int], Call]] = {
    "instant": lambda rng, r, n: ("add", {"when": _instant_spelling(rng, r), "n": n}),
    "time": lambda rng, r, n: ("add", {"at": _time_spelling(rng, r), "n": n}),
    "path_value": lambda rng, r, n: ("add", {"path": _path_spelling(rng, r), "n": n}),
    "path_str": lambda rng, r, n: ("add", {"path": _path_spelling(rng, r), "n": n}),
    "composite": _composite_call,
    "literal": lambda rng, r, n: (
        ("bump_readme", {"n": n})
        if rng.random() < 0.4
        else ("add", {"key": _case_spelling(rng, r), "n": n})
    ),
    "unicode": lambda rng, r, n: ("add", {"key": _unicode_spelling(rng, r), "n": n}),
    "nested": _nested_call,
    "store_identity": lambda rng, r, n: (
        "add",
        {"key": f"{_case_spelling(rng, r)}#{rng.randint(0, 9)}", "n": n},
    ),
    "glob": lambda rng, r, n: (
        ("total", {}) if rng.random() < 0.35 else ("add", {"key": f"k{r}", "n": n})
    ),
    "collection": lambda rng, r, n: (
        ("count_todos", {}) if rng.random() < 0.25 else ("add_todo", {"text": f"t{r}"})
    ),
    "deep": lambda rng, r, n: (
        "put",
        {"key": f"k{r}", "blob": _nested_blob(rng.randint(200, 900))},
    ),
    "long": _long_call,
}


def _calls(name: str, rng: random.Random) -> list[Call]:
    count = rng.randint(2, 4)
    records = rng.randint(1, 3)
    make = _CALLS[name]
    return [make(rng, rng.randrange(records), rng.choice([1, 2, 4, 8])) for _ in range(count)]


CLASSES: Mapping[str, Callable[[dict[str, Any]], Toolset]] = {
    "instant": _instant,
    "time": _time,
    "path_value": _path_value,
    "path_str": _path_str,
    "composite": _composite,
    "literal": _literal,
    "unicode": _unicode,
    "nested": _nested,
    "store_identity": _store_identity,
    "glob": _glob,
    "collection": _collection,
    "deep": _deep,
    "long": _long,
}


@dataclass(frozen=True)
class IdentityCase:
    seed: int
    name: str
    calls: tuple[Call, ...]


def generate(seed: int, classes: Sequence[str] | None = None) -> IdentityCase:
    """Case number ``seed`` (deterministic), of one of ``classes`` (default: all)."""
    rng = random.Random(seed)
    names = list(classes or CLASSES)
    name = names[seed % len(names)]
    return IdentityCase(seed, name, tuple(_calls(name, rng)))


# -- the property --------------------------------------------------------------------------------


@dataclass
class IdentityTally:
    cases: int = 0
    false_fills: int = 0
    exceptions: int = 0
    windows: int = 0
    by_class: dict[str, int] = field(default_factory=dict)
    false_by_class: dict[str, int] = field(default_factory=dict)
    first: str | None = None


def run_identity_property(
    cases: int,
    *,
    seed: int = 0,
    control: str | None = None,
    classes: Sequence[str] | None = None,
    stop_on_false_fill: bool = False,
    progress: Callable[[int], None] | None = None,
) -> IdentityTally:
    """Run ``cases`` generated cases (seeds ``seed`` … ``seed + cases - 1``)."""
    tally = IdentityTally()
    context = IDENTITY_CONTROLS[control]() if control else contextlib.nullcontext()
    with context:
        for i in range(cases):
            case = generate(seed + i, classes)
            runs = run_arms(CLASSES[case.name], case.calls)
            found = differences(runs)
            tally.cases += 1
            tally.windows += runs["F"].windows
            tally.by_class[case.name] = tally.by_class.get(case.name, 0) + 1
            if any(v.startswith("raised") for v in found.values()):
                tally.exceptions += 1
            if found:
                tally.false_fills += 1
                tally.false_by_class[case.name] = tally.false_by_class.get(case.name, 0) + 1
                if tally.first is None:
                    shown = [(n, {k: str(v)[:60] for k, v in a.items()}) for n, a in case.calls]
                    tally.first = f"case {case.seed} ({case.name}) {shown}: {found}"
                if stop_on_false_fill:
                    break
            if progress is not None:
                progress(i + 1)
    return tally


# -- controls: each undoes one fix of issue 25 ---------------------------------------------------


@contextlib.contextmanager
def _raw_components() -> Iterator[None]:
    """No proof: every component is its raw text (any characters, no merging of spellings),
    every value ``str(value)``, and no fold applied."""
    from harness.tools import effects

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(effects, "proof_key", lambda text: text or None))
        stack.enter_context(mock.patch.object(effects, "value_text", str))
        stack.enter_context(mock.patch.object(effects._Identities, "fold", return_value=None))
        stack.enter_context(mock.patch.object(effects._Identities, "all_folds", return_value=[str]))
        yield


@contextlib.contextmanager
def _recursive_identity() -> Iterator[None]:
    from harness import messages
    from harness.tools import Tool, effects

    def recursive(value: Any) -> str | None:
        if isinstance(value, Mapping):
            return "{" + ",".join(f"{k}={recursive(v)}" for k, v in sorted(value.items())) + "}"
        return str(value)

    def footprint(self: Tool, arguments: Any, **_: Any) -> effects.Footprint:
        # Without the guard that makes resolution total: an error escapes to the arm.
        values, effect = self.coerce(arguments), self.effect
        writes, _why = effect._side(effect._writes, values, "writes")
        reads, _why = effect._side(effect._reads, values, "reads")
        return effects.Footprint(writes, reads)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(effects, "value_text", recursive))
        stack.enter_context(mock.patch.object(Tool, "footprint", footprint))
        stack.enter_context(mock.patch.object(messages, "loads_bounded", json.loads))
        yield


IDENTITY_CONTROLS: Mapping[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "raw_components": _raw_components,
    "recursive_identity": _recursive_identity,
}
