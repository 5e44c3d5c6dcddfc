"""Distinct only by proof (issue 40): the certifier against models of real stores.

Each store model keys its records the way a real store does (a POSIX join, raw object keys,
NFKC_Casefold, a joined composite, numeric values) and is declared honestly; the generators
spell one record many hostile ways. Every pair the certifier lets run together must touch
different records in the model. The benchmark runs 100,000 pairs per store
(``python -m benchmarks.reference_stores``); each control undoes one rule and the same
generators find false fills, so the check can fail.
"""

from __future__ import annotations

import pytest

from benchmarks.reference_stores import CONTROLS, STORES, run_store


@pytest.mark.parametrize("store", sorted(STORES))
def test_no_pair_the_certifier_runs_together_touches_one_record(store: str) -> None:
    tally = run_store(store, 3_000, seed=40)
    assert tally.pairs == 3_000
    assert tally.false_fills == 0, tally.first
    assert tally.together > 0  # not vacuous: distinct records still run together


@pytest.mark.parametrize(
    ("control", "store"),
    [
        ("raw_components", "folding"),
        ("raw_components", "numeric"),
        ("per_element_identity", "composite"),
        ("join_absolute", "posix"),
    ],
)
def test_each_control_finds_false_fills(control: str, store: str) -> None:
    assert control in CONTROLS
    tally = run_store(store, 20_000 if store == "composite" else 3_000, seed=40, control=control)
    assert tally.false_fills >= 1, f"{control} on {store}: nothing in {tally.pairs} pairs"


def test_no_fold_makes_two_proof_keys_one_record_exhaustively() -> None:
    # Every text of up to four characters over digits, signs, separators and the letters
    # number readers read (e, x, b, o): within each record a fold makes of several texts,
    # every provable text has the same proof key. (The 2026-12-06 rule failed this at once:
    # '7_0' and '7-0' are one PEP 440 record, keyed 70 and 7.0.)
    import itertools

    from benchmarks.reference_stores import FOLDS
    from harness.tools.identity import proof_key

    alphabet = "0107e.x_-+bE"
    texts = ["".join(t) for n in range(1, 5) for t in itertools.product(alphabet, repeat=n)]
    texts += ["9007199254740993", "9007199254740992", "0x20000000000000", "Infinity", "nan"]
    keys = {t: proof_key(t) for t in texts}
    assert sum(k is not None for k in keys.values()) > 1_000  # (not vacuous)
    for name, fold in FOLDS.items():
        records: dict[object, set[str]] = {}
        for text in texts:
            key = keys[text]
            record = fold(text)
            if key is not None and record is not None:
                records.setdefault(record, set()).add(key)
        merged = {r: k for r, k in records.items() if len(k) > 1}
        assert not merged, f"{name}: {list(merged.items())[:3]}"
