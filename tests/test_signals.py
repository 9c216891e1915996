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


# --- channel conditions (audiorepro.data.embedded.channels) -----------------------------------

from audiorepro.config import ConfigError  # noqa: E402
from audiorepro.data.embedded import channels as ch  # noqa: E402


def _band_power(wav, sr, low, high):
    spec = np.abs(np.fft.rfft(wav)) ** 2
    f = np.fft.rfftfreq(wav.size, 1 / sr)
    return spec[(f >= low) & (f < high)].mean()


def test_telephone_band_removes_energy_outside_300_3400_hz():
    sr = 16000
    white = np.random.default_rng(0).standard_normal(4 * sr).astype(np.float32) * 0.1
    out = ch.telephone_band(white, sr)
    assert out.shape == white.shape and out.dtype == np.float32
    passband = _band_power(out, sr, 500, 3000)
    # in band the level is kept (within 1 dB); below 150 Hz and above 3.8 kHz it is > 30 dB down
    assert 10 * np.log10(passband / _band_power(white, sr, 500, 3000)) == pytest.approx(0, abs=1)
    assert 10 * np.log10(_band_power(out, sr, 20, 150) / passband) < -30
    assert 10 * np.log10(_band_power(out, sr, 3800, 8000) / passband) < -30
    # at the edges of the band the attenuation has begun: below 300 Hz / above 3.4 kHz
    assert _band_power(out, sr, 150, 250) < 0.5 * passband
    assert _band_power(out, sr, 3500, 3700) < 0.5 * passband


def test_telephone_band_keeps_timing_and_rejects_bad_rates():
    sr = 16000
    t = np.arange(sr) / sr
    tone = np.sin(2 * np.pi * 1000 * t).astype(np.float32)
    out = ch.telephone_band(tone, sr)
    # zero phase: a 1 kHz tone comes out in phase and at the same level (edges aside)
    mid = slice(2000, -2000)
    assert np.max(np.abs(out[mid] - tone[mid])) < 0.02
    with pytest.raises(ValueError, match="above 8000"):
        ch.telephone_band(tone, 8000)
    with pytest.raises(ValueError, match="band"):
        ch.telephone_band(tone, sr, band=(300.0, 5000.0))


@pytest.mark.parametrize("color", ["white", "pink"])
@pytest.mark.parametrize("snr", [0.0, 10.0, 20.0])
def test_add_noise_reaches_the_set_snr(color, snr):
    sr = 16000
    clean = vowel(1.0, sr)
    noisy = ch.add_noise(clean, snr, np.random.default_rng(1), color)
    assert noisy.dtype == np.float32 and noisy.shape == clean.shape
    assert ch.snr_db(clean, noisy) == pytest.approx(snr, abs=0.5)
    # 16-bit quantisation, as in the corpus files, keeps it within 0.5 dB too
    quantised = np.round(noisy * 32767) / 32767
    assert ch.snr_db(clean, quantised) == pytest.approx(snr, abs=0.5)


def test_pink_noise_falls_3_db_per_octave_and_white_is_flat():
    rng = np.random.default_rng(0)
    sr = 16000
    pink = ch.colored_noise(8 * sr, rng, "pink")
    white = ch.colored_noise(8 * sr, rng, "white")
    assert pink.std() == pytest.approx(1.0) and white.std() == pytest.approx(1.0)
    octave_drop = 10 * np.log10(
        _band_power(pink, sr, 1000, 2000) / _band_power(pink, sr, 500, 1000)
    )
    assert octave_drop == pytest.approx(-3.0, abs=0.5)
    flat = 10 * np.log10(_band_power(white, sr, 1000, 2000) / _band_power(white, sr, 500, 1000))
    assert flat == pytest.approx(0.0, abs=0.5)


