"""Acoustic word embeddings against MFCC + DTW within each speaker: the pairs of one speaker's
own tokens, as a test on one held-out speaker ranks them. A study, not a bench.

    python bench/study_awe_within.py EMB.npz [EMB.npz ...]

``EMB.npz`` is what ``audiorepro awe embed RUN --segments TEST.tsv --out EMB.npz`` writes
(its ``speakers`` array and the lines of the table it embedded). For every speaker with two or
more words it prints the same-different AP of the embeddings of that speaker's rows and of MFCC
+ DTW on the same rows (the frames ``awe ap``'s baseline reads), then the mean over the
speakers and on how many the embeddings win. ``awe ap`` scores all pairs at once: on a table of
several voices most same-word pairs are two voices, where DTW is weakest.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from audiorepro.data.recordings import read_segments
from audiorepro.experiments.awe.recordings import rows_dtw_ap
from audiorepro.metrics.average_precision import same_different_ap


def within_speakers(path: Path) -> list[tuple[str, int, float, float]]:
    """``[(speaker, rows, embeddings' AP, MFCC + DTW's AP)]`` over the rows of each speaker of
    ``path`` that holds two words or more and a word said twice, in speaker order."""
    with np.load(path) as archive:
        emb, labels = archive["embeddings"], [str(w) for w in archive["labels"]]
        speakers, lines = archive["speakers"].astype(str), archive["rows"].tolist()
        table, norm = str(archive["segments"]), str(archive["feature_norm"])
    by_line = {row.line: row for row in read_segments(table)}
    rows = [by_line[line] for line in lines]
    out = []
    for speaker in sorted(set(speakers)):
        idx = np.flatnonzero(speakers == speaker)
        words = [labels[i] for i in idx]
        if len(set(words)) < 2 or len(set(words)) == len(words):
            continue  # no pair to rank apart
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a handful of pairs: weak, and said in the table
            ap = float(same_different_ap(emb[idx], words))
            dtw = rows_dtw_ap([rows[i] for i in idx], words, norm=norm)["ap"]
        out.append((speaker, len(idx), ap, float(dtw)))
    return out


def main(argv: Sequence[str] | None = None) -> list[list[tuple[str, int, float, float]]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("npz", nargs="+", type=Path, help="awe embed outputs")
    args = parser.parse_args(argv)
    results = []
    for path in args.npz:
        found = within_speakers(path)
        if not found:
            raise SystemExit(f"{path}: no speaker with a word said twice and two words")
        print(f"{path}:")
        for speaker, n, ap, dtw in found:
            print(f"  {speaker}: {n} rows  embeddings {ap:.4f}  MFCC + DTW {dtw:.4f}")
        aps, dtws = [f[2] for f in found], [f[3] for f in found]
        wins = sum(a > d for a, d in zip(aps, dtws, strict=True))
        print(
            f"  mean over {len(found)} speakers: embeddings {np.mean(aps):.4f}, MFCC + DTW "
            f"{np.mean(dtws):.4f}; the embeddings higher on {wins}"
        )
        results.append(found)
    return results


if __name__ == "__main__":
    main()
