"""Same-different and cross-view average precision of word embeddings (AWE chapter, §3.2.4).

**Same-different AP** (Carlin et al. 2011; Kamper's ``speech_dtw utils/samediff.py``,
agwe-recipe ``lib/metric/ap.py::single_view``): every one of the N(N-1)/2 pairs of N embeddings
is a query "same word?"; pairs are sorted by cosine distance, ascending; a pair is positive when
both tokens carry the same label. With ``P`` positives at ranks ``r_1 < ... < r_P``::

    AP = (1 / P) * sum_k  k / r_k          (precision at each positive, not interpolated)

**Cross-view AP** (agwe-recipe ``cross_view``; the paper's "M acoustic words x N phonemic
words"): the M x N pairs of an acoustic embedding and a written-word embedding, positive iff the
labels match, the same formula.

**Precision-recall breakeven** (``return_prb=True``), as Kamper computes it: precision is made
non-increasing from the right ("interpolated"), and PRB = (recall + precision) / 2 at the first
rank where |recall - precision| is smallest.

**Distances and ties (the policy).** Distances are float64 cosine distances ``1 - cos``, rounded
to the nearest multiple of 2^-40 (about 9e-13; halves round up), so that two pairs tie exactly when their distances agree to
that resolution, whichever arithmetic path computed them. Ties among negatives or among
positives do not change either number. For a group of tied pairs that holds positives *and*
negatives, AP is the **expectation over all orderings of the group** (each equally likely): a
group of ``n`` pairs with ``p`` positives, after ``R`` earlier pairs of which ``K`` are
positive, contributes::

    sum_{t=1..n} (p / n) * (K + 1 + (t - 1)(p - 1)/(n - 1)) / (R + t)

(slot ``t`` is positive with probability p/n, and then ``K + 1 + ...`` positives are at or before
it in expectation). PRB treats such a group as one threshold: its precision-recall point is taken
after the whole group, none inside it. On tie-free inputs both are exactly the definitions above.
The reference implementations instead resolve ties by whatever order an unstable ``argsort``
returns, which changes between numpy versions (``shared/reference/awe.md`` §0).

**How it is fast and exact.** The straightforward way (``pdist``, ``argsort`` of 60.8 M values)
takes about 28 s and 0.8 GB on the Switchboard test set. Only the ranks of the positives are
needed, and those are counts of negatives below each positive. So: (1) compute the positives'
distances (few) and mark the fine histogram bins (2^20 over [0, 2]) that contain one; (2) walk
over blocks of the distance matrix (BLAS), counting every pair into its bin, and keeping only the
pairs that fall into marked bins; (3) sort those few and count exactly within the marked bins.
Memory is O(N x block + P + kept pairs); time is one pass of matrix products and integer
counting. The counting is single-threaded and most of the time, so the matrix products run with
one BLAS thread (``threadpoolctl``): idle OpenBLAS workers spin after each call and, on a busy
2-core machine, took the CPU from the counting thread (3.7 s instead of 1.5 s wall in the
benchmark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from scipy.special import digamma
from threadpoolctl import threadpool_limits

from audiorepro.metrics.checks import (
    FEW,
    ScoreError,
    check_not_collapsed,
    check_pair_labels,
    weak,
)

QUANT_BITS = 40
"""Distances are rounded to multiples of 2**-QUANT_BITS (the tie resolution)."""
_SCALE = float(2**QUANT_BITS)
_MAX_KEY = 2 ** (QUANT_BITS + 1)  # distance 2
_BIN_SHIFT = QUANT_BITS + 1 - 20  # 2^20 histogram bins over [0, 2]
_NUM_BINS = (_MAX_KEY >> _BIN_SHIFT) + 1
_BLOCK_ELEMENTS = 1 << 22  # pairs per block of the distance matrix (32 MB of float64)

METRICS = ("cosine",)


def _normalized(emb: Any, name: str) -> np.ndarray:
    """float64 rows of unit L2 norm; errors name the argument and the offending row."""
    given = np.asarray(emb)
    if given.dtype.kind not in "biuf":  # complex, text, objects: not a real vector
        raise ValueError(f"{name}: expected real numbers, got an array of {given.dtype}")
    x = given.astype(np.float64)
    if x.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (num, dim), got shape {x.shape}")
    if x.shape[1] == 0:
        raise ValueError(f"{name}: rows of no dimension (shape {x.shape}): nothing to compare")
    if not np.isfinite(x).all():
        row = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        raise ValueError(f"{name}: row {row} holds NaN or inf")
    norms = np.linalg.norm(x, axis=1)
    if (norms == 0).any():
        row = int(np.flatnonzero(norms == 0)[0])
        raise ValueError(f"{name}: row {row} is all zeros; its cosine distance is undefined")
    return x / norms[:, None]


def _label_codes(labels: Sequence[Any] | np.ndarray, num: int, name: str) -> np.ndarray:
    """Labels as integer codes (equal label <=> equal code)."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] != num:
        raise ValueError(f"{name}: expected {num} labels (one per row), got shape {labels.shape}")
    return np.unique(labels, return_inverse=True)[1].astype(np.int64).reshape(-1)


