"""Frame distances and path-normalised dynamic time warping, as in the ZeroSpeech ABX.

The definitions follow ABXpy, the scorer behind the ZeroSpeech 2019/2020 ABX
(``shared/reference/zerospeech.md`` §1.4):

- ``"angular"`` (the official ``cosine``): ``arccos(x·y / (‖x‖‖y‖)) / π`` in [0, 1]. A zero vector
  is at distance 1 from every non-zero vector and at distance 0 from another zero vector;
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
    "prepare_frames",
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
    """Per-frame side information: (n,) norms for angular, (n,) Σ p log p plus log p for KL."""
    n, d = x.shape
    aux = np.zeros(n)
    out = x.copy()
    if code == 0:
        for i in range(n):
            s = 0.0
            for k in range(d):
                s += x[i, k] * x[i, k]
            aux[i] = math.sqrt(s)
    elif code == 1:
        for i in range(n):
            s = 0.0
            for k in range(d):
                s += x[i, k]
            for k in range(d):
                out[i, k] = x[i, k] / s + _EPS
            s = 0.0
            for k in range(d):
                s += out[i, k]
            h = 0.0
            for k in range(d):
                out[i, k] = out[i, k] / s
                h += out[i, k] * np.log(out[i, k])
            aux[i] = h
    return out, aux


@numba.njit(cache=True)
def _matrix(x, ax, y, ay, code, out):  # pragma: no cover - jitted
    """Fill ``out`` (n, m) with the frame distances between prepared frames ``x`` and ``y``."""
    n, d = x.shape
    m = y.shape[0]
    for i in range(n):
        for j in range(m):
            if code == 0:
                if ax[i] == 0.0 or ay[j] == 0.0:
                    out[i, j] = 0.0 if (ax[i] == 0.0 and ay[j] == 0.0) else 1.0
                else:
                    s = 0.0
                    for k in range(d):
                        s += x[i, k] * y[j, k]
                    c = s / (ax[i] * ay[j])
                    if c > 1.0:
                        c = 1.0
                    elif c < -1.0:
                        c = -1.0
                    out[i, j] = math.acos(c) / math.pi
            elif code == 1:
                sxy = 0.0
                syx = 0.0
                for k in range(d):
                    sxy += x[i, k] * np.log(y[j, k])
                    syx += y[j, k] * np.log(x[i, k])
                out[i, j] = 0.5 * (ax[i] - sxy) + 0.5 * (ay[j] - syx)
            else:
                s = 0.0
                for k in range(d):
                    t = x[i, k] - y[j, k]
                    s += t * t
                out[i, j] = math.sqrt(s)


@numba.njit(cache=True)
def _dtw(dist, normalized):  # pragma: no cover - jitted
    n, m = dist.shape
    if n == 0 or m == 0:
        return 0.0 if (n == 0 and m == 0) else np.inf
    for i in range(n):
        for j in range(m):
            if np.isnan(dist[i, j]):
                return np.nan
    cost = np.empty((n, m))
    cost[0, 0] = dist[0, 0]
    for i in range(1, n):
        cost[i, 0] = dist[i, 0] + cost[i - 1, 0]
    for j in range(1, m):
        cost[0, j] = dist[0, j] + cost[0, j - 1]
    for i in range(1, n):
        for j in range(1, m):
            cost[i, j] = dist[i, j] + min(cost[i - 1, j], cost[i - 1, j - 1], cost[i, j - 1])
    final = cost[n - 1, m - 1]
    if not normalized:
        return final
    length = 1
    i = n - 1
    j = m - 1
    while i > 0 and j > 0:
        up = cost[i - 1, j]
        left = cost[i, j - 1]
        diag = cost[i - 1, j - 1]
        if diag <= left and diag <= up:
            i -= 1
            j -= 1
        elif left <= up:
            j -= 1
        else:
            i -= 1
        length += 1
    length += i + j
    return final / length


@numba.njit(cache=True, parallel=True)
def _pairwise(frames, aux, offsets, pairs, code, normalized):  # pragma: no cover - jitted
    out = np.empty(pairs.shape[0])
    for p in numba.prange(pairs.shape[0]):
        a0, a1 = offsets[pairs[p, 0]], offsets[pairs[p, 0] + 1]
        b0, b1 = offsets[pairs[p, 1]], offsets[pairs[p, 1] + 1]
        dist = np.empty((a1 - a0, b1 - b0))
        _matrix(frames[a0:a1], aux[a0:a1], frames[b0:b1], aux[b0:b1], code, dist)
        out[p] = _dtw(dist, normalized)
    return out


def _as_frames(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a (frames, dim) array, got shape {x.shape}")
    return np.ascontiguousarray(x)


def prepare_frames(frames: np.ndarray, distance: str = "angular") -> tuple[np.ndarray, np.ndarray]:
    """Preprocess (N, D) frames once for :func:`pairwise_dtw`.

    Returns ``(prepared, aux)``: for ``"angular"`` the frames unchanged and their (N,) L2 norms;
    for ``"kl"`` the rows normalised, ε-smoothed and renormalised, and their (N,) Σ p log p;
    for ``"euclidean"`` the frames unchanged and zeros.
    """
    code = _distance_code(distance)
    return _prepare(_as_frames(frames, "frames"), code)


def frame_distances(a: np.ndarray, b: np.ndarray, distance: str = "angular") -> np.ndarray:
    """Distance between every frame of ``a`` (n, D) and every frame of ``b`` (m, D) → (n, m).

    ``distance`` is one of :data:`DISTANCES`; definitions in the module docstring (ABXpy's
    ``cosine_distance`` and ``kl_divergence``, reference §1.4).
    """
    code = _distance_code(distance)
    a, b = _as_frames(a, "a"), _as_frames(b, "b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"frame dimensions differ: a has {a.shape[1]}, b has {b.shape[1]}")
    pa, aa = _prepare(a, code)
    pb, ab = _prepare(b, code)
    out = np.empty((a.shape[0], b.shape[0]))
    _matrix(pa, aa, pb, ab, code, out)
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


def pairwise_dtw(
    frames: np.ndarray,
    offsets: np.ndarray,
    pairs: np.ndarray,
    distance: str = "angular",
    normalized: bool = True,
    prepared: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """DTW distances for many item pairs at once, in parallel threads.

    Args:
        frames: (N, D) frames of all items, concatenated.
        offsets: (I + 1,) item ``i`` is ``frames[offsets[i]:offsets[i + 1]]``.
        pairs: (P, 2) item indices; distance ``i`` is ``dtw_distance(item[p0], item[p1])``.
        distance: one of :data:`DISTANCES`.
        normalized: divide by the path length (the ZeroSpeech default).
        prepared: the output of :func:`prepare_frames` for ``frames``, to reuse it.

    Returns:
        (P,) float64 distances, bit-identical to :func:`dtw_distance` pair by pair.
    """
    code = _distance_code(distance)
    frames = _as_frames(frames, "frames")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    pairs = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
    if offsets.ndim != 1 or offsets[0] != 0 or offsets[-1] != len(frames):
        raise ValueError("offsets must start at 0 and end at len(frames)")
    if np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must be non-decreasing")
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= len(offsets) - 1):
        raise ValueError(f"pairs index items 0..{len(offsets) - 2}")
    prep, aux = prepare_frames(frames, distance) if prepared is None else prepared
    return _pairwise(prep, aux, offsets, pairs, code, bool(normalized))
