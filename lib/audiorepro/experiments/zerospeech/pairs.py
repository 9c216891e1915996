"""Correspondence training for recordings of several speakers: files of different speakers that
say the same thing are found by DTW (mutual nearest neighbours), aligned, and the VQ-VAE learns
to reconstruct each file's partner, in the partner's voice, from the file's own units.

The idea is the correspondence autoencoder of Kamper, Elsner, Jansen & Goldwater (2015), where
pairs from unsupervised term discovery teach a frame network what two speakers share; here the
pairs are whole files (word- or prompt-length recordings) and the network is the chapter's
VQ-VAE, whose decoder already takes the speaker, trained on the pairs beside every file's own
reconstruction. Nothing is labelled: the pairs come from the frames alone. ``audiorepro units train`` uses it on recordings of two or more speakers
(:func:`correspondence_default` in ``recordings``); the chapter's pages keep the paper's
reconstruction (``train.pairs = none``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import librosa
import numpy as np
import torch
from torch.utils.data import Dataset

from audiorepro.config import merge, replace
from audiorepro.experiments.zerospeech.config import Config
from audiorepro.metrics.dtw import frame_distances, pairwise_dtw

MAX_LENGTH_RATIO = 2.0
"""Two files are compared only when the longer is at most this many times the shorter: the
same word or prompt said by two speakers differs less than that in length."""

MAX_PAIR_CELLS = 2e10
"""Most DTW cells (frames × frames, summed over the file pairs compared) spent on finding pairs;
a folder of long recordings needs more and trains without pairs (the search is quadratic in
both the files and their lengths: whole-file pairs are for word- or prompt-length files)."""


MIN_SPEAKER_FILES = 2
"""A speaker takes part in pairs with at least this many files: its only file would be the
nearest of its speaker's files to every other file, so every comparison with it would be a
pair, whatever the two say."""


@dataclass(frozen=True)
class Pairing:
    """What :func:`find_pairs` found: the pairs ``(i, j)`` of file indices (``i`` before ``j``
    in the input order, different speakers), and why there are none when there are none."""

    pairs: tuple[tuple[int, int], ...]
    compared: int
    """File pairs whose DTW distance was computed."""
    skipped: str = ""

    def line(self) -> str:
        """One line for the command's output."""
        if self.skipped:
            return f"pairs: none, {self.skipped}: trained as the paper does"
        if not self.pairs:
            return (
                f"pairs: none, no two files of different speakers are within "
                f"{MAX_LENGTH_RATIO:g}x of each other's length: trained as the paper does"
            )
        return (
            f"pairs: {len(self.pairs)} pairs of files of different speakers, mutual DTW "
            f"nearest neighbours among {self.compared:,} compared"
        )


