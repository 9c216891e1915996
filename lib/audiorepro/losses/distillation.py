"""Stage-2 loss of paper (b) §3: L = L_sup + λ · L_dist.

With the student's B × B logits S = C / τ_s (rows audios, columns captions; C its cosine
similarities, τ_s its temperature) the student's distributions are

    q_a(a_i | c_j) = softmax over i of S_ij   (each caption's column)
    q_c(c_j | a_i) = softmax over j of S_ij   (each audio's row)

and with the ensemble's targets p̂_a, p̂_c (:func:`audiorepro.distillation.soft_targets`)

    L_dist = H(p̂_a, q_a) + H(p̂_c, q_c),
    H(p̂_a, q_a) = (1/B) Σ_j [ -Σ_i p̂_a(a_i | c_j) log q_a(a_i | c_j) ]   (mean over captions),
    H(p̂_c, q_c) = (1/B) Σ_i [ -Σ_j p̂_c(c_j | a_i) log q_c(c_j | a_i) ]   (mean over audios).

salsa computes the same two cross-entropies (``F.cross_entropy`` with probability targets, mean
over rows) but halves their sum, as it halves its L_sup (``shared/reference/retrieval.md`` §4).
λ keeps the paper's meaning only when L_sup and L_dist use the same convention, and chapter 01's
NT-Xent (:func:`audiorepro.losses.contrastive.nt_xent`) halves like salsa, so
``average_directions=True`` (the halved sum) is the default here; ``False`` gives the paper's
plain sum, to pair with an L_sup that is a plain sum too.

Modes: λ = 1 (paper, default); λ = 0 (stage-2 fine-tuning with L_sup only; L_dist is still
computed, without gradient, for logging); ``dist_only=True``: L_dist alone, what the salsa
README's stage-2 command runs (``loss_weight=0.0, distill_weight=1.0``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from audiorepro.losses.precision import full_precision

__all__ = ["distillation_loss", "distillation_objective", "soft_cross_entropy"]


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, dim: int) -> torch.Tensor:
    """Mean over the other axis of ``-Σ_dim targets · log_softmax(logits, dim)``.

    Args:
        logits: (A, C) student logits.
        targets: (A, C) probabilities summing to 1 along ``dim``.
        dim: the axis the distributions run over (0: over rows, one per column; 1: over columns,
            one per row).
    """
    if logits.shape != targets.shape or logits.ndim != 2:
        raise ValueError(
            f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} must be equal 2-D"
        )
    # Half-precision logits (mixed precision) are upcast and autocast is off, so the softmax
    # normaliser runs in float32; float64 stays float64.
    dtype = torch.promote_types(logits.dtype, torch.float32)
    with full_precision(logits.device):
        log_q = torch.log_softmax(logits.to(dtype), dim=dim)
        # 0 · log q = 0 even where q underflows to 0 (log q = -inf).
        terms = torch.where(targets > 0, targets.to(dtype) * log_q, torch.zeros_like(log_q))
        return -terms.sum(dim=dim).mean()


def distillation_loss(
    student_logits: torch.Tensor,
    p_audio: torch.Tensor,
    p_caption: torch.Tensor,
    average_directions: bool = True,
) -> torch.Tensor:
    """L_dist = H(p̂_a, q_a) + H(p̂_c, q_c) (paper (b) §3), halved with ``average_directions``
    (the default, salsa's and chapter 01's NT-Xent convention).

    Args:
        student_logits: S (B, B) = student cosine similarities / τ_s, rows audios.
        p_audio: p̂_a (B, B), distributions over the audios (columns sum to 1).
        p_caption: p̂_c (B, B), distributions over the captions (rows sum to 1).
    """
    loss = soft_cross_entropy(student_logits, p_audio, dim=0) + soft_cross_entropy(
        student_logits, p_caption, dim=1
    )
    return 0.5 * loss if average_directions else loss


def distillation_objective(
    student_logits: torch.Tensor,
    p_audio: torch.Tensor | None,
    p_caption: torch.Tensor | None,
    supervised: torch.Tensor | Callable[[torch.Tensor], torch.Tensor] | None = None,
    lam: float = 1.0,
    dist_only: bool = False,
    average_directions: bool = True,
) -> dict[str, torch.Tensor]:
    """The stage-2 objective, as a dict the training loop takes (``"loss"`` plus logged parts).

    Args:
        student_logits: S (B, B), rows audios, columns captions.
        p_audio: p̂_a (B, B); ``None`` (with ``p_caption``) only at λ = 0 without
            ``dist_only``: L_sup alone, no L_dist logged.
        p_caption: p̂_c (B, B).
        supervised: L_sup, a scalar tensor or a callable ``S -> L_sup`` (e.g. chapter 01's
            NT-Xent with the batch's positives); not needed with ``dist_only``.
        lam: λ (1 in paper (b)); 0 trains on L_sup alone.
        dist_only: L = L_dist (the salsa README's stage-2 command).
        average_directions: halve L_dist as salsa and chapter 01's NT-Xent halve theirs (match
            the convention of the L_sup you pass).

    Returns:
        ``{"loss": L, "loss_dist": L_dist}`` (no ``"loss_dist"`` without targets) and
        ``"loss_sup": L_sup`` when it was computed; the logged parts are detached.
    """
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    if (p_audio is None or p_caption is None) and (dist_only or lam > 0):
        raise ValueError(
            f"L_dist needs the targets p_audio and p_caption (lam={lam}, dist_only={dist_only}); "
            "only lam = 0 trains without them"
        )
    if dist_only:
        dist = distillation_loss(student_logits, p_audio, p_caption, average_directions)
        return {"loss": dist, "loss_dist": dist.detach()}
    if supervised is None:
        raise ValueError("supervised (L_sup) is required unless dist_only=True")
    sup = supervised(student_logits) if callable(supervised) else supervised
    if not isinstance(sup, torch.Tensor) or sup.numel() != 1:
        raise TypeError(f"L_sup must be a scalar tensor, got {sup!r}")
    sup = sup.reshape(())
    if lam == 0 and p_audio is None and p_caption is None:  # no teachers: L_sup alone
        return {"loss": sup, "loss_sup": sup.detach()}
    if lam == 0:
        with torch.no_grad():
            dist = distillation_loss(student_logits, p_audio, p_caption, average_directions)
        return {"loss": sup, "loss_sup": sup.detach(), "loss_dist": dist}
    dist = distillation_loss(student_logits, p_audio, p_caption, average_directions)
    return {"loss": sup + lam * dist, "loss_sup": sup.detach(), "loss_dist": dist.detach()}
