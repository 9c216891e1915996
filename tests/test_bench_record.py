"""bench/record.py: ``make bench`` keeps each bench's output with when and where it ran."""

from __future__ import annotations

import importlib.util
import json

from conftest import REPO

_spec = importlib.util.spec_from_file_location("bench_record", REPO / "bench/record.py")
bench_record = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_record)


def test_a_bench_run_writes_its_output_with_provenance(tmp_path, capsys):
    bench = tmp_path / "bench_tiny.py"
    bench.write_text("import sys\nprint('| metric | 1.0 ms |')\nprint(sys.argv[1:])\n")
    assert bench_record.main([str(bench), "--repeats", "1", "--results", str(tmp_path)]) == 0
    assert "| metric | 1.0 ms |" in capsys.readouterr().out  # passed through
    entry = json.loads((tmp_path / "bench_tiny.json").read_text())
    assert entry["bench"] == "bench_tiny"
    assert entry["output"] == "| metric | 1.0 ms |\n['--repeats', '1']\n"
    assert entry["produced"].endswith("+00:00") and entry["seconds"] >= 0
    assert entry["command"].endswith("bench_tiny.py --repeats 1")
    assert {"platform", "cpus", "python"} <= set(entry["machine"])


def test_a_failed_bench_keeps_its_status_and_writes_no_record(tmp_path):
    bench = tmp_path / "bench_bad.py"
    bench.write_text("raise SystemExit(3)\n")
    assert bench_record.main([str(bench), "--results", str(tmp_path)]) == 3
    assert not list(tmp_path.glob("*.json"))
