"""The speaker rule when none is given: the names' first field, or their second where the
names are ``word_speaker_take``, as the Free Spoken Digit Dataset's ``7_jackson_32.wav``.

A folder of one-word files from several speakers is often named by three fields: a word, a
speaker and a take. Whether the word or the speaker comes first, both fields cross (every
speaker says every word), so the names alone cannot tell which is which; the content can. With
the words known (``segments --word-of``) the speaker is the field that is not the word. Without
them (``units train``), files that share the word field are said alike and files that share
the speaker field are not: by DTW of each file's frames, normalised over the file, a file's
nearest of the files sharing only its word is nearer than its nearest of the files sharing
only its speaker, for most files (:func:`word_field_by_content`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from audiorepro.features.speech import VALID_MFCC_DIMS
from audiorepro.metrics.dtw import pairwise_dtw

DEFAULT_RULE = "prefix"
"""The rule when the names are not three crossed fields, or when the word is their second."""

SECOND_FIELD = "field:2"

CROSSED_SHARE = 0.8
"""Three fields cross when at least this share of (first, second) combinations occurs."""

ANCHORS = 300
"""Files drawn (seeded) for the content comparison."""

NEAREST_OF = 20
"""Files of each field a drawn file is compared with."""

CLEAR_SHARE = 0.65
"""The word field is the one nearer for at least this share of the files compared."""

FEWEST_ANCHORS = 20
"""Fewer files compared than this decide nothing."""


def crossed_fields(wavs: Mapping[str, Path]) -> tuple[list[str], list[str]] | None:
    """The first and second ``_``-separated fields of the names (in ``wavs``' order), when
    every name has three fields, the third a number (a take), each of the first two takes two
    values or more, and nearly every combination of them occurs (:data:`CROSSED_SHARE`); else
    ``None``."""
    fields = [Path(path).stem.split("_") for path in wavs.values()]
    if len(fields) < 4 or any(len(f) != 3 or not f[2].isdigit() or not all(f) for f in fields):
        return None
    first, second = [f[0] for f in fields], [f[1] for f in fields]
    n1, n2 = len(set(first)), len(set(second))
    if n1 < 2 or n2 < 2 or len(set(zip(first, second, strict=True))) < CROSSED_SHARE * n1 * n2:
        return None
    return first, second


def _comparable(x: np.ndarray) -> np.ndarray:
    """A file's frames as compared: its louder half (first coefficient above its median), the
    static MFCCs of MFCCs with Δ and ΔΔ (13 of 39), normalised over the file."""
    x = np.asarray(x, dtype=np.float64)
    loud = x[:, 0] > np.median(x[:, 0])
    x = x[loud] if loud.sum() >= 3 else x
    x = x[:, : x.shape[1] // 3] if x.shape[1] in VALID_MFCC_DIMS else x
    return ((x - x.mean(0)) / (x.std(0) + 1e-8)).astype(np.float32)


def word_field_by_content(
    frames: Sequence[np.ndarray], first: list[str], second: list[str]
) -> tuple[int, float, int]:
    """Which field (1 or 2) names the word, or 0 when the content does not tell: for each of
    up to :data:`ANCHORS` files (drawn), the nearest by DTW of up to :data:`NEAREST_OF` files
    that share its first field only, against the nearest of as many that share its second
    only; the word is the field nearer in at least :data:`CLEAR_SHARE` of the files (and not
    fewer than :data:`FEWEST_ANCHORS` files). Returns it, the share of files where the first
    field was nearer, and how many files were compared. Deterministic (a fixed seed)."""
    rng = np.random.default_rng(0)
    compared = [_comparable(x) for x in frames]
    stacked = np.concatenate(compared)
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in compared])]).astype(np.int64)
    f1, f2 = np.array(first), np.array(second)
    votes = []
    for i in rng.permutation(len(compared))[:ANCHORS]:
        one = np.flatnonzero((f1 == f1[i]) & (f2 != f2[i]))
        two = np.flatnonzero((f2 == f2[i]) & (f1 != f1[i]))
        n = min(len(one), len(two), NEAREST_OF)
        if n == 0:
            continue
        others = np.concatenate([rng.choice(one, n, replace=False), rng.choice(two, n, False)])
        d = pairwise_dtw(stacked, offsets, np.stack([np.full(2 * n, i), others], 1))
        votes.append(bool(d[:n].min() < d[n:].min()))
    share = float(np.mean(votes)) if votes else 0.5
    if len(votes) < FEWEST_ANCHORS:
        return 0, share, len(votes)
    word = 1 if share >= CLEAR_SHARE else 2 if share <= 1 - CLEAR_SHARE else 0
    return word, share, len(votes)


def _same_groups(a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether two labellings of the same files group them alike (whatever the labels)."""
    return len(set(a)) == len(set(b)) == len(set(zip(a, b, strict=True)))


def default_speaker_rule(
    wavs: Mapping[str, Path],
    *,
    words: Mapping[str, str] | None = None,
    frames: Mapping[str, np.ndarray] | None = None,
) -> tuple[str, str]:
    """The speaker rule for ``wavs`` (``{file id: path}``) when the user gave none, and the
    line that says why (``""`` for :data:`DEFAULT_RULE` on names that are not three crossed
    fields). ``words`` (``{file id: word}``) decides which field is the word where given,
    else ``frames`` (``{file id: (T, F) features}``) do."""
    crossed = crossed_fields(wavs)
    if crossed is None or (words is None and frames is None):
        return DEFAULT_RULE, ""
    first, second = crossed
    names = list(wavs)
    example = Path(next(iter(wavs.values()))).name
    if words is not None:
        said = [words.get(n) for n in names]
        word_field = 1 if _same_groups(said, first) else 2 if _same_groups(said, second) else 0
        why = "the word (--word-of) is their {}"
    else:
        word_field, share, anchors = word_field_by_content(
            [frames[n] for n in names], first, second
        )
        evidence = (
            f"of {anchors} files, the nearest by DTW of those sharing only the first field was "
            f"nearer than the nearest of those sharing only the second for {100 * share:.0f} %"
        )
        why = "files that share their {} field are said alike: " + evidence
    if word_field == 1:
        speakers = sorted(set(second))
        return SECOND_FIELD, (
            f"speakers: the names' second field, {len(speakers)} speakers "
            f"({', '.join(speakers[:4])}{', ...' if len(speakers) > 4 else ''}): names like "
            f"{example} read word_speaker_take, as the Free Spoken Digit Dataset's "
            f"7_jackson_32.wav ({why.format('first')}); --speaker-of prefix for the first"
        )
    if word_field == 2:
        return DEFAULT_RULE, (
            f"speakers: the names' first field: names like {example} read speaker_word_take "
            f"({why.format('second')}); --speaker-of field:2 for the second"
        )
    if words is not None:  # the word is neither field: the names are something else
        return DEFAULT_RULE, ""
    return DEFAULT_RULE, (
        f"speakers: the names' first field; names like {example} are three crossed fields, "
        f"and their content does not tell the word from the speaker ({evidence}: not clearly "
        "more or less than half); --speaker-of field:2 if the second is the speaker"
    )
