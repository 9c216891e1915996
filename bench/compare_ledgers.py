"""Compare the metrics of two results ledgers, record by record.

A restructuring of the code must not change a number: run every page under one preset before
and after, then::

    python bench/compare_ledgers.py BEFORE/ledger.jsonl AFTER/ledger.jsonl [--chapter 03_zerospeech]

Records are matched by (chapter, page, preset, seed, tags) and, for repeated keys, by their order
in the ledger. Every metric must be equal (``--rtol`` allows a relative tolerance) except those
matching ``--ignore`` patterns (default: ``*wall_time_s``, measured times that change from run
to run). Exits 1 and lists each difference, missing and extra record otherwise.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import sys
from collections import defaultdict
from collections.abc import Sequence

from audiorepro.reporting import read_ledger


def _key(rec: dict) -> tuple:
    return (
        rec["chapter"],
        rec["page"],
        rec["preset"],
        rec["seed"],
        json.dumps(rec.get("tags", {}), sort_keys=True),
    )


def _grouped(records: Sequence[dict], chapter: str | None) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        if chapter is None or rec["chapter"] == chapter:
            out[_key(rec)].append(rec)
    return out


def compare(
    before: Sequence[dict],
    after: Sequence[dict],
    *,
    chapter: str | None = None,
    rtol: float = 0.0,
    ignore: Sequence[str] = ("*wall_time_s",),
) -> list[str]:
    """Every difference between two ledgers' metrics, as lines (empty: identical)."""
    old, new = _grouped(before, chapter), _grouped(after, chapter)
    problems = []
    for key in sorted(set(old) | set(new), key=str):
        a, b = old.get(key, []), new.get(key, [])
        if len(a) != len(b):
            problems.append(f"{key}: {len(a)} record(s) before, {len(b)} after")
        for ra, rb in zip(a, b, strict=False):
            ma, mb = ra["metrics"], rb["metrics"]
            for name in sorted(set(ma) | set(mb)):
                if any(fnmatch.fnmatch(name, pattern) for pattern in ignore):
                    continue
                if name not in ma or name not in mb:
                    problems.append(
                        f"{key}: metric {name!r} only {'after' if name in mb else 'before'}"
                    )
                    continue
                x, y = float(ma[name]), float(mb[name])
                same = (math.isnan(x) and math.isnan(y)) or x == y
                if not same and not math.isclose(x, y, rel_tol=rtol, abs_tol=0.0):
                    problems.append(f"{key}: {name} {x!r} before, {y!r} after")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--chapter", default=None)
    parser.add_argument("--rtol", type=float, default=0.0)
    parser.add_argument("--ignore", action="append", default=None, help="metric name pattern")
    args = parser.parse_args(argv)
    before, after = read_ledger(args.before), read_ledger(args.after)
    ignore = args.ignore if args.ignore is not None else ["*wall_time_s"]
    problems = compare(before, after, chapter=args.chapter, rtol=args.rtol, ignore=ignore)
    for line in problems:
        print(line)
    n = len(_grouped(after, args.chapter))
    print(f"{'DIFFERENT' if problems else 'identical'}: {n} record keys compared")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
