"""The chapter's two views embedded, f(x) of each spoken token and g(c) of each written word,
and :func:`evaluate`, the two APs between them that training selects its epochs on and every
page reports."""

from __future__ import annotations

import numpy as np
import torch

from audiorepro.data.awe import WordSegments, pad_sequences
from audiorepro.metrics.average_precision import cross_view_ap, same_different_ap
from audiorepro.models.awe import MultiViewAWE


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def embed_segments(
    model: MultiViewAWE, segments: WordSegments, batch_size: int = 512
) -> np.ndarray:
    """f(x) of every token, (N, D) float32, in token order (eval mode, length-sorted batches)."""
    was_training = model.training
    model.eval()
    device = _device_of(model)
    order = np.argsort([f.shape[0] for f in segments.feats], kind="stable")
    out = np.zeros((len(segments), model.config.d_model), dtype=np.float32)
    try:
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            feats, lengths = pad_sequences([torch.from_numpy(segments.feats[i]) for i in idx])
            emb = model.acoustic(feats.to(device), lengths.to(device))  # (B, D)
            out[idx] = emb.float().cpu().numpy()
    finally:
        model.train(was_training)
    return out


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
