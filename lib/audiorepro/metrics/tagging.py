"""Multi-label tagging: average precision per class and its mean (AudioSet's mAP).

AP of one class is the area under its precision-recall step curve with one point per distinct
score (the definition of ``sklearn.metrics.average_precision_score`` and of the AudioSet
papers): clips are ranked by score, tied scores enter together, and

    AP = sum over distinct thresholds t of (R(t) - R(t_prev)) * P(t),

with P(t) and R(t) the precision and recall of "score >= t". mAP averages over the classes that
have at least one positive (a class without positives has no AP).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["average_precision", "chance_map", "tagging_map"]


def _check(scores: Any, targets: Any) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    t = np.asarray(targets)
    if s.shape != t.shape or s.ndim not in (1, 2):
        raise ValueError(
            f"scores and targets must have the same shape, (N,) or (N, C); got {s.shape} and "
            f"{t.shape}"
        )
    if not np.isfinite(s).all():
        raise ValueError("scores hold NaN or inf")
    if not np.isin(t, (0, 1)).all():
        raise ValueError("targets must be 0 or 1")
    return s, t.astype(bool)


def average_precision(scores: Any, targets: Any) -> float:
    """AP of one class: ``scores`` (N,), ``targets`` (N,) in {0, 1} with at least one 1."""
    s, t = _check(scores, targets)
    if s.ndim != 1:
        raise ValueError(f"average_precision takes one class, (N,); got {s.shape}")
    positives = int(t.sum())
    if positives == 0:
        raise ValueError("average precision is undefined without a positive")
    order = np.argsort(-s, kind="stable")
    s, t = s[order], t[order]
    last_of_tie = np.r_[s[1:] != s[:-1], True]  # each distinct threshold's last clip
    hits = np.cumsum(t)[last_of_tie]
    seen = np.arange(1, len(s) + 1)[last_of_tie]
    gained = np.diff(np.r_[0, hits])  # positives each threshold adds
    return float(np.sum(gained / positives * hits / seen))


def tagging_map(scores: Any, targets: Any) -> tuple[float, np.ndarray]:
    """Mean AP over classes with a positive, and the per-class APs (NaN without a positive).

    Args:
        scores: (N, C) clip-by-class scores (logits or probabilities: only their order counts).
        targets: (N, C) in {0, 1}.
    """
    s, t = _check(scores, targets)
    if s.ndim != 2:
        raise ValueError(f"tagging_map takes (N, C) scores; got {s.shape}")
    per_class = np.full(s.shape[1], np.nan)
    for c in range(s.shape[1]):
        if t[:, c].any():
            per_class[c] = average_precision(s[:, c], t[:, c])
    if np.isnan(per_class).all():
        raise ValueError("no class has a positive: mAP is undefined")
    return float(np.nanmean(per_class)), per_class


def chance_map(targets: Any) -> float:
    """Expected mAP of scores that ignore the audio: the mean positive rate of the classes that
    have a positive (the AP of a random ranking, in expectation)."""
    t = np.asarray(targets).astype(bool)
    rates = t.mean(axis=0)
    return float(rates[rates > 0].mean())
