"""What a trained model is measured by beyond its two APs: the chance levels, the sign of the
cosine, the written words' geometry, the anchor check, the corpus's pronunciation variation and
the MFCC + DTW baseline (the paper's Table 3, first row), and the lines ``awe ap`` prints of
embeddings beside that baseline (:func:`ap_table`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from audiorepro.data.awe import WordSegments
from audiorepro.experiments.awe.config import Config
from audiorepro.experiments.awe.data import corpus_root
from audiorepro.experiments.awe.views import embed_segments, embed_words
from audiorepro.metrics.abx import edit_distance
from audiorepro.metrics.average_precision import (
    RANDOM_RANKINGS,
    cross_view_ap,
    cross_view_chance,
    cross_view_positive_cosines,
    pairs_average_precision,
    random_ranking_ap,
    same_different_ap,
    same_different_chance,
)
from audiorepro.metrics.dtw import pairwise_dtw
from audiorepro.metrics.paired import (
    MAX_AP_PAIRS,
    PairedDifference,
    ap_difference,
    cosine_pair_distances,
)
from audiorepro.models.awe import MultiViewAWE


def chance_levels(segments: WordSegments) -> dict[str, float]:
    """The AP of a ranking that knows nothing, per metric of
    :func:`~audiorepro.experiments.awe.views.evaluate` on ``segments``: the share of positive
    pairs (``acoustic_ap``: same-word token pairs; ``crossview_ap``: token x word-type pairs of
    the same word)."""
    return {
        "acoustic_ap": same_different_chance(segments.words),
        "crossview_ap": cross_view_chance(segments.words, sorted(segments.word_phones)),
    }


def acoustic_ap_on(
    model: MultiViewAWE, segments: WordSegments, indices: Sequence[int], batch_size: int = 512
) -> float:
    """Same-different AP of the model over all pairs of the tokens ``indices`` (e.g. the MFCC +
    DTW baseline's subset, to compare on the same pairs)."""
    emb = embed_segments(model, segments, batch_size)[np.asarray(indices)]
    return float(same_different_ap(emb, [segments.words[i] for i in indices]))


def sign_stats(
    model: MultiViewAWE, segments: WordSegments, batch_size: int = 512
) -> dict[str, float]:
    """What the sign of the cosine does to a split's cross-view pairs: ``crossview_ap``
    (pairs ranked by cos, as :func:`~audiorepro.experiments.awe.views.evaluate`),
    ``abs_crossview_ap`` (ranked by |cos|: a written word and its antipode alike, as the
    squared distance 1 - cos² sees them) and ``negative_share``, the share of positive pairs
    (a token and its own written word) whose cosine is below 0."""
    emb_x = embed_segments(model, segments, batch_size)
    words, emb_c = embed_words(model, segments.word_phones, batch_size)
    cosines = cross_view_positive_cosines(emb_x, segments.words, emb_c, words)
    return {
        "crossview_ap": float(cross_view_ap(emb_x, segments.words, emb_c, words)),
        "abs_crossview_ap": float(
            cross_view_ap(emb_x, segments.words, emb_c, words, absolute=True)
        ),
        "negative_share": float(np.mean(cosines < 0)),
    }


def written_word_geometry(
    model: MultiViewAWE, word_phones: Mapping[str, np.ndarray]
) -> dict[str, float]:
    """How the written-word embeddings g(c) of ``word_phones`` lie:

    - ``first_phone_share``: the share of words whose nearest other word (cosine) begins with
      the same phone; ``chance``: that share for a neighbour drawn at random (the mean, over
      words, of the share of the other words with the same first phone). A "Rep" encoder that
      reads little beyond the first phone's own position sits far above chance;
    - ``mean_cosine``: the mean cosine between two different words; near 1 when the encoder
      has collapsed, every word onto one direction (the paper's failing deep encoders)."""
    words, emb = embed_words(model, dict(word_phones))
    if len(words) < 2:
        raise ValueError("written_word_geometry needs at least two written words")
    unit = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    sim = unit @ unit.T
    off = ~np.eye(len(words), dtype=bool)
    mean_cosine = float(sim[off].mean())
    np.fill_diagonal(sim, -np.inf)
    first = np.array([int(word_phones[w][0]) for w in words])
    same = (first[:, None] == first[None, :]) & off
    return {
        "first_phone_share": float(np.mean(first[np.argmax(sim, axis=1)] == first)),
        "chance": float(np.mean(same.sum(axis=1) / (len(words) - 1))),
        "mean_cosine": mean_cosine,
    }


def anchor_check(
    model: MultiViewAWE, segments: WordSegments, batch_size: int = 512
) -> dict[str, float]:
    """Is cross-view AP high because a written word is one clean anchor per word? The
    speakers of ``segments`` split in two halves (sorted, alternately); on the second half's
    tokens of the words both halves say:

    - ``acoustic_ap``: token against token (same-different AP);
    - ``crossview_ap``: token against the written words (g(c) of those words);
    - ``centroid_ap``: token against acoustic anchors, the mean f(x) of each word's tokens in
      the *first* half (other speakers), ranked as cross-view AP;
    - ``tokens``, ``words``: how many.

    A centroid AP near the cross-view AP and above the acoustic AP says that ranking tokens
    against one anchor per word, rather than against each other, is what lifts cross-view AP
    above acoustic AP, whichever view the anchor comes from."""
    speakers = sorted(set(segments.speakers))
    first_half = set(speakers[0::2])
    in_first = np.array([s in first_half for s in segments.speakers])
    words = np.asarray(segments.words)
    shared = sorted(set(words[in_first]) & set(words[~in_first]))
    if len(shared) < 2:
        raise ValueError("anchor_check: fewer than two words have tokens in both speaker halves")
    keep = set(shared)
    emb = embed_segments(model, segments, batch_size)
    test = np.array([(not a) and w in keep for a, w in zip(in_first, words, strict=True)])
    anchors = np.stack([emb[in_first & (words == w)].mean(axis=0) for w in shared])
    written, written_emb = embed_words(
        model, {w: segments.word_phones[w] for w in shared}, batch_size
    )
    labels = words[test].tolist()
    return {
        "acoustic_ap": float(same_different_ap(emb[test], labels)),
        "crossview_ap": float(cross_view_ap(emb[test], labels, written_emb, written)),
        "centroid_ap": float(cross_view_ap(emb[test], labels, anchors, shared)),
        "tokens": int(test.sum()),
        "words": len(shared),
    }


def pronunciation_variation(
    realised: Sequence[Sequence[str]],
    words: Sequence[str],
    dictionary: Mapping[str, Sequence[str]],
) -> dict[str, float]:
    """How the spoken tokens of a word differ in pronunciation: from each token's realised
    phones (``realised[i]``, its phone alignment), its word and the dictionary pronunciation
    the phoneme encoder reads (``dictionary[word]``):

    - ``dictionary_match``: share of tokens realised exactly as their dictionary
      pronunciation; ``phone_error_rate``: mean edit distance to it over its length;
    - ``usual_realisation``: over the words with two or more tokens, the share of their tokens
      realised as their word's most frequent realisation (1: every token of a word the same
      phones, whoever speaks it); ``words_with_variants``: the share of those words with more
      than one realisation;
    - ``tokens``, ``words``: how many (``words``: with two or more tokens).

    Raises:
        ValueError: lengths differ, a word is missing from ``dictionary``, or no word has two
            tokens.
    """
    if len(realised) != len(words):
        raise ValueError(
            f"pronunciation_variation: {len(realised)} realisations for {len(words)} words"
        )
    missing = sorted(set(words) - set(dictionary))
    if missing:
        raise ValueError(f"pronunciation_variation: no dictionary entry for {missing[:5]}")
    forms: dict[str, Counter[tuple[str, ...]]] = {}
    matches, errors = 0, 0.0
    for phones, word in zip(realised, words, strict=True):
        phones = tuple(phones)
        reference = tuple(dictionary[word])
        matches += phones == reference
        errors += edit_distance(phones, reference) / max(len(reference), 1)
        forms.setdefault(word, Counter())[phones] += 1
    repeated = [c for c in forms.values() if sum(c.values()) > 1]
    if not repeated:
        raise ValueError("pronunciation_variation: no word has two or more tokens")
    usual = sum(c.most_common(1)[0][1] for c in repeated)
    return {
        "dictionary_match": matches / len(words),
        "phone_error_rate": errors / len(words),
        "usual_realisation": usual / sum(sum(c.values()) for c in repeated),
        "words_with_variants": sum(len(c) > 1 for c in repeated) / len(repeated),
        "tokens": len(words),
        "words": len(repeated),
    }


def corpus_pronunciation_variation(config: Config, split: str = "test") -> dict[str, float] | None:
    """:func:`pronunciation_variation` of a split of the chapter's corpus, read from its
    supervision manifest (each token's phone alignment and ``custom["pronunciation"]``, the
    dictionary pronunciation its word's phone ids come from). ``None`` for a corpus without
    that manifest (Switchboard in the Kamper/He layout has no phone alignments)."""
    from audiorepro.data.embedded.word_corpus import MANIFEST_DIR
    from audiorepro.data.manifests import read_supervisions

    path = corpus_root(config) / MANIFEST_DIR / f"{split}_supervisions.jsonl.gz"
    if not path.is_file():
        return None
    sups = read_supervisions(path)
    for s in sups:
        if not (s.alignment or {}).get("phone") or "pronunciation" not in (s.custom or {}):
            raise ValueError(
                f"{path}: supervision {s.id!r} lacks its phone alignment or its "
                'custom["pronunciation"] (the word corpus writes both for every token)'
            )
    realised = [[a.symbol for a in s.alignment["phone"]] for s in sups]
    words = [s.text for s in sups]
    dictionary = {s.text: s.custom["pronunciation"] for s in sups}
    return pronunciation_variation(realised, words, dictionary)


def dtw_baseline(
    segments: WordSegments, tokens: int, seed: int = 0, distance: str = "cosine"
) -> dict[str, Any]:
    """MFCC + DTW same-different AP over all pairs of a seeded subset of ``tokens`` tokens.

    Kamper et al.'s baseline (the paper's Table 3, first row): DTW over the MFCC + Δ + ΔΔ frames
    with a frame-level cosine (here angular, chapter 03's ``"cosine"``) distance, normalised by
    the path length. Returns ``{"ap", "indices", "num_pairs", "distances"}``; ``indices``
    lets a model be scored on the same subset (:func:`acoustic_ap_on`), ``distances`` (of every
    pair ``i < j`` of the subset) compared pair by pair (:func:`embeddings_vs_dtw`).
    """
    rng = np.random.default_rng(seed)
    n = min(tokens, len(segments))
    indices = np.sort(rng.choice(len(segments), size=n, replace=False))
    feats = [segments.feats[i] for i in indices]
    labels = [segments.words[k] for k in indices]
    dist = dtw_pair_distances(feats, distance)
    return {
        "ap": pairs_ap(dist, labels),
        "indices": indices,
        "num_pairs": int(dist.size),
        "distances": dist,
    }


def dtw_pair_distances(feats: Sequence[np.ndarray], distance: str = "cosine") -> np.ndarray:
    """Path-normalised DTW (:func:`audiorepro.metrics.dtw.pairwise_dtw`) of every pair ``i <
    j`` of ``feats`` (each (T_i, F)), in ``np.triu_indices(n, 1)`` order."""
    n = len(feats)
    offsets = np.concatenate([[0], np.cumsum([f.shape[0] for f in feats])])
    i, j = np.triu_indices(n, k=1)
    return pairwise_dtw(np.concatenate(feats), offsets, np.stack([i, j], 1), distance=distance)


def dtw_ap(
    feats: Sequence[np.ndarray], labels: Sequence[str], distance: str = "cosine"
) -> tuple[float, int]:
    """Same-different AP of path-normalised DTW over all pairs of ``feats`` (each (T_i, F);
    :func:`dtw_pair_distances`), and the number of pairs."""
    dist = dtw_pair_distances(feats, distance)
    return pairs_ap(dist, labels), int(dist.size)


def pairs_ap(distances: np.ndarray, labels: Sequence[str]) -> float:
    """Same-different AP of the distances of every pair ``i < j`` of rows labelled ``labels``
    (``np.triu_indices`` order)."""
    words = np.asarray(labels)
    i, j = np.triu_indices(len(words), k=1)
    return float(pairs_average_precision(distances, words[i] == words[j]))


def _pair(a: float, b: float) -> str:
    """``"0.770 vs 0.917"`` with the fewest decimals (3 or 4) that tell the two apart."""
    digits = 3 if f"{a:.3f}" != f"{b:.3f}" else 4
    return f"{a:.{digits}f} vs {b:.{digits}f}"


def ap_verdict(
    ap: float,
    dtw: float,
    num_pairs: int,
    positives: int,
    difference: PairedDifference | None = None,
) -> str:
    """One plain sentence: whether the embeddings' AP ``ap`` beats MFCC + DTW's ``dtw`` on the
    same ``num_pairs`` pairs (a higher AP is better; equal is not beating it), and which of the
    two a random ranking of these pairs could have reached
    (:func:`~audiorepro.metrics.average_precision.random_ranking_ap`): a difference between two
    numbers at chance says nothing. With their paired ``difference``
    (:func:`~audiorepro.metrics.paired.ap_difference`), one beats the other only when it holds
    over draws of the words; otherwise the sentence says the two cannot be told apart."""
    level = random_ranking_ap(num_pairs, positives) if positives else 1.0
    random = (
        f"a random ranking of these {num_pairs} pairs, {positives} of them same-word pairs, "
        f"reached {level:.3f} in one of {RANDOM_RANKINGS} tries"
    )
    if ap <= level and dtw <= level:
        return (
            f"neither the embeddings nor MFCC + DTW is above chance (AP {_pair(ap, dtw)}; "
            f"{random}): these pairs cannot tell them apart"
        )
    if difference is not None and not difference.clear:
        said = (
            f"the embeddings and MFCC + DTW cannot be told apart on these pairs (AP "
            f"{_pair(ap, dtw)}; {difference.interval()})"
        )
    else:
        beat = "beat" if ap > dtw else "do not beat"
        said = f"the embeddings {beat} MFCC + DTW (AP {_pair(ap, dtw)})"
        if difference is None and num_pairs > MAX_AP_PAIRS:
            said += f" (by the numbers: {num_pairs} pairs are too many to resample the words)"
    if ap <= level:
        return f"{said}; the embeddings are at chance ({random})"
    if dtw <= level:
        return f"{said}; MFCC + DTW is at chance here ({random})"
    return said


def embeddings_vs_dtw(
    embeddings: np.ndarray, labels: Sequence[str], ap: float, baseline: Mapping[str, Any]
) -> PairedDifference | None:
    """The embeddings' AP minus MFCC + DTW's on the same pairs, with its interval over draws of
    the words (:func:`~audiorepro.metrics.paired.ap_difference`); ``baseline`` holds the DTW
    ``distances`` of every pair ``i < j`` of the rows of ``embeddings`` (as
    :func:`~audiorepro.experiments.awe.recordings.rows_dtw_ap` returns them)."""
    return ap_difference(
        cosine_pair_distances(embeddings),
        np.asarray(baseline["distances"]),
        labels,
        (ap, float(baseline["ap"])),
    )


def ap_table(
    ap: float, baseline: Mapping[str, Any], difference: PairedDifference | None = None
) -> list[str]:
    """The lines ``awe ap`` prints: the embeddings' AP beside the MFCC + DTW baseline on the
    same pairs and the chance level, then one plain sentence whether the embeddings beat it
    (:func:`ap_verdict`, with the paired ``difference`` of :func:`embeddings_vs_dtw`)."""
    rows = [
        ("embeddings", ap),
        ("MFCC + DTW (the same pairs)", baseline["ap"]),
        ("chance (share of same-word pairs)", baseline["chance"]),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [
        f"same-different AP over {baseline['num_pairs']} pairs:",
        f"{'what':<{width}}      AP",
    ]
    lines += [f"{name:<{width}}  {value:.4f}" for name, value in rows]
    if "norm" in baseline:  # awe dtw chooses for a table; here the run's choice decides
        lines.append(
            f"the baseline reads the frames as the run does: normalised per "
            f"{baseline['norm']} (awe dtw --norm {baseline['norm']} of these rows gives its "
            "number)"
        )
    positives = round(baseline["chance"] * baseline["num_pairs"])
    lines.append(ap_verdict(ap, baseline["ap"], baseline["num_pairs"], positives, difference))
    return lines
