"""The speaker rule when none is given (``audiorepro.data.name_fields``): names of three
crossed fields, the word first (the Free Spoken Digit Dataset's ``7_jackson_32``) or the
speaker first, told apart by the words when a table gives them and by the content when not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiorepro.data import name_fields
from audiorepro.data.name_fields import crossed_fields, default_speaker_rule


def _names(*stems: str) -> dict[str, Path]:
    return {s: Path(f"/x/{s}.wav") for s in stems}


def _grid(word_first: bool, words=("0", "1", "2"), speakers=("ann", "bob", "cy"), takes=3):
    return [
        (w, s, k, f"{w}_{s}_{k}" if word_first else f"{s}_{w}_{k}")
        for w in words
        for s in speakers
        for k in range(takes)
    ]


def test_three_crossed_fields_with_a_numbered_take_and_nothing_else():
    fsdd = _names(*(stem for *_, stem in _grid(True)))
    first, second = crossed_fields(fsdd)
    assert set(first) == {"0", "1", "2"} and set(second) == {"ann", "bob", "cy"}
    # Speech Commands' yes/0a7c2a8d_nohash_0: one value in field 2, not crossed
    assert (
        crossed_fields(_names("0a7c_nohash_0", "1b8d_nohash_0", "2c9e_nohash_1", "3d_nohash_0"))
        is None
    )
    assert crossed_fields(_names("ann_1", "ann_2", "bob_1", "bob_2")) is None  # two fields
    assert crossed_fields(_names("7_ann_a", "7_bob_a", "3_ann_b", "3_bob_b")) is None  # no take
    # each speaker says a word of their own: 4 of 16 combinations, not crossed
    apart = _names(*(f"{w}_{s}_0" for w, s in zip("abcd", ("p", "q", "r", "s"), strict=True)))
    assert crossed_fields(apart) is None


def test_with_words_given_the_speaker_is_the_field_that_is_not_the_word():
    grid = _grid(True)
    wavs = _names(*(stem for *_, stem in grid))
    words = {stem: f"w{w}" for w, _, _, stem in grid}  # labels as --word-of reads them
    rule, line = default_speaker_rule(wavs, words=words)
    assert rule == "field:2"
    assert "the names' second field, 3 speakers (ann, bob, cy)" in line
    assert "the word (--word-of) is their first" in line and "--speaker-of prefix" in line
    grid = _grid(False)
    wavs = _names(*(stem for *_, stem in grid))
    rule, line = default_speaker_rule(wavs, words={stem: w for w, _, _, stem in grid})
    assert rule == "prefix" and "speaker_word_take" in line and "--speaker-of field:2" in line
    # the word is neither field (a map of other words): the default, said by nobody
    assert default_speaker_rule(wavs, words={stem: "x" for *_, stem in grid}) == ("prefix", "")
    assert default_speaker_rule(_names("a_1", "b_2"), words={"a_1": "a", "b_2": "b"}) == (
        "prefix",
        "",
    )


def _frames(grid, word_weight: float, speaker_weight: float) -> dict[str, np.ndarray]:
    """39-dim frames: a word's sequence and a speaker's sequence, mixed, plus noise."""
    rng = np.random.default_rng(1)
    pattern = {
        key: rng.standard_normal((30, 39)) for key in {g[0] for g in grid} | {g[1] for g in grid}
    }
    return {
        stem: word_weight * pattern[w]
        + speaker_weight * pattern[s]
        + 0.3 * rng.standard_normal((30, 39))
        for w, s, _, stem in grid
    }


@pytest.mark.parametrize("word_first", [True, False])
def test_without_words_the_field_whose_files_are_said_alike_is_the_word(word_first):
    grid = _grid(word_first, words=tuple("0123"), takes=2)
    wavs = _names(*(stem for *_, stem in grid))
    rule, line = default_speaker_rule(wavs, frames=_frames(grid, 1.0, 0.4))
    word, share, anchors = name_fields.word_field_by_content(
        [_frames(grid, 1.0, 0.4)[n] for n in wavs], *crossed_fields(wavs)
    )
    assert anchors == len(grid) == 24
    if word_first:
        assert (rule, word) == ("field:2", 1) and share >= name_fields.CLEAR_SHARE
        assert "files that share their first field are said alike: of 24 files" in line
    else:
        assert (rule, word) == ("prefix", 2) and share <= 1 - name_fields.CLEAR_SHARE
        assert "speaker_word_take" in line and "share their second field" in line
    # speakers said alike, words not: the other way round
    flipped, _ = default_speaker_rule(wavs, frames=_frames(grid, 0.4, 1.0))
    assert flipped == ("prefix" if word_first else "field:2")
    assert default_speaker_rule(wavs, frames=_frames(grid, 1.0, 0.4)) == (rule, line)  # seeded


def test_content_that_does_not_tell_keeps_the_first_field_and_says_so():
    grid = _grid(True, words=tuple("0123"), takes=2)
    wavs = _names(*(stem for *_, stem in grid))
    rule, line = default_speaker_rule(wavs, frames=_frames(grid, 0.0, 0.0))  # noise alone
    assert rule == "prefix"
    assert "their content does not tell the word from the speaker" in line
    assert "--speaker-of field:2 if the second is the speaker" in line
    few = _grid(True, words=("0", "1"), speakers=("ann", "bob"), takes=2)  # 8 files
    rule, line = default_speaker_rule(
        _names(*(stem for *_, stem in few)), frames=_frames(few, 1.0, 0.2)
    )
    assert rule == "prefix" and "of 8 files" in line  # too few to decide anything


def _take(word: int, speaker: int, take: int) -> np.ndarray:
    """A 'word': three tones of its own in turn; a 'speaker': a level and a slight shift of
    every tone; a take: its own noise."""
    rng = np.random.default_rng(100 * word + 10 * speaker + take)
    t = np.arange(int(0.15 * 16000)) / 16000
    tones = [
        np.sin(2 * np.pi * f * (1 + 0.02 * speaker) * t) * np.hanning(len(t))
        for f in (300 + 400 * word, 1800 - 300 * word, 900 + 250 * word)
    ]
    x = (0.2 + 0.1 * speaker) * np.concatenate(tones)
    return (x + 0.01 * rng.standard_normal(len(x))).astype(np.float32)


def test_units_train_reads_word_first_names_by_their_second_field(tmp_path, monkeypatch):
    """``units train`` without ``--speaker-of`` on a folder named ``word_speaker_take``: the
    speakers are the second field, the run records ``field:2`` (``units encode`` then reads
    the test folder the same way), and the normalisation note starts with why."""
    from audiorepro.experiments.zerospeech.recordings import prepare_units

    monkeypatch.setenv("AUDIOREPRO_DATA", str(tmp_path / "data"))
    audio = tmp_path / "digits"
    audio.mkdir()
    for w in range(3):
        for s, name in enumerate(("ann", "bob", "cy")):
            for k in range(3):
                sf.write(audio / f"{w}_{name}_{k}.wav", _take(w, s, k), 16000)
    data = prepare_units(audio, overrides={"train.pairs": "none"})
    assert data.info["speaker_of"] == "field:2"
    assert sorted(set(data.voices)) == ["ann", "bob", "cy"]
    assert data.info["normalisation"].startswith("speakers: the names' second field, 3 speakers")
    given = prepare_units(audio, speaker_of="prefix", overrides={"train.pairs": "none"})
    assert given.info["speaker_of"] == "prefix" and sorted(set(given.voices)) == ["0", "1", "2"]
    assert not given.info["normalisation"].startswith("speakers:")
