"""Same-different and cross-view AP against brute force written here, hand cases, ties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from audiorepro.metrics.average_precision import (
    cross_view_ap,
    cross_view_chance,
    cross_view_positive_cosines,
    pairs_average_precision,
    reference_cross_view_ap,
    reference_same_different_ap,
    same_different_ap,
    same_different_chance,
)
from audiorepro.metrics.checks import ScoreError, ScoreWarning


def brute_pairs_same_different(x, labels):
    """Every i < j pair: (cosine distance, positive?)."""
    out = []
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            cos = float(np.dot(x[i], x[j]) / (np.linalg.norm(x[i]) * np.linalg.norm(x[j])))
            out.append((1.0 - cos, labels[i] == labels[j]))
    return out


def brute_pairs_cross(a, a_lab, w, w_lab):
    out = []
    for i in range(len(a)):
        for j in range(len(w)):
            cos = float(np.dot(a[i], w[j]) / (np.linalg.norm(a[i]) * np.linalg.norm(w[j])))
            out.append((1.0 - cos, a_lab[i] == w_lab[j]))
    return out


def brute_ap_sorted(flags):
    """Non-interpolated AP of a ranked list of positive flags."""
    hits, total = 0, 0.0
    for rank, positive in enumerate(flags, start=1):
        if positive:
            hits += 1
            total += hits / rank
    return total / hits


def brute_prb_sorted(flags):
    """Kamper's PRB: interpolated precision (max from the right), first argmin |R - P|."""
    flags = np.asarray(flags)
    num_pos = flags.sum()
    hits = 0
    precision, recall = [], []
    for rank, positive in enumerate(flags, start=1):
        hits += int(positive)
        precision.append(hits / rank)
        recall.append(hits / num_pos)
    for i in range(len(precision) - 2, -1, -1):
        precision[i] = max(precision[i], precision[i + 1])
    diffs = [abs(r - p) for r, p in zip(recall, precision, strict=True)]
    i = int(np.argmin(diffs))
    return (recall[i] + precision[i]) / 2


def brute_expected_ap(pairs, decimals=9):
    """Expected AP over every ordering of tied pairs, by enumerating positive placements."""
    pairs = sorted(pairs, key=lambda t: round(t[0], decimals))
    groups = []
    for _, grp in itertools.groupby(pairs, key=lambda t: round(t[0], decimals)):
        flags = [f for _, f in grp]
        groups.append((len(flags), sum(flags)))
    choices = [list(itertools.combinations(range(n), p)) for n, p in groups]
    total, count = 0.0, 0
    for combo in itertools.product(*choices):
        flags = []
        for (n, _), placed in zip(groups, combo, strict=True):
            flags += [t in placed for t in range(n)]
        total += brute_ap_sorted(flags)
        count += 1
    return total / count


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_different_matches_brute_force_tie_free(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(40, 5))
    labels = rng.integers(0, 6, size=40)
    pairs = sorted(brute_pairs_same_different(x, labels))
    flags = [f for _, f in pairs]
    ap, prb = same_different_ap(x, labels, return_prb=True)
    assert ap == pytest.approx(brute_ap_sorted(flags), abs=1e-9)
    assert prb == pytest.approx(brute_prb_sorted(flags), abs=1e-9)
    assert same_different_ap(x, labels) == pytest.approx(ap, abs=1e-12)
    assert reference_same_different_ap(x, labels) == pytest.approx(ap, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_cross_view_matches_brute_force_tie_free(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(30, 4))
    a_lab = rng.integers(0, 8, size=30)
    w = rng.normal(size=(8, 4))
    w_lab = np.arange(8)
    flags = [f for _, f in sorted(brute_pairs_cross(a, a_lab, w, w_lab))]
    ap, prb = cross_view_ap(a, a_lab, w, w_lab, return_prb=True)
    assert ap == pytest.approx(brute_ap_sorted(flags), abs=1e-9)
    assert prb == pytest.approx(brute_prb_sorted(flags), abs=1e-9)
    assert reference_cross_view_ap(a, a_lab, w, w_lab) == pytest.approx(ap, abs=1e-9)


def brute_pairs_cross_abs(a, a_lab, w, w_lab):
    """Every (token, word) pair: (1 - |cos|, positive?)."""
    return [(1.0 - abs(1.0 - d), f) for d, f in brute_pairs_cross(a, a_lab, w, w_lab)]


def test_negative_share_and_abs_cos_ap_on_hand_made_embeddings():
    # Two written words along the axes; of their four tokens, the second of each word points
    # away from its word (cos < 0): 2 of 4 positive pairs.
    w = np.array([[1.0, 0.0], [0.0, 1.0]])
    w_lab = ["a", "b"]
    a = np.array([[1.0, 0.1], [-1.0, 0.2], [0.1, 1.0], [0.3, -1.0]])
    a_lab = ["a", "a", "b", "b"]
    cosines = cross_view_positive_cosines(a, a_lab, w, w_lab)
    assert cosines.shape == (4,) and list(cosines < 0) == [False, True, False, True]
    assert float(np.mean(cosines < 0)) == 0.5
    # By cos the two opposite tokens rank last; by |cos| every positive pair comes first.
    flags = [f for _, f in sorted(brute_pairs_cross_abs(a, a_lab, w, w_lab))]
    assert flags == [True] * 4 + [False] * 4
    assert cross_view_ap(a, a_lab, w, w_lab, absolute=True) == pytest.approx(1.0)
    by_cos = [f for _, f in sorted(brute_pairs_cross(a, a_lab, w, w_lab))]
    assert cross_view_ap(a, a_lab, w, w_lab) == pytest.approx(brute_ap_sorted(by_cos))
    assert cross_view_ap(a, a_lab, w, w_lab) < 0.8


@pytest.mark.parametrize("seed", [0, 1])
def test_abs_cos_cross_view_ap_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(30, 4))
    a_lab = rng.integers(0, 8, size=30)
    w = rng.normal(size=(8, 4))
    flags = [f for _, f in sorted(brute_pairs_cross_abs(a, a_lab, w, np.arange(8)))]
    assert cross_view_ap(a, a_lab, w, np.arange(8), absolute=True) == pytest.approx(
        brute_ap_sorted(flags), abs=1e-9
    )
    # |cos| does not see a token's sign: flipping tokens changes nothing.
    signs = rng.choice([-1.0, 1.0], size=(30, 1))
    assert cross_view_ap(signs * a, a_lab, w, np.arange(8), absolute=True) == pytest.approx(
        cross_view_ap(a, a_lab, w, np.arange(8), absolute=True), abs=1e-12
    )


