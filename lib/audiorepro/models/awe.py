"""Multi-view acoustic word embeddings with transformer encoders (Rhodes & Bains; chapter 04).

Two encoders map the two views of a word into one space (the paper's Figure 4):

- the **acoustic view** f(x): a linear projection of the MFCC + Δ + ΔΔ frames to ``d_model``,
  the sinusoidal positional encoding of eq. (5) with base 5000, a PyTorch
  ``TransformerEncoder`` (paper: N = 6 layers, h = 4 heads, d_ff = 1024, ReLU, dropout 0.1,
  post-norm as in Vaswani et al.), and the mean of its outputs over the frames (§3.2.1);
- the **phoneme view** g(c): an embedding of the phone ids (0 is padding), the same positional
  encoding, a ``TransformerEncoder`` with N in {1, 4, 8} layers and h in {1, 4, 8, 16, 32}
  heads (§3.2.2), and either the mean of its outputs ("Avg") or the output at the first phone
  ("Rep", §3.2.3).

For CPU-sized presets, ``frame_stack`` > 1 concatenates that many consecutive frames into one
input step before the projection (the paper uses single frames, ``frame_stack = 1``), which
shortens the sequences the acoustic encoder attends over.

The inputs of both encoders are multiplied by sqrt(d_model) before the positional encoding is
added, as in Vaswani et al. (2017, §3.4), which the paper's "all of these components work as
expected" leaves implicit; without it the encoding dominates the mean over positions and all
embeddings start nearly parallel, where the cosine distance has almost no gradient.

Padded positions are masked in self-attention (``src_key_padding_mask``) and excluded from the
means. The paper writes d_ff = 1028 once in §4; 1024 (its §3.2.1) is used. The optional output
projections of §3.2 are not explored in the paper and not built here.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from audiorepro.config import ConfigError, field

POOLINGS = ("avg", "rep")


@dataclasses.dataclass(frozen=True)
class AWEModelConfig:
    """Sizes of the two encoders (paper values as defaults)."""

    feature_dim: int = field(39, help="input frame dimension F (39; the paper says 36)")
    num_phones: int = field(45, help="phone vocabulary size (ids 1..num_phones; 0 is padding)")
    d_model: int = field(256, help="model dimension of both encoders (= embedding dimension)")
    acoustic_layers: int = field(6, help="layers N of the acoustic encoder")
    acoustic_heads: int = field(4, help="attention heads h of the acoustic encoder")
    acoustic_ff: int = field(1024, help="feed-forward dimension d_ff of the acoustic encoder")
    phone_layers: int = field(4, help="layers N of the phoneme encoder (paper: 1, 4, 8)")
    phone_heads: int = field(16, help="attention heads h of the phoneme encoder (1..32)")
    phone_ff: int = field(1024, help="feed-forward dimension d_ff of the phoneme encoder")
    phone_pooling: str = field("avg", help="avg: mean over phones | rep: first phone's output")
    dropout: float = field(0.1, help="dropout on sub-layer outputs and the encoded input")
    pe_base: float = field(5000.0, help="base of the sinusoidal positional encoding, eq. (5)")
    max_len: int = field(
        1000,
        help="positions of the precomputed encoding table; a longer sequence's further "
        "positions are computed on demand by the same eq. (5)",
    )
    frame_stack: int = field(
        1, help="acoustic frames concatenated per input step (paper: 1; >1 shortens for CPU)"
    )

    def __post_init__(self) -> None:
        for name in (
            "feature_dim",
            "num_phones",
            "d_model",
            "acoustic_layers",
            "acoustic_heads",
            "acoustic_ff",
            "phone_layers",
            "phone_heads",
            "phone_ff",
            "max_len",
            "frame_stack",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"AWEModelConfig.{name}: expected an int >= 1, got {value!r}")
        for name in ("acoustic_heads", "phone_heads"):
            if self.d_model % getattr(self, name):
                raise ConfigError(
                    f"AWEModelConfig.{name} = {getattr(self, name)} must divide d_model = "
                    f"{self.d_model}"
                )
        if self.d_model % 2:
            raise ConfigError(f"AWEModelConfig.d_model must be even, got {self.d_model}")
        if self.phone_pooling not in POOLINGS:
            raise ConfigError(
                f"AWEModelConfig.phone_pooling: expected one of {POOLINGS}, got "
                f"{self.phone_pooling!r}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"AWEModelConfig.dropout must be in [0, 1), got {self.dropout}")
        if not self.pe_base > 1.0:
            raise ConfigError(f"AWEModelConfig.pe_base must be > 1, got {self.pe_base}")


def sinusoidal_encoding(max_len: int, d_model: int, base: float = 5000.0) -> torch.Tensor:
    """The table of eq. (5): ``PE[t, 2i] = sin(t / base^(2i/d))``, ``PE[t, 2i+1] = cos(...)``.

    Returns:
        (max_len, d_model) float32.
    """
    t = torch.arange(max_len, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)[None, :]  # (1, D/2)
    angle = t / base ** (two_i / d_model)  # (T, D/2)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """(B, T) bool, True at padded positions (``t >= lengths[b]``), for ``src_key_padding_mask``."""
    return torch.arange(max_len, device=lengths.device)[None, :] >= lengths[:, None]


def masked_mean(hidden: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Mean of ``hidden`` (B, T, D) over the first ``lengths[b]`` positions -> (B, D)."""
    valid = (~padding_mask(lengths, hidden.shape[1])).to(hidden.dtype)[..., None]  # (B, T, 1)
    return (hidden * valid).sum(dim=1) / lengths.clamp(min=1)[:, None].to(hidden.dtype)


