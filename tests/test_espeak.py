"""eSpeak NG synthesis: ctypes layout, exact alignments, determinism, voices, bad input."""

from __future__ import annotations

import ctypes
import math
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from audiorepro.data.embedded import espeak
from audiorepro.data.embedded.espeak import (
    ESPEAK_SAMPLE_RATE,
    EVENT_PHONEME,
    EVENT_WORD,
    SAMPLE_RATE,
    EspeakEvent,
    EspeakEventId,
    SynthesisError,
    Voice,
    english_voices,
    indonesian_voices,
    phone_label,
    synthesize,
    synthesize_raw,
    target_voices,
)
from audiorepro.data.embedded.lexicon import (
    ARPABET_PHONES,
    english_vocabulary,
    indonesian_vocabulary,
)

MALE = Voice("T1", "en-us", "m3")
FEMALE = Voice("T2", "en-us", "f1", pitch=60, rate=160)
# Isolated words separated by sentence pauses; each starts with a sound whose onset is abrupt
# enough for an energy detector (vowel, nasal, plosive, strong fricative).
PAUSED = "One. Two. Nine. Apple. Zoo. Five. Seven."


def test_event_struct_matches_the_c_layout() -> None:
    ptr = ctypes.sizeof(ctypes.c_void_p)
    assert ctypes.sizeof(EspeakEventId) == max(8, ptr)  # union of int, char *, char[8]
    # six 4-byte ints, then the pointer aligned to its size, then the union
    user_data_offset = math.ceil(6 * 4 / ptr) * ptr
    assert EspeakEvent.type.offset == 0
    assert EspeakEvent.unique_identifier.offset == 4
    assert EspeakEvent.text_position.offset == 8
    assert EspeakEvent.length.offset == 12
    assert EspeakEvent.audio_position.offset == 16
    assert EspeakEvent.sample.offset == 20
    assert EspeakEvent.user_data.offset == user_data_offset
    assert EspeakEvent.id.offset == user_data_offset + ptr
    size = user_data_offset + ptr + ctypes.sizeof(EspeakEventId)
    assert ctypes.sizeof(EspeakEvent) == math.ceil(size / ptr) * ptr
    if ptr == 8:
        assert ctypes.sizeof(EspeakEvent) == 40


def test_event_sample_is_the_exact_position_in_the_output() -> None:
    raw = synthesize_raw("Hello there, how are you today?", MALE)
    assert raw.samples.dtype == np.int16 and raw.samples.ndim == 1
    assert sum(ev.type == EVENT_WORD for ev in raw.events) == 6
    phonemes = [ev for ev in raw.events if ev.type == EVENT_PHONEME]
    assert len(phonemes) > 15
    for ev in raw.events:
        # `sample` agrees with the cumulative count of delivered samples: it lies inside the
        # buffer the event came with ...
        assert ev.buffer_start <= ev.sample <= ev.buffer_start + ev.buffer_length
        # ... and audio_position is the same instant truncated to milliseconds.
        assert ev.audio_position == ev.sample * 1000 // ESPEAK_SAMPLE_RATE
    starts = [ev.sample for ev in phonemes]
    assert starts == sorted(starts)
    assert starts[-1] <= raw.samples.shape[0]


def test_synthesis_is_16k_float_audio_in_range() -> None:
    raw = synthesize_raw("The little boy walked to the market.", FEMALE)
    out = synthesize("The little boy walked to the market.", FEMALE)
    assert out.sample_rate == SAMPLE_RATE == 16_000
    assert out.wav.dtype == np.float32 and out.wav.ndim == 1
    assert out.wav.shape[0] == math.ceil(raw.samples.shape[0] * 16_000 / 22_050)
    assert np.all(np.abs(out.wav) <= 1.0)
    assert 0.01 < float(np.sqrt(np.mean(out.wav**2))) < 0.5
    assert out.duration == pytest.approx(raw.samples.shape[0] / 22_050, abs=1e-4)
    assert [w for w, _, _ in out.words] == [
        "The",
        "little",
        "boy",
        "walked",
        "to",
        "the",
        "market",
    ]
    # The 16 kHz signal is the 22.05 kHz one resampled: same energy envelope in time.
    env16 = _envelope(out.wav, SAMPLE_RATE, frame_ms=20)  # 20 ms: whole samples at both rates
    env22 = _envelope(raw.samples.astype(np.float64) / 32768.0, ESPEAK_SAMPLE_RATE, frame_ms=20)
    n = min(env16.size, env22.size)
    assert np.corrcoef(env16[:n], env22[:n])[0, 1] > 0.99


@pytest.mark.parametrize("position", [100, 2205, 22050, 33333])
def test_resampling_maps_sample_positions_exactly(position: int) -> None:
    # A click at 22.05 kHz sample p must peak at 16 kHz sample p * 320 / 441 (no delay).
    samples = np.zeros(44100, dtype=np.int16)
    samples[position] = 20000
    wav = espeak._resample(samples)
    assert wav.shape == (32000,)
    assert abs(int(np.argmax(wav)) - position * 320 / 441) <= 0.5


