"""ABX error speed: ``audiorepro.metrics.abx`` vs a straightforward triplet loop, same inputs.

Two task sets of 2,000 items of 39-d features, built differently:

- ``whole-file`` (:func:`make_task`): every item a whole file (2019 convention: onset 0,
  offset 1), 8 contexts x 5 phones x 10 speakers x 5 tokens, 6-14 frames each, phone-dependent
  means plus speaker offsets and noise: 1.8 M across-speaker and 160 k within-speaker triplets.
- ``segments`` (:func:`make_segment_task`): ZeroSpeech-like triphone items cut out of 217
  utterance files of 20 speakers (of uneven weights) by onset and offset in seconds, so that the
  frames of each item are selected from its file (libri-light's frame rule at a 10 ms frame
  shift); 175 contexts of Zipf-distributed sizes (349 items in the largest, a few in most) over
  30 phones, 10-38 frames an item (21 on average), groups (context, phone, speaker) of 1 to 20
  items, most of one: 654 k across and 64 k within triplets.

The timed work is the ABX of both modes starting from the item file's path and a dict of
feature arrays in memory (item file parsing and frame selection included):

- ``library``: :func:`audiorepro.metrics.abx.abx_modes` with both modes in one call (items read
  once, every needed DTW distance computed once with one frame matrix for both orders of a pair,
  the frame distances a row against many partner frames at a time, triplets scored in a jitted
  loop; numba threads); ``2 x abx`` is :func:`~audiorepro.metrics.abx.abx` called once per mode.
- ``reference``: the definition written out: for every cell every (A, B, X) triplet in Python,
  DTW distances from :func:`audiorepro.metrics.dtw.dtw_distance` memoised per ordered pair, the
  means taken over contexts, speaker pairs and phone pairs. This is the work the official
  ABXpy pipeline does (the official pipeline takes about 17 s on one core for the whole-file set).

The script checks that both give the same score in every cell and the same error in each mode,
then prints the times (the fastest of the repeats) and the speed-ups. Measured on 2 CPU cores
(numba threads 2): whole-file 0.29 s, segments 0.53 s (the implementation before, two ``abx``
calls: 0.60 s and 1.10 s); the references take about 7 s each. Run:
``python bench/bench_abx.py`` (about 30 s).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from statistics import mean

import numba
import numpy as np

from audiorepro.data.recipes.zerospeech import AbxItem, write_item_file
from audiorepro.metrics.abx import abx, abx_modes
from audiorepro.metrics.dtw import dtw_distance

MODES = ("across", "within")


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


def _segment_labels(rng, n_items, contexts, phones, speakers):
    """(context, phone, speaker) of each item: Zipf-sized contexts holding 2-6 central phones of
    Zipf weights each, speakers of Dirichlet weights; and the (prev, next) phones of each context."""
    ctx_w = 1.0 / np.arange(1, contexts + 1)
    ctx_pairs = [tuple(int(v) for v in rng.choice(phones, 2)) for _ in range(contexts)]
    ctx_phones = [
        rng.choice(phones, int(rng.integers(2, 7)), replace=False) for _ in range(contexts)
    ]
    spk_w = rng.dirichlet(np.full(speakers, 3.0))
    labels = []
    for _ in range(n_items):
        c = int(rng.choice(contexts, p=ctx_w / ctx_w.sum()))
        phone_w = 1.0 / np.arange(1, len(ctx_phones[c]) + 1)
        p = int(ctx_phones[c][rng.choice(len(ctx_phones[c]), p=phone_w / phone_w.sum())])
        labels.append((c, p, int(rng.choice(speakers, p=spk_w))))
    return labels, ctx_pairs


def make_segment_task(
    seed: int = 0,
    n_items=2000,
    contexts=200,
    phones=30,
    speakers=20,
    dim=39,
    frame_shift=0.01,
    noise=2.0,
):
    """ZeroSpeech-like triphone items inside utterance files (times in seconds).

    Each speaker's items are shuffled into utterances of 5-15 triphones (prev, phone, next
    segments of phone-dependent durations, pauses between triphones); an item spans its
    triphone. A frame's features are the mean of the phone under its centre (or of silence) plus
    the speaker's offset and noise. Score with ``frame_shift`` (libri-light's frame rule).
    """
    rng = np.random.default_rng(seed)
    phone_means = rng.normal(size=(phones, dim))
    silence = rng.normal(size=dim)
    speaker_shift = 0.7 * rng.normal(size=(speakers, dim))
    phone_dur = rng.uniform(0.04, 0.1, size=phones)
    labels, ctx_pairs = _segment_labels(rng, n_items, contexts, phones, speakers)
    by_speaker = defaultdict(list)
    for k in rng.permutation(n_items):
        by_speaker[labels[k][2]].append(labels[k])
    items, feats = [], {}
    for s, chosen in sorted(by_speaker.items()):
        done = 0
        while done < len(chosen):
            utterance = chosen[done : done + int(rng.integers(5, 16))]
            done += len(utterance)
            name = f"S{s:03d}_{len(feats):05d}"
            t = rng.uniform(0.1, 0.4)
            segments, triphones = [], []
            for c, p, _ in utterance:
                onset = t
                for q in (ctx_pairs[c][0], p, ctx_pairs[c][1]):
                    duration = phone_dur[q] * rng.uniform(0.6, 1.6)
                    segments.append((t, t + duration, q))
                    t += duration
                triphones.append((onset, t, c, p))
                t += rng.uniform(0.0, 0.3)
            n = int(np.ceil((t + rng.uniform(0.1, 0.4)) / frame_shift))
            centres = (np.arange(n) + 0.5) * frame_shift
            means = np.tile(silence, (n, 1))
            for onset, offset, q in segments:
                means[(centres >= onset) & (centres < offset)] = phone_means[q]
            feats[name] = means + speaker_shift[s] + noise * rng.normal(size=(n, dim))
            for onset, offset, c, p in triphones:
                prev, nxt = ctx_pairs[c]
                items.append(
                    AbxItem(
                        name,
                        round(onset, 4),
                        round(offset, 4),
                        f"p{p}",
                        f"p{prev}",
                        f"p{nxt}",
                        f"S{s:03d}",
                    )
                )
    return items, feats


def cut_frames(items, feats, frame_shift):
    """Each item's frames, by the frame rule written out (2019 relative time or libri-light)."""
    out = []
    for it in items:
        x = feats[it.file]
        if frame_shift is None:
            kept = [i for i in range(len(x)) if it.onset <= i / len(x) <= it.offset]
        else:
            lo = math.ceil(it.onset / frame_shift - 0.5)
            hi = math.floor(it.offset / frame_shift - 0.5)
            kept = list(range(lo, hi))
        out.append(x[kept])
    return out