def test_chance_levels_are_the_shares_of_positive_pairs():
    # 3 tokens x 3 words, one positive pair per token
    assert cross_view_chance(["a", "a", "b"], ["a", "b", "c"]) == pytest.approx(1 / 3)
    # 10 pairs of 5 labels, 2 of them of one word
    assert same_different_chance(["a", "a", "b", "b", "c"]) == pytest.approx(0.2)


def test_blocked_pass_matches_brute_force_over_many_blocks(monkeypatch):
    # Tiny blocks force the diagonal/rectangle split and many blocks.
    import audiorepro.metrics.average_precision as ap_module

    monkeypatch.setattr(ap_module, "_BLOCK_ELEMENTS", 37)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(33, 3))
    labels = [f"w{k}" for k in rng.integers(0, 5, size=33)]
    flags = [f for _, f in sorted(brute_pairs_same_different(x, labels))]
    assert same_different_ap(x, labels) == pytest.approx(brute_ap_sorted(flags), abs=1e-9)
    a = rng.normal(size=(21, 3))
    a_lab = rng.integers(0, 4, size=21)
    w = rng.normal(size=(4, 3))
    flags = [f for _, f in sorted(brute_pairs_cross(a, a_lab, w, np.arange(4)))]
    assert cross_view_ap(a, a_lab, w, np.arange(4)) == pytest.approx(
        brute_ap_sorted(flags), abs=1e-9
    )


def test_hand_computed_perfect_and_worst():
    # Positives closest: AP = 1. Positive farthest among 3 pairs: AP = 1/3.
    x = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]])
    assert same_different_ap(x, ["a", "a", "b"]) == pytest.approx(1.0)
    x = np.array([[1.0, 0.0], [-1.0, 0.0], [0.7, 0.7]])
    assert same_different_ap(x, ["a", "a", "b"]) == pytest.approx(1 / 3)
    # Two positives at ranks 1 and 3: (1/1 + 2/3) / 2.
    x = np.array([[1.0, 0.0], [1.0, 0.05], [0.0, 1.0], [0.2, 1.0], [-1.0, 0.3]])
    flags = [f for _, f in sorted(brute_pairs_same_different(x, [0, 0, 1, 1, 2]))]
    assert flags[:3] == [True, False, True] or flags[:3] == [True, True, False]
    assert same_different_ap(x, [0, 0, 1, 1, 2]) == pytest.approx(brute_ap_sorted(flags))