class _Encoder(nn.Module):
    """Input layer -> + PE -> dropout -> post-norm TransformerEncoder (shared by both views)."""

    def __init__(
        self,
        d_model: int,
        layers: int,
        heads: int,
        d_ff: int,
        dropout: float,
        pe: torch.Tensor,
        pe_base: float = 5000.0,
    ) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            d_model, heads, d_ff, dropout, activation="relu", batch_first=True, norm_first=False
        )
        # Nested tensors would zero padded outputs only in eval mode; the masked pooling makes
        # them irrelevant, and keeping one code path keeps train and eval alike.
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", pe, persistent=False)
        self.pe_base = pe_base
        self.scale = math.sqrt(d_model)

    def positions(self, steps: int) -> torch.Tensor:
        """(steps, D) encodings of positions ``0 .. steps - 1``: the rows of the precomputed
        table, and past its end rows computed by the same eq. (5) for this call only (the
        table is not grown, so that every process of a run keeps buffers of one shape).

        Eq. (5) is defined for any position; the table only saves recomputing it. The rows
        within it are the table's own, so a sequence of up to ``max_len`` steps is encoded
        bit for bit as before."""
        table = self.pe.shape[0]
        if steps <= table:
            return self.pe[:steps]
        longer = sinusoidal_encoding(steps, self.pe.shape[1], self.pe_base)  # (steps, D)
        return torch.cat([self.pe, longer[table:].to(self.pe.device, self.pe.dtype)])

    def encode(self, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, T, D) inputs already projected/embedded -> (B, T, D) encoder outputs."""
        # Inputs are scaled by sqrt(d_model) before the encoding is added (Vaswani et al. 2017,
        # §3.4); unscaled, the positional encoding dominates and all embeddings start alike.
        h = self.dropout(inputs * self.scale + self.positions(inputs.shape[1]))  # (B, T, D)
        return self.encoder(h, src_key_padding_mask=padding_mask(lengths, inputs.shape[1]))


class AcousticEncoder(nn.Module):
    """f(x): MFCC frames (B, T, F) with ``lengths`` (B,) -> embeddings (B, d_model), §3.2.1."""

    def __init__(self, config: AWEModelConfig) -> None:
        super().__init__()
        self.frame_stack = config.frame_stack
        self.projection = nn.Linear(config.feature_dim * config.frame_stack, config.d_model)
        pe = sinusoidal_encoding(config.max_len, config.d_model, config.pe_base)
        self.body = _Encoder(
            config.d_model,
            config.acoustic_layers,
            config.acoustic_heads,
            config.acoustic_ff,
            config.dropout,
            pe,
            config.pe_base,
        )

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Masked mean of the encoder outputs over the frames."""
        k = self.frame_stack
        if k > 1:
            # Concatenate k consecutive frames (zero-padded at the end): (B, ceil(T/k), kF).
            b, t, f = feats.shape
            # Frames past a sequence's end are zeroed, so that padding never enters a step.
            feats = feats.masked_fill(padding_mask(lengths, t)[..., None], 0.0)
            feats = nn.functional.pad(feats, (0, 0, 0, (-t) % k)).reshape(b, -1, k * f)
            lengths = torch.div(lengths + k - 1, k, rounding_mode="floor")
        h = self.body.encode(self.projection(feats), lengths)  # (B, T', D)
        return masked_mean(h, lengths)  # (B, D)


class PhoneEncoder(nn.Module):
    """g(c): phone ids (B, L) (0 = padding) with ``lengths`` (B,) -> (B, d_model), §3.2.2-3."""

    def __init__(self, config: AWEModelConfig) -> None:
        super().__init__()
        self.pooling = config.phone_pooling
        self.embedding = nn.Embedding(config.num_phones + 1, config.d_model, padding_idx=0)
        pe = sinusoidal_encoding(config.max_len, config.d_model, config.pe_base)
        self.body = _Encoder(
            config.d_model,
            config.phone_layers,
            config.phone_heads,
            config.phone_ff,
            config.dropout,
            pe,
            config.pe_base,
        )

    def forward(self, phones: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """ "Avg": masked mean over phones; "Rep": the output at the first phone."""
        h = self.body.encode(self.embedding(phones), lengths)  # (B, L, D)
        if self.pooling == "rep":
            return h[:, 0]  # (B, D)
        return masked_mean(h, lengths)  # (B, D)


class MultiViewAWE(nn.Module):
    """Both views: ``model(feats, lengths, phones, phone_lengths) -> (emb_x, emb_c)``.

    Args:
        config: the encoder sizes.

    Shapes:
        feats (B, T, F) float, lengths (B,) int; phones (W, L) int (0 padding), phone_lengths
        (W,); returns acoustic embeddings (B, D) and word embeddings (W, D), D = d_model.
    """

    def __init__(self, config: AWEModelConfig) -> None:
        super().__init__()
        self.config = config
        self.acoustic = AcousticEncoder(config)
        self.phones = PhoneEncoder(config)

    def forward(
        self,
        feats: torch.Tensor,
        lengths: torch.Tensor,
        phones: torch.Tensor,
        phone_lengths: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """f(x) for the segments and g(c) for the (unique) words."""
        return self.acoustic(feats, lengths), self.phones(phones, phone_lengths)


def num_parameters(module: nn.Module) -> int:
    """Trainable parameters of ``module``."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


__all__ = [
    "AWEModelConfig",
    "AcousticEncoder",
    "MultiViewAWE",
    "POOLINGS",
    "PhoneEncoder",
    "masked_mean",
    "num_parameters",
    "padding_mask",
    "sinusoidal_encoding",
]
