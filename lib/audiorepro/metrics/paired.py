"""Whether one score beats another on the same test beyond what the choice of words decides: a
paired bootstrap over the words.

Two systems scored on the same items differ by some amount; a test of other words of the same
kind would have given another amount. Both the ABX of word items and same-different AP are
averages over the words' pairs, so the words are the sample to resample (as an ASR comparison
resamples its test utterances, Bisani and Ney 2004): draw as many words as there are, with
replacement, :data:`RESAMPLES` times (seeded); score both systems on each draw, counting each
word as often as it was drawn; the 95 % interval of the differences' percentiles is the
*interval*. A difference is *clear* when the interval leaves out 0: then, and only then, one
system beats the other.

- **ABX** (:func:`abx_difference`): the error is the mean over ordered word pairs (A's word,
  B's word) of their mean score (:class:`~audiorepro.metrics.abx.AbxResult.by_phone_pair`); in
  a draw a word pair counts ``c[a] * c[b]`` times, ``c`` the words' draw counts.
- **Same-different AP** (:func:`ap_difference`): a pair of rows counts ``c[word_i] *
  c[word_j]`` times, as if each drawn word's tokens were there that often (a token's pair with
  its own copy left out), and a draw's AP is that of the ranking with every pair copied so.
  Pairs at equal distances are taken in pair order in a draw (real-valued distances rarely
  tie); the observed difference is that of the exact scores, ties as
  :mod:`~audiorepro.metrics.average_precision` resolves them.

With fewer than :data:`MIN_WORDS` words no interval is given: a handful of words cannot say
whether a difference would hold for others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import digamma

RESAMPLES = 1000
"""Draws of the words (at most; fewer for rankings of many pairs, :data:`MAX_PAIR_DRAWS`)."""
LEVEL = 0.95
"""The interval's coverage."""
MIN_WORDS = 5
"""Fewer words than this: no interval (:class:`PairedDifference` is not made)."""
MAX_PAIR_DRAWS = 25 * 10**7
"""Pairs times draws of an AP bootstrap at most (a few seconds): more pairs, fewer draws, down
to :data:`MIN_AP_RESAMPLES`."""
MIN_AP_RESAMPLES = 200
MAX_AP_PAIRS = 5_000_000
"""More pairs than this (about 3,200 rows) are not resampled (the rankings would take GBs):
:func:`ap_difference` gives ``None`` and the verdict goes by the numbers, saying so."""


@dataclass(frozen=True)
class PairedDifference:
    """A paired comparison of two scores on the same words.

    Attributes:
        difference: the first score minus the second, on the words as they are.
        low, high: the interval of that difference over the draws of the words.
        words: how many words were resampled.
        resamples: how many draws scored (a draw without a same-word pair is not counted).
    """

    difference: float
    low: float
    high: float
    words: int
    resamples: int

    @property
    def clear(self) -> bool:
        """The interval leaves out 0 on the side of the observed difference: its sign holds
        beyond these words (an interval on the other side, as a skewed draw can give, is not a
        verdict either way)."""
        return (self.difference > 0 and self.low > 0) or (self.difference < 0 and self.high < 0)

    def interval(self, unit: str = "", digits: int = 3) -> str:
        """``"resampling the 10 words, the difference's 95 % interval is -1.300 to +0.800
        points"``: what the sentences of a verdict quote."""
        unit = f" {unit}" if unit else ""
        return (
            f"resampling the {self.words} words, the difference's {LEVEL * 100:.0f} % interval "
            f"is {self.low:+.{digits}f} to {self.high:+.{digits}f}{unit}"
        )


