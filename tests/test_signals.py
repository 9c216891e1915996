from __future__ import annotations

import numpy as np
import pytest

from audiorepro.signals import SignalDemoConfig, chirp, demo_signal, vowel


def peak_hz(wav, sr):
    spec = np.abs(np.fft.rfft(wav * np.hanning(wav.size)))
    return np.argmax(spec) * sr / wav.size


def test_chirp_sweeps_from_f0_to_f1():
    sr = 16000
    wav = chirp(1.0, sr, f0=200.0, f1=4000.0)
    # instantaneous frequency at time t is f0 + (f1 - f0) t / d
    assert peak_hz(wav[:1600], sr) == pytest.approx(200 + 3800 * 0.05, abs=150)
    assert peak_hz(wav[-1600:], sr) == pytest.approx(200 + 3800 * 0.95, abs=150)


def test_vowel_is_harmonic_with_first_formant_peak():
    sr = 16000
    wav = vowel(1.0, sr, f0=100.0)
    spec = np.abs(np.fft.rfft(wav))
    freqs = np.fft.rfftfreq(wav.size, 1 / sr)
    band = (freqs > 300) & (freqs < 1500)
    strongest = freqs[band][np.argmax(spec[band])]
    assert strongest % 100 == pytest.approx(0, abs=2) or strongest % 100 == pytest.approx(
        100, abs=2
    )
    assert abs(strongest - 730) <= 100  # the harmonic nearest the first formant dominates
    assert np.max(np.abs(wav)) == pytest.approx(0.5)


def test_demo_signal_segments_match_samples():
    cfg = SignalDemoConfig(segment_s=0.5, gap_s=0.1, sr=8000)
    wav, segments = demo_signal(cfg)
    assert [s[0] for s in segments] == ["chirp", "vowel", "noise"]
    assert wav.size == int(8000 * (3 * 0.5 + 4 * 0.1))
    for _, start, end in segments:
        assert end - start == pytest.approx(0.5)
        assert np.all(wav[int(start * 8000) - 10 : int(start * 8000)] == 0)  # silence before
    wav2, _ = demo_signal(cfg)
    assert np.array_equal(wav, wav2)
