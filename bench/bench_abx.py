"""ABX error speed: ``audiorepro.metrics.abx`` vs a straightforward triplet loop, same inputs.

The task: 2,000 whole-file items of 39-d features (8 contexts x 5 phones x 10 speakers x 5
tokens, 6-14 frames each, phone-dependent means plus speaker offsets and noise), which gives
1.8 M across-speaker triplets and 160 k within-speaker triplets.

- ``library``: :func:`audiorepro.metrics.abx.abx` (every needed DTW distance once, one frame
  matrix for both orders of a pair, triplets scored in a jitted loop; numba threads).
- ``reference``: the definition written out: for every cell every (A, B, X) triplet in Python,
  DTW distances from :func:`audiorepro.metrics.dtw.dtw_distance` memoised per ordered pair, the
  means taken over contexts, speaker pairs and phone pairs. This is the work the official
  ABXpy pipeline does (the official pipeline takes about 17 s on one core for a task this size).

The script checks that both give the same score in every cell and the same error, then prints the
times and the speed-up. Run: ``python bench/bench_abx.py`` (about 20 s on 2 CPU cores).
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from statistics import mean

import numba
import numpy as np

from audiorepro.data.recipes.zerospeech import AbxItem, write_item_file
from audiorepro.metrics.abx import abx
from audiorepro.metrics.dtw import dtw_distance


def make_task(seed: int = 0, contexts=8, phones=5, speakers=10, tokens=5, dim=39):
    """Synthetic whole-file items and features (2019 convention: onset 0, offset 1)."""
    rng = np.random.default_rng(seed)
    phone_means = rng.normal(size=(phones, dim))
    speaker_shift = 0.7 * rng.normal(size=(speakers, dim))
    items, feats = [], {}
    for c, p, s, _ in itertools.product(
        range(contexts), range(phones), range(speakers), range(tokens)
    ):
        name = f"S{s:03d}_{len(items):05d}"
        n = int(rng.integers(6, 15))
        feats[name] = phone_means[p] + speaker_shift[s] + 4.0 * rng.normal(size=(n, dim))
        items.append(AbxItem(name, 0.0, 1.0, f"p{p}", f"c{c}", f"n{c}", f"S{s:03d}"))
    return items, feats


def reference_abx(items, feats, mode):
    """Every triplet enumerated in Python; returns (error %, {cell: mean score})."""
    by_key = defaultdict(list)
    for k, it in enumerate(items):
        by_key[(it.context, it.phone, it.speaker)].append(k)
    frames = [feats[it.file] for it in items]
    memo: dict[tuple[int, int], float] = {}

    def d(i, j):
        if (i, j) not in memo:
            memo[(i, j)] = dtw_distance(frames[i], frames[j])
        return memo[(i, j)]

    cells = {}
    for (ctx, pa, sa), a_items in by_key.items():
        for (ctx_b, pb, sb), b_items in by_key.items():
            if ctx_b != ctx or sb != sa or pb == pa:
                continue
            for (ctx_x, px, sx), x_items in by_key.items():
                if ctx_x != ctx or px != pa or (sx == sa) != (mode == "within"):
                    continue
                total, count = 0.0, 0
                for x in x_items:
                    for a in a_items:
                        if a == x:
                            continue
                        dax = d(a, x)
                        for b in b_items:
                            dbx = d(b, x)
                            total += 1.0 if dax < dbx else 0.0 if dax > dbx else 0.5
                            count += 1
                if count:
                    cells[(pa, pb, sa, sx, ctx)] = total / count
    by_speakers = defaultdict(list)
    for (pa, pb, sa, sx, _), score in cells.items():
        by_speakers[(pa, pb, sa, sx)].append(score)
    by_pair = defaultdict(list)
    for (pa, pb, _, _), scores in by_speakers.items():
        by_pair[(pa, pb)].append(mean(scores))
    return 100.0 * (1.0 - mean(mean(v) for v in by_pair.values())), cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    items, feats = make_task()
    with tempfile.TemporaryDirectory() as tmp:
        item_file = write_item_file(Path(tmp) / "bench.item", items)
        print(
            f"{len(items)} items, {sum(len(f) for f in feats.values())} frames of 39-d; "
            f"numba threads: {numba.get_num_threads()} (CPUs: {os.cpu_count()})"
        )
        abx(feats, item_file, mode="within")  # compile / load the jitted kernels once
        for mode in ("across", "within"):
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                result = abx(feats, item_file, mode=mode)
                times.append(time.perf_counter() - start)
            start = time.perf_counter()
            ref_error, ref_cells = reference_abx(items, feats, mode)
            ref_time = time.perf_counter() - start
            ours = {
                (r.phone_1, r.phone_2, r.speaker_1, r.speaker_2, tuple(r.context.split())): r.score
                for r in result.cells.itertuples()
            }
            identical = ours == ref_cells and abs(result.error - ref_error) < 1e-9
            print(
                f"{mode:7s} {result.n_triplets:>9,} triplets  ABX {result.error:6.3f} %  "
                f"library {min(times):6.3f} s  reference {ref_time:6.2f} s  "
                f"speed-up {ref_time / min(times):5.1f}x  identical: {identical}"
            )
            if not identical:
                raise SystemExit(f"{mode}: library and reference disagree")


if __name__ == "__main__":
    main()
