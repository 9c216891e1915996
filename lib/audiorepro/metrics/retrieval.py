"""Retrieval metrics of the DCASE language-based audio retrieval task (R@k, mAP@10).

Text-to-audio (the ranking metric of DCASE 2022/2023 task 6b and 2024 task 8, paper (a) Table 3):
every caption is a query with exactly one relevant audio. With ``r`` the 1-based rank of that
audio, ``R@k = [r <= k]`` and ``AP@10 = 1 / r if r <= 10 else 0``, each averaged over the
queries. This is the official scorer ``eval_script.py`` of xieh97/dcase2022-audio-retrieval
(``shared/reference/retrieval.md`` §2), which reads the submission CSV that
:func:`write_submission_csv` writes; :func:`score_submission` reproduces it on files, also as a
command: ``python -m audiorepro.metrics.retrieval GT_CSV SUBMISSION_CSV``. The 2022 scorer also
prints jackknife 95% intervals: :func:`per_query_metrics` and :func:`jackknife_ci`.

Audio-to-text (:func:`audio_to_text_metrics`): each audio has several relevant captions (five in
ClothoV2). The definition is the DCASE 2023 baseline's ``measure`` (xieh97/dcase2023-audio-
retrieval ``postprocessing/xmodal_retrieval.py``): ``R@k`` is the *fraction* of the relevant
captions ranked in the top k, and ``AP@10 = sum_i (i / r_i) / n_relevant`` over the relevant
captions found in the top 10, with ``r_i`` the rank of the i-th of them; the denominator is the
total number of relevant captions, not ``min(n_relevant, 10)``.

Ties. The official code ranks with numpy's unstable ``argsort``, so on equal scores its order
depends on the CPU's SIMD dispatch. Here the order is deterministic and chosen by ``ties``:

- ``"index"`` (default): among equal scores, the item with the lower index ranks first (a
  stable sort by decreasing score);
- ``"pessimistic"``: relevant items rank after every non-relevant item with the same score;
- ``"optimistic"``: relevant items rank before every non-relevant item with the same score.

Relevant items tied with each other keep index order among themselves (that order does not
change any metric). Scores are compared in their own dtype, so fp16 ties stay ties.

What cannot be ranked is refused (:class:`~audiorepro.metrics.checks.ScoreError`): one item
per query, or every query giving all its items one score (collapsed embeddings: the ranks
would be the tie rule's). A cut-off ``k`` at or past the number of items (every query a hit)
and fewer than :data:`~audiorepro.metrics.checks.FEW` queries are scored with a warning.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from os import PathLike
from pathlib import Path

import numpy as np
import torch

from audiorepro.metrics.checks import FEW, ScoreError, weak

__all__ = [
    "TIES",
    "audio_to_text_metrics",
    "chance_metrics",
    "jackknife_ci",
    "per_query_metrics",
    "read_submission_csv",
    "relevant_ranks",
    "retrieval_metrics",
    "score_submission",
    "top_k_indices",
    "write_submission_csv",
]

TIES = ("index", "pessimistic", "optimistic")

# Queries per block: keeps the (block, n_items) comparison masks in cache.
_BLOCK = 128


def _as_scores(scores: np.ndarray | torch.Tensor) -> np.ndarray:
    """(n_queries, n_items) numpy array of ``scores``; bfloat16 and float16 go to float32
    (exact, so ties are kept)."""
    if isinstance(scores, torch.Tensor):
        scores = scores.detach().cpu()
        if scores.dtype == torch.bfloat16:
            scores = scores.float()
        scores = scores.numpy()
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise ValueError(
            f"scores must be a 2-D (n_queries, n_items) array, got shape {scores.shape}"
        )
    if scores.shape[0] == 0 or scores.shape[1] == 0:
        raise ValueError(f"scores must have at least one query and one item, got {scores.shape}")
    if not (np.issubdtype(scores.dtype, np.floating) or np.issubdtype(scores.dtype, np.integer)):
        raise ValueError(f"scores must be real numbers, got dtype {scores.dtype}")
    if scores.dtype == np.float16:
        # float16 -> float32 is exact and order-preserving (ties stay ties) and numpy compares
        # float32 several times faster.
        scores = scores.astype(np.float32)
    if np.issubdtype(scores.dtype, np.floating):
        nan_rows = np.flatnonzero(np.isnan(scores).any(axis=1))
        if nan_rows.size:
            raise ValueError(
                f"scores contain NaN in {nan_rows.size} row(s), first at query {nan_rows[0]}"
            )
    return scores


def _check_ties(ties: str) -> None:
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    ks = tuple(int(k) for k in ks)
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"ks must be positive integers, got {ks}")
    return ks


def _as_targets(targets: np.ndarray | torch.Tensor | Sequence[int], shape: tuple) -> np.ndarray:
    n_queries, n_items = shape
    if isinstance(targets, torch.Tensor):
        targets = targets.detach().cpu().numpy()
    targets = np.asarray(targets)
    if targets.ndim != 1 or targets.shape[0] != n_queries:
        raise ValueError(
            f"targets must have one item index per query: shape ({n_queries},), "
            f"got {targets.shape}"
        )
    if not np.issubdtype(targets.dtype, np.integer):
        raise ValueError(f"targets must be integer item indices, got dtype {targets.dtype}")
    bad = np.flatnonzero((targets < 0) | (targets >= n_items))
    if bad.size:
        raise ValueError(
            f"targets must lie in [0, {n_items}); query {bad[0]} has target {targets[bad[0]]} "
            f"({bad.size} out of range)"
        )
    return targets.astype(np.int64)


def relevant_ranks(
    scores: np.ndarray | torch.Tensor,
    targets: np.ndarray | torch.Tensor | Sequence[int],
    ties: str = "index",
) -> np.ndarray:
    """1-based rank of each query's one relevant item, items sorted by decreasing score.

    ``rank_j = 1 + #{i : s_ji > s_jt} + (ties among equal scores)`` with ``t = targets[j]`` and
    the tie term ``#{i < t : s_ji = s_jt}`` ("index"), ``#{i != t : s_ji = s_jt}``
    ("pessimistic") or 0 ("optimistic"). See the module docstring.

    Args:
        scores: (n_queries, n_items) similarities, higher = more relevant (numpy or torch).
        targets: (n_queries,) integer index of each query's relevant item.
        ties: "index", "pessimistic" or "optimistic".

    Returns:
        int64 array (n_queries,) of ranks in [1, n_items].
    """
    _check_ties(ties)
    scores = _as_scores(scores)
    targets = _as_targets(targets, scores.shape)
    n_queries, n_items = scores.shape
    ranks = np.empty(n_queries, dtype=np.int64)
    item_index = np.arange(n_items)
    for start in range(0, n_queries, _BLOCK):
        block = scores[start : start + _BLOCK]  # (b, n_items)
        tgt = targets[start : start + _BLOCK]
        target_score = block[np.arange(block.shape[0]), tgt][:, None]  # (b, 1)
        ahead = np.count_nonzero(block > target_score, axis=1)
        if ties == "index":
            ahead += np.count_nonzero(
                (block == target_score) & (item_index[None, :] < tgt[:, None]), axis=1
            )
        elif ties == "pessimistic":
            ahead += np.count_nonzero(block == target_score, axis=1) - 1
        ranks[start : start + _BLOCK] = ahead + 1
    return ranks


def retrieval_metrics(
    scores: np.ndarray | torch.Tensor,
    targets: np.ndarray | torch.Tensor | Sequence[int],
    ks: Sequence[int] = (1, 5, 10),
    ties: str = "index",
) -> dict[str, float]:
    """mAP@10 and R@k with one relevant item per query: the official DCASE text-to-audio scorer.

    For text-to-audio, rows are captions and columns audios, and ``targets[j]`` is the audio
    that caption ``j`` describes (ClothoV2 evaluation split: 5,225 × 1,045). With ``r_j`` the
    1-based rank of query j's relevant item (:func:`relevant_ranks`):
    ``R@k = mean_j [r_j <= k]``, ``mAP@10 = mean_j (1 / r_j if r_j <= 10 else 0)``
    (``shared/reference/retrieval.md`` §2; paper (a) Table 3 reports these × 100).

    Args:
        scores: (n_queries, n_items) similarities, numpy or torch, no NaN.
        targets: (n_queries,) index of each query's relevant item.
        ks: cut-offs for recall.
        ties: "index" (default; lower item index first among equal scores), "pessimistic" or
            "optimistic", see the module docstring.

    Returns:
        ``{"mAP@10": float, "R@1": float, ...}`` (one ``R@k`` per k in ``ks``), fractions in
        [0, 1].
    """
    return {
        name: float(values.mean())
        for name, values in per_query_metrics(scores, targets, ks, ties).items()
    }


def chance_metrics(num_items: int, ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """The expected :func:`retrieval_metrics` of a random ranking: each query's one relevant
    item lands at a rank r uniform on 1..N, so ``mAP@10 = (1/N) Σ_{r=1..min(10, N)} 1/r`` and
    ``R@k = min(k, N) / N`` (fractions). The chance level of a table's mAP@10, e.g. 3 × it as
    the floor a compared run must beat (:func:`audiorepro.reporting.finding`).

    Args:
        num_items: N, the items each query ranks (the evaluation split's recordings).
        ks: cut-offs for recall.
    """
    if num_items < 1:
        raise ValueError(f"num_items must be >= 1, got {num_items}")
    ks = _check_ks(ks)
    out = {"mAP@10": sum(1.0 / r for r in range(1, min(10, num_items) + 1)) / num_items}
    out |= {f"R@{k}": min(k, num_items) / num_items for k in ks}
    return out


ROUNDING_ULPS = 8
"""Scores of one query that differ by at most this many units of rounding of their dtype (the
spacing of floats at the matrix's largest score) are one score: a float32 cosine similarity of
two embeddings that differ by 1e-9 ranks by its rounding, not by what the model saw."""


def _collapsed(scores: np.ndarray) -> bool:
    """Whether every query's scores are one value to within :data:`ROUNDING_ULPS` roundings."""
    spread = scores.max(axis=1) - scores.min(axis=1)
    if np.issubdtype(scores.dtype, np.integer):
        return bool((spread == 0).all())
    top = float(np.abs(scores).max())
    if not np.isfinite(top):  # an infinite score: only equal values are one score
        return bool((scores == scores[:, :1]).all())
    return bool((spread <= ROUNDING_ULPS * np.spacing(scores.dtype.type(top))).all())


def _check_rankable(scores: np.ndarray | torch.Tensor, ks: Sequence[int]) -> None:
    """ScoreError for scores with nothing to rank; warnings for a weak ranking."""
    scores = _as_scores(scores)
    n_queries, n_items = scores.shape
    if n_items < 2:
        raise ScoreError(
            f"scores: 1 item to rank for each of the {n_queries} queries: every query ranks "
            "it first, whatever the model; give at least two items"
        )
    if _collapsed(scores):
        raise ScoreError(
            f"scores: each of the {n_queries} queries gives its {n_items} items one score, to "
            f"within {ROUNDING_ULPS} roundings of {scores.dtype} (collapsed embeddings?): the "
            "ranks would be the tie rule's or the rounding's, not the model's"
        )
    trivial = [k for k in ks if k >= n_items]
    if trivial:
        weak(
            f"scores: {', '.join(f'R@{k}' for k in trivial)} count every query as a hit: only "
            f"{n_items} items to rank",
            4,
        )
    if n_queries < FEW:
        weak(f"scores: the metrics rest on {n_queries} queries: a weak estimate", 4)


def per_query_metrics(
    scores: np.ndarray | torch.Tensor,
    targets: np.ndarray | torch.Tensor | Sequence[int],
    ks: Sequence[int] = (1, 5, 10),
    ties: str = "index",
) -> dict[str, np.ndarray]:
    """The per-query values that :func:`retrieval_metrics` averages: ``AP@10`` under the key
    ``"mAP@10"`` and ``[r <= k]`` under ``"R@k"``, each a float64 array (n_queries,). For
    confidence intervals (:func:`jackknife_ci`) or paired comparisons of two systems. Scores
    with nothing to rank are refused, weak ones warned about (module docstring)."""
    ks = _check_ks(ks)
    ranks = relevant_ranks(scores, targets, ties=ties)
    _check_rankable(scores, ks)
    out = {"mAP@10": np.where(ranks <= 10, 1.0 / ranks, 0.0)}
    for k in ks:
        out[f"R@{k}"] = (ranks <= k).astype(np.float64)
    return out


def jackknife_ci(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of per-query values with its jackknife confidence interval, as the DCASE 2022
    scorer prints (``astropy.stats.jackknife_stats(values, np.mean, 0.95)``).

    The leave-one-out means ``m_i`` give the standard error
    ``sqrt((n - 1) / n * sum_i (m_i - mean(m))^2)`` (for the mean this is ``std(values, ddof=1)
    / sqrt(n)``) and the interval ``estimate ± z * se`` with the normal quantile ``z`` of
    ``(1 + confidence) / 2``; the estimate is bias-corrected, ``n * mean - (n - 1) *
    mean(m)``, which equals the mean for this statistic.

    Returns:
        ``(estimate, low, high)``.
    """
    from scipy.stats import norm

    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size < 2:
        raise ValueError(f"need a 1-D array of at least 2 values, got shape {values.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = values.size
    estimate = float(values.mean())
    se = float(values.std(ddof=1) / np.sqrt(n))
    z = float(norm.ppf(0.5 + confidence / 2))
    return estimate, estimate - z * se, estimate + z * se


def _as_relevance_mask(
    relevant: np.ndarray | torch.Tensor | Sequence[Sequence[int]], shape: tuple
) -> np.ndarray:
    """Boolean (n_queries, n_items) mask from a mask or from per-query index lists."""
    n_queries, n_items = shape
    if isinstance(relevant, torch.Tensor):
        relevant = relevant.detach().cpu().numpy()
    if isinstance(relevant, np.ndarray) and relevant.dtype == bool:
        if relevant.shape != shape:
            raise ValueError(
                f"a boolean relevance mask must have the shape of scores {shape}, "
                f"got {relevant.shape}"
            )
        mask = relevant
    else:
        if len(relevant) != n_queries:
            raise ValueError(
                f"relevant must list the relevant items of each of the {n_queries} queries, "
                f"got {len(relevant)} entries"
            )
        mask = np.zeros(shape, dtype=bool)
        for j, items in enumerate(relevant):
            idx = np.asarray(items)
            if idx.size == 0:
                raise ValueError(f"query {j} has no relevant item")
            if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
                raise ValueError(
                    f"relevant[{j}] must be a 1-D list of integer item indices, got {items!r}"
                )
            if idx.size and (idx.min() < 0 or idx.max() >= n_items):
                raise ValueError(f"relevant[{j}] has an index outside [0, {n_items}): {items!r}")
            if np.unique(idx).size != idx.size:
                raise ValueError(f"relevant[{j}] lists an item twice: {items!r}")
            mask[j, idx] = True
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ValueError(f"query {empty[0]} has no relevant item ({empty.size} such queries)")
    return mask


def multi_relevant_ranks(
    scores: np.ndarray | torch.Tensor,
    relevant: np.ndarray | torch.Tensor | Sequence[Sequence[int]],
    ties: str = "index",
) -> tuple[np.ndarray, np.ndarray]:
    """Ranks of all relevant items of every query.

    For a relevant item ``r`` of query ``j``: ``rank = 1 + #{i : s_ji > s_jr}`` plus, among the
    items with score ``s_jr``, the items before it: those with a lower index ("index"); every
    non-relevant one and the relevant ones with a lower index ("pessimistic"); the relevant ones
    with a lower index ("optimistic").

    Args:
        scores: (n_queries, n_items).
        relevant: boolean (n_queries, n_items) mask, or per query a list of item indices.
        ties: see the module docstring.

    Returns:
        ``(query, rank)``: int64 arrays over all (query, relevant item) pairs, query-major.
    """
    _check_ties(ties)
    scores = _as_scores(scores)
    mask = _as_relevance_mask(relevant, scores.shape)
    n_items = scores.shape[1]
    item_index = np.arange(n_items)
    queries, ranks = [], []
    for start in range(0, scores.shape[0], _BLOCK):
        block = scores[start : start + _BLOCK]
        rel = mask[start : start + _BLOCK]
        q_local, items = np.nonzero(rel)  # (P,)
        rows = block[q_local]  # (P, n_items)
        rel_rows = rel[q_local]
        s = block[q_local, items][:, None]  # (P, 1)
        equal = rows == s
        before = item_index[None, :] < items[:, None]
        ahead = np.count_nonzero(rows > s, axis=1)
        if ties == "index":
            ahead += np.count_nonzero(equal & before, axis=1)
        elif ties == "pessimistic":
            ahead += np.count_nonzero(equal & ~rel_rows, axis=1)
            ahead += np.count_nonzero(equal & rel_rows & before, axis=1)
        else:
            ahead += np.count_nonzero(equal & rel_rows & before, axis=1)
        queries.append(q_local + start)
        ranks.append(ahead + 1)
    return np.concatenate(queries), np.concatenate(ranks).astype(np.int64)


def audio_to_text_metrics(
    scores: np.ndarray | torch.Tensor,
    relevant: np.ndarray | torch.Tensor | Sequence[Sequence[int]],
    ks: Sequence[int] = (1, 5, 10),
    ties: str = "index",
) -> dict[str, float]:
    """mAP@10 and R@k with several relevant items per query (DCASE 2023 baseline definition).

    For audio-to-text, rows are audios and columns captions; ``relevant[a]`` lists the (five)
    captions written for audio ``a``. Per query with ``n`` relevant items at sorted ranks
    ``r_1 < r_2 < ...``: ``R@k = #{i : r_i <= k} / n`` and
    ``AP@10 = sum_{i : r_i <= 10} (i / r_i) / n``; each is averaged over the queries (xieh97/
    dcase2023-audio-retrieval ``measure``; ``shared/reference/retrieval.md`` §2). With one
    relevant item per query this equals :func:`retrieval_metrics`.

    Args:
        scores: (n_queries, n_items) similarities, numpy or torch, no NaN.
        relevant: boolean (n_queries, n_items) mask, or per query a sequence of item indices
            (each query needs at least one).
        ks: cut-offs for recall.
        ties: "index", "pessimistic" or "optimistic", see the module docstring.

    Returns:
        ``{"mAP@10": float, "R@1": float, ...}``, fractions in [0, 1].
    """
    ks = _check_ks(ks)
    queries, ranks = multi_relevant_ranks(scores, relevant, ties=ties)
    _check_rankable(scores, ks)
    n_queries = int(queries.max()) + 1 if queries.size else 0
    n_relevant = np.bincount(queries, minlength=n_queries).astype(np.float64)
    # Position of each relevant item among its query's relevant items, sorted by rank (1-based).
    order = np.lexsort((ranks, queries))
    queries, ranks = queries[order], ranks[order]
    first = np.searchsorted(queries, np.arange(n_queries))
    hit_index = np.arange(queries.size) - first[queries] + 1
    precision = np.where(ranks <= 10, hit_index / ranks, 0.0)
    ap = np.bincount(queries, weights=precision, minlength=n_queries) / n_relevant
    out = {"mAP@10": float(ap.mean())}
    for k in ks:
        hits = np.bincount(queries, weights=(ranks <= k).astype(np.float64), minlength=n_queries)
        out[f"R@{k}"] = float(np.mean(hits / n_relevant))
    return out


def top_k_indices(
    scores: np.ndarray | torch.Tensor, k: int = 10, ties: str = "index"
) -> np.ndarray:
    """Indices of the k best items per query, best first; equal scores in index order.

    ``ties`` is accepted for symmetry and must be "index": without relevance labels the
    pessimistic and optimistic orders are undefined.

    Returns:
        int64 (n_queries, min(k, n_items)).
    """
    if ties != "index":
        raise ValueError(f"top_k_indices ranks without labels; ties must be 'index', got {ties!r}")
    scores = _as_scores(scores)
    k = min(int(k), scores.shape[1])
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    # A stable sort of the negated scores keeps lower indices first among equal scores.
    order = np.argsort(-scores.astype(np.float64), axis=1, kind="stable")
    return order[:, :k]


def write_submission_csv(
    path: str | PathLike,
    captions: Sequence[str],
    file_names: Sequence[str],
    scores: np.ndarray | torch.Tensor,
    k: int = 10,
) -> Path:
    """Write the DCASE text-to-audio submission: ``caption,file_name_1,...,file_name_10``.

    One row per caption (query), the ``k`` best audio file names best first, ties in index
    order (:func:`top_k_indices`). Fields are quoted by the csv module where needed (captions
    with commas), which the official scorer's ``pandas.read_csv`` reads back exactly.

    Args:
        path: output CSV path (parent folders are created).
        captions: (n_captions,) caption strings, the rows of ``scores``; must be unique.
        file_names: (n_audios,) audio file names, the columns of ``scores``.
        scores: (n_captions, n_audios) similarities.
        k: list length (10 in the challenge; needs ``n_audios >= k``).

    Returns:
        the path written.
    """
    scores = _as_scores(scores)
    if len(captions) != scores.shape[0] or len(file_names) != scores.shape[1]:
        raise ValueError(
            f"scores {scores.shape} must be (len(captions)={len(captions)}, "
            f"len(file_names)={len(file_names)})"
        )
    if scores.shape[1] < k:
        raise ValueError(f"need at least k={k} audio files, got {scores.shape[1]}")
    seen: dict[str, int] = {}
    for j, caption in enumerate(captions):
        if caption in seen:
            raise ValueError(
                f"caption {j} repeats caption {seen[caption]} ({caption!r}); the DCASE scorer "
                "keys rows by caption string, so captions must be unique"
            )
        seen[caption] = j
    top = top_k_indices(scores, k)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["caption"] + [f"file_name_{i}" for i in range(1, k + 1)])
        for caption, row in zip(captions, top, strict=True):
            writer.writerow([caption] + [file_names[i] for i in row])
    return path


def _submission_rows(path: Path, k: int) -> dict[str, tuple[int, list[str]]]:
    """``{caption: (line, [file names])}`` of a submission CSV; format errors name the line."""
    expected = ["caption"] + [f"file_name_{i}" for i in range(1, k + 1)]
    out: dict[str, tuple[int, list[str]]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header != expected:
            raise ValueError(f"{path}:1: header must be {','.join(expected)}, got {header}")
        for line, row in enumerate(reader, start=2):
            if len(row) != k + 1:
                raise ValueError(f"{path}:{line}: expected {k + 1} fields, got {len(row)}")
            if row[0] in out:
                raise ValueError(
                    f"{path}:{line}: caption {row[0]!r} appears twice (first on line "
                    f"{out[row[0]][0]})"
                )
            repeated = sorted({f for f in row[1:] if row[1:].count(f) > 1})
            if repeated:
                raise ValueError(
                    f"{path}:{line}: file(s) {repeated} listed more than once in one row; a "
                    "ranking lists each file at most once"
                )
            out[row[0]] = (line, row[1:])
    return out


def read_submission_csv(path: str | PathLike, k: int = 10) -> dict[str, list[str]]:
    """Read a submission CSV written by :func:`write_submission_csv` (or any DCASE entry).

    Returns ``{caption: [file_name_1, ..., file_name_k]}``. Raises ``ValueError`` naming the file
    and line for a wrong header, a row with the wrong number of fields, a repeated caption, or a
    file listed twice in one row.
    """
    return {c: files for c, (_, files) in _submission_rows(Path(path), k).items()}


_MAX_PROBLEMS = 20


def score_submission(
    gt_csv: str | PathLike, submission_csv: str | PathLike, k: int = 10
) -> dict[str, float]:
    """The official DCASE scorer on files: Clotho-format ground truth vs a submission CSV.

    ``gt_csv`` has the header ``file_name,caption_1,...,caption_5`` (ClothoV2 captions CSV);
    every caption is a query whose relevant file is its row's ``file_name``. With ``r`` the
    position of that file in the submitted list (absent: no hit), ``R@k = [r <= k]`` for k in
    (1, 5, 10) and ``AP@10 = 1 / r`` (xieh97/dcase2022-audio-retrieval ``eval_script.py``).
    Raises ``ValueError`` naming the file and line for a repeated GT caption (the official
    script silently keeps the last), and listing every problem of the submission with its line:
    GT captions without a row, captions that are not in the ground truth, file names that are
    not in it, a file repeated within a row (the official script would score all of these).
    """
    gt_csv = Path(gt_csv)
    cap2file: dict[str, str] = {}
    with open(gt_csv, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or header[0] != "file_name" or len(header) < 2:
            raise ValueError(
                f"{gt_csv}:1: header must be file_name,caption_1,...,caption_5, got {header}"
            )
        for line, row in enumerate(reader, start=2):
            if len(row) != len(header):
                raise ValueError(f"{gt_csv}:{line}: expected {len(header)} fields, got {len(row)}")
            for caption in row[1:]:
                if caption in cap2file:
                    raise ValueError(f"{gt_csv}:{line}: caption {caption!r} appears twice")
                cap2file[caption] = row[0]
    rows = _submission_rows(Path(submission_csv), k)
    known = set(cap2file.values())
    problems = [
        f"{submission_csv}: no row for ground-truth caption {c!r}"
        for c in cap2file
        if c not in rows
    ]
    for caption, (line, files) in rows.items():
        if caption not in cap2file:
            problems.append(f"{submission_csv}:{line}: caption {caption!r} is not in {gt_csv}")
        unknown = [f for f in files if f not in known]
        if unknown:
            problems.append(
                f"{submission_csv}:{line}: {len(unknown)} file name(s) not in {gt_csv}: "
                f"{unknown[:3]}"
            )
    if problems:
        shown = problems[:_MAX_PROBLEMS]
        more = len(problems) - len(shown)
        raise ValueError(
            f"{len(problems)} problem(s) in the submission:\n  "
            + "\n  ".join(shown)
            + (f"\n  ... and {more} more" if more else "")
        )
    predictions = {c: files for c, (_, files) in rows.items()}
    ranks = np.array(
        [
            predictions[c].index(f) + 1 if f in predictions[c] else k + 1
            for c, f in cap2file.items()
        ]
    )
    out = {"mAP@10": float(np.mean(np.where(ranks <= 10, 1.0 / ranks, 0.0)))}
    for cut in (1, 5, 10):
        out[f"R@{cut}"] = float(np.mean(ranks <= cut))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m audiorepro.metrics.retrieval GT_CSV SUBMISSION_CSV``: score a submission.

    Prints mAP@10, R@1, R@5 and R@10 × 100 (:func:`score_submission`); a malformed or incomplete
    file prints the error and exits with status 1.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m audiorepro.metrics.retrieval",
        description="Score a DCASE text-to-audio submission CSV against Clotho-format captions.",
    )
    parser.add_argument("gt_csv", help="file_name,caption_1,...,caption_5")
    parser.add_argument("submission_csv", help="caption,file_name_1,...,file_name_10")
    args = parser.parse_args(argv)
    try:
        metrics = score_submission(args.gt_csv, args.submission_csv)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for name, value in metrics.items():
        print(f"{name:7s} {100 * value:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
