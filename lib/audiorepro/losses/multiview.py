"""The multi-view contrastive loss of the paper's eq. (4), with the intended negative pairing.

For a batch of n acoustic segments x_i with embeddings f(x_i) and the m *unique* words of the
batch with embeddings g(c_w) (segment i is an utterance of word w_i), three hinge terms per
segment, all anchored on the positive pair's distance ``d_i = d(f(x_i), g(c_{w_i}))``::

    obj0_i = mean_{top-k w != w_i}     [m + d_i - d(f(x_i), g(c_w))]_+   acoustic anchor, words
    obj1_i = mean_{top-k w != w_i}     [m + d_i - d(g(c_{w_i}), g(c_w))]_+   word anchor, words
    obj2_i = mean_{top-k j: w_j != w_i} [m + d_i - d(g(c_{w_i}), f(x_j))]_+   word anchor, segments

"top-k" are the k *most offending* negatives (smallest distance to the anchor; fewer when the
batch holds fewer), as in Settle et al. (2019) and agwe-recipe's ``MultiViewTripletLoss``, which
the paper follows instead of eq. (4)'s single hardest negative (§2.2). The batch loss is the
mean (or sum) over segments of ``obj0 + obj1 + obj2``.

**Distance.** The paper writes ``d(a, b) = 1 - <a/|a|, b/|b|>^2`` (``distance="cos2"``); the code
base uses ``1 - cos`` (``distance="cos"``).

**The pairing.** agwe-recipe builds its negative indices with ``torch.cat`` over shifts and reads
them back with ``view(n, m - 1)``, which scrambles rows: many segments see their own word among
their "negatives" (``shared/reference/awe.md`` §3.3). Here every negative set is built from
explicit masks (``w != w_i``; segments of other words), which is what the code meant to do and
what eq. (4) says. Two details of agwe-recipe are not reproduced: its "semi-hard" filter (only
negatives farther than the positive) and its per-call decrement of k from 16 to 8.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from audiorepro.losses.precision import float32, full_precision

DISTANCES = ("cos2", "cos")


def pairwise_distance(a: torch.Tensor, b: torch.Tensor, distance: str = "cos2") -> torch.Tensor:
    """(A, D) x (B, D) -> (A, B): ``1 - cos^2`` ("cos2", eq. 4) or ``1 - cos`` ("cos").

    Computed in float32 with autocast off (half-precision inputs are upcast): the hinge terms
    compare distances that differ by less than bf16's resolution near 1."""
    if distance not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    with full_precision(a.device):
        a, b = float32(a), float32(b)
        cos = F.normalize(a, dim=-1, eps=1e-8) @ F.normalize(b, dim=-1, eps=1e-8).T  # (A, B)
        return 1.0 - cos.square() if distance == "cos2" else 1.0 - cos


def _topk_hinge(
    pos: torch.Tensor, neg: torch.Tensor, valid: torch.Tensor, k: int, margin: float
) -> torch.Tensor:
    """Mean over the k smallest valid ``neg`` per row of ``[margin + pos - neg]_+``.

    Args:
        pos: (R,) positive distances; neg: (R, C) candidate distances; valid: (R, C) bool.

    Returns:
        (R,) the per-row mean (0 for a row without valid negatives).
    """
    kk = min(k, neg.shape[1])
    if kk == 0:
        return pos.new_zeros(pos.shape)
    masked = neg.masked_fill(~valid, float("inf"))
    smallest, _ = torch.topk(masked, kk, dim=1, largest=False)  # (R, kk)
    ok = torch.isfinite(smallest)
    hinge = torch.relu(margin + pos[:, None] - smallest.masked_fill(~ok, 0.0))
    hinge = hinge.masked_fill(~ok, 0.0)
    return hinge.sum(dim=1) / ok.sum(dim=1).clamp(min=1).to(hinge.dtype)


class MultiViewContrastiveLoss(nn.Module):
    """Eq. (4) with top-k negatives: ``loss(emb_x, emb_c, inverse)`` -> scalar.

    Args:
        margin: the margin m (agwe-recipe: 0.5).
        k: how many most offending negatives each term averages over.
        distance: ``"cos2"`` (paper) or ``"cos"`` (code base).
        reduction: ``"mean"`` over segments or ``"sum"`` (agwe-recipe's ``average=false``).

    Shapes:
        emb_x (n, D) acoustic embeddings, emb_c (m, D) embeddings of the batch's unique words,
        inverse (n,) int64 word index of each segment into ``emb_c``.
    """

    def __init__(
        self, margin: float = 0.5, k: int = 8, distance: str = "cos2", reduction: str = "mean"
    ) -> None:
        super().__init__()
        if distance not in DISTANCES:
            raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
        if reduction not in ("mean", "sum"):
            raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an int >= 1, got {k!r}")
        self.margin, self.k, self.distance, self.reduction = float(margin), k, distance, reduction

    def terms(
        self, emb_x: torch.Tensor, emb_c: torch.Tensor, inverse: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Per-segment ``obj0``, ``obj1``, ``obj2``, each (n,)."""
        n, m = emb_x.shape[0], emb_c.shape[0]
        if inverse.shape != (n,):
            raise ValueError(f"inverse: expected shape ({n},), got {tuple(inverse.shape)}")
        if n and (int(inverse.min()) < 0 or int(inverse.max()) >= m):
            raise ValueError(f"inverse: word indices must lie in [0, {m}), got {inverse.tolist()}")
        d_xc = pairwise_distance(emb_x, emb_c, self.distance)  # (n, m)
        d_cc = pairwise_distance(emb_c, emb_c, self.distance)  # (m, m)
        pos = d_xc.gather(1, inverse[:, None]).squeeze(1)  # (n,)
        words = torch.arange(m, device=emb_x.device)
        other_word = inverse[:, None] != words[None, :]  # (n, m): w != w_i
        obj0 = _topk_hinge(pos, d_xc, other_word, self.k, self.margin)
        obj1 = _topk_hinge(pos, d_cc[inverse], other_word, self.k, self.margin)
        # obj2: for each word, its distances to the segments of other words (m, n), then per
        # segment the row of its own word.
        seg_of_other = inverse[None, :] != words[:, None]  # (m, n)
        d_cx = d_xc.T[inverse]  # (n, n): row i = d(g(c_{w_i}), f(x_j))
        obj2 = _topk_hinge(pos, d_cx, seg_of_other[inverse], self.k, self.margin)
        return {"obj0": obj0, "obj1": obj1, "obj2": obj2}

    def forward(
        self, emb_x: torch.Tensor, emb_c: torch.Tensor, inverse: torch.Tensor
    ) -> torch.Tensor:
        """The batch loss: reduction over segments of ``obj0 + obj1 + obj2``."""
        t = self.terms(emb_x, emb_c, inverse)
        per_segment = t["obj0"] + t["obj1"] + t["obj2"]  # (n,)
        return per_segment.mean() if self.reduction == "mean" else per_segment.sum()


__all__ = ["DISTANCES", "MultiViewContrastiveLoss", "pairwise_distance"]
