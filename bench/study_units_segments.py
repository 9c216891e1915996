"""Would pairs of stretches of prompts, not only of whole files, teach the units more? A study,
not a bench.

    python bench/study_units_segments.py TRAIN TEST ITEMS [--seed 0] [--frames 40] [--per-file 1]

``TRAIN`` and ``TEST`` hold one folder per speaker (``--speaker-of parent``), ``ITEMS`` is the
ABX item file of ``TEST``. The script trains as ``units train`` does (per-speaker
normalisation, the whole-file pairs it finds beside each file's own reconstruction, 2,400
steps) and adds pairs of stretches: for every two files of different speakers, the stretch of
``--frames`` frames of each whose frames, matched one to one along a diagonal, are closest on
average (angular frame distance); the ``--per-file`` times as many stretches as there are
files, closest first, one a pair of files (no label: a rank). Each stretch pair reconstructs
each other both ways, aligned by DTW, as whole-file pairs do. It prints how many it kept and
the units' word ABX across speakers on ``ITEMS``; ``--per-file 0`` gives ``units train``'s.
"""

from __future__ import annotations

import argparse
from pathlib import Path

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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("items", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--per-file", type=float, default=1.0)
    args = parser.parse_args(argv)
    data = training_set(args.train, args.seed)
    dataset = data.dataset()
    if args.per_file > 0:
        clean, whole = data.clean, set(data.found.pairs)
        candidates = []
        for i in range(len(clean)):
            for j in range(i + 1, len(clean)):
                if data.voices[i] != data.voices[j] and (i, j) not in whole:
                    cost, si, sj = closest_stretch(clean[i], clean[j], args.frames)
                    candidates.append((cost, i, j, si, sj))
        candidates.sort()
        kept = candidates[: round(args.per_file * len(clean))]
        print(
            f"{len(kept)} stretch pairs of {args.frames} frames kept of {len(candidates):,}, "
            f"mean distance {kept[0][0]:.3f} to {kept[-1][0]:.3f} "
            f"(median of all: {candidates[len(candidates) // 2][0]:.3f})",
            flush=True,
        )
        for _, i, j, si, sj in kept:
            a, b = clean[i][si : si + args.frames], clean[j][sj : sj + args.frames]
            dataset.items.append((a, aligned_to(a, b), data.index[j]))
            dataset.items.append((b, aligned_to(b, a), data.index[i]))
    train_and_score(data, dataset, args.test, args.items)


if __name__ == "__main__":
    main()