def test_hand_computed_tie_same_different():
    # d(1,2) = 0 (negative, identical vectors), then a tie at d = 1: {(0,1) pos, (0,2) neg}.
    # Orderings: neg, neg, pos -> 1/3; neg, pos, neg -> 1/2; expected 5/12.
    x = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    assert same_different_ap(x, ["a", "a", "b"]) == pytest.approx(5 / 12, abs=1e-12)


def test_hand_computed_tie_cross_view():
    # Two tie groups {pos, neg} at d = 0 and at d = 1. The four orderings give
    # 5/6, 3/4, 7/12, 1/2; their mean is 2/3.
    # (A third written word, farther than every positive, keeps the written view from being
    # one vector, which is refused as collapsed.)
    a = np.array([[1.0, 0.0], [0.0, 1.0]])
    w = np.array([[1.0, 0.0], [1.0, 0.0], [-1.0, -1.0]])
    assert cross_view_ap(a, ["a", "b"], w, ["a", "b", "c"]) == pytest.approx(2 / 3, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ties_expected_ap_matches_enumeration(seed):
    # Integer points on a small grid produce many exactly tied cosine distances.
    rng = np.random.default_rng(seed)
    x = rng.integers(-1, 2, size=(7, 2)).astype(float)
    x[np.all(x == 0, axis=1)] = [1.0, 0.0]
    labels = rng.integers(0, 2, size=7)
    pairs = brute_pairs_same_different(x, labels)
    assert len({round(d, 9) for d, _ in pairs}) < len(pairs)  # there are ties
    assert same_different_ap(x, labels) == pytest.approx(brute_expected_ap(pairs), abs=1e-9)


def test_ties_cross_view_matches_enumeration():
    rng = np.random.default_rng(7)
    a = rng.integers(-1, 2, size=(6, 2)).astype(float)
    a[np.all(a == 0, axis=1)] = [0.0, 1.0]
    a_lab = rng.integers(0, 3, size=6)
    w = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    pairs = brute_pairs_cross(a, a_lab, w, np.arange(3))
    assert cross_view_ap(a, a_lab, w, np.arange(3)) == pytest.approx(
        brute_expected_ap(pairs), abs=1e-9
    )


def test_all_tied_large_group_uses_closed_form():
    # Every pair at distance 0; positive fraction q: expected AP -> about q for large groups.
    # (Collapsed embeddings, every row one vector, are refused: the pairs are given here.)
    x = np.ones((60, 3))
    labels = np.arange(60) % 3
    pairs = brute_pairs_same_different(x, labels)
    p = sum(f for _, f in pairs)
    n = len(pairs)
    expected = sum((p / n) * (1 + (t - 1) * (p - 1) / (n - 1)) / t for t in range(1, n + 1)) / p
    flags = [f for _, f in pairs]
    assert pairs_average_precision(np.zeros(n), flags) == pytest.approx(expected, abs=1e-9)
    assert math.isclose(expected, p / n, rel_tol=0.1)


def test_scale_invariance_and_label_types():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(25, 4))
    labels = rng.integers(0, 4, size=25)
    ap = same_different_ap(x, labels)
    assert same_different_ap(x * 7.5, labels) == pytest.approx(ap, abs=1e-12)
    assert same_different_ap(x.astype(np.float32), [str(v) for v in labels]) == pytest.approx(
        ap, abs=1e-6
    )


def test_bad_inputs_are_named():
    x = np.eye(3)
    with pytest.raises(ValueError, match="embeddings: expected real numbers, got .*complex"):
        same_different_ap(x + 1j, [0, 0, 1])
    with pytest.raises(ValueError, match=r"embeddings: rows of no dimension \(shape \(3, 0\)\)"):
        same_different_ap(np.zeros((3, 0)), [0, 0, 1])
    with pytest.raises(ValueError, match="no two embeddings share a label"):
        same_different_ap(x, [0, 1, 2])
    with pytest.raises(ValueError, match="expected 3 labels"):
        same_different_ap(x, [0, 0])
    bad = x.copy()
    bad[1] = 0.0
    with pytest.raises(ValueError, match="row 1 is all zeros"):
        same_different_ap(bad, [0, 0, 1])
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="row 1 holds NaN"):
        same_different_ap(bad, [0, 0, 1])
    with pytest.raises(ValueError, match="metric"):
        same_different_ap(x, [0, 0, 1], metric="euclidean")
    with pytest.raises(ValueError, match="dimension"):
        cross_view_ap(np.eye(3), [0, 1, 2], np.eye(2), [0, 1])
    with pytest.raises(ValueError, match="no positive pair"):
        cross_view_ap(np.eye(3), [5, 6, 7], np.eye(3), [0, 1, 2])


