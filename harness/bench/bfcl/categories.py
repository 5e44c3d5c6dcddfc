"""BFCL's AST categories by BFCL's own names, which arm runs each, and the pairs that give g.

The Berkeley Function Calling Leaderboard scores single-turn entries with its AST checker in
eight Python categories. Four ask for one call (``simple``, ``multiple`` — one call chosen
from several documented functions — and their ``live_*`` counterparts, user-contributed
prompts) and four for several calls in one answer (``parallel``, ``parallel_multiple`` and
their ``live_*`` counterparts). The single-call categories run under the serial arm S, the
parallel ones under P, and each single-call category is paired with its parallel counterpart
to measure the parallel-calling gap *g* (single-call accuracy under S minus parallel accuracy
under P, at temperature 0): see :data:`PAIRS`.

``simple`` is BFCL's ``simple_python`` (its name before BFCL v4; both spellings are
accepted). BFCL's ``simple_java`` and ``simple_javascript`` are AST categories too, but they
are not run here: their checker takes every argument as a string of Java or JavaScript source
(``"0.5f"``, ``"new ArrayList<>(...)"``) and parses it with its own converters, so a tool
loop with JSON arguments would be scored on that source-writing convention rather than on
calling; and they have no parallel counterpart, so they could not anchor a gap. Asking for
any name outside :data:`CATEGORIES` is an error that lists the valid names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal, get_args

from harness.errors import ConfigError

__all__ = (
    "ALIASES",
    "CATEGORIES",
    "NOT_RUN",
    "PAIRS",
    "PARALLEL_CATEGORIES",
    "SINGLE_CALL_CATEGORIES",
    "BFCLCategoryError",
    "Category",
    "arm_of",
    "bfcl_name",
    "checker_kind",
    "parse_categories",
    "parse_category",
)

Category = Literal[
    "simple",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
]
#: Every AST category this benchmark runs, in BFCL's order.
CATEGORIES: Final[tuple[Category, ...]] = get_args(Category)
SINGLE_CALL_CATEGORIES: Final[tuple[Category, ...]] = (
    "simple",
    "multiple",
    "live_simple",
    "live_multiple",
)
PARALLEL_CATEGORIES: Final[tuple[Category, ...]] = (
    "parallel",
    "parallel_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
#: (single-call category under S, its parallel counterpart under P): one gap g per pair.
PAIRS: Final[tuple[tuple[Category, Category], ...]] = tuple(
    zip(SINGLE_CALL_CATEGORIES, PARALLEL_CATEGORIES, strict=True)
)
#: Other spellings of a category (BFCL v4 file and category names).
ALIASES: Final[dict[str, Category]] = {"simple_python": "simple"}

_JAVA_JS = (
    "its checker takes every argument as Java/JavaScript source text and parses it with "
    "BFCL's converters, so a JSON tool loop would be scored on a source-writing convention; "
    "and it has no parallel counterpart to pair with for g"
)
_NOT_AST = "is not scored by BFCL's AST checker"
#: BFCL category names that exist but are not run here, with the reason.
NOT_RUN: Final[dict[str, str]] = {
    "simple_java": _JAVA_JS,
    "simple_javascript": _JAVA_JS,
    "irrelevance": f"{_NOT_AST} (it checks that the model makes no call)",
    "live_irrelevance": f"{_NOT_AST} (it checks that the model makes no call)",
    "live_relevance": f"{_NOT_AST} (it checks that the model makes some call)",
    "multi_turn_base": f"{_NOT_AST} (multi-turn: BFCL executes the calls and checks state)",
    "multi_turn_miss_func": f"{_NOT_AST} (multi-turn: BFCL executes the calls and checks state)",
    "multi_turn_miss_param": f"{_NOT_AST} (multi-turn: BFCL executes the calls and checks state)",
    "multi_turn_long_context": f"{_NOT_AST} (multi-turn: BFCL executes the calls and checks state)",
}


class BFCLCategoryError(ConfigError):
    """A BFCL category name that is not one of :data:`CATEGORIES`."""


def _valid_names() -> str:
    return ", ".join(CATEGORIES)


def parse_category(name: str) -> Category:
    """``name`` as a category (an alias resolved), or :class:`BFCLCategoryError`."""
    text = name.strip()
    if text in CATEGORIES:
        return text
    if text in ALIASES:
        return ALIASES[text]
    if text in NOT_RUN:
        raise BFCLCategoryError(
            f"BFCL category {text!r} is not run here: {NOT_RUN[text]}. Run one of: "
            f"{_valid_names()}."
        )
    raise BFCLCategoryError(
        f"Unknown BFCL category {name!r}; the {len(CATEGORIES)} AST categories are: "
        f"{_valid_names()} ('simple_python' is accepted for 'simple')."
    )


def parse_categories(names: Iterable[str]) -> tuple[Category, ...]:
    """Category names (aliases resolved, repeats dropped) in :data:`CATEGORIES` order; an
    unknown name or an empty list is a :class:`BFCLCategoryError`."""
    chosen = {parse_category(n) for n in names}
    if not chosen:
        raise BFCLCategoryError(f"No BFCL category given; choose from: {_valid_names()}.")
    return tuple(c for c in CATEGORIES if c in chosen)


def bfcl_name(category: str) -> str:
    """BFCL v4's test-category name (what its checker dispatches on)."""
    checked = parse_category(category)
    return "simple_python" if checked == "simple" else checked


def checker_kind(category: str) -> Literal["simple", "multiple", "parallel"]:
    """Which of BFCL's checkers scores the category, by BFCL's own rule (``ast_checker``):
    a name containing "parallel" is matched call by call in any order, one containing
    "multiple" is one call checked against the function its answer names, the rest is one
    call checked against the only function. Unknown names raise."""
    checked = parse_category(category)
    if "parallel" in checked:
        return "parallel"
    if "multiple" in checked:
        return "multiple"
    return "simple"


def arm_of(category: str) -> Literal["S", "P"]:
    """The arm whose accuracy on the category enters g: S for single-call, P for parallel."""
    return "P" if checker_kind(category) == "parallel" else "S"
