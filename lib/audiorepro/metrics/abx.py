"""The ZeroSpeech 2019 ABX discriminability error, computed exactly as the official scorer.

Definition (ABXpy as driven by ``zerospeech2020``; ``shared/reference/zerospeech.md`` §1.2-1.6):

- **Items** come from an item file ``#file onset offset #phone prev-phone next-phone speaker``.
  The frames of an item are selected from its file's features by one of two conventions:

  - ``frame_shift=None``, the 2019 one: frame ``i`` of an ``N``-frame file sits at the relative
    time ``i / N`` and the item takes the frames with ``onset <= i / N <= offset``. Items must
    then be whole files given in relative time (onset 0, offset >= (N - 1) / N, e.g. 1); an
    item that keeps only part of its file or ends past 1 is an error (:func:`item_overrun`).
  - ``frame_shift`` in seconds, libri-light's rule: frames
    ``[ceil(onset / frame_shift - 0.5), floor(offset / frame_shift - 0.5))``; an item that runs
    past its features is an error, never clipped, and so is a file whose items are all
    ``0 1`` (relative whole files, read here as the first second of each file).

- **Triplets** (A, B, X): A and X have the same phone, B another phone, and all three the same
  context (previous and next phone). ``across``: A and B from one speaker, X from another;
  ``within``: all from one speaker and X is not A. Every triplet is enumerated.
- **Distance**: DTW of the frame distances, path-normalised, computed as d(A, X) and d(B, X)
  (:mod:`audiorepro.metrics.dtw`): ``angular`` (the official ``cosine``), ``kl``, or
  ``levenshtein`` (the unnormalised edit distance between the sequences of frames, frames equal
  only when all their values are).
- **Score**: 1 if d(A, X) < d(B, X), 1/2 on a tie (including NaN distances, which compare as
  neither smaller nor larger; ``kl`` on frames that are not distributions, which would give
  them, is refused), 0 otherwise; averaged over the triplets of a cell (phone of A,
  phone of B, speaker of A/B, speaker of X, context), then over contexts within (speakers,
  phones), then over speaker pairs within an ordered phone pair, then over ordered phone pairs.
  The error is ``100 * (1 - mean)``.

The fast path computes every DTW distance that some triplet needs once (the frame-distance
matrix of a pair of items is shared by its two orders, and the across and within triplets of
:func:`abx_modes` share one table of distances; :func:`audiorepro.metrics.dtw.partner_dtw`) and
scores all triplets of a cell in a jitted loop; :func:`abx_error` equals a triplet-by-triplet
enumeration to the last bit (``tests/test_abx.py``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pandas as pd

from audiorepro.data.recipes.zerospeech import (
    AbxItem,
    ZeroSpeechFormatError,
    read_embedding_file,
    read_item_file,
    write_item_file,
)
from audiorepro.metrics.checks import FEW, ScoreError, naming, parallel_rows, weak
from audiorepro.metrics.dtw import partner_dtw, undefined_frames

__all__ = [
    "ABX_DISTANCES",
    "AbxResult",
    "abx",
    "abx_error",
    "abx_modes",
    "edit_distance",
    "item_frames",
    "item_overrun",
    "read_submission_folder",
    "relative_time_item_file",
    "select_frames",
]

#: Distances of :func:`abx_error`; ``"cosine"`` is the official name of ``"angular"``.
ABX_DISTANCES = ("angular", "cosine", "kl", "levenshtein")
MODES = ("across", "within")


# ----------------------------------------------------------------------------- inputs


def read_submission_folder(
    folder: str | os.PathLike[str], files: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """Read a ZeroSpeech 2019 submission folder (one ``<file>.txt`` per test file).

    Each file is read as the official ABX loader reads it: single-column lines are dropped
    (:func:`audiorepro.data.recipes.zerospeech.read_embedding_file`).

    Args:
        folder: e.g. ``submission/2019/english/test``.
        files: file ids to read (without ``.txt``); default every ``.txt`` in the folder.

    Returns:
        ``{file id: (frames, dim) float64}``. Raises :class:`ZeroSpeechFormatError` naming the
        file (and line) for a missing file or a malformed line.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ZeroSpeechFormatError(folder, None, "not a directory")
    if files is None:
        files = sorted(p.stem for p in folder.glob("*.txt"))
    out = {}
    for name in files:
        path = folder / f"{name}.txt"
        if not path.is_file():
            raise ZeroSpeechFormatError(
                path, None, f"missing embedding file for {name}" + _nested_hint(folder, name)
            )
        out[name] = read_embedding_file(path, drop_single_column=True)
    return out


def _nested_hint(folder: Path, name: str) -> str:
    """A hint when files named ``name`` sit in subfolders of ``folder`` (units of a folder whose
    file names repeat, named by their paths), else ``""``."""
    nested = sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob(f"{Path(name).name}.txt")
    )
    if not nested:
        return ""
    return (
        f"; the folder has {', '.join(nested[:3])}: its files are named by their path under "
        "the encoded folder, so write the items with `audiorepro abx items --audio DIR` (the "
        "folder units encode read)"
    )


def select_frames(
    n_frames: int, onset: float, offset: float, frame_shift: float | None = None
) -> slice:
    """The frames of an item as a slice of ``range(n_frames)``.

    ``frame_shift=None``: frame ``i`` at relative time ``i / n_frames``, kept when
    ``onset <= i / n_frames <= offset`` (the 2019 convention). Otherwise libri-light's
    ``[ceil(onset / frame_shift - 0.5), floor(offset / frame_shift - 0.5))``, clipped to the file.
    """
    if frame_shift is None:
        times = np.arange(n_frames) / n_frames
        kept = np.flatnonzero((onset <= times) & (times <= offset))
        if len(kept) == 0:
            return slice(0, 0)
        return slice(int(kept[0]), int(kept[-1]) + 1)
    start = max(math.ceil(onset / frame_shift - 0.5), 0)
    stop = min(math.floor(offset / frame_shift - 0.5), n_frames)
    return slice(start, max(start, stop))


