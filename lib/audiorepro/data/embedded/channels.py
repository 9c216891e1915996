"""Channel conditions for the synthetic speech corpora: telephone band, additive noise, reverb.

eSpeak's output is studio-clean, while the recordings a reader brings are not (an 8 kHz
telephone line, a noisy room, a reverberant hall). These small functions, arrays in and arrays
out, degrade a clean waveform the way such channels do; the corpus generators give each speaker
one of the :data:`CONDITIONS` (:func:`assign_conditions`) and apply it to every utterance of
that speaker (:func:`apply_condition`):

- ``telephone``: :func:`telephone_band`, resampled to 8 kHz, band-passed to 300-3400 Hz and
  resampled back to the corpus rate;
- ``noise``: :func:`add_noise`, white or pink Gaussian noise at an exact signal-to-noise ratio;
- ``reverb``: :func:`reverberate` with :func:`exponential_ir`, a synthetic room impulse
  response (a direct path plus exponentially decaying noise with a given RT60);
- ``clean``: unchanged.

Every function keeps the input's length and sample positions (zero-phase filtering, the
reverberation tail past the end cut off), so phone and word alignments stay exact. Randomness
comes from a ``numpy.random.Generator`` the caller seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.signal import butter, fftconvolve, resample_poly, sosfiltfilt

from audiorepro.config import ConfigError

__all__ = [
    "CHANNEL_MODES",
    "CONDITIONS",
    "NOISE_COLORS",
    "add_noise",
    "apply_condition",
    "assign_conditions",
    "colored_noise",
    "exponential_ir",
    "reverberate",
    "snr_db",
    "telephone_band",
]

CONDITIONS: tuple[str, ...] = ("clean", "telephone", "noise", "reverb")
"""The per-speaker channel conditions."""

CHANNEL_MODES: tuple[str, ...] = ("none", "telephone", "noise", "reverb", "mixed")
"""Corpus-level settings: ``none`` (every speaker clean), one condition for every speaker, or
``mixed`` (each speaker one of :data:`CONDITIONS`, balanced within each split)."""

NOISE_COLORS: tuple[str, ...] = ("white", "pink")

TELEPHONE_RATE = 8000
TELEPHONE_BAND = (300.0, 3400.0)


def _check_wav(wav: np.ndarray) -> np.ndarray:
    wav = np.asarray(wav)
    if wav.ndim != 1 or wav.size == 0:
        raise ValueError(f"expected a non-empty 1-D waveform, got shape {wav.shape}")
    return wav.astype(np.float64)


def telephone_band(
    wav: np.ndarray,
    sr: int,
    band: tuple[float, float] = TELEPHONE_BAND,
    order: int = 6,
) -> np.ndarray:
    """A telephone channel: resample to 8 kHz, band-pass ``band`` Hz, resample back to ``sr``.

    The band-pass is a Butterworth filter of ``order`` applied forwards and backwards
    (zero phase, so nothing moves in time; the magnitude response is squared). The 8 kHz
    resampling removes everything above 4 kHz, the filter what lies below 300 Hz and above
    3.4 kHz.

    Args:
        wav: (S,) waveform at ``sr``.
        sr: its sampling rate in Hz (> 8000).
        band: the pass band in Hz, within (0, 4000).
        order: Butterworth order of the band-pass.

    Returns:
        float32 (S,) at ``sr``.
    """
    x = _check_wav(wav)
    if sr <= TELEPHONE_RATE:
        raise ValueError(f"sr must be above {TELEPHONE_RATE} Hz, got {sr}")
    low, high = band
    if not 0 < low < high < TELEPHONE_RATE / 2:
        raise ValueError(f"band must satisfy 0 < low < high < 4000 Hz, got {band}")
    g = math.gcd(sr, TELEPHONE_RATE)
    narrow = resample_poly(x, TELEPHONE_RATE // g, sr // g)
    sos = butter(order, [low, high], btype="bandpass", fs=TELEPHONE_RATE, output="sos")
    narrow = sosfiltfilt(sos, narrow)
    wide = resample_poly(narrow, sr // g, TELEPHONE_RATE // g)
    out = np.zeros(x.shape[0])
    n = min(x.shape[0], wide.shape[0])
    out[:n] = wide[:n]
    return out.astype(np.float32)


def colored_noise(n: int, rng: np.random.Generator, color: str = "white") -> np.ndarray:
    """``n`` samples of unit-variance Gaussian noise, ``white`` (flat spectrum) or ``pink``
    (power falling as 1/f: white noise shaped by 1/sqrt(f) in the frequency domain, the DC bin
    set to zero), float64 (n,)."""
    if color not in NOISE_COLORS:
        raise ValueError(f"noise color must be one of {NOISE_COLORS}, got {color!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    white = rng.standard_normal(n)
    if color == "pink":
        spectrum = np.fft.rfft(white)
        f = np.arange(spectrum.shape[0], dtype=np.float64)
        scale = np.zeros_like(f)
        scale[1:] = 1.0 / np.sqrt(f[1:])
        white = np.fft.irfft(spectrum * scale, n)
    std = white.std()
    return white / std if std > 0 else white


def snr_db(clean: np.ndarray, noisy: np.ndarray) -> float:
    """Signal-to-noise ratio in dB of ``noisy`` against ``clean``: the powers of ``clean`` and
    of ``noisy - clean`` over the whole signal."""
    c = np.asarray(clean, dtype=np.float64)
    d = np.asarray(noisy, dtype=np.float64) - c
    return 10.0 * math.log10(np.mean(c**2) / np.mean(d**2))


def add_noise(
    wav: np.ndarray, snr: float, rng: np.random.Generator, color: str = "white"
) -> np.ndarray:
    """``wav`` plus :func:`colored_noise` scaled so that the SNR over the whole signal is
    ``snr`` dB exactly (before the float32 rounding of the result).

    Raises:
        ValueError: an all-zero ``wav`` (no signal power to set a ratio against).
    """
    x = _check_wav(wav)
    power = float(np.mean(x**2))
    if power == 0.0:
        raise ValueError("cannot add noise at a set SNR to an all-zero waveform")
    noise = colored_noise(x.shape[0], rng, color)
    noise *= math.sqrt(power / (float(np.mean(noise**2)) * 10.0 ** (snr / 10.0)))
    return (x + noise).astype(np.float32)


def exponential_ir(
    rt60_s: float, sr: int, rng: np.random.Generator, length_s: float | None = None
) -> np.ndarray:
    """A synthetic room impulse response: a direct path (sample 0) plus Gaussian noise under an
    exponential envelope that falls by 60 dB in ``rt60_s`` seconds.

    ``h[0] = 1``; for ``k >= 1``, ``h[k] = g * n_k * 10 ** (-3 k / (rt60_s * sr))`` with
    ``n_k`` standard normal and ``g`` chosen so that the tail holds as much energy as the
    direct path (a direct-to-reverberant ratio of 0 dB). The response lasts ``length_s``
    (default ``rt60_s``: the tail is 60 dB down at its end).

    Returns:
        float64 (round(length_s * sr),).
    """
    if not rt60_s > 0:
        raise ValueError(f"rt60_s must be > 0, got {rt60_s}")
    length_s = rt60_s if length_s is None else length_s
    n = int(round(length_s * sr))
    if n < 2:
        raise ValueError(f"the impulse response needs >= 2 samples, got {n}")
    k = np.arange(1, n)
    tail = rng.standard_normal(n - 1) * 10.0 ** (-3.0 * k / (rt60_s * sr))
    h = np.zeros(n)
    h[0] = 1.0
    h[1:] = tail / math.sqrt(float(np.sum(tail**2)))
    return h


def reverberate(wav: np.ndarray, ir: np.ndarray) -> np.ndarray:
    """``wav`` convolved with the impulse response ``ir``, cut to the length of ``wav`` (the
    tail past the end is dropped, so sample positions and alignments are unchanged); float32."""
    x = _check_wav(wav)
    h = np.asarray(ir, dtype=np.float64)
    if h.ndim != 1 or h.size == 0:
        raise ValueError(f"expected a non-empty 1-D impulse response, got shape {h.shape}")
    return fftconvolve(x, h)[: x.shape[0]].astype(np.float32)


def apply_condition(
    wav: np.ndarray,
    sr: int,
    condition: str,
    rng: np.random.Generator,
    *,
    snr: float = 20.0,
    noise_color: str = "pink",
    rt60_s: float = 0.4,
    peak: float = 0.95,
) -> np.ndarray:
    """``wav`` through one of :data:`CONDITIONS`; the result is scaled down to ``peak`` when it
    would exceed it (so 16-bit files never clip). ``rng`` draws the noise or the impulse
    response. Returns float32 (S,)."""
    if condition == "clean":
        out = _check_wav(wav)
    elif condition == "telephone":
        out = telephone_band(wav, sr)
    elif condition == "noise":
        out = add_noise(wav, snr, rng, noise_color)
    elif condition == "reverb":
        out = reverberate(wav, exponential_ir(rt60_s, sr, rng))
    else:
        raise ValueError(f"unknown channel condition {condition!r}; valid: {CONDITIONS}")
    top = float(np.max(np.abs(out)))
    if top > peak:
        out = out * (peak / top)
    return np.asarray(out, dtype=np.float32)


def assign_conditions(
    groups: Sequence[int], mode: str, seed: int | Sequence[int]
) -> list[list[str]]:
    """One condition per speaker, for speakers in consecutive ``groups`` (e.g. train, test).

    ``none`` gives ``clean`` to everyone and ``telephone``/``noise``/``reverb`` that condition
    to everyone; ``mixed`` cycles each group's speakers through its own seeded permutation of
    :data:`CONDITIONS` (``numpy.random.default_rng([*seed, group index])``), so each split has
    every condition as soon as it has four speakers.

    Raises:
        ConfigError: an unknown mode.
    """
    if mode not in CHANNEL_MODES:
        raise ConfigError(f"channels must be one of {', '.join(CHANNEL_MODES)}, got {mode!r}")
    base = [int(seed)] if isinstance(seed, int | np.integer) else [int(s) for s in seed]
    out = []
    for g, n in enumerate(groups):
        if mode == "mixed":
            order = np.random.default_rng([*base, g]).permutation(len(CONDITIONS))
            out.append([CONDITIONS[int(order[i % len(CONDITIONS)])] for i in range(n)])
        else:
            out.append(["clean" if mode == "none" else mode] * n)
    return out
