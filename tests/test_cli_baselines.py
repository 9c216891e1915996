"""The baselines beside every result: ``abx score`` of a ``units encode`` folder prints the
units, the run's k-means units and the input frames on the same items, and ``awe ap`` of an
``awe embed`` .npz the MFCC + DTW AP on the same pairs, each number equal to the one computed
alone, with one sentence saying whether the model beats them (issue 39, item 2)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from test_cli import HEADER, WORDS, last_number, run_cli

from audiorepro.data.recordings import WORD_RULE
from audiorepro.data.speech_segments import average_frames
from audiorepro.experiments.zerospeech.baselines import ScoreRow, verdict
from audiorepro.experiments.zerospeech.recordings import load_units, unit_rows
from audiorepro.metrics.abx import abx_error
from conftest import REPO, espeak_word_files


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """18 eSpeak words (3 speakers x 3 words x 2 rates, 22.05 kHz), their tables and items, a
    tiny units run with its units encoded, and a tiny AWE run with its embeddings."""
    root = tmp_path_factory.mktemp("baselines")
    audio = root / "audio"
    audio.mkdir()
    rows, timed = [], []
    for name, word, voice, _, seconds in espeak_word_files(audio, WORDS):
        rows.append(f"audio/{name}\t{word}\t{voice}\t\t\n")
        timed.append(f"audio/{name}\t{word}\t{voice}\t0.02\t{round(seconds - 0.02, 3)}\n")
    (root / "seg.tsv").write_text(HEADER + "".join(rows))
    (root / "timed.tsv").write_text(HEADER + "".join(timed))
    steps = ("--set", "train.max_steps=2", "--set", "train.segment_frames=32")
    commands = [
        ("units", "train", "--audio", audio, "--preset", "smoke", *steps, "--out", root / "u"),
        ("units", "encode", root / "u", "--audio", audio, "--out", root / "vectors"),
        ("abx", "items", "--segments", root / "seg.tsv", "--out", root / "w.item"),
        ("abx", "items", "--segments", root / "timed.tsv", "--out", root / "s.item"),
        ("awe", "train", "--segments", root / "seg.tsv", "--preset", "smoke",
         "--set", "train.max_steps=2", "--out", root / "a"),
        ("awe", "embed", root / "a", "--segments", root / "seg.tsv", "--out", root / "e.npz"),
    ]  # fmt: skip
    for what in ("kmeans", "frames"):
        commands.append(
            ("units", "encode", root / "u", "--audio", audio, "--out", root / what,
             "--what", what)
        )  # fmt: skip
    for argv in commands:
        from audiorepro.cli import main

        assert main([str(a) for a in argv]) == 0, argv
    return root


def table(out: str) -> dict[str, float]:
    """``{row name: ABX error}`` of the side-by-side table ``abx score`` prints."""
    found = {}
    for line in out.splitlines():
        hit = re.match(r"^(units|k-means units|input frames|chance)\b.*?\s(\d+\.\d{3})\b", line)
        if hit:
            found[hit.group(1)] = float(hit.group(2))
    return found


def alone(capsys, *argv) -> float:
    """The number a command prints with ``--no-baseline``: its last line, and nothing else."""
    code, out, err = run_cli(capsys, *argv, "--no-baseline")
    assert code == 0, err
    assert "baseline" not in out and "MFCC + DTW" not in out and "k-means" not in out
    return last_number(out)


def test_abx_score_prints_the_units_beside_their_two_baselines(made, capsys):
    """(a) The three numbers equal those of ``abx score`` of the ``--what kmeans`` and
    ``--what frames`` folders scored one by one, and the library scorer's; the sentence says
    what the numbers say. (c) ``--no-baseline`` prints the units' number alone."""
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", made / "vectors")
    assert code == 0, err
    rows = table(out)
    assert set(rows) == {"units", "k-means units", "input frames", "chance"}, out
    assert rows["chance"] == 50.0
    assert "units (codebook vectors) (this folder)" in out and "(K = 64)" in out
    assert "input frames (mfcc, 10 ms)" in out
    for what, name in (
        ("vectors", "units"),
        ("kmeans", "k-means units"),
        ("frames", "input frames"),
    ):
        by_itself = alone(capsys, "abx", "score", made / "w.item", made / what)
        assert rows[name] == by_itself, (name, out)
        library = abx_error(made / what, made / "w.item")
        assert rows[name] == pytest.approx(library, abs=5e-4)
    assert alone(capsys, "abx", "score", made / "w.item", made / "vectors") == rows["units"]
    sentence = out.strip().splitlines()[-1]
    assert sentence.startswith("the units ")
    lost = {
        name: any(f"{word} {name}" in sentence for word in ("do not beat", "but not", "nor"))
        for name in ("the k-means baseline", "the input frames")
    }
    assert lost["the k-means baseline"] == (not rows["units"] < rows["k-means units"]), sentence
    assert lost["the input frames"] == (not rows["units"] < rows["input frames"]), sentence

    # a baseline folder is scored once, as the folder itself, beside the other baseline
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", made / "kmeans")
    assert code == 0, err
    assert set(table(out)) == {"k-means units", "input frames", "chance"}, out
    assert "k-means units (K = 64) (this folder)" in out
    assert out.strip().splitlines()[-1].startswith("the k-means units ")
    assert table(out)["input frames"] == rows["input frames"]


