"""Tests for the feature front ends: PaSST log-mel, log-Mel/MFCC, linear spectrogram/Griffin-Lim.

References written here: Kaldi's mel bank as the per-element loop of Kaldi's ``MelBanks``
(mel-computations.cc), the whole PaSST front end as a per-frame numpy loop, and the speech
front ends as per-frame numpy loops or plain librosa calls.
"""

from __future__ import annotations

import math

import librosa
import numpy as np
import pytest
import torch

from audiorepro.features import (
    VALID_MFCC_DIMS,
    PasstMel,
    add_deltas,
    apply_cmvn,
    frame_params,
    griffin_lim,
    kaldi_mel_banks,
    kaldi_mel_scale,
    linear_spectrogram,
    log_mel,
    mfcc,
    mfcc_features,
    passt_mel_basis,
    spectral_convergence,
)

# ---------------------------------------------------------------------------------------------
# references


def kaldi_bank_loop(num_bins, n_fft, sr, low, high):
    """Kaldi's MelBanks, one weight at a time (vtln off)."""
    nyquist = sr / 2
    if high <= 0:
        high += nyquist

    def mel(f):
        return 1127.0 * math.log(1.0 + f / 700.0)

    mel_low, mel_high = mel(low), mel(high)
    delta = (mel_high - mel_low) / (num_bins + 1)
    out = np.zeros((num_bins, n_fft // 2))
    for m in range(num_bins):
        left, centre, right = (
            mel_low + m * delta,
            mel_low + (m + 1) * delta,
            mel_low + (m + 2) * delta,
        )
        for i in range(n_fft // 2):
            x = mel(i * sr / n_fft)
            if left < x < right:
                if x <= centre:
                    out[m, i] = (x - left) / (centre - left)
                else:
                    out[m, i] = (right - x) / (right - centre)
    return out


def passt_reference(x, fmin=0.0, fmax=15000.0, n_mels=128, sr=32000):
    """PaSST's AugmentMelSTFT for one clip, frame by frame in float64 numpy."""
    n_fft, win_length, hop = 1024, 800, 320
    y = x[1:] - 0.97 * x[:-1]
    padded = np.pad(y, n_fft // 2, mode="reflect")
    n = np.arange(win_length)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * n / (win_length - 1))  # symmetric (periodic=False)
    window = np.zeros(n_fft)
    left = (n_fft - win_length) // 2
    window[left : left + win_length] = hann
    bank = np.pad(kaldi_bank_loop(n_mels, n_fft, sr, fmin, fmax), ((0, 0), (0, 1)))
    num_frames = 1 + (len(padded) - n_fft) // hop
    out = np.zeros((n_mels, num_frames))
    for t in range(num_frames):
        spec = np.fft.rfft(padded[t * hop : t * hop + n_fft] * window)
        out[:, t] = bank @ (spec.real**2 + spec.imag**2)
    return (np.log(out + 1e-5) + 4.5) / 5.0


def tone(freqs, seconds, sr, amp=0.2, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    wav = sum(amp * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi)) for f in freqs)
    return wav.astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Kaldi mel bank


@pytest.mark.parametrize(
    ("num_bins", "n_fft", "sr", "low", "high"),
    [
        (128, 1024, 32000, 0.0, 15000.0),  # PaSST at eval
        (128, 1024, 32000, 7.0, 14001.0),  # a training-time jitter draw
        (23, 512, 16000, 20.0, -400.0),  # Kaldi's default bank, high relative to Nyquist
        (40, 400, 8000, 100.0, 3800.0),
    ],
)
def test_kaldi_mel_banks_matches_loop(num_bins, n_fft, sr, low, high):
    bank = kaldi_mel_banks(num_bins, n_fft, sr, low, high)
    assert bank.shape == (num_bins, n_fft // 2)
    np.testing.assert_allclose(bank, kaldi_bank_loop(num_bins, n_fft, sr, low, high), atol=1e-12)


def test_kaldi_mel_banks_hand_computed():
    # 3 bins, 8-point FFT at 8 kHz (bins at 0, 1, 2, 3 kHz), band 0-4000 Hz:
    # mel(4000) = 1127 ln(47/7) = 2146.0756; delta = mel(4000) / 4 = 536.5189.
    # 1 kHz: mel = 1127 ln(17/7) = 999.9907 -> band 0 falling edge
    # (1073.0378 - 999.9907) / 536.5189 = 0.136150, band 1 rising edge
    # (999.9907 - 536.5189) / 536.5189 = 0.863850.
    # 2 kHz: mel = 1127 ln(27/7) = 1521.3674 -> band 1 falls to (1609.5567 - 1521.3674) / 536.5189
    # = 0.164373, band 2 rises to 0.835627. 3 kHz: mel = 1127 ln(37/7) = 1876.4637 -> band 2
    # falls to (2146.0756 - 1876.4637) / 536.5189 = 0.502521.
    bank = kaldi_mel_banks(3, 8, 8000, 0.0, 4000.0)
    assert kaldi_mel_scale(4000.0) == pytest.approx(2146.0756, abs=1e-3)
    np.testing.assert_allclose(
        bank,
        [
            [0.0, 0.136150, 0.0, 0.0],
            [0.0, 0.863850, 0.164373, 0.0],
            [0.0, 0.0, 0.835627, 0.502521],
        ],
        atol=1e-5,
    )
    assert (bank[:, 0] == 0).all()  # 0 Hz sits exactly on the left edge of band 0


def test_passt_mel_basis_properties():
    sr, n_fft = 32000, 1024
    basis = passt_mel_basis(128, n_fft, sr, 0.0, 15000.0).numpy()
    assert basis.shape == (128, 513) and basis.dtype == np.float32
    assert (basis[:, -1] == 0).all()  # the appended column for the Nyquist bin
    assert (basis >= 0).all() and basis.max() <= 1.0

    bin_freqs = np.arange(513) * sr / n_fft
    assert (basis[:, bin_freqs > 15000.0] == 0).all()  # nothing above fmax
    assert basis[:, bin_freqs == 15000.0].max() < 1e-6  # the right edge itself (up to rounding)
    assert basis[-1, (bin_freqs > 14000) & (bin_freqs < 15000)].sum() > 0  # top band reaches it
    mel_max = kaldi_mel_scale(15000.0)
    delta = mel_max / 129
    for m in range(128):
        row = basis[m]
        nz = np.flatnonzero(row)
        assert len(nz) >= 1
        # The peak is one of the two FFT bins around the band centre.
        centre_hz = 700.0 * (math.exp((m + 1) * delta / 1127.0) - 1.0)
        lo = math.floor(centre_hz * n_fft / sr)
        assert int(np.argmax(row)) in (lo, lo + 1)
        # A triangle: contiguous support, rising to the peak and falling after it.
        assert (np.diff(nz) == 1).all()
        peak = int(np.argmax(row))
        assert (np.diff(row[nz[0] : peak + 1]) > 0).all()
        assert (np.diff(row[peak : nz[-1] + 1]) < 0).all()


def test_kaldi_mel_banks_rejects_bad_edges():
    with pytest.raises(ValueError, match="Nyquist"):
        kaldi_mel_banks(128, 1024, 32000, 0.0, 17000.0)
    with pytest.raises(ValueError, match="low_freq"):
        kaldi_mel_banks(128, 1024, 32000, 5000.0, 4000.0)


# ---------------------------------------------------------------------------------------------
# PaSST front end


def test_passt_mel_matches_framewise_reference():
    x = tone([440.0, 3000.0, 9000.0], 0.25, 32000) + 0.01 * np.random.default_rng(
        1
    ).standard_normal(8000).astype(np.float32)
    out = PasstMel().eval()(torch.from_numpy(x)[None])[0].numpy()
    ref = passt_reference(x.astype(np.float64))
    assert out.shape == ref.shape == (128, (8000 - 1) // 320 + 1)
    np.testing.assert_allclose(out, ref, atol=2e-4)


def test_passt_mel_ten_seconds_gives_1000_frames():
    module = PasstMel().eval()
    wav = torch.zeros(2, 320000)
    wav[:, ::7] = 0.1
    out = module(wav)
    assert out.shape == (2, 128, 1000) and out.dtype == torch.float32
    assert module.num_frames(320000) == 1000
    assert module(torch.zeros(1, 32000)).shape == (1, 128, 100)  # (31999 // 320) + 1
    assert module(torch.zeros(1, 32001)).shape == (1, 128, 101)


def test_passt_mel_eval_is_deterministic_and_batch_independent():
    module = PasstMel().eval()
    wav = torch.from_numpy(np.stack([tone([500.0], 1.0, 32000, seed=s) for s in range(3)]))
    state = torch.get_rng_state()
    first, second = module(wav), module(wav)
    assert torch.equal(torch.get_rng_state(), state)  # eval draws nothing from the RNG
    assert torch.equal(first, second)
    torch.testing.assert_close(module(wav[1:2]), first[1:2], atol=1e-5, rtol=0)
    big = torch.cat([wav, wav.flip(1)])  # 6 clips of 32000 samples
    whole = module(big)  # one chunk
    module.cpu_chunk_samples = 4 * 32000  # chunks of 4 and 2 clips
    torch.testing.assert_close(module(big), whole, atol=1e-5, rtol=0)
    # Silence maps to (log(1e-5) + 4.5) / 5 everywhere.
    silent = module(torch.zeros(1, 16000))
    torch.testing.assert_close(silent, torch.full_like(silent, (math.log(1e-5) + 4.5) / 5))


def test_passt_mel_training_jitter_range():
    module = PasstMel().train()
    assert (module.fmin, module.fmax) == (0.0, 15000.0)
    torch.manual_seed(0)
    draws = np.array([module.sample_band() for _ in range(4000)])
    assert set(draws[:, 0].astype(int)) == set(range(10))  # fmin + randint(10)
    assert draws[:, 1].min() >= 14001 and draws[:, 1].max() <= 16000
    assert draws[:, 1].min() < 14050 and draws[:, 1].max() > 15950  # spans the whole range
    assert module.eval().sample_band() == (0.0, 15000.0)


def test_passt_mel_training_uses_the_drawn_band():
    module = PasstMel().train()
    wav = torch.from_numpy(tone([200.0, 14500.0, 15500.0], 0.5, 32000))[None]
    torch.manual_seed(3)
    fmin, fmax = module.sample_band()
    torch.manual_seed(3)
    out = module(wav)
    assert fmax != 15000.0
    ref = passt_reference(wav[0].double().numpy(), fmin=fmin, fmax=fmax)
    # float32 against a float64 reference: 1.2e-4 apart with AVX-512 kernels, 2.1e-4 with AVX2
    # ones (measured); the preset band (0-15000 Hz) instead of the drawn one is 0.26 away.
    np.testing.assert_allclose(out[0].numpy(), ref, atol=1e-3)
    assert not torch.allclose(out, module.eval()(wav))


def test_passt_mel_fp32_under_autocast():
    module = PasstMel().eval()
    wav = torch.from_numpy(tone([1000.0], 0.5, 32000))[None]
    plain = module(wav)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        auto = module(wav)
        half_in = module(wav.bfloat16())
    assert auto.dtype == torch.float32 and half_in.dtype == torch.float32
    assert torch.equal(auto, plain)
    torch.testing.assert_close(half_in, module(wav.bfloat16().float()))


def test_passt_mel_specaugment_masks_only_in_training():
    module = PasstMel(freqm=20, timem=30)
    wav = torch.from_numpy(np.stack([tone([300.0, 5000.0], 1.0, 32000, seed=s) for s in range(4)]))
    masked_value = 4.5 / 5.0  # a masked log-mel of 0, after the normalisation
    torch.manual_seed(0)
    out = module.train()(wav)
    assert (out == masked_value).any()
    for b in range(4):
        rows = torch.nonzero((out[b] == masked_value).all(dim=1)).flatten()
        cols = torch.nonzero((out[b] == masked_value).all(dim=0)).flatten()
        assert len(rows) < 20 and len(cols) < 30
        if len(rows) > 1:
            assert (rows.diff() == 1).all()  # one contiguous band
        if len(cols) > 1:
            assert (cols.diff() == 1).all()
    assert not (module.eval()(wav) == masked_value).any()


def test_passt_mel_rejects_bad_input():
    module = PasstMel()
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        module(torch.zeros(32000))
    with pytest.raises(ValueError, match="more than 513 samples"):
        module(torch.zeros(1, 400))


# ---------------------------------------------------------------------------------------------
# log-Mel and MFCC


def test_frame_params():
    assert frame_params(16000) == (512, 400, 160)
    assert frame_params(8000) == (256, 200, 80)
    with pytest.raises(ValueError, match="sr"):
        frame_params(0)


@pytest.mark.parametrize("num_samples", [1, 159, 160, 16000, 16123])
def test_speech_frame_count_is_10ms(num_samples):
    wav = np.random.default_rng(0).standard_normal(num_samples).astype(np.float32) * 0.1
    expected = 1 + num_samples // 160
    assert log_mel(wav).shape == (expected, 80)
    assert mfcc(wav).shape == (expected, 39)
    assert mfcc(wav, deltas=False).shape == (expected, 13)
    assert linear_spectrogram(wav).shape == (expected, 257)


def test_log_mel_matches_framewise_reference():
    sr = 16000
    wav = tone([300.0, 1200.0], 0.3, sr) + 0.01 * np.random.default_rng(0).standard_normal(
        4800
    ).astype(np.float32)
    feats = log_mel(wav, sr)
    assert feats.dtype == np.float32
    n_fft, win, hop = 512, 400, 160
    window = np.zeros(n_fft)
    left = (n_fft - win) // 2
    window[left : left + win] = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(win) / win)  # periodic
    padded = np.pad(wav.astype(np.float64), n_fft // 2)
    bank = librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=80)
    ref = []
    for t in range(1 + len(wav) // hop):
        spec = np.fft.rfft(padded[t * hop : t * hop + n_fft] * window)
        ref.append(np.log(bank @ np.abs(spec) ** 2 + 1e-6))
    np.testing.assert_allclose(feats, np.array(ref), atol=1e-3)


def test_mfcc_matches_plain_librosa():
    wav = tone([150.0, 700.0, 2500.0], 0.5, 16000) + 0.02 * np.random.default_rng(
        2
    ).standard_normal(8000).astype(np.float32)
    feats = mfcc(wav, 16000)
    static = librosa.feature.mfcc(
        y=wav, sr=16000, n_mfcc=13, n_fft=512, hop_length=160, win_length=400, n_mels=40
    )
    d1 = librosa.feature.delta(static, width=9, order=1, mode="nearest")
    d2 = librosa.feature.delta(static, width=9, order=2, mode="nearest")
    ref = np.concatenate([static, d1, d2]).T
    assert feats.shape == ref.shape == (51, 39)
    np.testing.assert_allclose(feats, ref, atol=2e-3, rtol=1e-4)


def test_deltas_of_constant_and_ramp():
    const = np.full((20, 4), 3.5, dtype=np.float32)
    out = add_deltas(const)
    assert out.shape == (20, 12)
    np.testing.assert_allclose(out[:, 4:], 0.0, atol=1e-5)
    ramp = (np.arange(30, dtype=np.float32)[:, None] * np.array([[1.0, -2.0]])).astype(np.float32)
    out = add_deltas(ramp, width=5)
    np.testing.assert_allclose(out[2:-2, 2:4], [[1.0, -2.0]] * 26, atol=1e-5)  # slope per frame
    np.testing.assert_allclose(out[2:-2, 4:], 0.0, atol=1e-5)
    assert add_deltas(np.ones((2, 3))).shape == (2, 9)  # shorter than the delta window


def test_mfcc_deltas_of_a_stationary_tone_vanish():
    # 400 and 1300 Hz repeat exactly every 10 ms hop, so interior frames are identical.
    feats = mfcc(tone([400.0, 1300.0], 1.0, 16000))
    interior = feats[10:-10]  # away from the zero-padded edge frames
    assert np.abs(interior[:, 13:]).max() < 1e-3
    assert np.abs(interior[:, :13]).max() > 10.0  # the static part is not trivially zero
    np.testing.assert_allclose(interior[:, :13] - interior[:1, :13], 0.0, atol=1e-3)


def test_mfcc_features_dims():
    wav = tone([220.0, 1800.0], 0.4, 16000)
    f39 = mfcc_features(wav, 16000, dim=39)
    f36 = mfcc_features(wav, 16000, dim=36)
    assert f39.shape == (41, 39) and f36.shape == (41, 36)
    np.testing.assert_allclose(f39, mfcc(wav), atol=1e-5)
    # 36 = c1..c12 and their deltas (deltas are per dimension, so dropping c0 commutes).
    keep = [i for i in range(39) if i % 13 != 0]
    np.testing.assert_allclose(f36, f39[:, keep], atol=1e-5)
    assert VALID_MFCC_DIMS == (36, 39)
    with pytest.raises(ValueError, match=r"\(36, 39\).*40"):
        mfcc_features(wav, 16000, dim=40)


def test_cmvn_normalises_each_dimension():
    wav = tone([300.0], 0.5, 16000) * np.linspace(0.1, 1.0, 8000, dtype=np.float32)
    for feats in (log_mel(wav, cmvn=True), mfcc(wav, deltas=False, cmvn=True)):
        np.testing.assert_allclose(feats.mean(axis=0), 0.0, atol=1e-4)
        np.testing.assert_allclose(feats.std(axis=0), 1.0, atol=1e-3)
    static = mfcc_features(wav, dim=39, cmvn=True)[:, :13]
    np.testing.assert_allclose(static.std(axis=0), 1.0, atol=1e-3)
    np.testing.assert_allclose(apply_cmvn(np.ones((5, 2))), 0.0)


@pytest.mark.parametrize(
    ("wav", "match"),
    [
        (np.zeros(0, dtype=np.float32), "empty"),
        (np.zeros((2, 100), dtype=np.float32), r"1-D"),
        (np.array([0.0, np.nan, 0.1], dtype=np.float32), "NaN"),
    ],
)
def test_speech_front_ends_reject_bad_wav(wav, match):
    with pytest.raises(ValueError, match=match):
        log_mel(wav)
    with pytest.raises(ValueError, match=match):
        mfcc(wav)


# ---------------------------------------------------------------------------------------------
# linear spectrogram and Griffin-Lim


def test_spectral_convergence_hand_cases():
    ref = np.array([[3.0, 4.0], [0.0, 0.0]])
    assert spectral_convergence(ref, ref) == 0.0
    assert spectral_convergence(ref, np.zeros_like(ref)) == pytest.approx(1.0)
    assert spectral_convergence(ref, 2 * ref) == pytest.approx(1.0)
    assert spectral_convergence(ref, np.array([[3.0, 4.0], [0.0, 1.0]])) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="same shape"):
        spectral_convergence(ref, ref[:1])
    with pytest.raises(ValueError, match="all zeros"):
        spectral_convergence(np.zeros((2, 2)), ref)


def test_linear_spectrogram_peak_and_shape():
    wav = tone([1000.0], 0.5, 16000)
    mag = linear_spectrogram(wav)
    assert mag.shape == (51, 257) and mag.dtype == np.float32
    assert int(np.argmax(mag[25])) == round(1000 * 512 / 16000)  # bin 32


def test_griffin_lim_round_trip_of_a_harmonic_tone():
    # Threshold: random phase (no iterations' worth of consistency) gives SC ~ 0.6 on this tone;
    # 32 fast Griffin-Lim iterations reach ~0.07 (0.11 after 16, 0.04 after 64). 0.15 leaves a
    # 2x margin for BLAS/FFT differences while failing a broken inversion (wrong hop, window or
    # transpose gives > 0.5).
    sr = 16000
    wav = tone([220.0 * k for k in range(1, 6)], 1.0, sr, amp=0.1)
    mag = linear_spectrogram(wav, sr)
    rec = griffin_lim(mag, n_iter=32, sr=sr, length=len(wav))
    assert rec.shape == wav.shape and rec.dtype == np.float32
    sc = spectral_convergence(mag, linear_spectrogram(rec, sr))
    assert sc < 0.15
    rng = np.random.default_rng(0)
    random_phase = librosa.istft(
        (mag * np.exp(2j * np.pi * rng.random(mag.shape))).T,
        hop_length=160,
        win_length=400,
        n_fft=512,
        length=len(wav),
    )
    assert spectral_convergence(mag, linear_spectrogram(random_phase, sr)) > 3 * sc
    assert np.array_equal(rec, griffin_lim(mag, n_iter=32, sr=sr, length=len(wav)))  # seeded
    assert len(griffin_lim(mag, n_iter=2, sr=sr)) == 160 * (mag.shape[0] - 1)


def test_griffin_lim_rejects_bad_magnitudes():
    with pytest.raises(ValueError, match="non-negative"):
        griffin_lim(-np.ones((10, 257)))
    with pytest.raises(ValueError, match=r"\(T, F\)"):
        griffin_lim(np.ones(257))
