"""The paired bootstrap over words (:mod:`audiorepro.metrics.paired`): a draw's weighted scores
equal the scores of the words' tokens copied as often as drawn, computed by brute force here;
the interval is clear only where every draw agrees in sign; the verdicts of ``abx score`` and
``awe ap`` call a difference within it a tie."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audiorepro.metrics.average_precision import pairs_average_precision
from audiorepro.metrics.paired import (
    MIN_WORDS,
    PairedDifference,
    _Ranking,
    abx_difference,
    ap_difference,
    cosine_pair_distances,
    word_draws,
)


def brute_ap(dist: np.ndarray, positive: np.ndarray) -> float:
    """Non-interpolated AP of a tie-free ranking: mean over positives of k / r_k."""
    order = np.argsort(dist, kind="stable")
    pos = positive[order]
    ranks = np.flatnonzero(pos) + 1
    return float(np.mean(np.arange(1, len(ranks) + 1) / ranks))


def copied(labels: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The rows of the dataset where each word's tokens are there ``counts[word]`` times: the
    index of each copy's original row."""
    return np.concatenate([np.repeat(r, int(counts[w])) for r, w in enumerate(labels)])


def test_a_draws_weighted_ap_is_the_ap_of_the_tokens_copied_as_often_as_drawn():
    rng = np.random.default_rng(3)
    n, words = 24, 6
    labels = rng.integers(0, words, n)
    points = rng.standard_normal((n, 4))
    i, j = np.triu_indices(n, 1)
    dist = np.linalg.norm(points[i] - points[j], axis=1)  # tie-free
    ranking = _Ranking(dist, labels[i], labels[j])
    for counts in word_draws(words, 20, seed=1):
        if not any(counts[w] > 0 and (labels == w).sum() > 1 for w in range(words)):
            continue
        rows = copied(labels, counts)
        a, b = np.triu_indices(len(rows), 1)
        keep = rows[a] != rows[b]  # a token's pair with its own copy is not a pair
        d = np.linalg.norm(points[rows[a]] - points[rows[b]], axis=1)[keep]
        positive = (labels[rows[a]] == labels[rows[b]])[keep]
        assert ranking.ap(counts) == pytest.approx(brute_ap(d, positive), abs=1e-12)
    ones = np.ones(words)
    assert ranking.ap(ones) == pytest.approx(pairs_average_precision(dist, labels[i] == labels[j]))


def test_a_draws_ap_by_hand():
    """Pairs ranked +, -, +, -, the words' counts 2, 1, 1: the first pair (word 0 with itself)
    is there 4 times, the second (0, 1) twice, the third (1, 1) once, the last (1, 2) once:
    positives at ranks 1-4 and 7 of 8, AP = (1 + 1 + 1 + 1 + 5/7) / 5; ties in pair order."""
    word_i = np.array([0, 0, 1, 1])
    word_j = np.array([0, 1, 1, 2])
    ranking = _Ranking(np.array([0.1, 0.2, 0.2, 0.3]), word_i, word_j)
    assert ranking.ap(np.array([2.0, 1.0, 1.0])) == pytest.approx((4 + 5 / 7) / 5)
    assert ranking.ap(np.ones(3)) == pytest.approx((1 + 2 / 3) / 2)
    assert np.isnan(ranking.ap(np.array([0.0, 0.0, 1.0])))  # no same-word pair drawn


def test_word_draws_are_seeded_and_draw_every_word_count():
    draws = word_draws(7, 50, seed=4)
    assert draws.shape == (50, 7) and (draws.sum(axis=1) == 7).all()
    assert np.array_equal(draws, word_draws(7, 50, seed=4))
    assert not np.array_equal(draws, word_draws(7, 50, seed=5))


def pairs_table(scores: dict[tuple[str, str], float]) -> pd.DataFrame:
    return pd.DataFrame(
        [(a, b, s) for (a, b), s in scores.items()], columns=["phone_1", "phone_2", "score"]
    )


