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

Every distance goes through the same arithmetic, so :func:`dtw_distance`,
``dtw(frame_distances(a, b))``, :func:`pairwise_dtw` and :func:`partner_dtw` return
bit-identical numbers; the ABX relies on this to score ties exactly as a brute-force
enumeration does. (:func:`partner_dtw` computes a frame's distances to many frames at once with
the same sums in the same order, vectorised across the frames.)
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
    "partner_dtw",
    "undefined_frames",
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
def _prepare_row(x, i, code, p, q, aux):  # pragma: no cover - jitted
    """Preprocess frame ``i`` into ``p[i]`` (holding a copy of ``x[i]``), ``q[i]`` and ``aux[i]``."""
    d = x.shape[1]
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
        _prepare_row(x, i, code, p, q, aux)
    return p, q, aux


@numba.njit(cache=True, parallel=True)
def _prepare_parallel(x, code):  # pragma: no cover - jitted
    """:func:`_prepare` in parallel threads (the same numbers), and the transposes of ``p`` and
    ``q``, (dim, frames), whose rows hold one dimension of consecutive frames."""
    n, d = x.shape
    p = x.copy()
    q = np.zeros((n, d)) if code == 1 else np.zeros((0, d))
    aux = np.zeros(n)
    pt = np.empty((d, n))
    qt = np.empty((q.shape[1], q.shape[0]))
    block = 1024
    for b in numba.prange((n + block - 1) // block):
        for i in range(b * block, min(n, (b + 1) * block)):
            _prepare_row(x, i, code, p, q, aux)
            for k in range(d):
                pt[k, i] = p[i, k]
            if code == 1:
                for k in range(d):
                    qt[k, i] = q[i, k]
    return p, q, aux, pt, qt


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


@numba.njit(cache=True)
def _gather_columns(src_t, offsets, items, lo, hi, buf):  # pragma: no cover - jitted
    """Copy the frames of ``items[lo:hi]`` from ``src_t`` (dim, frames) into the first columns
    of ``buf``, in order, a run of consecutive items at a time; returns the number of columns.

    The partners' frames become contiguous columns, so that a row kernel runs over all of them.
    """
    c = 0
    t = lo
    while t < hi:
        run_end = t + 1
        while run_end < hi and items[run_end] == items[run_end - 1] + 1:
            run_end += 1
        f0, f1 = offsets[items[t]], offsets[items[run_end - 1] + 1]
        for k in range(src_t.shape[0]):
            dst, src = buf[k, c : c + f1 - f0], src_t[k, f0:f1]
            for j in range(f1 - f0):
                dst[j] = src[j]
        c += f1 - f0
        t = run_end
    return c


@numba.njit(cache=True)
def _chain_steps(x, buf, k, stop, s):  # pragma: no cover - jitted
    """Add ``x[k] * buf[k]``, ``x[k + 4] * buf[k + 4]``, ... (``k < stop``) to the partial sums
    ``s`` in that order, eight or four steps per pass over the columns: fewer stores than one
    pass per step, and the same sums."""
    width = s.shape[0]
    while k + 28 < stop:
        x0, x1, x2, x3 = x[k], x[k + 4], x[k + 8], x[k + 12]
        x4, x5, x6, x7 = x[k + 16], x[k + 20], x[k + 24], x[k + 28]
        r0, r1, r2, r3 = (
            buf[k, :width],
            buf[k + 4, :width],
            buf[k + 8, :width],
            buf[k + 12, :width],
        )
        r4, r5 = buf[k + 16, :width], buf[k + 20, :width]
        r6, r7 = buf[k + 24, :width], buf[k + 28, :width]
        for c in range(width):
            t = ((s[c] + x0 * r0[c]) + x1 * r1[c]) + x2 * r2[c]
            t = ((t + x3 * r3[c]) + x4 * r4[c]) + x5 * r5[c]
            s[c] = (t + x6 * r6[c]) + x7 * r7[c]
        k += 32
    while k + 12 < stop:
        x0, x1, x2, x3 = x[k], x[k + 4], x[k + 8], x[k + 12]
        r0, r1, r2, r3 = (
            buf[k, :width],
            buf[k + 4, :width],
            buf[k + 8, :width],
            buf[k + 12, :width],
        )
        for c in range(width):
            s[c] = (((s[c] + x0 * r0[c]) + x1 * r1[c]) + x2 * r2[c]) + x3 * r3[c]
        k += 16
    while k < stop:
        xk, r = x[k], buf[k, :width]
        for c in range(width):
            s[c] += xk * r[c]
        k += 4


@numba.njit(cache=True)
def _row_dots(x, buf, width, acc, out):  # pragma: no cover - jitted
    """``out[c] = _dot(x, buf[:, c])`` for ``c < width``, bit for bit.

    Each of :func:`_dot`'s four partial sums (dimensions ``k = j mod 4``) is accumulated in the
    same order of ``k``, for all columns at once (:func:`_chain_steps`); then the partial sums
    are combined and the tail added as :func:`_dot` does. The loops over the columns are
    vectorised and no sum is reordered.
    """
    d = x.shape[0]
    full = d - d % 4
    for j in range(4):
        s = acc[j, :width]
        for c in range(width):
            s[c] = 0.0
        _chain_steps(x, buf, j, full, s)
    s0, s1, s2, s3 = acc[0, :width], acc[1, :width], acc[2, :width], acc[3, :width]
    o = out[:width]
    for c in range(width):
        o[c] = (s0[c] + s1[c]) + (s2[c] + s3[c])
    for k in range(full, d):
        xk, r = x[k], buf[k, :width]
        for c in range(width):
            o[c] += xk * r[c]


@numba.njit(cache=True)
def _row_sqdists(x, buf, width, acc, out):  # pragma: no cover - jitted
    """``out[c] = _sqdist(x, buf[:, c])`` for ``c < width``, bit for bit (see :func:`_row_dots`)."""
    d = x.shape[0]
    full = d - d % 4
    for j in range(4):
        s = acc[j]
        for c in range(width):
            s[c] = 0.0
        for k in range(j, full, 4):
            xk, r = x[k], buf[k]
            for c in range(width):
                t = xk - r[c]
                s[c] += t * t
    s0, s1, s2, s3 = acc[0], acc[1], acc[2], acc[3]
    for c in range(width):
        out[c] = (s0[c] + s1[c]) + (s2[c] + s3[c])
    for k in range(full, d):
        xk, r = x[k], buf[k]
        for c in range(width):
            t = xk - r[c]
            out[c] += t * t


@numba.njit(cache=True)
def _angular_row(x, ax, pbuf, auxbuf, width, zero_columns, acc, out):  # pragma: no cover
    """Angular distances of a prepared frame to the gathered columns (:func:`_matrix`'s
    arithmetic, one step per loop so that all but the ``acos`` calls are vectorised)."""
    _row_dots(x, pbuf, width, acc, out)
    for c in range(width):
        out[c] = min(max(out[c], -1.0), 1.0)
    for c in range(width):
        out[c] = math.acos(out[c])
    for c in range(width):
        out[c] = out[c] / math.pi
    if ax != 0.0:
        for c in range(width):
            out[c] = 0.0 if auxbuf[c] != 0.0 else 1.0
    elif zero_columns:
        for c in range(width):
            if auxbuf[c] != 0.0:
                out[c] = 1.0


@numba.njit(cache=True)
def _strip(p, q, aux, a0, n, pbuf, qbuf, auxbuf, width, code, acc, tmp, strip):  # pragma: no cover
    """``strip[i, c]`` = distance between prepared frame ``a0 + i`` and gathered column ``c``,
    for ``i < n``, by the arithmetic of :func:`_matrix` (the same bits whichever side a frame is
    on)."""
    zero_columns = False
    for c in range(width):
        zero_columns |= auxbuf[c] != 0.0
    for i in range(n):
        f = a0 + i
        out = strip[i]
        if code == 0:
            _angular_row(p[f], aux[f], pbuf, auxbuf, width, zero_columns, acc, out)
        elif code == 1:
            _row_dots(p[f], qbuf, width, acc, out)
            _row_dots(q[f], pbuf, width, acc, tmp)
            ax = aux[f]
            for c in range(width):
                out[c] = 0.5 * (ax - out[c]) + 0.5 * (auxbuf[c] - tmp[c])
        else:
            _row_sqdists(p[f], pbuf, width, acc, out)
            for c in range(width):
                out[c] = math.sqrt(out[c])


@numba.njit(cache=True)
def _block_cost(strip, c0, n, m, cost):  # pragma: no cover - jitted
    """:func:`_accumulate` of the block ``strip[:n, c0:c0 + m]`` into ``cost[:n, :m]``;
    False (cost untouched) when the block holds a NaN."""
    nan = False
    for i in range(n):
        row = strip[i, c0 : c0 + m]
        for j in range(m):
            nan |= np.isnan(row[j])
    if nan:
        return False
    row, above = strip[0, c0 : c0 + m], cost[0]
    above[0] = row[0]
    for j in range(1, m):
        above[j] = row[j] + above[j - 1]
    for i in range(1, n):
        row, cur = strip[i, c0 : c0 + m], cost[i]
        cur[0] = row[0] + above[0]
        for j in range(1, m):
            cur[j] = row[j] + min(above[j], above[j - 1], cur[j - 1])
        above = cur
    return True


@numba.njit(cache=True)
def _chunk_end(offsets, partners, lo, hi, width_cap):  # pragma: no cover - jitted
    """End of the run of partners from ``lo`` whose frames fit ``width_cap`` columns (>= lo + 1)."""
    width = 0
    t = lo
    while t < hi:
        m = offsets[partners[t] + 1] - offsets[partners[t]]
        if t > lo and width + m > width_cap:
            break
        width += m
        t += 1
    return t


@numba.njit(cache=True)
def _row_item(
    p, q, aux, pt, qt, offsets, a, partners, flags, lo, hi, code, normalized, width_cap, d_ab, d_ba
):  # pragma: no cover - jitted
    """Both-order DTW distances between item ``a`` and ``partners[lo:hi]`` (one work unit).

    Partners are taken in runs of at most ``width_cap`` frames: their frames are gathered as
    columns, the strip of frame distances (a's frames x the run's frames) is filled row by row,
    and each partner's block of the strip is accumulated and backtracked in the orders asked.
    """
    a0, n = offsets[a], offsets[a + 1] - offsets[a]
    dim = p.shape[1]
    pbuf = np.empty((dim, width_cap))
    qbuf = np.empty((dim if code == 1 else 0, width_cap))
    auxbuf = np.empty(width_cap)
    acc = np.empty((4, width_cap))
    tmp = np.empty(width_cap)
    strip = np.empty((n, width_cap))
    cost = np.empty((n, width_cap))
    t = lo
    while t < hi:
        t_end = _chunk_end(offsets, partners, t, hi, width_cap)
        if n > 0:
            width = _gather_columns(pt, offsets, partners, t, t_end, pbuf)
            _gather_columns(aux.reshape(1, -1), offsets, partners, t, t_end, auxbuf.reshape(1, -1))
            if code == 1:
                _gather_columns(qt, offsets, partners, t, t_end, qbuf)
            _strip(p, q, aux, a0, n, pbuf, qbuf, auxbuf, width, code, acc, tmp, strip)
        c0 = 0
        for s in range(t, t_end):
            m = offsets[partners[s] + 1] - offsets[partners[s]]
            if n == 0 or m == 0:
                value = 0.0 if n == m else np.inf
                d_ab[s] = value if flags[s] & 1 else np.nan
                d_ba[s] = value if flags[s] & 2 else np.nan
            elif not _block_cost(strip, c0, n, m, cost):
                d_ab[s] = np.nan
                d_ba[s] = np.nan
            else:
                final = cost[n - 1, m - 1]
                block = cost[:n, :m]
                if flags[s] & 1:
                    d_ab[s] = final / _path_length(block, False) if normalized else final
                if flags[s] & 2:
                    d_ba[s] = final / _path_length(block, True) if normalized else final
            c0 += m
        t = t_end


@numba.njit(cache=True, parallel=True)
def _rows_dtw(
    p,
    q,
    aux,
    pt,
    qt,
    offsets,
    start,
    partners,
    flags,
    order,
    bin_start,
    code,
    normalized,
    width_cap,
):  # pragma: no cover - jitted
    """:func:`_row_item` for every item; the items ``order[bin_start[b]:bin_start[b + 1]]`` of
    bin ``b`` in one thread, the bins in parallel."""
    d_ab = np.full(partners.shape[0], np.nan)
    d_ba = np.full(partners.shape[0], np.nan)
    for b in numba.prange(bin_start.shape[0] - 1):
        for u in range(bin_start[b], bin_start[b + 1]):
            a = order[u]
            _row_item(
                p,
                q,
                aux,
                pt,
                qt,
                offsets,
                a,
                partners,
                flags,
                start[a],
                start[a + 1],
                code,
                normalized,
                width_cap,
                d_ab,
                d_ba,
            )
    return d_ab, d_ba


def _balanced_bins(work: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Deal the units with work to ``n_bins`` bins of about equal total work.

    The units, largest first, are dealt 0, 1, ..., n - 1, n - 1, ..., 0, 0, 1, ... (each bin
    gets one of every ``n`` units of similar size). Returns ``(order, bin_start)``: bin ``b``
    holds the units ``order[bin_start[b]:bin_start[b + 1]]``, largest first. The threads of a
    parallel loop over the bins then finish together, which numba's static split of a loop
    over the units, sorted or not, does not ensure.
    """
    units = np.flatnonzero(work > 0)
    units = units[np.argsort(-work[units], kind="stable")]
    turn = np.arange(len(units)) % (2 * n_bins)
    bins = np.where(turn < n_bins, turn, 2 * n_bins - 1 - turn)
    by_bin = np.argsort(bins, kind="stable")
    bin_start = np.searchsorted(bins[by_bin], np.arange(n_bins + 1))
    return units[by_bin].astype(np.int64), bin_start.astype(np.int64)


def _as_frames(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a (frames, dim) array, got shape {x.shape}")
    return np.ascontiguousarray(x)


def undefined_frames(x: np.ndarray, distance: str) -> tuple[int, str] | None:
    """The first frame of ``x`` (N, D) on which ``distance`` is undefined, and why; ``None``
    when it is defined on every frame.

    ``kl`` reads each frame as a probability distribution: a negative value (codebook vectors,
    MFCCs) makes its distances NaN (the log of a negative number) and a frame summing to 0 has
    no normalisation, so both are undefined. ``angular`` and ``euclidean`` are defined on every
    finite frame (a zero vector has its angular convention, module docstring).
    """
    code = _distance_code(distance)
    x = _as_frames(x, "x")
    if code != 1 or not len(x):
        return None
    negative = np.flatnonzero((x < 0).any(axis=1))
    if negative.size:
        row = int(negative[0])
        return row, f"has a negative value ({float(x[row].min()):g})"
    empty = np.flatnonzero(x.sum(axis=1) <= 0)
    if empty.size:
        return int(empty[0]), "sums to 0"
    return None


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


#: Columns (partner frames) of one strip of frame distances in :func:`partner_dtw`.
STRIP_WIDTH = 64


def partner_dtw(
    frames: np.ndarray,
    offsets: np.ndarray,
    start: np.ndarray,
    partners: np.ndarray,
    flags: np.ndarray,
    distance: str = "angular",
    normalized: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """DTW distances of each item with a list of partner items, in one or both orders.

    The pairs come grouped by their first item (compressed rows): item ``a``'s partners are
    ``partners[start[a]:start[a + 1]]``. One work unit is an item and its partners; its frame
    distances are computed a row of ``a``'s frames against many partner frames at a time (the
    inner loop vectorised), each partner's frame matrix once for both orders, and the units run
    in parallel threads, dealt to them by size so that the threads finish together.

    Args:
        frames: (N, D) frames of all items, concatenated.
        offsets: (I + 1,) item ``i`` is ``frames[offsets[i]:offsets[i + 1]]``.
        start: (I + 1,) non-decreasing, ``start[0] = 0``, ``start[-1] = len(partners)``.
        partners: (P,) item indices.
        flags: (P,) bit 1: compute d(a, partner), bit 2: d(partner, a).
        distance: one of :data:`DISTANCES`.
        normalized: divide by the path length (the ZeroSpeech default).

    Returns:
        ``(d_ab, d_ba)``, each (P,) float64, bit-identical to :func:`dtw_distance` of the pair in
        that order; NaN where the flag is not set.
    """
    code = _distance_code(distance)
    frames = _as_frames(frames, "frames")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    start = np.ascontiguousarray(start, dtype=np.int64)
    partners = np.ascontiguousarray(partners, dtype=np.int64)
    flags = np.ascontiguousarray(flags, dtype=np.int64)
    n_items = len(offsets) - 1
    if offsets.ndim != 1 or n_items < 0 or offsets[0] != 0 or offsets[-1] != len(frames):
        raise ValueError("offsets must start at 0 and end at len(frames)")
    if np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must be non-decreasing")
    if start.shape != (n_items + 1,) or start[0] != 0 or start[-1] != len(partners):
        raise ValueError(f"start must have {n_items + 1} entries from 0 to len(partners)")
    if np.any(np.diff(start) < 0):
        raise ValueError("start must be non-decreasing")
    if len(partners) and (partners.min() < 0 or partners.max() >= n_items):
        raise ValueError(f"partners index items 0..{n_items - 1}")
    if flags.shape != partners.shape:
        raise ValueError(f"flags must have shape {partners.shape}, got {flags.shape}")
    lengths = np.diff(offsets)
    partner_frames = np.concatenate([[0], np.cumsum(lengths[partners])])
    # the frame pairs of a unit, plus one so that a unit of empty items still runs
    work = (lengths * (partner_frames[start[1:]] - partner_frames[start[:-1]]) + 1) * (
        np.diff(start) > 0
    )
    order, bin_start = _balanced_bins(work, numba.get_num_threads())
    width_cap = max(STRIP_WIDTH, int(lengths.max(initial=0)))
    p, q, aux, pt, qt = _prepare_parallel(frames, code)
    return _rows_dtw(
        p,
        q,
        aux,
        pt,
        qt,
        offsets,
        start,
        partners,
        flags,
        order,
        bin_start,
        code,
        bool(normalized),
        width_cap,
    )
