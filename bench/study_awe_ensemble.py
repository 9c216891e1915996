"""Two cheap ways to raise acoustic-word-embedding AP within one unseen speaker, measured: an
ensemble of seeds and test-time augmentation (TTA). A study, not a bench.

    python bench/study_awe_ensemble.py TEST.tsv RUN [RUN ...] [--npz EMB.npz ...]
        [--ensembles 0,1 0,2 1,2 0,1,2] [--json OUT.json]

``RUN``: ``audiorepro awe train`` run folders (``--set seed=S``); ``TEST.tsv``: the segments
table of unseen speakers they are scored on; ``--npz``: ``audiorepro awe embed RUN --segments
TEST.tsv --out EMB.npz`` of each run, in the same order, to check that this script's plain
embeddings are the command's (the largest absolute difference is printed; the script stops
above ``--tolerance``). For every run it embeds the table's rows as ``awe embed`` does
(:func:`~audiorepro.experiments.awe.frames.segment_features` over the whole table with the
run's ``feature_norm``, rows shorter than the run's ``min_frames`` left out:
:func:`~audiorepro.experiments.awe.frames.long_enough`; the run's weights:
:func:`~audiorepro.experiments.awe.recordings.load_run`), then scores

* the plain embeddings (the command; the baseline);
* TTA: each row also embedded at the copies the run was trained with (``run.json``'s
  ``speeds`` and ``warps``, :func:`~audiorepro.experiments.awe.recordings.with_speed_copies`'
  copies: ``segment_features(rows, speed=s)`` and ``segment_features(rows, warp=w)``, each
  copy of a speaker's files normalised by its own statistics, as in training), the
  L2-normalised embeddings of the row and its copies averaged: ``warps`` (the row and its
  warp copies), ``speeds`` (the row and its speed copies), ``both``, and a control,
  ``speeds 0.9,1.1`` (its speed copies at 0.9 and 1.1 only: as many copies as the warps); a
  copy shorter than the run's ``min_frames`` is left out of its row's average (counted);
* the seed ensembles of ``--ensembles`` (indices into the RUNs): each run's plain embeddings
  L2-normalised and concatenated, so that the cosine of two rows is the mean of the runs'
  cosines.

Each is scored as ``awe ap`` scores (same-different AP, cosine, over all pairs of the table:
:func:`~audiorepro.metrics.average_precision.same_different_ap`) and as
``bench/study_awe_within.py`` does (its :func:`within_speakers` on an ``.npz`` like
``awe embed``'s with these embeddings: the AP of each speaker's own rows, averaged over the
speakers, beside MFCC + DTW on the same rows). The extra cost is timed: for TTA the copies'
features and forward passes (one process, the threads the environment gives), for an
ensemble N trainings (``awe train``'s wall time, not timed here).

Measured on the synthetic proxy of ``book/reference/recordings.md`` ("Within one unseen
speaker"): the tables of ``python bench/study_awe_speakers.py T --corpus
<data>/embedded/embedded-seed0/words`` (five training speakers, 640 tokens; eight unseen test
speakers, 967 tokens), per seed S (``AUDIOREPRO_DATA``, ``AUDIOREPRO_RUNS`` set,
``OMP_NUM_THREADS=1``)::

    audiorepro awe train --segments T/train.tsv --out run-S --set seed=S
    audiorepro awe embed run-S --segments T/test.tsv --out test-S.npz
    python bench/study_awe_ensemble.py T/test.tsv run-0 run-1 run-2 \\
        --npz test-0.npz test-1.npz test-2.npz

Results (2-core CPU machine, shared; the three runs reproduce the Reference's "the command
now" row: within 0.960, 0.918, 0.958, pooled 0.756, 0.688, 0.782; the script's plain
embeddings equal ``awe embed``'s bit for bit). Mean ± std (ddof 1) over seeds 0, 1, 2, then
each seed; "within": the AP of each unseen speaker's own rows averaged over the 8
(MFCC + DTW 0.993 on the same pairs), "won": speakers where the embeddings beat DTW;
"pooled": all pairs of the 8 (``awe ap``; MFCC + DTW 0.406); the extra cost is one run's,
967 rows, in this process (the plain embedding: 0.87 s of features, 0.1-0.15 s forward):

| embeddings | within | won | pooled | extra cost |
|---|---|---|---|---|
| one run (``awe embed``) | 0.945 ± 0.024 (0.960, 0.918, 0.958) | 0/24 | 0.742 ± 0.048 (0.756, 0.688, 0.782) | - |
| TTA warps 0.9, 1.1 | 0.954 ± 0.019 (0.965, 0.931, 0.965) | 1/24 | 0.777 ± 0.044 (0.791, 0.727, 0.811) | +1.2 s |
| TTA speeds 0.8, 0.9, 1.1, 1.2 | 0.965 ± 0.011 (0.973, 0.951, 0.970) | 0/24 | 0.802 ± 0.039 (0.819, 0.757, 0.830) | +3.1 s |
| TTA both (6 copies) | 0.964 ± 0.013 (0.973, 0.949, 0.970) | 1/24 | 0.804 ± 0.039 (0.820, 0.759, 0.832) | +4.4 s |
| TTA speeds 0.9, 1.1 (control) | 0.964 ± 0.013 (0.974, 0.950, 0.969) | 1/24 | 0.797 ± 0.037 (0.812, 0.755, 0.825) | +1.5 s |
| ensemble of 2 seeds | 0.974 ± 0.004 (0+1 0.971, 0+2 0.979, 1+2 0.974) | 1/24 | 0.823 ± 0.016 (0.806, 0.836, 0.826) | 2 trainings |
| ensemble of 3 seeds | 0.982 (0+1+2) | 1/8 | 0.849 | 3 trainings |

Every TTA variant is higher than the run alone on every seed, within and pooled; the speed
copies give most of it (two speeds about as much as four), the warps less, both no more than
the speeds. Two seeds together are higher than one run with TTA on average (0.974 vs 0.965
within, 0.823 vs 0.802 pooled), not on every pair: seeds 0+1 (0.971, 0.806) stay below seed
0 with its speed copies (0.973, 0.819). The three together reach 0.982 within, still below
MFCC + DTW (0.993; 1 speaker of 8 won). A training took 166 to 513 s here (2 cores shared).
Ensembles with TTA were not tried.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from audiorepro.data.awe import WordSegments
from audiorepro.data.recordings import Segment, read_segments
from audiorepro.experiments.awe.frames import long_enough, segment_features
from audiorepro.experiments.awe.recordings import (
    RUN_FILE,
    load_run,
    run_feature_norm,
)
from audiorepro.experiments.awe.train import set_threads
from audiorepro.experiments.awe.views import embed_segments
from audiorepro.metrics.average_precision import same_different_ap
from audiorepro.storage import read_run_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
from study_awe_within import within_speakers  # noqa: E402 - the within-speaker score, reused

TTA = {
    "warps": ("warps",),
    "speeds": ("speeds",),
    "both": ("speeds", "warps"),
    "speeds 0.9,1.1": ("near",),
}
"""The TTA variants: which of the run's training copies each averages with the row itself
(``near``: its speed copies at 0.9 and 1.1 only, as many copies as the warps: a control)."""


def unit(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` scaled to unit L2 norm (float64)."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


class Features:
    """The frames of every row of a table at a (speed, warp), computed once per normalisation
    and shared by the runs, with the seconds each took."""

    def __init__(self, rows: Sequence[Segment]):
        self.rows = list(rows)
        self.cache: dict[tuple[float, float, str, int], tuple[list[np.ndarray], float]] = {}

    def get(
        self, speed: float, warp: float, norm: str, dim: int
    ) -> tuple[list[np.ndarray], float]:
        key = (float(speed), float(warp), norm, dim)
        if key not in self.cache:
            start = time.perf_counter()
            feats = segment_features(self.rows, dim, speed=speed, norm=norm, warp=warp)
            self.cache[key] = (feats, time.perf_counter() - start)
        return self.cache[key]


def embed_frames(
    model, config, rows: Sequence[Segment], feats: Sequence[np.ndarray]
) -> np.ndarray:
    """``awe embed``'s forward pass over ``feats`` (one per row of ``rows``)."""
    view = WordSegments(
        split="embed",
        keys=[r.where for r in rows],
        words=[r.word for r in rows],
        speakers=[r.speaker for r in rows],
        feats=list(feats),
        phones=[],
        word_phones={},
        num_phones=0,
        dropped={},
    )
    return embed_segments(model, view, config.eval_batch_size)


