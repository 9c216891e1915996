"""Scoring a dual encoder with the DCASE text-to-audio metrics (paper (a) §3.1): embeddings of
recordings and captions, their similarity matrix, the metrics, and the ledger record of a run
with its training throughput."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from audiorepro import reporting
from audiorepro.config import to_dict
from audiorepro.data.retrieval import EvaluationSet
from audiorepro.experiments.retrieval.config import CHAPTER, Config
from audiorepro.experiments.retrieval.data import RetrievalData
from audiorepro.metrics.retrieval import retrieval_metrics
from audiorepro.models.dual_encoder import DualEncoder


@torch.no_grad()
def embed_recordings(
    model: DualEncoder,
    keys: Sequence[str],
    features: Mapping[str, torch.Tensor],
    max_frames: int | None = None,
    batch_size: int = 64,
) -> torch.Tensor:
    """(N, embed_dim) projected audio embeddings of the recordings ``keys``, in order.

    Evaluation uses the start of each recording, at most ``max_frames`` (deterministic).
    Recordings are batched by length to limit padding.
    """
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(keys)), key=lambda i: features[keys[i]].shape[0])
    out = torch.zeros(len(keys), model.audio_projection.out_features)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        clips = [features[keys[i]][:max_frames] for i in idx]
        lengths = torch.tensor([c.shape[0] for c in clips])
        feats = torch.full((len(clips), int(lengths.max()), clips[0].shape[1]), model.pad_value)
        for j, c in enumerate(clips):
            feats[j, : c.shape[0]] = c.float()
        emb = model.encode_audio(feats.to(device), lengths.to(device))
        out[idx] = emb.float().cpu()
    return out


@torch.no_grad()
def embed_captions(
    model: DualEncoder, captions: Sequence[str], batch_size: int = 256
) -> torch.Tensor:
    """(M, embed_dim) projected caption embeddings, in order."""
    model.eval()
    parts = [
        model.encode_text(list(captions[i : i + batch_size])).float().cpu()
        for i in range(0, len(captions), batch_size)
    ]
    return torch.cat(parts)


def similarity_matrix(
    model: DualEncoder,
    eval_set: EvaluationSet,
    features: Mapping[str, torch.Tensor],
    config: Config,
) -> torch.Tensor:
    """(n_captions, n_recordings) cosine similarities: rows are queries, as the metrics expect."""
    audio = embed_recordings(
        model, eval_set.keys, features, config.max_frames, config.eval_batch_size
    )
    text = embed_captions(model, eval_set.captions)
    return DualEncoder.similarity(text, audio)


def evaluate(
    model: DualEncoder,
    eval_set: EvaluationSet,
    features: Mapping[str, torch.Tensor],
    config: Config,
) -> dict[str, float]:
    """Text-to-audio ``mAP@10``, ``R@1``, ``R@5``, ``R@10`` (fractions) on ``eval_set``."""
    scores = similarity_matrix(model, eval_set, features, config)
    return retrieval_metrics(scores, torch.tensor(eval_set.targets))


def evaluate_and_record(
    model: DualEncoder,
    config: Config,
    data: RetrievalData,
    *,
    page: str,
    preset: str,
    seed: int,
    tags: Mapping[str, Any],
    chapter: str = CHAPTER,
    record_config: Mapping[str, Any] | None = None,
) -> dict[str, float]:
    """:func:`evaluate` ``model`` on the evaluation split (on its own front end) and append
    the metrics, with the run's training throughput (:func:`throughput`), to the results ledger
    with ``tags``; returns the metrics."""
    metrics = evaluate(model, data.eval_set, data.features_for(config.model), config)
    reporting.record_result(
        chapter,
        page,
        metrics | throughput(model),
        preset=preset,
        seed=seed,
        config=record_config if record_config is not None else to_dict(config),
        tags=tags,
    )
    return metrics


def throughput(model: DualEncoder) -> dict[str, float]:
    """Training speed of the run that produced ``model``: ``steps_per_s`` and ``clips_per_s``
    (optimizer steps and training clips per second), and its ``train_steps``, ``final_loss``
    (the last step's batch) and ``late_loss`` (the mean NT-Xent over the last tenth of its
    steps, at least one: what the findings judge, less noisy than one batch; for a distilled
    run its ``loss_sup`` part); empty for a model without a training history."""
    history = getattr(model, "train_history", None) or {}
    out = {k: float(history[k]) for k in ("steps_per_s", "clips_per_s") if k in history}
    if history.get("final_step"):
        out["train_steps"] = float(history["final_step"])
    losses = history.get("losses")
    if losses:
        # A stage-2 run's loss adds L_dist: its NT-Xent part, L_sup, is what ln(batch) bounds.
        contrastive = (history.get("step_metrics") or {}).get("loss_sup") or losses
        late = contrastive[-max(1, len(contrastive) // 10) :]
        out["final_loss"] = float(losses[-1])
        out["late_loss"] = math.fsum(late) / len(late)
    return out
