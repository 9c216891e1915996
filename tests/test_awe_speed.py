"""Speed perturbation of ``awe train``'s training rows (:func:`~audiorepro.experiments.awe.
recordings.with_speed_copies`), on the real Italian number words the book ships."""

from __future__ import annotations

import json

import numpy as np
import pytest

from audiorepro.cli import AWE_SPEEDS, main
from audiorepro.data.recipes import asterisk
from audiorepro.data.recordings import read_segments
from audiorepro.experiments.awe import recordings


@pytest.fixture(scope="module")
def rows():
    return read_segments(asterisk.italian_folder() / "numbers.tsv")[:6]


def test_a_faster_word_has_proportionally_fewer_frames(rows):
    plain = recordings.segment_features(rows)
    same = recordings.segment_features(rows, speed=1.0)
    fast = recordings.segment_features(rows, speed=2.0)
    slow = recordings.segment_features(rows, speed=0.5)
    for p, s, f, w in zip(plain, same, fast, slow, strict=True):
        assert np.array_equal(p, s)
        assert abs(f.shape[0] - p.shape[0] / 2) <= 1
        assert abs(w.shape[0] - p.shape[0] * 2) <= 1
        assert not np.allclose(f[: p.shape[0] // 4], p[: p.shape[0] // 4])
    with pytest.raises(ValueError, match="positive"):
        recordings.segment_features(rows, speed=0.0)


def test_speed_copies_keep_words_speakers_and_phones(rows):
    pronunciations, phone_ids = recordings.lexicon_ids(rows, "characters")
    data = recordings.segments_data(rows, pronunciations, phone_ids, split="train")
    more = recordings.with_speed_copies(data, rows, (0.8, 0.9), 39)  # slower: never shorter
    n = len(data.words)
    assert len(more.words) == 3 * n
    assert more.words == data.words * 3 and more.speakers == data.speakers * 3
    assert all(np.array_equal(a, b) for a, b in zip(more.phones, data.phones * 3, strict=True))
    assert more.keys[n:] == [f"{k}@0.8" for k in data.keys] + [f"{k}@0.9" for k in data.keys]
    assert [f.shape[0] for f in more.feats[:n]] == [f.shape[0] for f in data.feats]
    # a faster copy shorter than the shortest row kept is left out, the others kept
    shortest = min(f.shape[0] for f in data.feats)
    fast = recordings.with_speed_copies(data, rows, (1.2,), 39)
    copies = recordings.segment_features(rows, 39, 1.2)
    assert len(fast.words) - n == sum(f.shape[0] >= shortest for f in copies) < n


def test_the_command_trains_with_copies_by_default_and_says_so(tmp_path, capsys):
    assert AWE_SPEEDS == recordings.SPEEDS
    from audiorepro.experiments.awe.real_speech import number_word_tables

    tables = number_word_tables(tmp_path / "tables")
    base = ["awe", "train", "--segments", str(tables["train"]), "--dev", str(tables["dev"]),
            "--lexicon", "characters", "--preset", "smoke"]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "training rows: 118 and " in out and "speeds 0.8, 0.9, 1.1, 1.2" in out
    copies = int(out.split("training rows: 118 and ")[1].split()[0])
    if copies < 4 * 118:  # a copy left out as too short is counted, never silent
        assert f"; {4 * 118 - copies} copies dropped as shorter than the shortest row" in out
    info = json.loads((tmp_path / "a" / "run.json").read_text())
    assert info["speeds"] == [0.8, 0.9, 1.1, 1.2]
    # the same command again reuses the run and says the same of it
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    again = capsys.readouterr().out
    assert "training rows: 118 and " in again and "development rows" in again
    # other speeds are other settings: the folder is not silently reused
    assert main([*base, "--speeds", "1", "--out", str(tmp_path / "a")]) == 1
    assert "--force" in capsys.readouterr().err
    assert main([*base, "--speeds", "1", "--out", str(tmp_path / "b")]) == 0
    assert "training rows: 118, no speed perturbation" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["fast", "0.9,-1", "0", "nan", ""])
def test_speeds_that_are_not_positive_numbers_are_refused(bad, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["awe", "train", "--segments", "x.tsv", "--speeds", bad, "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "--speeds" in capsys.readouterr().err