def relative_time_item_file(
    item_file: str | os.PathLike[str], out_path: str | os.PathLike[str]
) -> Path:
    """Write whole-file items in the 2019 relative time axis: onset 0, offset 1.

    Under ``frame_shift=None`` an item selects the frames ``i`` with ``onset <= i/N <= offset``,
    so an item given in seconds selects only a prefix of a file shorter than its offset's worth
    of frames; written as ``0 .. 1`` it selects every frame, which is what a whole-file item
    means. Every item must start at 0 (:class:`ZeroSpeechFormatError` otherwise); items
    starting at 0 are taken to end at the end of their file, as in the embedded item file.
    """
    items = read_item_file(item_file)
    lines = _item_line_numbers(Path(item_file), len(items))
    for k, item in enumerate(items):
        if item.onset != 0:
            raise ZeroSpeechFormatError(
                item_file, lines[k], f"onset {item.onset} is not 0: not a whole-file item"
            )
    rewritten = [dataclasses.replace(it, onset=0.0, offset=1.0) for it in items]
    return write_item_file(out_path, rewritten)


def _item_line_numbers(path: Path, n_items: int) -> list[int]:
    """1-based line numbers of the items of an item file (the non-blank lines after the header)."""
    with open(path, encoding="utf-8") as f:
        numbers = [k for k, line in enumerate(f, start=1) if line.strip()][1:]
    return numbers if len(numbers) == n_items else list(range(2, n_items + 2))


def item_frames(
    features: Mapping[str, np.ndarray] | str | os.PathLike[str],
    item_file: str | os.PathLike[str],
    frame_shift: float | None = None,
    *,
    shift_known: bool = False,
) -> tuple[list[AbxItem], list[np.ndarray]]:
    """Read an item file and cut each item's frames out of ``features``.

    Returns ``(items, frames)`` with ``frames[k]`` the (n_k, D) float64 frames of item ``k``.
    The frame rule is applied to all items at once (:func:`_item_spans`); an item that breaks
    it is then checked alone for the error message. Unless ``shift_known``, a ``frame_shift``
    under which no file's items reach half its frames is refused (:func:`_check_reach`).

    Raises:
        ZeroSpeechFormatError: naming the item file and line for a malformed line, an
            ``onset >= offset``, a file missing from ``features``, an item selecting no frame or
            not fitting its file under the frame rule (:func:`item_overrun`: never clipped),
            relative-time whole-file items (every item ``0 1``) given a ``frame_shift``;
            naming the feature file for NaN/inf values or a dimension that differs from the
            other files.
    """
    item_file = Path(item_file)
    items = read_item_file(item_file)
    if not items:
        raise ZeroSpeechFormatError(item_file, None, "the item file has no items")
    if frame_shift is not None:
        _refuse_relative_items(items, item_file, frame_shift)
    arrays = _feature_arrays(features, items, item_file)
    lengths = np.array([len(arrays[it.file]) for it in items], dtype=np.int64)
    onset = np.array([it.onset for it in items], dtype=np.float64)
    offset = np.array([it.offset for it in items], dtype=np.float64)
    start, stop, ok = _item_spans(lengths, onset, offset, frame_shift)
    for k in np.flatnonzero(~ok):
        start[k], stop[k] = _checked_span(items, int(k), lengths[k], item_file, frame_shift)
    if frame_shift is not None and not shift_known:
        _check_reach(items, lengths, stop, item_file, frame_shift)
    frames = [
        np.ascontiguousarray(arrays[it.file][a:b])
        for it, a, b in zip(items, start.tolist(), stop.tolist(), strict=True)
    ]
    return items, frames


def _refuse_relative_items(items: Sequence[AbxItem], item_file: Path, frame_shift: float) -> None:
    """ZeroSpeechFormatError naming the first item's line when every item of the file (two or
    more) is onset 0, offset 1: whole files in relative time, the form ``abx items`` writes for
    the 2019 rule, which a frame shift would read as the first second of each file (a whole
    table of numbers, silently wrong, whenever every file is longer than a second). A file in
    seconds keeps working when only some of its items happen to be ``0 1``."""
    if len(items) < 2 or any(it.onset != 0.0 or it.offset != 1.0 for it in items):
        return
    first = items[0]
    raise ZeroSpeechFormatError(
        item_file,
        _item_line_numbers(item_file, len(items))[0],
        f"item {first.file} 0-1: all {len(items)} items are onset 0, offset 1, whole files in "
        f"relative time (the 2019 rule, as `audiorepro abx items` writes them), but a frame "
        f"shift ({frame_shift:g} s) reads the times as seconds: each item would be the first "
        "second of its file; score without --frame-shift (frame_shift=None: each whole file, "
        "whatever its length; so too files of exactly 1 s, whose items in seconds are 0 1 as "
        "well), or write the items in seconds (`audiorepro abx items --times seconds`) to "
        "score with a frame shift",
    )