def test_noise_is_seeded_and_silence_is_rejected():
    clean = vowel(0.2, 16000)
    a = ch.add_noise(clean, 10.0, np.random.default_rng(3), "pink")
    b = ch.add_noise(clean, 10.0, np.random.default_rng(3), "pink")
    c = ch.add_noise(clean, 10.0, np.random.default_rng(4), "pink")
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(ValueError, match="all-zero"):
        ch.add_noise(np.zeros(100), 10.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="noise color"):
        ch.colored_noise(10, np.random.default_rng(0), "brown")


def test_exponential_ir_decays_60_db_in_rt60():
    sr, rt60 = 16000, 0.5
    h = ch.exponential_ir(rt60, sr, np.random.default_rng(0), length_s=1.0)
    assert h.shape == (sr,) and h[0] == 1.0
    assert np.sum(h[1:] ** 2) == pytest.approx(1.0)  # direct-to-reverberant ratio 0 dB
    # energy in 50 ms windows, rt60 / 3 apart, differs by 20 dB (60 dB per rt60)
    win = int(0.05 * sr)
    step = int(rt60 / 3 * sr)
    early = np.mean(h[100 : 100 + win] ** 2)
    late = np.mean(h[100 + step : 100 + step + win] ** 2)
    assert 10 * np.log10(late / early) == pytest.approx(-20.0, abs=2.0)
    with pytest.raises(ValueError, match="rt60_s"):
        ch.exponential_ir(0.0, sr, np.random.default_rng(0))


def test_reverberating_a_unit_impulse_gives_the_impulse_response():
    sr = 16000
    h = ch.exponential_ir(0.3, sr, np.random.default_rng(5))
    impulse = np.zeros(sr)
    impulse[0] = 1.0
    out = ch.reverberate(impulse, h)
    assert out.shape == impulse.shape  # the tail past the end is cut: alignments are kept
    np.testing.assert_allclose(out[: h.size], h, atol=1e-6)
    assert np.all(np.abs(out[h.size :]) < 1e-6)
    # a delayed impulse gives the delayed response, cut at the input's end
    late = np.zeros(sr)
    late[sr - 100] = 1.0
    np.testing.assert_allclose(ch.reverberate(late, h)[sr - 100 :], h[:100], atol=1e-6)
    # the same seed gives the same response
    assert np.array_equal(h, ch.exponential_ir(0.3, sr, np.random.default_rng(5)))


def test_apply_condition_keeps_length_limits_the_peak_and_is_seeded():
    sr = 16000
    clean = vowel(0.5, sr)
    for condition in ch.CONDITIONS:
        out = ch.apply_condition(clean, sr, condition, np.random.default_rng(0), snr=0.0)
        again = ch.apply_condition(clean, sr, condition, np.random.default_rng(0), snr=0.0)
        assert out.shape == clean.shape and out.dtype == np.float32
        assert np.max(np.abs(out)) <= 0.95 + 1e-6
        assert np.array_equal(out, again)
    assert np.array_equal(ch.apply_condition(clean, sr, "clean", None), clean)
    with pytest.raises(ValueError, match="unknown channel condition"):
        ch.apply_condition(clean, sr, "underwater", np.random.default_rng(0))


def test_assign_conditions_balances_each_group_and_depends_on_the_seed():
    mixed = ch.assign_conditions([8, 4, 3], "mixed", [0, 1])
    assert [len(g) for g in mixed] == [8, 4, 3]
    assert sorted(mixed[0]) == sorted(ch.CONDITIONS * 2)
    assert sorted(mixed[1]) == sorted(ch.CONDITIONS)
    assert len(set(mixed[2])) == 3
    assert mixed == ch.assign_conditions([8, 4, 3], "mixed", [0, 1])
    others = [ch.assign_conditions([8, 4, 3], "mixed", [s, 1]) for s in range(1, 6)]
    assert any(o != mixed for o in others)
    assert ch.assign_conditions([2, 1], "none", 0) == [["clean", "clean"], ["clean"]]
    assert ch.assign_conditions([2], "reverb", 0) == [["reverb", "reverb"]]
    with pytest.raises(ConfigError, match="channels must be one of"):
        ch.assign_conditions([2], "studio", 0)
