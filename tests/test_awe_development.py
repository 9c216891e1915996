"""The development rows of ``awe train`` without ``--dev``: whole speakers held out when the
table has three or more, so that the epoch is chosen for speakers the model does not know."""

from __future__ import annotations

from pathlib import Path

import pytest

from audiorepro.data.recordings import Segment
from audiorepro.experiments.awe.development import development_split, hold_out_speakers


def table(speakers: int, words: int, tokens: int) -> list[Segment]:
    """Every speaker says every word ``tokens`` times, one file a row."""
    rows = []
    for s in range(speakers):
        for w in range(words):
            for t in range(tokens):
                line = len(rows) + 2
                rows.append(Segment(Path(f"s{s}_w{w}_{t}.wav"), f"w{w}", f"s{s}", None, None,
                                    Path("seg.tsv"), line))  # fmt: skip
    return rows


def test_whole_speakers_are_held_out_and_at_least_two_stay_in_training():
    rows = table(speakers=6, words=4, tokens=2)
    train, dev, held = hold_out_speakers(rows, fraction=0.1, seed=0)
    assert len(held) == 1 and {r.speaker for r in dev} == set(held)
    assert not {r.speaker for r in train} & set(held)
    assert sorted(train + dev, key=lambda r: r.line) == rows  # nothing lost, nothing twice
    # a larger share takes more speakers, never the last two
    train, dev, held = hold_out_speakers(rows, fraction=0.5, seed=0)
    assert len(held) == 3 and len(dev) == 24 and len({r.speaker for r in train}) == 3
    train, dev, held = hold_out_speakers(rows, fraction=0.9, seed=0)
    assert len(held) == 4 and len({r.speaker for r in train}) == 2
    # seeded: the same seed draws the same speakers, the draws of other seeds differ
    assert hold_out_speakers(rows, 0.1, 3)[2] == hold_out_speakers(rows, 0.1, 3)[2]
    assert len({tuple(hold_out_speakers(rows, 0.1, seed)[2]) for seed in range(10)}) > 1


def test_held_out_speakers_must_give_two_words_spoken_twice():
    # one token of each word per speaker: one held-out speaker has no pair; two have
    rows = table(speakers=4, words=3, tokens=1)
    train, dev, held = hold_out_speakers(rows, fraction=0.05, seed=0)
    assert len(held) == 2 and len(dev) == 6
    # three speakers, one token each: the one speaker that may be held out has no pair
    assert hold_out_speakers(table(speakers=3, words=3, tokens=1), 0.1, 0) is None
    assert hold_out_speakers(table(speakers=2, words=3, tokens=4), 0.1, 0) is None


@pytest.mark.parametrize(
    ("speakers", "tokens", "said"),
    [
        (5, 2, "speaker(s) held out of training (s"),
        (2, 4, "2 speaker(s): holding whole speakers out needs 3"),
        (3, 2, "speaker(s) held out of training"),
        (3, 1, None),
    ],
)
def test_the_split_says_how_it_chose(speakers, tokens, said):
    rows = table(speakers=speakers, words=4, tokens=tokens)
    if said is None:  # one token a word and speaker, three speakers: no pair can be held out
        with pytest.raises(Exception, match="no word has 4 segments"):
            development_split(rows, 0.1, 0)
        return
    train, dev, note = development_split(rows, 0.1, 0)
    assert said in note and f"development rows: {len(dev)} rows" in note
    assert sorted(train + dev, key=lambda r: r.line) == rows
    if "held out of training" in note:
        assert "chosen on speakers the model does not train on" in note
    else:
        assert "chosen on speakers the model trains on" in note
        assert {r.speaker for r in dev} <= {r.speaker for r in train}


def words_of(feats, words):
    from audiorepro.data.awe import WordSegments

    return WordSegments(
        split="dev", keys=[f"k{i}" for i in range(len(words))], words=list(words),
        speakers=["s"] * len(words), feats=list(feats), phones=[], word_phones={},
        num_phones=0, dropped={},
    )  # fmt: skip


