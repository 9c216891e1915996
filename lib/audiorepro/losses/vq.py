"""The VQ-VAE objective of Tjandra et al. (2020), Eq. 7-10, as separate masked terms.

``L = L_VQ + λ·L_reg`` with, per frame,

- reconstruction ``−log p(x_t | y_t, s)``: a unit-variance Gaussian, ``½‖x_t − x̂_t‖²`` up to a
  constant (:func:`reconstruction_loss`);
- commitment ``γ‖z_t − sg(e_{c_t})‖²`` with γ = 0.25, whose gradient reaches only the encoder
  (:func:`commitment_loss`); the codebook itself is updated by EMA, not by a loss;
- temporal smoothing ``Σ_t ‖z_t − z_{t+1}‖²`` over consecutive encoder outputs, Eq. 9
  (:func:`temporal_smoothing_loss`).

The paper sums over time; here every term is averaged over the valid frames of the batch (the
sums divided by the same kind of count), so that λ and γ keep their relative weights whatever the
batch and segment sizes. Padding frames are masked out.

Under mixed precision (bf16/fp16 autocast) every term is computed in float32 with autocast off:
the inputs are upcast, so squared errors and their sums neither round nor overflow.
"""

from __future__ import annotations

import torch

from audiorepro.losses.precision import float32, full_precision

__all__ = [
    "commitment_loss",
    "length_mask",
    "reconstruction_loss",
    "temporal_smoothing_loss",
]


def length_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """(B, max_len) bool, True on the first ``lengths[b]`` frames of each row."""
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def _masked_mean(per_frame: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.to(per_frame.dtype)
    return (per_frame * mask).sum() / mask.sum().clamp_min(1.0)


def reconstruction_loss(
    feats: torch.Tensor, recon: torch.Tensor, lengths: torch.Tensor
) -> torch.Tensor:
    """½‖x_t − x̂_t‖² averaged over valid frames: feats, recon (B, T, F), lengths (B,)."""
    with full_precision(feats.device):
        return _reconstruction(float32(feats), float32(recon), lengths)


def _reconstruction(
    feats: torch.Tensor, recon: torch.Tensor, lengths: torch.Tensor
) -> torch.Tensor:
    per_frame = 0.5 * (feats - recon).pow(2).sum(-1)  # (B, T)
    return _masked_mean(per_frame, length_mask(lengths, feats.shape[1]))


def commitment_loss(z: torch.Tensor, e: torch.Tensor, code_lengths: torch.Tensor) -> torch.Tensor:
    """‖z_t − sg(e_t)‖² averaged over valid code frames (Eq. 7's second term, without γ).

    z: (B, T', D) encoder outputs; e: (B, T', D) their nearest codebook vectors.
    """
    with full_precision(z.device):
        return _commitment(float32(z), float32(e), code_lengths)


def _commitment(z: torch.Tensor, e: torch.Tensor, code_lengths: torch.Tensor) -> torch.Tensor:
    per_frame = (z - e.detach()).pow(2).sum(-1)  # (B, T')
    return _masked_mean(per_frame, length_mask(code_lengths, z.shape[1]))


def temporal_smoothing_loss(z: torch.Tensor, code_lengths: torch.Tensor) -> torch.Tensor:
    """‖z_t − z_{t+1}‖² averaged over consecutive valid pairs (Eq. 9): z (B, T', D)."""
    with full_precision(z.device):
        return _smoothing(float32(z), code_lengths)


def _smoothing(z: torch.Tensor, code_lengths: torch.Tensor) -> torch.Tensor:
    if z.shape[1] < 2:
        return z.sum() * 0.0
    per_pair = (z[:, 1:] - z[:, :-1]).pow(2).sum(-1)  # (B, T' - 1)
    return _masked_mean(per_pair, length_mask(code_lengths - 1, z.shape[1] - 1))
