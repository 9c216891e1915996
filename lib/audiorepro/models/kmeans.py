"""A small seeded k-means (Lloyd's algorithm, k-means++ initialisation) in torch.

The chapter 03 baseline for learned units: cluster feature frames into K codes, then each frame
becomes the index of its nearest centroid (squared L2) and the centroid itself.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["KMeans", "kmeans", "nearest_centroid"]


class KMeans:
    """Fitted centroids (K, D) float32 with :meth:`assign`."""

    def __init__(self, centroids: np.ndarray, inertia: float, iterations: int) -> None:
        self.centroids = np.asarray(centroids, dtype=np.float32)
        self.inertia = inertia  # mean squared distance of the training rows to their centroid
        self.iterations = iterations

    def assign(self, x: np.ndarray) -> np.ndarray:
        """Index of the nearest centroid of each row of x (N, D) → (N,) int64."""
        return nearest_centroid(x, self.centroids)


def _sq_dist(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    d = x.pow(2).sum(1, keepdim=True) - 2 * x @ c.T + c.pow(2).sum(1)[None, :]
    return d.clamp_min(0.0)  # (N, K)


def nearest_centroid(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the nearest centroid (squared L2, float64) of each row: x (N, D), centroids
    (K, D) → (N,) int64; ties go to the lower index."""
    xt = torch.as_tensor(np.asarray(x, dtype=np.float64))
    ct = torch.as_tensor(np.asarray(centroids, dtype=np.float64))
    if xt.ndim != 2 or ct.ndim != 2 or xt.shape[1] != ct.shape[1]:
        raise ValueError(
            f"nearest_centroid: x {tuple(xt.shape)} and centroids "
            f"{tuple(ct.shape)} must be (N, D) and (K, D)"
        )
    out = [_sq_dist(xt[i : i + 65536], ct).argmin(1) for i in range(0, len(xt), 65536)]
    return torch.cat(out).numpy().astype(np.int64) if out else np.zeros(0, np.int64)


def kmeans(x: np.ndarray, k: int, seed: int = 0, iterations: int = 30) -> KMeans:
    """Cluster the rows of x (N, D) into ``k`` centroids.

    k-means++ initialisation, then Lloyd iterations until no assignment changes or
    ``iterations``; an emptied cluster is moved onto the row farthest from its centroid. All
    random draws come from a generator seeded with ``seed``: equal inputs and seed, equal
    centroids. Distances in float64.
    """
    xt = torch.as_tensor(np.asarray(x, dtype=np.float64))
    if xt.ndim != 2:
        raise ValueError(f"kmeans: expected rows (N, D), got shape {tuple(xt.shape)}")
    if not 1 <= k <= len(xt):
        raise ValueError(f"kmeans: k must be in [1, N = {len(xt)}], got {k}")
    gen = torch.Generator().manual_seed(seed)
    centroids = torch.empty(k, xt.shape[1], dtype=torch.float64)
    centroids[0] = xt[torch.randint(len(xt), (1,), generator=gen)]
    closest = _sq_dist(xt, centroids[:1]).squeeze(1)  # (N,)
    for j in range(1, k):
        weights = closest if float(closest.sum()) > 0 else torch.ones_like(closest)
        pick = torch.multinomial(weights, 1, generator=gen)
        centroids[j] = xt[pick]
        closest = torch.minimum(closest, _sq_dist(xt, centroids[j : j + 1]).squeeze(1))
    assign = None
    done = 0
    while done < iterations:
        done += 1
        dist = _sq_dist(xt, centroids)  # (N, K)
        new = dist.argmin(1)
        if assign is not None and torch.equal(new, assign):
            break
        assign = new
        counts = torch.bincount(assign, minlength=k)
        sums = torch.zeros_like(centroids).index_add_(0, assign, xt)
        filled = counts > 0
        centroids[filled] = sums[filled] / counts[filled, None].to(xt.dtype)
        if not bool(filled.all()):
            own = dist.gather(1, assign[:, None]).squeeze(1)
            far = torch.argsort(own, descending=True)[: int((~filled).sum())]
            centroids[~filled] = xt[far]
    final = _sq_dist(xt, centroids)
    inertia = float(final.min(1).values.mean())
    return KMeans(centroids.float().numpy(), inertia, done)