def test_the_kept_weights_are_set_beside_mfcc_dtw_on_the_same_development_pairs(monkeypatch):
    """``awe train``'s line on the development rows: the embeddings' AP and MFCC + DTW's on the
    same pairs, each equal to its score computed on its own, and the verdict in words."""
    import numpy as np
    import torch

    from audiorepro.experiments.awe import development
    from audiorepro.experiments.awe.evaluate import ap_verdict, dtw_ap
    from audiorepro.experiments.awe.views import embed_segments
    from audiorepro.metrics.average_precision import same_different_ap
    from audiorepro.models.awe import AWEModelConfig, MultiViewAWE

    torch.manual_seed(0)
    model = MultiViewAWE(AWEModelConfig(
        feature_dim=3, num_phones=5, d_model=8, acoustic_layers=1, acoustic_heads=2,
        acoustic_ff=16, phone_layers=1, phone_heads=2, phone_ff=16, dropout=0.0, max_len=32,
    )).eval()  # fmt: skip
    rng = np.random.default_rng(0)
    shapes = {w: rng.standard_normal((1, 3)) for w in ("a", "b", "c")}
    words = [w for w in ("a", "b", "c") for _ in range(4)]
    feats = [
        (
            shapes[w] * np.linspace(1, 2, int(n))[:, None] + 0.3 * rng.standard_normal((n, 3))
        ).astype(np.float32)
        for w, n in zip(words, rng.integers(5, 12, len(words)), strict=True)
    ]
    dev = words_of(feats, words)
    line, record = development.beside_dtw(model, dev, seed=0, batch_size=4, refit=True)
    expected_ap = same_different_ap(embed_segments(model, dev, 4), words)
    expected_dtw, pairs = dtw_ap(feats, words)
    assert record == {
        "ap": pytest.approx(expected_ap), "dtw_ap": pytest.approx(expected_dtw),
        "rows": 12, "pairs": 66,
    }  # fmt: skip
    assert line == (
        f"development rows: same-different AP {expected_ap:.4f}, MFCC + DTW {expected_dtw:.4f}, "
        "chance 0.2727 on the same 66 pairs (12 rows; before the refit, the epoch chosen on "
        "them): " + ap_verdict(expected_ap, expected_dtw, 66, 18)
    )
    # with the rows' speed copies, the embeddings averaged over them, as awe embed does
    from audiorepro.experiments.awe.views import embed_with_copies

    copies = [[f[::2].copy() if k % 3 else None for k, f in enumerate(feats)]]
    _, record = development.beside_dtw(model, dev, 0, 4, refit=False, copies=copies)
    mean = embed_with_copies(model, dev, copies, 4)
    assert not np.allclose(mean[1], embed_segments(model, dev, 4)[1], atol=1e-3)
    assert np.allclose(mean[0], embed_segments(model, dev, 4)[0] / np.linalg.norm(
        embed_segments(model, dev, 4)[0]), atol=1e-6)  # fmt: skip
    averaged = same_different_ap(mean, words)
    assert record["ap"] == pytest.approx(averaged) and record["dtw_ap"] == pytest.approx(
        expected_dtw
    )
    # past the cap, a seeded subset of rows, both scores on it; no refit, no "before"
    monkeypatch.setattr(development, "DEVELOPMENT_DTW_ROWS", 8)
    line, record = development.beside_dtw(model, dev, seed=0, batch_size=4, refit=False)
    assert record["rows"] == 8 and record["pairs"] == 28
    assert "(8 rows, a subset of 12; the epoch chosen on them)" in line
    # rows of one word, or of words said once, have no pair to rank apart
    for labels in (["a"] * 4, ["a", "b", "c", "d"]):
        line, record = development.beside_dtw(
            model, words_of(feats[:4], labels), 0, 4, refit=False
        )
        assert record is None and "not scored" in line
