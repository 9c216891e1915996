"""Synthetic test signals whose content is known exactly: a chirp, a vowel, noise.

The first page of the book shows every front end on one signal made of three labelled parts, so
the reader can check each feature against what is known to be in the audio: a linear chirp
(a rising line), a vowel-like harmonic sound (a comb of harmonics shaped by formants) and white
noise (flat energy). The page's preset is :class:`SignalDemoConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter

from audiorepro.config import field

Segment = tuple[str, float, float]
"""``(label, start_s, end_s)`` of one part of a test signal."""

# Formants (Hz) and bandwidths of an /a/-like vowel, from classic adult-male averages.
VOWEL_A_FORMANTS = ((730.0, 90.0), (1090.0, 110.0), (2440.0, 170.0))


@dataclass(frozen=True)
class SignalDemoConfig:
    """Parameters of the audio-features page (``book/00_data/presets/*.yaml``)."""

    seed: int = field(0, help="seed of the noise segment")
    segment_s: float = field(1.0, help="duration of each of the three segments, seconds")
    gap_s: float = field(0.15, help="silence between segments, seconds")
    sr: int = field(32000, help="sampling rate of the test signal (PaSST's rate)")
    speech_sr: int = field(16000, help="rate the speech front ends (log-Mel, MFCC) run at")
    griffin_lim_iters: int = field(32, help="Griffin-Lim iterations for the round trip")


def chirp(duration_s: float, sr: int, f0: float = 100.0, f1: float = 8000.0) -> np.ndarray:
    """Linear chirp from ``f0`` to ``f1`` Hz, amplitude 0.5, shape (S,) float32."""
    t = np.arange(int(round(duration_s * sr))) / sr
    phase = 2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * duration_s))
    return (0.5 * np.sin(phase)).astype(np.float32)


def vowel(
    duration_s: float,
    sr: int,
    f0: float = 120.0,
    formants: tuple[tuple[float, float], ...] = VOWEL_A_FORMANTS,
) -> np.ndarray:
    """A vowel-like sound: an impulse train at ``f0`` through second-order formant resonators.

    The source-filter model of speech in four lines; the spectrum is a comb of harmonics of
    ``f0`` whose envelope peaks at the formant frequencies. Peak-normalised to 0.5, (S,) float32.
    """
    n = int(round(duration_s * sr))
    source = np.zeros(n)
    source[:: max(1, int(round(sr / f0)))] = 1.0
    out = source
    for freq, bw in formants:
        r = np.exp(-np.pi * bw / sr)
        theta = 2 * np.pi * freq / sr
        out = lfilter([1.0 - r], [1.0, -2 * r * np.cos(theta), r * r], out)
    fade = np.minimum(1.0, np.minimum(np.arange(n), np.arange(n)[::-1]) / (0.01 * sr))
    out = out * fade
    return (0.5 * out / np.max(np.abs(out))).astype(np.float32)


def noise(duration_s: float, sr: int, seed: int = 0, level: float = 0.2) -> np.ndarray:
    """White Gaussian noise with standard deviation ``level``, (S,) float32, seeded."""
    rng = np.random.default_rng(seed)
    return (level * rng.standard_normal(int(round(duration_s * sr)))).astype(np.float32)


def demo_signal(config: SignalDemoConfig) -> tuple[np.ndarray, list[Segment]]:
    """Chirp, vowel and noise separated by silence; returns ``(wav (S,), segments)``."""
    sr, d = config.sr, config.segment_s
    parts = [
        ("chirp", chirp(d, sr)),
        ("vowel", vowel(d, sr)),
        ("noise", noise(d, sr, seed=config.seed)),
    ]
    gap = np.zeros(int(round(config.gap_s * sr)), dtype=np.float32)
    pieces, segments, t = [gap], [], config.gap_s
    for label, wav in parts:
        pieces += [wav, gap]
        segments.append((label, t, t + wav.size / sr))
        t += (wav.size + gap.size) / sr
    return np.concatenate(pieces), segments
