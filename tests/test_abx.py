"""ABX error against a brute-force enumeration of every triplet written here."""

import dataclasses
import itertools
import math
from collections import defaultdict
from statistics import mean

import numpy as np
import pandas as pd
import pytest

from audiorepro.data.recipes.zerospeech import (
    AbxItem,
    ZeroSpeechFormatError,
    write_item_file,
)
from audiorepro.metrics.abx import (
    abx,
    abx_error,
    abx_modes,
    item_frames,
    item_overrun,
    read_submission_folder,
    relative_time_item_file,
    select_frames,
)
from audiorepro.metrics.checks import ScoreError, ScoreWarning
from audiorepro.metrics.dtw import dtw_distance


def ref_levenshtein(a, b):
    a, b = [tuple(r) for r in a], [tuple(r) for r in b]
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return float(prev[-1])


def ref_select(n, onset, offset, frame_shift):
    if frame_shift is None:
        return [i for i in range(n) if onset <= i / n <= offset]
    lo, hi = math.ceil(onset / frame_shift - 0.5), math.floor(offset / frame_shift - 0.5)
    return [i for i in range(n) if lo <= i < hi]


def brute_force_triplets(items, mode):
    """Every (A, B, X) triplet of ``mode`` as indices into ``items``, one by one."""
    for (ia, a), (ib, b), (ix, x) in itertools.product(enumerate(items), repeat=3):
        if b.phone == a.phone or b.speaker != a.speaker or x.phone != a.phone:
            continue
        if not a.context == b.context == x.context:
            continue
        if mode == "across" and x.speaker == a.speaker:
            continue
        if mode == "within" and (x.speaker != a.speaker or ix == ia):
            continue
        yield ia, ib, ix


def brute_force(items, feats, distance="angular", mode="across", frame_shift=None, ties=None):
    """Every (A, B, X) triplet, scored one by one, averaged as ABXpy + zerospeech2020 do.

    ``ties``: a list to which the number of triplets with d(A, X) == d(B, X) is appended.
    """
    frames = [
        feats[it.file][ref_select(len(feats[it.file]), it.onset, it.offset, frame_shift)]
        for it in items
    ]

    def d(i, j):
        if distance == "levenshtein":
            return ref_levenshtein(frames[i], frames[j])
        return dtw_distance(frames[i], frames[j], distance)

    cells = defaultdict(list)
    for ia, ib, ix in brute_force_triplets(items, mode):
        a, b, x = items[ia], items[ib], items[ix]
        dax, dbx = d(ia, ix), d(ib, ix)
        score = 1.0 if dax < dbx else 0.0 if dax > dbx else 0.5
        cells[(a.phone, b.phone, a.speaker, x.speaker, a.context)].append(score)
    if ties is not None:
        ties.append(sum(v.count(0.5) for v in cells.values()))
    by_speakers = defaultdict(list)
    for (p1, p2, s1, s2, _), scores in cells.items():
        by_speakers[(p1, p2, s1, s2)].append(mean(scores))
    by_pair = defaultdict(list)
    for (p1, p2, _, _), scores in by_speakers.items():
        by_pair[(p1, p2)].append(mean(scores))
    cell_means = {k: mean(v) for k, v in cells.items()}
    return 100.0 * (1.0 - mean(mean(v) for v in by_pair.values())), cell_means


def random_corpus(seed, one_hot=False, whole_files=True):
    """Items over 2 contexts x 3 phones x 3 speakers, 0-3 tokens each; random frames."""
    rng = np.random.default_rng(seed)
    items, feats = [], {}
    for ctx, phone, spk in itertools.product(["a_b", "c_d"], ["p", "q", "r"], ["S1", "S2", "S3"]):
        for _ in range(rng.integers(0, 4)):
            name = f"{spk}_{len(feats):04d}"
            n = int(rng.integers(2, 7))
            if one_hot:
                feats[name] = np.eye(4)[rng.integers(0, 4, size=n)]
            else:
                feats[name] = rng.normal(size=(n, 5))
            prev, nxt = ctx.split("_")
            if whole_files:
                items.append(AbxItem(name, 0.0, 1.0, phone, prev, nxt, spk))
            else:  # seconds inside the file at a 10 ms frame shift
                items.append(AbxItem(name, 0.0, round(0.01 * n, 3), phone, prev, nxt, spk))
    return items, feats