def find_pairs(
    frames: Sequence[np.ndarray],
    speakers: Sequence[str],
    max_ratio: float = MAX_LENGTH_RATIO,
    max_cells: float = MAX_PAIR_CELLS,
) -> Pairing:
    """Files of two different speakers that are each other's nearest neighbour by DTW.

    ``frames[i]`` (T_i, F) are file ``i``'s features as the model reads them (normalised),
    ``speakers[i]`` its speaker. For every two speakers, every file of one is compared with
    every file of the other whose length is within ``max_ratio`` of its own, by the
    path-normalised DTW of the ABX (angular frame distance); ``(i, j)`` is a pair when ``j`` is
    ``i``'s nearest file of ``j``'s speaker and ``i`` is ``j``'s nearest of ``i``'s. A file
    can pair with one file of each other speaker. A speaker with fewer than
    :data:`MIN_SPEAKER_FILES` files takes no part. Deterministic: no draw, ties to the lower
    index. With more than ``max_cells`` DTW cells to fill, no pair is sought (``skipped``).
    """
    if len(frames) != len(speakers):
        raise ValueError(f"find_pairs: {len(frames)} files but {len(speakers)} speakers")
    lengths = np.array([len(x) for x in frames], dtype=np.int64)
    names = sorted(set(speakers))
    members = {s: np.array([i for i, t in enumerate(speakers) if t == s]) for s in names}
    if len(names) < 2:
        return Pairing((), 0, "the files are one speaker's")
    # a speaker's only file is the nearest of its files to anything: no evidence of content
    names = [s for s in names if len(members[s]) >= MIN_SPEAKER_FILES]
    if len(names) < 2:
        return Pairing(
            (), 0,
            f"fewer than two speakers have {MIN_SPEAKER_FILES} files or more (a speaker's "
            "only file is its nearest to any other, whatever either says)",
        )  # fmt: skip
    blocks = []
    cells = 0.0
    for a, s in enumerate(names):
        for t in names[a + 1 :]:
            i, j = np.meshgrid(members[s], members[t], indexing="ij")
            longer = np.maximum(lengths[i], lengths[j])
            ok = longer <= max_ratio * np.minimum(lengths[i], lengths[j])
            cells += float((lengths[i] * lengths[j])[ok].sum())
            blocks.append((s, t, ok))
            if cells > max_cells:  # said before more speakers' blocks take memory
                break
        if cells > max_cells:
            break
    if cells > max_cells:
        return Pairing(
            (), 0,
            f"finding them would take over {max_cells:.0e} DTW cells "
            "(long recordings: pairs are whole files of word or prompt length)",
        )  # fmt: skip
    stacked = np.concatenate([np.asarray(x, dtype=np.float32) for x in frames])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    found: list[tuple[int, int]] = []
    compared = 0
    for s, t, ok in blocks:
        rows, cols = members[s], members[t]
        a, b = np.nonzero(ok)
        dist = np.full(ok.shape, np.inf)
        if len(a):
            dist[a, b] = pairwise_dtw(stacked, offsets, np.stack([rows[a], cols[b]], 1))
        compared += len(a)
        best_col, best_row = dist.argmin(1), dist.argmin(0)
        for r in range(len(rows)):
            c = best_col[r]
            if np.isfinite(dist[r, c]) and best_row[c] == r:
                found.append((int(min(rows[r], cols[c])), int(max(rows[r], cols[c]))))
    return Pairing(tuple(sorted(found)), compared)


