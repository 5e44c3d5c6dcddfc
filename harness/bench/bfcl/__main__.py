"""``python -m harness.bench.bfcl``: the scorer's agreement with BFCL's checker, the data quirks,
the categories.

    python -m harness.bench.bfcl agreement [--categories NAME ...] [--json] [--sample N]
    python -m harness.bench.bfcl quirks [--categories NAME ...] [--json]
    python -m harness.bench.bfcl categories [--json]

``agreement`` exits 1 when any case disagrees; a usage mistake (an unknown category, a
missing bfcl-eval) is a message and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from harness.bench.bfcl.agreement import measure_agreement
from harness.bench.bfcl.categories import CATEGORIES, PAIRS, arm_of, parse_categories
from harness.bench.bfcl.data import load_entries
from harness.bench.bfcl.selection import DEFAULT_PER_CATEGORY, data_quirks
from harness.errors import ConfigError

__all__ = ("main",)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.bench.bfcl",
        description="BFCL's AST categories: the scorer against BFCL's own checker, data quirks.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    agreement = sub.add_parser(
        "agreement",
        help="score every entry's gold and systematic wrong answers with the scorer and with "
        "BFCL's checker; exit 1 on any disagreement",
    )
    agreement.add_argument(
        "--sample",
        type=int,
        default=None,
        metavar="N",
        help="a seeded sample of N entries per category (default: every entry)",
    )
    agreement.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    agreement.add_argument(
        "--show", type=int, default=10, metavar="N", help="disagreements to print (default 10)"
    )
    quirks = sub.add_parser("quirks", help="entries whose gold fails BFCL's checker or schema")
    categories = sub.add_parser("categories", help="the categories, sizes, arms and pairs")
    for command in (agreement, quirks, categories):
        command.add_argument("--json", action="store_true", help="print JSON")
    for command in (agreement, quirks):
        command.add_argument(
            "--categories",
            nargs="+",
            default=list(CATEGORIES),
            metavar="NAME",
            help=f"default: all of {' '.join(CATEGORIES)}",
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "agreement":
            if args.sample is not None and args.sample < 1:
                raise ConfigError(f"--sample must be at least 1 entry; got {args.sample}.")
            report = measure_agreement(args.categories, per_category=args.sample, seed=args.seed)
            print(json.dumps(report.to_json(), indent=2) if args.json else report.render(args.show))
            return 1 if report.disagreements else 0
        if args.command == "quirks":
            found = {c: data_quirks(c) for c in parse_categories(args.categories)}
            if args.json:
                print(
                    json.dumps({c: [q.to_json() for q in qs] for c, qs in found.items()}, indent=2)
                )
            else:
                for category, quirks in found.items():
                    print(f"{category}: {len(quirks)} data quirk(s)")
                    for quirk in quirks:
                        print(f"  {quirk.id}: {' | '.join(quirk.reasons)}")
            return 0
        rows = [
            {
                "category": c,
                "entries": len(load_entries(c)),
                "quirks": len(data_quirks(c)),
                "arm": arm_of(c),
                "bench_draw": min(DEFAULT_PER_CATEGORY, len(load_entries(c)) - len(data_quirks(c))),
            }
            for c in CATEGORIES
        ]
        if args.json:
            print(json.dumps({"categories": rows, "pairs": [list(p) for p in PAIRS]}, indent=2))
        else:
            print(f"{'category':<24}{'entries':>8}{'quirks':>8}{'arm':>5}{'bench draw':>12}")
            for r in rows:
                print(
                    f"{r['category']:<24}{r['entries']:>8}{r['quirks']:>8}{r['arm']:>5}"
                    f"{r['bench_draw']:>12}"
                )
            print("g pairs: " + ", ".join(f"{s} (S) vs {p} (P)" for s, p in PAIRS))
        return 0
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