def test_items_in_seconds_read_each_baseline_at_its_own_frame_shift(made, capsys):
    """With ``--frame-shift 0.04`` (the units'), the frames are read every 10 ms and the
    k-means units every 40 ms: each row equals its folder scored alone at that shift."""
    code, out, err = run_cli(
        capsys, "abx", "score", made / "s.item", made / "vectors", "--frame-shift", "0.04"
    )
    assert code == 0, err
    rows = table(out)
    assert "frame shift" in out and "note:" not in out
    for what, name, shift in (
        ("vectors", "units", "0.04"),
        ("kmeans", "k-means units", "0.04"),
        ("frames", "input frames", "0.01"),
    ):
        by_itself = alone(
            capsys, "abx", "score", made / "s.item", made / what, "--frame-shift", shift
        )
        assert rows[name] == by_itself, (name, out)


def test_awe_ap_prints_mfcc_dtw_on_the_same_pairs(made, capsys):
    """(b) The baseline equals ``awe dtw`` of the table the embeddings came from, and the
    embeddings' AP is the number ``awe ap --no-baseline`` prints; (c) which prints no baseline."""
    from audiorepro.experiments.awe import recordings as awe

    code, out, err = run_cli(capsys, "awe", "ap", made / "e.npz")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == WORD_RULE
    values = {
        name: float(value)
        for name, value in (
            re.match(r"^(embeddings|MFCC \+ DTW|chance).*\s(\d\.\d{4})$", line).groups()
            for line in lines
            if re.match(r"^(embeddings|MFCC \+ DTW|chance)", line)
        )
    }
    code, dtw, err = run_cli(capsys, "awe", "dtw", "--segments", made / "seg.tsv")
    assert code == 0, err
    assert values["MFCC + DTW"] == last_number(dtw)
    assert values["embeddings"] == alone(capsys, "awe", "ap", made / "e.npz")
    assert values["embeddings"] == round(awe.embeddings_ap(made / "e.npz"), 4)
    assert values["chance"] == round(45 / 153, 4)  # 3 words x 6 tokens: 45 of 153 pairs
    assert "same-different AP over 153 pairs" in out
    # which frames the baseline read, and the awe dtw that gives its number (sweep 5, F3)
    norm = re.search(r"^the baseline reads the frames as the run does: normalised per (\w+) "
                     r"\(awe dtw --norm \1 of these rows gives its number\)$", out, re.M)  # fmt: skip
    assert norm, out
    code, dtw, err = run_cli(
        capsys, "awe", "dtw", "--segments", made / "seg.tsv", "--norm", norm.group(1)
    )
    assert code == 0 and values["MFCC + DTW"] == last_number(dtw), dtw
    assert "give --norm" not in dtw  # given
    beat = "beat" if values["embeddings"] > values["MFCC + DTW"] else "do not beat"
    assert lines[-1].startswith(f"the embeddings {beat} MFCC + DTW (AP ")
    with np.load(made / "e.npz") as arrays:
        assert str(arrays["segments"]) == str((made / "seg.tsv").resolve())
        assert arrays["rows"].tolist() == list(range(2, 20))  # table lines, header is 1


