"""The ``audiorepro`` command on folders as users have them: odd files it either reads so that
the numbers mean something, or refuses with one paragraph naming the file (exit status 1).

Found by a sweep of the documented paths over odd inputs (empty WAVs, float WAVs of integer
sample values, unreadable files, segments too short to hold a frame)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from test_cli_safety import one_paragraph, run_cli

from audiorepro.data.recordings import content_problem
from audiorepro.features.audio import AudioError, load_audio

pytestmark = pytest.mark.filterwarnings("ignore::audiorepro.metrics.checks.ScoreWarning")

RATE = 8000
SMOKE = ("--preset", "smoke", "--set", "train.max_steps=4", "--set", "train.segment_frames=32")
FORMANTS = {"a": (700, 1200), "i": (300, 2300), "u": (350, 800)}


def vowel(word: str, f0: float, seconds: float = 0.4) -> np.ndarray:
    """A vowel-like harmonic signal: harmonics of ``f0`` weighted by two formant peaks."""
    t = np.arange(int(seconds * RATE)) / RATE
    wav = np.zeros_like(t)
    for k in range(1, int(3800 / f0)):
        gain = sum(1 / (1 + ((k * f0 - f) / 150) ** 2) for f in FORMANTS[word])
        wav += gain * np.sin(2 * np.pi * k * f0 * t)
    wav *= np.hanning(t.size)
    return (0.5 * wav / np.abs(wav).max()).astype(np.float32)


def folder(root: Path) -> Path:
    """3 speakers (pitches) x 3 vowels, ``S<n>_<vowel>.wav``, 8 kHz 16-bit."""
    root.mkdir(parents=True)
    for s, f0 in enumerate((110, 160, 220), start=1):
        for word in FORMANTS:
            sf.write(root / f"S{s}_{word}.wav", vowel(word, f0), RATE, subtype="PCM_16")
    return root


# ------------------------------------------------------------------------------- empty files


def test_units_train_leaves_out_empty_files_as_it_leaves_out_short_ones(tmp_path, capsys):
    """A WAV header with no sample, and a 0-byte ``.wav``, are the shortest of the files too
    short to train on: left out and named (they stopped training before, the 0-byte one with
    libsndfile's 'Format not recognised'), and refused by every other reader."""
    audio = folder(tmp_path / "audio")
    sf.write(audio / "S1_header.wav", np.zeros(0, np.float32), RATE, subtype="PCM_16")
    (audio / "S2_zero.wav").write_bytes(b"")
    assert content_problem(audio / "S1_header.wav") == "empty: no sample"
    assert content_problem(audio / "S2_zero.wav") == "empty: 0 bytes"
    with pytest.raises(AudioError, match=r"S2_zero\.wav: empty file \(0 bytes\)"):
        load_audio(audio / "S2_zero.wav", 16000)

    code, out, err = run_cli(
        capsys, "units", "train", "--audio", audio, *SMOKE, "--out", tmp_path / "u"
    )
    assert code == 0, err
    assert (
        "9 files; left out 2: S1_header.wav (empty: no sample), S2_zero.wav (empty: 0 bytes)"
        in out
    )
    code, _, err = run_cli(
        capsys, "units", "encode", tmp_path / "u", "--audio", audio, "--out", tmp_path / "sub"
    )
    assert code == 1 and one_paragraph(err)
    assert "S1_header.wav: empty audio" in err
    assert not (tmp_path / "sub").exists()


# ----------------------------------------------------------------- float samples of integers


def test_float_samples_far_beyond_full_scale_are_refused_naming_the_file(tmp_path, capsys):
    """A float WAV of integer sample values (up to 32767) read 90 dB louder than the other
    files and skewed the units' input scale and the baselines (k-means 0 -> 5 % ABX error on
    the sweep's folder, exit 0); a float file a few dB over full scale is still read."""
    audio = folder(tmp_path / "audio")
    wav = vowel("a", 130)
    sf.write(audio / "S4_a.wav", wav * 32768, RATE, subtype="FLOAT")
    sf.write(tmp_path / "hot.wav", wav * 3, RATE, subtype="FLOAT")  # +3.5 dBFS peak
    assert load_audio(tmp_path / "hot.wav", None)[0].max() > 1
    with pytest.raises(AudioError, match=r"S4_a\.wav: samples reach 16384 .* above full scale"):
        load_audio(audio / "S4_a.wav", 16000)

    code, _, err = run_cli(
        capsys, "units", "train", "--audio", audio, *SMOKE, "--out", tmp_path / "u"
    )
    assert code == 1 and one_paragraph(err)
    assert "S4_a.wav: samples reach" in err and "divide them by 32768" in err
    assert not (tmp_path / "u").exists()


# --------------------------------------------------------------------------- unreadable files


def test_an_unreadable_file_says_permission_denied(tmp_path, monkeypatch):
    """libsndfile says only 'System error.' of a file it may not open (and a root user reads
    every file, hence the stand-in for ``os.access``)."""
    path = tmp_path / "locked.wav"
    sf.write(path, vowel("a", 110), RATE)
    access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != path and access(p, mode))
    with pytest.raises(AudioError, match=r"locked\.wav: permission denied"):
        load_audio(path, 16000)


# --------------------------------------------------------------------- a file cut short


def test_a_file_cut_short_is_scored_as_far_as_it_goes_and_said_once(tmp_path, capsys):
    """A WAV whose data ends before its header says (an interrupted copy) is read as far as it
    goes: the command warns once, naming the file and both lengths, however often it reads it."""
    audio = folder(tmp_path / "audio")
    whole = (audio / "S1_a.wav").read_bytes()
    (audio / "S1_a.wav").write_bytes(whole[: len(whole) // 2])
    rows = [f"audio/{p.name}\t{p.stem[3:]}\t{p.stem[:2]}\t\t\n" for p in sorted(audio.iterdir())]
    rows.append("audio/S1_a.wav\tb\tS1\t0.0\t0.1\n")  # the file read a second time
    table = tmp_path / "seg.tsv"
    table.write_text("path\tword\tspeaker\tstart\tend\n" + "".join(rows))
    code, out, err = run_cli(capsys, "awe", "dtw", "--segments", table)
    assert code == 0, err
    said = [line for line in err.splitlines() if "cut short" in line]
    assert len(said) == 1, err
    assert said[0].startswith(f"audiorepro: warning: {audio / 'S1_a.wav'}: cut short: its ")
    assert "are read" in said[0]


# ------------------------------------------------------------------- segments of no frame


def test_a_segment_of_no_frame_is_left_out_as_every_short_row_is(tmp_path, capsys):
    """A row of 5 ms holds no 10 ms frame: it is shorter than ``min_frames`` like a row of one
    frame, and left out by the one rule (it stopped ``awe dtw``, ``awe embed`` and ``awe
    train`` with 'the segment holds no frame' before, where a 10 ms row was left out)."""
    audio = folder(tmp_path / "audio")
    rows = [f"audio/{p.name}\t{p.stem[3:]}\t{p.stem[:2]}\t\t\n" for p in sorted(audio.iterdir())]
    rows.append("audio/S1_a.wav\tb\tS1\t0.100\t0.105\n")  # as 'a': the whole file's token again
    table = tmp_path / "seg.tsv"
    table.write_text("path\tword\tspeaker\tstart\tend\n" + "".join(rows))
    code, out, err = run_cli(capsys, "awe", "dtw", "--segments", table)
    assert code == 0, err
    assert "left out 1 of 10 rows shorter than 2 frames of 10 ms" in out + err
    assert "seg.tsv:11, 0 frames" in out + err
