"""The scorer against BFCL's own AST checker: every entry's gold and systematic wrong answers.

For every entry of every category, :func:`cases` builds its gold output (the entry's own
answer, :meth:`~harness.bench.bfcl.data.BFCLEntry.gold_output`) and variations of it, and
:func:`measure_agreement` scores each with both checkers: the scorer
(:mod:`harness.bench.bfcl.checker`, fed the calls as the harness's tool calls with JSON
arguments, the path the bench uses) and BFCL's ``ast_checker``
(:mod:`harness.bench.bfcl.reference`, fed BFCL's decoded form). A case *agrees* when both give
the same verdict. The kinds of case (:data:`KINDS`), each applied to every call of the answer
in turn where it applies:

* ``gold`` — the entry's own answer;
* ``allowed alternative`` — one parameter set to another value its possible answer allows
  (``""``: left out);
* ``respelled strings`` — every string argument upper-cased with a trailing space (BFCL's
  normalisation forgives it, except for a "variable" answer);
* ``int for float`` — an integral float argument sent as an int;
* ``wrong function`` — the call's name changed to one no function has;
* ``other documented function`` — the call's name changed to another function of the entry's
  docs (categories with several functions);
* ``wrong value`` — one argument changed to a value its possible answer does not allow;
* ``wrong type`` — one argument sent as another JSON type (a number as a string, a string as
  a number, a list's items as strings, a dict as its JSON text);
* ``missing required`` — one required argument dropped;
* ``extra parameter`` — an argument no function documents added;
* ``dropped call`` — one call left out;
* ``reordered calls`` — every rotation of the calls, and their reversal (several calls);
* ``extra call`` — the first call repeated at the end.

``python -m harness.bench.bfcl agreement`` runs the sweep over every category and prints the
tallies (``--json`` for the figures as JSON); it exits 1 when any case disagrees.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.bench.bfcl.categories import CATEGORIES, Category, parse_categories
from harness.bench.bfcl.checker import tool_name
from harness.bench.bfcl.data import PACKAGE, BFCLEntry, load_entries
from harness.bench.bfcl.reference import ReferenceChecker, reference_checker
from harness.bench.bfcl.selection import Quirk, data_quirks
from harness.messages import ToolCall

__all__ = ("KINDS", "AgreementReport", "Disagreement", "Tally", "cases", "measure_agreement")

Output = list[dict[str, dict[str, Any]]]

KINDS: Final = (
    "gold",
    "allowed alternative",
    "respelled strings",
    "int for float",
    "wrong function",
    "other documented function",
    "wrong value",
    "wrong type",
    "missing required",
    "extra parameter",
    "dropped call",
    "reordered calls",
    "extra call",
)


# ------------------------------------------------------------------------------ the cases


def _call(output: Output, index: int) -> tuple[str, dict[str, Any]]:
    name, params = next(iter(output[index].items()))
    return name, params


def _replace(output: Output, index: int, name: str, params: Mapping[str, Any]) -> Output:
    changed = copy.deepcopy(output)
    changed[index] = {name: copy.deepcopy(dict(params))}
    return changed


def _possible(entry: BFCLEntry, index: int) -> Mapping[str, Sequence[Any]]:
    possible: Mapping[str, Sequence[Any]] = next(iter(entry.ground_truth[index].values()))
    return possible


def _function_params(entry: BFCLEntry, name: str) -> Mapping[str, Any]:
    function = next((f for f in entry.functions if tool_name(str(f["name"])) == name), None)
    return {} if function is None else dict(function.get("parameters", {}))


def _wrong_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return 987654321
    if isinstance(value, float):
        return 987654.321
    if isinstance(value, str):
        return "zq wrong value"
    if isinstance(value, list):
        return [*value, *(value[:1] or ["zq"])]
    if isinstance(value, dict):
        return {**value, "zq_key": 1}
    return "zq wrong value"


def _wrong_type(value: Any) -> Any:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return [json.dumps(v) for v in value] if value else "[]"
    return json.dumps(value)


def _respelled(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.upper() + " " if isinstance(v, str) else v for k, v in params.items()}


def _per_call(entry: BFCLEntry, gold: Output, index: int) -> Iterator[tuple[str, Output]]:
    name, params = _call(gold, index)
    possible = _possible(entry, index)
    for param, options in possible.items():
        for option in options:
            if isinstance(option, dict) or (
                isinstance(option, list) and any(isinstance(o, dict) for o in option)
            ):
                continue  # dict options are possible answers key by key, not literal values
            variant = {k: v for k, v in params.items() if k != param}
            if option != "":
                variant[param] = option
            if variant != params:
                yield "allowed alternative", _replace(gold, index, name, variant)
    if any(isinstance(v, str) for v in params.values()):
        yield "respelled strings", _replace(gold, index, name, _respelled(params))
    integral = {k: int(v) for k, v in params.items() if isinstance(v, float) and v.is_integer()}
    if integral:
        yield "int for float", _replace(gold, index, name, {**params, **integral})
    yield "wrong function", _replace(gold, index, f"{name}_zq", params)
    others = [tool_name(str(f["name"])) for f in entry.functions]
    other = next((n for n in others if n != name), None)
    if other is not None:
        yield "other documented function", _replace(gold, index, other, params)
    for param, value in params.items():
        wrong = _wrong_value(value)
        if wrong not in possible.get(param, ()):
            yield "wrong value", _replace(gold, index, name, {**params, param: wrong})
    for param, value in params.items():
        yield "wrong type", _replace(gold, index, name, {**params, param: _wrong_type(value)})
    for param in _function_params(entry, name).get("required", []):
        if param in params:
            dropped = {k: v for k, v in params.items() if k != param}
            yield "missing required", _replace(gold, index, name, dropped)
    yield "extra parameter", _replace(gold, index, name, {**params, "zq_unexpected": 1})
    yield "dropped call", [c for i, c in enumerate(gold) if i != index]


def cases(entry: BFCLEntry) -> Iterator[tuple[str, Output]]:
    """The entry's gold output and its variations, as ``(kind, output)`` (module docstring)."""
    gold = entry.gold_output()
    yield "gold", gold
    for index in range(len(gold)):
        yield from _per_call(entry, gold, index)
    for shift in range(1, len(gold)):
        yield "reordered calls", gold[shift:] + gold[:shift]
    if len(gold) > 2:
        yield "reordered calls", list(reversed(gold))
    yield "extra call", [*gold, copy.deepcopy(gold[0])]


