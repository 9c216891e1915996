"""The ZeroSpeech 2019 bitrate of a discrete representation: B = N·H / D.

As in ``zerospeech2020/evaluation/bitrate.py`` (``shared/reference/zerospeech.md`` §2.1): every
frame (line) of every file is one symbol occurrence; the symbols are the *distinct frames*, so a
one-hot vector, an integer id and a codebook vector of the same unit are the same symbol. ``N``
is the number of frames, ``H = −Σ p_s log2 p_s`` the entropy of the pooled symbol distribution in
bits and ``D`` the total duration in seconds (the sum of the wav durations of the listed files).
Continuous features make (almost) every frame distinct, so ``H`` is near ``log2 N`` and ``B``
counts frames: from :data:`CONTINUOUS_FRAMES` frames on, with :data:`CONTINUOUS_SHARE` of them
symbols that occur once, that is refused (a :class:`~audiorepro.metrics.checks.ScoreError`);
half of the frames such symbols, or one symbol only (collapsed units, 0 b/s), is scored with a
warning. The files are read by
:func:`audiorepro.data.recipes.zerospeech.read_embedding_file` (every non-blank line a frame).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from audiorepro.data.recipes.zerospeech import (
    ZeroSpeechFormatError,
    read_bitrate_filelist,
    read_embedding_file,
)
from audiorepro.metrics.checks import ScoreError, naming, weak

__all__ = [
    "bitrate",
    "bitrate_from_submission",
    "bitrate_of_files",
    "entropy_bits",
    "read_embedding_file",
]


CONTINUOUS_FRAMES = 64
"""From this many frames on, a :data:`CONTINUOUS_SHARE` of frames whose symbol occurs only once
marks continuous features, not units (K-means and VQ codebooks reuse their codes: real units
of a ZeroSpeech test set have a few percent of such frames, MFCC frames over 95%)."""

CONTINUOUS_SHARE = 0.9


def entropy_bits(symbols: np.ndarray) -> float:
    """Entropy in bits of the distribution of the distinct rows of ``symbols`` (N, D)."""
    if len(symbols) == 0:
        return 0.0
    _, counts = np.unique(symbols, axis=0, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def _frames(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"{name}: expected (frames, dim) or 1-D symbol ids, got shape {x.shape}")
    x = x.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: contains NaN or inf")
    return x + 0.0  # -0.0 and 0.0 are the same number on a line, and so the same symbol


def bitrate(sequences: Sequence[np.ndarray], total_duration_s: float) -> float:
    """Bitrate in bits per second, B = N·H/D.

    Args:
        sequences: one array per file: (frames, dim) vectors (one-hot, codebook vectors, any
            features) or 1-D symbol ids. All files must have the same dimension.
        total_duration_s: D, the total duration of the files in seconds (> 0).

    Returns:
        ``N * H / D``.

    Raises:
        ValueError: a duration <= 0, NaN/inf, dimensions that differ;
            :class:`~audiorepro.metrics.checks.ScoreError` when there is no frame, or for
            continuous features (module docstring). Warns when half of the frames are symbols
            that occur once, or all frames are one symbol.
    """
    if not total_duration_s > 0:
        raise ValueError(f"total_duration_s must be > 0, got {total_duration_s!r}")
    arrays = [_frames(x, f"sequence {k}") for k, x in enumerate(sequences)]
    n_sequences = len(arrays)
    arrays = [x for x in arrays if len(x)]
    if not arrays:
        raise ScoreError(
            f"no frame in the {n_sequences} sequence(s): there is nothing to measure the "
            "bitrate of"
        )
    dims = {x.shape[1] for x in arrays}
    if len(dims) > 1:
        first = next(k for k, x in enumerate(arrays) if x.shape[1] != arrays[0].shape[1])
        raise ValueError(
            f"sequence {first} has dimension {arrays[first].shape[1]}, "
            f"the first has {arrays[0].shape[1]}: all files must have the same dimension"
        )
    stacked = np.concatenate(arrays)
    _check_symbols(stacked)
    return len(stacked) * entropy_bits(stacked) / total_duration_s


def _check_symbols(frames: np.ndarray) -> None:
    """Refuse continuous features, warn on too few frames to tell and on one symbol only."""
    n = len(frames)
    _, counts = np.unique(frames, axis=0, return_counts=True)
    once = int((counts == 1).sum())
    if n >= CONTINUOUS_FRAMES and once >= CONTINUOUS_SHARE * n:
        raise ScoreError(
            f"{once} of the {n} frames are symbols that occur only once: continuous features "
            "(input frames, not units), whose bitrate, near N log2 N / D, counts frames and "
            "measures nothing; give discrete units (units encode --what vectors, codes or "
            "kmeans)"
        )
    if n > 1 and once >= n / 2:
        weak(
            f"{once} of the {n} frames are symbols that occur only once: continuous features, "
            "or too few frames for the entropy of the units"
        )
    elif len(counts) == 1 and n > 1:
        weak(f"all {n} frames are one symbol (collapsed units): the bitrate is 0")


def bitrate_from_submission(
    folder: str | os.PathLike[str], filelist: str | os.PathLike[str]
) -> float:
    """Bitrate of a submission folder over a bitrate file list (``<name>.txt <duration>``).

    As the official evaluation: the files of the list that are missing from ``folder`` are
    skipped for both N and D; D is the sum of the durations of the files that are present. A
    file whose vector dimension differs from the others raises :class:`ZeroSpeechFormatError`.
    """
    return bitrate_of_files(folder, read_bitrate_filelist(filelist), f"listed in {filelist}")


def bitrate_of_files(
    folder: str | os.PathLike[str],
    entries: Sequence[tuple[str, float]],
    source: str = "given",
) -> float:
    """:func:`bitrate_from_submission` over ``(file name under folder, seconds)`` entries
    (``source`` says where they come from, for the error when none of the files exists)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ZeroSpeechFormatError(folder, None, "not a directory")
    arrays, duration, first = [], 0.0, None
    for name, seconds in entries:
        path = folder / name
        if not path.is_file():
            continue
        x = read_embedding_file(path)
        if not len(x) and seconds > 0:
            raise ZeroSpeechFormatError(
                path,
                None,
                f"empty: no unit for {seconds:g} s of audio; its N would count 0 symbols and "
                "lower the bitrate (write its units again, e.g. `audiorepro units encode`)",
            )
        if len(x):
            if first is None:
                first = (x.shape[1], name)
            elif x.shape[1] != first[0]:
                raise ZeroSpeechFormatError(
                    path,
                    None,
                    f"vector dimension {x.shape[1]} does not match {first[1]} ({first[0]})",
                )
        arrays.append(x)
        duration += seconds
    if duration == 0.0:
        raise ZeroSpeechFormatError(folder, None, f"none of the files {source} exist")
    with naming(folder):  # the units' problems name their folder
        return bitrate(arrays, duration)
