"""Transformer VQ-VAE for unsupervised unit discovery (Tjandra, Sakti & Nakamura 2020, §2-3).

``feats`` (B, T, F) → encoder → ``z`` (B, T', D_e) at T' = T / stride → nearest codebook vector
``e_{c_t}`` (Eq. 4-6, L2 distance) → straight-through estimator → temporal jitter (training only,
Eq. 11-13) → decoder conditioned on a learned speaker embedding → reconstruction (B, T, F).

- **Transformer layer** (Figure 1, :class:`TransformerLayer`): layer norm → multi-head
  self-attention (Eq. 1-3) → residual; layer norm → two linear layers with a ReLU → residual.
- **Encoder** (Figure 3a, :class:`TransformerEncoder`): a linear input projection plus sinusoidal
  positions, then twice [Transformer layer → strided 1D convolution], the convolutions halving the
  frame rate (4× in total by default; with ``stride=2`` the second one keeps the rate), then a
  linear map to the code dimension. The convolutional baseline (the authors' 2019 system,
  :class:`ConvEncoder`) replaces each Transformer layer by a residual convolution block.
- **Codebook** (:class:`VectorQuantizerEMA`): K vectors updated by exponential moving averages of
  the encoder outputs assigned to them (Kaiser et al. 2018) with Laplace smoothing of the counts,
  not by gradients; initialised from encoder outputs of the first training batch.
  Dead codes: a code whose EMA count falls below ``dead_code_threshold`` times the mean count is
  moved onto a random encoder output of the current batch (count and sum reset to that vector),
  so that a small model trained briefly still uses its K codes; 0 disables this.
- **Decoder** (Figure 3b, :class:`Decoder`): 1D convolutions and ×2 nearest-neighbour upsampling
  back to T frames; the speaker embedding ``v_s`` is concatenated to the input of every
  convolution.

Inputs are normalised inside the model with the training set's per-dimension mean and a standard
deviation that is either one for all dimensions (``input_scale: global``, the default: the
frames keep the relative scales of their dimensions, so the reconstruction loss weighs them as
a distance on the raw frames does) or per dimension (``dimension``); buffers set by
:meth:`VQVAE.set_normalization` from :func:`input_statistics`. The reconstruction target is the
normalised input. The loss terms are in :mod:`audiorepro.losses.vq`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from audiorepro.config import field
from audiorepro.losses.precision import float32, full_precision
from audiorepro.losses.vq import (
    commitment_loss,
    length_mask,
    reconstruction_loss,
    temporal_smoothing_loss,
)

__all__ = [
    "INPUT_SCALES",
    "ConvEncoder",
    "Decoder",
    "TransformerEncoder",
    "TransformerLayer",
    "VQVAE",
    "VQVAEConfig",
    "VQVAEOutput",
    "VectorQuantizerEMA",
    "input_statistics",
    "sinusoidal_positions",
    "temporal_jitter",
]

ENCODERS = ("transformer", "conv")
CODEBOOK_SIZES = (64, 128, 256, 512)
FEATURE_NORMS = ("none", "utterance", "speaker")
PRE_QUANT_NORMS = ("none", "layer", "unit")
INPUT_SCALES = ("global", "dimension")


@dataclass(frozen=True)
class VQVAEConfig:
    """Architecture and regularisation of the VQ-VAE (paper §3, §5.1; Tables 1-3)."""

    input_dim: int = field(39, help="F: 39 for MFCC + Δ + ΔΔ, 80 for log-Mel-80")
    encoder: str = field("transformer", help="transformer (Tjandra 2020) | conv (Tjandra 2019)")
    d_model: int = field(128, help="width of the encoder layers")
    n_heads: int = field(4, help="attention heads P (Eq. 2)")
    ffn_dim: int = field(256, help="hidden width of the Transformer layer's two linear layers")
    code_dim: int = field(64, help="D_e, the dimension of the codebook vectors")
    codebook_size: int = field(128, help="K, number of codebook vectors (64, 128, 256 or 512)")
    stride: int = field(4, help="total downsampling of the encoder: 4 or 2")
    ema_decay: float = field(0.99, help="decay of the codebook's exponential moving averages")
    ema_epsilon: float = field(1e-5, help="Laplace smoothing of the EMA counts")
    dead_code_threshold: float = field(
        0.03, help="restart codes whose EMA count is below this fraction of the mean; 0: never"
    )
    commitment: float = field(0.25, help="γ, the commitment weight (Eq. 7)")
    smoothing: float = field(0.0, help="λ, the temporal smoothing weight (Eq. 10); 0: off")
    jitter: float = field(0.0, help="p, temporal jitter probability (Eq. 11); 0: off")
    speaker_dim: int = field(32, help="D_v, the dimension of the speaker embedding")
    decoder_channels: int = field(128, help="channels of the decoder's convolutions")
    dropout: float = field(0.0, help="dropout inside the Transformer layers")
    pre_quant_norm: str = field(
        "none",
        help="normalisation of the encoder output before the codebook: none | layer (layer "
        "norm with a learned gain and bias) | unit (layer norm without them): bounds the "
        "scale of z, hence the commitment loss",
    )
    feature_norm: str = field(
        "none",
        help="input mean and variance normalisation before the model: none | utterance | "
        "speaker (per file, or over every file of the speaker; train and test alike)",
    )

    input_scale: str = field(
        "global",
        help="the model's input standardisation after removing the training mean of each "
        "dimension: global (one standard deviation for all dimensions: the frames keep "
        "their geometry, c0 weighs as in a distance on raw MFCC) | dimension (each "
        "dimension to unit variance: Δ and ΔΔ weigh as much as the static cepstra)",
    )

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if self.stride not in (2, 4):
            raise ValueError(f"stride must be 2 or 4, got {self.stride}")
        for name in (
            "input_dim", "d_model", "n_heads", "ffn_dim", "code_dim", "speaker_dim",
            "decoder_channels",
        ):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} must be divisible by n_heads {self.n_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        for name in ("commitment", "smoothing", "dead_code_threshold"):
            if not getattr(self, name) >= 0.0:
                raise ValueError(
                    f"{name} must be >= 0 (a weight or a share; a negative one rewards what "
                    f"it should penalise), got {getattr(self, name)}"
                )
        if not self.ema_epsilon > 0.0:
            raise ValueError(f"ema_epsilon must be > 0, got {self.ema_epsilon}")
        if not 0.0 <= self.jitter < 0.5:
            raise ValueError(f"jitter p must be in [0, 0.5), got {self.jitter}")
        if not 0.0 < self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in (0, 1), got {self.ema_decay}")
        if self.codebook_size < 2:
            raise ValueError(f"codebook_size must be >= 2, got {self.codebook_size}")
        if self.pre_quant_norm not in PRE_QUANT_NORMS:
            raise ValueError(
                f"pre_quant_norm must be one of {PRE_QUANT_NORMS}, got {self.pre_quant_norm!r}"
            )
        if self.input_scale not in INPUT_SCALES:
            raise ValueError(
                f"input_scale must be one of {INPUT_SCALES}, got {self.input_scale!r}"
            )
        if self.feature_norm not in FEATURE_NORMS:
            raise ValueError(
                f"feature_norm must be one of {FEATURE_NORMS}, got {self.feature_norm!r}"
            )


def input_statistics(
    frames: np.ndarray | torch.Tensor, scale: str = "global"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, std)``, each (F,), of training ``frames`` (N, F) for
    :meth:`VQVAE.set_normalization`: the per-dimension mean, and per ``scale`` (see
    :attr:`VQVAEConfig.input_scale`) either each dimension's standard deviation
    (``dimension``) or, in every dimension, the root mean square of the per-dimension ones
    (``global``: one scale, the frames' geometry kept). Computed in float64."""
    if scale not in INPUT_SCALES:
        raise ValueError(f"input_scale must be one of {INPUT_SCALES}, got {scale!r}")
    x = torch.as_tensor(np.asarray(frames), dtype=torch.float64)
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(
            f"input_statistics: expected frames (N, F) with N >= 1, got {tuple(x.shape)}"
        )
    mean = x.mean(0)
    var = x.var(0, unbiased=False)  # (F,)
    std = var.sqrt() if scale == "dimension" else var.mean().sqrt().expand_as(var).clone()
    return mean.float(), std.float()