def _feature_arrays(
    features: Mapping[str, np.ndarray] | str | os.PathLike[str],
    items: Sequence[AbxItem],
    item_file: Path,
) -> dict[str, np.ndarray]:
    """The (frames, dim) float64 features of each file of ``items``, checked, file by file in
    the order of their first item (errors as :func:`item_frames`)."""
    first = {}
    for k, item in enumerate(items):
        first.setdefault(item.file, k)
    where: Any = str  # how a feature file is named: its path when read from a folder
    if isinstance(features, (str, os.PathLike)):
        folder = Path(features)
        where = lambda name: folder / f"{name}.txt"  # noqa: E731
        for name, k in first.items():
            if not (folder / f"{name}.txt").is_file():
                raise ZeroSpeechFormatError(
                    item_file,
                    _item_line_numbers(item_file, len(items))[k],
                    f"unknown file {name!r}: no {name}.txt in {folder}"
                    + _nested_hint(folder, name),
                )
        features = read_submission_folder(folder, sorted(first))
    arrays: dict[str, np.ndarray] = {}
    dim_file = None
    for name, k in first.items():
        if name not in features:
            raise ZeroSpeechFormatError(
                item_file,
                _item_line_numbers(item_file, len(items))[k],
                f"unknown file {name!r}: not in the features",
            )
        x = np.asarray(features[name], dtype=np.float64)
        x = x[:, None] if x.ndim == 1 else x
        if x.ndim != 2:
            raise ZeroSpeechFormatError(
                where(name), None, f"features must be (frames, dim), got shape {x.shape}"
            )
        if not np.isfinite(x).all():
            bad = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
            raise ZeroSpeechFormatError(
                where(name), None, f"features contain NaN or inf (first at frame {bad})"
            )
        if dim_file is None:
            dim_file = (x.shape[1], name)
        elif x.shape[1] != dim_file[0]:
            raise ZeroSpeechFormatError(
                where(name),
                None,
                f"features have dimension {x.shape[1]}, but {where(dim_file[1])} has "
                f"{dim_file[0]}",
            )
        arrays[name] = x
    return arrays


