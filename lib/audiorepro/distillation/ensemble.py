"""Ensembles of retrieval models at evaluation: average their similarity matrices.

Paper (b) §4.5 and Table 2 (SID 1): the ensemble of the three distilled models ranks audios by
the mean of the models' similarity scores. The same average of the stage-1 models, on the
training set, is the correspondence estimate Ĉ of §3.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["ensemble_scores"]


def ensemble_scores(
    scores: Sequence[np.ndarray | torch.Tensor], weights: Sequence[float] | None = None
) -> np.ndarray:
    """Mean (or weighted mean) of M score matrices of equal shape.

    Args:
        scores: M matrices (n_queries, n_items), e.g. each model's caption × audio cosine
            similarities for text-to-audio retrieval (as
            :func:`audiorepro.metrics.retrieval.retrieval_metrics` takes them).
        weights: M non-negative weights (None: equal, 1/M each); normalised to sum to 1.

    Returns:
        (n_queries, n_items) float64 ensemble scores, ``Σ_m w_m S_m``.

    Raises:
        ValueError: no matrices, shapes that differ (naming which), non-finite scores, or bad
            weights.
    """
    if len(scores) == 0:
        raise ValueError("an ensemble needs at least one score matrix")
    arrays = [
        s.detach().cpu().double().numpy() if isinstance(s, torch.Tensor) else np.asarray(s, float)
        for s in scores
    ]
    for m, array in enumerate(arrays):
        if array.ndim != 2:
            raise ValueError(f"score matrix {m} must be 2-D, got shape {array.shape}")
        if array.shape != arrays[0].shape:
            raise ValueError(
                f"score matrix {m} has shape {array.shape}, matrix 0 has {arrays[0].shape}: the "
                "models must score the same queries and items in the same order"
            )
        if not np.isfinite(array).all():
            raise ValueError(f"score matrix {m} holds NaN or infinite values")
    if weights is None:
        w = np.full(len(arrays), 1.0 / len(arrays))
    else:
        w = np.asarray(weights, float)
        if w.shape != (len(arrays),) or (w < 0).any() or w.sum() <= 0:
            raise ValueError(
                f"weights must be {len(arrays)} non-negative numbers with a positive sum, got "
                f"{list(weights)}"
            )
        w = w / w.sum()
    total = np.zeros_like(arrays[0])
    for weight, array in zip(w, arrays, strict=True):
        total += weight * array
    return total
