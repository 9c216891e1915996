"""The MFCC frames of a segments table's rows, as the ``audiorepro awe`` commands read them:
cut from each file, speed-perturbed for training copies, and normalised per file or per
speaker (:func:`feature_norm_of` chooses)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import librosa
import numpy as np

from audiorepro.data.awe import WordSegments
from audiorepro.data.recordings import Segment
from audiorepro.data.speech_segments import (
    SPEAKER_NORM_SECONDS,
    normalize_features,
    short_speakers,
)
from audiorepro.experiments.awe.config import SAMPLE_RATE
from audiorepro.features import audio_info, load_audio, resample_type
from audiorepro.features.speech import add_deltas, apply_cmvn, mfcc

FEATURE_NORMS = ("speaker", "file")
"""How :func:`segment_features` normalises: ``speaker`` (all 39 dimensions, MFCCs, Δ and ΔΔ,
to zero mean and unit variance over every frame of the files of a speaker's rows) or ``file``
(the 13 MFCCs over each file's own frames before their Δ and ΔΔ, as the chapter's word corpus
does)."""


def segment_features(
    rows: Sequence[Segment],
    feature_dim: int = 39,
    speed: float = 1.0,
    norm: str = "file",
    warp: float = 1.0,
) -> list[np.ndarray]:
    """MFCC + Δ + ΔΔ frames (T, feature_dim) float32 of each row (16 kHz, 10 ms frames), cut
    to ``[start, end)``: 13 MFCCs and their Δ and ΔΔ, normalised per ``norm``
    (:data:`FEATURE_NORMS`: over each file, or over all the files of the rows of a speaker,
    each file once). A row of a few ms may hold no frame (T = 0): :func:`long_enough` leaves
    it out with the other short rows.

    ``speed`` != 1 perturbs the speed first, as Kaldi's speed perturbation does (``sox speed``):
    the file is played ``speed`` times faster, tempo and pitch together (resampled to
    ``16 kHz / speed`` and read as 16 kHz), and its times scale by ``1 / speed``; with
    ``norm="speaker"`` the perturbed files are normalised by their own statistics, as a new
    speaker's would be. ``warp`` != 1 perturbs the vocal tract length instead: the spectrum's
    frequency axis warped by that factor before the mel filters
    (:func:`~audiorepro.features.speech.vtlp_frequencies`), the times as they are."""
    if not speed > 0:
        raise ValueError(f"speed must be positive, got {speed}")
    if norm not in FEATURE_NORMS:
        raise ValueError(f"norm must be one of {FEATURE_NORMS}, got {norm!r}")
    static: dict[Path, np.ndarray] = {}
    for r in rows:
        if r.path not in static:
            wav, _ = load_audio(r.path, SAMPLE_RATE)
            if speed != 1.0:
                wav = librosa.resample(
                    wav,
                    orig_sr=SAMPLE_RATE,
                    target_sr=round(SAMPLE_RATE / speed),
                    res_type=resample_type(),
                )
            frames = mfcc(wav, SAMPLE_RATE, n_mfcc=13, deltas=False, cmvn=False, warp=warp)
            static[r.path] = frames[:, 1:] if feature_dim == 36 else frames
    keys = list(dict.fromkeys((r.speaker, r.path) for r in rows))  # each file once a speaker
    if norm == "file":  # exactly mfcc_features(..., cmvn=True)
        feats = {k: add_deltas(apply_cmvn(static[k[1]])) for k in keys}
    else:  # Δ and ΔΔ are linear in the MFCCs: standardising all 39 per speaker is enough
        done = normalize_features(
            [add_deltas(static[p]) for _, p in keys], "speaker", [s for s, _ in keys]
        )
        feats = dict(zip(keys, done, strict=True))
    out = []
    for r in rows:
        frames = feats[r.speaker, r.path]
        if r.start is not None:
            frames = frames[int(round(r.start * 100 / speed)) : int(round(r.end * 100 / speed))]
        out.append(np.ascontiguousarray(frames, dtype=np.float32))
    return out


def speed_copies(
    rows: Sequence[Segment],
    speeds: Sequence[float],
    feature_dim: int,
    norm: str,
    min_frames: int,
) -> list[list[np.ndarray | None]]:
    """The frames of every row at each of ``speeds`` (:func:`segment_features`: each speed's
    copy of the rows normalised by its own statistics, as training's copies are), one list per
    speed, ``None`` where a copy is shorter than ``min_frames`` (at least 1): what ``awe embed``
    averages each row's embedding over
    (:func:`~audiorepro.experiments.awe.views.embed_with_copies`)."""
    least = max(min_frames, 1)
    return [
        [f if f.shape[0] >= least else None for f in segment_features(rows, feature_dim, s, norm)]
        for s in speeds
    ]


def long_enough(
    rows: Sequence[Segment], feats: Sequence[np.ndarray], min_frames: int
) -> tuple[list[int], str]:
    """``(kept, note)``: the indices of the ``rows`` whose frames ``feats``
    (:func:`segment_features`) number at least ``min_frames``
    (:data:`~audiorepro.experiments.awe.config.MIN_FRAMES` unless a run was trained with
    another), and one line saying how many rows are left out and naming the first (``""``
    when none is). The one rule by which ``awe train`` leaves short rows out of training and
    ``awe embed`` and ``awe dtw`` leave them out of what they embed and score, so that
    ``awe ap`` compares the embeddings and MFCC + DTW on the same rows."""
    min_frames = max(min_frames, 1)  # a row of no frame (a few ms) is never embedded
    kept = [i for i, f in enumerate(feats) if f.shape[0] >= min_frames]
    if len(kept) == len(rows):
        return kept, ""
    return kept, (
        f"left out {len(rows) - len(kept)} of {len(rows)} rows shorter than {min_frames} "
        f"frames of 10 ms, as awe train does (first: {first_short(rows, feats, min_frames)})"
    )


def first_short(rows: Sequence[Segment], feats: Sequence[np.ndarray], min_frames: int) -> str:
    """``"SEG.tsv:82, 1 frame"``: where the first row shorter than ``min_frames`` frames is and
    how many it has (``""`` when none is), for :func:`long_enough`'s line and ``awe train``'s."""
    first = next((i for i, f in enumerate(feats) if f.shape[0] < max(min_frames, 1)), None)
    if first is None:
        return ""
    frames = feats[first].shape[0]
    return f"{rows[first].where}, {frames} frame{'' if frames == 1 else 's'}"


def audio_seconds(path: Path) -> float:
    """The duration of an audio file from its header."""
    samples, rate, _ = audio_info(path)
    return samples / rate


def feature_norm_of(rows: Sequence[Segment], given: str | None = None) -> tuple[str, str]:
    """``(norm, why)``: how ``awe train`` normalises the features (:func:`segment_features`) of
    a table, and one line saying why. Per speaker when every speaker of ``rows`` has
    :data:`SPEAKER_NORM_SECONDS` of audio in the files of their rows, else per file; ``given``
    (``--norm``) decides instead.

    Measured on the book's real Italian number words (two speakers, split by word,
    ``book/04_awe/04_real_speech``, preset ``embedded``, seeds 0-2): on the 79 training words,
    per-speaker normalisation raised the MFCC + DTW AP from 0.053 to 0.067 (a one-word file
    normalised by its own frames loses the word's mean spectrum, and Δ and ΔΔ weigh as much as
    the MFCCs); on the 40 unseen test words the embeddings' AP went from 0.079 ± 0.030 to
    0.158 ± 0.049 and MFCC + DTW's from 0.089 to 0.129."""
    if given is not None:
        if given not in FEATURE_NORMS:
            raise ValueError(f"norm must be one of {FEATURE_NORMS}, got {given!r}")
        return given, f"feature normalisation: per {given} (--norm)"
    seconds: dict[str, float] = {}
    seen: set[tuple[str, Path]] = set()
    for r in rows:
        if (r.speaker, r.path) not in seen:
            seen.add((r.speaker, r.path))
            seconds[r.speaker] = seconds.get(r.speaker, 0.0) + audio_seconds(r.path)
    short = short_speakers(seconds)
    if short:
        return "file", (
            f"feature normalisation: per file: {len(short)} of {len(seconds)} speakers have "
            f"less than {SPEAKER_NORM_SECONDS:g} s of audio to normalise by (first: "
            f"{short[0]}, {seconds[short[0]]:.2f} s)"
        )
    return "speaker", (
        f"feature normalisation: per speaker ({len(seconds)} speakers, at least "
        f"{min(seconds.values()):.0f} s each): the MFCCs, Δ and ΔΔ to zero mean and unit "
        "variance over the speaker's files, for the model and MFCC + DTW alike (--norm "
        "file: per file)"
    )


def with_speed_copies(
    data: WordSegments,
    rows: Sequence[Segment],
    speeds: Sequence[float],
    feature_dim: int,
    norm: str = "file",
    warps: Sequence[float] = (),
) -> WordSegments:
    """``data`` (the rows of ``rows`` it kept) and a copy of each at every speed of ``speeds``
    and at every vocal-tract warp of ``warps`` (:func:`segment_features`), same words, phones
    and speakers; a copy shorter than the shortest row kept is left out too."""
    by_key = {r.where: r for r in rows}
    kept = [by_key[k] for k in data.keys]
    shortest = min(f.shape[0] for f in data.feats)
    keys, words, speakers, feats, phones = (
        list(data.keys), list(data.words), list(data.speakers), list(data.feats),
        list(data.phones),
    )  # fmt: skip
    copies = [(s, 1.0, f"@{s:g}") for s in speeds] + [(1.0, w, f"~{w:g}") for w in warps]
    for speed, warp, mark in copies:
        for i, f in enumerate(segment_features(kept, feature_dim, speed, norm, warp)):
            if f.shape[0] >= shortest:
                keys.append(f"{data.keys[i]}{mark}")
                words.append(data.words[i])
                speakers.append(data.speakers[i])
                feats.append(f)
                phones.append(data.phones[i])
    return dataclasses.replace(
        data, keys=keys, words=words, speakers=speakers, feats=feats, phones=phones
    )
