"""The MFCC frames of ``awe`` rows normalised per file or per speaker
(:mod:`audiorepro.experiments.awe.frames`), on the real Italian number words the book ships,
and the choice ``awe train`` and ``awe dtw`` make between the two."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.data.recipes import asterisk
from audiorepro.data.recordings import read_segments
from audiorepro.experiments.awe import recordings
from audiorepro.experiments.awe.evaluate import dtw_ap
from audiorepro.experiments.awe.frames import feature_norm_of, segment_features
from audiorepro.features import load_audio, mfcc_features


@pytest.fixture(scope="module")
def rows():
    """Five words of each of the two speakers."""
    table = read_segments(asterisk.italian_folder() / "numbers.tsv")
    return [r for r in table if r.word in {"1", "2", "3", "4", "5"}]


def test_per_file_frames_are_the_chapters_cmvn_frames(rows):
    for dim in (39, 36):
        for row, got in zip(rows, segment_features(rows, dim), strict=True):
            wav, _ = load_audio(row.path, 16000)
            assert np.array_equal(got, mfcc_features(wav, 16000, dim, cmvn=True))


def test_per_speaker_frames_have_zero_mean_and_unit_variance_over_each_speakers_files(rows):
    feats = segment_features(rows, norm="speaker")
    for speaker in ("carlo", "menardi"):
        mine = [f for f, r in zip(feats, rows, strict=True) if r.speaker == speaker]
        pooled = np.concatenate(mine)
        assert pooled.shape[1] == 39
        np.testing.assert_allclose(pooled.mean(0), 0.0, atol=1e-4)
        np.testing.assert_allclose(pooled.std(0), 1.0, atol=1e-4)
    # each file counts once, whatever its number of rows; a row is a slice of its file
    twice = [*rows, rows[0]]
    assert np.array_equal(segment_features(twice, norm="speaker")[0], feats[0])
    cut = dataclasses.replace(rows[0], start=0.10, end=0.30)
    part = segment_features([cut, *rows[1:]], norm="speaker")[0]
    assert np.array_equal(part, feats[0][10:30])
    # a speaker's statistics are its own: the other speaker's rows change nothing
    carlo = [r for r in rows if r.speaker == "carlo"]
    alone = segment_features(carlo, norm="speaker")
    both = [f for f, r in zip(feats, rows, strict=True) if r.speaker == "carlo"]
    assert all(np.array_equal(a, f) for a, f in zip(alone, both, strict=True))
    with pytest.raises(ValueError, match="norm must be one of"):
        segment_features(rows, norm="utterance")


def test_awe_train_normalises_per_speaker_when_every_speaker_has_10_s(rows):
    norm, why = feature_norm_of(rows)  # 5 words each: about 3.5 s a speaker
    assert norm == "file"
    assert "2 of 2 speakers have less than 10 s of audio to normalise by (first: carlo" in why
    every = read_segments(asterisk.italian_folder() / "numbers.tsv")  # 119 words each
    norm, why = feature_norm_of(every)
    assert norm == "speaker"
    assert why.startswith("feature normalisation: per speaker (2 speakers, at least 8")
    assert feature_norm_of(every, "file") == ("file", "feature normalisation: per file (--norm)")
    with pytest.raises(ValueError, match="norm must be one of"):
        feature_norm_of(rows, "speakers")


def test_awe_dtw_scores_the_frames_it_says_it_normalised(tmp_path, capsys):
    """``awe dtw`` of a table whose speakers have 10 s each: per speaker, said, equal to DTW
    over the per-speaker frames; ``--norm file`` gives the per-file frames' AP. The first 40
    words of each speaker (about 30 s each): all 238 rows took 55 s for five DTW APs."""
    shipped = asterisk.italian_folder() / "numbers.tsv"
    lines = shipped.read_text().splitlines()
    kept = [lines[0]]
    for speaker in ("carlo", "menardi"):
        mine = [line.split("\t") for line in lines[1:] if line.split("\t")[2] == speaker]
        kept += ["\t".join([str(shipped.parent / f[0]), *f[1:]]) for f in mine[:40]]
    table = tmp_path / "numbers.tsv"
    table.write_text("\n".join(kept) + "\n")
    rows = read_segments(table)
    assert len(rows) == 80 and len({r.word for r in rows}) == 40
    labels = [r.word for r in rows]
    for given, norm in ((None, "speaker"), ("file", "file")):
        argv = ["awe", "dtw", "--segments", str(table)]
        assert main(argv + (["--norm", given] if given else [])) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith(f"feature normalisation: per {norm}")
        expected, _ = dtw_ap(segment_features(rows, norm=norm), labels)
        assert float(lines[-1]) == pytest.approx(expected, abs=5e-5)
    assert recordings.rows_dtw_ap(rows, labels, norm="speaker")["ap"] == pytest.approx(
        dtw_ap(segment_features(rows, norm="speaker"), labels)[0]
    )


def test_awe_ap_reads_the_normalisation_the_embeddings_were_made_with(tmp_path):
    """The baseline of ``awe ap`` reads the frames as the run did: the .npz records it; an
    .npz from before it was recorded was made per file."""
    path = tmp_path / "e.npz"
    arrays = {"embeddings": np.eye(4, dtype=np.float32), "labels": np.array(list("aabb"))}
    np.savez(path, **arrays)
    assert recordings.embedded_norm(path) == "file"
    np.savez(path, **arrays, feature_norm=np.asarray("speaker"))
    assert recordings.embedded_norm(path) == "speaker"


def test_awe_train_warns_when_each_speaker_says_one_word(tmp_path):
    """A table whose speaker column is the word (names like 7_jackson_32 read with --speaker-of
    prefix) is named before any training: per-speaker frames would be per-word frames."""
    from audiorepro.data.recordings import InputWarning, RecordingsError

    table = read_segments(asterisk.italian_folder() / "numbers.tsv")
    lines = ["path\tword\tspeaker\tstart\tend"]
    lines += [f"{r.path}\t{r.word}\t{r.word}\t\t" for r in table if r.speaker == "carlo"][:6]
    seg = tmp_path / "seg.tsv"
    seg.write_text("\n".join(lines) + "\n")
    with pytest.warns(InputWarning, match=r"each of the 6 speakers says one word only"):
        # every word once: nothing to hold out, refused after the warning
        with pytest.raises(RecordingsError, match=r"no word has 4 segments"):
            recordings.train_on_segments(seg, tmp_path / "run", lexicon="characters")
