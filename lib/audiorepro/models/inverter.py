"""The codebook inverter of Tjandra et al. (2020, §4, Figure 4): codes → linear magnitude.

Input: the codebook vectors ``[E[c_1], ..., E[c_T]]`` (B, T, D_e), each repeated ``r = S / T``
times side by side so that the sequence has the spectrogram's frame rate S. Then two multiscale
1D convolutions (parallel convolutions of several kernel widths, concatenated and projected, with
a ReLU), sinusoidal position encodings (so that the model can tell the copies of a repeated
vector apart), three Transformer layers (Figure 1) and a linear output layer predicting the
linear magnitude spectrogram (B, S, n_bins). Training minimises the L2 distance to the true
magnitudes (Eq. 14, averaged over frames: :func:`audiorepro.losses.inverter.inverter_loss`);
Griffin-Lim (:func:`audiorepro.features.griffin_lim`) turns a prediction into a waveform.

Magnitudes are divided by one global scale (the mean magnitude of the training spectrograms,
a buffer), which keeps the loss well conditioned without changing what is predicted.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from audiorepro.config import field
from audiorepro.losses.vq import length_mask
from audiorepro.models.vqvae import TransformerLayer, sinusoidal_positions

__all__ = ["CodebookInverter", "InverterConfig", "MultiscaleConv1d"]


@dataclass(frozen=True)
class InverterConfig:
    """Architecture of the codebook inverter (paper §4)."""

    code_dim: int = field(64, help="D_e, the dimension of the input codebook vectors")
    n_bins: int = field(257, help="frequency bins of the linear magnitude spectrogram")
    repeat: int = field(4, help="r = S / T, copies of each codebook vector (the VQ-VAE stride)")
    d_model: int = field(128, help="width of the convolutions and Transformer layers")
    n_heads: int = field(4, help="attention heads")
    ffn_dim: int = field(256, help="hidden width of the Transformer layers' linear layers")
    n_layers: int = field(3, help="Transformer layers (3 in the paper)")
    kernel_sizes: tuple[int, ...] = field((3, 5, 7), help="kernel widths of a multiscale conv")
    dropout: float = field(0.0, help="dropout inside the Transformer layers")


class MultiscaleConv1d(nn.Module):
    """Parallel Conv1d of several odd widths, concatenated, projected, ReLU: (B, S, C) → (B, S, D)."""

    def __init__(self, in_dim: int, out_dim: int, kernel_sizes: tuple[int, ...]) -> None:
        super().__init__()
        if any(k % 2 == 0 for k in kernel_sizes):
            raise ValueError(f"kernel sizes must be odd, got {kernel_sizes}")
        self.convs = nn.ModuleList(
            nn.Conv1d(in_dim, out_dim, k, padding=k // 2) for k in kernel_sizes
        )
        self.proj = nn.Linear(out_dim * len(kernel_sizes), out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.transpose(1, 2)  # (B, C, S)
        h = torch.cat([conv(h) for conv in self.convs], dim=1).transpose(1, 2)  # (B, S, k·D)
        return F.relu(self.proj(h))  # (B, S, D)


class CodebookInverter(nn.Module):
    """Figure 4: repeated codebook vectors (B, T, D_e) → linear magnitudes (B, T·r, n_bins)."""

    def __init__(self, cfg: InverterConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.conv1 = MultiscaleConv1d(cfg.code_dim, cfg.d_model, cfg.kernel_sizes)
        self.conv2 = MultiscaleConv1d(cfg.d_model, cfg.d_model, cfg.kernel_sizes)
        self.layers = nn.ModuleList(
            TransformerLayer(cfg.d_model, cfg.n_heads, cfg.ffn_dim, cfg.dropout)
            for _ in range(cfg.n_layers)
        )
        self.norm = nn.LayerNorm(cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.n_bins)
        self.register_buffer("mag_scale", torch.ones(()))

    def forward(self, vectors: torch.Tensor, code_lengths: torch.Tensor) -> torch.Tensor:
        """vectors (B, T, D_e), code_lengths (B,) → predicted magnitudes (B, T·r, n_bins) ≥ 0.

        Each convolution's input is zero past a file's last frame, as its own padding is for a
        file inverted alone: a file's magnitudes do not depend on the files batched with it."""
        x = vectors.repeat_interleave(self.cfg.repeat, dim=1)  # (B, S, D_e)
        lengths = code_lengths * self.cfg.repeat
        valid = length_mask(lengths, x.shape[1])[..., None].to(x.dtype)  # (B, S, 1)
        h = self.conv2(self.conv1(x * valid) * valid)  # (B, S, D)
        h = h + sinusoidal_positions(h.shape[1], h.shape[2], h.device)
        pad = ~length_mask(lengths, h.shape[1])
        for layer in self.layers:
            h = layer(h, pad)  # (B, S, D)
        return F.relu(self.out(self.norm(h))) * self.mag_scale  # (B, S, n_bins)