# ------------------------------------------------------------------------------ the sweep


@dataclass
class Tally:
    """Cases scored by both checkers: how many agreed, how many BFCL accepted, and, among the
    cases both rejected, how many gave the same error type."""

    cases: int = 0
    agreed: int = 0
    accepted: int = 0
    both_rejected: int = 0
    same_error_type: int = 0
    bfcl_raised: int = 0

    def add(self, other: Tally) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_json(self) -> dict[str, Any]:
        return {
            **{name: getattr(self, name) for name in self.__dataclass_fields__},
            "agreement": self.agreed / self.cases if self.cases else None,
        }


@dataclass(frozen=True)
class Disagreement:
    """One case the two checkers scored differently."""

    category: Category
    entry_id: str
    kind: str
    output: Output
    ours: tuple[bool, str | None]
    bfcl: tuple[bool, str | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "id": self.entry_id,
            "kind": self.kind,
            "output": self.output,
            "ours": {"valid": self.ours[0], "error_type": self.ours[1]},
            "bfcl": {"valid": self.bfcl[0], "error_type": self.bfcl[1]},
        }


@dataclass(frozen=True)
class AgreementReport:
    """Tallies per (category, kind), the disagreements, and each category's data quirks."""

    entries: dict[Category, int]
    quirks: dict[Category, tuple[Quirk, ...]]
    tallies: dict[tuple[Category, str], Tally]
    disagreements: tuple[Disagreement, ...]
    bfcl_version: str = ""
    checker: str = ""
    sampled: dict[str, Any] = field(default_factory=dict)

    def total(self) -> Tally:
        out = Tally()
        for tally in self.tallies.values():
            out.add(tally)
        return out

    def by_category(self) -> dict[Category, Tally]:
        out: dict[Category, Tally] = defaultdict(Tally)
        for (category, _), tally in self.tallies.items():
            out[category].add(tally)
        return dict(out)

    def by_kind(self) -> dict[str, Tally]:
        out: dict[str, Tally] = defaultdict(Tally)
        for (_, kind), tally in self.tallies.items():
            out[kind].add(tally)
        return {k: out[k] for k in KINDS if k in out}

    def to_json(self) -> dict[str, Any]:
        return {
            "bfcl_eval": self.bfcl_version,
            "checker": self.checker,
            "sampled": self.sampled or None,
            "total": self.total().to_json(),
            "categories": {
                category: {
                    "entries": self.entries[category],
                    "quirks": [q.to_json() for q in self.quirks[category]],
                    **tally.to_json(),
                    "kinds": {
                        kind: self.tallies[(category, kind)].to_json()
                        for kind in KINDS
                        if (category, kind) in self.tallies
                    },
                }
                for category, tally in self.by_category().items()
            },
            "kinds": {kind: tally.to_json() for kind, tally in self.by_kind().items()},
            "disagreements": [d.to_json() for d in self.disagreements],
        }

    def render(self, show: int = 10) -> str:
        """The tallies as text tables, then up to ``show`` disagreements."""
        total = self.total()
        lines = [
            f"Scorer vs BFCL's own AST checker (bfcl-eval {self.bfcl_version or '?'}): "
            f"{total.agreed}/{total.cases} cases agree"
            + (f" ({100 * total.agreed / total.cases:.2f}%)" if total.cases else "")
            + (f"; a sample: {self.sampled}" if self.sampled else ""),
            "",
            f"{'category':<24}{'entries':>8}{'quirks':>8}{'cases':>8}{'agreed':>8}"
            f"{'BFCL ok':>9}{'same error type':>17}",
        ]
        for category, tally in self.by_category().items():
            lines.append(
                f"{category:<24}{self.entries[category]:>8}{len(self.quirks[category]):>8}"
                f"{tally.cases:>8}{tally.agreed:>8}{tally.accepted:>9}"
                f"{_ratio(tally.same_error_type, tally.both_rejected):>17}"
            )
        lines += ["", f"{'kind of case':<28}{'cases':>8}{'agreed':>8}{'BFCL ok':>9}"]
        for kind, tally in self.by_kind().items():
            lines.append(f"{kind:<28}{tally.cases:>8}{tally.agreed:>8}{tally.accepted:>9}")
        quirks = sum(len(q) for q in self.quirks.values())
        lines += ["", f"data quirks (gold fails BFCL's checker or the tool schema): {quirks}"]
        for category, found in self.quirks.items():
            if found:
                lines.append(f"  {category}: {', '.join(q.id for q in found)}")
        if self.disagreements:
            lines += ["", f"{len(self.disagreements)} disagreement(s); the first {show}:"]
            for d in self.disagreements[:show]:
                lines.append(
                    f"  {d.category} {d.entry_id} [{d.kind}]: ours {d.ours}, BFCL {d.bfcl}: "
                    f"{json.dumps(d.output)[:200]}"
                )
        if total.bfcl_raised:
            lines.append(f"BFCL's checker raised on {total.bfcl_raised} case(s) (scored invalid).")
        return "\n".join(lines)


