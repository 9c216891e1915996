"""Speed and vocal tract length perturbation of ``awe train``'s training rows
(:func:`~audiorepro.experiments.awe.recordings.with_speed_copies`), on the real Italian number
words the book ships."""

from __future__ import annotations

import json

import numpy as np
import pytest

from audiorepro.cli import AWE_SPEEDS, AWE_WARPS, main
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
    assert AWE_SPEEDS == recordings.SPEEDS and AWE_WARPS == recordings.WARPS
    from audiorepro.experiments.awe.real_speech import number_word_tables

    tables = number_word_tables(tmp_path / "tables")
    base = ["awe", "train", "--segments", str(tables["train"]), "--dev", str(tables["dev"]),
            "--lexicon", "characters", "--preset", "smoke"]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "training rows: 118 and " in out
    assert "at speeds 0.8, 0.9, 1.1, 1.2 and vocal-tract warps 0.9, 1.1 (speed and" in out
    copies = int(out.split("training rows: 118 and ")[1].split()[0])
    if copies < 6 * 118:  # a copy left out as too short is counted, never silent
        assert f"; {6 * 118 - copies} copies dropped as shorter than the shortest row" in out
    info = json.loads((tmp_path / "a" / "run.json").read_text())
    assert info["speeds"] == [0.8, 0.9, 1.1, 1.2] and info["warps"] == [0.9, 1.1]
    # the same command again reuses the run and says the same of it
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    again = capsys.readouterr().out
    assert "training rows: 118 and " in again and "development rows" in again
    # other speeds are other settings: the folder is not silently reused
    assert main([*base, "--speeds", "1", "--out", str(tmp_path / "a")]) == 1
    assert "--force" in capsys.readouterr().err
    assert main([*base, "--speeds", "1", "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "training rows: 118 and 236 copies at vocal-tract warps 0.9, 1.1 (speed and" in out
    assert main([*base, "--speeds", "1", "--warps", "1", "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "training rows: 118, no speed or vocal tract length perturbation" in out


@pytest.mark.parametrize(
    ("option", "bad"),
    [
        *(("--speeds", bad) for bad in ("fast", "0.9,-1", "0", "nan", "")),
        *(("--warps", bad) for bad in ("long", "0.7", "1.3,0.9", "-1", "")),
    ],
)
def test_speeds_and_warps_outside_their_range_are_refused(option, bad, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["awe", "train", "--segments", "x.tsv", option, bad, "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert option in capsys.readouterr().err


def test_a_warped_copy_moves_the_spectrum_and_keeps_the_times(rows):
    """The warp reads each frequency at another place (formants move up for a factor above 1,
    a shorter vocal tract), the frames are as many as the row's, and a warp of 1 is the row."""
    from audiorepro.features.speech import _mel_basis, vtlp_frequencies

    plain = recordings.segment_features(rows)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(plain, recordings.segment_features(rows, warp=1.0), strict=True)
    )
    for warp in (0.9, 1.1):
        warped = recordings.segment_features(rows, warp=warp)
        assert [f.shape for f in warped] == [f.shape for f in plain]
        assert not any(np.allclose(a, b) for a, b in zip(plain, warped, strict=True))
    freqs = np.array([0.0, 1000.0, 4000.0, 8000.0])
    assert vtlp_frequencies(freqs, 1.1, 16000).tolist()[:3] == pytest.approx([0, 1100, 4400])
    assert vtlp_frequencies(freqs, 0.9, 16000)[[0, 3]].tolist() == [0.0, 8000.0]
    edge = 4800 / 1.1  # continuous at the boundary
    assert vtlp_frequencies(np.array([edge - 1e-6, edge + 1e-6]), 1.1, 16000) == pytest.approx(
        [4800, 4800]
    )
    # a tone's energy moves to a higher mel band under a factor above 1
    tone = np.zeros(257)
    tone[64] = 1.0  # 2 kHz
    bands = [int(np.argmax(_mel_basis(16000, 512, 40, 0.0, None, w) @ tone)) for w in (1.0, 1.1)]
    assert bands[1] > bands[0]