def test_the_baseline_is_scored_on_the_rows_the_embeddings_hold(made, tmp_path, capsys):
    """Some rows of the table, in another order: the baseline is ``awe dtw`` of a table of
    just those rows; labels that no longer match the recorded rows give no baseline."""
    with np.load(made / "e.npz") as arrays:
        kept = {k: arrays[k] for k in arrays.files}
    picked = [17, 3, 5, 10, 0, 8, 12, 14, 1, 6]
    subset = {k: kept[k][picked] if kept[k].ndim else kept[k] for k in kept}
    np.savez(tmp_path / "some.npz", **subset)
    lines = (made / "seg.tsv").read_text().splitlines()
    (tmp_path / "some.tsv").write_text(
        HEADER + "".join(f"{made}/{lines[1 + i]}\n" for i in picked)
    )
    code, out, err = run_cli(capsys, "awe", "ap", tmp_path / "some.npz")
    assert code == 0, err
    baseline = float(re.search(r"^MFCC \+ DTW.*\s(\d\.\d{4})$", out, re.M).group(1))
    code, dtw, err = run_cli(capsys, "awe", "dtw", "--segments", tmp_path / "some.tsv")
    assert code == 0, err
    assert "10 segments, 45 pairs" in dtw and baseline == last_number(dtw)
    code, whole, err = run_cli(capsys, "awe", "dtw", "--segments", made / "seg.tsv")
    assert last_number(whole) != baseline  # the subset's baseline is not the table's

    subset["labels"] = subset["labels"][::-1]
    np.savez(tmp_path / "swapped.npz", **subset)
    code, out, err = run_cli(capsys, "awe", "ap", tmp_path / "swapped.npz")
    assert code == 0, err
    assert "no baseline: " in out and "its rows and labels do not match the lines of" in out


def test_audio_changed_after_awe_embed_gives_no_baseline_and_a_cut_file_counts_its_rows(
    made, tmp_path, capsys
):
    """The baseline reads the audio again: a file re-exported in place at the same length
    after ``awe embed`` (the table unchanged) would set the old embeddings beside frames of
    new audio. And an ``.npz`` cut down by hand counts the trained rows it holds."""
    shutil.copytree(made / "audio", tmp_path / "audio")
    shutil.copy(made / "seg.tsv", tmp_path / "seg.tsv")
    npz = tmp_path / "e.npz"
    code, _, err = run_cli(capsys, "awe", "embed", made / "a", "--segments",
                           tmp_path / "seg.tsv", "--out", npz)  # fmt: skip
    assert code == 0, err
    # copies of the training files in another folder: the rows the run trained on
    assert "seg.tsv: 18 of the 18 rows are rows of " in err and "or of copies of their" in err
    code, out, err = run_cli(capsys, "awe", "ap", npz)
    assert code == 0 and "MFCC + DTW" in out, err
    ap = float(re.search(r"^embeddings\s+(\d\.\d{4})$", out, re.M).group(1))
    first = sorted((tmp_path / "audio").glob("*.wav"))[0]
    samples, rate = sf.read(first, dtype="int16")
    sf.write(first, samples[::-1].copy(), rate, subtype="PCM_16")  # same length, new audio
    code, out, err = run_cli(capsys, "awe", "ap", npz)
    assert code == 0, err
    assert out.splitlines()[1] == (
        f"no baseline: 1 of the 18 audio files `awe embed` read changed since or are gone "
        f"(first: {first.resolve()}): the baseline would read other audio than the embeddings "
        "did; embed them again"
    )
    assert last_number(out) == ap and "MFCC + DTW" not in out

    shifted = tmp_path / "shifted.tsv"  # the training tokens cut again, 10 ms inside
    lines = (made / "seg.tsv").read_text().splitlines()[1:]
    shifted.write_text(HEADER + "".join(
        f"{made}/{line.split(chr(9))[0]}\t{line.split(chr(9))[1]}\t{line.split(chr(9))[2]}"
        f"\t0.01\t{sf.info(made / line.split(chr(9))[0]).duration - 0.01:.3f}\n" for line in lines
    ))  # fmt: skip
    code, _, err = run_cli(capsys, "awe", "embed", made / "a", "--segments", shifted,
                           "--out", tmp_path / "shifted.npz")  # fmt: skip
    assert code == 0 and "shifted.tsv: 18 of the 18 rows are rows of " in err, err
    with np.load(made / "e.npz") as arrays:  # of the rows trained on, every second kept
        kept = {k: arrays[k][::2] if arrays[k].ndim else arrays[k] for k in arrays}
    assert int(kept["trained_rows"]) == 18 and kept["trained"].sum() == 9
    np.savez(tmp_path / "half.npz", **kept)
    code, _, err = run_cli(capsys, "awe", "ap", tmp_path / "half.npz")
    assert code == 0 and "half.npz: 9 of the 9 rows are rows the run trained on" in err, err
    del kept["trained"]  # written before the flags: its count, never more than it holds
    np.savez(tmp_path / "old.npz", **kept)
    code, _, err = run_cli(capsys, "awe", "ap", tmp_path / "old.npz")
    assert code == 0 and "9 of the 9 rows are rows the run trained on" in err, err


