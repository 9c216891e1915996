"""Stage-2 targets: the ensemble's estimated correspondences for one training batch.

Paper (b) §3: for the batch's audios a_i and captions c_j, Ĉ_ij = (1/M) Σ_m C^m_ij (mean cosine
similarity of the M stage-1 models), and the targets are

    p̂_a(a_i | c_j) = softmax over the audios i of Ĉ_ij / τ   (each caption's column, dim 0)
    p̂_c(c_j | a_i) = softmax over the captions j of Ĉ_ij / τ  (each audio's row, dim 1)

with τ = 0.05 (§4.5). (The paper writes C_ij in these two formulas; Ĉ is meant, as salsa's
``training_step`` computes: ``softmax(C_distilled, dim=1)`` for the rows over captions and
``softmax(C_distilled.T, dim=1)`` for the columns over audios.) Rows index the batch's items'
audios and columns their captions, item k contributing audio k and caption k, as the student's
B × B similarity matrix; the softmax normalises over the batch, not the training set.

Several processes (``accelerate launch``): the student's loss covers the all-gathered global
batch, so the targets must too. Each process turns its ids into row indices of the (identical,
replicated) teacher lookup, the index tensors are all-gathered, and every process builds the same
global B_g × B_g target. salsa does not gather here (its DDP path would mismatch shapes,
``shared/reference/retrieval.md`` §4).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from audiorepro.distillation.teachers import TeacherEnsemble

__all__ = [
    "DEFAULT_TAU",
    "BatchTargets",
    "all_gather_rows",
    "batch_targets",
    "soft_targets",
]

DEFAULT_TAU = 0.05


class BatchTargets(NamedTuple):
    """Targets for a (global) batch.

    Attributes:
        similarity: Ĉ (B, B), rows audios, columns captions.
        p_audio: p̂_a (B, B), each column a distribution over the audios (sums to 1 over dim 0).
        p_caption: p̂_c (B, B), each row a distribution over the captions (sums to 1 over dim 1).
    """

    similarity: torch.Tensor
    p_audio: torch.Tensor
    p_caption: torch.Tensor


def soft_targets(similarity: torch.Tensor, tau: float = DEFAULT_TAU) -> tuple[torch.Tensor, ...]:
    """``(p̂_a, p̂_c)`` from Ĉ (A, C): softmax of Ĉ/τ over the audios (dim 0) and over the
    captions (dim 1), paper (b) §3."""
    if tau <= 0:
        raise ValueError(f"tau must be positive, got {tau}")
    logits = similarity.to(torch.promote_types(similarity.dtype, torch.float32)) / tau
    return logits.softmax(dim=0), logits.softmax(dim=1)


def all_gather_rows(rows: torch.Tensor) -> torch.Tensor:
    """Concatenate the (B_r,) index tensors of all processes in rank order (B_g,); the identity in
    a single process. Uses ``torch.distributed`` when it is initialised with several ranks, so it
    works under ``accelerate launch`` (gloo or NCCL). Shards may differ in length (an epoch's
    last batch): they are padded for the collective and trimmed after it, as chapter 01's
    :func:`~audiorepro.losses.contrastive.gather_with_grad` does for the embeddings, so the
    targets line up with the student's gathered similarity matrix."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return rows
    world = dist.get_world_size()
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    local = rows.to(device)
    size = torch.tensor([local.shape[0]], device=device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    counts = [int(n.item()) for n in sizes]
    padded = torch.cat([local, local.new_zeros(max(counts) - local.shape[0])])
    gathered = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded)
    return torch.cat([part[:n] for part, n in zip(gathered, counts, strict=True)]).to(rows.device)


def batch_targets(
    ensemble: TeacherEnsemble,
    audio_ids: Sequence[str],
    captions: Sequence[str],
    tau: float = DEFAULT_TAU,
    gather: Callable[[torch.Tensor], torch.Tensor] | None = all_gather_rows,
    device: torch.device | str | None = None,
) -> BatchTargets:
    """Ĉ, p̂_a and p̂_c for the batch of pairs ``(audio_ids[k], captions[k])``.

    Args:
        ensemble: the stage-1 teachers.
        audio_ids: (B,) the local batch's audio ids (one per pair; repeats allowed; B may differ
            between processes).
        captions: (B,) the local batch's caption texts.
        tau: target temperature (0.05 in paper (b)).
        gather: maps the local (B,) row indices to the global batch's (B_g,); the default
            all-gathers across processes (identity in one process); None keeps the local batch.
        device: where to put the targets (the student's device).

    Returns:
        :class:`BatchTargets` of shape (B_g, B_g).

    Raises:
        TeacherEmbeddingsError: an id or caption the teachers lack (all listed with the count).
    """
    if len(audio_ids) != len(captions):
        raise ValueError(f"{len(audio_ids)} audio ids for {len(captions)} captions")
    audio_rows = ensemble.audio_rows(audio_ids)
    caption_rows = ensemble.caption_rows(captions)
    if gather is not None:
        audio_rows, caption_rows = gather(audio_rows), gather(caption_rows)
    similarity = ensemble.similarity(audio_rows, caption_rows)  # (B_g, B_g)
    if device is not None:
        similarity = similarity.to(device)
    p_audio, p_caption = soft_targets(similarity, tau)
    return BatchTargets(similarity, p_audio, p_caption)
