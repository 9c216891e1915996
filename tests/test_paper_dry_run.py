"""bench/paper_dry_run.py: the paper presets load, train, evaluate and record on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from audiorepro.storage import RunStore
from conftest import REPO


@pytest.mark.slow
def test_chapter_04_paper_preset_runs_end_to_end(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib"), "OMP_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench/paper_dry_run.py"), "--out", str(tmp_path),
         "--chapters", "04_awe"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "04_awe: ok" in proc.stdout
    rows = [json.loads(line) for line in (tmp_path / "results/ledger.jsonl").open()]
    assert rows and {r["preset"] for r in rows} == {"paper"}
    pages = {r["page"] for r in rows}
    assert pages == {"02_train", "03_evaluate"}
    # the paper's model (book/04_awe/presets/paper.yaml), trained and stored in the run store
    assert {r["config"]["model"]["d_model"] for r in rows} == {256}
    assert {r["config"]["model"]["acoustic_layers"] for r in rows} == {6}
    runs = RunStore("04_awe", tmp_path / "runs").runs("model")
    assert runs and all(r.complete for r in runs)
    # the corpus sits where the paper preset looks for it, in the Switchboard word layout
    words = tmp_path / "data" / "swbd_words"
    assert {"train.list", "dev.list", "test.list", "vocab.json"} <= {
        p.name for p in words.iterdir()
    }


def test_unknown_chapter_is_an_error():
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench/paper_dry_run.py"), "--chapters", "07_nothing"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "lib")},
    )  # fmt: skip
    assert proc.returncode == 2 and "07_nothing" in proc.stderr