def segment_corpus(seed, one_hot=False):
    """Items inside longer files (seconds at a 10 ms frame shift), 2 contexts x 3 phones x
    3 speakers, 0-3 tokens each, several items per file; some items repeat the frames of an
    earlier item of their context and speaker."""
    rng = np.random.default_rng(seed)
    labels = [
        (ctx, phone, spk)
        for ctx, phone, spk in itertools.product(
            ["a_b", "c_d"], ["p", "q", "r"], ["S1", "S2", "S3"]
        )
        for _ in range(rng.integers(0, 4))
    ]
    items, feats, segments = [], {}, {}
    for k in rng.permutation(len(labels)):
        ctx, phone, spk = labels[k]
        name = f"{spk}_{rng.integers(0, 2)}"  # two files per speaker
        feats.setdefault(name, [])
        gap, n = int(rng.integers(0, 4)), int(rng.integers(2, 7))
        earlier = segments.get((ctx, spk), [])
        if earlier and rng.random() < 0.3:  # an earlier item's frames: exact ties as A and B
            frames = earlier[int(rng.integers(len(earlier)))]
            n = len(frames)
        elif one_hot:
            frames = np.eye(4)[rng.integers(0, 4, size=n)]
        else:
            frames = rng.normal(size=(n, 4))
        filler = np.eye(4)[rng.integers(0, 4, size=gap)] if one_hot else rng.normal(size=(gap, 4))
        start = sum(len(f) for f in feats[name]) + gap
        feats[name] += [filler, frames]
        segments.setdefault((ctx, spk), []).append(frames)
        prev, nxt = ctx.split("_")
        # frames [start, start + n) under floor/ceil(t / 0.01 - 0.5): times inside the frames
        onset, offset = round(0.01 * start + 0.003, 4), round(0.01 * (start + n) + 0.006, 4)
        items.append(AbxItem(name, onset, offset, phone, prev, nxt, spk))
    tail = {name: np.eye(4)[[0]] if one_hot else rng.normal(size=(2, 4)) for name in feats}
    return items, {name: np.concatenate([*parts, tail[name]]) for name, parts in feats.items()}


def cell_scores(result):
    return {
        (r.phone_1, r.phone_2, r.speaker_1, r.speaker_2, tuple(r.context.split())): r.score
        for r in result.cells.itertuples()
    }


def test_hand_computed_with_ties(tmp_path):
    # A1 = A2 = [1, 0] (phone p), B1 = [0, 1], B2 = [1, 1] (phone q); one context.
    # (p, q): X = A2 -> d(A1, X) = 0 < d(B1, X) = .5: 1; X = A1 -> 0 < d(B2, A1) = .25: 1.
    # (q, p): A = B1, X = B2: .25 vs d(A1, B2) = .25: tie .5; A = B2, X = B1: .25 < .5: 1.
    # Mean over phone pairs of speaker-pair means: (1 + .75) / 2 = .875 -> 12.5 %.
    feats = {
        "S1_1": np.array([[1.0, 0.0]]),
        "S1_2": np.array([[0.0, 1.0]]),
        "S2_1": np.array([[1.0, 0.0]]),
        "S2_2": np.array([[1.0, 1.0]]),
    }
    items = [
        AbxItem("S1_1", 0, 1, "p", "x", "y", "S1"),
        AbxItem("S1_2", 0, 1, "q", "x", "y", "S1"),
        AbxItem("S2_1", 0, 1, "p", "x", "y", "S2"),
        AbxItem("S2_2", 0, 1, "q", "x", "y", "S2"),
    ]
    path = write_item_file(tmp_path / "t.item", items)
    result = abx(feats, path)
    assert result.error == pytest.approx(12.5)
    assert result.n_triplets == 4 and len(result.cells) == 4
    assert brute_force(items, feats)[0] == pytest.approx(12.5)


