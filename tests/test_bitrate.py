"""Bitrate B = N·H/D against hand values and a Counter-based reference."""

import math
from collections import Counter

import numpy as np
import pytest

from audiorepro.data.recipes.zerospeech import (
    ZeroSpeechFormatError,
    read_embedding_file,
    write_filelist,
)
from audiorepro.metrics import bitrate as bitrate_module
from audiorepro.metrics.abx import read_submission_folder
from audiorepro.metrics.bitrate import bitrate, bitrate_from_submission, entropy_bits
from audiorepro.metrics.checks import ScoreError, ScoreWarning


def ref_bitrate(files, duration):
    lines = [tuple(float(v) for v in np.atleast_1d(row)) for f in files for row in f]
    counts = Counter(lines)
    n = len(lines)
    h = -sum(c / n * math.log2(c / n) for c in counts.values())
    return n * h / duration


def test_hand_values():
    # 4 frames, two symbols equally likely: H = 1 bit, N = 4, D = 2 s -> 2 b/s.
    assert bitrate([np.array([0, 1]), np.array([1, 0])], 2.0) == pytest.approx(2.0)
    # one symbol: H = 0, with a warning that the units have collapsed
    with pytest.warns(ScoreWarning, match="all 3 frames are one symbol"):
        assert bitrate([np.array([3, 3, 3])], 1.0) == 0.0
    # a few frames, every one distinct: H = log2 N, with a warning
    x = np.random.default_rng(0).normal(size=(8, 3))
    with pytest.warns(ScoreWarning, match="8 of the 8 frames are symbols that occur only once"):
        assert bitrate([x], 4.0) == pytest.approx(8 * 3 / 4.0)


def test_what_has_no_bitrate_is_refused():
    # no frames at all (0 b/s before)
    with pytest.raises(ScoreError, match=r"no frame in the 2 sequence\(s\)"):
        bitrate([np.zeros((0, 4)), np.zeros((0, 4))], 1.0)
    # continuous features (units encode --what frames): every frame a distinct symbol, so
    # N H / D = N log2 N / D counts frames and measures nothing of the units
    x = np.random.default_rng(0).normal(size=(300, 13))
    with pytest.raises(ScoreError, match=r"300 of the 300 frames are symbols that occur only "
                       r"once: continuous features"):  # fmt: skip
        bitrate([x[:100], x[100:]], 3.0)
    # MFCC frames with a few repeated (silent) frames are continuous all the same
    x[:20] = 0.0
    with pytest.raises(ScoreError, match=r"280 of the 300 frames .* continuous features"):
        bitrate([x], 3.0)


def test_one_hot_integer_and_codebook_encodings_agree():
    rng = np.random.default_rng(1)
    codes = [rng.integers(0, 16, size=n) for n in (5, 9, 1, 13)]
    codebook = rng.normal(size=(16, 8))
    as_ids = bitrate(codes, 3.7)
    as_one_hot = bitrate([np.eye(16)[c] for c in codes], 3.7)
    as_vectors = bitrate([codebook[c] for c in codes], 3.7)
    assert as_ids == pytest.approx(as_one_hot) == pytest.approx(as_vectors)
    assert as_ids == pytest.approx(ref_bitrate(codes, 3.7))
    assert as_ids <= sum(map(len, codes)) * math.log2(16) / 3.7


def test_entropy_bits_matches_counter():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 3, size=(50, 2))
    counts = Counter(map(tuple, x))
    want = -sum(c / 50 * math.log2(c / 50) for c in counts.values())
    assert entropy_bits(x) == pytest.approx(want)