def word_draws(num_words: int, resamples: int, seed: int = 0) -> np.ndarray:
    """``(resamples, num_words)`` counts: how often each word is drawn in each draw of
    ``num_words`` words with replacement (seeded)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, num_words, size=(resamples, num_words))
    counts = np.zeros((resamples, num_words), dtype=np.float64)
    np.add.at(counts, (np.arange(resamples)[:, None], picks), 1.0)
    return counts


def _interval(values: np.ndarray) -> tuple[float, float]:
    tail = (1.0 - LEVEL) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def abx_difference(
    first: pd.DataFrame, second: pd.DataFrame, *, seed: int = 0, resamples: int = RESAMPLES
) -> PairedDifference | None:
    """The first ABX error minus the second (points; negative: the first is lower, better) and
    its interval over draws of the words, from each result's ``by_phone_pair`` table (columns
    ``phone_1``, ``phone_2``, ``score``) on the same item file. ``None`` under
    :data:`MIN_WORDS` words. ValueError when the two tables do not hold the same word pairs
    (not the same items)."""
    keys = ["phone_1", "phone_2"]
    both = first[[*keys, "score"]].merge(
        second[[*keys, "score"]], on=keys, how="outer", suffixes=("_a", "_b"), indicator=True
    )
    if (both["_merge"] != "both").any():
        raise ValueError(
            "the two ABX results do not score the same word pairs: they are not of the same items"
        )
    words, codes = np.unique(both[keys].to_numpy(dtype=str), return_inverse=True)
    codes = codes.reshape(-1, 2)
    if len(words) < MIN_WORDS:
        return None
    # error points: 100 (1 - score); the difference of errors is 100 (score_b - score_a)
    gap = 100.0 * (both["score_b"].to_numpy(float) - both["score_a"].to_numpy(float))
    draws = word_draws(len(words), resamples, seed)
    values = np.empty(resamples)
    block = max(1, 4_000_000 // max(1, len(gap)))
    for lo in range(0, resamples, block):
        c = draws[lo : lo + block]
        weight = c[:, codes[:, 0]] * c[:, codes[:, 1]]
        total = weight.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            values[lo : lo + block] = (weight @ gap) / total
    values = values[np.isfinite(values)]  # a draw of one word has no pair
    low, high = _interval(values)
    return PairedDifference(float(gap.mean()), low, high, len(words), int(values.size))


class _Ranking:
    """One system's pairs sorted by distance (ties in pair order), for the AP of a draw: the
    pairs' word codes in that order and which are positive."""

    def __init__(self, distances: np.ndarray, word_i: np.ndarray, word_j: np.ndarray) -> None:
        order = np.argsort(np.asarray(distances, np.float64), kind="stable")
        self.word_i, self.word_j = word_i[order], word_j[order]
        self.positive = np.flatnonzero(self.word_i == self.word_j)

    def ap(self, counts: np.ndarray) -> float:
        """AP of the pairs, each there ``counts[word_i] * counts[word_j]`` times (its copies
        adjacent in the ranking); NaN when no same-word pair is drawn.

        A positive pair there ``w`` times after ``R`` pairs of which ``K`` are positive adds the
        precision at each of its copies, ``sum_{t=1..w} (K + t) / (R + t) = w + (K - R)
        (H_{R+w} - H_R)``, the harmonic numbers by digamma."""
        weight = counts[self.word_i] * counts[self.word_j]
        w = weight[self.positive]
        total = w.sum()
        if total == 0:
            return float("nan")
        before = (np.cumsum(weight) - weight)[self.positive]  # R: pairs ranked before
        found = np.cumsum(w) - w  # K: positives ranked before
        gain = w + (found - before) * (digamma(before + w + 1.0) - digamma(before + 1.0))
        return float(gain.sum() / total)


def ap_difference(
    first: np.ndarray,
    second: np.ndarray,
    labels: Sequence[Any],
    observed: tuple[float, float],
    *,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> PairedDifference | None:
    """The first same-different AP minus the second and its interval over draws of the words.

    ``first`` and ``second`` are the two systems' distances of every pair ``i < j`` of the rows
    (in ``np.triu_indices(n, 1)`` order), ``labels`` the rows' words, ``observed`` the two exact
    APs (their difference is reported). ``None`` under :data:`MIN_WORDS` words. Ranking more
    pairs draws fewer times (:data:`MAX_PAIR_DRAWS`)."""
    codes = np.unique(np.asarray(labels, dtype=str), return_inverse=True)[1].reshape(-1)
    codes = codes.astype(np.int32)
    num_words = int(codes.max()) + 1 if codes.size else 0
    n = len(codes)
    if num_words < MIN_WORDS or n * (n - 1) // 2 > MAX_AP_PAIRS:
        return None
    i, j = np.triu_indices(n, 1)
    for name, dist in (("first", first), ("second", second)):
        if np.shape(dist) != i.shape:
            raise ValueError(
                f"{name}: expected the distances of the {i.size} pairs of {n} rows, got shape "
                f"{np.shape(dist)}"
            )
    word_i, word_j = codes[i], codes[j]
    rankings = [_Ranking(d, word_i, word_j) for d in (first, second)]
    resamples = max(MIN_AP_RESAMPLES, min(resamples, MAX_PAIR_DRAWS // max(1, i.size)))
    draws = word_draws(num_words, resamples, seed)
    values = np.array([rankings[0].ap(c) - rankings[1].ap(c) for c in draws])
    values = values[np.isfinite(values)]  # a draw of words said once has no same-word pair
    if values.size == 0:
        return None
    low, high = _interval(values)
    return PairedDifference(observed[0] - observed[1], low, high, num_words, int(values.size))


def cosine_pair_distances(embeddings: np.ndarray) -> np.ndarray:
    """``1 - cos`` of every pair ``i < j`` of the rows of ``embeddings``, in
    ``np.triu_indices(n, 1)`` order: the distances same-different AP ranks."""
    x = np.asarray(embeddings, np.float64)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    i, j = np.triu_indices(len(x), 1)
    out = np.empty(i.size)
    step = max(1, 4_000_000 // max(1, x.shape[1]))
    for lo in range(0, i.size, step):
        a, b = i[lo : lo + step], j[lo : lo + step]
        out[lo : lo + step] = 1.0 - np.einsum("ij,ij->i", x[a], x[b])
    return out