def test_abx_score_of_the_files_the_run_trained_on_says_so(made, tmp_path, capsys):
    """As ``awe ap`` warns of rows the run trained on: units of the very recordings ``units
    train`` read (its pairs across speakers found among them) are no test of new audio. Other
    recordings under the same names are."""
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", made / "vectors")
    assert code == 0, err
    assert (
        f"audiorepro: warning: {made / 'vectors'}: 18 of the 18 files the items are cut from are "
        f"recordings the run {(made / 'u').resolve()} trained on"
    ) in err, err
    other = tmp_path / "audio"  # the same names, other recordings (each played backwards)
    other.mkdir()
    for wav in sorted((made / "audio").glob("*.wav")):
        samples, rate = sf.read(wav, dtype="int16")
        sf.write(other / wav.name, samples[::-1].copy(), rate, subtype="PCM_16")
    code, _, err = run_cli(capsys, "units", "encode", made / "u", "--audio", other,
                           "--out", tmp_path / "held")  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", tmp_path / "held")
    assert code == 0 and "trained on" not in err, err
    # the same recordings exported as FLAC (other bytes, the same samples): trained on too
    flac = tmp_path / "flac"
    flac.mkdir()
    for wav in sorted((made / "audio").glob("*.wav")):
        samples, rate = sf.read(wav, dtype="int16")
        sf.write(flac / f"{wav.stem}.flac", samples, rate, subtype="PCM_16")
    code, _, err = run_cli(capsys, "units", "encode", made / "u", "--audio", flac,
                           "--out", tmp_path / "flac_units")  # fmt: skip
    assert code == 0, err
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", tmp_path / "flac_units")
    assert code == 0, err
    assert "18 of the 18 files the items are cut from are recordings the run" in err, err
    assert "(the same bytes or the same samples)" in err
    # awe embed of the FLAC copies of the rows the awe run trained on: counted as trained on
    (flac / "seg.tsv").write_text(
        (made / "seg.tsv").read_text().replace("audio/", "").replace(".wav", ".flac")
    )
    code, _, err = run_cli(capsys, "awe", "embed", made / "a", "--segments", flac / "seg.tsv",
                           "--out", tmp_path / "flac.npz")  # fmt: skip
    assert code == 0, err
    assert "18 of the 18 rows are rows of" in err, err