def reference_abx(items, frames, mode):
    """Every triplet enumerated in Python; returns (error %, {cell: mean score})."""
    by_key = defaultdict(list)
    for k, it in enumerate(items):
        by_key[(it.context, it.phone, it.speaker)].append(k)
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


def min_time(run, repeats):
    """The fastest of ``repeats`` calls (the machine may be shared) and the last result."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def bench_set(name, items, feats, frame_shift, repeats):
    """Time both modes of one task set against the reference; SystemExit if they disagree."""
    with tempfile.TemporaryDirectory() as tmp:
        item_file = write_item_file(Path(tmp) / "bench.item", items)
        frames = cut_frames(items, feats, frame_shift)
        print(
            f"== {name}: {len(items)} items, {sum(len(f) for f in frames)} item frames of "
            f"{frames[0].shape[1]}-d in {len(feats)} files"
        )
        abx_modes(feats, item_file, frame_shift=frame_shift)  # load the jitted kernels once
        both_time, results = min_time(
            lambda: abx_modes(feats, item_file, modes=MODES, frame_shift=frame_shift), repeats
        )
        single_time, _ = min_time(
            lambda: [abx(feats, item_file, mode=m, frame_shift=frame_shift) for m in MODES],
            repeats,
        )
        ref_total = 0.0
        for mode in MODES:
            result = results[mode]
            start = time.perf_counter()
            ref_error, ref_cells = reference_abx(items, frames, mode)
            ref_time = time.perf_counter() - start
            ref_total += ref_time
            ours = {
                (r.phone_1, r.phone_2, r.speaker_1, r.speaker_2, tuple(r.context.split())): r.score
                for r in result.cells.itertuples()
            }
            identical = ours == ref_cells and abs(result.error - ref_error) < 1e-9
            print(
                f"  {mode:7s} {result.n_triplets:>9,} triplets  ABX {result.error:6.3f} %  "
                f"reference {ref_time:6.2f} s  identical: {identical}"
            )
            if not identical:
                raise SystemExit(f"{name} {mode}: library and reference disagree")
        print(
            f"  across + within, parsing included: library {both_time:6.3f} s  "
            f"(2 x abx {single_time:6.3f} s)  reference {ref_total:6.2f} s  "
            f"speed-up {ref_total / both_time:5.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"numba threads: {numba.get_num_threads()} (CPUs: {os.cpu_count()})")
    bench_set("whole-file", *make_task(), None, args.repeats)
    bench_set("segments", *make_segment_task(), 0.01, args.repeats)


if __name__ == "__main__":
    main()
