"""What a model's units are worth: encoding files into units, their ABX error and bitrate, how
often they change, and the k-means baseline of the same K and code rate beside them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audiorepro.data.recipes.zerospeech import read_bitrate_filelist
from audiorepro.data.speech_segments import (
    HOP_S,
    average_frames,
    collate_segments,
    feature_of,
    normalize_features,
)
from audiorepro.experiments.zerospeech.config import Config
from audiorepro.experiments.zerospeech.data import (
    language_dir,
    load_data,
    load_features,
    model_inputs,
)
from audiorepro.metrics.abx import abx_modes
from audiorepro.metrics.bitrate import bitrate
from audiorepro.models.kmeans import KMeans, kmeans
from audiorepro.models.vqvae import VQVAE, VQVAEConfig
from audiorepro.repro import single_thread

WINDOW_FRAMES = 3000
"""The longest stretch of input frames (10 ms: 30 s) that the Transformer encoder attends over
at once. Its memory grows with the square of the frames (a 150 s file alone took 4 GB), so a
longer file is encoded in windows (:func:`window_spans`); a file up to this long is encoded
whole, as before. The model trains on crops of ``train.segment_frames``, far shorter."""

WINDOW_CONTEXT = 200
"""Frames (2 s) each window reads beyond the part of it that is kept, on both sides where the
file goes on: the units near a window's edge still see what is around them."""


def window_spans(
    length: int, size: int, context: int, align: int = 1
) -> list[tuple[int, int, int, int]]:
    """``[(start, end, keep_start, keep_end)]``: windows ``[start, end)`` of at most ``size``
    frames over ``[0, length)`` whose kept parts ``[keep_start, keep_end)`` tile it in order,
    each window reaching up to ``context`` frames beyond its kept part on both sides. One
    window, the whole, when ``length <= size``. ``size`` and ``context`` multiples of
    ``align`` (a strided encoder's stride, so that every window starts on a code frame)."""
    if size % align or context % align or size - 2 * context < align:
        raise ValueError(
            f"window_spans: size {size} and context {context} must be multiples of {align}, "
            f"with size - 2 * context >= {align}"
        )
    if length <= size:
        return [(0, length, 0, length)]
    core = size - 2 * context
    return [
        (max(0, a - context), min(length, a + core + context), a, min(length, a + core))
        for a in range(0, length, core)
    ]