def test_abx_difference_is_the_weighted_mean_of_the_word_pairs():
    words = [f"w{k}" for k in range(6)]
    rng = np.random.default_rng(0)
    pairs = [(a, b) for a in words for b in words if a != b]
    first = {p: float(rng.uniform(0.5, 1)) for p in pairs}
    second = {p: float(rng.uniform(0.5, 1)) for p in pairs}
    diff = abx_difference(pairs_table(first), pairs_table(second), resamples=200)
    errors = [100 * (1 - np.mean(list(t.values()))) for t in (first, second)]
    assert diff.difference == pytest.approx(errors[0] - errors[1])
    assert diff.words == 6 and diff.resamples <= 200
    # one draw by hand: the word pairs of the drawn words, each counted c[a] c[b] times
    counts = word_draws(6, 1, seed=0)[0]
    num = sum(
        counts[words.index(a)] * counts[words.index(b)] * 100 * (second[(a, b)] - first[(a, b)])
        for a, b in pairs
    )
    den = sum(counts[words.index(a)] * counts[words.index(b)] for a, b in pairs)
    one = abx_difference(pairs_table(first), pairs_table(second), resamples=1)
    assert one.low == pytest.approx(num / den) and one.high == pytest.approx(num / den)


def test_a_difference_is_clear_only_when_every_word_pair_agrees_enough():
    words = [f"w{k}" for k in range(8)]
    pairs = [(a, b) for a in words for b in words if a != b]
    base = pairs_table({p: 0.8 for p in pairs})
    better = pairs_table({p: 0.9 for p in pairs})  # 10 points better on every pair
    diff = abx_difference(better, base)
    assert diff.clear and diff.low == pytest.approx(-10) and diff.high == pytest.approx(-10)
    # better on the pairs of half the words by 10, worse on the others' by 10: no verdict
    mixed = pairs_table({(a, b): 0.9 if a < "w4" else 0.7 for a, b in pairs})
    diff = abx_difference(mixed, base)
    assert not diff.clear and diff.low < 0 < diff.high
    assert diff.difference == pytest.approx(0.0)
    assert "resampling the 8 words, the difference's 95 % interval is -" in diff.interval()
    few = [f"w{k}" for k in range(MIN_WORDS - 1)]
    small = pairs_table({(a, b): 0.9 for a in few for b in few if a != b})
    assert abx_difference(small, small) is None
    other = pairs_table({("w0", "w1"): 0.9, ("w1", "w0"): 0.9})
    with pytest.raises(ValueError, match="not of the same items"):
        abx_difference(base, other)


def test_clear_needs_the_interval_on_the_observed_side():
    assert PairedDifference(0.02, 0.01, 0.03, 10, 1000).clear
    assert PairedDifference(-0.02, -0.03, -0.01, 10, 1000).clear
    assert not PairedDifference(0.02, -0.01, 0.03, 10, 1000).clear
    assert not PairedDifference(0.001, -0.03, -0.01, 10, 1000).clear  # signs disagree
    assert not PairedDifference(0.0, 0.0, 0.0, 10, 1000).clear  # equal is not beating


def test_ap_difference_of_a_model_better_on_every_word_and_of_a_coin():
    rng = np.random.default_rng(2)
    labels = np.repeat(np.arange(10), 6)
    centres = rng.standard_normal((10, 8))
    good = centres[labels] + 0.3 * rng.standard_normal((60, 8))
    poor = centres[labels] + 1.5 * rng.standard_normal((60, 8))
    d_good, d_poor = cosine_pair_distances(good), cosine_pair_distances(poor)
    i, j = np.triu_indices(60, 1)
    same = labels[i] == labels[j]
    aps = (pairs_average_precision(d_good, same), pairs_average_precision(d_poor, same))
    diff = ap_difference(d_good, d_poor, labels, aps, resamples=300)
    assert diff.clear and diff.low > 0 and diff.difference == pytest.approx(aps[0] - aps[1])
    twin = poor + 1e-3 * rng.standard_normal((60, 8))  # the same system, a hair apart
    d_twin = cosine_pair_distances(twin)
    close = ap_difference(
        d_twin, d_poor, labels, (pairs_average_precision(d_twin, same), aps[1]), resamples=300
    )
    assert not close.clear
    with pytest.raises(ValueError, match="expected the distances of the 1770 pairs"):
        ap_difference(d_good[:-1], d_poor, labels, aps)
    assert ap_difference(d_good, d_poor, labels % 4, aps) is None  # 4 words: no interval


