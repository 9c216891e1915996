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

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from audiorepro.losses.contrastive import NTXentLoss
from audiorepro.models.snippets import embed_snippets

SILENCE_LOG_MEL = (math.log(1e-5) + 4.5) / 5
"""PaSST's normalised log-mel of a zero waveform: what zero-padded audio looks like."""


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
    ) -> None:
        super().__init__()
        self.audio_encoder = audio_encoder
        self.text_encoder = text_encoder
        self.audio_projection = nn.Linear(audio_dim, embed_dim)
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
        return self.text_projection(self.text_encoder(captions))  # (B, embed_dim)

    @staticmethod
    def similarity(audio_emb: torch.Tensor, text_emb: torch.Tensor) -> torch.Tensor:
        """Cosine similarity (paper eq. 1): (N_a, D), (N_c, D) → (N_a, N_c)."""
        return F.normalize(audio_emb, dim=-1) @ F.normalize(text_emb, dim=-1).T

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
