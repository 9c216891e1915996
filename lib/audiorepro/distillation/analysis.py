"""The ensemble's correspondences over the whole training set, in blocks of bounded memory.

What paper (b) §2 argues, that captions also describe other clips, can be looked at directly:
for every audio, which captions does the ensemble rate highest, and how much probability
p̂_c(c | a) = softmax_c(Ĉ_a· / τ) over *all* training captions do they get (not only a batch's)?
The full Ĉ of a 20,000-audio × 100,000-caption set is 8 GB in float32, so it is never formed:
:func:`top_matches` walks over blocks of ``block_size`` rows × ``block_size`` columns (one
``block_size``² float32 matrix at a time, 64 MB at 4096), keeping per row a running top-k
(ties: the lower column index first) and a running log-sum-exp of Ĉ/τ, so the exact probabilities
of the top-k over the whole set come out. Peak memory: the ensemble's fused rows
((N_a + N_c) · M · D numbers) plus one block and the (N, k) results
(``bench/bench_distillation.py`` measures it).

Two summaries build on it: :func:`caption_top1`, the share of training captions whose best clip
is their own (of one stage-1 model, or of the ensemble's Ĉ), and :func:`target_departure`, how
much of the stage-2 targets' mass leaves the one-hot pairs of L_sup in a training batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from audiorepro.distillation.targets import DEFAULT_TAU, batch_targets
from audiorepro.distillation.teachers import TeacherEnsemble

__all__ = [
    "TopMatches",
    "caption_top1",
    "captions_for_clip",
    "target_departure",
    "top_matches",
    "top_matches_dense",
]


class TopMatches(NamedTuple):
    """Per row, the k best columns of Ĉ.

    Attributes:
        indices: (N, k) column indices, best first (ties: lower index first).
        scores: (N, k) Ĉ values.
        log_normaliser: (N,) ``logsumexp`` over *all* columns of Ĉ / τ, so
            ``exp(scores / τ - log_normaliser[:, None])`` are the probabilities p̂ over the
            whole training set.
        tau: the τ of ``log_normaliser``.
    """

    indices: torch.Tensor
    scores: torch.Tensor
    log_normaliser: torch.Tensor
    tau: float

    @property
    def probabilities(self) -> torch.Tensor:
        """(N, k) p̂ of the top-k columns given their row, over the whole set of columns."""
        return (self.scores / self.tau - self.log_normaliser[:, None]).exp()


def _sorted_desc(values: torch.Tensor, indices: torch.Tensor, k: int) -> tuple[torch.Tensor, ...]:
    # A stable descending sort keeps the earlier (lower-index) candidate first among equals.
    order = values.sort(dim=1, descending=True, stable=True).indices[:, :k]
    return values.gather(1, order), indices.gather(1, order)


def _block_top_k(block: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest entries per row of ``block`` (b, c), ties at the k-th value resolved towards
    the lower column, best first; (b, k) values and column positions. ``topk`` alone may pick
    any of tied columns, so it only supplies the k-th value; the selection is exact."""
    kth = block.topk(k, dim=1).values[:, -1:]  # (b, 1)
    greater = block > kth
    equal = block == kth
    need = k - greater.sum(dim=1, keepdim=True)  # tied columns still to take, lowest first
    keep = greater | (equal & (equal.cumsum(dim=1) <= need))
    cols = keep.nonzero()[:, 1].reshape(block.shape[0], k)  # ascending within each row
    return _sorted_desc(block.gather(1, cols), cols, k)