@torch.no_grad()
def encode_windows(
    model: VQVAE, frames: np.ndarray, size: int | None = None, context: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One file's units, ``(codes (T',) int64, codebook vectors (T', D_e))``, its frames (T, F)
    already normalised as :func:`model_inputs` does: whole when ``T <= size``
    (:data:`WINDOW_FRAMES`), else window by window (:func:`window_spans`, :data:`WINDOW_CONTEXT`),
    the code frames of each window's kept part joined. T' = ceil(T / stride) either way."""
    size = WINDOW_FRAMES if size is None else size
    context = WINDOW_CONTEXT if context is None else context
    stride = model.cfg.stride
    codes, vectors = [], []
    for start, end, keep, stop in window_spans(len(frames), size, context, stride):
        x = torch.from_numpy(np.asarray(frames[start:end], dtype=np.float32))[None]
        c, e, n = model.encode(x, torch.tensor([end - start]))
        lo, hi = (keep - start) // stride, min(int(n[0]), -(-(stop - start) // stride))
        codes.append(c[0, lo:hi].numpy().astype(np.int64))
        vectors.append(e[0, lo:hi].numpy().astype(np.float32))
    return np.concatenate(codes), np.concatenate(vectors)


ATTENTION_BUDGET = 2**28
"""Attention scores (batch × heads × frames², float32: 1 GiB) that one batch of
:func:`encode_files` may hold: the Transformer encoder attends over whole files, so 64 files of
up to 73 s (the longest Asterisk prompt) would need 27 GB at once."""


def length_batches(
    lengths: Sequence[int], batch_size: int, heads: int, budget: int = ATTENTION_BUDGET
) -> list[list[int]]:
    """Indices of ``lengths`` (frames) in order of length, cut into batches of at most
    ``batch_size`` whose attention scores (``len(batch) × heads × longest²``) stay within
    ``budget``; a file over the budget alone is a batch of one."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches:
            last = batches[-1]
            if len(last) < batch_size and (len(last) + 1) * heads * lengths[i] ** 2 <= budget:
                last.append(i)
                continue
        batches.append([i])
    return batches


@torch.no_grad()
def encode_files(
    model: VQVAE,
    feats: Mapping[str, np.ndarray],
    batch_size: int = 64,
    speakers: Mapping[str, str] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Units of every file: ``({id: codes (T',) int64}, {id: codebook vectors (T', D_e)})``.

    The features are first normalised as the model was trained (``model.cfg.feature_norm``,
    :func:`model_inputs`; per speaker: over the files given here, by ``speakers`` or the name
    prefix). Files go in batches of similar length, at most ``batch_size`` and
    :data:`ATTENTION_BUDGET` (:func:`length_batches`); a file longer than
    :data:`WINDOW_FRAMES` is encoded alone, window by window (:func:`encode_windows`)."""
    model.eval()
    feats = model_inputs(feats, model.cfg.feature_norm, speakers)
    codes, vectors = {}, {}
    with single_thread():
        for name in [n for n in feats if len(feats[n]) > WINDOW_FRAMES]:  # window by window
            codes[name], vectors[name] = encode_windows(model, feats[name])
    names = [n for n in feats if n not in codes]  # length_batches orders them by length
    heads = model.cfg.n_heads if model.cfg.encoder == "transformer" else 1
    batches = length_batches([len(feats[n]) for n in names], batch_size, heads, ATTENTION_BUDGET)
    with single_thread():
        for batch in batches:
            chunk = [names[i] for i in batch]
            x, lengths, _ = collate_segments([(feats[n], 0) for n in chunk])
            c, e, code_lengths = model.encode(x, lengths)
            for i, name in enumerate(chunk):
                n = int(code_lengths[i])
                codes[name] = c[i, :n].numpy().astype(np.int64)
                vectors[name] = e[i, :n].numpy().astype(np.float32)
    return codes, vectors


def code_runs(codes: Mapping[str, np.ndarray]) -> dict[str, float]:
    """How often the units change, over files ``{id: codes (T',)}``: ``runs`` (maximal runs of
    one repeated code, counted within each file), ``frames`` (code frames), ``mean_run``
    (frames per run), ``single_share`` (the share of runs one frame long) and ``empty_files``
    (files without a code frame, counted, not scored). Temporal
    smoothing and jitter are meant to lengthen the runs (paper §3.3-3.4)."""
    runs = frames = single = empty = 0
    for name, seq in codes.items():
        seq = np.asarray(seq)
        if seq.ndim != 1:
            raise ValueError(f"{name}: codes must be one sequence (T',), got shape {seq.shape}")
        if len(seq) == 0:
            empty += 1
            continue
        bounds = np.flatnonzero(seq[1:] != seq[:-1]) + 1  # where a new run starts
        lengths = np.diff(np.concatenate(([0], bounds, [len(seq)])))
        runs += len(lengths)
        frames += len(seq)
        single += int((lengths == 1).sum())
    if runs == 0:
        raise ValueError("no code frames: every sequence is empty")
    return {
        "runs": float(runs),
        "frames": float(frames),
        "mean_run": frames / runs,
        "single_share": single / runs,
        "empty_files": float(empty),
    }


def code_segments(codes: np.ndarray, frame_shift: float) -> list[tuple[str, float, float]]:
    """Runs of one code as ``(code, start_s, end_s)`` intervals (for a spectrogram tier)."""
    segments, start = [], 0
    for t in range(1, len(codes) + 1):
        if t == len(codes) or codes[t] != codes[start]:
            segments.append((str(codes[start]), start * frame_shift, t * frame_shift))
            start = t
    return segments


def evaluate(
    model: VQVAE,
    lang_dir: Path,
    test_feats: Mapping[str, np.ndarray],
    item_file: str = "abx/byCtxt_acSpkr.item",
    within: bool = False,
    code_stats: dict[str, float] | None = None,
) -> dict[str, float]:
    """ABX across (%) on the codebook vectors and bitrate (b/s) of a model's test units.

    ABX: the whole-file items of ``item_file``, frames selected with libri-light's rule at the
    code frame shift (``stride`` × 10 ms). Bitrate: the files of ``bitrate_filelist.txt`` and
    their wav durations. Also the codebook usage over the test set (codes used, perplexity).
    A ``code_stats`` dict receives :func:`code_runs` of the same units.
    """
    codes, vectors = encode_files(model, test_feats)
    if code_stats is not None:
        code_stats.update(code_runs(codes))
    shift = model.cfg.stride * HOP_S
    return score_units(codes, vectors, lang_dir, shift, item_file, within)


def score_units(
    codes: Mapping[str, np.ndarray],
    vectors: Mapping[str, np.ndarray],
    lang_dir: Path,
    frame_shift: float,
    item_file: str = "abx/byCtxt_acSpkr.item",
    within: bool = False,
) -> dict[str, float]:
    """ABX across (%) of the unit ``vectors`` ``{file: (T', D)}`` (angular, frames
    ``frame_shift`` s apart), bitrate (b/s) of the ``codes`` ``{file: (T',)}`` over the files of
    ``bitrate_filelist.txt``, and the codes used and perplexity over all files: the metrics of
    :func:`evaluate`, for any units (the VQ-VAE's, k-means')."""
    modes = ["across", "within"] if within else ["across"]
    # one parse of the item file, each DTW distance once for both modes
    scored = abx_modes(vectors, Path(lang_dir) / item_file, "angular", modes, frame_shift)
    result = scored["across"]
    entries = read_bitrate_filelist(Path(lang_dir) / "bitrate_filelist.txt")
    names = [n[: -len(".txt")] for n, _ in entries]
    rate = bitrate([codes[n] for n in names], sum(d for _, d in entries))
    pooled = np.concatenate(list(codes.values()))
    p = np.bincount(pooled) / len(pooled)
    p = p[p > 0]
    metrics = {
        "abx_across": result.error,
        "bitrate": rate,
        "codes_used": float(len(p)),
        "perplexity": float(2 ** -(p * np.log2(p)).sum()),
        "n_triplets": float(result.n_triplets),
    }
    if within:
        metrics["abx_within"] = scored["within"].error
    return metrics


def kmeans_units(
    train_feats: Sequence[np.ndarray],
    test_feats: Mapping[str, np.ndarray],
    k: int,
    stride: int,
    seed: int,
    iterations: int = 30,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], KMeans]:
    """The k-means baseline of a VQ-VAE with ``K = k`` at ``stride``: the frames of every
    utterance averaged to the code rate (:func:`~audiorepro.data.speech_segments.
    average_frames`), ``k`` centroids fitted on the training ones (seeded,
    :func:`~audiorepro.models.kmeans.kmeans`), each test frame replaced by its nearest.

    ``train_feats`` [(T, F)], ``test_feats`` {file: (T, F)}, already normalised as the VQ-VAE's
    input. Returns ``({file: codes (T',)}, {file: centroids (T', F)}, the fitted KMeans)``.
    """
    fitted = fit_code_rate_kmeans(train_feats, k, stride, seed, iterations)
    codes, vectors = {}, {}
    for name, x in test_feats.items():
        codes[name], vectors[name] = code_rate_kmeans(fitted, x, stride)
    return codes, vectors, fitted


def fit_code_rate_kmeans(
    train_feats: Sequence[np.ndarray], k: int, stride: int, seed: int, iterations: int = 30
) -> KMeans:
    """``k`` centroids (seeded) of the utterances ``train_feats`` [(T, F)] averaged to the code
    rate of a VQ-VAE that downsamples by ``stride``: the k-means baseline's fit."""
    pooled = np.concatenate([average_frames(x, stride) for x in train_feats])
    return kmeans(pooled, k, seed=seed, iterations=iterations)


def code_rate_kmeans(
    fitted: KMeans, feats: np.ndarray, stride: int
) -> tuple[np.ndarray, np.ndarray]:
    """One utterance (T, F) as k-means units: its frames averaged to the code rate, each
    replaced by its nearest centroid. Returns ``(codes (T',), centroids (T', F))``."""
    codes = fitted.assign(average_frames(feats, stride))
    return codes, fitted.centroids[codes]


def kmeans_baseline(
    config: Config, model_cfg: VQVAEConfig, seed: int, language: str = "english"
) -> dict[str, float]:
    """:func:`score_units` of the k-means units with the VQ-VAE ``model_cfg``'s K, stride, input
    feature and normalisation, fitted on the training speech of ``language`` (seeded): the
    baseline each VQ-VAE row is set beside."""
    key = (
        config,
        model_cfg.input_dim,
        model_cfg.feature_norm,
        model_cfg.codebook_size,
        model_cfg.stride,
        seed,
        language,
    )
    if key not in _KMEANS_SCORES:  # rows sharing K, input and stride share one baseline
        _KMEANS_SCORES[key] = _kmeans_baseline(config, model_cfg, seed, language)
    return dict(_KMEANS_SCORES[key])


_KMEANS_SCORES: dict[tuple[Any, ...], dict[str, float]] = {}


def _kmeans_baseline(
    config: Config, model_cfg: VQVAEConfig, seed: int, language: str
) -> dict[str, float]:
    feature = feature_of(model_cfg.input_dim)
    data = load_data(config, language, feature)
    lang_dir = language_dir(config, language)
    train = normalize_features(data.feats, model_cfg.feature_norm, data.speakers)
    test = model_inputs(load_features(lang_dir, "test", feature), model_cfg.feature_norm)
    with single_thread():
        codes, vectors, _ = kmeans_units(
            train, test, model_cfg.codebook_size, model_cfg.stride, seed
        )
    return score_units(codes, vectors, lang_dir, model_cfg.stride * HOP_S)
