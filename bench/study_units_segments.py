"""Would pairs of stretches of prompts, not only of whole files, teach the units more? A study,
not a bench.

    python bench/study_units_segments.py TRAIN TEST ITEMS [--seed 0] [--frames 40] [--per-file 1]
        [--warped R]

``TRAIN`` and ``TEST`` hold one folder per speaker (``--speaker-of parent``), ``ITEMS`` is the
ABX item file of ``TEST``. The script trains as ``units train`` does (per-speaker
normalisation, the whole-file pairs it finds beside each file's own reconstruction, 2,400
steps) and adds pairs of stretches: for every two files of different speakers, the stretch of
``--frames`` frames of each whose frames, matched one to one along a diagonal, are closest on
average (angular frame distance); the ``--per-file`` times as many stretches as there are
files, closest first, one a pair of files (no label: a rank). Each stretch pair reconstructs
each other both ways, aligned by DTW, as whole-file pairs do. It prints how many it kept and
the units' word ABX across speakers on ``ITEMS``; ``--per-file 0`` gives ``units train``'s.
``--warped R``: the stretches are found by segmental DTW instead (diagonal bands of radius
``R``, a path of ``--frames`` steps: the speakers may say them at different speeds).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numba
import numpy as np
from study_units_channels import train_and_score, training_set

from audiorepro.experiments.zerospeech.pairs import aligned_to
from audiorepro.metrics.dtw import frame_distances


def closest_stretch(a: np.ndarray, b: np.ndarray, frames: int) -> tuple[float, int, int]:
    """``(mean distance, start in a, start in b)`` of the two stretches of ``frames`` frames
    whose frames, one to one, are closest on average; a quiet frame (its first coefficient
    below its speaker's mean) counts as far from any."""
    cost = frame_distances(a, b, "angular")
    # quiet frames (c0 below the speaker's mean, as normalised) match any other: they count as
    # far, so a stretch is of speech
    cost[a[:, 0] < 0, :] = 1.0
    cost[:, b[:, 0] < 0] = 1.0
    n, m = len(a) - frames + 1, len(b) - frames + 1
    if n < 1 or m < 1:
        return np.inf, 0, 0
    mean = np.zeros((n, m))
    for k in range(frames):
        mean += cost[k : k + n, k : k + m]
    i, j = np.unravel_index(int(mean.argmin()), mean.shape)
    return float(mean[i, j] / frames), int(i), int(j)


@numba.njit
def _banded_stretch(cost, radius, steps):
    """Segmental DTW (Park and Glass 2008): in each diagonal band of half-width ``radius``,
    every ``radius`` diagonals, the DTW path from the matrix's top or left edge to its bottom
    or right edge; of each path, the ``steps`` consecutive steps of least mean cost.
    Returns ``(mean cost, a start, a end, b start, b end)``, ends included."""
    n, m = cost.shape
    width = 2 * radius + 1
    total = np.empty((n, width))
    length = np.empty((n, width), np.int64)
    back = np.empty((n, width), np.int8)
    best = (np.inf, 0, 0, 0, 0)
    path_i = np.empty(n + m, np.int64)
    path_j = np.empty(n + m, np.int64)
    for off in range(-(n - 1), m, radius):
        total[:] = np.inf
        end_cost, end_i, end_d = np.inf, -1, -1
        for i in range(n):
            for d in range(width):
                j = i + off + d - radius
                if j < 0 or j >= m:
                    continue
                c = cost[i, j]
                if i == 0 or j == 0:
                    total[i, d], length[i, d], back[i, d] = c, 1, 3
                else:
                    t, how, k = total[i - 1, d], 0, length[i - 1, d]
                    if d + 1 < width and total[i - 1, d + 1] < t:
                        t, how, k = total[i - 1, d + 1], 1, length[i - 1, d + 1]
                    if d >= 1 and total[i, d - 1] < t:
                        t, how, k = total[i, d - 1], 2, length[i, d - 1]
                    if t == np.inf:
                        continue
                    total[i, d], length[i, d], back[i, d] = t + c, k + 1, how
                if (i == n - 1 or j == m - 1) and length[i, d] >= steps:
                    mean = total[i, d] / length[i, d]
                    if mean < end_cost:
                        end_cost, end_i, end_d = mean, i, d
        if end_i < 0:
            continue
        i, d, k = end_i, end_d, 0
        while True:
            path_i[k], path_j[k] = i, i + off + d - radius
            k += 1
            how = back[i, d]
            if how == 3:
                break
            if how == 0:
                i -= 1
            elif how == 1:
                i, d = i - 1, d + 1
            else:
                d -= 1
        # the path runs backwards: path_*[k - 1] is its start
        window = 0.0
        for s in range(k):
            window += cost[path_i[s], path_j[s]]
            if s >= steps:
                window -= cost[path_i[s - steps], path_j[s - steps]]
            if s >= steps - 1 and window / steps < best[0]:
                e = s - steps + 1  # path_*[s] is the window's start, path_*[e] its end
                best = (window / steps, path_i[s], path_i[e], path_j[s], path_j[e])
    return best


def closest_warped_stretch(
    a: np.ndarray, b: np.ndarray, steps: int, radius: int = 5
) -> tuple[float, int, int, int, int]:
    """``(mean distance, a start, a end, b start, b end)`` of the stretches of ``a`` and ``b``
    whose DTW path of ``steps`` steps (segmental DTW, bands of half-width ``radius``) is
    closest on average; quiet frames count as far, as in :func:`closest_stretch`."""
    cost = frame_distances(a, b, "angular")
    cost[a[:, 0] < 0, :] = 1.0
    cost[:, b[:, 0] < 0] = 1.0
    mean, a0, a1, b0, b1 = _banded_stretch(cost, radius, steps)
    return float(mean), int(a0), int(a1) + 1, int(b0), int(b1) + 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("items", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--per-file", type=float, default=1.0)
    parser.add_argument("--warped", type=int, default=0, help="segmental DTW, band radius")
    args = parser.parse_args(argv)
    data = training_set(args.train, args.seed)
    dataset = data.dataset()
    if args.per_file > 0:
        clean, whole = data.clean, set(data.found.pairs)
        candidates = []
        for i in range(len(clean)):
            for j in range(i + 1, len(clean)):
                if data.voices[i] != data.voices[j] and (i, j) not in whole:
                    if args.warped:
                        found = closest_warped_stretch(
                            clean[i], clean[j], args.frames, args.warped
                        )
                    else:
                        cost, si, sj = closest_stretch(clean[i], clean[j], args.frames)
                        found = (cost, si, si + args.frames, sj, sj + args.frames)
                    candidates.append((found[0], i, j, *found[1:]))
        candidates.sort()
        kept = candidates[: round(args.per_file * len(clean))]
        print(
            f"{len(kept)} stretch pairs of {args.frames} frames kept of {len(candidates):,}, "
            f"mean distance {kept[0][0]:.3f} to {kept[-1][0]:.3f} "
            f"(median of all: {candidates[len(candidates) // 2][0]:.3f})",
            flush=True,
        )
        for _, i, j, a0, a1, b0, b1 in kept:
            a, b = clean[i][a0:a1], clean[j][b0:b1]
            dataset.items.append((a, aligned_to(a, b), data.index[j]))
            dataset.items.append((b, aligned_to(b, a), data.index[i]))
    train_and_score(data, dataset, args.test, args.items)


if __name__ == "__main__":
    main()
