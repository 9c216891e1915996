"""Procedural sound events: exact lengths, energy, and attributes that change the signal."""

from __future__ import annotations

import numpy as np
import pytest

from audiorepro.data.embedded.sound_events import (
    BACKGROUND_CLASSES,
    PEAK_LEVEL,
    SAMPLE_RATE,
    SOUND_EVENTS,
    SPEECH,
    EventAttributes,
    SoundEventError,
    event_class,
    synthesize,
)

TEMPO_CLASSES = [n for n, c in SOUND_EVENTS.items() if "tempo" in c.attributes]
PITCH_CLASSES = [n for n, c in SOUND_EVENTS.items() if "pitch" in c.attributes]


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def power_centroid(wav: np.ndarray, sr: int = SAMPLE_RATE) -> float:
    """Spectral centroid (Hz) weighted by power."""
    power = np.abs(np.fft.rfft(wav.astype(np.float64))) ** 2
    freqs = np.fft.rfftfreq(len(wav), 1.0 / sr)
    return float((power * freqs).sum() / power.sum())


def flux_onsets(wav: np.ndarray, n_fft: int = 1024, hop: int = 320) -> int:
    """Onsets: peaks of positive log-spectral flux, >= 60 ms apart, above an adaptive level."""
    frames = (len(wav) - n_fft) // hop + 1
    idx = np.arange(n_fft)[None, :] + hop * np.arange(frames)[:, None]
    spec = np.log1p(100 * np.abs(np.fft.rfft(wav[idx] * np.hanning(n_fft), axis=1)))
    flux = np.maximum(0.0, np.diff(spec, axis=0)).sum(axis=1)
    level = np.median(flux) + 0.15 * (flux.max() - np.median(flux))
    kept: list[int] = []
    for i in range(1, len(flux) - 1):
        if flux[i] > level and flux[i] >= flux[i - 1] and flux[i] >= flux[i + 1]:
            if not kept or i - kept[-1] >= 6:
                kept.append(i)
    return len(kept)


def sound_bursts(wav: np.ndarray, hop: int) -> int:
    """Number of times the frame RMS rises above a tenth of its maximum."""
    n = len(wav) // hop
    rms = np.sqrt((wav[: n * hop].reshape(n, hop).astype(np.float64) ** 2).mean(axis=1))
    on = rms > 0.1 * rms.max()
    return int(np.sum(on[1:] & ~on[:-1]) + on[0])


def pitch_switches(wav: np.ndarray, win: int = 640, hop: int = 320) -> int:
    """How often the frame zero-crossing rate (a pitch proxy) crosses its median."""
    frames = (len(wav) - win) // hop + 1
    idx = np.arange(win)[None, :] + hop * np.arange(frames)[:, None]
    zcr = np.diff(np.signbit(wav[idx]), axis=1).sum(axis=1)
    high = zcr > np.median(zcr)
    return int(np.sum(high[1:] != high[:-1]))


def repetitions(name: str, wav: np.ndarray) -> int:
    """The repetition count that fits how each class expresses tempo."""
    if name == "siren":  # tempo is the rate of the pitch wail
        return pitch_switches(wav)
    if name == "sweep":  # separate sweeps with short gaps
        return sound_bursts(wav, hop=320)
    if name == "telephone":  # ring cadence; 50 ms frames average out the 20 Hz trill
        return sound_bursts(wav, hop=1600)
    return flux_onsets(wav)


def test_at_least_sixteen_classes_with_vocabulary():
    assert len(SOUND_EVENTS) >= 16
    assert set(BACKGROUND_CLASSES) <= set(SOUND_EVENTS)
    for cls in [*SOUND_EVENTS.values(), SPEECH]:
        assert cls.subjects and cls.verbs and cls.gerunds and cls.sounds, cls.name
        assert len(cls.keywords) >= 3, cls.name
        assert 0 < cls.min_duration <= cls.max_duration, cls.name
        for value in ("low", "high", "quiet", "loud"):
            if ("pitch" if value in ("low", "high") else "loudness") in cls.attributes:
                assert cls.adjectives(value) or cls.adverbs(value), (cls.name, value)