def _ratio(a: int, b: int) -> str:
    return f"{a}/{b}" if b else "–"


def _as_calls(output: Output) -> list[ToolCall]:
    return [
        ToolCall(f"c{i}", name, json.dumps(params))
        for i, call in enumerate(output)
        for name, params in call.items()
    ]


def _score(
    entry: BFCLEntry, kind: str, output: Output, reference: ReferenceChecker
) -> tuple[Tally, Disagreement | None]:
    ours = entry.score(_as_calls(output))
    decoded = json.loads(json.dumps(output))  # what BFCL decodes from the same JSON
    theirs = reference(entry.category, entry.functions, decoded, entry.ground_truth)
    tally = Tally(cases=1, accepted=int(bool(theirs["valid"])))
    tally.bfcl_raised = int(str(theirs.get("error_type", "")).startswith("reference:raised"))
    if ours.valid == bool(theirs["valid"]):
        tally.agreed = 1
        if not ours.valid:
            tally.both_rejected = 1
            tally.same_error_type = int(ours.error_type == theirs.get("error_type"))
        return tally, None
    return tally, Disagreement(
        entry.category,
        entry.id,
        kind,
        output,
        (ours.valid, ours.error_type),
        (bool(theirs["valid"]), theirs.get("error_type")),
    )


def measure_agreement(
    categories: Iterable[str] = CATEGORIES,
    *,
    per_category: int | None = None,
    seed: int = 0,
    package: str = PACKAGE,
) -> AgreementReport:
    """Score every case of every entry (or of a seeded sample of ``per_category`` entries
    per category) with both checkers."""
    reference = reference_checker(package)
    chosen = parse_categories(categories)
    tallies: dict[tuple[Category, str], Tally] = defaultdict(Tally)
    disagreements: list[Disagreement] = []
    entries: dict[Category, int] = {}
    quirks: dict[Category, tuple[Quirk, ...]] = {}
    for category in chosen:
        pool = load_entries(category, package=package)
        if per_category is not None and per_category < len(pool):
            rng = random.Random(f"bfcl-agreement:{seed}:{category}")
            pool = [pool[i] for i in sorted(rng.sample(range(len(pool)), per_category))]
        entries[category] = len(pool)
        ids = {e.id for e in pool}
        quirks[category] = tuple(q for q in data_quirks(category, package=package) if q.id in ids)
        for entry in pool:
            for kind, output in cases(entry):
                tally, disagreement = _score(entry, kind, output, reference)
                tallies[(category, kind)].add(tally)
                if disagreement is not None:
                    disagreements.append(disagreement)
    try:
        version = importlib.metadata.version("bfcl-eval")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    return AgreementReport(
        entries=entries,
        quirks=quirks,
        tallies=dict(tallies),
        disagreements=tuple(disagreements),
        bfcl_version=version,
        checker=reference.source,
        sampled={"per_category": per_category, "seed": seed} if per_category is not None else {},
    )
