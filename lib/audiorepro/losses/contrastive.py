"""Symmetric NT-Xent over a batch of audio-caption pairs (paper §2, equation 2; salsa L_sup).

With ``C`` the (B, B) matrix of cosine similarities between the batch's audios (rows) and
captions (columns), divided by the temperature ``tau``, and ``I`` the positive mask
(``I[i, j] = 1`` when caption ``j`` belongs to the audio of item ``i``; the identity when every
audio appears once)::

    L = -1/2 * ( mean over I of log_softmax(C, dim=1)  +  mean over I of log_softmax(C, dim=0) )

the mean running over all positive entries, as salsa computes it. Batch items that share an
audio are positives of each other, so a batch holding two captions of one clip does not push
them apart.

Under several processes (``accelerate launch``) the loss is computed on the **global** batch:
embeddings and audio ids are all-gathered with ``torch.distributed.nn.functional.all_gather``,
whose backward sends each process the gradient of its own shard summed over processes. Every
process computes the same global loss; DDP then averages the parameter gradients over
processes, which gives exactly the gradient of the one-process loss on the concatenated batch.

Under mixed precision (bf16/fp16 autocast) the cosine similarities, the temperature division and
both log-softmax normalisers run in float32 with autocast off, on upcast embeddings: a bf16 cosine
has about three significant digits, and logits of 1/τ = 20 would overflow fp16's exp.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from audiorepro.losses.precision import float32, full_precision


def positive_mask(audio_ids: torch.Tensor) -> torch.Tensor:
    """(B,) integer audio ids → (B, B) bool, True where two items share their audio."""
    return audio_ids[:, None] == audio_ids[None, :]


def nt_xent(
    audio_emb: torch.Tensor,
    text_emb: torch.Tensor,
    audio_ids: torch.Tensor | None = None,
    tau: float | torch.Tensor = 0.05,
) -> torch.Tensor:
    """Symmetric NT-Xent with a multi-positive mask (paper eq. 2, salsa's reduction).

    Args:
        audio_emb: (B, D) audio embeddings (normalised here).
        text_emb: (B, D) caption embeddings; row ``i`` was written for audio ``i``.
        audio_ids: (B,) integers identifying each item's audio (``None``: all distinct).
        tau: temperature (a float or a 0-d tensor; its absolute value is used).

    Returns:
        A scalar loss.
    """
    if audio_emb.shape != text_emb.shape or audio_emb.ndim != 2:
        raise ValueError(
            f"audio_emb and text_emb must both be (B, D), got {tuple(audio_emb.shape)} and "
            f"{tuple(text_emb.shape)}"
        )
    batch_size = audio_emb.shape[0]
    if audio_ids is None:
        audio_ids = torch.arange(batch_size, device=audio_emb.device)
    return nt_xent_logits(cosine_logits(audio_emb, text_emb, tau), audio_ids)


def cosine_logits(
    audio_emb: torch.Tensor, text_emb: torch.Tensor, tau: float | torch.Tensor
) -> torch.Tensor:
    """(B_a, D), (B_c, D) → (B_a, B_c) cosine similarities divided by ``|tau|``, computed in
    float32 with autocast off (half-precision embeddings are upcast)."""
    with full_precision(audio_emb.device):
        a = F.normalize(float32(audio_emb), dim=-1)
        t = F.normalize(float32(text_emb), dim=-1)
        tau = float32(torch.as_tensor(tau, device=a.device)).abs()
        return a @ t.T / tau  # (B_a, B_c) audios x captions


def nt_xent_logits(logits: torch.Tensor, audio_ids: torch.Tensor) -> torch.Tensor:
    """NT-Xent of :func:`nt_xent` from the (B, B) logits (cosine / τ, rows audios, columns
    captions) and the (B,) audio ids: the half-sum of the mean log-probability of the positives
    over captions (rows) and over audios (columns). Chapter 02 computes its distillation loss
    from the same logits. Half-precision logits are upcast; the normalisers run in float32 with
    autocast off."""
    positives = positive_mask(audio_ids.to(logits.device))  # (B, B)
    with full_precision(logits.device):
        logits = float32(logits)
        audio_to_text = logits.log_softmax(dim=1)[positives].mean()
        text_to_audio = logits.log_softmax(dim=0)[positives].mean()
        return -0.5 * (audio_to_text + text_to_audio)


def _world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """All-gather (B_local, ...) tensors of every process → (B_global, ...), rank order.

    Shards may differ in length (the last batch of an epoch): they are padded for the
    collective and trimmed after it. Gradients flow back to the local shard (summed over the
    processes that used it). Integer tensors are gathered without gradients. One process:
    ``x`` itself.
    """
    world = _world_size()
    if world == 1:
        return x
    size = torch.tensor([x.shape[0]], device=x.device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    sizes_int = [int(s.item()) for s in sizes]
    longest = max(sizes_int)
    if x.shape[0] < longest:
        pad = x.new_zeros((longest - x.shape[0], *x.shape[1:]))
        x = torch.cat([x, pad])
    if x.is_floating_point():
        gathered = _AllGatherWithGrad.apply(x)  # (world * longest, ...)
    else:
        parts = [torch.zeros_like(x) for _ in range(world)]
        dist.all_gather(parts, x)
        gathered = torch.cat(parts)
    parts = gathered.split(longest)
    return torch.cat([p[:n] for p, n in zip(parts, sizes_int, strict=True)])


class _AllGatherWithGrad(torch.autograd.Function):
    """All-gather of equal-sized shards whose backward returns to each process the gradient of
    its own shard summed over all processes (each process computed the loss from all shards)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.rank, ctx.size = dist.get_rank(), x.shape[0]
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.size : (ctx.rank + 1) * ctx.size]


class NTXentLoss(nn.Module):
    """NT-Xent with a fixed (default 0.05, salsa) or learnable temperature, over the global batch.

    Args:
        tau: the temperature (paper (b) and salsa: fixed 0.05).
        learnable_tau: learn ``log tau`` (the dcase2023 code's choice) instead of fixing it.
        gather: all-gather embeddings across processes so the negatives are the global batch.
    """

    def __init__(
        self, tau: float = 0.05, *, learnable_tau: bool = False, gather: bool = True
    ) -> None:
        super().__init__()
        if not tau > 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        self.log_tau = nn.Parameter(torch.tensor(math.log(tau)), requires_grad=learnable_tau)
        self.gather = gather

    @property
    def tau(self) -> torch.Tensor:
        """The current temperature (0-d tensor)."""
        return self.log_tau.exp()

    def forward(
        self,
        audio_emb: torch.Tensor,
        text_emb: torch.Tensor,
        audio_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, D), (B, D), (B,) → scalar loss over the global batch."""
        if audio_ids is None:
            audio_ids = torch.arange(audio_emb.shape[0], device=audio_emb.device)
        if self.gather:
            audio_emb = gather_with_grad(audio_emb)  # (B_global, D)
            text_emb = gather_with_grad(text_emb)  # (B_global, D)
            audio_ids = gather_with_grad(audio_ids)  # (B_global,)
        return nt_xent(audio_emb, text_emb, audio_ids, self.tau)
