"""The codebook inverter's loss (Tjandra et al. 2020, §4, Eq. 14)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from audiorepro.losses.precision import float32, full_precision
from audiorepro.losses.vq import length_mask

__all__ = ["inverter_loss"]


def inverter_loss(
    pred: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    """Eq. 14: squared L2 distance between magnitudes, per valid frame, in units of ``scale``.

    pred, target (B, S, n_bins); lengths (B,) valid frames of the target. The prediction is cut
    or zero-padded to the target's length (T·r can exceed S by up to r − 1 frames). Computed in
    float32 with autocast off (half-precision predictions are upcast).
    """
    with full_precision(pred.device):
        return _inverter_loss(float32(pred), float32(target), lengths, float32(scale))


def _inverter_loss(
    pred: torch.Tensor, target: torch.Tensor, lengths: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    s = target.shape[1]
    pred = pred[:, :s]
    if pred.shape[1] < s:
        pred = F.pad(pred, (0, 0, 0, s - pred.shape[1]))
    per_frame = ((pred - target) / scale).pow(2).sum(-1)  # (B, S)
    mask = length_mask(lengths, s).to(per_frame.dtype)
    return (per_frame * mask).sum() / mask.sum().clamp_min(1.0)
