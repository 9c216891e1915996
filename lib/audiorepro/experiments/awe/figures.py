"""What the evaluation page's figures show: both views of the most frequent words in one 2-D
projection, and the nearest written words of a few spoken tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from audiorepro.data.awe import WordSegments
from audiorepro.experiments.awe.views import embed_segments, embed_words
from audiorepro.models.awe import MultiViewAWE


def project_2d(*arrays: np.ndarray) -> list[np.ndarray]:
    """PCA of the L2-normalised rows of all arrays together -> each as (n_i, 2)."""
    normed = [a / np.linalg.norm(a, axis=1, keepdims=True) for a in arrays]
    stacked = np.concatenate(normed)
    centred = stacked - stacked.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    flat = centred @ vt[:2].T  # (sum n_i, 2)
    out, start = [], 0
    for a in normed:
        out.append(flat[start : start + a.shape[0]])
        start += a.shape[0]
    return out


def projection(
    model: MultiViewAWE, segments: WordSegments, num_words: int = 8, batch_size: int = 512
) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
    """Both views of the ``num_words`` most frequent words of ``segments`` in one 2-D PCA:
    ``(token xy, token words, written-word xy, written words)``, the arguments of
    :func:`audiorepro.plotting.two_view_projection`."""
    emb_x = embed_segments(model, segments, batch_size)
    words, emb_c = embed_words(model, segments.word_phones, batch_size)
    counts = pd.Series(segments.words).value_counts()
    shown = sorted(counts.index[:num_words])
    tok = [i for i, w in enumerate(segments.words) if w in shown]
    xy_tok, xy_word = project_2d(emb_x[tok], emb_c[[words.index(w) for w in shown]])
    return xy_tok, [segments.words[i] for i in tok], xy_word, shown


def nearest_words(
    emb_x: np.ndarray,
    token_words: Sequence[str],
    words: Sequence[str],
    emb_c: np.ndarray,
    queries: Sequence[int],
    k: int = 3,
) -> list[dict[str, Any]]:
    """For each query token: its word, the k nearest written words (cosine), and whether the
    nearest is right."""
    a = emb_x / np.linalg.norm(emb_x, axis=1, keepdims=True)
    c = emb_c / np.linalg.norm(emb_c, axis=1, keepdims=True)
    rows = []
    for q in queries:
        sims = c @ a[q]
        top = np.argsort(-sims, kind="stable")[:k]
        rows.append(
            {
                "token word": token_words[q],
                "nearest written words": ", ".join(f"{words[t]} ({sims[t]:.2f})" for t in top),
                "correct": words[top[0]] == token_words[q],
            }
        )
    return rows


def nearest_word_table(
    model: MultiViewAWE,
    data: Mapping[str, WordSegments],
    *,
    seed: int = 0,
    split: str = "test",
    per_group: int = 4,
    batch_size: int = 512,
) -> pd.DataFrame:
    """The three nearest written words of ``per_group`` random ``split`` tokens of words seen in
    training and of up to ``per_group`` tokens of unseen words, with a "seen in train" column."""
    segments = data[split]
    emb_x = embed_segments(model, segments, batch_size)
    words, emb_c = embed_words(model, segments.word_phones, batch_size)
    train_types = set(data["train"].words)
    rng = np.random.default_rng(seed)
    seen = [i for i, w in enumerate(segments.words) if w in train_types]
    unseen = [i for i, w in enumerate(segments.words) if w not in train_types]
    picked = rng.choice(seen, per_group, replace=False).tolist()
    queries = sorted(picked + unseen[:: max(1, len(unseen) // per_group)][:per_group])
    table = pd.DataFrame(nearest_words(emb_x, segments.words, words, emb_c, queries))
    table["seen in train"] = [segments.words[q] in train_types for q in queries]
    return table
