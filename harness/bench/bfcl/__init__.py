"""BFCL's AST categories: loading, tool schemas, tasks, a scorer, and its agreement with BFCL.

The Berkeley Function Calling Leaderboard's single-turn Python categories, by BFCL's own
names (:mod:`~harness.bench.bfcl.categories`): ``simple``, ``multiple``, ``parallel``,
``parallel_multiple`` and their ``live_*`` counterparts. The data comes from the PyPI package
``bfcl-eval`` (``pip install --no-deps bfcl-eval``).

* :mod:`~harness.bench.bfcl.categories` — the names, the arm each runs under, the pairs that give
  the parallel-calling gap g;
* :mod:`~harness.bench.bfcl.data` — the files, JSON Schemas, entries, gold calls and tasks;
* :mod:`~harness.bench.bfcl.checker` — the scorer (BFCL's AST checker rules);
* :mod:`~harness.bench.bfcl.reference` — BFCL's own checker, imported from the package;
* :mod:`~harness.bench.bfcl.selection` — data quirks and the seeded per-category sample;
* :mod:`~harness.bench.bfcl.agreement` — the scorer against BFCL's checker on every entry's gold
  and on systematic wrong answers.

Command line: ``python -m harness.bench.bfcl agreement|quirks|categories`` (``--help``).
"""

from __future__ import annotations

from harness.bench.bfcl.categories import (
    CATEGORIES,
    PAIRS,
    PARALLEL_CATEGORIES,
    SINGLE_CALL_CATEGORIES,
    BFCLCategoryError,
    Category,
    arm_of,
    parse_categories,
)
from harness.bench.bfcl.checker import BFCLVerdict, check_calls, standardize_string, tool_name
from harness.bench.bfcl.data import (
    INSTALL_HINT,
    STUB_RESULT,
    BFCLDataError,
    BFCLEntry,
    data_files,
    load_entries,
    to_json_schema,
)
from harness.bench.bfcl.reference import ReferenceChecker, reference_checker
from harness.bench.bfcl.selection import (
    DEFAULT_PER_CATEGORY,
    Quirk,
    bench_counts,
    data_quirks,
    scorable_entries,
    select_entries,
)

__all__ = (
    "CATEGORIES",
    "DEFAULT_PER_CATEGORY",
    "INSTALL_HINT",
    "PAIRS",
    "PARALLEL_CATEGORIES",
    "SINGLE_CALL_CATEGORIES",
    "STUB_RESULT",
    "BFCLCategoryError",
    "BFCLDataError",
    "BFCLEntry",
    "BFCLVerdict",
    "Category",
    "Quirk",
    "ReferenceChecker",
    "arm_of",
    "bench_counts",
    "check_calls",
    "data_files",
    "data_quirks",
    "load_entries",
    "parse_categories",
    "reference_checker",
    "scorable_entries",
    "select_entries",
    "standardize_string",
    "to_json_schema",
    "tool_name",
)