def _keys(scaled: np.ndarray) -> np.ndarray:
    """Scaled similarities ``-2^40 cos`` -> integer distance keys ``floor((1 - cos) 2^40 + 1/2)``.

    The caller multiplies one operand of the dot product by ``-2^40`` (exact: a power of two),
    so that only an addition and a truncation remain here; done in place.
    """
    # |cos| <= 1 + a few ulps, so the sum is >= 0.4995 and truncation is a floor.
    np.add(scaled, _SCALE + 0.5, out=scaled)
    return scaled.astype(np.int64).reshape(-1)


# A block: flat integer keys and a function telling which of a set of flat indices are positive.
_Block = tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]


def _count_pass(
    blocks: Callable[[], Iterator[_Block]], marked: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One pass: histogram of all keys, and the keys (with positive flags) in marked bins."""
    hist = np.zeros(_NUM_BINS, dtype=np.int64)
    kept_keys, kept_pos = [], []
    for keys, is_positive in blocks():
        bins = keys >> _BIN_SHIFT
        hist += np.bincount(bins, minlength=_NUM_BINS)
        idx = np.flatnonzero(marked[bins])
        kept_keys.append(keys[idx])
        kept_pos.append(is_positive(idx))
    keys = np.concatenate(kept_keys) if kept_keys else np.zeros(0, np.int64)
    pos = np.concatenate(kept_pos) if kept_pos else np.zeros(0, bool)
    return hist, keys, pos


def _exact_stats(
    blocks: Callable[[], Iterator[_Block]], hint_keys: np.ndarray, num_positive: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per distinct positive distance: its key, #positives, #negatives below, #negatives equal.

    ``hint_keys`` are the positives' keys computed separately; their bins are marked. Should a
    positive land in an unmarked bin in the blocked pass (a rounding-boundary accident), the
    bins it was found in are marked and the pass is repeated, so the result is always exact.
    """
    marked = np.zeros(_NUM_BINS, dtype=bool)
    marked[hint_keys >> _BIN_SHIFT] = True
    while True:
        hist, keys, pos = _count_pass(blocks, marked)
        if int(pos.sum()) == num_positive:
            break
        # Some positives fell outside the marked bins: find them with everything marked there.
        full = np.ones(_NUM_BINS, dtype=bool)
        _, all_keys, all_pos = _count_pass(blocks, full)
        marked[all_keys[all_pos] >> _BIN_SHIFT] = True
    total = int(hist.sum())
    pos_keys = np.sort(keys[pos])
    neg_keys = np.sort(keys[~pos])
    values, counts = np.unique(pos_keys, return_counts=True)
    # Negatives in bins below a value's bin, from the histogram minus the positives there.
    neg_hist = hist - np.bincount(pos_keys >> _BIN_SHIFT, minlength=_NUM_BINS)
    cum = np.concatenate([[0], np.cumsum(neg_hist)])
    bins = values >> _BIN_SHIFT
    in_bin_start = np.searchsorted(neg_keys, bins << _BIN_SHIFT, side="left")
    below = cum[bins] + np.searchsorted(neg_keys, values, side="left") - in_bin_start
    equal = np.searchsorted(neg_keys, values, side="right") - np.searchsorted(
        neg_keys, values, side="left"
    )
    return counts.astype(np.int64), below.astype(np.int64), equal.astype(np.int64), total


def _ap_from_stats(p: np.ndarray, below: np.ndarray, equal: np.ndarray) -> float:
    """Expected non-interpolated AP from per-group counts (see the module's tie policy)."""
    num_pos = int(p.sum())
    k_before = np.concatenate([[0], np.cumsum(p)[:-1]]).astype(np.float64)
    r_before = k_before + below  # pairs ranked before the group
    n = (p + equal).astype(np.float64)
    pf = p.astype(np.float64)
    total = np.zeros_like(pf)
    single = n == 1
    total[single] = (k_before[single] + 1.0) / (r_before[single] + 1.0)
    many = ~single
    if many.any():
        nn, pp, kk, rr = n[many], pf[many], k_before[many], r_before[many]
        b = (pp - 1.0) / (nn - 1.0)
        a = kk + 1.0 - b
        # sum_t (a + b t) / (R + t) = n b + (a - b R) (H_{R+n} - H_R), H via digamma.
        harmonic = digamma(rr + nn + 1.0) - digamma(rr + 1.0)
        total[many] = (pp / nn) * (nn * b + (a - b * rr) * harmonic)
    return float(total.sum() / num_pos)


def _prb_from_stats(p: np.ndarray, below: np.ndarray, equal: np.ndarray, total: int) -> float:
    """Kamper's precision-recall breakeven from per-group counts (groups as thresholds)."""
    num_pos = int(p.sum())
    k = np.cumsum(p).astype(np.int64)  # positives up to and including each group
    ends = k + below + equal  # rank of each group's last pair
    prec = k / ends
    # Interpolated precision at each group end: running max from the right.
    interp = np.maximum.accumulate(prec[::-1])[::-1]
    next_interp = np.concatenate([interp[1:], [0.0]])
    # Candidates: (rank, recall, interpolated precision); group ends, then the gap after each.
    ranks = [ends]
    recalls = [k / num_pos]
    precisions = [interp]
    # Gap before the first group: recall 0, interpolated precision interp[0].
    first_start = int(below[0])
    if first_start >= 1:
        ranks.append(np.array([1]))
        recalls.append(np.array([0.0]))
        precisions.append(np.array([interp[0]]))
    lo = ends + 1
    hi = np.concatenate([below[1:] + k[:-1], [total]])  # last rank before the next group
    has_gap = lo <= hi
    for offset in (-1, 0, 1, None, "hi"):
        if offset is None:
            r = lo
        elif offset == "hi":
            r = hi
        else:
            r = np.clip(num_pos + offset, lo, hi)
        r = r[has_gap]
        kk = k[has_gap]
        ranks.append(r)
        recalls.append(kk / num_pos)
        precisions.append(np.maximum(kk / r, next_interp[has_gap]))
    rank = np.concatenate(ranks)
    recall = np.concatenate(recalls)
    precision = np.concatenate(precisions)
    diff = np.abs(recall - precision)
    best = np.flatnonzero(diff == diff.min())
    i = best[np.argmin(rank[best])]
    return float((recall[i] + precision[i]) / 2.0)


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")


def same_different_ap(
    embeddings: Any,
    labels: Sequence[Any] | np.ndarray,
    metric: str = "cosine",
    return_prb: bool = False,
) -> float | tuple[float, float]:
    """Same-different average precision over all N(N-1)/2 pairs (module docstring).

    Args:
        embeddings: (N, D) acoustic word embeddings (any float dtype; computed in float64).
        labels: (N,) word labels (strings or integers); a pair is positive iff they are equal.
        metric: ``"cosine"`` (the only one used in the paper and its code bases).
        return_prb: also return the precision-recall breakeven.

    Returns:
        AP, or ``(AP, PRB)`` with ``return_prb``.

    Raises:
        ValueError: fewer than 2 rows, a label count that differs from N, a row with NaN/inf or
            all zeros (named by index), or an unknown metric;
            :class:`~audiorepro.metrics.checks.ScoreError` (a ``ValueError``) for what has no
            meaningful AP: no positive pair, one label only (no negative pair), or collapsed
            embeddings (every row the same vector). Under
            :data:`~audiorepro.metrics.checks.FEW` positive pairs it warns
            (:class:`~audiorepro.metrics.checks.ScoreWarning`).
    """
    _check_metric(metric)
    raw = np.asarray(embeddings)
    x = _normalized(raw, "embeddings")
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"embeddings: need at least 2 rows, got {n}")
    codes = _label_codes(labels, n, "labels")
    check_pair_labels(codes, "labels")
    check_not_collapsed(raw, "embeddings", cosine=True)

    # Positive pairs, enumerated per label (i < j).
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    sizes = np.diff(np.r_[starts, n])
    pi, pj = [], []
    for s, m in zip(starts[sizes > 1], sizes[sizes > 1], strict=True):
        members = np.sort(order[s : s + m])
        a, b = np.triu_indices(m, k=1)
        pi.append(members[a])
        pj.append(members[b])
    pi, pj = np.concatenate(pi), np.concatenate(pj)
    xs = x * -_SCALE
    hint = _keys(np.einsum("ij,ij->i", x[pi], xs[pj]))

    def blocks() -> Iterator[_Block]:
        start = 0
        while start < n - 1:
            rows = max(1, min(n - 1 - start, _BLOCK_ELEMENTS // max(1, n - start)))
            stop = start + rows
            # Upper triangle of the diagonal square, then the rectangle to its right.
            iu, ju = np.triu_indices(rows, k=1)
            diag_keys = _keys((x[start:stop] @ xs[start:stop].T)[iu, ju])
            rect_keys = _keys(x[start:stop] @ xs[stop:].T)  # (rows, n - stop)
            width = n - stop

            def diag_pos(idx, iu=iu, ju=ju, start=start):
                return codes[start + iu[idx]] == codes[start + ju[idx]]

            def rect_pos(idx, width=width, start=start, stop=stop):
                return codes[start + idx // width] == codes[stop + idx % width]

            yield diag_keys, diag_pos
            if width:
                yield rect_keys, rect_pos
            start = stop

    with threadpool_limits(limits=1, user_api="blas"):
        p, below, equal, total = _exact_stats(blocks, hint, int(pi.size))
    ap = _ap_from_stats(p, below, equal)
    if return_prb:
        return ap, _prb_from_stats(p, below, equal, total)
    return ap


def _cross_view_pairs(
    acoustic_emb: Any,
    acoustic_labels: Sequence[Any] | np.ndarray,
    word_emb: Any,
    word_labels: Sequence[Any] | np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Checked unit rows and the positive pairs of a cross-view evaluation:
    ``(a (M, D), w (N, D), a_codes (M,), w_codes (N,), pi, pj)``, where acoustic row ``pi[k]``
    and word row ``pj[k]`` carry the same label."""
    a = _normalized(acoustic_emb, "acoustic_emb")
    w = _normalized(word_emb, "word_emb")
    check_not_collapsed(np.asarray(acoustic_emb), "acoustic_emb", cosine=True)
    check_not_collapsed(np.asarray(word_emb), "word_emb", cosine=True)
    if a.shape[1] != w.shape[1]:
        raise ValueError(f"acoustic_emb has dimension {a.shape[1]} but word_emb has {w.shape[1]}")
    m, n = a.shape[0], w.shape[0]
    a_lab = np.asarray(acoustic_labels)
    w_lab = np.asarray(word_labels)
    if a_lab.ndim != 1 or a_lab.shape[0] != m:
        raise ValueError(f"acoustic_labels: expected {m} labels, got shape {a_lab.shape}")
    if w_lab.ndim != 1 or w_lab.shape[0] != n:
        raise ValueError(f"word_labels: expected {n} labels, got shape {w_lab.shape}")
    codes = _label_codes(np.concatenate([a_lab, w_lab]), m + n, "labels")
    a_codes, w_codes = codes[:m], codes[m:]

    word_order = np.argsort(w_codes, kind="stable")
    lo = np.searchsorted(w_codes[word_order], a_codes, side="left")
    hi = np.searchsorted(w_codes[word_order], a_codes, side="right")
    pi = np.repeat(np.arange(m), hi - lo)
    pj = (
        word_order[np.concatenate([np.arange(s, e) for s, e in zip(lo, hi, strict=True)])]
        if pi.size
        else np.zeros(0, np.int64)
    )
    if not pi.size:
        raise ScoreError(
            f"no acoustic label occurs among word_labels: no positive pair ({m} acoustic rows, "
            f"{n} written words)"
        )
    if pi.size == m * n:
        raise ScoreError(
            f"acoustic_labels, word_labels: every one of the {m * n} (acoustic, written) pairs "
            "is a same-label pair (one label only), so AP is 1 whatever the embeddings: give "
            "words of at least two labels"
        )
    if pi.size < FEW:
        weak(f"cross-view: the AP rests on {pi.size} positive pair(s): a weak estimate", 4)
    return a, w, a_codes, w_codes, pi, pj


def cross_view_ap(
    acoustic_emb: Any,
    acoustic_labels: Sequence[Any] | np.ndarray,
    word_emb: Any,
    word_labels: Sequence[Any] | np.ndarray,
    metric: str = "cosine",
    return_prb: bool = False,
    absolute: bool = False,
) -> float | tuple[float, float]:
    """Cross-view average precision over all M x N (acoustic, written word) pairs.

    The paper's §3.2.4 and agwe-recipe's ``cross_view``: acoustic segment ``i`` and written
    word ``j`` form a positive pair iff ``acoustic_labels[i] == word_labels[j]``; pairs are
    ranked by cosine distance with the tie policy of the module docstring.

    Args:
        acoustic_emb: (M, D) acoustic embeddings f(x).
        acoustic_labels: (M,) their word labels.
        word_emb: (N, D) written-word (phone-sequence) embeddings g(c), normally one per unique
            word of the evaluated split.
        word_labels: (N,) their labels.
        metric: ``"cosine"``.
        return_prb: also return the precision-recall breakeven.
        absolute: rank pairs by ``1 - |cos|`` instead of ``1 - cos``: a written word and its
            antipode count as the same, as they do for the squared distance ``1 - cos²``.

    Returns:
        AP, or ``(AP, PRB)``.

    Raises:
        ValueError: mismatched dimensions or label counts, a NaN/inf/all-zero row (named), or
            an unknown metric; ``ScoreError`` for no positive pair, no negative pair (one
            label only) or collapsed embeddings (:func:`same_different_ap`).
    """
    _check_metric(metric)
    a, w, a_codes, w_codes, pi, pj = _cross_view_pairs(
        acoustic_emb, acoustic_labels, word_emb, word_labels
    )
    m, n = a.shape[0], w.shape[0]
    ws = w * -_SCALE

    def keys(scaled: np.ndarray) -> np.ndarray:
        if absolute:  # -2^40 |cos|: the key of the distance 1 - |cos|
            np.negative(np.abs(scaled, out=scaled), out=scaled)
        return _keys(scaled)

    hint = keys(np.einsum("ij,ij->i", a[pi], ws[pj]))

    def blocks() -> Iterator[_Block]:
        rows = max(1, _BLOCK_ELEMENTS // n)
        for start in range(0, m, rows):
            stop = min(m, start + rows)
            block_keys = keys(a[start:stop] @ ws.T)  # (rows, n) -> flat

            def is_pos(idx, start=start):
                return a_codes[start + idx // n] == w_codes[idx % n]

            yield block_keys, is_pos

    with threadpool_limits(limits=1, user_api="blas"):
        p, below, equal, total = _exact_stats(blocks, hint, int(pi.size))
    ap = _ap_from_stats(p, below, equal)
    if return_prb:
        return ap, _prb_from_stats(p, below, equal, total)
    return ap


def cross_view_positive_cosines(
    acoustic_emb: Any,
    acoustic_labels: Sequence[Any] | np.ndarray,
    word_emb: Any,
    word_labels: Sequence[Any] | np.ndarray,
) -> np.ndarray:
    """The cosine of every positive cross-view pair (a token and its own written word), (P,)
    float64, in acoustic-row order.

    Under the squared distance ``1 - cos²`` a word may sit opposite its tokens; the share of
    these cosines below 0 says how often it does, which the cosine-ranked
    :func:`cross_view_ap` punishes and ``absolute=True`` does not.
    """
    a, w, _, _, pi, pj = _cross_view_pairs(acoustic_emb, acoustic_labels, word_emb, word_labels)
    return np.einsum("ij,ij->i", a[pi], w[pj])


def cross_view_chance(
    acoustic_labels: Sequence[Any] | np.ndarray, word_labels: Sequence[Any] | np.ndarray
) -> float:
    """The share of positive pairs among the M x N cross-view pairs: the AP of a ranking that
    knows nothing (in expectation, up to a term that vanishes as the pairs grow)."""
    a_lab, w_lab = np.asarray(acoustic_labels), np.asarray(word_labels)
    words, counts = np.unique(w_lab, return_counts=True)
    per_token = dict(zip(words.tolist(), counts.tolist(), strict=True))
    positives = sum(per_token.get(label, 0) for label in a_lab.tolist())
    return positives / (a_lab.size * w_lab.size)


def same_different_chance(labels: Sequence[Any] | np.ndarray) -> float:
    """The share of same-label pairs among all N(N-1)/2 pairs: the same-different AP of a
    ranking that knows nothing (in expectation, up to a term that vanishes as N grows)."""
    _, counts = np.unique(np.asarray(labels), return_counts=True)
    n = int(counts.sum())
    return float((counts * (counts - 1)).sum() / (n * (n - 1)))


RANDOM_RANKINGS = 100
"""How many random rankings :func:`random_ranking_ap` draws: an AP above the best of them is
one a random ranking of the same pairs reaches less than one time in a hundred."""


def random_ranking_ap(num_pairs: int, positives: int, seed: int = 0) -> float:
    """The highest AP of :data:`RANDOM_RANKINGS` random orderings of ``num_pairs`` pairs of
    which ``positives`` are same-word pairs (seeded: the same level every time): the level an
    AP must pass to say more than chance on these pairs. The share of positives
    (:func:`same_different_chance`) is the mean of a random ranking's AP; with few positives
    a random ranking often lands far above it (10 positives among 190 pairs: the mean 0.053,
    and one ranking in a hundred above 0.15).

    Each draw places the positives at ranks chosen uniformly without replacement, and
    ``AP = (1 / P) sum_k k / r_k``: only the positives' ranks are drawn, so a draw costs
    O(P log P) whatever ``num_pairs`` (fewer draws, never below 20, above 200,000
    positives)."""
    if not 0 < positives <= num_pairs:
        raise ValueError(
            f"random_ranking_ap: positives must be within 1..num_pairs, got {positives} of "
            f"{num_pairs}"
        )
    rng = np.random.default_rng(seed)
    draws = max(20, min(RANDOM_RANKINGS, 2 * 10**7 // positives))
    k = np.arange(1, positives + 1, dtype=np.float64)
    best = 0.0
    for _ in range(draws):
        ranks = np.sort(rng.choice(num_pairs, size=positives, replace=False)) + 1
        best = max(best, float(np.mean(k / ranks)))
    return best


def pairs_average_precision(
    distances: Any, positive: Any, return_prb: bool = False
) -> float | tuple[float, float]:
    """AP (and PRB) of an explicit list of pair distances, e.g. DTW distances of MFCCs.

    The same definitions and tie policy as :func:`same_different_ap`, except that pairs tie when
    their distances are exactly equal floats (no rounding: the distances are given).

    Args:
        distances: (P,) finite distances, any scale.
        positive: (P,) bool, True for same-word pairs.

    Raises:
        ValueError: shapes differ, a NaN/inf distance; ``ScoreError`` for no positive pair or
            no negative one (one label only). Warns under ``FEW`` positive pairs.
    """
    d = np.asarray(distances, dtype=np.float64).reshape(-1)
    pos = np.asarray(positive, dtype=bool).reshape(-1)
    if d.shape != pos.shape:
        raise ValueError(f"distances {d.shape} and positive {pos.shape} differ in length")
    if not np.isfinite(d).all():
        raise ValueError(f"distances: entry {int(np.flatnonzero(~np.isfinite(d))[0])} is NaN/inf")
    if not pos.any():
        raise ScoreError(f"positive: no positive pair among the {pos.size} pairs")
    if pos.all():
        raise ScoreError(
            f"positive: all {pos.size} pairs are positive (one label only), so AP is 1 "
            "whatever the distances: give items of at least two labels"
        )
    if int(pos.sum()) < FEW:
        weak(f"positive: the AP rests on {int(pos.sum())} positive pair(s): a weak estimate")
    neg = np.sort(d[~pos])
    values, counts = np.unique(d[pos], return_counts=True)
    below = np.searchsorted(neg, values, side="left")
    equal = np.searchsorted(neg, values, side="right") - below
    ap = _ap_from_stats(counts.astype(np.int64), below.astype(np.int64), equal.astype(np.int64))
    if return_prb:
        return ap, _prb_from_stats(counts, below, equal, int(d.size))
    return ap


def reference_same_different_ap(embeddings: Any, labels: Sequence[Any] | np.ndarray) -> float:
    """The straightforward agwe/Kamper computation: ``pdist``, full sort, cumulative precision.

    Kept for the benchmark (``bench/bench_ap.py``) as the speed and memory baseline; ties are
    resolved by a stable sort (positives of a tie first are not guaranteed). Use
    :func:`same_different_ap`.
    """
    from scipy.spatial.distance import pdist

    labels = np.asarray(labels)
    codes = np.unique(labels, return_inverse=True)[1].reshape(-1)
    dist = pdist(np.asarray(embeddings, dtype=np.float64), "cosine")
    n = codes.shape[0]
    i, j = np.triu_indices(n, k=1)
    matches = codes[i] == codes[j]
    del i, j
    order = np.argsort(dist, kind="stable")
    matches = matches[order]
    ranks = np.flatnonzero(matches) + 1
    return float(np.mean(np.arange(1, ranks.size + 1) / ranks))


def reference_cross_view_ap(
    acoustic_emb: Any,
    acoustic_labels: Sequence[Any] | np.ndarray,
    word_emb: Any,
    word_labels: Sequence[Any] | np.ndarray,
) -> float:
    """The straightforward agwe ``cross_view``: ``cdist``, full sort (benchmark baseline)."""
    from scipy.spatial.distance import cdist

    dist = cdist(
        np.asarray(acoustic_emb, np.float64), np.asarray(word_emb, np.float64), "cosine"
    ).ravel()
    matches = (np.asarray(acoustic_labels)[:, None] == np.asarray(word_labels)[None, :]).ravel()
    order = np.argsort(dist, kind="stable")
    ranks = np.flatnonzero(matches[order]) + 1
    return float(np.mean(np.arange(1, ranks.size + 1) / ranks))


__all__ = [
    "METRICS",
    "QUANT_BITS",
    "cross_view_ap",
    "cross_view_chance",
    "cross_view_positive_cosines",
    "pairs_average_precision",
    "reference_cross_view_ap",
    "reference_same_different_ap",
    "same_different_ap",
    "same_different_chance",
]
