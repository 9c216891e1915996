"""The ``audiorepro`` command end to end on a small folder of 22.05 kHz wavs (eSpeak words, not
the model's 16 kHz), in-process through :func:`audiorepro.cli.main` and once through
``python -m audiorepro``; bad inputs exit non-zero naming the file, line or field."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
import torch

from audiorepro.cli import main, parse_sets
from audiorepro.config import ConfigError
from audiorepro.training.loop import TrainResult
from conftest import espeak_word_files, subprocess_timeout

WORDS = ("garden", "yellow", "window")
HEADER = "path\tword\tspeaker\tstart\tend\n"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """3 speakers x 3 words x 2 rates, one word per wav at eSpeak's 22050 Hz, plus one
    sentence wav with two word segments; the whole-file table and one with times."""
    root = tmp_path_factory.mktemp("cli")
    audio = root / "audio"
    audio.mkdir()
    rows, timed = [], []
    for name, word, voice, k, seconds in espeak_word_files(audio, WORDS):
        rows.append(f"audio/{name}\t{word}\t{voice}\t\t\n")
        if k == 0:  # the same word as a stretch of seconds inside its file
            timed.append(f"audio/{name}\t{word}\t{voice}\t0.02\t{round(seconds - 0.02, 3)}\n")
    (root / "seg.tsv").write_text(HEADER + "".join(rows))
    (root / "timed.tsv").write_text(HEADER + "".join(timed))
    return root


def last_number(text: str) -> float:
    return float(re.findall(r"-?\d+\.\d+|-?\d+", text.strip().splitlines()[-1])[-1])


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_units_abx_and_awe_end_to_end(corpus, capsys):
    root = corpus
    code, out, err = run_cli(
        capsys,
        "units", "train", "--audio", root / "audio", "--preset", "smoke",
        "--set", "train.max_steps=4", "--set", "train.segment_frames=32", "--out", root / "u",
    )  # fmt: skip
    assert code == 0, err
    assert np.isfinite(last_number(out))
    assert (root / "u/model.safetensors").is_file()

    code, out, err = run_cli(
        capsys, "units", "encode", root / "u", "--audio", root / "audio", "--out", root / "sub"
    )
    assert code == 0, err
    assert last_number(out.split("files")[0]) == 18
    lines = (root / "sub/S001_garden0.txt").read_text().splitlines()
    assert len(lines) > 1 and len(lines[0].split()) == 16  # smoke code_dim
    code, out, err = run_cli(
        capsys,
        "units", "encode", root / "u", "--audio", root / "audio", "--out", root / "hot",
        "--what", "codes",
    )  # fmt: skip
    assert code == 0, err
    hot = np.loadtxt(root / "hot/S001_garden0.txt")
    assert hot.shape == (len(lines), 64) and (hot.sum(1) == 1).all()  # one-hot of K = 64

    code, out, err = run_cli(
        capsys, "abx", "items", "--segments", root / "seg.tsv", "--out", root / "w.item"
    )
    assert code == 0, err
    assert "18 items (relative times" in out
    code, out, err = run_cli(capsys, "abx", "score", root / "w.item", root / "sub")
    assert code == 0, err
    assert 0.0 <= last_number(out) <= 100.0

    # Items in seconds: an error under the 2019 rule, a score with the units' frame shift.
    code, out, err = run_cli(
        capsys, "abx", "items", "--segments", root / "timed.tsv", "--out", root / "s.item"
    )
    assert code == 0 and "seconds times" in out, err
    code, out, err = run_cli(capsys, "abx", "score", root / "s.item", root / "sub")
    assert code == 1
    assert re.search(r"s\.item:\d+: .*(keeps frames|runs past).*--frame-shift", err)
    code, out, err = run_cli(
        capsys, "abx", "score", root / "s.item", root / "sub", "--frame-shift", "0.04"
    )
    assert code == 0, err
    assert 0.0 <= last_number(out) <= 100.0

    code, out, err = run_cli(
        capsys,
        "awe", "train", "--segments", root / "seg.tsv", "--preset", "smoke",
        "--set", "train.max_steps=3", "--speeds", "1", "--warps", "1", "--out", root / "a",
    )  # fmt: skip
    assert code == 0, err
    # max_steps alone lifts the smoke preset's one epoch (of one step without speed copies)
    assert "trained 3 epochs" in out
    # three speakers: one is held out, the epoch is chosen on a voice the model never heard
    assert re.search(
        r"development rows: 6 rows of 1 speaker\(s\) held out of training \(S00\d\)", out
    )
    assert 0.0 <= last_number(out) <= 1.0
    code, out, err = run_cli(
        capsys, "awe", "embed", root / "a", "--segments", root / "seg.tsv", "--out", root / "e.npz"
    )
    assert code == 0, err
    with np.load(root / "e.npz") as arrays:
        assert arrays["embeddings"].shape == (18, 16)
        assert sorted(set(arrays["labels"])) == sorted(WORDS)
        assert set(arrays["speakers"]) == {"S001", "S002", "S003"}
        assert str(arrays["speeds"]) == ""  # trained with --speeds 1: none to average over
    assert "each row embedded alone (no speed copies in training)" in out
    code, out, err = run_cli(
        capsys, "awe", "embed", root / "a", "--segments", root / "seg.tsv",
        "--out", root / "e2.npz", "--speeds", "0.9,1.1",
    )  # fmt: skip
    assert code == 0, err
    assert (
        "each row's embedding averaged with its copies at speeds 0.9, 1.1 (--speeds; "
        "--speeds 1: the row alone)"
    ) in out
    with np.load(root / "e2.npz") as arrays:
        assert str(arrays["speeds"]) == "0.9,1.1" and arrays["embeddings"].shape == (18, 16)
    # the table it trained on: embedded and scored, and both say so
    assert (
        f"seg.tsv: 18 of the 18 rows are rows of {root / 'seg.tsv'}, or of copies of their files, which the run "
        in err
    )
    code, out, err = run_cli(capsys, "awe", "ap", root / "e.npz")
    assert code == 0, err
    assert 0.0 < last_number(out) <= 1.0
    assert "e.npz: 18 of the 18 rows are rows the run trained on" in err
    # the timed table's stretches are those tokens cut again (20 ms inside): trained on too
    code, _, err = run_cli(
        capsys, "awe", "embed", root / "a", "--segments", root / "timed.tsv",
        "--out", root / "t.npz",
    )  # fmt: skip
    assert code == 0 and "timed.tsv: 9 of the 9 rows are rows of " in err, err


def test_units_baselines_the_input_frames_and_the_runs_kmeans(corpus, tmp_path, capsys):
    """``units train`` fits the k-means baseline of its K (written beside the model, recorded
    in run.json); ``units encode --what frames|kmeans`` writes the two baselines, each scored
    by ``abx score`` like the units: the frames every 10 ms, the k-means units on the code
    frames, each line one of the saved centroids, the same centroids from the same seed."""
    from audiorepro.experiments.zerospeech import recordings as zs

    code, out, err = run_cli(
        capsys,
        "units", "train", "--audio", corpus / "audio", "--preset", "smoke",
        "--set", "train.max_steps=2", "--set", "train.segment_frames=32", "--out", tmp_path / "u",
    )  # fmt: skip
    assert code == 0, err
    info = json.loads((tmp_path / "u/run.json").read_text())["kmeans"]
    assert info["file"] == "kmeans.npz" and info["k"] == 64 and info["code_frames"] >= 64
    with np.load(tmp_path / "u/kmeans.npz") as archive:
        centroids = archive["centroids"]
    assert centroids.shape == (64, 39)

    outputs = {}
    for what, shift in (("vectors", "0.04"), ("frames", "0.01"), ("kmeans", "0.04")):
        code, out, err = run_cli(
            capsys,
            "units", "encode", tmp_path / "u", "--audio", corpus / "audio",
            "--out", tmp_path / what, "--what", what,
        )  # fmt: skip
        assert code == 0, err
        assert f"wrote 18 files to {tmp_path / what} (one line every {shift} s)" in out
        outputs[what] = np.loadtxt(tmp_path / what / "S002_yellow1.txt", ndmin=2)
    units, frames, km = outputs["vectors"], outputs["frames"], outputs["kmeans"]
    assert frames.shape[1] == 39 and len(units) == -(-len(frames) // 4)
    assert km.shape == (len(units), 39)
    # every k-means line is the nearest saved centroid of its (up to) four averaged frames
    averaged = np.stack([frames[4 * t : 4 * t + 4].mean(0) for t in range(len(units))])
    nearest = ((averaged[:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
    np.testing.assert_allclose(km, centroids[nearest], rtol=1e-6, atol=1e-6)

    code, out, err = run_cli(
        capsys, "abx", "items", "--segments", corpus / "seg.tsv", "--out", tmp_path / "w.item"
    )
    assert code == 0, err
    for what in outputs:
        code, out, err = run_cli(capsys, "abx", "score", tmp_path / "w.item", tmp_path / what)
        assert code == 0, err
        assert 0.0 <= last_number(out) <= 100.0

    # the same seed fits the same centroids; a run from before the baseline says to retrain
    run = zs.load_units(tmp_path / "u")
    feats = zs.load_wav_features(zs.find_wavs(corpus / "audio"), "mfcc", zs.store())
    again = zs._fit_units_baseline(
        tmp_path, [feats[n] for n in sorted(feats)], ["S"] * len(feats), run.config
    )
    assert again["inertia"] == info["inertia"]
    with np.load(tmp_path / "kmeans.npz") as archive:
        np.testing.assert_array_equal(archive["centroids"], centroids)
    meta = json.loads((tmp_path / "u/run.json").read_text())
    del meta["kmeans"]
    (tmp_path / "u/run.json").write_text(json.dumps(meta))
    code, _, err = run_cli(
        capsys,
        "units", "encode", tmp_path / "u", "--audio", corpus / "audio",
        "--out", tmp_path / "k2", "--what", "kmeans",
    )  # fmt: skip
    assert code == 1 and "the run has no k-means baseline" in err and "train it again" in err


def test_per_speaker_normalisation_encodes_with_the_speakers_the_run_was_trained_with(
    corpus, tmp_path, capsys
):
    """A run trained with ``model.feature_norm=speaker`` and ``--speaker-of parent`` encodes a
    folder with the same rule (its file names have no speaker prefix), and the frames it reads
    are each speaker's files standardised by that speaker's own mean and deviation."""
    audio = tmp_path / "audio"
    for wav in sorted((corpus / "audio").glob("*.wav")):
        speaker, rest = wav.stem.split("_")
        (audio / speaker).mkdir(parents=True, exist_ok=True)
        shutil.copy(wav, audio / speaker / f"{rest}.wav")
    code, _, err = run_cli(
        capsys,
        "units", "train", "--audio", audio, "--speaker-of", "parent", "--preset", "smoke",
        "--set", "model.feature_norm=speaker", "--set", "train.max_steps=2",
        "--set", "train.segment_frames=32", "--out", tmp_path / "u",
    )  # fmt: skip
    assert code == 0, err
    for what in ("vectors", "frames"):
        code, _, err = run_cli(
            capsys, "units", "encode", tmp_path / "u", "--audio", audio,
            "--out", tmp_path / what, "--what", what,
        )  # fmt: skip
        assert code == 0, err
    from audiorepro.data.speech_segments import feature_function
    from audiorepro.features import load_audio

    mfcc = feature_function("mfcc")  # the features units train reads, as it reads them
    raw = {
        speaker.name: [
            mfcc(load_audio(wav, sr=16000)[0]).astype(np.float32)
            for wav in sorted(speaker.glob("*.wav"))
        ]
        for speaker in audio.iterdir()
    }
    spoken = np.concatenate(raw["S002"])
    mean, std = spoken.mean(0), np.maximum(spoken.std(0), 1e-5)
    frames = np.loadtxt(tmp_path / "frames" / "S002" / "yellow1.txt", ndmin=2)
    first = sorted(p.stem for p in (audio / "S002").glob("*.wav")).index("yellow1")
    np.testing.assert_allclose(frames, (raw["S002"][first] - mean) / std, rtol=1e-4, atol=1e-4)
    code, _, err = run_cli(
        capsys, "units", "encode", tmp_path / "u", "--audio", audio,
        "--out", tmp_path / "p", "--speaker-of", "prefix",
    )  # fmt: skip
    assert code == 1 and "--speaker-of prefix: expected a file name <speaker>_<rest>" in err


def test_units_bitrate_voice_and_resynthesis_of_a_folder(corpus, tmp_path, capsys):
    """``units bitrate`` is N·H/D of the units (durations from the wavs or an official file
    list, both equal to the count here); ``units voice`` trains an inverter on a folder and
    ``units resynth`` speaks each file again, one 16 kHz wav as long as its source."""
    audio = corpus / "audio"
    code, _, err = run_cli(
        capsys,
        "units", "train", "--audio", audio, "--preset", "smoke",
        "--set", "train.max_steps=2", "--set", "train.segment_frames=32", "--out", tmp_path / "u",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run_cli(
        capsys, "units", "encode", tmp_path / "u", "--audio", audio,
        "--out", tmp_path / "hot", "--what", "codes",
    )  # fmt: skip
    assert code == 0, err
    rows, seconds, listed = [], 0.0, []
    for wav in sorted(audio.glob("*.wav")):
        info = sf.info(wav)
        seconds += info.frames / info.samplerate
        listed.append(f"{wav.stem}.txt {info.frames / info.samplerate!r}\n")
        rows += [tuple(r) for r in np.loadtxt(tmp_path / "hot" / f"{wav.stem}.txt", ndmin=2)]
    counts = np.array([rows.count(r) for r in sorted(set(rows))], dtype=float)
    p = counts / counts.sum()
    expected = len(rows) * float(-(p * np.log2(p)).sum()) / seconds
    code, out, err = run_cli(capsys, "units", "bitrate", tmp_path / "hot", "--audio", audio)
    assert code == 0, err
    assert last_number(out) == pytest.approx(expected, abs=0.005)
    assert f"{audio}: 18 files; " in out  # the durations' files, and what was left out
    (tmp_path / "bitrate.txt").write_text("".join(listed))
    code, out2, err = run_cli(
        capsys, "units", "bitrate", tmp_path / "hot", "--filelist", tmp_path / "bitrate.txt"
    )
    assert code == 0 and out2.splitlines()[-1] == out.splitlines()[-1], err
    assert "warning" not in err
    # half the list, and lines naming no units file: a part of the folder, said (sweep 5, F4)
    (tmp_path / "part.txt").write_text("".join(listed[:6]) + "zz.txt 1.0\n")
    code, out3, err = run_cli(
        capsys, "units", "bitrate", tmp_path / "hot", "--filelist", tmp_path / "part.txt"
    )
    assert code == 0, err
    assert (
        f"audiorepro: warning: {tmp_path / 'hot'}: bitrate of 6 files: 1 of the 7 files of "
        f"{tmp_path / 'part.txt'} have no units file here (first: zz.txt) and count for neither "
        "N nor D, as the official evaluation skips them; 12 of the 18 units files are not in "
        "the list (first: S002_garden0.txt) and count for nothing"
    ) in err, err
    with pytest.raises(SystemExit) as usage:
        main(["units", "bitrate", str(tmp_path / "hot")])
    assert usage.value.code == 2
    half = tmp_path / "half"  # a third of the audio: the other units files count for nothing
    half.mkdir()
    for wav in sorted(audio.glob("S001_*.wav")):
        shutil.copy(wav, half)
    code, out, err = run_cli(capsys, "units", "bitrate", tmp_path / "hot", "--audio", half)
    assert code == 0 and last_number(out) != last_number(out2), err
    assert (
        f"audiorepro: warning: {tmp_path / 'hot'}: bitrate of 6 of its 18 units files: 12 have "
        f"no audio file under {half} (first: S002_garden0.txt) and count for nothing"
    ) in err, err
    longer = tmp_path / "longer"  # other recordings of the same names: refused
    longer.mkdir()
    for wav in sorted(audio.glob("*.wav")):
        samples, rate = sf.read(wav)
        sf.write(longer / wav.name, np.concatenate([samples, np.zeros(2 * rate), samples]), rate)
    code, _, err = run_cli(capsys, "units", "bitrate", tmp_path / "hot", "--audio", longer)
    assert code == 1 and "these are not the durations of the recordings" in err, err
    assert "(other recordings of the same names?)" in err
    in_ms = tmp_path / "ms.txt"  # the commonest slip: a duration column in milliseconds
    in_ms.write_text("".join(f"{line.split()[0]} {float(line.split()[1]) * 1000:.0f}\n"
                             for line in listed))  # fmt: skip
    code, _, err = run_cli(capsys, "units", "bitrate", tmp_path / "hot", "--filelist", in_ms)
    assert code == 1 and "(durations in milliseconds?)" in err, err
    assert re.search(r"hot/S001_garden0.txt: \d+ lines, a line every 0.04 s: ", err), err
    (tmp_path / "hot" / "S002_yellow1.txt").unlink()  # the folder no longer matches the audio
    code, _, err = run_cli(capsys, "units", "bitrate", tmp_path / "hot", "--audio", audio)
    assert code == 1 and "no S002_yellow1.txt (and 0 more of the 18 audio files" in err

    code, out, err = run_cli(
        capsys, "units", "voice", tmp_path / "u", "--audio", audio,
        "--set", "inverter_train.max_steps=2", "--out", tmp_path / "v",
    )  # fmt: skip
    assert code == 0, err
    assert re.search(
        rf"trained the inverter 2 steps on \d+ pieces of 18 files -> {tmp_path / 'v'}", out
    )
    # the voice's own recordings (and the units run's) are never written over, not even
    # with --force: resynth of another folder into them replaced them before
    before = {p.name: p.read_bytes() for p in audio.glob("*.wav")}
    (tmp_path / "other").mkdir()
    shutil.copy(audio / "S001_garden0.wav", tmp_path / "other")
    for out_dir in (audio, audio / "spoken"):
        code, _, err = run_cli(
            capsys, "units", "resynth", tmp_path / "v", "--audio", tmp_path / "other",
            "--out", out_dir, "--force",
        )  # fmt: skip
        assert code == 1 and "VOICE's --audio" in err, err
    assert {p.name: p.read_bytes() for p in audio.glob("*.wav")} == before
    assert not (audio / "spoken").exists()
    code, out, err = run_cli(
        capsys, "units", "resynth", tmp_path / "v", "--audio", audio, "--out", tmp_path / "w"
    )
    assert code == 0, err
    assert "wrote 18 wavs (16 kHz)" in out and np.isfinite(last_number(out))
    for name in ("S001_garden0", "S003_window1"):
        spoken, sr = sf.read(tmp_path / "w" / f"{name}.wav")
        source = sf.info(audio / f"{name}.wav")
        assert sr == 16000 and np.isfinite(spoken).all() and np.abs(spoken).max() > 0
        assert abs(len(spoken) / sr - source.frames / source.samplerate) <= 0.02
    code, _, err = run_cli(
        capsys, "units", "voice", tmp_path / "u", "--audio", audio,
        "--set", "model.d_model=8", "--out", tmp_path / "v2",
    )  # fmt: skip
    assert code == 1 and "--set model.d_model: not used" in err
    code, _, err = run_cli(
        capsys, "units", "resynth", tmp_path / "u", "--audio", audio, "--out", tmp_path / "w2"
    )
    assert code == 1 and "not a voice run" in err
    # A silent file in the voice's folder is left out of the inverter's training and named.
    voice = tmp_path / "voice"
    voice.mkdir()
    for name in ("S001_garden0", "S002_yellow1"):
        (voice / f"{name}.wav").symlink_to(audio / f"{name}.wav")
    sf.write(voice / "quiet.wav", np.zeros(16000, dtype=np.float32), 16000)
    code, out, err = run_cli(
        capsys, "units", "voice", tmp_path / "u", "--audio", voice,
        "--set", "inverter_train.max_steps=2", "--out", tmp_path / "v3",
    )  # fmt: skip
    assert code == 0, err
    assert "pieces of 2 files" in out and "quiet.wav (silent: every sample is 0)" in out
    info = json.loads((tmp_path / "v3" / "voice.json").read_text())
    assert info["files"] == 2 and [why for _, why in info["left_out"]] == [
        "silent: every sample is 0"
    ]


def test_voice_and_resynthesis_of_units_that_normalise_per_speaker(corpus, tmp_path, capsys):
    """``units train``'s default on several speakers normalises per speaker; ``units voice``
    refused such a run ("resynthesis reads one file at a time", sweep 5, F6), so the book's
    way to hear the units failed for the common case. Now the voice's folder is read as one
    speaker and ``units resynth`` reads each speaker's files together, as ``units encode``."""
    audio = corpus / "audio"
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", audio, "--preset", "smoke",
        "--set", "train.max_steps=2", "--set", "train.segment_frames=32",
        "--set", "model.feature_norm=speaker", "--out", tmp_path / "u",
    )  # fmt: skip
    assert code == 0, err
    voice = tmp_path / "voice"
    voice.mkdir()
    for wav in sorted(audio.glob("S001_*.wav")):
        shutil.copy(wav, voice)
    code, out, err = run_cli(
        capsys, "units", "voice", tmp_path / "u", "--audio", voice,
        "--set", "inverter_train.max_steps=2", "--out", tmp_path / "v",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli(
        capsys, "units", "resynth", tmp_path / "v", "--audio", audio, "--out", tmp_path / "w"
    )
    assert code == 0, err
    assert "wrote 18 wavs (16 kHz)" in out and np.isfinite(last_number(out))
    spoken, sr = sf.read(tmp_path / "w" / "S002_yellow1.wav")
    assert sr == 16000 and np.isfinite(spoken).all() and np.abs(spoken).max() > 0
    from audiorepro.experiments.zerospeech.inverter import resynthesize
    from audiorepro.experiments.zerospeech.voice import load_voice

    run = load_voice(tmp_path / "v")
    with pytest.raises(ValueError, match="normalise the speaker's files together"):
        resynthesize(run.units.model, run.inverter, np.zeros((50, 39), np.float32), None, 1)


def test_awe_dtw_is_the_mfcc_dtw_baseline_of_a_segments_table(corpus, tmp_path, capsys):
    """``awe dtw``: path-normalised angular DTW over the MFCC frames ``awe embed`` reads, every
    pair of rows ranked by distance: equal to a brute-force AP over a plain DTW per pair; a
    table without a repeated word is an error."""
    from audiorepro.data.recordings import read_segments
    from audiorepro.experiments.awe import recordings as awe
    from audiorepro.metrics.dtw import dtw_distance

    code, out, err = run_cli(capsys, "awe", "dtw", "--segments", corpus / "seg.tsv")
    assert code == 0, err
    assert "18 segments, 153 pairs, 45 of one word" in out
    rows = read_segments(corpus / "seg.tsv")
    feats = awe.segment_features(rows)
    scored = []
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            d = dtw_distance(feats[a], feats[b], distance="cosine")
            scored.append((d, rows[a].word == rows[b].word))
    scored.sort(key=lambda pair: pair[0])
    hits, precisions = 0, []
    for rank, (_, same) in enumerate(scored, start=1):
        if same:
            hits += 1
            precisions.append(hits / rank)
    assert len({d for d, _ in scored}) == len(scored)  # no ties: the plain AP is exact
    assert last_number(out) == pytest.approx(np.mean(precisions), abs=5e-5)
    assert awe.dtw_table_ap(corpus / "seg.tsv")["ap"] == pytest.approx(np.mean(precisions))

    subset = awe.dtw_table_ap(corpus / "seg.tsv", tokens=8, seed=1)
    assert subset["tokens"] == 8 and subset["num_pairs"] == 28
    lone = tmp_path / "lone.tsv"
    lone.write_text(HEADER + "".join(
        f"{corpus}/audio/S001_{w}0.wav\t{w}\tS001\t\t\n" for w in WORDS
    ))  # fmt: skip
    code, _, err = run_cli(capsys, "awe", "dtw", "--segments", lone)
    assert code == 1 and "lone.tsv: no word occurs twice among the 3 segments" in err
    # a --tokens subset without a pair names the subset, not the table (sweep 5, F9.3)
    code, _, err = run_cli(capsys, "awe", "dtw", "--segments", corpus / "seg.tsv", "--tokens", 2)
    assert code == 1, err
    assert re.search(
        r"seg.tsv: no word occurs twice among the 2 segments drawn by --tokens 2 \(the "
        r"table's 18 rows hold \d+ same-word pairs: give a larger --tokens, or none\)",
        err,
    ), err


def test_python_dash_m_runs_the_same_command(corpus, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    items = tmp_path / "w.item"
    done = subprocess.run(
        [sys.executable, "-m", "audiorepro", "abx", "items", "--segments", str(corpus / "seg.tsv"),
         "--out", str(items)],
        capture_output=True, text=True, env=env, timeout=subprocess_timeout(120),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert items.read_text().splitlines()[1] == "S001_garden0 0.0000000 1.0000000 garden - - S001"
    bad = subprocess.run(
        [sys.executable, "-m", "audiorepro", "abx", "items", "--segments", str(tmp_path / "no"),
         "--out", str(items)],
        capture_output=True, text=True, env=env, timeout=subprocess_timeout(120),
    )  # fmt: skip
    assert bad.returncode == 1 and "no:" in bad.stderr and "file not found" in bad.stderr


def test_bad_inputs_exit_nonzero_naming_file_line_field(corpus, tmp_path, capsys):
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", tmp_path / "missing", "--out", tmp_path / "r"
    )
    assert code == 1 and "missing: no such directory" in err
    twins = tmp_path / "twins"
    twins.mkdir()
    shutil.copy(corpus / "audio" / "S001_garden0.wav", twins / "S001_at.wav")
    sf.write(twins / "S001_at.flac", *sf.read(corpus / "audio" / "S001_garden0.wav"))
    code, _, err = run_cli(capsys, "units", "train", "--audio", twins, "--out", tmp_path / "r")
    assert code == 1 and "twins/S001_at.wav: file id 'S001_at' also used by" in err
    assert "S001_at.flac" in err and "rename one" in err
    bad = tmp_path / "bad.tsv"
    bad.write_text(
        HEADER
        + f"{corpus}/audio/S001_garden0.wav\tgarden\tS001\t\t\n"
        + f"{corpus}/audio/S001_garden1.wav\tgarden\tS001\t0.5\t\n"
    )
    code, _, err = run_cli(capsys, "abx", "items", "--segments", bad, "--out", tmp_path / "x")
    assert code == 1 and "bad.tsv:3: start/end: give both" in err
    bad.write_text(HEADER + f"{corpus}/audio/S001_garden0.wav\tgarden\tS001\tsoon\t1\n")
    code, _, err = run_cli(capsys, "abx", "items", "--segments", bad, "--out", tmp_path / "x")
    assert code == 1 and "bad.tsv:2: start: expected seconds, got 'soon'" in err
    bad.write_text(HEADER + f"{corpus}/audio/S001_garden0.wav\tgarden\tS001\t0\t99\n")
    code, _, err = run_cli(capsys, "abx", "items", "--segments", bad, "--out", tmp_path / "x")
    assert code == 1 and "bad.tsv:2: end: 99 s is past the end" in err
    bad.write_text("path\tword\tspeaker\n")
    code, _, err = run_cli(capsys, "abx", "items", "--segments", bad, "--out", tmp_path / "x")
    assert code == 1 and "bad.tsv:1: expected the tab-separated header" in err
    code, _, err = run_cli(
        capsys,
        "units", "train", "--audio", corpus / "audio", "--preset", "smoke",
        "--set", "train.max_stepz=2", "--out", tmp_path / "r",
    )  # fmt: skip
    assert code == 1 and "field 'train'" in err and "'max_stepz' (did you mean 'max_steps'" in err
    code, _, err = run_cli(
        capsys,
        "awe", "train", "--segments", corpus / "seg.tsv", "--preset", "smoke",
        "--set", "modle.d_model=8", "--out", tmp_path / "r",
    )  # fmt: skip
    assert code == 1 and "unknown key 'modle'" in err
    lexicon = tmp_path / "lex.txt"
    lexicon.write_text("GARDEN G AA R D AH N\nYELLOW Y EH L OW\n")
    code, _, err = run_cli(
        capsys,
        "awe", "train", "--segments", corpus / "seg.tsv", "--lexicon", lexicon,
        "--preset", "smoke", "--out", tmp_path / "r",
    )  # fmt: skip
    assert code == 1 and re.search(r"seg.tsv:\d+: word: 'window' is not in the lexicon", err)
    np.savez(tmp_path / "e.npz", embeddings=np.ones((2, 3)))
    code, _, err = run_cli(capsys, "awe", "ap", tmp_path / "e.npz")
    assert code == 1 and "e.npz: no array 'labels'" in err
    with pytest.raises(SystemExit) as usage:
        main(["units", "encode"])
    assert usage.value.code == 2


def test_a_folder_whose_file_names_repeat_across_speaker_folders(corpus, tmp_path, capsys):
    """``spk/001.wav`` layouts (``--speaker-of parent``): ids become paths under the folder,
    ``units encode`` mirrors the subfolders, ``abx items --audio`` names items the same way, and
    the score equals that of the same audio in a flat folder of unique names. A ``.WAV`` name
    with a space and a ``.flac`` file are read too."""
    flat, nested = corpus / "audio", tmp_path / "nested"
    for wav in sorted(flat.glob("*.wav")):
        speaker, word = wav.stem.split("_")
        (nested / speaker).mkdir(parents=True, exist_ok=True)
        if word == "garden1" and speaker == "S001":
            shutil.copy(wav, nested / speaker / "garden 1.WAV")
        elif word == "yellow0" and speaker == "S002":
            sf.write(nested / speaker / "yellow0.flac", *sf.read(wav), subtype="PCM_16")
        else:
            shutil.copy(wav, nested / speaker / f"{word}.wav")
    code, _, err = run_cli(
        capsys,
        "units", "train", "--audio", nested, "--speaker-of", "parent", "--preset", "smoke",
        "--set", "train.max_steps=2", "--set", "train.segment_frames=32", "--out", tmp_path / "u",
    )  # fmt: skip
    assert code == 0, err
    units = tmp_path / "units"  # beside the audio: a command never writes into its input
    for folder, sub in ((flat, "flat"), (nested, "nested")):
        code, _, err = run_cli(
            capsys, "units", "encode", tmp_path / "u", "--audio", folder, "--out", units / sub
        )
        assert code == 0, err
    assert (units / "nested/S003/window1.txt").is_file()
    assert (units / "nested/S001/garden_1.txt").is_file()
    assert (units / "nested/S002/yellow0.txt").read_text() == (
        units / "flat/S002_yellow0.txt"
    ).read_text()

    rows = []
    for wav in sorted(flat.glob("*.wav")):
        speaker, word = wav.stem.split("_")
        name = {("S001", "garden1"): "garden 1.WAV", ("S002", "yellow0"): "yellow0.flac"}.get(
            (speaker, word), f"{word}.wav"
        )
        rows.append(f"{nested / speaker / name}\t{word[:-1]}\t{speaker}\t\t\n")
    (tmp_path / "nested.tsv").write_text(HEADER + "".join(rows))
    code, _, err = run_cli(
        capsys, "abx", "items", "--segments", tmp_path / "nested.tsv", "--out", tmp_path / "n.item"
    )
    assert code == 1 and re.search(r"nested.tsv:\d+: path: .* have one file name", err)
    assert "give --audio DIR" in err
    code, out, err = run_cli(
        capsys,
        "abx", "items", "--segments", tmp_path / "nested.tsv", "--audio", nested,
        "--out", tmp_path / "n.item",
    )  # fmt: skip
    assert code == 0, err
    lines = (tmp_path / "n.item").read_text().splitlines()
    assert "S001/garden_1 0.0000000 1.0000000 garden - - S001" in lines
    code, out, err = run_cli(capsys, "abx", "score", tmp_path / "n.item", units / "nested")
    assert code == 0, err
    code, _, err = run_cli(
        capsys, "abx", "items", "--segments", corpus / "seg.tsv", "--out", tmp_path / "f.item"
    )
    assert code == 0, err
    code, flat_out, err = run_cli(capsys, "abx", "score", tmp_path / "f.item", units / "flat")
    assert code == 0, err
    assert 0 <= last_number(out) <= 100 and last_number(out) == last_number(flat_out)

    # Items named by file name against units named by path: the error says what to do.
    (tmp_path / "one.tsv").write_text(HEADER + "".join(r for r in rows if "/S003/" in r))
    code, _, err = run_cli(
        capsys, "abx", "items", "--segments", tmp_path / "one.tsv", "--out", tmp_path / "o.item"
    )
    assert code == 0, err  # one speaker's names do not repeat
    code, _, err = run_cli(capsys, "abx", "score", tmp_path / "o.item", units / "nested")
    assert code == 1 and "unknown file 'garden0'" in err and "S003/garden0.txt" in err
    assert "abx items --audio DIR" in err

    # A speaker map must name a repeated file name by its path.
    speaker_map = tmp_path / "map.tsv"
    speaker_map.write_text("garden0.wav\tS001\n")
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", nested, "--speaker-of", speaker_map,
        "--out", tmp_path / "r",
    )  # fmt: skip
    assert code == 1 and "map.tsv:1: file 'garden0' names several files" in err


def test_awe_train_spells_words_no_dictionary_has(corpus, tmp_path, capsys):
    """``--lexicon characters``: the written view is the spelling, so words of any language
    train (here the English recordings labelled in Spanish); cmudict refuses them by line."""
    spanish = {"garden": "jardín", "yellow": "amarillo", "window": "ventana"}
    rows = (corpus / "seg.tsv").read_text().splitlines()[1:]
    table = tmp_path / "es.tsv"
    table.write_text(
        HEADER
        + "".join(
            "\t".join([f"{corpus}/{f[0]}", spanish[f[1]], *f[2:]]) + "\n"
            for f in (r.split("\t") for r in rows)
        )
    )
    code, _, err = run_cli(
        capsys, "awe", "train", "--segments", table, "--preset", "smoke", "--out", tmp_path / "c"
    )
    assert code == 1 and re.search(
        r"es.tsv:2: word: 'jardín' is not in the lexicon 'cmudict'", err
    )
    assert "spell every word: --lexicon characters" in err
    code, out, err = run_cli(
        capsys,
        "awe", "train", "--segments", table, "--lexicon", "characters", "--preset", "smoke",
        "--set", "train.max_steps=2", "--out", tmp_path / "a",
    )  # fmt: skip
    assert code == 0, err
    info = json.loads((tmp_path / "a/run.json").read_text())
    assert info["pronunciations"]["jardín"] == list("jardín")
    assert sorted(info["phones_to_ids"]) == sorted(set("jardínamarilloventana"))
    assert sorted(info["phones_to_ids"].values()) == list(
        range(1, len(set("jardínamarilloventana")) + 1)
    )
    code, out, err = run_cli(
        capsys, "awe", "embed", tmp_path / "a", "--segments", table, "--out", tmp_path / "e.npz"
    )
    assert code == 0, err
    with np.load(tmp_path / "e.npz") as arrays:
        assert set(arrays["labels"]) == set(spanish.values())


def test_train_commands_refuse_fields_a_single_run_does_not_read(corpus, tmp_path, capsys):
    """``--set`` of a field one run ignores (a chapter's sweep, the corpus root) is an error
    naming it, never silently dropped."""
    for argv, key, why in (
        (("units", "train", "--audio", corpus / "audio"), "corpus.root=/x", "from --audio"),
        (("units", "train", "--audio", corpus / "audio"), "codebook_sizes=[8]", "pages"),
        (("awe", "train", "--segments", corpus / "seg.tsv"), "sweep_heads=[2]", "pages"),
        (("awe", "train", "--segments", corpus / "seg.tsv"), "corpus.root=/x", "--segments"),
    ):
        code, _, err = run_cli(
            capsys, *argv, "--preset", "smoke", "--set", key, "--out", tmp_path / "r"
        )
        assert code == 1, (argv, key)
        assert f"--set {key.split('=')[0]}: not used" in err and why in err
        assert "the fields that apply: " in err and "train" in err
    assert not (tmp_path / "r").exists()


def test_awe_train_honours_select_and_says_which_epochs_weights_it_kept(corpus, tmp_path, capsys):
    """``--set select=final`` makes ``awe embed`` use the last epoch's weights (both are
    saved); the command prints the kept epoch, and warns when the development AP saturates."""
    from audiorepro.experiments.awe import recordings as awe
    from audiorepro.storage import load_tensors
    from audiorepro.training.selection import WEIGHT_FILES

    for select in ("best", "final"):
        code, out, err = run_cli(
            capsys,
            "awe", "train", "--segments", corpus / "seg.tsv", "--preset", "smoke",
            "--set", "train.num_epochs=3", "--set", f"select={select}",
            "--out", tmp_path / select,
        )  # fmt: skip
        assert code == 0, err
        info = json.loads((tmp_path / select / "run.json").read_text())
        if select == "final":
            assert info["kept_epoch"] == 3
        assert f"kept the weights of epoch {info['kept_epoch']} (select: {select})" in out
        assert ("warning: the development words reached AP 1" in err) == (
            select == "best" and info["best_dev"] >= 1.0
        )
        model, _ = awe.load_run(tmp_path / select)
        saved, _ = load_tensors(tmp_path / select / WEIGHT_FILES[select])
        for name, tensor in model.state_dict().items():
            assert torch.equal(tensor, saved[name]), name

    steps = [1, 2, 3, 4, 5, 6]
    result = TrainResult(steps=steps, epochs=[0, 0, 1, 1, 2, 2], final_epoch=3)
    events = [(2, "best"), (4, "best"), (6, "decay")]
    assert awe.kept_epoch(result, events, "best") == 2
    assert awe.kept_epoch(result, events, "final") == 3
    assert awe.kept_epoch(result, [], "best") == 3


def test_parse_sets_reads_yaml_values_and_refuses_pairs_without_equals():
    assert parse_sets(["train.max_steps=5", "train.lr=1e-3", "seed=2"]) == {
        "train.max_steps": 5,
        "train.lr": "1e-3",
        "seed": 2,
    }
    with pytest.raises(ConfigError, match="--set 'train.max_steps': expected key=value"):
        parse_sets(["train.max_steps"])


def test_segments_writes_the_table_a_folder_layout_implies(corpus, tmp_path, capsys):
    """Speech Commands' layout (word/speaker_nohash_n.wav) as a whole-file table: the same rows,
    and the same DTW baseline, as the table written by hand."""
    from audiorepro.data.recordings import read_segments

    commands = tmp_path / "commands"
    hand = read_segments(corpus / "seg.tsv")
    for row in hand:
        n = row.stem[-1]
        target = commands / row.word / f"{row.speaker}_nohash_{n}.wav"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(row.path, target)
    table = tmp_path / "tables" / "seg.tsv"
    code, out, _ = run_cli(capsys, "segments", "--audio", commands, "--out", table)
    assert code == 0 and f"wrote {len(hand)} whole-file rows" in out and "0 files" in out
    rows = read_segments(table)
    assert sorted((r.word, r.speaker, r.start, r.end) for r in rows) == sorted(
        (r.word, r.speaker, None, None) for r in hand
    )
    # audio outside the table's folder: absolute paths; under it: relative ones
    assert table.read_text().splitlines()[1].startswith(str(commands.resolve()) + "/")
    beside = tmp_path / "seg.tsv"
    assert run_cli(capsys, "segments", "--audio", commands, "--out", beside)[0] == 0
    assert beside.read_text().splitlines()[1].startswith("commands/")
    assert [(r.path.resolve(), r.word) for r in read_segments(beside)] == [
        (r.path.resolve(), r.word) for r in rows
    ]
    code, made, _ = run_cli(capsys, "awe", "dtw", "--segments", table)
    code_hand, written, _ = run_cli(capsys, "awe", "dtw", "--segments", corpus / "seg.tsv")
    assert code == code_hand == 0 and last_number(made) == last_number(written)

    # a map labels the files it lists; the others are left out and counted
    words = tmp_path / "words.tsv"
    words.write_text("garden/S001_nohash_0.wav\tgarden\nyellow/S002_nohash_1\tyellow\n")
    code, out, _ = run_cli(
        capsys, "segments", "--audio", commands, "--word-of", words, "--out", table, "--force"
    )
    assert code == 0 and "wrote 2 whole-file rows" in out
    assert f"{len(hand) - 2} files without a word left out" in out
    assert sorted((r.word, r.speaker) for r in read_segments(table)) == [
        ("garden", "S001"),
        ("yellow", "S002"),
    ]
    words.write_text("garden/S001_nohash_0.wav\tgarden\nyellow/S002_nohash_1\tyellow window\n")
    code, _, err = run_cli(
        capsys, "segments", "--audio", commands, "--word-of", words, "--out", table, "--force"
    )
    assert code == 1 and "words.tsv:2: word: 'yellow window' contains whitespace" in err


def test_scores_refuse_what_they_cannot_score_and_warn_when_weak(corpus, tmp_path, capsys):
    """Degenerate inputs exit 1 naming the input and the count, where they printed a number
    before (AP 1.0000, ABX 50.000, the start of each file); a weak score is printed with
    ``audiorepro: warning:`` on stderr."""
    one_word = tmp_path / "one_word.tsv"
    rows = [line.split("\t") for line in (corpus / "seg.tsv").read_text().splitlines()[1:]]
    garden = [[f"{corpus}/{r[0]}", *r[1:]] for r in rows if r[1] == "garden"]
    one_word.write_text(HEADER + "".join("\t".join(r) + "\n" for r in garden))
    code, out, err = run_cli(capsys, "awe", "dtw", "--segments", one_word)
    assert code == 1 and out == "", out
    assert f"one_word.tsv: all {len(garden)} segments are of one word ('garden')" in err

    rng = np.random.default_rng(0)
    emb = tmp_path / "one.npz"
    np.savez(emb, embeddings=rng.normal(size=(4, 3)), labels=np.array(["yes"] * 4))
    code, _, err = run_cli(capsys, "awe", "ap", emb)
    assert code == 1 and "one.npz: labels: all 4 rows carry one label" in err
    np.savez(emb, embeddings=np.ones((4, 3)), labels=np.array(["a", "a", "b", "b"]))
    code, _, err = run_cli(capsys, "awe", "ap", emb)
    assert code == 1 and "one.npz: embeddings: all 4 rows are the same vector" in err
    np.savez(
        emb,
        embeddings=rng.normal(size=(4, 3)),
        labels=np.array(["a", "a", "b", "b"]),
        speakers=np.array(["S1"] * 4),
    )
    code, out, err = run_cli(capsys, "awe", "ap", emb)
    assert code == 0 and 0.0 < last_number(out) <= 1.0
    assert err.count("audiorepro: warning: ") == 2
    assert "one.npz: speakers: all 4 rows are from one speaker (S1)" in err
    assert "one.npz: labels: the AP rests on 2 same-label pair(s) of 4 rows" in err

    # codebook vectors (negative values) scored with kl; real frames with levenshtein
    sub = tmp_path / "sub"
    sub.mkdir()
    lines = []
    for s in (1, 2):
        for k, phone in enumerate("aabb"):
            frames = rng.normal(size=(8, 3))
            (sub / f"S{s}_{k}.txt").write_text(
                "\n".join(" ".join(f"{v:.6f}" for v in row) for row in frames) + "\n"
            )
            lines.append(f"S{s}_{k} 0 1 {phone} - - S{s}\n")
    items = tmp_path / "w.item"
    items.write_text("#file onset offset #phone prev-phone next-phone speaker\n" + "".join(lines))
    code, out, err = run_cli(capsys, "abx", "score", items, sub, "--distance", "kl")
    assert code == 1 and out == ""
    assert "w.item: --distance kl: S1_0 frame 0 has a negative value" in err
    assert "(8 of the 8 files have such frames)" in err
    code, _, err = run_cli(capsys, "abx", "score", items, sub, "--distance", "levenshtein")
    assert code == 1 and "no frame value occurs in two of the 8 items (64 frames)" in err
    # whole files in seconds (0.08 s at 10 ms) scored at 40 ms: 1 frame of 8
    items.write_text(items.read_text().replace(" 0 1 ", " 0 0.08 "))
    code, _, err = run_cli(capsys, "abx", "score", items, sub, "--frame-shift", "0.04")
    assert code == 1 and "at a frame shift of 0.04 s the items reach at most 12%" in err
    code, out, err = run_cli(capsys, "abx", "score", items, sub, "--frame-shift", "0.01")
    assert code == 0 and err == ""
    # every item twice: within-speaker ABX was 0.000
    items.write_text(items.read_text() + "".join(lines).replace(" 0 1 ", " 0 0.08 "))
    code, _, err = run_cli(capsys, "abx", "score", items, sub, "--mode", "within")
    assert code == 1 and "w.item:10: item S1_0 0.0-0.08 repeats line 2 (8 of the 16" in err
    # one speaker, within: printed with a warning
    one = tmp_path / "one.item"
    one.write_text("#file onset offset #phone prev-phone next-phone speaker\n" + "".join(
        line for line in lines if line.startswith("S1_")
    ))  # fmt: skip
    code, out, err = run_cli(capsys, "abx", "score", one, sub, "--mode", "within")
    assert code == 0 and 0.0 <= last_number(out) <= 100.0
    assert "audiorepro: warning: " in err and "all 4 items are from one speaker (S1)" in err


def test_awe_train_refuses_development_rows_of_one_word(corpus, tmp_path, capsys):
    """The development AP of one word is 1 whatever the model, so it cannot pick an epoch: a
    ``--dev`` table of one word, or a table where only one word can lend rows, is refused."""
    rows = [line.split("\t") for line in (corpus / "seg.tsv").read_text().splitlines()[1:]]
    garden = [[f"{corpus}/{r[0]}", *r[1:]] for r in rows if r[1] == "garden"]
    dev = tmp_path / "dev.tsv"
    dev.write_text(HEADER + "".join("\t".join(r) + "\n" for r in garden[:2]))
    code, _, err = run_cli(
        capsys, "awe", "train", "--segments", corpus / "seg.tsv", "--dev", dev,
        "--preset", "smoke", "--out", tmp_path / "run",
    )  # fmt: skip
    assert code == 1 and "dev.tsv: the 2 development rows are all of one word ('garden')" in err
    lopsided = tmp_path / "lopsided.tsv"
    others = [[f"{corpus}/{r[0]}", *r[1:]] for r in rows if r[1] != "garden"][::3]
    lopsided.write_text(HEADER + "".join("\t".join(r) + "\n" for r in garden + others))
    code, _, err = run_cli(
        capsys, "awe", "train", "--segments", lopsided, "--preset", "smoke",
        "--out", tmp_path / "run",
    )  # fmt: skip
    assert code == 1 and "only one word ('garden') has 4 segments" in err
    assert not (tmp_path / "run").exists()


def test_awe_train_counts_and_prints_the_rows_too_short_to_embed(corpus, tmp_path, capsys):
    """A row shorter than min_frames (2 frames of 10 ms) is left out of training, and the run
    says how many, per split, and records them; nothing is dropped without a word."""
    rows = (corpus / "seg.tsv").read_text().splitlines()[1:]
    short = rows[0].split("\t")
    short[1], short[3:5] = "short", ["0.100", "0.110"]  # 10 ms: one frame (of another word:
    # as the file's own word, it would be its whole-file row's token again, which is refused)
    table = tmp_path / "short.tsv"
    table.write_text(HEADER + "".join(f"{r}\n" for r in rows) + "\t".join(short) + "\n")
    (tmp_path / "audio").symlink_to(corpus / "audio")  # the table's paths are relative
    code, out, err = run_cli(
        capsys,
        "awe", "train", "--segments", table, "--preset", "smoke",
        "--set", "train.max_steps=2", "--out", tmp_path / "run",
    )  # fmt: skip
    assert code == 0, err
    info = json.loads((tmp_path / "run/run.json").read_text())
    assert sum(info["left_out_short"].values()) == 1
    splits = ", ".join(f"{s} {n}" for s, n in info["left_out_short"].items())
    first = f"{table}:{len(rows) + 2}, 1 frame"  # the header is line 1, the short row the last
    assert f"left out 1 rows shorter than 2 frames of 10 ms ({splits}; first: {first})" in out
    assert info["first_short"] == first
    code, out, _ = run_cli(
        capsys,
        "awe", "train", "--segments", corpus / "seg.tsv", "--preset", "smoke",
        "--set", "train.max_steps=2", "--out", tmp_path / "full",
    )  # fmt: skip
    assert code == 0 and "left out" not in out


def test_segments_reads_free_spoken_digit_names_and_warns_of_the_word_as_speaker(tmp_path, capsys):
    """Names like 7_jackson_32.wav: --speaker-of field:2 gives the speakers; prefix takes the
    word for the speaker, which the command says (exit 0: the table is valid); without
    --speaker-of the word is seen to be the first field and the speaker taken from the second."""
    from audiorepro.data.recordings import read_segments

    audio = tmp_path / "fsdd"
    audio.mkdir()
    rng = np.random.default_rng(0)
    for name in ("7_jackson_0", "7_theo_0", "3_jackson_1", "3_theo_1"):
        sf.write(audio / f"{name}.wav", 0.1 * rng.standard_normal(4000), 8000)
    table = tmp_path / "seg.tsv"
    code, _, err = run_cli(
        capsys, "segments", "--audio", audio, "--word-of", "prefix",
        "--speaker-of", "prefix", "--out", table,
    )  # fmt: skip
    assert code == 0
    assert "audiorepro: warning: each of the 2 speakers says one word only" in err
    assert "--speaker-of field:2" in err
    code, _, err = run_cli(
        capsys, "segments", "--audio", audio, "--word-of", "prefix",
        "--speaker-of", "field:2", "--out", table, "--force",
    )  # fmt: skip
    assert code == 0 and "warning" not in err
    assert sorted((r.word, r.speaker) for r in read_segments(table)) == [
        ("3", "jackson"),
        ("3", "theo"),
        ("7", "jackson"),
        ("7", "theo"),
    ]
    # no --speaker-of: the word is the names' first field, so the speaker is their second
    code, out, err = run_cli(
        capsys, "segments", "--audio", audio, "--word-of", "prefix", "--out", table, "--force"
    )  # fmt: skip
    assert code == 0 and "warning" not in err
    assert "speakers: the names' second field, 2 speakers (jackson, theo)" in out
    assert "the word (--word-of) is their first); --speaker-of prefix for the first" in out
    assert {r.speaker for r in read_segments(table)} == {"jackson", "theo"}
    # a flat folder read with --word-of parent: every word is the folder's own name
    code, _, err = run_cli(
        capsys, "segments", "--audio", audio, "--speaker-of", "field:2", "--out", table,
        "--force",
    )  # fmt: skip
    assert code == 0 and "audiorepro: warning: all 4 files have one word, 'fsdd'" in err
    assert "put each word's files in a folder named by the word" in err


def test_abx_score_of_a_folder_that_is_not_there_says_so(tmp_path, capsys):
    item = tmp_path / "x.item"
    item.write_text("#file onset offset #phone speaker\na 0 1 w s\n")
    for given, why in ((tmp_path / "gone", "does not exist"), (item, "is a file")):
        code, _, err = run_cli(capsys, "abx", "score", item, given)
        assert code == 1 and f"{given}: {why}; SUBMISSION_DIR is the folder" in err


def test_awe_dtw_counts_name_their_option(capsys):
    for option, value, expected in (("--seed", "-1", ">= 0"), ("--tokens", "1", ">= 2")):
        with pytest.raises(SystemExit) as stop:
            main(["awe", "dtw", "--segments", "x.tsv", option, value])
        assert stop.value.code == 2
        assert f"argument {option}: expected an integer {expected}" in capsys.readouterr().err


def test_training_shows_progress_on_a_terminal_on_stderr_only(
    corpus, tmp_path, capsys, monkeypatch
):
    """On a terminal the training commands show their progress (the pair search, the steps, the
    closing line), all on stderr: stdout holds the same lines as in a log or a pipe."""
    from audiorepro import cli

    train = (
        "units", "train", "--audio", corpus / "audio", "--preset", "smoke",
        "--set", "train.max_steps=3", "--set", "train.segment_frames=32",
    )  # fmt: skip
    awe_train = (
        "awe", "train", "--segments", corpus / "seg.tsv", "--preset", "smoke",
        "--set", "train.num_epochs=1",
    )  # fmt: skip
    outs = {}
    for shown in ("none", "lines"):
        monkeypatch.setattr(cli, "_progress", lambda shown=shown: shown)
        for name, argv in (("units", train), ("awe", awe_train)):
            code, out, err = run_cli(capsys, *argv, "--out", tmp_path / f"{name}-{shown}")
            assert code == 0, err
            outs[name, shown] = out, err
    for name in ("units", "awe"):
        (quiet, quiet_err), (shown, shown_err) = outs[name, "none"], outs[name, "lines"]
        assert shown.replace("-lines", "-none") == quiet
        assert "done:" in shown_err and "done:" not in quiet_err and "done:" not in shown
    assert "finding pairs among 18 files by DTW" in outs["units", "lines"][1]


def test_abx_score_reads_the_frame_shift_units_encode_recorded(corpus, tmp_path, capsys):
    """Items that end early in every file (the first 30 % of each word file) are scored at the
    frame shift `units encode` recorded, and another frame shift is refused, naming both."""
    code, _, err = run_cli(
        capsys, "units", "train", "--audio", corpus / "audio", "--preset", "smoke",
        "--set", "train.max_steps=2", "--set", "train.segment_frames=32", "--out", tmp_path / "u",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli(
        capsys, "units", "encode", tmp_path / "u", "--audio", corpus / "audio",
        "--out", tmp_path / "sub",
    )  # fmt: skip
    assert code == 0 and "one line every 0.04 s" in out, err
    rows = []
    for line in (corpus / "seg.tsv").read_text().splitlines()[1:]:
        path, word, speaker = line.split("\t")[:3]
        seconds = sf.info(corpus / path).duration
        rows.append(f"{corpus / path}\t{word}\t{speaker}\t0\t{0.3 * seconds:.3f}\n")
    (tmp_path / "early.tsv").write_text(HEADER + "".join(rows))
    code, _, err = run_cli(
        capsys, "abx", "items", "--segments", tmp_path / "early.tsv", "--audio", corpus / "audio",
        "--out", tmp_path / "early.item",
    )  # fmt: skip
    assert code == 0, err
    score = ("abx", "score", tmp_path / "early.item", tmp_path / "sub", "--frame-shift")
    code, out, err = run_cli(capsys, *score, "0.04")
    assert code == 0, err
    assert "units (codebook vectors) (this folder)" in out and "k-means units" in out
    code, out, err = run_cli(capsys, *score, "0.01")
    assert code == 1 and out == ""
    assert (
        "`units encode` wrote a line every 0.04 s (command.json), but --frame-shift is 0.01" in err
    )
    # the same lines without the record: the frame shift is not known, and the check stays
    (tmp_path / "sub" / "command.json").unlink()
    code, _, err = run_cli(capsys, *score, "0.04")
    assert code == 1 and "the items reach at most" in err


def test_a_step_budget_below_one_and_a_bad_value_set_twice_are_named(corpus, tmp_path, capsys):
    """`--set train.max_steps=0` named num_epochs (which the loader had lifted to it) before."""
    audio = ("units", "train", "--audio", corpus / "audio", "--preset", "smoke")
    table = ("awe", "train", "--segments", corpus / "seg.tsv", "--preset", "smoke")
    for argv in (audio, table):
        for steps in ("0", "-1"):
            code, _, err = run_cli(
                capsys, *argv, "--set", f"train.max_steps={steps}", "--out", tmp_path / "r"
            )
            assert code == 1 and "max_steps" in err and "num_epochs" not in err, err
        code, _, err = run_cli(
            capsys, *argv, "--set", "train.max_steps=3", "--set", "train.max_steps=abc",
            "--out", tmp_path / "r",
        )  # fmt: skip
        assert code == 1 and "--set train.max_steps=abc: " in err  # the one at fault
    assert not (tmp_path / "r").exists()


def test_output_piped_into_a_reader_that_stops_is_no_error(corpus, tmp_path):
    """``audiorepro awe dtw ... | head -1``: the reader has what it wanted and closes the pipe;
    the command ends quietly with the status a shell gives a process ended by SIGPIPE (141),
    as cat and grep do, not with an error to report (exit 1 before)."""
    import shlex

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    command = shlex.join([sys.executable, "-m", "audiorepro", "awe", "dtw", "--segments",
                          str(corpus / "seg.tsv")])  # fmt: skip
    done = subprocess.run(
        ["bash", "-c", f"{command} | head -c 0; echo status ${{PIPESTATUS[0]}}"],
        capture_output=True, text=True, env=env, timeout=subprocess_timeout(120),
    )  # fmt: skip
    assert done.stdout == "status 141\n", (done.stdout, done.stderr)
    assert "error" not in done.stderr and "Broken pipe" not in done.stderr, done.stderr