@pytest.mark.parametrize("mode", ["across", "within"])
@pytest.mark.parametrize("one_hot", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_brute_force_every_cell(tmp_path, mode, one_hot, seed):
    items, feats = random_corpus(seed, one_hot)
    path = write_item_file(tmp_path / "t.item", items)
    result = abx(feats, path, mode=mode)
    want, cells = brute_force(items, feats, mode=mode)
    got = {
        (r.phone_1, r.phone_2, r.speaker_1, r.speaker_2, tuple(r.context.split())): r.score
        for r in result.cells.itertuples()
    }
    assert got == cells  # every cell bit-identical, ties included
    assert result.error == pytest.approx(want, abs=1e-9)
    assert abx_error(feats, path, mode=mode) == result.error


@pytest.mark.parametrize("distance", ["kl", "levenshtein"])
def test_other_distances_match_brute_force(tmp_path, distance):
    items, feats = random_corpus(3, one_hot=distance == "levenshtein")
    if distance == "kl":
        feats = {k: np.abs(v) + 0.1 for k, v in feats.items()}
    path = write_item_file(tmp_path / "t.item", items)
    got = abx_error(feats, path, distance=distance)
    assert got == pytest.approx(brute_force(items, feats, distance)[0], abs=1e-9)


def test_kl_on_features_that_are_not_distributions_is_refused(tmp_path):
    # codebook vectors and MFCCs have negative values: every KL distance would be NaN, every
    # triplet a tie, and the error 50.000 (what it printed before)
    items, feats = random_corpus(4)
    path = write_item_file(tmp_path / "t.item", items)
    with pytest.raises(ScoreError, match=r"--distance kl: .*S\d_\d+ frame \d+ has a negative "
                       r"value .*\d+ of the \d+ files.*--distance angular"):  # fmt: skip
        abx_error(feats, path, distance="kl")
    # a frame summing to 0 is no distribution either
    positive = {k: np.abs(v) for k, v in feats.items()}
    first = items[0].file
    positive[first] = positive[first].copy()
    positive[first][1] = 0.0
    with pytest.raises(ScoreError, match=rf"{first} frame 1 sums to 0"):
        abx_error(positive, path, distance="kl")


def test_frame_shift_rule_matches_brute_force_and_2019_rule_refuses_seconds(tmp_path):
    items, feats = random_corpus(5, whole_files=False)
    path = write_item_file(tmp_path / "t.item", items)
    got = abx_error(feats, path, frame_shift=0.01)
    assert got == pytest.approx(brute_force(items, feats, frame_shift=0.01)[0], abs=1e-9)
    # With the 2019 rule the same seconds would keep only the frames at i/N <= offset, the
    # first part of each file: an error naming the item file and the first such line.
    with pytest.raises(ZeroSpeechFormatError, match=r"t.item:2: .*keeps frames 0-0 of the"):
        abx_error(feats, path)


def test_items_past_their_features_are_errors_not_clipped(tmp_path):
    feats = {"S1_1": np.ones((4, 2)), "S2_1": np.ones((4, 2))}
    good = "S2_1 0 0.04 p x y S2\n"
    # 0.06 s at 10 ms needs frames up to floor(6 - .5) = 5 of a 4-frame file
    with pytest.raises(ZeroSpeechFormatError, match=r"bad.item:3: .*needs frames up to 5.*4 fr"):
        abx_error(feats, _write(tmp_path, good + "S1_1 0 0.06 p x y S1\n"), frame_shift=0.01)
    # 2019 rule: an offset past 1 runs past the relative time axis
    with pytest.raises(ZeroSpeechFormatError, match=r"bad.item:2: .*offset 1.5 runs past.*frame"):
        abx_error(feats, _write(tmp_path, "S1_1 0 1.5 p x y S1\n"))
    # 2019 rule: an item keeping part of its file, with the hint
    with pytest.raises(ZeroSpeechFormatError, match=r"bad.item:2: .*keeps frames 2-3 of the 4"):
        abx_error(feats, _write(tmp_path, "S1_1 0.5 1 p x y S1\n"))
    with pytest.raises(ZeroSpeechFormatError, match=r"relative times.*--frame-shift"):
        abx_error(feats, _write(tmp_path, "S1_1 0 0.3 p x y S1\n"))
    assert item_overrun(4, 0.0, 0.75) is None  # (N - 1) / N is the whole file
    assert item_overrun(4, 0.0, 0.05, frame_shift=0.01) is None  # floor(4.5) = 4 frames: fits
    assert "up to 5" in item_overrun(4, 0.0, 0.06, frame_shift=0.01)


def test_select_frames_hand_values():
    # 2019: N = 4 frames at 0, .25, .5, .75; [0, .5] keeps frames 0..2 (both ends inclusive).
    assert select_frames(4, 0.0, 0.5) == slice(0, 3)
    assert select_frames(4, 0.3, 0.7) == slice(2, 3)
    assert select_frames(4, 0.0, 1.0) == slice(0, 4)
    # libri-light: [ceil(1 - .5), floor(3.5 - .5)) = [1, 3).
    assert select_frames(10, 0.01, 0.035, frame_shift=0.01) == slice(1, 3)
    assert select_frames(3, 0.0, 0.5, frame_shift=0.01) == slice(0, 3)  # clipped to the file


def test_submission_folder_equals_dict_and_drops_single_columns(tmp_path):
    items, feats = random_corpus(6, one_hot=True)
    folder = tmp_path / "test"
    folder.mkdir()
    for name, x in feats.items():
        lines = [" ".join(str(int(v)) for v in row) for row in x]
        (folder / f"{name}.txt").write_text("\n".join(lines) + "\n\n")
    path = write_item_file(tmp_path / "t.item", items)
    assert abx_error(folder, path) == abx_error(feats, path)
    assert set(read_submission_folder(folder)) == set(feats)
    one = tmp_path / "ints"
    one.mkdir()
    (one / "S1_0000.txt").write_text("3\n1\n")
    with pytest.raises(ZeroSpeechFormatError, match="single-column"):
        read_submission_folder(one)


def _write(tmp_path, text):
    path = tmp_path / "bad.item"
    path.write_text("#file onset offset #phone prev-phone next-phone speaker\n" + text)
    return path


def test_bad_inputs_name_the_line_or_file(tmp_path):
    feats = {"S1_1": np.ones((4, 2)), "S2_1": np.ones((4, 2))}
    good = "S2_1 0 1 p x y S2\n"
    with pytest.raises(ZeroSpeechFormatError, match=r"bad.item:2.*expected 7 fields"):
        abx_error(feats, _write(tmp_path, "S1_1 0 1 p x y\n" + good))
    with pytest.raises(ZeroSpeechFormatError, match=r"bad.item:3.*unknown file 'S9_9'"):
        abx_error(feats, _write(tmp_path, good + "S9_9 0 1 p x y S9\n"))
    with pytest.raises(ZeroSpeechFormatError, match=r"bad.item:2.*onset must be < offset"):
        abx_error(feats, _write(tmp_path, "S1_1 0.5 0.5 p x y S1\n" + good))
    with pytest.raises(ZeroSpeechFormatError, match=r"bad.item:3.*selects no frame"):
        abx_error(feats, _write(tmp_path, good + "S1_1 0.8 0.9 p x y S1\n"))
    odd = dict(feats, S1_1=np.ones((4, 3)))
    with pytest.raises(ZeroSpeechFormatError, match=r"S1_1.*dimension 3, but S2_1 has 2"):
        abx_error(odd, _write(tmp_path, good + "S1_1 0 1 p x y S1\n"))
    nan = dict(feats, S1_1=np.array([[1.0, 1.0], [np.nan, 0.0]]))
    with pytest.raises(ZeroSpeechFormatError, match=r"S1_1.*NaN or inf \(first at frame 1\)"):
        abx_error(nan, _write(tmp_path, good + "S1_1 0 1 p x y S1\n"))
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "S2_1.txt").write_text("1 0\n0 x\n")
    with pytest.raises(ZeroSpeechFormatError, match=r"S2_1.txt:2.*numbers"):
        abx_error(folder, _write(tmp_path, good))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ZeroSpeechFormatError, match=r"bad.item:2.*unknown file 'S2_1'"):
        abx_error(tmp_path / "empty", _write(tmp_path, good))
    with pytest.raises(ValueError, match=r"bad.item: the item file defines no across-speaker"):
        abx_error(feats, _write(tmp_path, good))
    # read from a folder, a feature file is named by its path
    (folder / "S2_1.txt").write_text("1 0 0\n0 1 0\n")
    (folder / "S1_1.txt").write_text("1 0\n0 1\n")
    with pytest.raises(ZeroSpeechFormatError, match=r"sub/S2_1.txt: features have dimension 3, "
                       r"but .*sub/S1_1.txt has 2"):  # fmt: skip
        abx_error(folder, _write(tmp_path, "S1_1 0 1 p x y S1\nS2_1 0 1 p x y S2\n"))
    alone = {f"S1_{k}": np.ones((4, 2)) for k in (1, 2, 3)}
    one_speaker = "S1_1 0 1 p x y S1\nS1_2 0 1 p x y S1\nS1_3 0 1 q x y S1\n"
    with pytest.raises(ValueError, match=r"\(3 items, 1 speaker\(s\), 2 label\(s\); .*"
                       r"X from another\); with one speaker, score --mode within"):  # fmt: skip
        abx_error(alone, _write(tmp_path, one_speaker))
    with pytest.raises(ScoreError, match=r"constant features: all 12 frames of the 3 files"):
        abx_error(alone, _write(tmp_path, one_speaker), mode="within")  # every triplet a tie
    # scaled copies of one vector: the angular distance ignores the length, so all ties too
    scaled = {f"S1_{k}": np.outer(np.arange(1, 5) * k, [0.3, -1.0]) for k in (1, 2, 3)}
    for distance in ("angular", "cosine"):
        with pytest.raises(ScoreError, match=rf"constant features for the {distance} distance: "
                           r"all 12 frames of the 3 files point the same way"):  # fmt: skip
            abx_error(scaled, _write(tmp_path, one_speaker), mode="within", distance=distance)
    scaled["S1_3"][0] = [0.3, -0.9]  # one frame another way: scored
    assert 0 <= abx_error(scaled, _write(tmp_path, one_speaker), mode="within") <= 100
    with pytest.raises(ValueError, match="distance must be one of"):
        abx_error(feats, _write(tmp_path, good), distance="dtw")