def test_a_folder_without_the_record_prints_its_score_and_why_no_baseline(made, tmp_path, capsys):
    """(d) A submission made by hand (no command.json), one whose record predates the run and
    audio folders, or whose audio changed since; an .npz made by hand, or whose table changed:
    the model's number and one line why no baseline is shown, exit 0."""
    hand = tmp_path / "hand"
    shutil.copytree(made / "vectors", hand)
    (hand / "command.json").unlink()
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", hand)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"no baseline: {hand} has no command.json")
    assert "made by hand" in lines[0]
    assert last_number(out) == alone(capsys, "abx", "score", made / "w.item", made / "vectors")

    old = tmp_path / "old"
    shutil.copytree(made / "vectors", old)
    record = json.loads((old / "command.json").read_text())
    del record["given"]
    (old / "command.json").write_text(json.dumps(record))
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", old)
    assert code == 0 and len(out.splitlines()) == 2, err
    assert "was written before `units encode` recorded its run and audio folders" in out

    audio = tmp_path / "audio"
    shutil.copytree(made / "audio", audio)
    code, _, err = run_cli(
        capsys, "units", "encode", made / "u", "--audio", audio, "--out", tmp_path / "units"
    )
    assert code == 0, err
    shutil.copy(audio / "S001_garden0.wav", audio / "S001_garden9.wav")
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", tmp_path / "units")
    assert code == 0 and len(out.splitlines()) == 2, err
    assert "no baseline: 1 of the audio files `units encode` read" in out
    assert "S001_garden9" in out

    run = tmp_path / "retrained"  # the run trained again after the encoding
    shutil.copytree(made / "u", run)
    code, _, err = run_cli(
        capsys, "units", "encode", run, "--audio", made / "audio", "--out", tmp_path / "units2"
    )
    assert code == 0, err
    inputs = json.loads((tmp_path / "units2" / "command.json").read_text())["request"]["inputs"]
    weights = next(Path(p) for p in inputs if Path(p).is_relative_to(run.resolve()))
    weights.write_bytes(weights.read_bytes() + b"\0")
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", tmp_path / "units2")
    assert code == 0 and len(out.splitlines()) == 2, err
    assert f"no baseline: the run {run.resolve()} changed since `units encode` wrote" in out
    assert "the units there are an earlier model's" in out and "same audio" not in out

    with np.load(made / "e.npz") as arrays:
        kept = {k: arrays[k] for k in ("embeddings", "labels", "speakers")}
        record = {k: arrays[k] for k in ("segments", "segments_sha256", "rows")}
    np.savez(tmp_path / "hand.npz", **kept)
    code, out, err = run_cli(capsys, "awe", "ap", tmp_path / "hand.npz")
    assert code == 0, err
    assert out.splitlines()[1].startswith("no baseline: ") and len(out.splitlines()) == 3
    assert "does not say which segments it embeds" in out
    assert last_number(out) == alone(capsys, "awe", "ap", made / "e.npz")

    table_copy = tmp_path / "seg.tsv"
    table_copy.write_text((made / "seg.tsv").read_text().replace("audio/", f"{made}/audio/"))
    np.savez(tmp_path / "moved.npz", **kept, **(record | {"segments": str(table_copy)}))
    code, out, err = run_cli(capsys, "awe", "ap", tmp_path / "moved.npz")
    assert code == 0 and f"no baseline: {table_copy} changed since `awe embed` read it" in out


def test_the_sentence_says_when_the_model_does_not_beat_its_baseline(made, tmp_path, capsys):
    """(e) Units that hold only the speaker (every triplet a tie: 50 %) and embeddings that
    hold only the speaker lose to their baselines, and the output says so plainly."""
    bad = tmp_path / "bad"
    shutil.copytree(made / "vectors", bad)
    for path in bad.glob("*.txt"):  # one-hot speakers: every distance across them is 0.5
        hot = " ".join("1" if k == int(path.stem[1:4]) else "0" for k in (1, 2, 3))
        path.write_text(f"{hot}\n" * len(path.read_text().splitlines()))
    record = json.loads((bad / "command.json").read_text())
    del record["output_sha256"]  # a record from before the hashes: taken as the run's units
    (bad / "command.json").write_text(json.dumps(record))
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", bad)
    assert code == 0, err
    rows = table(out)
    assert rows["units"] == 50.0
    assert rows["k-means units"] < 45.0 and rows["input frames"] < 45.0, out
    assert out.strip().splitlines()[-1] == (
        f"the units do not beat the k-means baseline (50.0 % vs {rows['k-means units']:.1f} %)"
        f" nor the input frames (50.0 % vs {rows['input frames']:.1f} %); 3 words are too few"
        " (fewer than 5) to test whether that holds for other words"
    )

    with np.load(made / "e.npz") as arrays:
        kept = {k: arrays[k] for k in arrays.files}
    speakers = sorted(set(kept["speakers"].tolist()))
    kept["embeddings"] = np.eye(len(speakers), dtype=np.float32)[
        [speakers.index(s) for s in kept["speakers"].tolist()]
    ]
    np.savez(tmp_path / "bad.npz", **kept)
    code, out, err = run_cli(capsys, "awe", "ap", tmp_path / "bad.npz")
    assert code == 0, err
    assert re.search(
        r"the embeddings do not beat MFCC \+ DTW \(AP 0\.\d+ vs 0\.\d+\); the embeddings are "
        r"at chance \(a random ranking of these 153 pairs, 45 of them same-word pairs, reached "
        r"0\.\d{3} in one of 100 tries\)$",
        out,
    )