def aligned_to(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``b``'s frames on ``a``'s time axis: (T_a, F), each frame of ``a`` given the mean of the
    frames of ``b`` that the DTW path (angular frame distance) matches it with."""
    cost = frame_distances(a, b, "angular")
    _, path = librosa.sequence.dtw(C=cost, backtrack=True)
    out = np.zeros((len(a), b.shape[1]), dtype=np.float64)
    count = np.zeros(len(a))
    np.add.at(out, path[:, 0], np.asarray(b, dtype=np.float64)[path[:, 1]])
    np.add.at(count, path[:, 0], 1.0)
    return (out / count[:, None]).astype(np.float32)


class PairedSegments(Dataset):
    """Every file reconstructing itself (the paper's items) and both directions of every
    pair, cut into segments of ``segment_frames`` at the same places in the input and its
    target (the file's own frames, or its partner's aligned to it): items ``(input (T, F),
    target (T, F), the target's speaker index)``, the pairs' first. Segments shorter than
    ``min_frames`` are dropped.

    The files' own items keep what the paper's objective teaches where pairs are few or some
    are wrong: on two Spanish and two French voices (``book/reference/recordings.md``, 66 and
    83 pairs, about 70 % of them the same prompt) the pairs alone made the units far worse
    than the paper's training (22.4 and 32.8 % ABX against 12.0 and 17.3 %), with the files'
    own items better (7.6 and 14.6 %)."""

    def __init__(
        self,
        frames: Sequence[np.ndarray],
        speakers: Sequence[int],
        pairs: Sequence[tuple[int, int]],
        segment_frames: int,
        min_frames: int = 8,
    ) -> None:
        self.items: list[tuple[np.ndarray, np.ndarray, int]] = []
        own = [(i, i) for i in range(len(frames))]
        for i, j in [*pairs, *own]:
            for src, dst in ((i, j), (j, i))[: 1 if i == j else 2]:
                target = frames[src] if src == dst else aligned_to(frames[src], frames[dst])
                x = frames[src]
                for start in range(0, len(x), segment_frames):
                    end = start + segment_frames
                    if len(x[start:end]) >= min_frames:
                        self.items.append((x[start:end], target[start:end], int(speakers[dst])))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray, int]:
        return self.items[index]


def collate_paired(
    batch: Sequence[tuple[np.ndarray, np.ndarray, int]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad to the longest: inputs (B, T, F), lengths (B,), target speakers (B,), targets
    (B, T, F)."""
    lengths = torch.tensor([len(x) for x, _, _ in batch])
    shape = (len(batch), int(lengths.max()), batch[0][0].shape[1])
    inputs, targets = torch.zeros(shape), torch.zeros(shape)
    for k, (x, target, _) in enumerate(batch):
        inputs[k, : len(x)] = torch.from_numpy(np.asarray(x))
        targets[k, : len(x)] = torch.from_numpy(np.asarray(target))
    return inputs, lengths, torch.tensor([s for _, _, s in batch]), targets


PAIRED_STEPS = 2
"""With pairs, ``units train`` trains for this many times the preset's ``train.max_steps``
unless the user set it: reconstructing another voice is learned more slowly than one's own
(``book/reference/recordings.md``: on the Italian prompts, the pairs alone, 3.58 % ABX at 1,200
steps and 0.88 % at 2,400, seed 0; on two Spanish voices, beside the files' own, 8.35 and
7.55 %)."""


def pairs_default(
    config: Config, overrides: Mapping[str, Any] | None, speakers: int
) -> tuple[Config, str]:
    """``(config, why)``: ``config`` with the ``train.pairs`` that ``units train`` uses, and
    one line saying which and why: ``nearest`` for files of two or more ``speakers`` unless the
    user set ``train.pairs``; else the preset's. Trained on pairs, the run's
    ``train.max_steps`` is :data:`PAIRED_STEPS` times the preset's unless the user set it (and
    its ``train.num_epochs`` too, when :func:`step_budget` lifted it to the steps).

    Measured on real speech (``book/reference/recordings.md``: the Italian prompts of two
    speakers, per-speaker normalisation, held-out number words, word ABX across speakers,
    seeds 0-2): the units went from 6.51 ± 0.60 % to 1.17 ± 0.30 %, against 2.19 ± 0.16 % for
    the k-means units of the same frames and 2.00 % for the frames; on two French and two
    Spanish voices (seed 0) from 17.25 to 14.56 % (k-means 14.95 %) and from 12.05 to 7.55 %
    (k-means 5.51 %)."""
    given = merge({}, {k: v for k, v in (overrides or {}).items() if v is not None})
    train = given.get("train") if isinstance(given.get("train"), Mapping) else {}
    if "pairs" in train:
        return config, f"training pairs: {config.train.pairs} (--set train.pairs)"
    if speakers < 2:
        return config, (
            f"training pairs: {config.train.pairs}, the preset's: one speaker, no pairs of "
            "speakers to learn what they share"
        )
    steps, budget = config.train.max_steps, ""
    if steps is not None and "max_steps" not in train:
        more = {"train.max_steps": PAIRED_STEPS * steps}
        if config.train.num_epochs == steps:  # lifted to the steps by step_budget
            more["train.num_epochs"] = PAIRED_STEPS * steps
        config = replace(config, **more)
        budget = f", for {PAIRED_STEPS * steps} steps ({PAIRED_STEPS} x the preset's)"
    return replace(config, **{"train.pairs": "nearest"}), (
        f"training pairs: nearest, for recordings of {speakers} speakers{budget}: beside "
        "each file's own reconstruction, files of different speakers that are each other's "
        "nearest by DTW reconstruct each other, in the other's voice (--set train.pairs=none "
        "for the paper's reconstruction alone)"
    )