def test_relative_time_items_select_whole_files(tmp_path):
    items, feats = random_corpus(7, whole_files=False)  # offsets in seconds, some below 1 s
    path = write_item_file(tmp_path / "t.item", items)
    rel = relative_time_item_file(path, tmp_path / "rel.item")
    got = abx_error(feats, rel)
    want, _ = brute_force(
        [
            AbxItem(it.file, 0.0, 1.0, it.phone, it.prev_phone, it.next_phone, it.speaker)
            for it in items
        ],
        feats,
    )
    assert got == pytest.approx(want, abs=1e-9)
    bad = tmp_path / "bad.item"
    bad.write_text(
        path.read_text().replace(f"{items[1].file} 0.0000000", f"{items[1].file} 0.0100000")
    )
    with pytest.raises(ZeroSpeechFormatError, match=r"bad.item:3.*not a whole-file item"):
        relative_time_item_file(bad, tmp_path / "x.item")


@pytest.mark.parametrize("mode", ["across", "within"])
@pytest.mark.parametrize("one_hot", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_items_inside_files_match_brute_force_with_ties(tmp_path, mode, one_hot, seed):
    items, feats = segment_corpus(seed, one_hot)
    assert len(feats) < len(items) and any(it.onset > 0.01 for it in items)
    path = write_item_file(tmp_path / "t.item", items)
    result = abx(feats, path, mode=mode, frame_shift=0.01)
    ties = []
    want, cells = brute_force(items, feats, mode=mode, frame_shift=0.01, ties=ties)
    assert ties[0] > 0  # exact equalities d(A, X) == d(B, X) are scored 1/2 as in the reference
    assert cell_scores(result) == cells
    assert result.error == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("distance", ["angular", "kl", "levenshtein"])
@pytest.mark.parametrize("corpus", ["whole files", "inside files"])
def test_both_modes_in_one_call_equal_single_mode_calls(tmp_path, distance, corpus):
    if corpus == "whole files":
        items, feats = random_corpus(8, one_hot=distance == "levenshtein")
        frame_shift = None
    else:
        items, feats = segment_corpus(8, one_hot=distance == "levenshtein")
        frame_shift = 0.01
    if distance == "kl":
        feats = {k: np.abs(v) + 0.1 for k, v in feats.items()}
    path = write_item_file(tmp_path / "t.item", items)
    both = abx_modes(feats, path, distance, frame_shift=frame_shift)
    assert list(both) == ["across", "within"]
    assert list(abx_modes(feats, path, distance, ["within", "across", "within"], frame_shift)) == [
        "within",
        "across",
    ]
    for mode, result in both.items():
        single = abx(feats, path, distance, mode, frame_shift)
        assert result.error == single.error and result.n_triplets == single.n_triplets
        pd.testing.assert_frame_equal(result.cells, single.cells)
        pd.testing.assert_frame_equal(result.by_phone_pair, single.by_phone_pair)
        want, cells = brute_force(items, feats, distance, mode, frame_shift)
        assert result.error == pytest.approx(want, abs=1e-9)
        if distance != "levenshtein":
            assert cell_scores(result) == cells


def test_modes_are_checked(tmp_path):
    items, feats = random_corpus(0)
    path = write_item_file(tmp_path / "t.item", items)
    with pytest.raises(ValueError, match="modes must be a non-empty sequence"):
        abx_modes(feats, path, modes="across")
    with pytest.raises(ValueError, match="modes must be a non-empty sequence"):
        abx_modes(feats, path, modes=[])
    with pytest.raises(ValueError, match="mode must be one of"):
        abx_modes(feats, path, modes=["across", "inside"])
    with pytest.raises(ValueError, match="mode must be one of"):
        abx(feats, path, mode="inside")


def _fits(feats, item, frame_shift):
    n = len(feats[item.file])
    kept = select_frames(n, item.onset, item.offset, frame_shift)
    return kept.stop > kept.start and item_overrun(n, item.onset, item.offset, frame_shift) is None


@pytest.mark.parametrize("frame_shift", [None, 0.01, 0.02])
def test_item_frames_equal_select_frames_item_by_item(tmp_path, frame_shift):
    rng = np.random.default_rng(9)
    feats = {f"S1_{k}": rng.normal(size=(int(rng.integers(1, 40)), 3)) for k in range(12)}
    items = []
    for name, x in feats.items():
        n = len(x)
        for _ in range(6):
            if frame_shift is None:  # whole files or not, offsets around (N - 1) / N
                onset = float(rng.choice([0.0, 0.0, 0.5 / n]))
                offset = float(rng.choice([1.0, 1.5, np.ceil((n - 1) / n * 1e7) / 1e7, 0.5]))
            else:  # times on and between the half-frame boundaries of the rule, some past the end
                lo = int(rng.integers(0, n))
                hi = int(rng.integers(lo + 1, n + 3))
                onset = round(frame_shift * (lo + float(rng.choice([0.0, 0.5, 0.3]))), 7)
                offset = round(frame_shift * (hi + float(rng.choice([0.0, 0.5, 0.7]))), 7)
            if offset > onset:
                items.append(AbxItem(name, onset, offset, "p", "a", "b", "S1"))
    items = list(dict.fromkeys(items))  # an item listed twice is refused
    good = [it for it in items if _fits(feats, it, frame_shift)]
    bad = [it for it in items if not _fits(feats, it, frame_shift)]
    assert len(good) > 10 and len(bad) > 3
    got_items, frames = item_frames(feats, write_item_file(tmp_path / "t.item", good), frame_shift)
    assert got_items == good
    for it, cut in zip(good, frames, strict=True):
        x = feats[it.file]
        np.testing.assert_array_equal(
            cut, x[select_frames(len(x), it.onset, it.offset, frame_shift)]
        )
    for it in bad:  # the first item that does not fit is named, with its line
        path = write_item_file(tmp_path / "bad.item", [*good[:5], it, *good[5:]])
        with pytest.raises(
            ZeroSpeechFormatError, match=r"bad.item:7: item .*(no frame|keeps|runs)"
        ):
            item_frames(feats, path, frame_shift)


def test_edit_distance_of_symbol_sequences_by_hand():
    from audiorepro.metrics.abx import edit_distance

    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance([], ["AH", "B"]) == 2
    assert edit_distance(("B", "EH", "T", "ER"), ("B", "EH", "T", "ER", "R")) == 1
    assert edit_distance(("K", "AE", "M", "ER", "AH"), ("K", "AE", "M", "AH", "R", "AH")) == 2
    assert edit_distance([3, 1, 2], [3, 1, 2]) == 0


# ----------------------------------------------------------------------------- meaningless input


def test_duplicated_items_and_items_with_two_labels_are_refused(tmp_path):
    # every row twice: within-speaker A and X would be one segment (ABX 0.000 before)
    items, feats = random_corpus(7)
    twice = [it for it in items for _ in range(2)]
    path = write_item_file(tmp_path / "twice.item", twice)
    with pytest.raises(
        ZeroSpeechFormatError,
        match=rf"twice.item:3: item {items[0].file} 0.0-1.0 repeats line 2 "
        rf"\({len(items)} of the {len(twice)} items repeat an earlier line\)",
    ):
        abx_error(feats, path, mode="within")
    two = [items[0], dataclasses.replace(items[0], phone="zz")] + items[1:]
    path = write_item_file(tmp_path / "two.item", two)
    with pytest.raises(
        ZeroSpeechFormatError,
        match=rf"two.item:3: item {items[0].file} 0.0-1.0 is on line 2 with other labels "
        r"\(#phone 'zz', not 'p'; 1 item\(s\) of the \d+ listed with two labels\)",
    ):
        abx_error(feats, path)


def test_levenshtein_on_real_valued_frames_is_refused(tmp_path):
    items, feats = random_corpus(3)  # normal frames: no frame value occurs twice
    path = write_item_file(tmp_path / "t.item", items)
    with pytest.raises(ScoreError, match=rf"--distance levenshtein: no frame value occurs in two "
                       rf"of the {len(items)} items"):  # fmt: skip
        abx_error(feats, path, distance="levenshtein")
    rng = np.random.default_rng(0)  # one-hot frames of the same items are symbols: scored
    one_hot = {k: np.eye(4)[rng.integers(0, 4, size=len(v))] for k, v in feats.items()}
    assert abx_error(one_hot, path, distance="levenshtein") >= 0.0


def test_a_frame_shift_that_does_not_fit_the_features_is_refused(tmp_path):
    # whole files in seconds at 10 ms, scored at 40 ms: only the first quarter of each file
    items, feats = random_corpus(5, whole_files=False)
    feats = {k: np.repeat(v, 4, axis=0) for k, v in feats.items()}  # 4x the frames
    items = [dataclasses.replace(it, offset=round(4 * it.offset, 3)) for it in items]
    path = write_item_file(tmp_path / "t.item", items)
    assert abx_error(feats, path, frame_shift=0.01) >= 0.0  # the right frame shift
    with pytest.raises(ZeroSpeechFormatError, match=r"t.item: at a frame shift of 0.04 s the items "
                       r"reach at most 2\d% of their files' frames .*frame shift .*about 0.01 s"):  # fmt: skip
        abx_error(feats, path, frame_shift=0.04)
    # the frame shift known to be the features' own (recorded where they were written):
    # items ending early in every file are scored, as at any other frame shift
    assert abx_error(feats, path, frame_shift=0.04, shift_known=True) >= 0.0


def test_weak_scores_warn(tmp_path):
    # one speaker: within-speaker ABX is computable, but says nothing of other voices
    rng = np.random.default_rng(0)
    feats = {f"S1_{k}": rng.normal(size=(5, 3)) for k in range(4)}
    text = "S1_0 0 1 p x y S1\nS1_1 0 1 p x y S1\nS1_2 0 1 q x y S1\nS1_3 0 1 q x y S1\n"
    with pytest.warns(ScoreWarning, match=r"all 4 items are from one speaker \(S1\)"):
        abx_error(feats, _write(tmp_path, text), mode="within")
    with pytest.warns(ScoreWarning, match=r"bad.item: the within-speaker ABX rests on 8 "
                      r"triplet\(s\)"):  # fmt: skip
        abx_error(feats, _write(tmp_path, text), mode="within")


def brute_force_used(items, mode):
    """The indices of the items that are the A, B or X of some triplet, one by one."""
    return {k for triplet in brute_force_triplets(items, mode) for k in triplet}


@pytest.mark.parametrize("mode", ["across", "within"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_items_in_no_triplet_are_counted_and_their_speakers_named(tmp_path, mode, seed):
    """A speaker who shares no word with the others takes part in no across triplet: its items
    leave the score as it was. The items counted as used are those brute force finds in some
    triplet, per speaker."""
    from audiorepro.metrics.abx import triplet_coverage

    items, _ = random_corpus(seed)
    items += [AbxItem(f"dd_{k}", 0.0, 1.0, f"w{k}", "a", "b", "dd") for k in range(3)]
    path = write_item_file(tmp_path / "t.item", items)
    found = triplet_coverage(path, mode)
    used = brute_force_used(items, mode)
    assert found.used == len(used) and found.items == len(items)
    out = {}
    for k, it in enumerate(items):
        if k not in used:
            out[it.speaker] = out.get(it.speaker, 0) + 1
    totals = {s: sum(it.speaker == s for it in items) for s in out}
    assert found.left_out == {s: (n, totals[s]) for s, n in out.items()}
    assert found.left_out["dd"] == (3, 3)
    line = found.line()
    assert line.startswith(f"scored {len(used)} of the {len(items)} items: ")
    assert f"take part in no {mode}-speaker triplet" in line and "dd (3 of 3)" in line
    assert "dd shares no triplet at all" in line


def test_an_item_file_whose_every_item_is_in_a_triplet_says_nothing(tmp_path):
    from audiorepro.metrics.abx import triplet_coverage

    items = [
        AbxItem(f"{s}_{w}", 0.0, 1.0, w, "a", "b", s) for s in ("S1", "S2") for w in ("p", "q")
    ]
    found = triplet_coverage(write_item_file(tmp_path / "t.item", items), "across")
    assert (found.used, found.items, found.left_out, found.line()) == (4, 4, {}, "")
