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

from audiorepro.data.recordings import scan_folder, speakers_of
from audiorepro.data.speech_segments import feature_of, load_wav_features, normalize_features
from audiorepro.experiments.zerospeech.config import load_config, store
from audiorepro.experiments.zerospeech.data import MIN_TRAIN_FRAMES, training_files
from audiorepro.experiments.zerospeech.evaluate import encode_files
from audiorepro.experiments.zerospeech.pairs import (
    PairedSegments,
    aligned_to,
    collate_paired,
    find_pairs,
)
from audiorepro.experiments.zerospeech.train import _vqvae_step, fit_one_thread
from audiorepro.metrics.abx import abx_error
from audiorepro.metrics.dtw import frame_distances
from audiorepro.models.vqvae import VQVAE, input_statistics
from audiorepro.repro import seed_everything


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
    overrides = {"model.feature_norm": "speaker", "train.pairs": "nearest", "seed": args.seed}
    steps = {"train.max_steps": 2400, "train.num_epochs": 2400}  # as `units train`
    config = load_config("embedded", {**overrides, **steps})
    feature = feature_of(config.model.input_dim)
    wavs, _ = training_files(scan_folder(args.train).files)
    feats = load_wav_features(wavs, feature, store())
    speakers = speakers_of(wavs, "parent", args.train)
    names = [n for n in sorted(feats) if len(feats[n]) >= MIN_TRAIN_FRAMES]
    voices = [speakers[n] for n in names]
    clean = normalize_features([feats[n] for n in names], "speaker", voices)
    found = find_pairs(clean, voices)
    print(found.line(), flush=True)
    order = sorted(set(voices))
    index = [order.index(v) for v in voices]
    dataset = PairedSegments(clean, index, found.pairs, config.train.segment_frames)
    if args.per_file > 0:
        whole = set(found.pairs)
        candidates = []
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                if voices[i] != voices[j] and (i, j) not in whole:
                    cost, si, sj = closest_stretch(clean[i], clean[j], args.frames)
                    candidates.append((cost, i, j, si, sj))
        candidates.sort()
        kept = candidates[: round(args.per_file * len(names))]
        print(
            f"{len(kept)} stretch pairs of {args.frames} frames kept of {len(candidates):,}, "
            f"mean distance {kept[0][0]:.3f} to {kept[-1][0]:.3f} "
            f"(median of all: {candidates[len(candidates) // 2][0]:.3f})",
            flush=True,
        )
        for _, i, j, si, sj in kept:
            a, b = clean[i][si : si + args.frames], clean[j][sj : sj + args.frames]
            dataset.items.append((a, aligned_to(a, b), index[j]))
            dataset.items.append((b, aligned_to(b, a), index[i]))
    seed_everything(args.seed)
    model = VQVAE(config.model, n_speakers=len(order))
    model.set_normalization(*input_statistics(np.concatenate(clean), config.model.input_scale))
    trainer, _ = fit_one_thread(
        model, _vqvae_step, dataset, config.train.loop(args.seed), collate_paired, None, (),
        "none",
    )  # fmt: skip
    model = trainer.unwrapped_model.cpu().eval()
    test_wavs, _ = training_files(scan_folder(args.test).files)
    test = load_wav_features(test_wavs, feature, store())
    _, units = encode_files(model, test, speakers=speakers_of(test_wavs, "parent", args.test))
    print(f"units (codebook vectors): {abx_error(units, args.items, mode='across'):.2f} %")


if __name__ == "__main__":
    main()