def _envelope(wav: np.ndarray, sample_rate: int, frame_ms: int = 1) -> np.ndarray:
    """RMS per frame of ``frame_ms`` milliseconds, shape (T,)."""
    hop = sample_rate * frame_ms // 1000
    assert hop * 1000 == sample_rate * frame_ms, "frames must be a whole number of samples"
    n = wav.shape[0] // hop
    frames = np.asarray(wav[: n * hop], dtype=np.float64).reshape(n, hop)
    return np.sqrt(np.mean(frames**2, axis=1))


def _active(wav: np.ndarray, threshold_db: float = -35.0) -> np.ndarray:
    """Per 1 ms frame of 16 kHz audio: is the frame within ``threshold_db`` of the loudest?"""
    env = _envelope(wav, SAMPLE_RATE)
    return env > env.max() * 10 ** (threshold_db / 20)


@pytest.mark.parametrize("voice", [MALE, FEMALE], ids=["m3", "f1"])
def test_word_boundaries_match_the_energy_after_and_before_each_pause(voice: Voice) -> None:
    out = synthesize(PAUSED, voice)
    assert [w for w, _, _ in out.words] == ["One", "Two", "Nine", "Apple", "Zoo", "Five", "Seven"]
    active = _active(out.wav)
    for k, (word, start, end) in enumerate(out.words):
        start_ms, end_ms = round(start * 1000), round(end * 1000)
        # Search each boundary from inside the neighbouring pause (>= 250 ms long here).
        lo = max(0, start_ms - 100)
        onset = lo + int(np.argmax(active[lo : start_ms + 100]))
        assert abs(onset - start_ms) <= 10, (word, start_ms, onset)
        hi = min(active.size, end_ms + 100)
        window = active[end_ms - 100 : hi]
        offset = end_ms - 100 + window.size - int(np.argmax(window[::-1]))
        assert abs(offset - end_ms) <= 10, (word, end_ms, offset)
        if k + 1 < len(out.words):
            gap_start, gap_end = end_ms + 15, round(out.words[k + 1][1] * 1000) - 15
            assert gap_end - gap_start > 200
            assert not active[gap_start:gap_end].any(), word  # the pause is silent


def test_phones_tile_their_words_in_order() -> None:
    out = synthesize("Seven happy children eat fresh bread in the garden.", MALE)
    # eSpeak's dictionary speaks "in the" as one unit, with no word event for "the"
    assert [w for w, _, _ in out.words] == [
        "Seven", "happy", "children", "eat", "fresh", "bread", "in the", "garden"
    ]  # fmt: skip
    assert len(out.word_phones) == len(out.words)
    flat = [i for group in out.word_phones for i in group]
    assert flat == list(range(len(out.phones)))
    for (word, w_start, w_end), group in zip(out.words, out.word_phones, strict=True):
        assert group, word
        assert out.phones[group[0]][1] == w_start
        assert out.phones[group[-1]][2] == w_end
        for i in group:
            _, p_start, p_end = out.phones[i]
            assert w_start <= p_start < p_end <= w_end
    ends = [p[2] for p in out.phones]
    starts = [p[1] for p in out.phones]
    assert all(e <= s for e, s in zip(ends, starts[1:], strict=False))
    assert all(label in ARPABET_PHONES for label, _, _ in out.phones)
    # raw phones hold every event, pauses included, with stress marks kept
    raw_names = [name for name, _, _ in out.raw_phones]
    assert any(name.startswith("_") for name in raw_names)
    assert any(name.startswith("'") for name in raw_names)


def test_english_vocabulary_phones_all_map_to_arpabet() -> None:
    vocab = english_vocabulary()
    labels: set[str] = set()
    for i in range(0, len(vocab), 40):
        chunk = vocab[i : i + 40]
        out = synthesize(" ".join(chunk), MALE)
        assert [w for w, _, _ in out.words] == list(chunk)
        labels.update(label for label, _, _ in out.phones)
    assert labels <= set(ARPABET_PHONES)
    assert len(labels) >= 36  # nearly the whole inventory is exercised


def test_indonesian_words_align_and_keep_espeak_symbols() -> None:
    vocab = indonesian_vocabulary()[:30]
    out = synthesize(" ".join(vocab), Voice("I1", "id", "m1"))
    assert [w for w, _, _ in out.words] == list(vocab)
    symbols = {label for label, _, _ in out.phones}
    assert {"a", "m", "k"} <= symbols
    assert not any(s.startswith(("'", ",", "_")) for s in symbols)


def test_numbers_and_punctuation_group_into_written_words() -> None:
    out = synthesize("I don't have 42 cats, said Mr. Smith!", MALE)
    assert [w for w, _, _ in out.words] == [
        "I",
        "don't",
        "have",
        "42",
        "cats",
        "said",
        "Mr",
        "Smith",
    ]
    forty_two = out.word_phones[3]
    assert len(forty_two) >= 6  # "forty two": eSpeak sends two word events for one token