def test_the_verdict_reads_each_comparison_from_the_numbers():
    """Lower is better; a tie is not a win; the digits grow until the two numbers differ."""

    def rows(units: float, kmeans: float, frames: float) -> list[ScoreRow]:
        return [
            ScoreRow("vectors", "units", units, None, submission=True),
            ScoreRow("kmeans", "k-means units", kmeans, None),
            ScoreRow("frames", "input frames", frames, None),
        ]

    assert verdict(rows(10.0, 20.0, 30.0)) == (
        "the units beat the k-means baseline (10.0 % vs 20.0 %) and the input frames "
        "(10.0 % vs 30.0 %)"
    )
    assert verdict(rows(22.8, 17.0, 16.8)) == (
        "the units do not beat the k-means baseline (22.8 % vs 17.0 %) nor the input frames "
        "(22.8 % vs 16.8 %)"
    )
    assert verdict(rows(15.0, 20.0, 12.0)) == (
        "the units beat the k-means baseline (15.0 % vs 20.0 %) but not the input frames "
        "(15.0 % vs 12.0 %)"
    )
    assert verdict(rows(17.004, 17.001, 17.0)) == (
        "the units do not beat the k-means baseline (17.004 % vs 17.001 %) nor the input "
        "frames (17.004 % vs 17.000 %)"
    )
    assert verdict(rows(17.0, 17.0, 30.0)) == (
        "the units beat the input frames (17.0 % vs 30.0 %) but not the k-means baseline "
        "(17.000 % vs 17.000 %)"
    )


def test_the_layers_study_scores_what_abx_score_scores(made, capsys):
    """``bench/study_units_layers.py`` (the Reference's table of where the Spanish units lose
    their points): its input frames, k-means units and units are the numbers ``abx score``
    prints for them; the frames at the code rate are the frames averaged over the stride; the
    units are scored after the encoder's output, with the codebook put back."""
    spec = importlib.util.spec_from_file_location(
        "study_units_layers", REPO / "bench/study_units_layers.py"
    )
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    study.main([str(made / "u"), str(made / "audio"), str(made / "w.item")])
    printed = {
        line[:48].strip(): float(line[48:].strip(" %"))
        for line in capsys.readouterr().out.splitlines()
    }
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", made / "vectors")
    assert code == 0, err
    rows = table(out)
    assert printed["input frames (10 ms)"] == pytest.approx(rows["input frames"], abs=5e-3)
    assert printed["k-means units"] == pytest.approx(rows["k-means units"], abs=5e-3)
    assert printed["units (codebook vectors)"] == pytest.approx(rows["units"], abs=5e-3)
    run = load_units(made / "u")
    frames = unit_rows(run, made / "audio", "frames")
    averaged = {n: average_frames(x, run.model.cfg.stride) for n, x in frames.items()}
    name = f"frames averaged to the code rate ({run.model.cfg.stride} frames)"
    assert printed[name] == pytest.approx(abx_error(averaged, made / "w.item"), abs=5e-3)
    # the encoder's output is scored with the codebook put back: the units line (after it)
    # is the units' own number above
    assert 0 <= printed["encoder output (before the codebook)"] <= 100


def test_units_files_changed_since_units_encode_get_no_baseline(made, tmp_path, capsys):
    """Another run's units, or the input frames, copied into a ``units encode`` folder were
    scored as "units (codebook vectors) (this folder)" beside the first run's baselines and
    verdict (sweep 5, F1); the record now holds each file's SHA-256, and a folder whose files
    changed gets no baseline, saying why."""
    mixed = tmp_path / "mixed"
    shutil.copytree(made / "vectors", mixed)
    for path in (made / "frames").glob("*.txt"):
        shutil.copy(path, mixed / path.name)
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", mixed)
    assert code == 0, err
    assert re.search(
        r"^no baseline: 18 of the units files `units encode` wrote into .*mixed changed or are "
        r"gone since \(first: .*\.txt\): they may be another run's or another kind's",
        out,
        re.M,
    ), out
    assert "k-means" not in out and "beat" not in out
    # the folder as written keeps its baselines
    code, out, err = run_cli(capsys, "abx", "score", made / "w.item", made / "vectors")
    assert code == 0 and "k-means units" in out