def _item_spans(
    lengths: np.ndarray, onset: np.ndarray, offset: np.ndarray, frame_shift: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`select_frames` of every item at once → ``(start, stop, ok)``.

    ``ok`` is false for an item that selects no frame or does not fit its file
    (:func:`item_overrun`), whose ``start``/``stop`` are then meaningless. The arithmetic is
    :func:`select_frames`'s, so the spans are the same: under the 2019 rule a fitting item is a
    whole file (onset 0, ``(N - 1) / N <= offset <= 1``).
    """
    if frame_shift is None:
        ok = (lengths > 0) & (onset <= 0.0) & (offset <= 1.0)
        ok &= (lengths - 1) / np.maximum(lengths, 1) <= offset
        return np.zeros_like(lengths), lengths.copy(), ok
    first = np.ceil(onset / frame_shift - 0.5)
    last = np.floor(offset / frame_shift - 0.5)
    start = np.maximum(first, 0).astype(np.int64)
    stop = np.minimum(last, lengths).astype(np.int64)
    return start, stop, (start < stop) & (last <= lengths)


def _checked_span(
    items: Sequence[AbxItem], k: int, n_frames: int, item_file: Path, frame_shift: float | None
) -> tuple[int, int]:
    """The frames of item ``k`` as ``(start, stop)``; ZeroSpeechFormatError naming its line when
    it selects no frame or does not fit its file."""
    item = items[k]
    kept = select_frames(n_frames, item.onset, item.offset, frame_shift)
    if kept.stop <= kept.start:
        rule = "i/N" if frame_shift is None else f"frame shift {frame_shift} s"
        raise ZeroSpeechFormatError(
            item_file,
            _item_line_numbers(item_file, len(items))[k],
            f"item {item.file} {item.onset}-{item.offset} selects no frame of the "
            f"{n_frames} frames of its file ({rule})",
        )
    problem = item_overrun(n_frames, item.onset, item.offset, frame_shift)
    if problem:
        raise ZeroSpeechFormatError(
            item_file,
            _item_line_numbers(item_file, len(items))[k],
            f"item {item.file} {item.onset}-{item.offset}: {problem}",
        )
    return kept.start, kept.stop


#: With a frame shift, the items must reach at least this share of the frames of some file:
#: a frame shift larger than the features' own makes every item end early in its file.
MIN_REACH = 0.5


def _check_reach(
    items: Sequence[AbxItem],
    lengths: np.ndarray,
    stop: np.ndarray,
    item_file: Path,
    frame_shift: float,
) -> None:
    """ZeroSpeechFormatError when, at ``frame_shift``, no file's items reach :data:`MIN_REACH`
    of its frames: the features have far more frames than the item times imply, so the frame
    shift is not theirs and every item would be scored on the start of its segment only."""
    reach: dict[str, tuple[int, int]] = {}
    for item, n, end in zip(items, lengths.tolist(), stop.tolist(), strict=True):
        reach[item.file] = (max(end, reach.get(item.file, (0, n))[0]), n)
    file, (end, n) = max(reach.items(), key=lambda kv: kv[1][0] / kv[1][1])
    if end >= MIN_REACH * n:
        return
    offsets = {}
    for item in items:
        offsets[item.file] = max(item.offset, offsets.get(item.file, 0.0))
    likely = max(offsets[name] / m for name, (_, m) in reach.items())
    raise ZeroSpeechFormatError(
        item_file,
        None,
        f"at a frame shift of {frame_shift:g} s the items reach at most {100 * end / n:.0f}% "
        f"of their files' frames (file {file}: frames 0-{end - 1} of {n}; {len(reach)} files): "
        f"the features have more frames than the item times imply, so the frame shift is "
        f"likely not theirs and each item would be scored on its start only; give the "
        f"features' own frame shift (--frame-shift, frame_shift=): about {likely:.2g} s if "
        f"the last item of some file ends near its end (a folder written by `audiorepro units "
        f"encode` records its own, and is scored whatever part of the files the items cover)",
    )


_TIME_HINT = (
    "; write relative times (onset 0, offset 1 for a whole file, as `audiorepro abx items` "
    "does) or give the features' frame shift (--frame-shift, frame_shift=) to read the times "
    "as seconds"
)


def item_overrun(
    n_frames: int, onset: float, offset: float, frame_shift: float | None = None
) -> str | None:
    """Why an item does not fit its file's ``n_frames`` under the frame rule, or ``None``.

    - ``frame_shift=None`` (2019): times are relative, the file spans [0, 1], and an item is a
      whole file (reference §1.2): an offset past 1, or an item keeping only some of the frames,
      is wrong. Whole-file items written in seconds are the usual cause: they keep only the
      first part of every file shorter than a second.
    - ``frame_shift`` in seconds: an item needing frames past the end of its features
      (``floor(offset / frame_shift - 0.5) > n_frames``) would be clipped.
    """
    if frame_shift is None:
        if offset > 1:
            return (
                f"offset {offset} runs past the end of its features: the 2019 frame rule (no "
                "frame shift) puts frame i of N at the relative time i/N, and a file ends at 1"
                + _TIME_HINT
            )
        kept = select_frames(n_frames, onset, offset)
        if kept.start > 0 or kept.stop < n_frames:
            return (
                f"keeps frames {kept.start}-{kept.stop - 1} of the {n_frames} frames of its "
                "file, but the 2019 frame rule (no frame shift) reads relative times and an item "
                "is a whole file (onset 0, offset >= (N-1)/N)" + _TIME_HINT
            )
        return None
    stop = math.floor(offset / frame_shift - 0.5)
    if stop > n_frames:
        return (
            f"runs past its features: at a frame shift of {frame_shift} s it needs frames up to "
            f"{stop}, but its file has {n_frames} frames (relative times or another frame "
            "shift?)"
        )
    return None


# ----------------------------------------------------------------------------- kernels


@numba.njit(cache=True)
def _cells(g_start, g_end, g_ctx, g_spk, g_phone, ctx_start, within):  # pragma: no cover
    """Every cell (A group, B group, X group) of the mode: one context, A and B of one speaker
    and different phones, X of A's phone and of another speaker (across) or the same (within)."""
    n_groups = len(g_start)
    out = []
    for ga in range(n_groups):
        c = g_ctx[ga]
        lo, hi = ctx_start[c], ctx_start[c + 1]
        for gb in range(lo, hi):
            if g_spk[gb] != g_spk[ga] or g_phone[gb] == g_phone[ga]:
                continue
            for gx in range(lo, hi):
                if g_phone[gx] != g_phone[ga]:
                    continue
                if within:
                    if g_spk[gx] != g_spk[ga]:
                        continue
                    # X must differ from A, so a one-item A group has no triplet
                    if g_end[ga] - g_start[ga] < 2:
                        continue
                elif g_spk[gx] == g_spk[ga]:
                    continue
                out.append((ga, gb, gx))
    cells = np.empty((len(out), 3), dtype=np.int64)
    for k in range(len(out)):
        cells[k, 0], cells[k, 1], cells[k, 2] = out[k]
    return cells


@numba.njit(cache=True)
def _mark_needed(cells, g_start, g_end, g_ctx, item_ctx_lo, c_base, need):  # pragma: no cover
    """Mark d(i, x) for every A or B item i and X item x of every cell (i != x)."""
    for k in range(cells.shape[0]):
        ga, gb, gx = cells[k, 0], cells[k, 1], cells[k, 2]
        c = g_ctx[ga]
        lo = item_ctx_lo[c]
        n = item_ctx_lo[c + 1] - lo
        for x in range(g_start[gx], g_end[gx]):
            for i in range(g_start[ga], g_end[ga]):
                if i != x:
                    need[c_base[c] + (i - lo) * n + (x - lo)] = True
            for i in range(g_start[gb], g_end[gb]):
                need[c_base[c] + (i - lo) * n + (x - lo)] = True


@numba.njit(cache=True)
def _partner_lists(need, c_base, item_ctx_lo):  # pragma: no cover - jitted
    """The needed pairs as partner lists: item ``a``'s partners are the items ``b > a`` of its
    context with d(a, b) or d(b, a) needed, ``flags`` bit 1 for d(a, b) and bit 2 for d(b, a).

    Returns ``(start, partners, flags)``, the partners of ``a`` at ``start[a]:start[a + 1]``.
    """
    n_items = item_ctx_lo[-1]
    start = np.zeros(n_items + 1, dtype=np.int64)
    for c in range(len(item_ctx_lo) - 1):
        lo, n = item_ctx_lo[c], item_ctx_lo[c + 1] - item_ctx_lo[c]
        for i in range(n):
            for j in range(i + 1, n):
                if need[c_base[c] + i * n + j] or need[c_base[c] + j * n + i]:
                    start[lo + i + 1] += 1
    for a in range(n_items):
        start[a + 1] += start[a]
    partners = np.empty(start[-1], dtype=np.int64)
    flags = np.empty(start[-1], dtype=np.int64)
    for c in range(len(item_ctx_lo) - 1):
        lo, n = item_ctx_lo[c], item_ctx_lo[c + 1] - item_ctx_lo[c]
        for i in range(n):
            t = start[lo + i]
            for j in range(i + 1, n):
                f = need[c_base[c] + i * n + j] + 2 * need[c_base[c] + j * n + i]
                if f:
                    partners[t] = lo + j
                    flags[t] = f
                    t += 1
    return start, partners, flags


@numba.njit(cache=True)
def _fill_distances(
    start, partners, d_ab, d_ba, ctx, c_base, item_ctx_lo, dmat
):  # pragma: no cover
    """Store d(a, b) and d(b, a) of every partner list entry at their places in ``dmat``."""
    for a in range(len(start) - 1):
        c = ctx[a]
        lo, n = item_ctx_lo[c], item_ctx_lo[c + 1] - item_ctx_lo[c]
        for t in range(start[a], start[a + 1]):
            b = partners[t]
            dmat[c_base[c] + (a - lo) * n + (b - lo)] = d_ab[t]
            dmat[c_base[c] + (b - lo) * n + (a - lo)] = d_ba[t]


@numba.njit(cache=True, parallel=True)
def _edit_distances(symbols, offsets, pairs):  # pragma: no cover - jitted
    """Unnormalised edit distance between the symbol sequences of each pair of items."""
    out = np.empty(pairs.shape[0])
    for r in numba.prange(pairs.shape[0]):
        i, j = pairs[r, 0], pairs[r, 1]
        out[r] = _edit_distance(
            symbols[offsets[i] : offsets[i + 1]], symbols[offsets[j] : offsets[j + 1]]
        )
    return out


def edit_distance(a: Sequence[Any], b: Sequence[Any]) -> int:
    """The edit distance (insertions, deletions, substitutions, each 1) between two sequences
    of symbols of any hashable kind (phones, code ids): the ``levenshtein`` distance's kernel."""
    ids: dict[Any, int] = {}
    x = np.array([ids.setdefault(v, len(ids)) for v in a], dtype=np.int64)
    y = np.array([ids.setdefault(v, len(ids)) for v in b], dtype=np.int64)
    return int(_edit_distance(x, y))


@numba.njit(cache=True)
def _edit_distance(a, b):  # pragma: no cover - jitted
    n, m = len(a), len(b)
    prev = np.arange(m + 1).astype(np.float64)
    cur = np.empty(m + 1)
    for i in range(1, n + 1):
        cur[0] = i
        for j in range(1, m + 1):
            sub = prev[j - 1] + (0.0 if a[i - 1] == b[j - 1] else 1.0)
            cur[j] = min(prev[j] + 1.0, cur[j - 1] + 1.0, sub)
        prev, cur = cur, prev
    return prev[m]


@numba.njit(cache=True, parallel=True)
def _score_cells(cells, within, g_start, g_end, lookup_start, lookup_n, dmat):  # pragma: no cover
    """Mean triplet score of each cell (``within[k]``: a within-speaker cell, X is not A);
    ``dmat`` holds d(i, x) of context-local indices."""
    n_cells = cells.shape[0]
    scores = np.empty(n_cells)
    counts = np.empty(n_cells, dtype=np.int64)
    for k in numba.prange(n_cells):
        ga, gb, gx = cells[k, 0], cells[k, 1], cells[k, 2]
        base = lookup_start[k]
        n = lookup_n[k]
        total = 0.0
        count = 0
        for x in range(g_start[gx], g_end[gx]):
            for a in range(g_start[ga], g_end[ga]):
                if within[k] and a == x:
                    continue
                dax = dmat[base + a * n + x]
                for b in range(g_start[gb], g_end[gb]):
                    dbx = dmat[base + b * n + x]
                    if dax < dbx:
                        total += 1.0
                    elif dax > dbx:
                        pass
                    else:
                        total += 0.5
                    count += 1
        scores[k] = total / count
        counts[k] = count
    return scores, counts


# ----------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class AbxResult:
    """An ABX evaluation.

    Attributes:
        error: the ABX error in percent, ``100 * (1 - mean score)``.
        cells: one row per cell (``phone_1``, ``phone_2``, ``speaker_1``, ``speaker_2``,
            ``context``, ``score``, ``n_triplets``); ``speaker_1`` is the speaker of A and B.
        by_phone_pair: mean score per ordered phone pair (``phone_1``, ``phone_2``, ``score``).
        n_triplets: the number of triplets scored.
        n_items: the number of items.
    """

    error: float
    cells: pd.DataFrame
    by_phone_pair: pd.DataFrame
    n_triplets: int
    n_items: int


@dataclass(frozen=True)
class _Layout:
    """Items sorted by (context, speaker, phone), their groups and their contexts' blocks.

    A group is a run of items with the same labels. The distance of items ``i`` and ``x``
    (sorted positions) of context ``c`` lives at ``c_base[c] + (i - lo) * n + (x - lo)`` of a
    flat table, ``lo = item_lo[c]`` and ``n = n_c[c]``: one square block per context.
    """

    order: np.ndarray
    ctx: np.ndarray
    g_start: np.ndarray
    g_end: np.ndarray
    g_ctx: np.ndarray
    g_spk: np.ndarray
    g_phone: np.ndarray
    ctx_start: np.ndarray
    item_lo: np.ndarray
    n_c: np.ndarray
    c_base: np.ndarray
    phones: np.ndarray
    speakers: np.ndarray
    contexts: np.ndarray


def _codes(values: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, codes)``: the sorted distinct labels and each value's index among them."""
    labels, codes = np.unique(np.asarray(values, dtype=str), return_inverse=True)
    return labels, codes.reshape(-1).astype(np.int64)


def _layout(items: Sequence[AbxItem]) -> _Layout:
    """Sort the items and find their groups and context blocks (see :class:`_Layout`)."""
    contexts, ctx = _codes([f"{it.prev_phone} {it.next_phone}" for it in items])
    speakers, spk = _codes([it.speaker for it in items])
    phones, phone = _codes([it.phone for it in items])
    order = np.lexsort((phone, spk, ctx))
    ctx, spk, phone = ctx[order], spk[order], phone[order]
    n_items = len(order)
    change = np.ones(n_items, dtype=bool)
    change[1:] = (ctx[1:] != ctx[:-1]) | (spk[1:] != spk[:-1]) | (phone[1:] != phone[:-1])
    g_start = np.flatnonzero(change).astype(np.int64)
    g_end = np.append(g_start[1:], n_items).astype(np.int64)
    g_ctx = ctx[g_start]
    n_ctx = len(contexts)
    item_lo = np.searchsorted(ctx, np.arange(n_ctx + 1)).astype(np.int64)
    n_c = np.diff(item_lo)
    return _Layout(
        order=order,
        ctx=ctx,
        g_start=g_start,
        g_end=g_end,
        g_ctx=g_ctx,
        g_spk=spk[g_start],
        g_phone=phone[g_start],
        ctx_start=np.searchsorted(g_ctx, np.arange(n_ctx + 1)).astype(np.int64),
        item_lo=item_lo,
        n_c=n_c,
        c_base=np.concatenate([[0], np.cumsum(n_c * n_c)]).astype(np.int64),
        phones=phones,
        speakers=speakers,
        contexts=contexts,
    )


def _mode_cells(layout: _Layout, mode: str) -> np.ndarray:
    """The (A group, B group, X group) cells of ``mode``; ValueError when there is none."""
    lay = layout
    cells = _cells(
        lay.g_start, lay.g_end, lay.g_ctx, lay.g_spk, lay.g_phone, lay.ctx_start, mode == "within"
    )
    if len(cells) == 0:
        rule = (
            "A and B from one speaker, X from another"
            if mode == "across"
            else "all three from one speaker"
        )
        hint = (
            "; with one speaker, score --mode within"
            if mode == "across" and len(lay.speakers) < 2
            else ""
        )
        raise ScoreError(  # named by the item file (naming() in abx_modes)
            f"the item file defines no {mode}-speaker ABX triplet ({len(lay.order)} items, "
            f"{len(lay.speakers)} speaker(s), {len(lay.phones)} label(s); a triplet needs A "
            f"and X of one label and B of another in one context, {rule}){hint}"
        )
    return cells


def _distance_table(
    layout: _Layout, frames: Sequence[np.ndarray], need: np.ndarray, distance: str
) -> np.ndarray:
    """Every needed distance d(i, x) at its place in the flat table (NaN elsewhere).

    Each unordered pair of items is computed once, as one frame matrix whose accumulated cost
    gives both orders (:func:`audiorepro.metrics.dtw.partner_dtw`).
    """
    lay = layout
    start, partners, flags = _partner_lists(need, lay.c_base, lay.item_lo)
    sorted_frames = [frames[k] for k in lay.order]
    lengths = np.array([len(f) for f in sorted_frames], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    stacked = np.concatenate(sorted_frames)
    if distance == "levenshtein":
        # frames are symbols, equal only when every value is: number the distinct rows
        _, symbols = np.unique(stacked, axis=0, return_inverse=True)
        pairs = np.stack([np.repeat(np.arange(len(lengths)), np.diff(start)), partners], axis=1)
        d_ab = _edit_distances(symbols.reshape(-1).astype(np.int64), offsets, pairs)
        d_ba = d_ab  # the edit distance is symmetric
    else:
        d_ab, d_ba = partner_dtw(stacked, offsets, start, partners, flags, distance)
    dmat = np.full(len(need), np.nan)
    _fill_distances(start, partners, d_ab, d_ba, lay.ctx, lay.c_base, lay.item_lo, dmat)
    return dmat


def _scores(
    layout: _Layout, cells: dict[str, np.ndarray], dmat: np.ndarray
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{mode: (scores, counts)}``: the mean triplet score and the number of triplets of each
    cell, the cells of every mode scored in one parallel pass."""
    lay = layout
    every = np.concatenate(list(cells.values()))
    within = np.concatenate([np.full(len(c), mode == "within") for mode, c in cells.items()])
    # Each cell reads its context's block; shift the group indices to context-local ones.
    cell_ctx = lay.g_ctx[every[:, 0]]
    local_start = lay.g_start - lay.item_lo[lay.g_ctx]
    local_end = lay.g_end - lay.item_lo[lay.g_ctx]
    scores, counts = _score_cells(
        every, within, local_start, local_end, lay.c_base[cell_ctx], lay.n_c[cell_ctx], dmat
    )
    ends = np.cumsum([len(c) for c in cells.values()])
    return {
        mode: (scores[end - len(c) : end], counts[end - len(c) : end])
        for (mode, c), end in zip(cells.items(), ends, strict=True)
    }


def _mode_result(
    layout: _Layout, cells: np.ndarray, scores: np.ndarray, counts: np.ndarray
) -> AbxResult:
    """The ABX of one mode from its cells' scores: means over contexts, speaker pairs, then
    phone pairs, with the per-cell and per-phone-pair tables."""
    lay = layout
    cell_ctx = lay.g_ctx[cells[:, 0]]
    codes = {
        "phone_1": lay.g_phone[cells[:, 0]],
        "phone_2": lay.g_phone[cells[:, 1]],
        "speaker_1": lay.g_spk[cells[:, 0]],
        "speaker_2": lay.g_spk[cells[:, 2]],
    }
    # Means over the label codes, which sort as the labels do: grouping integers is faster than
    # grouping strings, and the groups and the order of their values are the same.
    by_speakers = (
        pd.DataFrame({**codes, "score": scores}).groupby(list(codes), sort=True)["score"].mean()
    )
    by_pair = by_speakers.groupby(level=["phone_1", "phone_2"]).mean()
    table = pd.DataFrame(
        {
            "phone_1": lay.phones[codes["phone_1"]],
            "phone_2": lay.phones[codes["phone_2"]],
            "speaker_1": lay.speakers[codes["speaker_1"]],
            "speaker_2": lay.speakers[codes["speaker_2"]],
            "context": lay.contexts[cell_ctx],
            "score": scores,
            "n_triplets": counts,
        }
    )
    by_phone_pair = pd.DataFrame(
        {
            "phone_1": lay.phones[by_pair.index.get_level_values("phone_1")],
            "phone_2": lay.phones[by_pair.index.get_level_values("phone_2")],
            "score": by_pair.to_numpy(),
        }
    )
    return AbxResult(
        error=100.0 * (1.0 - float(by_pair.mean())),
        cells=table,
        by_phone_pair=by_phone_pair,
        n_triplets=int(counts.sum()),
        n_items=len(lay.order),
    )


def _abx_from_frames(
    items: Sequence[AbxItem], frames: Sequence[np.ndarray], distance: str, modes: Sequence[str]
) -> dict[str, AbxResult]:
    """The ABX of each mode from items and their frames; the distances are computed once.

    The across and within triplets need disjoint sets of distances (X of another speaker or of
    the same one), so one table holds both and each pair's frame matrix is computed once.
    """
    layout = _layout(items)
    cells = {mode: _mode_cells(layout, mode) for mode in modes}
    need = np.zeros(int(layout.c_base[-1]), dtype=np.bool_)
    for mode_cells in cells.values():
        _mark_needed(
            mode_cells,
            layout.g_start,
            layout.g_end,
            layout.g_ctx,
            layout.item_lo,
            layout.c_base,
            need,
        )
    _check_features(items, frames, distance)
    dmat = _distance_table(layout, frames, need, distance)
    scores = _scores(layout, cells, dmat)
    results = {mode: _mode_result(layout, cells[mode], *scores[mode]) for mode in modes}
    for mode, result in results.items():
        if mode == "within" and len(layout.speakers) == 1:
            weak(
                f"all {result.n_items} items are from one speaker ({layout.speakers[0]}): the "
                "within-speaker ABX says nothing of other voices",
                4,
            )
        if result.n_triplets < FEW:
            weak(
                f"the {mode}-speaker ABX rests on {result.n_triplets} triplet(s): a weak estimate",
                4,
            )
    return results


def _check_features(items: Sequence[AbxItem], frames: Sequence[np.ndarray], distance: str) -> None:
    """ScoreError for features the ABX cannot score meaningfully, naming the file, the frame
    and the count: constant features (every triplet a tie: 50 whatever the model), a
    ``kl`` distance on frames that are not distributions (NaN distances, ties), ``levenshtein``
    on real-valued frames (no frame value in two items: the edit distance counts lengths)."""
    files = {}
    for item, x in zip(items, frames, strict=True):
        files.setdefault(item.file, x)
    stacked = np.concatenate(frames)
    if len(stacked) >= 2 and bool((stacked == stacked[0]).all()):
        n_frames = sum(len(x) for x in files.values())
        raise ScoreError(
            f"constant features: all {n_frames} frames of the {len(files)} files are the same "
            "vector (collapsed units?), so every distance ties and the ABX is 50 whatever "
            "the model"
        )
    if distance in ("angular", "cosine") and parallel_rows(stacked):
        n_frames = sum(len(x) for x in files.values())
        raise ScoreError(
            f"constant features for the {distance} distance: all {n_frames} frames of the "
            f"{len(files)} files point the same way (scaled copies of one vector: collapsed "
            "units?), and the distance ignores a frame's length, so every distance ties and "
            "the ABX is 50 whatever the model"
        )
    if distance == "kl":
        for item, x in zip(items, frames, strict=True):
            bad = undefined_frames(x, distance)
            if bad is not None:
                n_bad = sum(undefined_frames(f, distance) is not None for f in files.values())
                raise ScoreError(
                    f"--distance kl: {item.file} frame {bad[0]} {bad[1]} ({n_bad} of the "
                    f"{len(files)} files have such frames): kl reads each frame as a "
                    "probability distribution (non-negative, not all 0), and its distances "
                    "would be NaN; use --distance angular for codebook vectors or other "
                    "real-valued features"
                )
    if distance == "levenshtein":
        _, symbols = np.unique(stacked, axis=0, return_inverse=True)
        owner = np.repeat(np.arange(len(frames)), [len(x) for x in frames])
        pairs = np.unique(np.stack([symbols.reshape(-1), owner], axis=1), axis=0)
        if len(np.unique(pairs[:, 0])) == len(pairs):
            raise ScoreError(
                f"--distance levenshtein: no frame value occurs in two of the {len(items)} "
                f"items ({len(stacked)} frames): the frames are real-valued, so every "
                "substitution costs 1 and the edit distance measures only the items' lengths; "
                "use levenshtein on discrete units (one-hot codes, codebook vectors) or "
                "--distance angular"
            )


def _check_arguments(distance: str, modes: Sequence[str], frame_shift: float | None) -> None:
    """ValueError naming a bad distance, mode or frame shift."""
    if distance not in ABX_DISTANCES:
        raise ValueError(f"distance must be one of {ABX_DISTANCES}, got {distance!r}")
    if isinstance(modes, str) or not modes:
        raise ValueError(f"modes must be a non-empty sequence of {MODES}, got {modes!r}")
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if frame_shift is not None and not frame_shift > 0:
        raise ValueError(f"frame_shift must be > 0 seconds or None, got {frame_shift!r}")


@dataclass(frozen=True)
class Coverage:
    """Which items of an item file take part in some ABX triplet of a mode
    (:func:`triplet_coverage`): an item that is no triplet's A, B or X counts for nothing."""

    used: int
    items: int
    left_out: dict[str, tuple[int, int]]
    """``{speaker: (items left out, items)}`` of the speakers with an item in no triplet."""
    mode: str

    def line(self) -> str:
        """``""`` when every item takes part; else one line naming who does not and why."""
        if self.used == self.items:
            return ""
        whole = [s for s, (out, n) in self.left_out.items() if out == n]
        parts = [f"{s} ({out} of {n})" for s, (out, n) in sorted(self.left_out.items())[:_LISTED]]
        more = len(self.left_out) - _LISTED
        listed = ", ".join(parts) + (f" and {more} more" if more > 0 else "")
        why = (
            "a label said by another speaker, and another label said by its own speaker, in "
            "its context"
            if self.mode == "across"
            else "another item of its label and one of another label by its own speaker, in "
            "its context"
        )
        alone = (
            f"; {', '.join(whole[:_LISTED])} share{'s' if len(whole) == 1 else ''} no "
            "triplet at all"
            if whole
            else ""
        )
        return (
            f"scored {self.used} of the {self.items} items: {self.items - self.used} take part "
            f"in no {self.mode}-speaker triplet and count for nothing (speaker, items left "
            f"out: {listed}){alone}; an item needs {why}"
        )


_LISTED = 5


def triplet_coverage(item_file: str | os.PathLike[str], mode: str = "across") -> Coverage:
    """How many items of ``item_file`` take part in a triplet of ``mode`` (as A, B or X), and
    the speakers of those that do not: a speaker who shares no word with the others, or a
    word said by one speaker only, is left out of an ``across`` score without changing it, so
    a score of 36 items may be that of 30. Reads the items only (no features)."""
    items = read_item_file(Path(item_file))
    if not items:
        raise ZeroSpeechFormatError(Path(item_file), None, "the item file has no items")
    lay = _layout(items)
    cells = _cells(
        lay.g_start, lay.g_end, lay.g_ctx, lay.g_spk, lay.g_phone, lay.ctx_start, mode == "within"
    )
    used_groups = np.zeros(len(lay.g_start), dtype=bool)
    if len(cells):
        used_groups[np.unique(np.asarray(cells)[:, :3])] = True
    sizes = lay.g_end - lay.g_start
    per_speaker_out: dict[str, tuple[int, int]] = {}
    for code, name in enumerate(lay.speakers.tolist()):
        mine = lay.g_spk == code
        out, total = int(sizes[mine & ~used_groups].sum()), int(sizes[mine].sum())
        if out:
            per_speaker_out[str(name)] = (out, total)
    used = int(sizes[used_groups].sum())
    return Coverage(used, len(items), per_speaker_out, mode)


def abx_modes(
    features: Mapping[str, np.ndarray] | str | os.PathLike[str],
    item_file: str | os.PathLike[str],
    distance: str = "angular",
    modes: Sequence[str] = MODES,
    frame_shift: float | None = None,
    *,
    shift_known: bool = False,
) -> dict[str, AbxResult]:
    """The ABX of several modes in one pass: ``{mode: result}``, each equal to :func:`abx`.

    The item file is read and its frames cut once, and every DTW distance that some mode needs
    is computed once, so ``abx_modes(f, items)`` costs less than ``abx`` for each mode.
    Arguments as :func:`abx_error`, with ``modes`` a sequence of ``"across"``/``"within"``
    (repeats ignored); ValueError when a mode has no triplet.
    """
    _check_arguments(distance, modes, frame_shift)
    items, frames = item_frames(features, item_file, frame_shift, shift_known=shift_known)
    with naming(item_file):
        return _abx_from_frames(items, frames, distance, list(dict.fromkeys(modes)))


def abx(
    features: Mapping[str, np.ndarray] | str | os.PathLike[str],
    item_file: str | os.PathLike[str],
    distance: str = "angular",
    mode: str = "across",
    frame_shift: float | None = None,
    *,
    shift_known: bool = False,
) -> AbxResult:
    """ABX error with its per-cell and per-phone-pair breakdown; see :func:`abx_error`."""
    return abx_modes(features, item_file, distance, [mode], frame_shift, shift_known=shift_known)[
        mode
    ]


def abx_error(
    features: Mapping[str, np.ndarray] | str | os.PathLike[str],
    item_file: str | os.PathLike[str],
    distance: str = "angular",
    mode: str = "across",
    frame_shift: float | None = None,
    *,
    shift_known: bool = False,
) -> float:
    """ZeroSpeech 2019 ABX error in percent (module docstring; reference §1.2-1.5).

    Args:
        features: ``{file id: (frames, dim) array}`` keyed by the item file's ``#file`` column
            (1-D arrays are one-column frames), or a ZeroSpeech 2019 submission folder with one
            ``<file id>.txt`` per file (single-column lines dropped, as the official loader does).
        item_file: ``#file onset offset #phone prev-phone next-phone speaker``.
        distance: ``"angular"`` (alias ``"cosine"``), ``"kl"`` or ``"levenshtein"``.
        mode: ``"across"`` (A, B one speaker, X another) or ``"within"`` (one speaker).
        frame_shift: ``None`` for the 2019 relative-time convention, else the frame shift in
            seconds for libri-light's frame rule.
        shift_known: ``frame_shift`` is known to be the features' own (recorded where they
            were written, as ``units encode`` does): items that end early in every file are
            then scored, not taken for a frame shift that does not fit (:func:`item_frames`).

    Returns:
        The error in percent, ``100 * (1 - mean score)``; 50 is chance.

    Raises:
        ZeroSpeechFormatError: a malformed, duplicated or twice-labelled item, an item that does
            not fit its features, a frame shift under which no file's items reach half its
            frames (:func:`item_frames`), bad features.
        ValueError: no triplet of the mode; a
            :class:`~audiorepro.metrics.checks.ScoreError` for constant features, ``kl`` on
            frames that are not distributions, ``levenshtein`` on real-valued frames. Warns
            (:class:`~audiorepro.metrics.checks.ScoreWarning`) under
            :data:`~audiorepro.metrics.checks.FEW` triplets and for within-speaker ABX of one
            speaker.
    """
    return abx(features, item_file, distance, mode, frame_shift, shift_known=shift_known).error
