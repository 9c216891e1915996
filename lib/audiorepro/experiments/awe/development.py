"""The development rows of ``awe train``: the rows held out of training whose cross-view AP
drives the plateau schedule and picks the epoch kept (:func:`development_split`: whole
speakers when the table can lend them, else pairs of one word), the check that rows given
with ``--dev`` are not training rows (:func:`refuse_shared_rows`), and the kept weights beside
MFCC + DTW on them (:func:`beside_dtw`)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from audiorepro.data.awe import WordSegments
from audiorepro.data.recordings import RecordingsError, SameTokens, Segment
from audiorepro.experiments.awe.evaluate import (
    ap_verdict,
    dtw_baseline,
    embeddings_vs_dtw,
)
from audiorepro.experiments.awe.views import embed_with_copies
from audiorepro.metrics.average_precision import same_different_ap
from audiorepro.metrics.checks import ScoreError
from audiorepro.models.awe import MultiViewAWE


def hold_out(
    rows: Sequence[Segment], fraction: float, seed: int
) -> tuple[list[Segment], list[Segment]]:
    """``(train, dev)``: about ``fraction`` of the rows (at least 4) held out in pairs of one
    word, from at least two words with at least 4 rows (so that both sides keep pairs, and the
    development AP has pairs of different words to rank: of one word it is 1 whatever the
    model), seeded."""
    order = np.random.default_rng(seed).permutation(len(rows)).tolist()
    by_word: dict[str, list[int]] = {}
    for i in order:
        by_word.setdefault(rows[i].word, []).append(i)
    held: list[int] = []
    words = [w for w in sorted(by_word, key=lambda w: -len(by_word[w])) if len(by_word[w]) >= 4]
    if len(words) == 1:
        raise RecordingsError(
            rows[0].source,
            None,
            f"only one word ({words[0]!r}) has 4 segments to hold 2 out for development, and "
            "the AP of one word is 1 whatever the model, so it cannot pick an epoch: give --dev "
            "(rows of at least two words)",
        )
    want = max(4, int(round(fraction * len(rows))))
    while len(held) < want and words:
        for w in list(words):
            held += by_word[w][:2]
            by_word[w] = by_word[w][2:]
            if len(by_word[w]) < 4:
                words.remove(w)
            if len(held) >= want:
                break
    if not held:
        where = rows[0].source if rows else "segments"
        raise RecordingsError(
            where, None, "no word has 4 segments to hold 2 out for development: give --dev"
        )
    chosen = set(held)
    return (
        [r for i, r in enumerate(rows) if i not in chosen],
        [r for i, r in enumerate(rows) if i in chosen],
    )


def hold_out_speakers(
    rows: Sequence[Segment], fraction: float, seed: int
) -> tuple[list[Segment], list[Segment], list[str]] | None:
    """``(train, dev, held speakers)``: whole speakers held out of training, so that the
    plateau schedule chooses the epoch on speakers the model has never heard (what ``awe ap``
    on a new speaker measures), or ``None`` when the table cannot lend them.

    Speakers are drawn in a seeded order until the held-out rows reach ``fraction`` of the
    table (or all but two speakers are drawn: at least two stay in training) and hold at least
    two words spoken at least twice (pairs of the same and of different words to rank). A
    table of fewer than three speakers, or one where no draw holds such pairs, gets
    ``None``."""
    by_speaker: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_speaker.setdefault(r.speaker, []).append(i)
    if len(by_speaker) < 3:
        return None
    order = [
        sorted(by_speaker)[i] for i in np.random.default_rng(seed).permutation(len(by_speaker))
    ]
    want = max(4, int(round(fraction * len(rows))))
    held: list[str] = []
    found = None
    for speaker in order[:-2]:  # two speakers at least stay in training
        held.append(speaker)
        dev = [rows[i] for s in held for i in by_speaker[s]]
        words: dict[str, int] = {}
        for r in dev:
            words[r.word] = words.get(r.word, 0) + 1
        if sum(n >= 2 for n in words.values()) >= 2:
            chosen = set(held)
            found = [r for r in rows if r.speaker not in chosen], dev, sorted(held)
            if len(dev) >= want:
                break
    return found


def development_split(
    rows: Sequence[Segment], fraction: float, seed: int
) -> tuple[list[Segment], list[Segment], str]:
    """``(train, dev, note)``: the development rows of a table given without ``--dev``, and
    one line saying how they were chosen. Whole speakers when the table has three or more
    (:func:`hold_out_speakers`: the epoch is then chosen for speakers the model does not know,
    which is what a model for new recordings needs), else pairs of words of the same
    speakers (:func:`hold_out`)."""
    by_speaker = hold_out_speakers(rows, fraction, seed)
    if by_speaker is not None:
        train, dev, held = by_speaker
        return (
            train,
            dev,
            (
                f"development rows: {len(dev)} rows of {len(held)} speaker(s) held out of "
                f"training ({', '.join(held)}), so the epoch is chosen on speakers the model does "
                "not train on"
            ),
        )
    train, dev = hold_out(rows, fraction, seed)
    speakers = len({r.speaker for r in rows})
    why = (
        f"{speakers} speaker(s): holding whole speakers out needs 3"
        if speakers < 3
        else "no draw of whole speakers gives two words spoken twice"
    )
    return (
        train,
        dev,
        (
            f"development rows: {len(dev)} rows held out in pairs of one word from the training "
            f"speakers ({why}); the epoch is chosen on speakers the model trains on"
        ),
    )


def refuse_shared_rows(train_rows: Sequence[Segment], dev_rows: Sequence[Segment]) -> None:
    """A :class:`RecordingsError` naming the first development row that is also a training row
    (the same audio file, start and end, or a copy of that file: the same bytes or the same
    samples in another folder, :class:`~audiorepro.data.audio_identity.SameRecordings`; or the
    same spoken token cut with other boundaries,
    :class:`~audiorepro.data.recordings.SameTokens`) and that training row's table and line: the plateau schedule would pick the epoch on rows the
    model trains on, which rewards memorising them, not the embeddings of words it has not
    heard."""
    from audiorepro.data.audio_identity import SameRecordings

    training: dict[tuple, int] = {}
    copies = SameRecordings()
    for i, r in enumerate(train_rows):
        training.setdefault((r.path.resolve(), r.start, r.end), i)
        copies.add(r.path.resolve(), r.start, r.end, i)
    tokens = SameTokens(train_rows)
    twins: list[tuple[Segment, Segment, str]] = []
    for k, r in enumerate(dev_rows):
        i = training.get((r.path.resolve(), r.start, r.end))
        if i is not None:
            twins.append((r, train_rows[i], "also line"))
        elif (found := copies.add(r.path.resolve(), r.start, r.end, -1 - k)) is not None:
            if found[1] >= 0:  # a training row's file; a negative line: another dev row's
                copied = train_rows[found[1]]
                twins.append((r, copied, f"a copy of {copied.path}, line"))
        elif (token := tokens.find(r)) is not None:  # the same token, other boundaries
            other, share = token
            span = "the whole file" if other.start is None else f"{other.start:g}-{other.end:g} s"
            twins.append((r, other, f"{100 * share:.0f} % of the token ({span}) of line"))
    if not twins:
        return
    r, twin, also = twins[0]
    where = "the whole file" if r.start is None else f"{r.start:g}-{r.end:g} s"
    raise RecordingsError(
        r.source,
        r.line,
        f"{r.path} {where}: {also} {twin.line} of the training table {twin.source} "
        f"({len(twins)} of the {len(dev_rows)} development rows are training rows, copies "
        "of their files or their tokens cut again): the epoch would be chosen on rows the "
        "model trains on; give development rows that are not in --segments (or no --dev: "
        "rows are then held out of training)",
    )


DEVELOPMENT_DTW_ROWS = 500
"""The most development rows ``awe train`` scores the kept weights and MFCC + DTW on
(:func:`beside_dtw`; a seeded subset of a larger set): 124,750 pairs, about 10 s of DTW on
two cores."""


def beside_dtw(
    model: MultiViewAWE,
    dev: WordSegments,
    seed: int,
    batch_size: int,
    refit: bool,
    copies: Sequence[Sequence[np.ndarray | None]] = (),
) -> tuple[str, dict[str, Any] | None]:
    """``(line, record)``: the same-different AP of ``model``'s embeddings and of MFCC + DTW
    (:func:`~audiorepro.experiments.awe.evaluate.dtw_baseline`) on the same pairs of the
    development rows ``dev``, the features as the model reads them, and one plain sentence
    whether the embeddings beat it there. Without ``--dev`` these rows are speakers held out of
    training, so this is what ``awe ap`` will say on new speakers before the user scores any;
    the epoch was chosen on them, so it leans the model's way. ``refit``: the weights are
    trained again afterwards, and the line says it scored them before. ``copies``: each row's
    frames at the speeds ``awe embed`` averages its embedding over
    (:func:`~audiorepro.experiments.awe.frames.speed_copies`), so that the line scores what
    ``awe ap`` will. ``record`` is ``None`` (and the line says why) when the rows hold no
    same-word pair."""
    try:
        base = dtw_baseline(dev, DEVELOPMENT_DTW_ROWS, seed)
    except ScoreError as err:  # rows of one word, or of words said once
        return f"development rows beside MFCC + DTW: not scored ({err})", None
    idx = base["indices"]
    view = dataclasses.replace(
        dev,
        keys=[dev.keys[i] for i in idx],
        words=[dev.words[i] for i in idx],
        speakers=[dev.speakers[i] for i in idx],
        feats=[dev.feats[i] for i in idx],
    )
    emb = embed_with_copies(model, view, [[c[i] for i in idx] for c in copies], batch_size)
    words = view.words
    ap = float(same_different_ap(emb, words))
    versus = embeddings_vs_dtw(emb, words, ap, base)
    subset = f", a subset of {len(dev)}" if len(words) < len(dev) else ""
    when = "before the refit, " if refit else ""
    positives = sum(c * (c - 1) // 2 for c in Counter(words).values())
    chance = positives / base["num_pairs"]
    line = (
        f"development rows: same-different AP {ap:.4f}, MFCC + DTW {base['ap']:.4f}, chance "
        f"{chance:.4f} on the same {base['num_pairs']} pairs ({len(words)} rows{subset}; "
        f"{when}the epoch chosen on them): "
        + ap_verdict(ap, base["ap"], base["num_pairs"], positives, versus)
    )
    record = {"ap": ap, "dtw_ap": base["ap"], "rows": len(words), "pairs": base["num_pairs"]}
    return line, record