def sinusoidal_positions(
    length: int, dim: int, device: torch.device | None = None
) -> torch.Tensor:
    """Sinusoidal position encodings (Vaswani et al. 2017): (length, dim)."""
    pos = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    i = torch.arange(0, dim, 2, device=device, dtype=torch.float32)
    angle = pos / torch.pow(10000.0, i / dim)  # (length, ceil(dim / 2))
    out = torch.zeros(length, dim, device=device)
    out[:, 0::2] = torch.sin(angle)
    out[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return out


def conv_lengths(lengths: torch.Tensor, stride: int) -> torch.Tensor:
    """Frames after a kernel-3, padding-1 convolution of ``stride``: ceil(lengths / stride)."""
    return torch.div(lengths + stride - 1, stride, rounding_mode="floor")


class TransformerLayer(nn.Module):
    """Figure 1: x + MHA(LN(x)), then x + W2 ReLU(W1 LN(x)). (B, T, D) → (B, T, D)."""

    def __init__(self, d_model: int, n_heads: int, ffn_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(
            nn.Linear(d_model, ffn_dim), nn.ReLU(), nn.Linear(ffn_dim, d_model)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, D); pad_mask (B, T) True on padding frames (ignored as keys)."""
        h = self.norm1(x)
        h, _ = self.attn(h, h, h, key_padding_mask=pad_mask, need_weights=False)  # (B, T, D)
        x = x + self.dropout(h)
        return x + self.dropout(self.ffn(self.norm2(x)))  # (B, T, D)


class _StridedConv(nn.Module):
    """Conv1d, kernel 3, padding 1, on (B, T, D) → (B, ceil(T / stride), D).

    Linear: a ReLU here can switch off every channel of the encoder's output early in training,
    after which all frames map to one code (observed with small models); the Transformer layers
    and residual blocks supply the non-linearity.
    """

    def __init__(self, channels: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv1d(channels, channels, 3, stride=stride, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.transpose(1, 2)).transpose(1, 2)


class TransformerEncoder(nn.Module):
    """Figure 3a: 2 × [Transformer layer → strided Conv1d]; feats (B, T, F) → z (B, T', D_e)."""

    def __init__(self, cfg: VQVAEConfig) -> None:
        super().__init__()
        self.proj = nn.Linear(cfg.input_dim, cfg.d_model)
        strides = (2, 2) if cfg.stride == 4 else (2, 1)
        self.layers = nn.ModuleList(
            TransformerLayer(cfg.d_model, cfg.n_heads, cfg.ffn_dim, cfg.dropout) for _ in strides
        )
        self.convs = nn.ModuleList(_StridedConv(cfg.d_model, s) for s in strides)
        self.out = nn.Linear(cfg.d_model, cfg.code_dim)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, F), lengths (B,) → z (B, T', D_e), code lengths (B,)."""
        h = self.proj(x) + sinusoidal_positions(x.shape[1], self.proj.out_features, x.device)
        for layer, conv in zip(self.layers, self.convs, strict=True):
            valid = length_mask(lengths, h.shape[1])  # (B, T)
            h = layer(h, ~valid)  # (B, T, D)
            # padding frames hold values after the layer; zero them, as the convolution's own
            # padding is, so that a file's units do not depend on the files batched with it
            h = conv(h * valid.unsqueeze(-1))  # (B, T / s, D)
            lengths = conv_lengths(lengths, conv.stride)
        return self.out(h), lengths


class _ResBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv1d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """x (B, T, D) with zero padding frames, valid (B, T) → (B, T, D), padding zeroed."""
        keep = valid.unsqueeze(1)  # (B, 1, T)
        h = F.relu(self.conv1(x.transpose(1, 2))) * keep
        return (x + self.conv2(h).transpose(1, 2)) * valid.unsqueeze(-1)


class ConvEncoder(nn.Module):
    """The convolutional baseline: 2 × [residual conv block → strided Conv1d], same I/O shapes."""

    def __init__(self, cfg: VQVAEConfig) -> None:
        super().__init__()
        self.proj = nn.Linear(cfg.input_dim, cfg.d_model)
        strides = (2, 2) if cfg.stride == 4 else (2, 1)
        self.blocks = nn.ModuleList(_ResBlock(cfg.d_model) for _ in strides)
        self.convs = nn.ModuleList(_StridedConv(cfg.d_model, s) for s in strides)
        self.out = nn.Linear(cfg.d_model, cfg.code_dim)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, F), lengths (B,) → z (B, T', D_e), code lengths (B,)."""
        h = self.proj(x)
        for block, conv in zip(self.blocks, self.convs, strict=True):
            # zero padding frames before every convolution (as TransformerEncoder)
            valid = length_mask(lengths, h.shape[1])  # (B, T)
            h = conv(block(h * valid.unsqueeze(-1), valid))  # (B, T / s, D)
            lengths = conv_lengths(lengths, conv.stride)
        return self.out(h), lengths


class VectorQuantizerEMA(nn.Module):
    """EMA codebook E (K, D_e): nearest vector in L2 (Eq. 4-6); EMA updates in training mode.

    ``forward(z, mask)`` returns ``(codes (B, T'), e (B, T', D_e))`` where ``e`` is the selected
    codebook vectors (no gradient; the straight-through estimator is applied by the caller).

    Mixed precision: distances, the nearest-code search and the EMA statistics run in float32
    with autocast off, whatever the dtype of ``z`` (bf16 or fp16 under autocast); the codebook
    and its EMA buffers stay float32 and ``e`` is float32.
    """

    def __init__(
        self,
        codebook_size: int,
        dim: int,
        decay: float = 0.99,
        epsilon: float = 1e-5,
        dead_code_threshold: float = 0.0,
    ) -> None:
        super().__init__()
        self.codebook_size = codebook_size
        self.decay = decay
        self.epsilon = epsilon
        self.dead_code_threshold = dead_code_threshold
        self.register_buffer("codebook", torch.randn(codebook_size, dim) * 0.1)
        self.register_buffer("ema_count", torch.ones(codebook_size))
        self.register_buffer("ema_sum", self.codebook.clone())
        self.register_buffer("initialized", torch.tensor(False))

    def nearest(self, flat: torch.Tensor) -> torch.Tensor:
        """Index of the nearest codebook vector of each row of flat (N, D_e) → (N,), from
        float32 distances (half-precision rows are upcast, autocast is off)."""
        with full_precision(flat.device):
            return self._nearest(float32(flat))

    def _nearest(self, flat: torch.Tensor) -> torch.Tensor:
        dist = (
            flat.pow(2).sum(1, keepdim=True)
            - 2 * flat @ self.codebook.T
            + self.codebook.pow(2).sum(1)[None, :]
        )  # (N, K)
        return dist.argmin(1)

    @torch.no_grad()
    def _random_rows(self, flat: torch.Tensor, n: int) -> torch.Tensor:
        idx = torch.randint(len(flat), (n,), device=flat.device)
        return flat[idx]

    @torch.no_grad()
    def _initialize(self, flat: torch.Tensor) -> None:
        self.codebook.copy_(self._random_rows(flat, self.codebook_size))
        self.ema_sum.copy_(self.codebook)
        self.ema_count.fill_(1.0)
        self.initialized.fill_(True)

    @torch.no_grad()
    def _update(self, flat: torch.Tensor, codes: torch.Tensor) -> None:
        counts = torch.bincount(codes, minlength=self.codebook_size).to(flat.dtype)  # (K,)
        sums = torch.zeros_like(self.ema_sum).index_add_(0, codes, flat)  # (K, D)
        self.ema_count.mul_(self.decay).add_(counts, alpha=1 - self.decay)
        self.ema_sum.mul_(self.decay).add_(sums, alpha=1 - self.decay)
        total = self.ema_count.sum()
        smoothed = (self.ema_count + self.epsilon) / (total + self.codebook_size * self.epsilon)
        self.codebook.copy_(self.ema_sum / (smoothed * total)[:, None])
        if self.dead_code_threshold > 0:
            dead = self.ema_count < self.dead_code_threshold * self.ema_count.mean()
            n_dead = int(dead.sum())
            if n_dead:
                fresh = self._random_rows(flat, n_dead)
                self.codebook[dead] = fresh
                self.ema_sum[dead] = fresh
                self.ema_count[dead] = 1.0

    def forward(self, z: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """z (B, T', D_e), mask (B, T') valid frames → codes (B, T'), e (B, T', D_e) float32."""
        with full_precision(z.device):
            # Codebook statistics in float32: the buffers' dtype, whatever autocast made of z.
            flat = z.detach()[mask].to(self.codebook.dtype)  # (N, D_e)
            if self.training and len(flat) and not bool(self.initialized):
                self._initialize(flat)
            codes_flat = self._nearest(flat)  # (N,)
            codes = torch.zeros(z.shape[:2], dtype=torch.long, device=z.device)
            codes[mask] = codes_flat
            e = self.codebook[codes]  # (B, T', D_e), the codebook before this batch's update
            if self.training and len(flat):
                self._update(flat, codes_flat)
        return codes, e


def temporal_jitter(
    x: torch.Tensor, lengths: torch.Tensor, p: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Eq. 11-13: frame t takes frame t−1 with probability p, t+1 with p, itself with 1 − 2p.

    x (B, T', D), lengths (B,). The first frame cannot take t−1 and the last valid one cannot
    take t+1 (they keep their own). Gathering moves gradients to the source frames.
    """
    if p <= 0:
        return x
    b, t, _ = x.shape
    u = torch.rand(b, t, device=x.device, generator=generator)
    pos = torch.arange(t, device=x.device)[None, :].expand(b, t)
    src = pos.clone()
    src = torch.where((u < p) & (pos > 0), pos - 1, src)
    src = torch.where((u >= p) & (u < 2 * p) & (pos < lengths[:, None] - 1), pos + 1, src)
    return torch.gather(x, 1, src[:, :, None].expand_as(x))


class Decoder(nn.Module):
    """Figure 3b: Conv1d and ×2 upsampling, speaker embedding at every convolution.

    (B, T', D_e) codes + speaker ids (B,) → (B, T' · stride, F).
    """

    def __init__(self, cfg: VQVAEConfig, n_speakers: int) -> None:
        super().__init__()
        self.speakers = nn.Embedding(n_speakers, cfg.speaker_dim)
        c, s = cfg.decoder_channels, cfg.speaker_dim
        self.inp = nn.Conv1d(cfg.code_dim + s, c, 3, padding=1)
        n_up = int(math.log2(cfg.stride))
        self.ups = nn.ModuleList(nn.Conv1d(c + s, c, 3, padding=1) for _ in range(n_up))
        self.mid = nn.Conv1d(c + s, c, 3, padding=1)
        self.out = nn.Conv1d(c, cfg.input_dim, 1)

    def _cat(self, h: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.cat([h, v[:, :, None].expand(-1, -1, h.shape[2])], dim=1)

    def forward(
        self, e: torch.Tensor, speakers: torch.Tensor, lengths: torch.Tensor | None = None
    ) -> torch.Tensor:
        """e (B, T', D_e), speakers (B,), lengths (B,) valid code frames → (B, T' · stride, F).

        With ``lengths``, every layer's input is zero past a file's last frame, as a
        convolution's own padding is for a file decoded alone: a file's reconstruction does not
        depend on the files batched with it (padding code frames hold ``codebook[0]``)."""
        v = self.speakers(speakers)  # (B, D_v)
        valid = None if lengths is None else length_mask(lengths, e.shape[1])[:, None, :]

        def layer_input(h: torch.Tensor) -> torch.Tensor:  # (B, C, T) → (B, C + D_v, T)
            x = self._cat(h, v)
            return x if valid is None else x * valid  # speaker channels included

        h = F.relu(self.inp(layer_input(e.transpose(1, 2))))  # (B, C, T')
        for conv in self.ups:
            h = F.interpolate(h, scale_factor=2, mode="nearest")  # (B, C, 2T')
            if valid is not None:
                valid = valid.repeat_interleave(2, dim=2)  # (B, 1, 2T')
            h = F.relu(conv(layer_input(h)))
        h = F.relu(self.mid(layer_input(h)))
        return self.out(h).transpose(1, 2)  # (B, T, F)


@dataclass
class VQVAEOutput:
    """What :meth:`VQVAE.forward` returns; losses are scalars, weights not yet applied."""

    recon: torch.Tensor  # (B, T, F), normalised feature space
    target: torch.Tensor  # (B, T, F), the normalised input
    z: torch.Tensor  # (B, T', D_e) encoder outputs
    codes: torch.Tensor  # (B, T') codebook indices
    code_lengths: torch.Tensor  # (B,)
    reconstruction: torch.Tensor
    commitment: torch.Tensor
    smoothing: torch.Tensor
    loss: torch.Tensor  # reconstruction + γ·commitment + λ·smoothing


class VQVAE(nn.Module):
    """The VQ-VAE of Figure 2: encoder, EMA codebook, speaker-conditioned decoder."""

    def __init__(self, cfg: VQVAEConfig, n_speakers: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = (
            TransformerEncoder(cfg) if cfg.encoder == "transformer" else ConvEncoder(cfg)
        )
        self.quantizer = VectorQuantizerEMA(
            cfg.codebook_size,
            cfg.code_dim,
            cfg.ema_decay,
            cfg.ema_epsilon,
            cfg.dead_code_threshold,
        )
        self.pre_quant = (
            nn.Identity()
            if cfg.pre_quant_norm == "none"
            else nn.LayerNorm(cfg.code_dim, elementwise_affine=cfg.pre_quant_norm == "layer")
        )
        self.decoder = Decoder(cfg, n_speakers)
        self.register_buffer("feat_mean", torch.zeros(cfg.input_dim))
        self.register_buffer("feat_std", torch.ones(cfg.input_dim))

    def set_normalization(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Mean and standard deviation (F,) of the training features (:func:`input_statistics`)."""
        self.feat_mean.copy_(torch.as_tensor(mean, dtype=torch.float32))
        self.feat_std.copy_(torch.as_tensor(std, dtype=torch.float32).clamp_min(1e-5))

    def quantize(
        self, feats: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """feats (B, T, F) raw → (x normalised, z, codes, e, code_lengths)."""
        x = (feats - self.feat_mean) / self.feat_std  # (B, T, F)
        z, code_lengths = self.encoder(x, lengths)  # (B, T', D_e)
        z = self.pre_quant(z)
        codes, e = self.quantizer(z, length_mask(code_lengths, z.shape[1]))
        return x, z, codes, e, code_lengths

    @torch.no_grad()
    def encode(
        self, feats: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Discrete units of raw feats (B, T, F): codes (B, T'), vectors (B, T', D_e), lengths."""
        _, _, codes, e, code_lengths = self.quantize(feats, lengths)
        return codes, e, code_lengths

    def forward(
        self,
        feats: torch.Tensor,
        lengths: torch.Tensor,
        speakers: torch.Tensor,
        target: torch.Tensor | None = None,
    ) -> VQVAEOutput:
        """feats (B, T, F) raw features, lengths (B,), speakers (B,) → :class:`VQVAEOutput`.

        ``target`` (B, T, F), raw features like ``feats``: what the decoder reconstructs, in
        the voice of ``speakers``, instead of ``feats`` (a paired file's frames aligned to
        ``feats``: correspondence training); normalised as the input is."""
        x, z, codes, e, code_lengths = self.quantize(feats, lengths)
        if target is not None:
            x = (target - self.feat_mean) / self.feat_std
        zq = z + (e - z).detach()  # straight-through: value e, gradient to z
        if self.training and self.cfg.jitter > 0:
            zq = temporal_jitter(zq, code_lengths, self.cfg.jitter)
        recon = self.decoder(zq, speakers, code_lengths)[:, : x.shape[1]]  # (B, T, F)
        if recon.shape[1] < x.shape[1]:
            recon = F.pad(recon, (0, 0, 0, x.shape[1] - recon.shape[1]))
        rec = reconstruction_loss(x, recon, lengths)
        com = commitment_loss(z, e, code_lengths)
        smooth = temporal_smoothing_loss(z, code_lengths)
        loss = rec + self.cfg.commitment * com + self.cfg.smoothing * smooth
        return VQVAEOutput(recon, x, z, codes, code_lengths, rec, com, smooth, loss)
