"""Correspondence training of ``units train``: files of different speakers paired by DTW
(mutual nearest neighbours), aligned, and each reconstructing the other."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from audiorepro.experiments.zerospeech.pairs import (
    PairedSegments,
    aligned_to,
    collate_paired,
    find_pairs,
    pairs_default,
)
from audiorepro.metrics.dtw import dtw_distance


def _word(rng: np.random.Generator, n: int, dim: int = 6) -> np.ndarray:
    return rng.normal(size=(n, dim)).astype(np.float32)


def _mutual_brute_force(frames, speakers, max_ratio=2.0):
    """Mutual nearest neighbours across every two speakers, by a double loop of dtw_distance."""
    found = set()
    names = sorted(set(speakers))
    for s, t in itertools.combinations(names, 2):
        rows = [i for i, x in enumerate(speakers) if x == s]
        cols = [j for j, x in enumerate(speakers) if x == t]
        d = np.full((len(rows), len(cols)), np.inf)
        for a, i in enumerate(rows):
            for b, j in enumerate(cols):
                li, lj = len(frames[i]), len(frames[j])
                if max(li, lj) <= max_ratio * min(li, lj):
                    d[a, b] = dtw_distance(frames[i], frames[j])
        for a in range(len(rows)):
            b = int(np.argmin(d[a]))
            if np.isfinite(d[a, b]) and int(np.argmin(d[:, b])) == a:
                found.add((min(rows[a], cols[b]), max(rows[a], cols[b])))
    return sorted(found)


def test_pairs_are_the_same_words_said_by_two_speakers():
    """Two speakers say three words in another order, with a little noise and a stretch:
    each word pairs with its own repetition, never with another word or the same speaker."""
    rng = np.random.default_rng(0)
    words = [_word(rng, n) for n in (20, 26, 31)]
    other = [np.repeat(w, 2, axis=0)[::2] + 0.05 * rng.normal(size=w.shape) for w in words]
    frames = [*words, other[2], other[0], other[1]]
    speakers = ["a", "a", "a", "b", "b", "b"]
    found = find_pairs(frames, speakers)
    assert found.pairs == ((0, 4), (1, 5), (2, 3))
    assert found.compared == 9
    assert found.line().startswith("pairs: 3 pairs of files of different speakers, mutual DTW")


def test_pairs_equal_a_brute_force_search_on_three_speakers():
    rng = np.random.default_rng(1)
    frames = [_word(rng, int(n)) for n in rng.integers(8, 30, size=15)]
    speakers = [("a", "b", "c")[i % 3] for i in range(15)]
    assert list(find_pairs(frames, speakers).pairs) == _mutual_brute_force(frames, speakers)


def test_files_of_very_different_lengths_are_not_compared():
    rng = np.random.default_rng(2)
    frames = [_word(rng, 10), _word(rng, 21), _word(rng, 20), _word(rng, 45)]
    found = find_pairs(frames, ["a", "b", "b", "a"])
    assert found.compared == 1 and found.pairs == ((0, 2),)  # 21 > 2 x 10: never compared
    none = find_pairs([*frames[:2], _word(rng, 100), frames[3]], ["a", "b", "b", "a"])
    assert none.pairs == () and none.compared == 0
    assert none.line() == (
        "pairs: none, no two files of different speakers are within 2x of each other's "
        "length: trained as the paper does"
    )


def test_no_pairs_for_one_speaker_or_too_much_audio_and_it_says_why():
    rng = np.random.default_rng(3)
    frames = [_word(rng, 40), _word(rng, 40)]
    one = find_pairs(frames, ["a", "a"])
    assert one.pairs == ()
    assert one.line() == "pairs: none, the files are one speaker's: trained as the paper does"
    big = find_pairs(frames * 2, ["a", "a", "b", "b"], max_cells=1000)
    assert big.pairs == () and "would take over 1e+03 DTW cells" in big.line()
    with pytest.raises(ValueError, match="3 files but 2 speakers"):
        find_pairs([*frames, frames[0]], ["a", "b"])


def test_a_speaker_of_one_file_takes_no_part_in_pairs():
    """A speaker's only file is its nearest to everything: with one file per speaker, every
    comparison would be a 'mutual nearest' pair whatever the two say (sweep 2, F9: 276 pairs of
    276 compared, 216 of them different words). Such speakers are left out of the pairs."""
    rng = np.random.default_rng(6)
    frames = [_word(rng, int(n)) for n in rng.integers(15, 25, size=8)]
    each = find_pairs(frames, [f"p{i}" for i in range(8)])  # every file its own speaker
    assert each.pairs == () and each.compared == 0
    assert each.line() == (
        "pairs: none, fewer than two speakers have 2 files or more (a speaker's only file is "
        "its nearest to any other, whatever either says): trained as the paper does"
    )
    # two speakers of four files and one of one: the lone file is never compared
    speakers = ["a"] * 4 + ["b"] * 3 + ["c"]
    found = find_pairs(frames, speakers)
    assert all(7 not in pair for pair in found.pairs)
    assert found.compared == find_pairs(frames[:7], speakers[:7]).compared == 12
    assert list(found.pairs) == _mutual_brute_force(frames[:7], speakers[:7])


def test_aligned_to_puts_the_partner_on_the_files_time_axis():
    rng = np.random.default_rng(4)
    a = _word(rng, 12)
    np.testing.assert_allclose(aligned_to(a, a), a, rtol=1e-6)
    slow = np.repeat(a, 2, axis=0)  # every frame said twice as long
    np.testing.assert_allclose(aligned_to(a, slow), a, rtol=1e-6)
    fast = a[::2]  # (6, F): frames 2k and 2k + 1 of a both match frame k
    out = aligned_to(a, fast)
    assert out.shape == a.shape
    np.testing.assert_allclose(out[0], fast[0], rtol=1e-6)
    np.testing.assert_allclose(out[-1], fast[-1], rtol=1e-6)


def test_paired_segments_go_both_ways_in_the_partners_voice_beside_every_file_itself():
    rng = np.random.default_rng(5)
    frames = [_word(rng, 20), _word(rng, 12), _word(rng, 18)]
    data = PairedSegments(frames, [0, 0, 1], [(0, 2)], segment_frames=16)
    # cut at 16 frames, pieces under 8 dropped: file 0 (20) and file 2 (18) give one segment
    # each, file 1 (12) one of 12; the pair both ways, then every file itself
    assert len(data) == 2 + 3
    (x0, t0, s0), (x2, t2, s2) = data[0], data[1]
    np.testing.assert_array_equal(x0, frames[0][:16])
    np.testing.assert_allclose(t0, aligned_to(frames[0], frames[2])[:16])
    np.testing.assert_array_equal(x2, frames[2][:16])
    np.testing.assert_allclose(t2, aligned_to(frames[2], frames[0])[:16])
    assert (s0, s2) == (1, 0)  # the target's speaker
    for k, (x, target, speaker) in enumerate(data.items[2:]):
        np.testing.assert_array_equal(x, frames[k][:16])
        np.testing.assert_array_equal(target, x)
        assert speaker == [0, 0, 1][k]
    inputs, lengths, speakers, targets = collate_paired([data[0], data[3]])
    assert inputs.shape == targets.shape == (2, 16, 6)
    assert lengths.tolist() == [16, 12] and speakers.tolist() == [1, 0]
    assert torch.equal(targets[1, :12], inputs[1, :12]) and not targets[1, 12:].any()


def test_the_vqvae_reconstructs_the_target_it_is_given():
    from audiorepro.models.vqvae import VQVAE, VQVAEConfig

    torch.manual_seed(0)
    cfg = VQVAEConfig(input_dim=6, d_model=16, n_heads=2, ffn_dim=16, code_dim=4, speaker_dim=2,
                      decoder_channels=8, codebook_size=64)  # fmt: skip
    model = VQVAE(cfg, n_speakers=2).eval()
    feats, lengths, spk = torch.randn(2, 16, 6), torch.tensor([16, 12]), torch.tensor([0, 1])
    own = model(feats, lengths, spk)
    same = model(feats, lengths, spk, feats)
    assert torch.equal(own.loss, same.loss)
    other = model(feats, lengths, spk, torch.zeros_like(feats))
    assert torch.equal(other.codes, own.codes)  # the units read the input either way
    assert not torch.equal(other.reconstruction, own.reconstruction)


def test_units_train_pairs_files_of_two_or_more_speakers_and_says_so():
    from audiorepro.experiments import zerospeech as zs
    from audiorepro.experiments.zerospeech.recordings import step_budget

    cfg = zs.load_config("embedded")
    assert cfg.train.pairs == "none"  # the chapter's pages: the paper's reconstruction
    chosen, why = pairs_default(cfg, {}, 2)
    assert chosen.train.pairs == "nearest"
    assert chosen.train.max_steps == 2 * cfg.train.max_steps == 2400
    assert chosen.train.num_epochs == cfg.train.num_epochs  # not lifted: not doubled
    assert why.startswith("training pairs: nearest, for recordings of 2 speakers, for 2400 ")
    lifted = step_budget(cfg, {})
    assert pairs_default(lifted, {}, 2)[0].train.num_epochs == 2400
    mine = {"train.max_steps": 300}
    chosen, why = pairs_default(zs.load_config("embedded", mine), mine, 2)
    assert chosen.train.max_steps == 300 and "x the preset's" not in why
    assert "--set train.pairs=none for the paper's reconstruction" in why
    chosen, why = pairs_default(cfg, {}, 1)
    assert chosen.train.pairs == "none" and "one speaker" in why
    for given in ({"train.pairs": "none"}, {"train": {"pairs": "none"}}):
        mine = zs.load_config("embedded", given)
        chosen, why = pairs_default(mine, given, 3)
        assert chosen.train.pairs == "none" and why == "training pairs: none (--set train.pairs)"
    with pytest.raises(ValueError, match="train.pairs must be one of"):
        zs.load_config("embedded", {"train.pairs": "all"})


def test_the_chapter_refuses_pairs_it_would_not_use(tmp_path, monkeypatch):
    from audiorepro.experiments import zerospeech as zs

    cfg = zs.load_config("smoke", {"train.pairs": "nearest"})
    with pytest.raises(ValueError, match="pairs are for `units train`"):
        zs.train_vqvae(cfg, cfg.model, seed=0)


def test_units_train_without_a_pair_trains_as_the_paper_does_and_says_so(tmp_path, capsys):
    """Two speakers whose files differ threefold in length: no pair, so neither pairs nor
    their doubled budget; the run records the paper's training."""
    import json

    import soundfile as sf

    from audiorepro.cli import main

    rng = np.random.default_rng(0)
    for speaker, seconds in (("a", 1.0), ("b", 3.0)):
        (tmp_path / "audio" / speaker).mkdir(parents=True)
        for k in range(2):
            noise = 0.1 * rng.standard_normal(int(16000 * seconds)).astype(np.float32)
            sf.write(tmp_path / "audio" / speaker / f"{k}.wav", noise, 16000)
    argv = ["units", "train", "--audio", str(tmp_path / "audio"), "--speaker-of", "parent",
            "--preset", "smoke", "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "training pairs:" not in out  # sought by default, none found: one line says so
    assert "\npairs: none, no two files of different speakers are within 2x" in out
    assert "3 steps: train.max_steps" in out  # the preset's budget: no pair, no doubling
    train = json.loads((tmp_path / "run" / "run.json").read_text())["config"]["train"]
    assert train["pairs"] == "none" and train["max_steps"] == 3
