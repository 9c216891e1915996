"""The chapter's two views embedded, f(x) of each spoken token and g(c) of each written word,
and :func:`evaluate`, the two APs between them that training selects its epochs on and every
page reports."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch

from audiorepro.data.awe import WordSegments, pad_sequences
from audiorepro.metrics.average_precision import cross_view_ap, same_different_ap
from audiorepro.models.awe import MultiViewAWE


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def length_batches(
    frames: np.ndarray, batch_size: int, max_len: int, frame_stack: int = 1
) -> list[np.ndarray]:
    """The batches of :func:`embed_segments`: indices into ``frames`` (each row's length in
    frames) in increasing length, ``batch_size`` at a time; a batch whose longest row is past
    ``max_len`` encoder steps (the precomputed positional table; a step is ``frame_stack``
    frames) holds fewer rows, as many as keep rows x steps² within ``batch_size`` x
    ``max_len``², since self-attention's memory grows with the square of the padded length.
    Rows within ``max_len`` get the batches they always had, and so the same numbers."""
    frames = np.asarray(frames, dtype=np.int64)
    order = np.argsort(frames, kind="stable")
    steps = -(-frames // frame_stack)
    budget = batch_size * max_len**2
    batches, start = [], 0
    while start < len(order):
        stop = min(start + batch_size, len(order))
        while stop - start > 1 and (stop - start) * int(steps[order[stop - 1]]) ** 2 > budget:
            stop -= 1
        batches.append(order[start:stop])
        start = stop
    return batches


@torch.no_grad()
def embed_segments(
    model: MultiViewAWE, segments: WordSegments, batch_size: int = 512
) -> np.ndarray:
    """f(x) of every token, (N, D) float32, in token order (eval mode, length-sorted batches,
    :func:`length_batches`)."""
    was_training = model.training
    model.eval()
    device = _device_of(model)
    frames = np.asarray([f.shape[0] for f in segments.feats], dtype=np.int64)
    batches = length_batches(frames, batch_size, model.config.max_len, model.config.frame_stack)
    out = np.zeros((len(segments), model.config.d_model), dtype=np.float32)
    try:
        for idx in batches:
            feats, lengths = pad_sequences([torch.from_numpy(segments.feats[i]) for i in idx])
            emb = model.acoustic(feats.to(device), lengths.to(device))  # (B, D)
            out[idx] = emb.float().cpu().numpy()
    finally:
        model.train(was_training)
    return out


def embed_with_copies(
    model: MultiViewAWE,
    segments: WordSegments,
    copies: Sequence[Sequence[np.ndarray | None]],
    batch_size: int = 512,
) -> np.ndarray:
    """The mean of the unit-length f(x) of each token and of its copies, (N, D) float32:
    ``copies[c][i]`` is the frames of token ``i``'s ``c``-th copy (``None``: that copy is left
    out of its mean). The embedding of a word averaged over the perturbations the model learned
    to ignore (``awe embed``'s speed copies)."""
    total = _unit(embed_segments(model, segments, batch_size))
    count = np.ones(len(segments))
    for frames in copies:
        have = [i for i, f in enumerate(frames) if f is not None]
        if not have:
            continue
        view = dataclasses.replace(
            segments,
            keys=[segments.keys[i] for i in have],
            words=[segments.words[i] for i in have],
            speakers=[segments.speakers[i] for i in have],
            feats=[frames[i] for i in have],
        )
        total[have] += _unit(embed_segments(model, view, batch_size))
        count[have] += 1
    return (total / count[:, None]).astype(np.float32)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


@torch.no_grad()
def embed_words(
    model: MultiViewAWE, word_phones: dict[str, np.ndarray], batch_size: int = 512
) -> tuple[list[str], np.ndarray]:
    """g(c) of each word: ``(sorted words, (W, D) float32)``."""
    was_training = model.training
    model.eval()
    device = _device_of(model)
    words = sorted(word_phones)
    out = np.zeros((len(words), model.config.d_model), dtype=np.float32)
    try:
        for start in range(0, len(words), batch_size):
            chunk = words[start : start + batch_size]
            phones, lengths = pad_sequences([torch.from_numpy(word_phones[w]) for w in chunk])
            emb = model.phones(phones.to(device), lengths.to(device))  # (W, D)
            out[start : start + len(chunk)] = emb.float().cpu().numpy()
    finally:
        model.train(was_training)
    return words, out


def evaluate(
    model: MultiViewAWE, segments: WordSegments, batch_size: int = 512
) -> dict[str, float]:
    """``acoustic_ap`` (same-different over all token pairs) and ``crossview_ap`` (tokens x the
    split's unique words), as agwe-recipe's ``MultiViewAP``."""
    emb_x = embed_segments(model, segments, batch_size)
    words, emb_c = embed_words(model, segments.word_phones, batch_size)
    return {
        "acoustic_ap": float(same_different_ap(emb_x, segments.words)),
        "crossview_ap": float(cross_view_ap(emb_x, segments.words, emb_c, words)),
    }
