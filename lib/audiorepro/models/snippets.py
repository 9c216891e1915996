"""Long audio through a fixed-length encoder: embed non-overlapping snippets, average the real ones.

PaSST's learnable time encoding covers 10 s, so paper (a) §3.4 cuts longer recordings (ClothoV2
clips last up to 30 s) into segments, embeds each and averages the embeddings over time; the
segment length is the subject of its Figure 1 (2, 5, 10, 15 s with PaSST-S20). As in salsa
(``models/audio/base.py``, ``shared/reference/retrieval.md`` §3), snippets do not overlap, and
only the snippets that contain real audio are averaged: with ``n = ceil(length / snippet)``, the
first ``n`` snippets of a clip count, so a 12 s clip in a batch padded to 30 s uses two 10 s
snippets (the second mostly padding) and ignores the third. A batch no longer than one snippet
is embedded unsplit. Snippets that are pure padding are not even computed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["embed_snippets", "snippet_mask"]


def snippet_mask(lengths: torch.Tensor, snippet_frames: int, num_snippets: int) -> torch.Tensor:
    """Which snippets contain real audio: (B, S) bool, ``s * snippet_frames < lengths[b]``."""
    starts = torch.arange(num_snippets, device=lengths.device) * snippet_frames
    return starts[None, :] < lengths[:, None]


def embed_snippets(
    encoder_fn: Callable[[torch.Tensor], torch.Tensor],
    feats: torch.Tensor,
    lengths: torch.Tensor | None,
    snippet_frames: int,
    pad_value: float = 0.0,
    max_batch: int | None = None,
) -> torch.Tensor:
    """Embed each clip as the mean embedding of its non-overlapping snippets with real audio.

    Args:
        encoder_fn: maps a (N, C, F, L) batch of snippets to embeddings (N, D), e.g.
            ``lambda x: passt(x)[1]``.
        feats: (B, C, F, T) log-mel batch (the encoder's input layout; a (B, F, T) batch is
            taken as C = 1), zero-padded or padded with the front end's silence after each clip.
        lengths: (B,) frames of real audio per clip, in [1, T]; ``None`` means all T frames.
        snippet_frames: snippet length L in frames (1000 = 10 s at a 10 ms hop for PaSST-N;
            at most the encoder's ``max_frames``).
        pad_value: fills the last snippet when T is not a multiple of L (choose the log-mel of
            silence, e.g. ``(log(1e-5) + 4.5) / 5`` for :class:`~audiorepro.features.PasstMel`,
            to match zero-padded waveforms).
        max_batch: most snippets per ``encoder_fn`` call (None: all at once).

    Returns:
        emb (B, D): per clip, the mean over its first ``ceil(lengths[b] / L)`` snippets.
    """
    if feats.ndim == 3:
        feats = feats.unsqueeze(1)
    if feats.ndim != 4:
        raise ValueError(f"feats must be (B, C, F, T) or (B, F, T), got {tuple(feats.shape)}")
    batch, _, _, frames = feats.shape
    if snippet_frames < 1:
        raise ValueError(f"snippet_frames must be >= 1, got {snippet_frames}")
    if lengths is None:
        lengths = torch.full((batch,), frames, dtype=torch.long, device=feats.device)
    lengths = torch.as_tensor(lengths, device=feats.device)
    if lengths.shape != (batch,):
        raise ValueError(f"lengths must have shape ({batch},), got {tuple(lengths.shape)}")
    if bool((lengths < 1).any()) or bool((lengths > frames).any()):
        raise ValueError(f"lengths must lie in [1, {frames}] frames, got {lengths.tolist()}")
    if frames <= snippet_frames:
        return encoder_fn(feats)  # (B, D)
    num_snippets = -(-frames // snippet_frames)
    pad = num_snippets * snippet_frames - frames
    if pad:
        feats = torch.nn.functional.pad(feats, (0, pad), value=pad_value)
    snippets = feats.unfold(3, snippet_frames, snippet_frames)  # (B, C, F, S, L)
    snippets = snippets.permute(0, 3, 1, 2, 4)  # (B, S, C, F, L)
    valid = snippet_mask(lengths, snippet_frames, num_snippets)  # (B, S)
    chosen = snippets[valid]  # (N, C, F, L), N = number of real snippets
    if max_batch is None:
        emb = encoder_fn(chosen)  # (N, D)
    else:
        emb = torch.cat([encoder_fn(part) for part in chosen.split(max_batch)])
    clip = valid.nonzero()[:, 0]  # (N,) clip index of each real snippet
    total = emb.new_zeros(batch, emb.shape[1]).index_add(0, clip, emb)  # (B, D)
    return total / valid.sum(1, keepdim=True).to(emb.dtype)