def test_pairs_average_precision_matches_brute_force_and_ties():
    rng = np.random.default_rng(11)
    d = rng.uniform(0, 5, size=60)
    pos = rng.random(60) < 0.3
    order = np.argsort(d)
    ap, prb = pairs_average_precision(d, pos, return_prb=True)
    assert ap == pytest.approx(brute_ap_sorted(list(pos[order])), abs=1e-12)
    assert prb == pytest.approx(brute_prb_sorted(list(pos[order])), abs=1e-12)
    # A positive tied with a negative, after one negative: orderings give 1/2 and 1/3.
    assert pairs_average_precision([0.0, 1.0, 1.0], [False, True, False]) == pytest.approx(5 / 12)
    with pytest.raises(ValueError, match="NaN"):
        pairs_average_precision([np.nan, 1.0], [True, False])


def test_prb_treats_a_mixed_tie_group_as_one_threshold():
    # Pairs: {pos, neg} tied at 0.1, neg at 0.2, pos at 0.3, neg at 0.4. The tie group gives one
    # point, after it: recall 1/2, precision 1/2, so |R - P| = 0 and PRB = 1/2. (Ranking the
    # tied positive first would add a point (1/2, 1) inside the group; the policy has none.)
    d = [0.1, 0.1, 0.2, 0.3, 0.4]
    pos = [True, False, False, True, False]
    _, prb = pairs_average_precision(d, pos, return_prb=True)
    assert prb == pytest.approx(0.5)
    # Tie-free variant with the positive first: Kamper's per-rank curve, by brute force.
    d2 = [0.09, 0.1, 0.2, 0.3, 0.4]
    assert pairs_average_precision(d2, pos, return_prb=True)[1] == pytest.approx(
        brute_prb_sorted(pos)
    )


def test_exact_even_when_the_positive_hints_miss_their_bins(monkeypatch):
    # The blocked pass re-marks the bins where it actually found positives and counts again.
    import audiorepro.metrics.average_precision as ap_module

    original = ap_module._exact_stats
    monkeypatch.setattr(
        ap_module, "_exact_stats", lambda blocks, hint, n: original(blocks, hint[:0], n)
    )
    rng = np.random.default_rng(9)
    x = rng.normal(size=(30, 4))
    labels = rng.integers(0, 5, size=30)
    flags = [f for _, f in sorted(brute_pairs_same_different(x, labels))]
    assert same_different_ap(x, labels) == pytest.approx(brute_ap_sorted(flags), abs=1e-9)


def test_one_label_only_is_refused():
    # every pair positive: AP 1 whatever the embeddings (what `awe ap` printed before)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 3))
    with pytest.raises(ScoreError, match=r"labels: all 5 rows carry one label, so every one of "
                       r"the 10 pairs is a same-label pair"):  # fmt: skip
        same_different_ap(x, ["yes"] * 5)
    with pytest.raises(ScoreError, match=r"every one of the 10 .*pairs is a same-label pair"):
        cross_view_ap(x, ["yes"] * 5, x[:2], ["yes", "yes"])
    with pytest.raises(ScoreError, match=r"positive: all 3 pairs are positive"):
        pairs_average_precision([0.1, 0.2, 0.3], [True, True, True])


def test_collapsed_embeddings_are_refused():
    x = np.tile([[0.3, -1.0, 2.0]], (6, 1))  # a model that outputs one vector
    labels = ["a", "a", "b", "b", "c", "c"]
    with pytest.raises(ScoreError, match=r"embeddings: all 6 rows are the same vector"):
        same_different_ap(x, labels)
    with pytest.raises(ScoreError, match=r"acoustic_emb: all 6 rows are the same vector"):
        cross_view_ap(x, labels, np.eye(3), ["a", "b", "c"])
    # scaled copies of one vector are one vector for the cosine distance; so are 1-D rows
    scaled = x * np.arange(1, 7)[:, None]
    with pytest.raises(ScoreError, match=r"embeddings: all 6 rows point the same way"):
        same_different_ap(scaled, labels)
    with pytest.raises(ScoreError, match=r"word_emb: all 3 rows point the same way"):
        cross_view_ap(np.eye(3)[[0, 0, 1, 1, 2, 2]], labels, scaled[:3], ["a", "b", "c"])
    with pytest.raises(ScoreError, match=r"embeddings: one dimension: the cosine distance"):
        same_different_ap((np.arange(1.0, 7.0) * [1, -1, 1, -1, 1, 1])[:, None], labels)
    # rows that differ in the last bit point the same way; a hair apart (1 - cos 2e-6), scored
    y = x.copy()
    y[0, 0] = np.nextafter(y[0, 0], 1.0)
    with pytest.raises(ScoreError, match=r"embeddings: all 6 rows point the same way"):
        same_different_ap(y, labels)
    y = scaled.copy()
    y[0] += [0.0, 0.0, 0.01]
    assert 0.0 < same_different_ap(y, labels) <= 1.0


