"""When a score is meaningless, and when it is weak: the checks every metric runs first.

A score refuses (:class:`ScoreError`, a ``ValueError``) what it cannot score: one class only
(every pair positive, AP 1 whatever the embeddings), collapsed embeddings (every row the same
vector: every distance ties, the score is the tie rule's), a ranking of one item. It warns
(:class:`ScoreWarning`, through :func:`warnings.warn`) when the result is computable but
rests on little: a handful of pairs or triplets, one speaker, a cut-off that every query
reaches. Messages name the input and the count. The ``audiorepro`` command prints the warnings
as ``audiorepro: warning: ...`` (:func:`audiorepro.cli.main`); the pages show them under the
cell. The checks of each input kind live with its reader or its metric:

- item files: duplicated items and items listed with two labels
  (:func:`audiorepro.data.recipes.zerospeech.read_item_file`);
- segment tables: duplicated rows and rows listed with two words
  (:func:`audiorepro.data.recordings.read_segments`);
- features of the ABX: constant features, a distance undefined on them, a frame shift that does
  not fit them (:mod:`audiorepro.metrics.abx`, :func:`audiorepro.metrics.dtw.undefined_frames`);
- embeddings and labels of the AP (:func:`check_pair_labels`, :func:`check_not_collapsed`), and
  the table rows they were computed from (:func:`check_no_repeats`);
- scores of the retrieval metrics (:mod:`audiorepro.metrics.retrieval`);
- units of the bitrate (:mod:`audiorepro.metrics.bitrate`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = [
    "FEW",
    "ScoreError",
    "ScoreWarning",
    "check_no_repeats",
    "check_not_collapsed",
    "check_pair_labels",
    "check_speakers",
    "naming",
    "parallel_rows",
    "weak",
]

FEW = 10
"""Fewer positive pairs, triplets or queries than this: the score is printed with a warning."""


class ScoreError(ValueError):
    """An input on which a score would be meaningless: the message names the input and the
    count, and says what to give instead."""


class ScoreWarning(UserWarning):
    """A score that is computable but weak (a handful of pairs, one speaker): printed beside the
    number, which is still returned."""


def weak(message: str, stacklevel: int = 3) -> None:
    """Warn that a score rests on little (:class:`ScoreWarning`)."""
    warnings.warn(message, ScoreWarning, stacklevel=stacklevel)


@contextmanager
def naming(source: Any) -> Iterator[None]:
    """Prefix ``f"{source}: "`` to the :class:`ScoreError` raised and the :class:`ScoreWarning`
    warned inside, so that a check on arrays names the file they came from."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScoreWarning)
        try:
            yield
        except ScoreError as err:
            raise ScoreError(f"{source}: {err}") from None
        finally:
            kept = list(caught)
    for w in kept:
        if issubclass(w.category, ScoreWarning):
            weak(f"{source}: {w.message}", stacklevel=4)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def check_pair_labels(codes: np.ndarray, name: str = "labels") -> int:
    """Same-different pairs of integer label ``codes`` (N,): :class:`ScoreError` when every
    row carries one label (no different-label pair: AP is 1 whatever the distances) or no two
    rows share one (no positive pair); a warning under :data:`FEW` positive pairs. Returns the
    number of positive pairs."""
    n = len(codes)
    counts = np.bincount(codes) if n else np.zeros(0, np.int64)
    counts = counts[counts > 0]
    if len(counts) == 1 and n >= 2:
        raise ScoreError(
            f"{name}: all {n} rows carry one label, so every one of the {n * (n - 1) // 2} "
            "pairs is a same-label pair and AP is 1 whatever the distances: give rows of at "
            "least two labels"
        )
    positives = int((counts * (counts - 1) // 2).sum())
    if positives == 0:
        raise ScoreError(
            f"{name}: no two embeddings share a label, so there is no positive pair "
            f"({n} rows, {len(counts)} labels)"
        )
    if positives < FEW:
        weak(
            f"{name}: the AP rests on {positives} same-label pair(s) of {n} rows: a weak "
            f"estimate; give at least {FEW}"
        )
    return positives


def parallel_rows(x: np.ndarray, tolerance: float = 1e-6) -> bool:
    """Whether the (N, D) rows with a length all point one way (1 - cosine to the first such
    row below ``tolerance``): for the cosine and angular distances, which ignore a row's
    length, they are one vector. Rows of zeros are left aside."""
    x = np.asarray(x)
    first, rows = None, 0
    for start in range(0, len(x), 65536):  # a block at a time: features can be millions
        block = np.asarray(x[start : start + 65536], dtype=np.float64)
        norms = np.linalg.norm(block, axis=1)
        block = block[norms > 0] / norms[norms > 0, None]
        if first is None and len(block):
            first = block[0]
        if len(block) and float((1.0 - block @ first).max()) >= tolerance:
            return False  # most features stop at the first block
        rows += len(block)
    return rows >= 2


def check_not_collapsed(x: np.ndarray, name: str = "embeddings", cosine: bool = False) -> None:
    """:class:`ScoreError` when the (N, D) rows, N >= 2, are all the same vector (collapsed):
    every distance is then 0 and the score is that of the tie rule, not of the model. With
    ``cosine`` (a distance that ignores the rows' lengths) also when they all point one way
    (:func:`parallel_rows`: scaled copies of one vector), or have one dimension (the cosine
    distance of two numbers is 0 or 2: their signs alone)."""
    if len(x) >= 2 and bool((x == x[0]).all()):
        raise ScoreError(
            f"{name}: all {len(x)} rows are the same vector (collapsed embeddings): every "
            "distance is 0, so the score would be the tie rule's, not the model's; check the "
            "model's training (a constant output)"
        )
    if not cosine:
        return
    if x.ndim == 2 and x.shape[1] == 1:
        raise ScoreError(
            f"{name}: one dimension: the cosine distance of two numbers is 0 or 2 (their signs "
            "alone), so the score would be the tie rule's over two distances; score "
            "embeddings of two or more dimensions"
        )
    if parallel_rows(x):
        raise ScoreError(
            f"{name}: all {len(x)} rows point the same way (scaled copies of one vector: "
            "collapsed embeddings for the cosine distance, which ignores their lengths): every "
            "distance is 0, so the score would be the tie rule's, not the model's; check the "
            "model's training (a constant output)"
        )


def check_speakers(speakers: Sequence[Any] | np.ndarray | None, name: str = "speakers") -> None:
    """Warn when every row comes from one speaker: the score says nothing of how the
    representation copes with another voice."""
    if speakers is None:
        return
    spk = np.unique(np.asarray(speakers))
    if len(spk) == 1 and len(np.asarray(speakers)) >= 2:
        weak(
            f"{name}: all {len(np.asarray(speakers))} rows are from one speaker "
            f"({spk[0]!s}): the score says nothing of other voices"
        )


def check_no_repeats(
    keys: Sequence[Any] | np.ndarray, name: str = "rows", what: str = "row"
) -> None:
    """:class:`ScoreError` naming the first entry of ``keys`` (N,) that repeats an earlier one,
    and that earlier one. ``keys`` say what each scored row was computed from (a segments
    table's line): a row scored twice counts twice, and its pair with its copy is a same-label
    pair at distance 0 at the top of the ranking, which raises the AP. Segment tables refuse
    the same repeat when they are read (:func:`audiorepro.data.recordings.read_segments`)."""
    first: dict[Any, int] = {}
    for i, key in enumerate(np.asarray(keys).tolist()):
        if key in first:
            raise ScoreError(
                f"{name}: entry {i} ({what} {key}) repeats entry {first[key]}: a repeated row "
                "counts twice in the score, and its pair with its copy is a same-label pair "
                "at distance 0, which raises the AP; score each row once"
            )
        first[key] = i