def top_matches(
    ensemble: TeacherEnsemble,
    k: int = 10,
    rows: str = "audio",
    block_size: int = 4096,
    tau: float = DEFAULT_TAU,
) -> TopMatches:
    """For every audio (``rows="audio"``), the k captions with the highest Ĉ, or for every
    caption (``rows="caption"``) the k audios, computed blockwise.

    Args:
        ensemble: the teachers' fused rows.
        k: matches per row (at most the number of columns).
        rows: ``"audio"`` (rows audios, columns captions: p̂_c(c | a)) or ``"caption"`` (rows
            captions, columns audios: p̂_a(a | c)).
        block_size: rows and columns per block; memory of the block is block_size² × 4 bytes.
        tau: temperature of the log-normaliser (0.05).

    Returns:
        :class:`TopMatches` with N = number of rows.
    """
    if rows not in ("audio", "caption"):
        raise ValueError(f"rows must be 'audio' or 'caption', got {rows!r}")
    left, right = (
        (ensemble.audio, ensemble.caption)
        if rows == "audio"
        else (ensemble.caption, ensemble.audio)
    )
    num_rows, num_cols = left.shape[0], right.shape[0]
    if not 1 <= k <= num_cols:
        raise ValueError(f"k must lie in [1, {num_cols}], got {k}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    out_idx = torch.empty(num_rows, k, dtype=torch.long)
    out_val = torch.empty(num_rows, k)
    out_lse = torch.empty(num_rows)
    for r0 in range(0, num_rows, block_size):
        block_rows = left[r0 : r0 + block_size].float()  # (b, M·D)
        best_val = torch.full((block_rows.shape[0], 0), float("-inf"))
        best_idx = torch.zeros((block_rows.shape[0], 0), dtype=torch.long)
        lse = torch.full((block_rows.shape[0],), float("-inf"))
        for c0 in range(0, num_cols, block_size):
            block = block_rows @ right[c0 : c0 + block_size].float().T  # (b, c) of Ĉ
            lse = torch.logaddexp(lse, (block / tau).logsumexp(dim=1))
            val, idx = _block_top_k(block, min(k, block.shape[1]))
            idx = idx + c0
            best_val, best_idx = _sorted_desc(
                torch.cat([best_val, val], dim=1), torch.cat([best_idx, idx], dim=1), k
            )
            del block
        out_idx[r0 : r0 + block_size] = best_idx
        out_val[r0 : r0 + block_size] = best_val
        out_lse[r0 : r0 + block_size] = lse
    return TopMatches(out_idx, out_val, out_lse, tau)


def top_matches_dense(
    audio: Sequence[torch.Tensor],
    caption: Sequence[torch.Tensor],
    k: int = 10,
    rows: str = "audio",
    tau: float = DEFAULT_TAU,
) -> TopMatches:
    """The straightforward reference: Ĉ = (1/M) Σ_m cos(A_m, T_m) as one full (N_a, N_c) matrix,
    then a stable sort per row. Memory N_a × N_c; for tests and the benchmark only.

    Args:
        audio: M tensors (N_a, D), the teachers' audio embeddings in the same row order.
        caption: M tensors (N_c, D).
    """
    norm = torch.nn.functional.normalize
    full = sum(
        norm(a.float(), dim=1) @ norm(c.float(), dim=1).T
        for a, c in zip(audio, caption, strict=True)
    ) / len(audio)
    if rows == "caption":
        full = full.T
    order = full.sort(dim=1, descending=True, stable=True).indices[:, :k]
    return TopMatches(order, full.gather(1, order), (full / tau).logsumexp(dim=1), tau)


def captions_for_clip(
    ensemble: TeacherEnsemble,
    audio_id: str,
    k: int = 5,
    exclude: Sequence[str] = (),
    tau: float = DEFAULT_TAU,
) -> list[tuple[str, float, float]]:
    """The captions the ensemble believes describe clip ``audio_id`` besides ``exclude`` (its
    own captions): up to k ``(caption, Ĉ, p̂_c(caption | clip))`` with p̂_c over all captions."""
    row = ensemble.audio_rows([audio_id])
    scores = ensemble.similarity(row, torch.arange(len(ensemble.captions)))[0]  # (N_c,)
    log_norm = (scores / tau).logsumexp(dim=0)
    skip = set(exclude)
    order = scores.sort(descending=True, stable=True).indices.tolist()
    found = []
    for j in order:
        caption = ensemble.captions[j]
        if caption in skip:
            continue
        value = float(scores[j])
        found.append((caption, value, float((scores[j] / tau - log_norm).exp())))
        if len(found) == k:
            break
    return found


def caption_top1(
    ensemble: TeacherEnsemble,
    audio_ids: Sequence[str],
    captions: Sequence[str],
    block_size: int = 4096,
) -> float:
    """Training-caption top-1: the share of the training pairs ``(audio_ids[k], captions[k])``
    whose caption's highest-Ĉ clip, among all the ensemble's training clips, is its own.

    "Its own" is any clip the same caption text was written for in these pairs (a text given
    to two clips is right on either, as page 02's "paired clip"). With one teacher Ĉ is that
    model's cosine similarity, so the number says how well a stage-1 model fits the captions
    stage 2 trains on; with M teachers it is the ensemble's, the targets' quality. Ties: the
    clip with the lower row index wins (:func:`top_matches`). A random ranking scores about
    1 / (number of clips).
    """
    if len(audio_ids) != len(captions):
        raise ValueError(f"{len(audio_ids)} audio ids for {len(captions)} captions")
    if not captions:
        raise ValueError("caption_top1 of no pairs")
    ensemble.check(audio_ids=audio_ids, captions=captions)
    top = top_matches(ensemble, k=1, rows="caption", block_size=block_size)
    clips_of: dict[str, set[str]] = {}
    for audio_id, caption in zip(audio_ids, captions, strict=True):
        clips_of.setdefault(str(caption), set()).add(str(audio_id))
    best = top.indices[:, 0].tolist()  # per distinct caption, its top clip's row
    hits = [
        ensemble.audio_ids[best[ensemble.caption_index[str(c)]]] in clips_of[str(c)]
        for c in captions
    ]
    return sum(hits) / len(hits)


def target_departure(
    ensemble: TeacherEnsemble,
    audio_ids: Sequence[str],
    captions: Sequence[str],
    *,
    batch_size: int,
    tau: float = DEFAULT_TAU,
    num_batches: int = 32,
    seed: int = 0,
) -> dict[str, float]:
    """How far the stage-2 targets p̂_a, p̂_c depart from the one-hot targets of L_sup, in
    batches of ``batch_size`` training pairs drawn as stage 2 draws them (shuffled epochs).

    In a batch, L_sup gives each caption's column all its mass on the batch's clips of its own
    audio id (salsa's positives) and each clip's row all its mass on its captions. Returned, as
    means over the columns (rows) of ``num_batches`` batches:

    - ``offpair_audio``: 1 − p̂_a(own clips | caption), the mass p̂_a moves elsewhere;
    - ``offpair_caption``: 1 − p̂_c(own captions | clip);
    - ``offpair_uniform``: the same for uniform targets, 1 − positives / B: what targets that
      know nothing give. 0 is the one-hot; L_dist differs from L_sup only by this mass, so near
      0 λ·L_dist is L_sup again (λ = 1 ≈ a doubled L_sup), near the uniform level it teaches
      flat targets.
    """
    n = len(audio_ids)
    if n != len(captions) or n == 0:
        raise ValueError(f"{len(audio_ids)} audio ids for {len(captions)} captions")
    size = min(batch_size, n)
    rng = np.random.default_rng(seed)
    order: list[int] = []
    sums = {"offpair_audio": 0.0, "offpair_caption": 0.0, "offpair_uniform": 0.0}
    count = 0
    for _ in range(num_batches):
        if len(order) < size:
            order += rng.permutation(n).tolist()
        batch, order = order[:size], order[size:]
        ids = [str(audio_ids[i]) for i in batch]
        targets = batch_targets(ensemble, ids, [captions[i] for i in batch], tau, gather=None)
        rows = torch.tensor([ensemble.audio_index[a] for a in ids])
        positive = (rows[:, None] == rows[None, :]).float()  # (B, B): same audio id
        sums["offpair_audio"] += float((1 - (targets.p_audio * positive).sum(0)).sum())
        sums["offpair_caption"] += float((1 - (targets.p_caption * positive).sum(1)).sum())
        sums["offpair_uniform"] += float((1 - positive.sum(0) / size).sum())
        count += size
    return {k: v / count for k, v in sums.items()} | {
        "batch_size": float(size),
        "batches": float(num_batches),
    }