def test_cosine_pair_distances_are_one_minus_cos_in_triu_order():
    x = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    expected = [1.0, 1 - 1 / np.sqrt(2), 1 - 1 / np.sqrt(2)]
    assert cosine_pair_distances(x) == pytest.approx(expected)


def test_the_abx_verdict_calls_a_difference_within_the_words_spread_a_tie():
    from audiorepro.experiments.zerospeech.baselines import ScoreRow, verdict

    words = [f"w{k}" for k in range(8)]
    pairs = [(a, b) for a in words for b in words if a != b]
    units = pairs_table({(a, b): 0.9 if a < "w4" else 0.7 for a, b in pairs})  # 20 % error
    kmeans = pairs_table({p: 0.7 for p in pairs})  # 30 %: worse on half the words only
    frames = pairs_table({p: 0.8 for p in pairs})  # 20 %: better on half, worse on half

    def row(what, table, submission=False):
        error = 100 * (1 - table["score"].mean())
        return ScoreRow(what, what, error, None, submission, "", table)

    said = verdict([row("vectors", units, True), row("kmeans", kmeans), row("frames", frames)])
    first, second = said.split("; ", 1)
    assert first == "the units beat the k-means baseline (20.0 % vs 30.0 %)"
    assert second.startswith(
        "the units and the input frames cannot be told apart on these items (20.000 % vs "
        "20.000 %; resampling the 8 words, the difference's 95 % interval is -"
    ) and second.endswith(" points)")
    # without the word pairs (rows made by hand), by the numbers as before
    bare = [ScoreRow(r.what, r.name, r.error, None, r.submission) for r in
            (row("vectors", units, True), row("frames", frames))]  # fmt: skip
    assert "told apart" not in verdict(bare) and "interval" not in verdict(bare)


def test_the_ap_verdict_calls_a_difference_within_the_words_spread_a_tie():
    from audiorepro.experiments.awe.evaluate import ap_verdict

    level = PairedDifference(0.004, -0.02, 0.03, 12, 1000)
    assert ap_verdict(0.175, 0.171, 1000, 100, level) == (
        "the embeddings and MFCC + DTW cannot be told apart on these pairs (AP 0.175 vs 0.171; "
        "resampling the 12 words, the difference's 95 % interval is -0.020 to +0.030)"
    )
    clear = PairedDifference(0.004, 0.001, 0.007, 12, 1000)
    assert ap_verdict(0.175, 0.171, 1000, 100, clear) == (
        "the embeddings beat MFCC + DTW (AP 0.175 vs 0.171)"
    )
    assert (
        ap_verdict(0.175, 0.171, 1000, 100) == "the embeddings beat MFCC + DTW (AP 0.175 vs 0.171)"
    )


def test_rankings_of_too_many_pairs_are_not_resampled_and_the_verdict_says_so(monkeypatch):
    from audiorepro.experiments.awe.evaluate import ap_verdict
    from audiorepro.metrics import paired

    labels = np.repeat(np.arange(6), 3)
    d = cosine_pair_distances(np.random.default_rng(0).standard_normal((18, 4)))
    assert paired.ap_difference(d, d, labels, (0.5, 0.5)) is not None
    monkeypatch.setattr(paired, "MAX_AP_PAIRS", 100)  # 153 pairs: too many here
    assert paired.ap_difference(d, d, labels, (0.5, 0.5)) is None
    assert ap_verdict(0.5, 0.4, 6_000_000, 100_000) == (
        "the embeddings beat MFCC + DTW (AP 0.500 vs 0.400) (by the numbers: 6000000 pairs are "
        "too many to resample the words)"
    )
