"""What is scored: the data quirks set aside, and a seeded sample of the rest per category.

A **data quirk** is an entry whose own gold answer (:meth:`BFCLEntry.gold_calls`, built from
its possible answers) fails BFCL's own AST checker (:mod:`harness.bench.bfcl.reference`), this
harness's scorer, or the JSON Schema of the tool it calls (BFCL's documented types and enums
disagree with its answer, so a model held to the schema cannot give it). A quirk says nothing
about a model: it is listed per category by id (:func:`data_quirks`, ``python -m
harness.bench.bfcl quirks``) and left out of model scoring.

**Selection** (:func:`select_entries`) draws, per category, ``count`` of the category's
scorable entries with ``random.Random(f"bfcl:{seed}:{category}")`` and keeps them in file
order: the same seed gives the same entries, and a category's draw does not depend on which
other categories are drawn. (``simple`` and ``parallel`` have no quirks, so their draws are the
ones this benchmark made before it covered every category.)
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from harness.bench.bfcl.categories import (
    CATEGORIES,
    PARALLEL_CATEGORIES,
    Category,
    parse_categories,
    parse_category,
)
from harness.bench.bfcl.data import PACKAGE, BFCLDataError, BFCLEntry, load_entries
from harness.bench.bfcl.reference import ReferenceChecker, reference_checker

__all__ = (
    "DEFAULT_PER_CATEGORY",
    "Quirk",
    "bench_counts",
    "data_quirks",
    "find_quirk",
    "scorable_entries",
    "select_entries",
)

#: Entries per category the bench draws (a smaller category is taken whole).
DEFAULT_PER_CATEGORY: Final = 32


@dataclass(frozen=True)
class Quirk:
    """An entry left out of model scoring, and why."""

    id: str
    category: Category
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "category": self.category, "reasons": list(self.reasons)}


def _first(errors: Iterable[Any]) -> str:
    text = next((e for e in errors if isinstance(e, str)), "")
    return f": {text}" if text else ""


def find_quirk(entry: BFCLEntry, reference: ReferenceChecker) -> Quirk | None:
    """The entry as a :class:`Quirk` if its gold fails BFCL's checker, the scorer or the tool
    schema; ``None`` when it is scorable."""
    reasons = []
    gold = entry.gold_output()
    theirs = reference(entry.category, entry.functions, gold, entry.ground_truth)
    if not theirs["valid"]:
        reasons.append(
            f"BFCL's checker rejects the gold ({theirs.get('error_type')})"
            f"{_first(theirs.get('error', []))}"
        )
    ours = entry.score(gold)
    if not ours.valid:
        reasons.append(f"the scorer rejects the gold ({ours.error_type}){_first(ours.errors)}")
    for call in entry.gold_calls():
        errors = entry.schema_errors(call)
        if errors:
            reasons.append(f"the schema of {call.name} rejects the gold: {'; '.join(errors[:3])}")
    return Quirk(entry.id, entry.category, tuple(reasons)) if reasons else None


def data_quirks(category: str, *, package: str = PACKAGE) -> tuple[Quirk, ...]:
    """Every data quirk of one category, in file order."""
    return _quirks(parse_category(category), package)


@functools.cache
def _quirks(category: Category, package: str) -> tuple[Quirk, ...]:
    reference = reference_checker(package)
    found = (find_quirk(e, reference) for e in load_entries(category, package=package))
    return tuple(q for q in found if q is not None)


def scorable_entries(category: str, *, package: str = PACKAGE) -> list[BFCLEntry]:
    """A category's entries without its data quirks, in file order."""
    quirks = {q.id for q in data_quirks(category, package=package)}
    return [e for e in load_entries(category, package=package) if e.id not in quirks]


def bench_counts(
    categories: Iterable[str] = CATEGORIES,
    *,
    single: int = DEFAULT_PER_CATEGORY,
    parallel: int = DEFAULT_PER_CATEGORY,
    package: str = PACKAGE,
) -> dict[str, int]:
    """Entries to draw per category: ``single`` for each single-call category, ``parallel``
    for each parallel one, a category with fewer scorable entries taken whole."""
    if single < 0 or parallel < 0:
        raise BFCLDataError(
            f"BFCL entries per category must be 0 or more; got {single} and {parallel}."
        )
    counts: dict[str, int] = {}
    for category in parse_categories(categories):
        wanted = parallel if category in PARALLEL_CATEGORIES else single
        if wanted:
            counts[category] = min(wanted, len(scorable_entries(category, package=package)))
    return counts


def select_entries(
    seed: int = 0, counts: Mapping[str, int] | None = None, *, package: str = PACKAGE
) -> list[BFCLEntry]:
    """A seeded selection (see the module docstring): ``counts[category]`` scorable entries
    of each category, categories in BFCL's order. Default: :func:`bench_counts`."""
    wanted = bench_counts(package=package) if counts is None else counts
    by_category = {parse_category(name): count for name, count in wanted.items()}
    chosen: list[BFCLEntry] = []
    for category in CATEGORIES:
        if category not in by_category:
            continue
        count = by_category[category]
        entries = scorable_entries(category, package=package)
        if not 0 <= count <= len(entries):
            quirks = len(data_quirks(category, package=package))
            raise BFCLDataError(
                f"Asked for {count} BFCL {category} entries; the installed data has "
                f"{len(entries)} scorable ({len(entries) + quirks} entries, {quirks} data "
                f"quirks). Ask for 0..{len(entries)}."
            )
        rng = random.Random(f"bfcl:{seed}:{category}")
        picked = sorted(rng.sample(range(len(entries)), count))
        chosen += [entries[i] for i in picked]
    return chosen
