"""Frame distances and path-normalised dynamic time warping, as in the ZeroSpeech ABX.

The definitions follow ABXpy, the scorer behind the ZeroSpeech 2019/2020 ABX
(``shared/reference/zerospeech.md`` §1.4):

- ``"angular"`` (the official ``cosine``): ``arccos(x·y / (‖x‖‖y‖)) / π`` in [0, 1], the cosine
  taken as the dot product of the unit-normalised frames. A zero vector is at distance 1 from
  every non-zero vector and at distance 0 from another zero vector;
  cosines that rounding pushes outside [-1, 1] are clipped (ABXpy takes the real part of a
  complex arccos, which is the same thing).
- ``"kl"``: symmetrised Kullback-Leibler ``0.5·(KL(x‖y) + KL(y‖x))`` after each row is
  normalised to sum to 1, machine epsilon is added and the row is renormalised. Negative
  features give NaN (the log of a negative number), and a NaN frame distance makes the DTW
  distance NaN, which the ABX scores as a tie.
- ``"euclidean"``: ``‖x − y‖₂``.

:func:`dtw` accumulates ``cost[i, j] = d[i, j] + min(up, diag, left)`` (first row and column are
cumulative sums) and, when ``normalized``, divides the final cost by the length of the path
found by backtracking from the last cell: diagonal if ``diag ≤ left`` and ``diag ≤ up``, else
left if ``left ≤ up``, else up; once an edge is reached the remaining steps are added. The
tie-breaking is asymmetric, so ``dtw_distance(a, b)`` and ``dtw_distance(b, a)`` can differ.

Every distance goes through the same jitted kernels, so :func:`dtw_distance`,
``dtw(frame_distances(a, b))`` and :func:`pairwise_dtw` return bit-identical numbers; the ABX
relies on this to score ties exactly as a brute-force enumeration does.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = [
    "DISTANCES",
    "dtw",
    "dtw_distance",
    "frame_distances",
    "pairwise_dtw",
    "pairwise_dtw_both",
]

#: Frame distances understood by :func:`frame_distances` and :func:`pairwise_dtw`.
#: ``"cosine"`` is the official ZeroSpeech name of the angular distance and is an alias of it.
DISTANCES = ("angular", "cosine", "kl", "euclidean")

_CODES = {"angular": 0, "cosine": 0, "kl": 1, "euclidean": 2}
_EPS = float(np.finfo(np.float64).eps)


def _distance_code(distance: str) -> int:
    if distance not in _CODES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    return _CODES[distance]


@numba.njit(cache=True)
def _prepare(x, code):  # pragma: no cover - jitted
    """Row-wise preprocessing → ``(p, q, aux)``, each frame independently of the others.

    angular: ``p`` the unit-norm rows (zero rows stay zero), ``aux`` 1 for a zero row else 0.
    kl: ``p`` the rows normalised, ε-smoothed and renormalised, ``q = log p``, ``aux = Σ p log p``.
    euclidean: ``p = x``.
    """
    n, d = x.shape
    p = x.copy()
    q = np.zeros((n, d)) if code == 1 else np.zeros((0, d))
    aux = np.zeros(n)
    for i in range(n):
        if code == 0:
            s = 0.0
            for k in range(d):
                s += x[i, k] * x[i, k]
            norm = math.sqrt(s)
            if norm == 0.0:
                aux[i] = 1.0
            else:
                for k in range(d):
                    p[i, k] = x[i, k] / norm
        elif code == 1:
            s = 0.0
            for k in range(d):
                s += x[i, k]
            for k in range(d):
                p[i, k] = x[i, k] / s + _EPS
            s = 0.0
            for k in range(d):
                s += p[i, k]
            h = 0.0
            for k in range(d):
                p[i, k] = p[i, k] / s
                q[i, k] = np.log(p[i, k])
                h += p[i, k] * q[i, k]
            aux[i] = h
    return p, q, aux


@numba.njit(cache=True, inline="always")
def _dot(x, y):  # pragma: no cover - jitted
    """Σ x_k y_k in a fixed order: four interleaved partial sums, then the tail.

    The order does not depend on the compiler (no fast-math), so every caller gets the same bits,
    and ``_dot(x, y) == _dot(y, x)`` exactly; the four independent chains run in parallel.
    """
    d = x.shape[0]
    s0 = s1 = s2 = s3 = 0.0
    k = 0
    while k + 4 <= d:
        s0 += x[k] * y[k]
        s1 += x[k + 1] * y[k + 1]
        s2 += x[k + 2] * y[k + 2]
        s3 += x[k + 3] * y[k + 3]
        k += 4
    s = (s0 + s1) + (s2 + s3)
    while k < d:
        s += x[k] * y[k]
        k += 1
    return s


@numba.njit(cache=True, inline="always")
def _sqdist(x, y):  # pragma: no cover - jitted
    """Σ (x_k − y_k)² in the fixed order of :func:`_dot`."""
    d = x.shape[0]
    s0 = s1 = s2 = s3 = 0.0
    k = 0
    while k + 4 <= d:
        t0 = x[k] - y[k]
        t1 = x[k + 1] - y[k + 1]
        t2 = x[k + 2] - y[k + 2]
        t3 = x[k + 3] - y[k + 3]
        s0 += t0 * t0
        s1 += t1 * t1
        s2 += t2 * t2
        s3 += t3 * t3
        k += 4
    s = (s0 + s1) + (s2 + s3)
    while k < d:
        t = x[k] - y[k]
        s += t * t
        k += 1
    return s


@numba.njit(cache=True)
def _matrix(p, q, aux, a0, a1, b0, b1, code, out):  # pragma: no cover - jitted
    """``out[i, j]`` = distance between prepared frames ``a0 + i`` and ``b0 + j``.

    Every entry is a function of the two frames alone, computed by the same arithmetic in either
    order, so the matrix of (b, a) is exactly the transpose of the matrix of (a, b).
    """
    for i in range(a1 - a0):
        x = p[a0 + i]
        ax = aux[a0 + i]
        for j in range(b1 - b0):
            y = p[b0 + j]
            ay = aux[b0 + j]
            if code == 0:
                if ax != 0.0 or ay != 0.0:
                    out[i, j] = 0.0 if (ax != 0.0 and ay != 0.0) else 1.0
                else:
                    c = min(max(_dot(x, y), -1.0), 1.0)
                    out[i, j] = math.acos(c) / math.pi
            elif code == 1:
                out[i, j] = 0.5 * (ax - _dot(x, q[b0 + j])) + 0.5 * (ay - _dot(y, q[a0 + i]))
            else:
                out[i, j] = math.sqrt(_sqdist(x, y))


@numba.njit(cache=True)
def _accumulate(dist):  # pragma: no cover - jitted
    """Accumulated cost (n, m); the accumulated cost of ``dist.T`` is exactly its transpose."""
    n, m = dist.shape
    cost = np.empty((n, m))
    cost[0, 0] = dist[0, 0]
    for i in range(1, n):
        cost[i, 0] = dist[i, 0] + cost[i - 1, 0]
    for j in range(1, m):
        cost[0, j] = dist[0, j] + cost[0, j - 1]
    for i in range(1, n):
        for j in range(1, m):
            cost[i, j] = dist[i, j] + min(cost[i - 1, j], cost[i - 1, j - 1], cost[i, j - 1])
    return cost


@numba.njit(cache=True)
def _path_length(cost, transposed):  # pragma: no cover - jitted
    """Cells on the backtracked path: diag if diag <= left and diag <= up, else left if
    left <= up, else up. ``transposed`` backtracks ``cost.T`` (left and up swap roles)."""
    i = cost.shape[0] - 1
    j = cost.shape[1] - 1
    length = 1
    while i > 0 and j > 0:
        up = cost[i - 1, j]
        left = cost[i, j - 1]
        diag = cost[i - 1, j - 1]
        if diag <= left and diag <= up:
            i -= 1
            j -= 1
        elif transposed:
            if up <= left:
                i -= 1
            else:
                j -= 1
        elif left <= up:
            j -= 1
        else:
            i -= 1
        length += 1
    return length + i + j


@numba.njit(cache=True)
def _has_nan(dist):  # pragma: no cover - jitted
    for i in range(dist.shape[0]):
        for j in range(dist.shape[1]):
            if np.isnan(dist[i, j]):
                return True
    return False


@numba.njit(cache=True)
def _dtw(dist, normalized):  # pragma: no cover - jitted
    n, m = dist.shape
    if n == 0 or m == 0:
        return 0.0 if (n == 0 and m == 0) else np.inf
    if _has_nan(dist):
        return np.nan
    cost = _accumulate(dist)
    if not normalized:
        return cost[n - 1, m - 1]
    return cost[n - 1, m - 1] / _path_length(cost, False)


@numba.njit(cache=True, parallel=True)
def _pairwise(p, q, aux, offsets, pairs, both, code, normalized):  # pragma: no cover - jitted
    """d(i, j) for every pair and, where ``both``, d(j, i) from the same frame matrix and the
    same accumulated cost (only the backtracking differs between the two orders)."""
    n = pairs.shape[0]
    d_ij = np.empty(n)
    d_ji = np.full(n, np.nan)
    for r in numba.prange(n):
        a0, a1 = offsets[pairs[r, 0]], offsets[pairs[r, 0] + 1]
        b0, b1 = offsets[pairs[r, 1]], offsets[pairs[r, 1] + 1]
        if a1 == a0 or b1 == b0:
            d_ij[r] = 0.0 if (a1 == a0 and b1 == b0) else np.inf
            if both[r]:
                d_ji[r] = d_ij[r]
            continue
        dist = np.empty((a1 - a0, b1 - b0))
        _matrix(p, q, aux, a0, a1, b0, b1, code, dist)
        if _has_nan(dist):
            d_ij[r] = np.nan
            continue
        cost = _accumulate(dist)
        final = cost[a1 - a0 - 1, b1 - b0 - 1]
        d_ij[r] = final / _path_length(cost, False) if normalized else final
        if both[r]:
            d_ji[r] = final / _path_length(cost, True) if normalized else final
    return d_ij, d_ji


def _as_frames(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a (frames, dim) array, got shape {x.shape}")
    return np.ascontiguousarray(x)


def frame_distances(a: np.ndarray, b: np.ndarray, distance: str = "angular") -> np.ndarray:
    """Distance between every frame of ``a`` (n, D) and every frame of ``b`` (m, D) → (n, m).

    ``distance`` is one of :data:`DISTANCES`; definitions in the module docstring (ABXpy's
    ``cosine_distance`` and ``kl_divergence``, reference §1.4).
    """
    code = _distance_code(distance)
    a, b = _as_frames(a, "a"), _as_frames(b, "b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"frame dimensions differ: a has {a.shape[1]}, b has {b.shape[1]}")
    pa, qa, aa = _prepare(a, code)
    pb, qb, ab = _prepare(b, code)
    p, q, aux = np.concatenate([pa, pb]), np.concatenate([qa, qb]), np.concatenate([aa, ab])
    out = np.empty((a.shape[0], b.shape[0]))
    _matrix(p, q, aux, 0, len(a), len(a), len(a) + len(b), code, out)
    return out


def dtw(cost: np.ndarray, normalized: bool = True) -> float:
    """DTW over an (n, m) frame-distance matrix; divided by the backtracked path length.

    ABXpy's ``_dtw`` (reference §1.4). An empty side gives ``inf`` (0 if both are empty); a NaN
    anywhere in ``cost`` gives NaN.
    """
    cost = np.asarray(cost, dtype=np.float64)
    if cost.ndim != 2:
        raise ValueError(f"cost must be an (n, m) matrix, got shape {cost.shape}")
    return float(_dtw(np.ascontiguousarray(cost), bool(normalized)))


def dtw_distance(
    a: np.ndarray, b: np.ndarray, distance: str = "angular", normalized: bool = True
) -> float:
    """DTW distance between frame sequences ``a`` (n, D) and ``b`` (m, D), in that order."""
    a, b = _as_frames(a, "a"), _as_frames(b, "b")
    if a.shape[0] == 0 or b.shape[0] == 0:
        return 0.0 if a.shape[0] == b.shape[0] else float("inf")
    return dtw(frame_distances(a, b, distance), normalized)


def pairwise_dtw_both(
    frames: np.ndarray,
    offsets: np.ndarray,
    pairs: np.ndarray,
    both: np.ndarray | None = None,
    distance: str = "angular",
    normalized: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """DTW distances for many item pairs at once, in parallel threads, in one or both orders.

    Args:
        frames: (N, D) frames of all items, concatenated.
        offsets: (I + 1,) item ``i`` is ``frames[offsets[i]:offsets[i + 1]]``.
        pairs: (P, 2) item indices ``(i, j)``.
        both: (P,) bool; where true d(j, i) is computed too, from the same frame matrix
            (the DTW tie-breaking makes it differ from d(i, j) in general). Default all false.
        distance: one of :data:`DISTANCES`.
        normalized: divide by the path length (the ZeroSpeech default).

    Returns:
        ``(d_ij, d_ji)``, each (P,) float64, bit-identical to :func:`dtw_distance` pair by pair;
        ``d_ji`` is NaN where ``both`` is false.
    """
    code = _distance_code(distance)
    frames = _as_frames(frames, "frames")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    pairs = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(frames):
        raise ValueError("offsets must start at 0 and end at len(frames)")
    if np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must be non-decreasing")
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= len(offsets) - 1):
        raise ValueError(f"pairs index items 0..{len(offsets) - 2}")
    both = np.zeros(len(pairs), dtype=np.bool_) if both is None else np.asarray(both, np.bool_)
    if both.shape != (len(pairs),):
        raise ValueError(f"both must have shape ({len(pairs)},), got {both.shape}")
    p, q, aux = _prepare(frames, code)
    return _pairwise(p, q, aux, offsets, pairs, both, code, bool(normalized))


def pairwise_dtw(
    frames: np.ndarray,
    offsets: np.ndarray,
    pairs: np.ndarray,
    distance: str = "angular",
    normalized: bool = True,
) -> np.ndarray:
    """(P,) DTW distances ``d(item[i], item[j])`` for (P, 2) ``pairs``; see :func:`pairwise_dtw_both`."""
    return pairwise_dtw_both(frames, offsets, pairs, None, distance, normalized)[0]