@pytest.mark.parametrize("name", sorted(SOUND_EVENTS))
def test_event_is_finite_with_exact_length_and_energy(name):
    for duration in (0.05, 1.0, 3.31):
        for loudness in ("quiet", "loud"):
            attributes = EventAttributes(loudness=loudness, duration=duration)
            wav = synthesize(name, attributes, _rng(3))
            assert wav.dtype == np.float32
            assert wav.shape == (round(duration * SAMPLE_RATE),)
            assert np.isfinite(wav).all()
            assert np.sqrt(np.mean(wav.astype(np.float64) ** 2)) > 1e-3
            assert np.max(np.abs(wav)) == pytest.approx(PEAK_LEVEL[loudness], rel=1e-5)


@pytest.mark.parametrize("name", sorted(SOUND_EVENTS))
def test_event_is_deterministic_given_the_generator(name):
    attributes = EventAttributes(pitch="high", tempo="fast", duration=1.5)
    first = synthesize(name, attributes, _rng(7))
    assert np.array_equal(first, synthesize(name, attributes, _rng(7)))
    assert not np.array_equal(first, synthesize(name, attributes, _rng(8)))


@pytest.mark.parametrize("name", PITCH_CLASSES)
def test_higher_pitch_raises_spectral_centroid(name):
    centroids = [
        power_centroid(synthesize(name, EventAttributes(pitch=p, duration=3.0), _rng(1)))
        for p in ("low", "medium", "high")
    ]
    # Pitch steps are 1.5-3x apart; the 6 % random detuning cannot reorder them.
    assert centroids[0] * 1.3 < centroids[1]
    assert centroids[1] * 1.3 < centroids[2]


@pytest.mark.parametrize("name", TEMPO_CLASSES)
def test_fast_tempo_repeats_more_often(name):
    for pitch in ("low", "high"):
        slow = synthesize(name, EventAttributes(pitch=pitch, tempo="slow", duration=5.0), _rng(2))
        fast = synthesize(name, EventAttributes(pitch=pitch, tempo="fast", duration=5.0), _rng(2))
        assert repetitions(name, fast) >= 1.4 * repetitions(name, slow), (name, pitch)


def _rms(wav: np.ndarray) -> float:
    return float(np.sqrt(np.mean(wav.astype(np.float64) ** 2)))


def test_loudness_sets_the_level_about_14_db_apart():
    expected = PEAK_LEVEL["loud"] / PEAK_LEVEL["quiet"]
    for name in SOUND_EVENTS:
        quiet = synthesize(name, EventAttributes(loudness="quiet", duration=2.0), _rng(4))
        loud = synthesize(name, EventAttributes(loudness="loud", duration=2.0), _rng(4))
        if name == "rain":  # heavy rain also has more drops: more energy per peak level
            assert _rms(loud) / _rms(quiet) > expected
        else:
            assert _rms(loud) / _rms(quiet) == pytest.approx(expected, rel=1e-3)


def test_rain_density_follows_loudness_and_thunder_ignores_pitch():
    light = synthesize("rain", EventAttributes(loudness="quiet", duration=2.0), _rng(0))
    heavy = synthesize("rain", EventAttributes(loudness="loud", duration=2.0), _rng(0))
    assert not np.allclose(light / np.abs(light).max(), heavy / np.abs(heavy).max())
    low = synthesize("thunder", EventAttributes(pitch="low", duration=2.0), _rng(0))
    high = synthesize("thunder", EventAttributes(pitch="high", duration=2.0), _rng(0))
    assert np.array_equal(low, high)  # pitch is not an attribute of thunder


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(SoundEventError, match="unknown sound event class 'gong'.*bell"):
        synthesize("gong", EventAttributes(), _rng())
    with pytest.raises(SoundEventError, match="unknown sound event class"):
        event_class("gong")
    with pytest.raises(SoundEventError, match="no synthesiser"):
        synthesize("speech", EventAttributes(), _rng())
    with pytest.raises(SoundEventError, match="pitch must be one of low, medium, high"):
        EventAttributes(pitch="very high")
    with pytest.raises(SoundEventError, match="tempo"):
        EventAttributes(tempo="medium")
    with pytest.raises(SoundEventError, match="duration must be > 0"):
        EventAttributes(duration=0.0)
    with pytest.raises(SoundEventError, match="duration must be a number"):
        EventAttributes(duration=float("nan"))
