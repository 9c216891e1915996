"""bench/compare_ledgers.py: the check that a restructuring changed no number."""

from __future__ import annotations

import importlib.util

from audiorepro.reporting import read_ledger, record_result
from conftest import REPO

_spec = importlib.util.spec_from_file_location(
    "compare_ledgers", REPO / "bench/compare_ledgers.py"
)
compare_ledgers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_ledgers)


def _ledger(path, values, wall=1.0):
    for seed, value in enumerate(values):
        record_result(
            "c",
            "p",
            {"m": value, "train_wall_time_s": wall},
            preset="smoke",
            seed=seed,
            tags={"k": 1},
            path=path,
        )
    return read_ledger(path)


def test_equal_ledgers_compare_identical_whatever_the_wall_times(tmp_path):
    a = _ledger(tmp_path / "a.jsonl", [0.5, 0.25], wall=1.0)
    b = _ledger(tmp_path / "b.jsonl", [0.5, 0.25], wall=9.0)
    assert compare_ledgers.compare(a, b) == []
    assert compare_ledgers.main([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 0


def test_a_changed_value_a_missing_record_and_a_missing_metric_are_listed(tmp_path, capsys):
    a = _ledger(tmp_path / "a.jsonl", [0.5, 0.25])
    b = _ledger(tmp_path / "b.jsonl", [0.5, 0.2500001, 0.1])
    problems = compare_ledgers.compare(a, b)
    assert any("m 0.25 before, 0.2500001 after" in p for p in problems)
    assert any("0 record(s) before, 1 after" in p for p in problems)
    assert compare_ledgers.compare(a, b[:2], rtol=1e-5) == []
    c = [dict(r, metrics={"m": r["metrics"]["m"]}) for r in a]
    assert compare_ledgers.compare(a, c, ignore=()) == [
        f"{compare_ledgers._key(r)}: metric 'train_wall_time_s' only before" for r in a
    ]
    assert compare_ledgers.main([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 1
    assert "DIFFERENT" in capsys.readouterr().out
