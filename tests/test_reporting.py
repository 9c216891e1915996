from __future__ import annotations

import json

import numpy as np
import pytest

from audiorepro import reporting
from audiorepro.reporting import (
    LedgerError,
    PaperRow,
    format_mean_std,
    ledger_frame,
    paper_vs_ours,
    read_ledger,
    record_result,
)


def test_record_appends_one_line_with_provenance(tmp_path):
    path = tmp_path / "ledger.jsonl"
    rec = record_result(
        "03_zerospeech",
        "03_abx_bitrate",
        {"abx_across": np.float32(14.5), "bitrate": 400},
        preset="smoke",
        seed=1,
        config={"widths": (1, 2)},
        command="papermill page.ipynb",
        wall_time_s=1.5,
        tags={"K": 256},
        path=path,
    )
    record_result(
        "03_zerospeech", "03_abx_bitrate", {"abx_across": 15.5}, preset="smoke", seed=2, path=path
    )
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["metrics"] == {"abx_across": 14.5, "bitrate": 400}
    assert first["config"] == {"widths": [1, 2]}
    assert first["command"] == "papermill page.ipynb"
    assert set(first["env"]) >= {"git_sha", "packages", "device", "python"}
    assert first["env"]["packages"]["torch"]
    assert rec["tags"] == {"K": 256}


def test_default_ledger_location_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIOREPRO_RESULTS", str(tmp_path / "r"))
    record_result("c", "p", {"m": 1.0}, preset="smoke", seed=0)
    assert (tmp_path / "r" / "ledger.jsonl").exists()
    assert len(read_ledger()) == 1


def test_non_numeric_metric_rejected(tmp_path):
    with pytest.raises(TypeError, match="metric values must be numbers"):
        record_result("c", "p", {"m": "high"}, preset="smoke", seed=0, path=tmp_path / "l")


def test_malformed_ledger_line_names_line(tmp_path):
    path = tmp_path / "ledger.jsonl"
    record_result("c", "p", {"m": 1.0}, preset="smoke", seed=0, path=path)
    with open(path, "a") as fh:
        fh.write("{not json\n")
    with pytest.raises(LedgerError, match=r"ledger.jsonl:2: not valid JSON"):
        read_ledger(path)
    path.write_text(json.dumps({"chapter": "c"}) + "\n")
    with pytest.raises(LedgerError, match=r":1: missing key\(s\) page, metrics, preset, seed"):
        read_ledger(path)


def test_mean_std_formatting_by_hand():
    assert format_mean_std([1.0, 2.0, 3.0]) == "2.0 ± 1.0"  # sample std of 1,2,3 is 1
    assert format_mean_std([0.25], digits=2) == "0.25"
    with pytest.raises(ValueError):
        reporting.mean_std([])


def test_paper_vs_ours_reads_latest_run_per_seed_and_filters_tags(tmp_path):
    path = tmp_path / "ledger.jsonl"
    for seed, v in [(0, 0.10), (1, 0.20), (0, 0.30)]:  # seed 0 re-run: 0.30 replaces 0.10
        record_result(
            "01",
            "eval",
            {"mAP@10": v},
            preset="embedded",
            seed=seed,
            tags={"model": "passt"},
            path=path,
        )
    record_result(
        "01",
        "eval",
        {"mAP@10": 0.9},
        preset="embedded",
        seed=0,
        tags={"model": "cnn14"},
        path=path,
    )
    record_result(
        "01", "eval", {"mAP@10": 0.7}, preset="smoke", seed=0, tags={"model": "passt"}, path=path
    )
    rows = [
        PaperRow(
            "mAP@10 PaSST", "mAP@10", 29.0, "01", tags={"model": "passt"}, scale=100, finding="x"
        ),
        PaperRow("R@1 PaSST", "R@1", 18.0, "01", tags={"model": "passt"}),
    ]
    table = paper_vs_ours(rows, preset="embedded", path=path)
    assert list(table.columns) == ["metric", "paper", "ours", "preset", "seeds", "finding"]
    first = table.iloc[0]
    assert first["ours"] == "25.0 ± 7.1"  # mean(30, 20) = 25, sample std = 7.07
    assert first["seeds"] == "0, 1" and first["paper"] == "29.0"
    assert table.iloc[1]["ours"] == "not run"


def test_ledger_frame_one_row_per_metric(tmp_path):
    path = tmp_path / "ledger.jsonl"
    record_result("c", "p", {"a": 1.0, "b": 2.0}, preset="smoke", seed=3, tags={"k": 1}, path=path)
    frame = ledger_frame(path)
    assert sorted(frame["metric"]) == ["a", "b"]
    assert set(frame["tag.k"]) == {1}
