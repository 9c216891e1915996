"""A run that normalises per speaker, given a speaker's few seconds at encode or embed time:
the statistics come from those seconds, so the numbers of a file change with the files beside
it; the commands say so (nothing said before)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from test_cli import HEADER, WORDS
from test_cli_safety import run_cli
from test_out_safety import SMOKE, noise_folder

from conftest import espeak_word_files

pytestmark = pytest.mark.filterwarnings("ignore::audiorepro.metrics.checks.ScoreWarning")


def test_units_encode_warns_of_speakers_with_few_seconds(tmp_path, capsys, monkeypatch):
    audio = noise_folder(tmp_path, monkeypatch)  # two speakers, 2 s each
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE,
                           "--set", "model.feature_norm=speaker", "--out", run)  # fmt: skip
    assert code == 0, err
    code, _, err = run_cli(capsys, "units", "encode", run, "--audio", audio, "--out",
                           tmp_path / "enc")  # fmt: skip
    assert code == 0, err
    assert (
        f"audiorepro: warning: 2 of the 2 speakers have less than 10 s of audio under {audio} "
        "(ann: 2.0 s), and the run normalises per speaker with the statistics of that audio"
    ) in err, err
    # the same file, encoded with another file of its speaker beside it or alone: other codes
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(audio / "ann_0.wav", alone)
    code, _, err = run_cli(capsys, "units", "encode", run, "--audio", alone, "--what",
                           "frames", "--out", tmp_path / "one")  # fmt: skip
    assert code == 0 and "1 of the 1 speakers have less than 10 s" in err, err
    code, _, err = run_cli(capsys, "units", "encode", run, "--audio", audio, "--what",
                           "frames", "--out", tmp_path / "two")  # fmt: skip
    one, two = (np.loadtxt(tmp_path / f / "ann_0.txt") for f in ("one", "two"))
    assert one.shape == two.shape and not np.allclose(one, two)
    # a run that normalises per file is not concerned
    code, _, err = run_cli(capsys, "units", "train", "--audio", audio, *SMOKE,
                           "--set", "model.feature_norm=none", "--out", tmp_path / "plain")  # fmt: skip
    code, _, err = run_cli(capsys, "units", "encode", tmp_path / "plain", "--audio", audio,
                           "--out", tmp_path / "enc2")  # fmt: skip
    assert code == 0 and "less than 10 s" not in err, err


def test_awe_embed_warns_of_speakers_with_few_seconds(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    (tmp_path / "audio").mkdir()
    rows = [
        f"audio/{name}\t{word}\t{voice}\t\t\n"
        for name, word, voice, _, _ in espeak_word_files(tmp_path / "audio", WORDS)
    ]
    (tmp_path / "seg.tsv").write_text(HEADER + "".join(rows))
    code, _, err = run_cli(capsys, "awe", "train", "--segments", tmp_path / "seg.tsv",
                           "--preset", "smoke", "--set", "train.max_steps=2", "--speeds", "1",
                           "--norm", "speaker", "--out", tmp_path / "a")  # fmt: skip
    assert code == 0, err
    code, _, err = run_cli(capsys, "awe", "embed", tmp_path / "a", "--segments",
                           tmp_path / "seg.tsv", "--out", tmp_path / "e.npz")  # fmt: skip
    assert code == 0, err
    assert "3 of the 3 speakers have less than 10 s of audio in the files of " in err, err
    assert "give all of a speaker's recordings together" in err