def test_a_handful_of_positive_pairs_warns():
    x = np.eye(4)
    with pytest.warns(ScoreWarning, match=r"labels: the AP rests on 1 same-label pair\(s\) of 4"):
        same_different_ap(x, [0, 0, 1, 2])
    with pytest.warns(ScoreWarning, match=r"the AP rests on 2 positive pair\(s\)"):
        cross_view_ap(x, [0, 0, 1, 2], np.eye(4)[:1], [0])
    with pytest.warns(ScoreWarning, match=r"positive: the AP rests on 1 positive pair\(s\)"):
        pairs_average_precision([0.1, 0.2], [True, False])


def test_the_random_ranking_level_is_the_best_of_random_orders_of_the_pairs():
    """The AP a random ranking reaches: each draw's AP equals the library's AP of pairs with
    the positives at those ranks; the level lies in the top few per cent of the exact
    distribution (all C(20, 4) placements); a set of all positives is at 1 whatever the
    order; one positive in two pairs is first half the time (1 is reached)."""
    import itertools

    from audiorepro.metrics.average_precision import random_ranking_ap

    rng = np.random.default_rng(3)
    for _ in range(5):  # the formula of a draw: AP with the positives at ranks r_k
        ranks = np.sort(rng.choice(20, size=4, replace=False)) + 1
        positive = np.zeros(20, dtype=bool)
        positive[ranks - 1] = True
        formula = np.mean(np.arange(1, 5) / ranks)
        assert pairs_average_precision(np.arange(20.0), positive) == pytest.approx(formula)
    exact = sorted(
        np.mean(np.arange(1, 5) / (np.asarray(c) + 1))
        for c in itertools.combinations(range(20), 4)
    )
    level = random_ranking_ap(20, 4)
    assert exact[int(0.95 * len(exact))] <= level <= exact[-1]
    assert level == random_ranking_ap(20, 4)  # seeded
    assert random_ranking_ap(7, 7) == 1.0 and random_ranking_ap(2, 1) == 1.0
    assert np.mean(exact) < level  # the mean of a random ranking is far below its best
    with pytest.raises(ValueError, match="positives must be within 1..num_pairs, got 0 of 5"):
        random_ranking_ap(5, 0)


def test_the_ap_verdict_says_which_numbers_are_at_chance():
    from audiorepro.experiments.awe.evaluate import ap_verdict
    from audiorepro.metrics.average_precision import random_ranking_ap

    level = random_ranking_ap(190, 10)  # 10 same-word pairs among 190: about 0.3
    assert 0.15 < level < 0.5
    both = ap_verdict(0.0589, 0.0462, 190, 10)
    assert both == (
        "neither the embeddings nor MFCC + DTW is above chance (AP 0.059 vs 0.046; a random "
        f"ranking of these 190 pairs, 10 of them same-word pairs, reached {level:.3f} in one "
        "of 100 tries): these pairs cannot tell them apart"
    )
    assert ap_verdict(0.2, 0.9, 190, 10).startswith(
        "the embeddings do not beat MFCC + DTW (AP 0.200 vs 0.900); the embeddings are at chance"
    )
    assert ap_verdict(0.9, 0.2, 190, 10).startswith(
        "the embeddings beat MFCC + DTW (AP 0.900 vs 0.200); MFCC + DTW is at chance here"
    )
    assert ap_verdict(0.9, 0.8, 190, 10) == "the embeddings beat MFCC + DTW (AP 0.900 vs 0.800)"
    assert ap_verdict(0.8, 0.8, 190, 10) == (
        "the embeddings do not beat MFCC + DTW (AP 0.8000 vs 0.8000)"
    )