def score(
    emb: np.ndarray, rows: Sequence[Segment], table: Path, norm: str, folder: Path, name: str
) -> dict[str, object]:
    """Pooled AP (``awe ap``'s) and the within-speaker APs (``study_awe_within.py``'s) of
    ``emb``, one row per row of ``rows``."""
    labels = [r.word for r in rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # awe ap's weak-score notes: said in the book
        pooled = float(same_different_ap(emb, labels))
    path = folder / f"{name}.npz"
    np.savez(
        path,
        embeddings=np.asarray(emb, dtype=np.float32),
        labels=np.asarray(labels),
        speakers=np.asarray([r.speaker for r in rows]),
        rows=np.asarray([r.line for r in rows], dtype=np.int64),
        segments=np.asarray(str(table.resolve())),
        feature_norm=np.asarray(norm),
    )
    found = within_speakers(path)
    aps, dtws = [f[2] for f in found], [f[3] for f in found]
    return {
        "pooled": pooled,
        "within": float(np.mean(aps)),
        "within_speakers": {f[0]: f[2] for f in found},
        "dtw_within": float(np.mean(dtws)),
        "wins": int(sum(a > d for a, d in zip(aps, dtws, strict=True))),
        "speakers": len(found),
    }


def study_run(
    run: Path,
    table: Path,
    every: Sequence[Segment],
    features: Features,
    folder: Path,
    npz: Path | None,
    tolerance: float,
) -> tuple[dict[str, object], np.ndarray, list[Segment]]:
    """The plain embeddings of ``run`` (checked against ``npz``) and the TTA variants."""
    model, config = load_run(run)
    norm = run_feature_norm(run)
    info = read_run_info(run, RUN_FILE, "awe", "an AWE run", "awe train")
    speeds, warps = (
        [float(s) for s in info.get("speeds", [])],
        [float(w) for w in info.get("warps", [])],
    )
    set_threads(config)
    dim, min_frames = config.model.feature_dim, config.min_frames
    feats, feat_s = features.get(1.0, 1.0, norm, dim)
    kept, _ = long_enough(every, feats, min_frames)
    rows = [every[i] for i in kept]
    start = time.perf_counter()
    plain = embed_frames(model, config, rows, [feats[i] for i in kept])
    out: dict[str, object] = {
        "run": str(run),
        "seed": config.seed,
        "feature_norm": norm,
        "speeds": speeds,
        "warps": warps,
        "rows": len(rows),
        "plain_seconds": {"features": feat_s, "forward": time.perf_counter() - start},
    }
    if npz is not None:
        with np.load(npz) as archive:
            lines, emb = archive["rows"].tolist(), archive["embeddings"]
        if lines != [r.line for r in rows]:
            raise SystemExit(f"{npz}: not the rows this script embeds from {table}")
        diff = float(np.abs(emb - plain).max())
        out["check_vs_awe_embed"] = diff
        print(f"{run}: plain embeddings vs {npz}: max |difference| {diff:.2e}", flush=True)
        if not diff <= tolerance:
            raise SystemExit(f"{run}: the plain embeddings are not awe embed's ({diff:.2e})")
    copies = {
        "speeds": [(s, 1.0) for s in speeds],
        "warps": [(1.0, w) for w in warps],
        "near": [(s, 1.0) for s in speeds if s in (0.9, 1.1)],
    }
    embedded: dict[tuple[float, float], tuple[np.ndarray, np.ndarray, float, float]] = {}
    for speed, warp in copies["speeds"] + copies["warps"]:
        cfeats, cfeat_s = features.get(speed, warp, norm, dim)
        cfeats = [cfeats[i] for i in kept]
        ok = np.asarray([f.shape[0] >= max(min_frames, 1) for f in cfeats])
        start = time.perf_counter()
        cemb = np.zeros_like(plain)
        idx = np.flatnonzero(ok)
        cemb[idx] = embed_frames(model, config, [rows[i] for i in idx], [cfeats[i] for i in idx])
        embedded[speed, warp] = (cemb, ok, cfeat_s, time.perf_counter() - start)
    results = {"plain": score(plain, rows, table, norm, folder, f"{run.name}-plain")}
    results["plain"]["extra_seconds"] = 0.0
    for variant, kinds in TTA.items():
        chosen = [c for kind in kinds for c in copies[kind]]
        if not chosen:
            continue
        total, count = unit(plain), np.ones(len(rows))
        extra, short = 0.0, 0
        for c in chosen:
            cemb, ok, cfeat_s, forward_s = embedded[c]
            total[ok] += unit(cemb[ok])
            count += ok
            short += int((~ok).sum())
            extra += cfeat_s + forward_s
        mean = total / count[:, None]
        results[variant] = score(mean, rows, table, norm, folder, f"{run.name}-{variant}")
        results[variant].update(
            copies=[f"speed {s:g}" if w == 1 else f"warp {w:g}" for s, w in chosen],
            short_copies_left_out=short,
            extra_seconds=extra,
        )
    out["variants"] = results
    out["copy_seconds"] = {
        f"speed {s:g} warp {w:g}": {"features": v[2], "forward": v[3]}
        for (s, w), v in embedded.items()
    }
    return out, plain, rows


def show(name: str, r: dict[str, object]) -> str:
    return (
        f"  {name:<22} pooled {r['pooled']:.4f}  within {r['within']:.4f} "
        f"(MFCC + DTW {r['dtw_within']:.4f}, embeddings higher on {r['wins']} of "
        f"{r['speakers']})"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("segments", type=Path, help="TEST.tsv: the rows to embed and score")
    parser.add_argument("runs", nargs="+", type=Path, help="awe train run folders")
    parser.add_argument("--npz", nargs="*", type=Path, default=[], help="awe embed of each run")
    parser.add_argument(
        "--ensembles",
        nargs="*",
        default=None,
        help="comma-separated indices into RUNS (default: every pair and all of them)",
    )
    parser.add_argument("--tolerance", type=float, default=1e-4, help="the --npz check's bound")
    parser.add_argument("--json", type=Path, help="write every number here")
    args = parser.parse_args(argv)
    if args.npz and len(args.npz) != len(args.runs):
        parser.error("--npz: one .npz a run, in the order of RUNS")
    n = len(args.runs)
    if args.ensembles is None:
        sets = [(i, j) for i in range(n) for j in range(i + 1, n)] + (
            [tuple(range(n))] if n > 2 else []
        )
    else:
        sets = [tuple(int(k) for k in e.split(",")) for e in args.ensembles]
    every = read_segments(args.segments)
    features = Features(every)
    report: dict[str, object] = {"segments": str(args.segments), "runs": []}
    plains, rows_of, norm = [], None, None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for k, run in enumerate(args.runs):
            found, plain, rows = study_run(
                run, args.segments, every, features, folder,
                args.npz[k] if args.npz else None, args.tolerance,
            )  # fmt: skip
            report["runs"].append(found)
            plains.append(plain)
            if rows_of is None:
                rows_of, norm = rows, found["feature_norm"]
            elif [r.line for r in rows] != [r.line for r in rows_of] or found[
                "feature_norm"
            ] != norm:
                raise SystemExit(f"{run}: other rows or normalisation than {args.runs[0]}")
            print(f"{run} (seed {found['seed']}, {found['rows']} rows):")
            for name, r in found["variants"].items():
                extra = f"  +{r['extra_seconds']:.1f} s" if r["extra_seconds"] else ""
                if r.get("short_copies_left_out"):
                    extra += f" ({r['short_copies_left_out']} short copies left out)"
                print(show(name, r) + extra, flush=True)
            print(f"  plain embedding: {found['plain_seconds']}; copies: {found['copy_seconds']}")
        ensembles = {}
        for chosen in sets:
            emb = np.concatenate([unit(plains[k]) for k in chosen], axis=1) / np.sqrt(len(chosen))
            name = "ensemble " + "+".join(str(report["runs"][k]["seed"]) for k in chosen)
            ensembles[name] = score(
                emb, rows_of, args.segments, norm, folder, name.replace(" ", "-")
            )
            ensembles[name]["runs"] = [str(args.runs[k]) for k in chosen]
            print(show(name, ensembles[name]), flush=True)
        report["ensembles"] = ensembles
    print("mean ± std over the runs (ddof=1):")
    for variant in report["runs"][0]["variants"]:
        for what in ("pooled", "within"):
            values = [r["variants"][variant][what] for r in report["runs"]]
            sd = np.std(values, ddof=1) if len(values) > 1 else float("nan")
            shown = ", ".join(f"{v:.3f}" for v in values)
            print(f"  {variant:<7} {what:<7} {np.mean(values):.3f} ± {sd:.3f} ({shown})")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