def test_submission_folder_with_file_list(tmp_path):
    rng = np.random.default_rng(3)
    folder = tmp_path / "test"
    folder.mkdir()
    codes = {f"S1_{k}": rng.integers(0, 4, size=int(rng.integers(1, 9))) for k in range(5)}
    for name, c in codes.items():
        lines = [" ".join(str(int(v)) for v in np.eye(4)[i]) for i in c]
        (folder / f"{name}.txt").write_text("\n".join(lines) + "\n\n")
    durations = {name: 0.5 + k for k, name in enumerate(codes)}
    entries = [(f"{n}.txt", d) for n, d in durations.items()] + [("S1_missing.txt", 9.0)]
    filelist = write_filelist(tmp_path / "bitrate_filelist.txt", entries)
    got = bitrate_from_submission(folder, filelist)
    # the missing file counts for neither N nor D
    assert got == pytest.approx(ref_bitrate(list(codes.values()), sum(durations.values())))
    (folder / "S1_3.txt").write_text("1 0 0\n")
    with pytest.raises(ZeroSpeechFormatError, match=r"S1_3.txt.*dimension 3 does not match S1_0"):
        bitrate_from_submission(folder, filelist)
    (folder / "S1_0.txt").write_text("1 0 0 0\n1 0\n")
    with pytest.raises(ZeroSpeechFormatError, match=r"S1_0.txt:2.*dimension 2 differs"):
        bitrate_from_submission(folder, filelist)


def test_one_embedding_file_reader_for_bitrate_and_abx(tmp_path):
    folder = tmp_path / "test"
    folder.mkdir()
    path = folder / "S1_0.txt"
    path.write_text("1 0\n\n3\n0 1\n")
    assert bitrate_module.read_embedding_file is read_embedding_file
    # The bitrate counts every line, the ABX loader drops single-column ones (as the official).
    with pytest.raises(ZeroSpeechFormatError, match=r"S1_0.txt:3.*dimension 1 differs"):
        read_embedding_file(path)
    np.testing.assert_array_equal(read_submission_folder(folder)["S1_0"], [[1.0, 0.0], [0.0, 1.0]])
    path.write_text("3\n1\n\n")
    np.testing.assert_array_equal(read_embedding_file(path), [[3.0], [1.0]])
    (tmp_path / "empty.txt").write_text("")
    assert read_embedding_file(tmp_path / "empty.txt").shape == (0, 0)
    # scored, an empty file is named as such (not as lines of one column)
    with pytest.raises(ZeroSpeechFormatError, match=r"empty.txt: empty: no frame to score"):
        read_embedding_file(tmp_path / "empty.txt", drop_single_column=True)
    # and its duration would count in D with no symbol in N: refused, naming it
    path.write_text("1 0\n0 1\n")
    (folder / "S1_1.txt").write_text("\n")
    with pytest.raises(ZeroSpeechFormatError, match=r"S1_1.txt: empty: no unit for 0.5 s"):
        bitrate_module.bitrate_of_files(folder, [("S1_0.txt", 0.5), ("S1_1.txt", 0.5)])
    assert bitrate_module.bitrate_of_files(folder, [("S1_0.txt", 0.5), ("S1_1.txt", 0.0)]) > 0
    (tmp_path / "bad.txt").write_text("1 x\n")
    with pytest.raises(ZeroSpeechFormatError, match=r"bad.txt:1.*space-separated numbers"):
        read_embedding_file(tmp_path / "bad.txt", drop_single_column=True)


def test_bad_inputs():
    with pytest.raises(ValueError, match="total_duration_s must be > 0"):
        bitrate([np.array([1])], 0.0)
    with pytest.raises(ValueError, match="sequence 1 has dimension 3"):
        bitrate([np.ones((2, 2)), np.ones((2, 3))], 1.0)
    with pytest.raises(ValueError, match="sequence 0: contains NaN"):
        bitrate([np.array([[np.nan, 1.0]])], 1.0)


def test_a_nan_in_an_embedding_file_names_the_file_and_line(tmp_path):
    folder = tmp_path / "test"
    folder.mkdir()
    (folder / "S1_0.txt").write_text("1 0\n0 1\n")
    (folder / "S1_1.txt").write_text("1 0\nnan 1\n")
    filelist = write_filelist(tmp_path / "list.txt", [("S1_0.txt", 1.0), ("S1_1.txt", 1.0)])
    with pytest.raises(ZeroSpeechFormatError, match=r"S1_1.txt:2.*non-finite value"):
        bitrate_from_submission(folder, filelist)
    with pytest.raises(ZeroSpeechFormatError, match=r"S1_1.txt:2.*non-finite"):
        read_submission_folder(folder)
