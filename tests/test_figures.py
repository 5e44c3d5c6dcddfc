"""Every figure docs/results.md quotes comes from a committed file under benchmarks/results/.

The convention: after a paragraph, table or list of figures, an HTML comment names the files
that back them, ``<!-- source: benchmarks/results/full/report.md ... -->``. The comment covers
the text since the previous comment or heading. Each number there must appear in one of the
files it names (thousands separators dropped; the file's value rounded to the decimals the
page shows; a share may be shown as a percentage; the sign is not compared, since the page
writes "F is slower by 3.17 s" for a dividend of −3.17), or be one of the few figures
computed from a file, listed in :data:`DERIVED` with the formula. A block of figures with no
comment fails, and so does a number no cited file holds.

Not figures, and so left out (:data:`NOT_FIGURES`): the settings a run was made with (K, n,
L, cores), names with digits in them (SmolLM2-135M, fan_out-06, R1, AVX-512), versions, dates,
the confidence level, inline code (commands) and fenced blocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS_MD = REPO / "docs" / "results.md"
SOURCE = re.compile(r"<!--\s*source:\s*(.+?)\s*-->")

#: What is not a figure: settings, names, versions, dates, the confidence level.
NOT_FIGURES = [
    r"`[^`]*`",  # inline code: commands, file names, keys
    r"\]\([^)]*\)",  # link targets
    r"<!--.*?-->",
    r"SmolLM2-135M(?:-Instruct)?",
    r"\b135M\b",
    r"\b[A-Za-z_]+-\d+\b",  # task ids
    r"\bR[1-4]\b",
    r"\bK = \d+",
    r"\bn\s?=\s?\d+(?:, \d+)*",
    r"\bn ≥ \d+",
    r"\bL = [\d.]+ s",
    r"\d+ (?:CPU )?cores",
    r"\d+-core\b",
    r"\d+-way\b",
    r"\d+(?:\.\d+){2}(?:\+cpu)?|vLLM \d+\.\d+",  # versions
    r"\d{4}-\d{2}-\d{2}",  # dates
    r"AVX-?512(?:-?BF16)?|AVX2|bf16|float32|float16",
    r"95 ?%",  # the confidence level
    r"the 15 % aimed at",  # a goal, not a measurement
    r"100·",
    r"ε̂_v|g_T\*|h_R",
]
_NOT_FIGURES = re.compile("|".join(f"(?:{p})" for p in NOT_FIGURES))
#: A number as the page writes it: optional sign, thousands separators, decimals, a unit after.
_NUMBER = re.compile(r"(?<![\w.])([−+-]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s?(?:%|pp))?(?![\w])")
#: A number as a file holds it (JSON, Markdown, a log).
_FILE_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _json(path: str) -> Any:
    return json.loads((REPO / path).read_text(encoding="utf-8"))


def _r1(run: str, k: str, field: str, arm: str | None = None) -> float:
    summary = _json(f"benchmarks/results/{run}/r1.json")["summary"][k]
    value = summary[field] if arm is None else summary[field][arm]
    return float(value["median"])


def _solved(run: str, kind: str, policy: str, detector: str) -> float:
    jobs = (REPO / f"benchmarks/results/{run}/results.jsonl").read_text().splitlines()
    return float(sum(
        1 for j in map(json.loads, jobs)
        if (j["kind"], j["policy"], j["detector"]) == (kind, policy, detector) and j["success"]
    ))  # fmt: skip


def _per_n(run: str, n: int) -> dict[str, Any]:
    rows = _json(f"benchmarks/results/{run}/summary.json")["per_n"]
    return dict(next(r for r in rows if r["n"] == n))


#: Figures the page computes from a committed file: (the figure as printed, the file it must
#: cite, the formula). A reviewer checks the formula; the test checks the arithmetic.
DERIVED: list[tuple[str, str, Callable[[], float]]] = [
    # F+eager / P at n = 6, K = 1, per machine (median walls of r1.json)
    ("1.13", "benchmarks/results/r1/r1.md",
     lambda: _r1("r1", "1", "wall", "F+eager") / _r1("r1", "1", "wall", "P")),
    ("1.24", "benchmarks/results/r1-fast/r1.md",
     lambda: _r1("r1-fast", "1", "wall", "F+eager") / _r1("r1-fast", "1", "wall", "P")),
    ("1.13", "benchmarks/results/r1-bf16/r1.md",
     lambda: _r1("r1-bf16", "1", "wall", "F+eager") / _r1("r1-bf16", "1", "wall", "P")),
    # the phase-heuristic control's mixed tasks under the oracle (report.md gives all 48 only)
    ("12", "benchmarks/results/oracle/report.md",
     lambda: _solved("oracle", "mixed", "oracle", "phase_heuristic")),
    # ... and in the full run at n = 6 (K = 8)
    ("1.09", "benchmarks/results/full/report.md",
     lambda: _per_n("full", 6)["measured"]["F+eager"] / _per_n("full", 6)["measured"]["P"]),
]  # fmt: skip


def _round(value: Decimal, places: int) -> set[Decimal]:
    step = Decimal(1).scaleb(-places)
    return {value.quantize(step, ROUND_HALF_UP), value.quantize(step, ROUND_HALF_EVEN)}


@cache
def _file_numbers(path: str) -> frozenset[Decimal]:
    text = (REPO / path).read_text(encoding="utf-8")
    out = set()
    for token in _FILE_NUMBER.findall(text):
        try:
            value = abs(Decimal(token.replace(",", "")))
        except ArithmeticError:
            continue
        if value.is_finite() and -12 < value.adjusted() < 12:  # not a hash read as 2E+74782
            out.add(value)
    return frozenset(out)


def figure_in(figure: str, unit: str, places: int, paths: list[str]) -> bool:
    """Whether ``figure`` (as printed, ``places`` decimals) is a value of one of ``paths``,
    rounded to those decimals (or, for a share shown as % or pp, 100 times a value)."""
    wanted = abs(Decimal(figure))
    for path in paths:
        for value in _file_numbers(path):
            if wanted in _round(value, places):
                return True
            if unit and wanted in _round(value * 100, places):
                return True
        for printed, cited, formula in DERIVED:
            if cited == path and printed == figure and wanted in _round(Decimal(formula()), places):
                return True
    return False


def figures(text: str) -> Iterator[tuple[str, str, int]]:
    """The figures of ``text``: (value, unit, decimals), settings and names left out."""
    for match in _NUMBER.finditer(_NOT_FIGURES.sub(" ", text)):
        _, whole, decimals, unit = match.groups()
        figure = whole.replace(",", "") + (decimals or "")
        yield figure, (unit or "").strip(), len(decimals) - 1 if decimals else 0


def blocks(markdown: str) -> Iterator[tuple[int, str, list[str] | None]]:
    """(first line, text, the sources its comment names or None) for every stretch of prose
    between a heading or a source comment and the next; fenced blocks are skipped."""
    text: list[str] = []
    start = 1
    fenced = False
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        source = SOURCE.search(line)
        if source or line.startswith("#"):
            yield start, "\n".join(text), source.group(1).split() if source else None
            text, start = [], number + 1
            continue
        text.append(line)
    yield start, "\n".join(text), None


def check(markdown: str) -> list[str]:
    """Every problem: a source that is not a committed file under benchmarks/results/, a block
    of figures with no source, a figure its sources do not hold."""
    problems = []
    for line, text, sources in blocks(markdown):
        found = list(figures(text))
        if sources is None:
            if found:
                shown = ", ".join(f for f, _, _ in found[:6])
                problems.append(f"line {line}: figures with no source comment: {shown}")
            continue
        problems.extend(
            f"line {line}: source {path} is not a committed results file"
            for path in sources
            if not path.startswith("benchmarks/results/") or not (REPO / path).is_file()
        )
        paths = [p for p in sources if (REPO / p).is_file()]
        for figure, unit, places in found:
            if not figure_in(figure, unit, places, paths):
                problems.append(f"line {line}: {figure}{unit} is in none of {', '.join(sources)}")
    return problems


def test_every_figure_of_the_results_page_is_in_the_committed_file_it_cites() -> None:
    assert check(RESULTS_MD.read_text(encoding="utf-8")) == []


def test_the_page_cites_the_committed_runs() -> None:
    cited = {p for _, _, s in blocks(RESULTS_MD.read_text(encoding="utf-8")) for p in s or ()}
    for run in ("full", "oracle", "r1", "r1-fast", "r1-bf16", "feasible", "lookup"):
        assert any(p.startswith(f"benchmarks/results/{run}/") for p in cited), run


def _changed(figure: str) -> str:
    """``figure`` with its last digit moved by 3 (7.95 -> 7.98, 41.1 -> 41.4)."""
    return figure[:-1] + str((int(figure[-1]) + 3) % 10)


def test_a_changed_figure_fails_the_check() -> None:
    page = RESULTS_MD.read_text(encoding="utf-8")
    # A few figures each of which only its own run's file holds.
    for figure in ("1,997 s", "41.1 s", "−0.37", "1.24×", "[0.56, 0.75]", "1,809 s",
                   "1,134 s", "42.9pp", "ε̂_v = 0.073", "n* ≈ 4,985"):  # fmt: skip
        assert figure in page, figure
        number = re.search(r"\d[\d,.]*\d", figure)
        assert number is not None
        wrong = figure.replace(number.group(), _changed(number.group()), 1)
        problems = check(page.replace(figure, wrong, 1))
        assert problems, f"changing {figure!r} to {wrong!r} went unnoticed"


def test_a_block_of_figures_without_a_source_fails_and_a_foreign_source_too() -> None:
    assert check("Prose with 12.34 s and no source.\n") != []
    assert check("A setting only: K = 8 on 2 cores.\n") == []
    assert check("It took 1,997 s.\n<!-- source: README.md -->\n") != []


@pytest.mark.parametrize(("printed", "value"), [("1,997", "1996.7"), ("43.8", "43.75")])
def test_rounding_and_separators_are_normalised(printed: str, value: str, tmp_path: Path) -> None:
    assert Decimal(printed.replace(",", "")) in _round(
        Decimal(value), len(printed.split(".")[1]) if "." in printed else 0
    )