def test_same_text_and_voice_give_identical_samples() -> None:
    text = "Quiet rivers carry cold water past the old mill."
    first = synthesize(text, FEMALE)
    synthesize("Something else entirely, with another voice.", Voice("X", "en-us", "f3"))
    synthesize("Saya makan nasi.", Voice("Y", "id", "klatt"))
    second = synthesize(text, FEMALE)
    assert first.wav.tobytes() == second.wav.tobytes()
    assert first.words == second.words and first.phones == second.phones
    # and the voice matters
    other = synthesize(text, MALE)
    assert other.wav.shape != first.wav.shape or not np.array_equal(other.wav, first.wav)


def test_concurrent_calls_are_serialised() -> None:
    texts = [f"Number {word} is ready." for word in ("one", "two", "three", "four")]
    expected = [synthesize_raw(t, MALE).samples for t in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda t: synthesize_raw(t, MALE).samples, texts * 2))
    for i, samples in enumerate(got):
        assert np.array_equal(samples, expected[i % len(texts)])


def test_noisy_variant_is_deterministic_too() -> None:
    # f5 mixes breath noise from libc rand(); the engine reseeds it for every call
    voice = Voice("B", "en-us", "f5")
    a = synthesize_raw("Breathe in slowly.", voice).samples
    synthesize_raw("Another sentence.", voice)
    b = synthesize_raw("Breathe in slowly.", voice).samples
    assert np.array_equal(a, b)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variant": "nosuchvariant"}, "unknown eSpeak variant 'nosuchvariant'"),
        ({"language": "xx-yy"}, "unknown eSpeak language 'xx-yy'"),
        ({"pitch": 101}, "pitch must be an int in [0, 100]"),
        ({"rate": 20}, "rate must be an int in [80, 450]"),
        ({"volume": 2.5}, "volume must be an int"),
        ({"name": ""}, "Voice.name must be a non-empty string"),
    ],
)
def test_bad_voices_are_rejected(kwargs: dict, message: str) -> None:
    fields = {"name": "S9", **kwargs}
    with pytest.raises(SynthesisError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Voice(**fields)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "text is empty"),
        ("   \n", "text is empty"),
        ("...", "spoke no word|produced no samples"),
        ("a\x00b", "NUL byte"),
        (b"bytes", "text must be a str"),
    ],
)
def test_bad_text_is_rejected_with_the_voice_named(text: object, message: str) -> None:
    with pytest.raises(SynthesisError, match=message) as info:
        synthesize(text, MALE)  # type: ignore[arg-type]
    assert "en-us+m3" in str(info.value)


def test_phone_labels() -> None:
    assert phone_label("'aI", "en-us") == "AY"
    assert phone_label(",eI", "en") == "EY"
    assert phone_label("dZ", "en-us") == "JH"
    assert phone_label("@L", "en-us") == "L"
    assert phone_label("'a", "id") == "a"
    assert phone_label("n^", "id") == "n^"
    assert set(espeak.ESPEAK_TO_ARPABET.values()) == set(ARPABET_PHONES)
    with pytest.raises(SynthesisError, match="pause"):
        phone_label("_:", "en-us")


def test_voices_are_distinct_and_reproducible() -> None:
    voices = english_voices(34, seed=0)
    assert [v.name for v in voices] == [f"S{i:03d}" for i in range(1, 35)]
    keys = {(v.variant, v.pitch, v.rate, v.pitch_range) for v in voices}
    assert len(keys) == 34
    # 17 male speakers with distinct variants, 17 female ones over the 12 female variants
    assert len({v.variant for v in voices}) == 17 + len(espeak.FEMALE_VARIANTS)
    assert english_voices(34, seed=0) == voices
    assert english_voices(34, seed=1) != voices
    v1, v2 = target_voices()
    assert (v1.name, v2.name) == ("V001", "V002")
    assert {v1.variant, v2.variant}.isdisjoint(v.variant for v in voices)
    indonesian = indonesian_voices(12)
    assert [v.name for v in indonesian] == [f"S{i}" for i in range(101, 113)]
    assert all(v.language == "id" for v in indonesian)
    assert len({(v.variant, v.pitch, v.rate) for v in indonesian}) == 12
    with pytest.raises(ValueError, match="n must be"):
        english_voices(0)


def test_a_failed_synthesis_is_an_error_naming_voice_and_text(monkeypatch, tmp_path) -> None:
    voice = english_voices(1)[0]
    silent = espeak.RawSynthesis(samples=np.zeros(0, dtype=np.int16), events=())
    monkeypatch.setattr(espeak, "synthesize_raw", lambda text, voice: silent)
    with pytest.raises(
        SynthesisError, match=rf"{re.escape(voice.spec)}.*'hello there'.*no samples"
    ):
        synthesize("hello there", voice)
    # the corpus generator stops with it, and leaves no corpus behind
    from audiorepro.data.embedded.generate import ensure_corpora

    with pytest.raises(SynthesisError, match="no samples"):
        ensure_corpora("smoke", 0, out=tmp_path / "c", only=["zerospeech"], verbose=False)
    assert not (tmp_path / "c" / "zerospeech").exists()
    assert not [p for p in (tmp_path / "c").iterdir() if p.name.startswith(".zerospeech")]
