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
def test_paper_presets_of_chapters_03_and_04_run_end_to_end(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib"), "OMP_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench/paper_dry_run.py"), "--out", str(tmp_path),
         "--chapters", "03_zerospeech,04_awe"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "03_zerospeech: ok" in proc.stdout and "04_awe: ok" in proc.stdout
    ledger = [json.loads(line) for line in (tmp_path / "results/ledger.jsonl").open()]
    assert {r["preset"] for r in ledger} == {"paper"}

    rows = [r for r in ledger if r["chapter"] == "03_zerospeech"]
    assert {r["page"] for r in rows} == {"03_abx_bitrate", "04_inverter"}
    base = [r for r in rows if r["tags"].get("row") == "base"]
    assert {r["tags"]["language"] for r in base} == {"english", "surprise"}
    assert {r["config"]["d_model"] for r in base} == {256}  # the paper preset's VQ-VAE
    assert all("abx_across" in r["metrics"] for r in base)
    assert RunStore("03_zerospeech", tmp_path / "runs").runs("inverter")
    release = tmp_path / "data" / "zerospeech2019" / "2019"
    assert (release / "english" / "bitrate_filelist.txt").is_file()
    assert (release / "surprise" / "test").is_dir()

    rows = [r for r in ledger if r["chapter"] == "04_awe"]
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
