"""Procedurally synthesised sound events with caption vocabulary, for the embedded caption corpora.

The embedded audio-caption corpora (ClothoV2, AudioCaps and WavCaps look-alikes, see
:mod:`audiorepro.data.embedded.audio_caption`) need sounds whose content is known exactly, so
that captions can be written from it. Each event class here is a small signal model (tones,
resonators, shaped noise, pulse trains) driven by four attributes:

- ``pitch`` (``low`` / ``medium`` / ``high``): the fundamental, resonance or band centre;
  a higher pitch raises the spectral centroid;
- ``loudness`` (``quiet`` / ``loud``): the peak level (0.12 or 0.6 of full scale);
- ``tempo`` (``slow`` / ``fast``): the repetition rate of repeating events (beeps, knocks,
  steps, strikes, syllables);
- ``duration``: seconds; the output has exactly ``round(duration * sample_rate)`` samples.

A synthesiser is a deterministic function of ``(attributes, numpy Generator, sample_rate)``:
the same generator state gives the same samples. Everything is vectorised numpy (shaped noise
goes through one FFT), so a minute of audio takes a few tens of milliseconds.

Each class also carries its caption vocabulary (:class:`EventClass`): subject noun phrases
("a {adj}bell"), verb phrases ("rings{adv}"), progressive forms ("ringing{adv}") and sound noun
phrases ("the {adj}ringing of a bell"), with ``{adj}`` and ``{adv}`` slots that the caption
writer (:mod:`audiorepro.data.embedded.scenes`) fills with words tied to the attributes
("deep", "faint", "rapidly"), and keywords in the style of Clotho's metadata.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import scipy.fft

SAMPLE_RATE = 32000
"""Sampling rate (Hz) of the caption corpora: PaSST's input rate, as in ClothoV2 pipelines."""

PITCHES = ("low", "medium", "high")
LOUDNESSES = ("quiet", "loud")
TEMPI = ("slow", "fast")

PEAK_LEVEL = {"quiet": 0.12, "loud": 0.6}
"""Peak amplitude of an event by loudness (about 14 dB apart)."""

DEFAULT_ADJECTIVES: dict[str, tuple[str, ...]] = {
    "low": ("deep", "low-pitched"),
    "high": ("high-pitched", "shrill"),
    "loud": ("loud",),
    "quiet": ("faint", "quiet", "soft", "distant"),
}
"""Words a caption may use for an attribute value in an ``{adj}`` slot (medium pitch has none)."""

DEFAULT_ADVERBS: dict[str, tuple[str, ...]] = {
    "fast": ("rapidly", "quickly"),
    "slow": ("slowly",),
    "loud": ("loudly",),
    "quiet": ("quietly", "softly", "faintly"),
}
"""Words a caption may use for an attribute value in an ``{adv}`` slot."""


class SoundEventError(ValueError):
    """An unknown event class or invalid attributes; the message lists what is valid."""


@dataclasses.dataclass(frozen=True)
class EventAttributes:
    """What a sound event sounds like; the caption writer turns these into words.

    Attributes:
        pitch: ``low``, ``medium`` or ``high``; ignored by classes without ``pitch`` in
            :attr:`EventClass.attributes`.
        loudness: ``quiet`` or ``loud``.
        tempo: ``slow`` or ``fast``; ignored by classes that do not repeat.
        duration: seconds (> 0).
    """

    pitch: str = "medium"
    loudness: str = "loud"
    tempo: str = "slow"
    duration: float = 1.0

    def __post_init__(self) -> None:
        for name, valid in (("pitch", PITCHES), ("loudness", LOUDNESSES), ("tempo", TEMPI)):
            value = getattr(self, name)
            if value not in valid:
                raise SoundEventError(f"{name} must be one of {', '.join(valid)}, got {value!r}")
        if not (isinstance(self.duration, int | float) and np.isfinite(self.duration)):
            raise SoundEventError(f"duration must be a number of seconds, got {self.duration!r}")
        if self.duration <= 0:
            raise SoundEventError(f"duration must be > 0 s, got {self.duration!r}")


Synth = Callable[[EventAttributes, np.random.Generator, int], np.ndarray]


@dataclasses.dataclass(frozen=True)
class EventClass:
    """One sound event class: its synthesiser and its caption vocabulary.

    Templates hold an ``{adj}`` slot (adjectives for pitch and loudness, e.g. "a {adj}bell")
    and/or an ``{adv}`` slot (adverbs for tempo and loudness, e.g. "rings{adv}"); the caption
    writer fills each slot with words from :meth:`adjectives` / :meth:`adverbs` or with nothing.
    Any subject combines with any verb, so the lists must agree in number and sense.

    Attributes:
        name: the class id used in scenes and manifests (``"bell"``).
        subjects: noun phrases that act ("a {adj}bell", "someone").
        verbs: third-person singular verb phrases ("rings{adv}", "knocks{adv} on a door").
        gerunds: progressive forms used after "is" ("ringing{adv}", "being struck{adv}").
        sounds: noun phrases naming the sound ("the {adj}ringing of a bell").
        keywords: Clotho-style metadata keywords, most specific first.
        attributes: the attributes that change the signal (subset of pitch, loudness, tempo).
        min_duration: shortest duration (s) a scene gives this event.
        max_duration: longest duration (s) a scene gives this event.
        category: coarse family used by generic captions (tonal, impact, nature, ...).
        background: whether the class can serve as a scene's background bed.
        synth: ``synth(attributes, rng, sample_rate) -> wav`` (S,) float32; ``None`` for
            speech, whose audio comes from a speech synthesiser.
        adjective_words: per-value overrides of :data:`DEFAULT_ADJECTIVES`.
        adverb_words: per-value overrides of :data:`DEFAULT_ADVERBS`.
    """

    name: str
    subjects: tuple[str, ...]
    verbs: tuple[str, ...]
    gerunds: tuple[str, ...]
    sounds: tuple[str, ...]
    keywords: tuple[str, ...]
    attributes: tuple[str, ...]
    min_duration: float
    max_duration: float
    category: str
    background: bool = False
    synth: Synth | None = dataclasses.field(default=None, repr=False, compare=False)
    adjective_words: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    adverb_words: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def adjectives(self, value: str) -> tuple[str, ...]:
        """Adjectives for an attribute value (``"low"`` -> ``("deep", ...)``); may be empty."""
        return tuple(self.adjective_words.get(value, DEFAULT_ADJECTIVES.get(value, ())))

    def adverbs(self, value: str) -> tuple[str, ...]:
        """Adverbs for an attribute value (``"fast"`` -> ``("rapidly", ...)``); may be empty."""
        return tuple(self.adverb_words.get(value, DEFAULT_ADVERBS.get(value, ())))


# --- signal building blocks --------------------------------------------------------------------


def _num_samples(duration: float, sr: int) -> int:
    return max(1, int(round(duration * sr)))


def _jitter(rng: np.random.Generator, value: float, spread: float = 0.06) -> float:
    """``value`` scaled by a random factor in [1 - spread, 1 + spread]: instances differ."""
    return float(value * rng.uniform(1.0 - spread, 1.0 + spread))


def _onsets(
    n: int, sr: int, rate: float, rng: np.random.Generator, jitter: float = 0.08
) -> np.ndarray:
    """Sample indices of a regular pulse train at ``rate`` Hz with timing jitter.

    The first onset is within the first 20 ms, so even a very short event holds one pulse.
    """
    period = 1.0 / rate
    count = int(np.ceil(n / sr / period)) + 1
    times = np.arange(count) * period
    times = times + rng.uniform(-jitter, jitter, count) * period
    times[0] = rng.uniform(0.0, min(0.02, n / sr / 4))
    times = np.sort(times[times >= 0])
    idx = np.round(times * sr).astype(np.int64)
    return idx[idx < n]


def _overlay(n: int, grain: np.ndarray, onsets: np.ndarray, gains: np.ndarray | None = None):
    """Sum copies of ``grain`` starting at ``onsets`` into a signal of ``n`` samples."""
    out = np.zeros(n, dtype=np.float64)
    if gains is None:
        gains = np.ones(len(onsets))
    for start, gain in zip(onsets, gains, strict=True):
        stop = min(n, start + len(grain))
        out[start:stop] += gain * grain[: stop - start]
    return out


def _fade(x: np.ndarray, sr: int, ms: float = 5.0) -> np.ndarray:
    """Raised-cosine fade in and out, so that an event starts and stops without a click."""
    k = min(len(x) // 2, int(sr * ms / 1000))
    if k > 0:
        ramp = 0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, k))
        x[:k] *= ramp
        x[-k:] *= ramp[::-1]
    return x


def _shaped_noise(
    n: int, sr: int, rng: np.random.Generator, gain: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Gaussian noise whose magnitude spectrum is multiplied by ``gain(freqs_hz)`` (one FFT).

    The noise is made at a fast FFT length and cut to ``n`` (the filter is circular, so the cut
    keeps the noise stationary).
    """
    size = _fft_size(n)
    spectrum = scipy.fft.rfft(rng.standard_normal(size))
    freqs = np.fft.rfftfreq(size, 1.0 / sr)
    out = scipy.fft.irfft(spectrum * gain(freqs), size)[:n]
    return out / (np.std(out) + 1e-12)


def _fft_size(n: int) -> int:
    """A length >= n with only small prime factors: FFTs of prime lengths are many times slower."""
    return scipy.fft.next_fast_len(max(n, 2), real=True)


def _band(center: float, width_octaves: float) -> Callable[[np.ndarray], np.ndarray]:
    """A Gaussian band on a log-frequency axis: ``center`` Hz, ``width_octaves`` wide (std)."""

    def gain(freqs: np.ndarray) -> np.ndarray:
        octaves = np.log2(np.maximum(freqs, 1.0) / center)
        return np.exp(-0.5 * (octaves / width_octaves) ** 2)

    return gain


def _lowpass_gain(cutoff: float, order: float = 2.0) -> Callable[[np.ndarray], np.ndarray]:
    def gain(freqs: np.ndarray) -> np.ndarray:
        return 1.0 / np.sqrt(1.0 + (freqs / cutoff) ** (2 * order))

    return gain


def _highpass_gain(cutoff: float, order: float = 2.0) -> Callable[[np.ndarray], np.ndarray]:
    def gain(freqs: np.ndarray) -> np.ndarray:
        ratio = np.maximum(freqs, 1e-3) / cutoff
        return ratio**order / np.sqrt(1.0 + ratio ** (2 * order))

    return gain


def _tone(freq: np.ndarray | float, n: int, sr: int, harmonics: tuple[float, ...] = (1.0,)):
    """Sum of harmonics ``k * f`` with amplitudes ``harmonics[k-1]`` for a (time-varying) ``f``.

    The phase is the running sum of the instantaneous frequency, so glides and vibrato stay
    continuous; harmonics at or above Nyquist are left out (no aliasing).
    """
    freq = np.broadcast_to(np.asarray(freq, dtype=np.float64), (n,))
    phase = 2 * np.pi * np.cumsum(freq) / sr
    top = float(freq.max())
    out = np.zeros(n, dtype=np.float64)
    for k, amp in enumerate(harmonics, start=1):
        if amp and k * top < 0.45 * sr:
            out += amp * np.sin(k * phase)
    return out


def _smooth_random(n: int, sr: int, rng: np.random.Generator, step_s: float) -> np.ndarray:
    """A slowly varying random curve in [0, 1]: control points every ``step_s`` s, interpolated."""
    points = int(np.ceil(n / sr / step_s)) + 2
    values = rng.uniform(0.0, 1.0, points)
    return np.interp(np.arange(n) / sr / step_s, np.arange(points), values)


def _burst(length: int, sr: int, tau: float) -> np.ndarray:
    """Envelope ``(t / tau) * exp(1 - t / tau)``: peak 1 at ``tau`` s, smooth onset.

    A noise grain that starts at full amplitude is a broadband click whatever its band; the
    smooth onset keeps the grain's spectrum where its band is.
    """
    u = np.arange(length) / sr / tau
    return u * np.exp(1.0 - u)


# --- the synthesisers ---------------------------------------------------------------------------
# Each returns an unnormalised float64 signal of exactly n samples; synthesize() fades, scales
# to the loudness level and converts to float32.


def _beep(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f = _jitter(rng, {"low": 400.0, "medium": 1000.0, "high": 2500.0}[a.pitch])
    rate = {"slow": 1.5, "fast": 5.0}[a.tempo]
    length = int(sr * min(0.25, 0.55 / rate))
    grain = _fade(_tone(f, length, sr, (1.0, 0.0, 0.15)), sr, 4.0)
    return _overlay(n, grain, _onsets(n, sr, rate, rng, jitter=0.01))


def _sweep(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f0 = _jitter(rng, {"low": 250.0, "medium": 700.0, "high": 1800.0}[a.pitch])
    rate = {"slow": 0.8, "fast": 3.0}[a.tempo]
    length = max(1, min(n, int(sr * 0.85 / rate)))
    # Exponential glide over 1.3 octaves: equal pitch steps per unit time, as a synth sweep.
    freq = f0 * 2.5 ** np.linspace(0.0, 1.0, length)
    grain = _fade(_tone(freq, length, sr, (1.0, 0.3)), sr, 8.0)
    return _overlay(n, grain, _onsets(n, sr, rate, rng, jitter=0.02))


def _hum(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f0 = _jitter(rng, {"low": 50.0, "medium": 100.0, "high": 220.0}[a.pitch], 0.02)
    harmonics = tuple(1.0 / k for k in range(1, 11))
    wobble = 1.0 + 0.1 * np.sin(2 * np.pi * 0.5 * np.arange(n) / sr + rng.uniform(0, 2 * np.pi))
    noise = 0.05 * _shaped_noise(n, sr, rng, _band(4 * f0, 1.0))
    return _tone(f0, n, sr, harmonics) * wobble + noise


def _bell(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f0 = _jitter(rng, {"low": 220.0, "medium": 520.0, "high": 1200.0}[a.pitch])
    rate = {"slow": 0.8, "fast": 2.5}[a.tempo]
    length = min(n, int(sr * 2.5))
    t = np.arange(length) / sr
    # Inharmonic partials (hum, prime, tierce, quint, nominal, ...) of a church-bell spectrum;
    # higher partials die away faster, which is what makes a strike sound like a bell.
    ratios = (0.5, 1.0, 1.19, 1.5, 2.0, 2.5, 2.66, 3.01)
    amps = (0.5, 1.0, 0.6, 0.4, 0.5, 0.25, 0.2, 0.15)
    grain = np.zeros(length)
    for r, amp in zip(ratios, amps, strict=True):
        if r * f0 < 0.45 * sr:
            grain += amp * np.sin(2 * np.pi * r * f0 * t) * np.exp(-t / (1.2 / (0.6 + r)))
    grain = _fade(grain, sr, 1.0)
    onsets = _onsets(n, sr, rate, rng)
    return _overlay(n, grain, onsets, rng.uniform(0.7, 1.0, len(onsets)))


def _siren(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    fc = _jitter(rng, {"low": 500.0, "medium": 900.0, "high": 1600.0}[a.pitch])
    fm = {"slow": 0.25, "fast": 2.5}[a.tempo]
    t = np.arange(n) / sr
    freq = fc * (1.0 + 0.35 * np.sin(2 * np.pi * fm * t + rng.uniform(0, 2 * np.pi)))
    return _tone(freq, n, sr, (1.0, 0.3, 0.15))


def _knock(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f = _jitter(rng, {"low": 150.0, "medium": 400.0, "high": 900.0}[a.pitch])
    rate = {"slow": 0.6, "fast": 1.5}[a.tempo]
    gap = {"slow": 0.18, "fast": 0.11}[a.tempo]
    length = int(sr * 0.08)
    t = np.arange(length) / sr
    body = np.sin(2 * np.pi * f * t) * np.exp(-t / 0.02)
    click = _shaped_noise(length, sr, rng, _band(3 * f, 0.7)) * _burst(length, sr, 0.002)
    grain = body + 0.3 * click
    groups = _onsets(n, sr, rate, rng, jitter=0.1)
    knocks = np.concatenate([g + np.arange(rng.integers(2, 4)) * int(gap * sr) for g in groups])
    knocks = knocks[knocks < n]
    return _overlay(n, grain, knocks, rng.uniform(0.7, 1.0, len(knocks)))


def _footsteps(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    cutoff = _jitter(rng, {"low": 300.0, "medium": 800.0, "high": 2000.0}[a.pitch])
    rate = {"slow": 1.8, "fast": 3.5}[a.tempo]
    length = int(sr * 0.15)
    t = np.arange(length) / sr
    scuff = _shaped_noise(length, sr, rng, _band(cutoff, 0.7)) * _burst(length, sr, 0.015)
    thump = np.sin(2 * np.pi * 0.25 * cutoff * t) * np.exp(-t / 0.04)
    grain = scuff + 0.6 * thump
    onsets = _onsets(n, sr, rate, rng, jitter=0.06)
    gains = np.where(np.arange(len(onsets)) % 2 == 0, 1.0, 0.8)  # left and right foot differ
    return _overlay(n, grain, onsets, gains)


def _rain(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    density = {"quiet": 150.0, "loud": 600.0}[a.loudness]  # drops per second
    size = _fft_size(n)
    drops = (rng.random(size) < density / sr) * rng.uniform(0.0, 25.0, size)
    spectrum = scipy.fft.rfft(rng.standard_normal(size) + drops)
    freqs = np.fft.rfftfreq(size, 1.0 / sr)
    gain = _highpass_gain(800.0)(freqs) * _lowpass_gain(9000.0)(freqs)
    return scipy.fft.irfft(spectrum * gain, size)[:n]


def _wind(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    center = _jitter(rng, {"low": 250.0, "medium": 600.0, "high": 1400.0}[a.pitch])
    noise = _shaped_noise(n, sr, rng, _band(center, 0.6))
    gusts = 0.3 + 0.7 * _smooth_random(n, sr, rng, 0.8) ** 2
    return noise * gusts


def _engine(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f0 = _jitter(rng, {"low": 35.0, "medium": 70.0, "high": 140.0}[a.pitch], 0.04)
    freq = f0 * (1.0 + 0.03 * (_smooth_random(n, sr, rng, 0.5) - 0.5))
    phase = np.cumsum(freq) / sr
    saw = 2.0 * (phase - np.floor(phase)) - 1.0  # firing pulses: rich in harmonics of f0
    size = _fft_size(n)
    spectrum = scipy.fft.rfft(np.pad(saw, (0, size - n)))
    freqs = np.fft.rfftfreq(size, 1.0 / sr)
    saw = scipy.fft.irfft(spectrum * _lowpass_gain(10 * f0)(freqs), size)[:n]
    rumble = _shaped_noise(n, sr, rng, _lowpass_gain(4 * f0))
    return saw / (np.std(saw) + 1e-12) + 0.4 * rumble


def _birdsong(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    base = _jitter(rng, {"low": 1800.0, "medium": 3000.0, "high": 5000.0}[a.pitch])
    rate = {"slow": 2.5, "fast": 7.0}[a.tempo]
    out = np.zeros(n)
    for start in _onsets(n, sr, rate, rng, jitter=0.2):
        length = min(n - start, int(sr * rng.uniform(0.04, 0.12)))
        u = np.linspace(0.0, 1.0, length)
        direction = rng.choice((-1.0, 1.0))
        freq = base * (1.0 + direction * 0.35 * np.sin(np.pi * u)) * rng.uniform(0.9, 1.1)
        out[start : start + length] += _tone(freq, length, sr, (1.0, 0.2)) * np.sin(np.pi * u)
    return out


def _ticking(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f = _jitter(rng, {"low": 1500.0, "medium": 3500.0, "high": 7000.0}[a.pitch])
    rate = {"slow": 1.0, "fast": 4.0}[a.tempo]
    length = int(sr * 0.02)
    t = np.arange(length) / sr
    tick = np.sin(2 * np.pi * f * t) * np.exp(-t / 0.003)
    tock = np.sin(2 * np.pi * 0.85 * f * t) * np.exp(-t / 0.003)
    onsets = _onsets(n, sr, rate, rng, jitter=0.005)
    return _overlay(n, tick, onsets[::2]) + _overlay(n, tock, onsets[1::2])


def _whistle(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    base = _jitter(rng, {"low": 900.0, "medium": 1600.0, "high": 2600.0}[a.pitch])
    rate = {"slow": 1.5, "fast": 4.0}[a.tempo]
    note_len = int(sr / rate)
    steps = rng.choice((0, 2, 4, 5, 7, 9), size=n // note_len + 1)  # a major-scale tune
    freq = base * 2.0 ** (np.repeat(steps, note_len)[:n] / 12.0)
    t = np.arange(n) / sr
    freq = freq * (1.0 + 0.015 * np.sin(2 * np.pi * 5.0 * t))  # vibrato
    gate = np.minimum(1.0, 8.0 * np.abs(np.sin(np.pi * t * rate)) + 0.05)  # breaths between notes
    breath = 0.08 * _shaped_noise(n, sr, rng, _band(base, 0.3))
    return (_tone(freq, n, sr, (1.0, 0.05)) + breath) * gate


def _drum(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f0 = _jitter(rng, {"low": 55.0, "medium": 110.0, "high": 220.0}[a.pitch])
    rate = {"slow": 1.5, "fast": 5.0}[a.tempo]
    length = int(sr * 0.5)
    t = np.arange(length) / sr
    # The membrane's pitch drops right after the hit: the typical drum "thud".
    freq = f0 * (1.0 + 1.5 * np.exp(-t / 0.02))
    body = _tone(freq, length, sr, (1.0, 0.3)) * np.exp(-t / 0.2)
    hit = _shaped_noise(length, sr, rng, _band(6 * f0, 1.0)) * _burst(length, sr, 0.004)
    onsets = _onsets(n, sr, rate, rng, jitter=0.02)
    return _overlay(n, body + 0.4 * hit, onsets, rng.uniform(0.75, 1.0, len(onsets)))


def _alarm(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f = _jitter(rng, {"low": 600.0, "medium": 1200.0, "high": 2400.0}[a.pitch], 0.03)
    rate = {"slow": 2.0, "fast": 8.0}[a.tempo]
    t = np.arange(n) / sr
    high_low = np.floor(t * rate) % 2 == 0
    freq = np.where(high_low, f, 0.75 * f)
    return _tone(freq, n, sr, (1.0, 0.0, 1 / 3, 0.0, 1 / 5, 0.0, 1 / 7))  # square-like


def _drip(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f0 = _jitter(rng, {"low": 500.0, "medium": 1000.0, "high": 2000.0}[a.pitch])
    rate = {"slow": 1.2, "fast": 4.0}[a.tempo]
    length = int(sr * 0.08)
    t = np.arange(length) / sr
    # A drop's "plink" is a bubble whose resonance rises as it closes.
    freq = f0 * (1.0 + 0.8 * (1.0 - np.exp(-t / 0.01)))
    grain = _tone(freq, length, sr) * np.exp(-t / 0.02)
    onsets = _onsets(n, sr, rate, rng, jitter=0.35)
    return _overlay(n, grain, onsets, rng.uniform(0.6, 1.0, len(onsets)))


def _bark(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f0 = _jitter(rng, {"low": 220.0, "medium": 380.0, "high": 650.0}[a.pitch])
    rate = {"slow": 0.8, "fast": 2.5}[a.tempo]
    length = int(sr * 0.2)
    u = np.linspace(0.0, 1.0, length)
    freq = f0 * (1.3 - 0.4 * u)
    envelope = np.minimum(1.0, u / 0.05) * np.exp(-u / 0.35)
    voice = _tone(freq, length, sr, tuple(1.0 / k for k in range(1, 9)))
    rasp = _shaped_noise(length, sr, rng, _band(3 * f0, 0.8))
    grain = (voice + 0.3 * rasp) * envelope
    groups = _onsets(n, sr, rate, rng, jitter=0.15)
    barks = np.concatenate([g + np.arange(rng.integers(1, 4)) * int(0.28 * sr) for g in groups])
    barks = barks[barks < n]
    return _overlay(n, grain, barks, rng.uniform(0.7, 1.0, len(barks)))


def _clapping(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    center = _jitter(rng, {"low": 800.0, "medium": 1600.0, "high": 3000.0}[a.pitch])
    rate = {"slow": 2.0, "fast": 6.0}[a.tempo]
    length = int(sr * 0.04)
    grain = _shaped_noise(length, sr, rng, _band(center, 0.5)) * _burst(length, sr, 0.004)
    onsets = _onsets(n, sr, rate, rng, jitter=0.05)
    return _overlay(n, grain, onsets, rng.uniform(0.8, 1.0, len(onsets)))


def _telephone(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    f = _jitter(rng, {"low": 440.0, "medium": 800.0, "high": 1400.0}[a.pitch], 0.02)
    t = np.arange(n) / sr
    ring = _tone(f, n, sr, (1.0, 0.2)) + _tone(1.09 * f, n, sr, (1.0, 0.2))
    # The bell hammer strikes at 20 Hz; a soft-edged square keeps the spectrum near f.
    trill = 0.5 + 0.5 * np.clip(3.0 * np.sin(2 * np.pi * 20.0 * t), -1.0, 1.0)
    on, cycle = {"slow": (1.0, 2.5), "fast": (0.4, 1.0)}[a.tempo]
    cadence = np.clip(np.minimum(t % cycle, on - t % cycle) / 0.01, 0.0, 1.0)
    return ring * trill * cadence


def _thunder(a: EventAttributes, rng: np.random.Generator, sr: int) -> np.ndarray:
    n = _num_samples(a.duration, sr)
    t = np.arange(n) / sr
    rumble = _shaped_noise(n, sr, rng, _lowpass_gain(250.0, 3.0))
    envelope = np.minimum(1.0, t / 0.08) * np.exp(-t / max(0.3, 0.4 * a.duration))
    crack = _shaped_noise(n, sr, rng, _highpass_gain(1500.0)) * np.exp(-t / 0.15)
    rolls = 0.6 + 0.4 * _smooth_random(n, sr, rng, 0.3)
    return rumble * envelope * rolls + 0.3 * crack


# --- the classes -------------------------------------------------------------------------------

_PTL = ("pitch", "tempo", "loudness")
_PL = ("pitch", "loudness")

_CLASSES = (
    EventClass(
        "beep",
        subjects=("an electronic device", "a machine", "a timer"),
        verbs=("beeps{adv}", "emits {adj}beeps{adv}", "makes {adj}beeping sounds{adv}"),
        gerunds=("beeping{adv}", "emitting {adj}beeps{adv}"),
        sounds=("{adj}beeps", "{adj}electronic beeping", "a series of {adj}beeps"),
        keywords=("beep", "electronic", "tone", "signal", "device"),
        attributes=_PTL,
        min_duration=0.3,
        max_duration=6.0,
        category="electronic",
        synth=_beep,
    ),
    EventClass(
        "sweep",
        subjects=("a {adj}tone", "an {adj}electronic tone", "a {adj}synthesizer tone"),
        verbs=("rises in pitch{adv}", "sweeps upward{adv}", "slides up{adv}"),
        gerunds=("rising in pitch{adv}", "sweeping upward{adv}"),
        sounds=("a {adj}rising tone", "{adj}upward sweeps", "a {adj}sweeping electronic tone"),
        keywords=("sweep", "tone", "synthesizer", "rising", "electronic"),
        attributes=_PTL,
        min_duration=0.5,
        max_duration=6.0,
        category="electronic",
        synth=_sweep,
    ),
    EventClass(
        "hum",
        subjects=("a {adj}transformer", "an {adj}electrical device", "a {adj}refrigerator"),
        verbs=("hums{adv}", "drones{adv}", "buzzes{adv}"),
        gerunds=("humming{adv}", "droning{adv}", "buzzing{adv}"),
        sounds=("a {adj}electrical hum", "a {adj}steady drone", "a {adj}buzzing hum"),
        keywords=("hum", "electrical", "drone", "buzz", "appliance"),
        attributes=_PL,
        min_duration=1.5,
        max_duration=30.0,
        category="machine",
        background=True,
        synth=_hum,
    ),
    EventClass(
        "bell",
        subjects=("a {adj}bell", "a {adj}church bell", "a {adj}chime"),
        verbs=("rings{adv}", "chimes{adv}", "tolls{adv}"),
        gerunds=("ringing{adv}", "chiming{adv}", "tolling{adv}"),
        sounds=("the {adj}ringing of a bell", "{adj}bell chimes", "a {adj}bell ringing{adv}"),
        keywords=("bell", "ringing", "chime", "metal", "church"),
        attributes=_PTL,
        min_duration=1.0,
        max_duration=8.0,
        category="ringing",
        synth=_bell,
    ),
    EventClass(
        "siren",
        subjects=("a {adj}siren", "an {adj}emergency siren", "a {adj}police siren"),
        verbs=("wails{adv}", "blares{adv}", "sounds{adv}"),
        gerunds=("wailing{adv}", "blaring{adv}", "sounding{adv}"),
        sounds=("the {adj}wail of a siren", "a {adj}siren wailing{adv}", "a {adj}blaring siren"),
        keywords=("siren", "emergency", "police", "wailing", "alarm"),
        attributes=_PTL,
        min_duration=2.0,
        max_duration=10.0,
        category="alarm",
        synth=_siren,
    ),
    EventClass(
        "knock",
        subjects=("someone", "a person", "a visitor"),
        verbs=("knocks{adv} on a door", "raps{adv} on a wooden door", "knocks{adv} on wood"),
        gerunds=("knocking{adv} on a door", "rapping{adv} on a wooden door"),
        sounds=("{adj}knocking on a door", "a {adj}knock at the door", "{adj}knocks on wood"),
        keywords=("knock", "door", "wood", "knocking", "visitor"),
        attributes=_PTL,
        min_duration=0.5,
        max_duration=5.0,
        category="impact",
        synth=_knock,
        adjective_words={"low": ("dull", "deep"), "high": ("sharp", "crisp")},
    ),
    EventClass(
        "footsteps",
        subjects=("someone", "a person", "a pedestrian"),
        verbs=("walks{adv}", "walks{adv} across a hard floor", "takes steps{adv}"),
        gerunds=("walking{adv}", "walking{adv} across a hard floor"),
        sounds=("{adj}footsteps", "{adj}steps on a hard floor", "the {adj}footsteps of a person"),
        keywords=("footsteps", "walking", "steps", "floor", "shoes"),
        attributes=_PTL,
        min_duration=1.5,
        max_duration=10.0,
        category="impact",
        synth=_footsteps,
        adjective_words={"low": ("heavy", "thudding"), "high": ("light", "clicking")},
        adverb_words={"fast": ("quickly", "briskly"), "slow": ("slowly", "leisurely")},
    ),
    EventClass(
        "rain",
        subjects=("{adj}rain",),
        verbs=("falls{adv}", "patters on a roof", "comes down{adv}"),
        gerunds=("falling{adv}", "pattering on a roof", "coming down{adv}"),
        sounds=("{adj}rain", "the patter of {adj}rain", "{adj}rainfall"),
        keywords=("rain", "water", "weather", "rainfall", "outdoors"),
        attributes=("loudness",),
        min_duration=2.0,
        max_duration=30.0,
        category="water",
        background=True,
        synth=_rain,
        adjective_words={"loud": ("heavy", "pouring"), "quiet": ("light", "gentle")},
        adverb_words={"loud": ("heavily", "hard"), "quiet": ("lightly", "gently")},
    ),
    EventClass(
        "wind",
        subjects=("{adj}wind", "a {adj}breeze"),
        verbs=("blows{adv}", "howls{adv}", "gusts{adv}"),
        gerunds=("blowing{adv}", "howling{adv}", "gusting{adv}"),
        sounds=("{adj}wind", "a {adj}gust of wind", "the {adj}howl of the wind"),
        keywords=("wind", "gusts", "weather", "blowing", "outdoors"),
        attributes=_PL,
        min_duration=2.0,
        max_duration=30.0,
        category="weather",
        background=True,
        synth=_wind,
        adjective_words={
            "low": ("rumbling", "deep"),
            "high": ("whistling", "high-pitched"),
            "loud": ("strong", "powerful"),
            "quiet": ("gentle", "light"),
        },
        adverb_words={"loud": ("hard", "strongly"), "quiet": ("gently", "softly")},
    ),
    EventClass(
        "engine",
        subjects=("an {adj}engine", "a {adj}motor", "a {adj}truck engine"),
        verbs=("runs{adv}", "idles{adv}", "drones on{adv}"),
        gerunds=("running{adv}", "idling{adv}"),
        sounds=("an {adj}engine running{adv}", "the {adj}rumble of an engine", "a {adj}motor"),
        keywords=("engine", "motor", "vehicle", "idling", "machine"),
        attributes=_PL,
        min_duration=2.0,
        max_duration=30.0,
        category="machine",
        background=True,
        synth=_engine,
        adjective_words={"low": ("deep", "low-pitched"), "high": ("high-pitched", "whining")},
        adverb_words={"loud": ("loudly", "noisily"), "quiet": ("quietly", "softly")},
    ),
    EventClass(
        "birdsong",
        subjects=("a {adj}bird", "a {adj}songbird", "a {adj}small bird"),
        verbs=("sings{adv}", "chirps{adv}", "tweets{adv}"),
        gerunds=("singing{adv}", "chirping{adv}", "tweeting{adv}"),
        sounds=("{adj}birdsong", "a {adj}bird chirping{adv}", "the {adj}song of a bird"),
        keywords=("bird", "birdsong", "chirping", "nature", "outdoors"),
        attributes=_PTL,
        min_duration=1.0,
        max_duration=8.0,
        category="animal",
        synth=_birdsong,
    ),
    EventClass(
        "ticking",
        subjects=("a {adj}clock", "a {adj}wall clock", "a {adj}watch"),
        verbs=("ticks{adv}", "ticks away{adv}"),
        gerunds=("ticking{adv}", "ticking away{adv}"),
        sounds=("the {adj}ticking of a clock", "a {adj}clock ticking{adv}", "{adj}clock ticks"),
        keywords=("clock", "ticking", "tick", "time", "mechanical"),
        attributes=_PTL,
        min_duration=1.5,
        max_duration=8.0,
        category="impact",
        synth=_ticking,
        adjective_words={"low": ("dull", "muffled"), "high": ("sharp", "high-pitched")},
    ),
    EventClass(
        "whistle",
        subjects=("someone", "a person"),
        verbs=("whistles{adv}", "whistles a {adj}tune{adv}"),
        gerunds=("whistling{adv}", "whistling a {adj}tune{adv}"),
        sounds=("{adj}whistling", "a {adj}whistled tune", "a {adj}whistled melody"),
        keywords=("whistle", "whistling", "tune", "melody", "person"),
        attributes=_PTL,
        min_duration=1.0,
        max_duration=6.0,
        category="tonal",
        synth=_whistle,
    ),
    EventClass(
        "drum",
        subjects=("a {adj}drum", "a {adj}tom drum", "a {adj}hand drum"),
        verbs=("is struck{adv}", "is beaten{adv}", "is played{adv}"),
        gerunds=("being struck{adv}", "being beaten{adv}", "being played{adv}"),
        sounds=("{adj}drum beats", "the {adj}beating of a drum", "a {adj}drum being played{adv}"),
        keywords=("drum", "percussion", "beat", "rhythm", "drumming"),
        attributes=_PTL,
        min_duration=0.8,
        max_duration=6.0,
        category="impact",
        synth=_drum,
    ),
    EventClass(
        "alarm",
        subjects=("an {adj}alarm", "an {adj}alarm clock", "a {adj}smoke alarm"),
        verbs=("goes off{adv}", "sounds{adv}", "rings{adv}"),
        gerunds=("going off{adv}", "sounding{adv}", "ringing{adv}"),
        sounds=("an {adj}alarm going off", "a {adj}blaring alarm", "an {adj}alarm sounding{adv}"),
        keywords=("alarm", "warning", "buzzer", "signal", "electronic"),
        attributes=_PTL,
        min_duration=1.0,
        max_duration=6.0,
        category="alarm",
        synth=_alarm,
    ),
    EventClass(
        "drip",
        subjects=("{adj}water", "a {adj}tap", "a {adj}faucet"),
        verbs=("drips{adv}", "drips{adv} into a sink"),
        gerunds=("dripping{adv}", "dripping{adv} into a sink"),
        sounds=("{adj}drops of water", "{adj}water dripping{adv}", "the {adj}drip of a tap"),
        keywords=("water", "drip", "drops", "tap", "sink"),
        attributes=_PTL,
        min_duration=1.0,
        max_duration=8.0,
        category="water",
        synth=_drip,
        adjective_words={"low": ("deep", "hollow"), "high": ("high-pitched", "plinking")},
    ),
    EventClass(
        "bark",
        subjects=("a {adj}dog", "a {adj}hound"),
        verbs=("barks{adv}", "keeps barking{adv}"),
        gerunds=("barking{adv}",),
        sounds=("a {adj}dog barking{adv}", "{adj}barking", "the {adj}barks of a dog"),
        keywords=("dog", "bark", "barking", "animal", "pet"),
        attributes=_PTL,
        min_duration=0.5,
        max_duration=5.0,
        category="animal",
        synth=_bark,
        adjective_words={"low": ("big", "deep-voiced"), "high": ("small", "yappy")},
    ),
    EventClass(
        "clapping",
        subjects=("someone", "a person"),
        verbs=("claps{adv}", "claps their hands{adv}"),
        gerunds=("clapping{adv}", "clapping their hands{adv}"),
        sounds=("{adj}hand claps", "{adj}clapping{adv}", "a series of {adj}claps"),
        keywords=("clapping", "hands", "claps", "applause", "person"),
        attributes=_PTL,
        min_duration=1.0,
        max_duration=6.0,
        category="impact",
        synth=_clapping,
        adjective_words={"low": ("dull", "muffled"), "high": ("sharp", "crisp")},
    ),
    EventClass(
        "telephone",
        subjects=("a {adj}telephone", "a {adj}phone", "an {adj}old telephone"),
        verbs=("rings{adv}", "keeps ringing{adv}"),
        gerunds=("ringing{adv}",),
        sounds=("a {adj}phone ringing{adv}", "the {adj}ring of a telephone", "a {adj}ringtone"),
        keywords=("telephone", "phone", "ringing", "ring", "call"),
        attributes=_PTL,
        min_duration=1.5,
        max_duration=8.0,
        category="ringing",
        synth=_telephone,
    ),
    EventClass(
        "thunder",
        subjects=("{adj}thunder",),
        verbs=("rumbles{adv}", "rolls{adv}", "crashes{adv}"),
        gerunds=("rumbling{adv}", "rolling{adv}"),
        sounds=("{adj}thunder", "a {adj}clap of thunder", "the {adj}rumble of thunder"),
        keywords=("thunder", "storm", "weather", "rumble", "outdoors"),
        attributes=("loudness",),
        min_duration=2.0,
        max_duration=6.0,
        category="weather",
        synth=_thunder,
        adjective_words={"loud": ("loud", "booming"), "quiet": ("distant", "faint")},
        adverb_words={"loud": ("loudly",), "quiet": ("softly", "in the distance")},
    ),
)

SPEECH = EventClass(
    "speech",
    subjects=("a person", "someone", "a voice"),
    verbs=("speaks{adv}", "talks{adv}", "says something{adv}"),
    gerunds=("speaking{adv}", "talking{adv}"),
    sounds=("a person speaking{adv}", "a {adj}voice", "someone talking{adv}"),
    keywords=("speech", "voice", "talking", "person", "speaking"),
    attributes=("loudness",),
    min_duration=0.5,
    max_duration=30.0,
    category="speech",
)
"""The vocabulary of a spoken phrase in a scene; its audio comes from a speech synthesiser."""

SOUND_EVENTS: dict[str, EventClass] = {c.name: c for c in _CLASSES}
"""Every synthesised event class by name (20 classes)."""

BACKGROUND_CLASSES = tuple(c.name for c in _CLASSES if c.background)
"""Classes that can fill a whole scene as a quiet background bed (rain, wind, hum, engine)."""


def event_class(name: str) -> EventClass:
    """The :class:`EventClass` called ``name`` (``"speech"`` included).

    Raises:
        SoundEventError: unknown name; the message lists the valid names.
    """
    if name == SPEECH.name:
        return SPEECH
    try:
        return SOUND_EVENTS[name]
    except KeyError:
        raise SoundEventError(
            f"unknown sound event class {name!r}; valid: {', '.join(SOUND_EVENTS)}"
        ) from None


def synthesize(
    name: str,
    attributes: EventAttributes,
    rng: np.random.Generator,
    sample_rate: int = SAMPLE_RATE,
) -> np.ndarray:
    """Synthesise one sound event: wav (S,) float32 with S = ``round(duration * sample_rate)``.

    The signal is faded in and out over 5 ms and scaled so that its peak is
    :data:`PEAK_LEVEL` [``attributes.loudness``]. Deterministic: the same ``rng`` state gives
    the same samples.

    Args:
        name: an event class of :data:`SOUND_EVENTS`.
        attributes: pitch, loudness, tempo and duration.
        rng: the random stream (consumed).
        sample_rate: Hz; the class frequencies assume about 16 kHz or more.

    Raises:
        SoundEventError: unknown class (``"speech"`` has no synthesiser here).
    """
    cls = event_class(name)
    if cls.synth is None:
        raise SoundEventError(f"{name!r} has no synthesiser (its audio comes from a speech model)")
    if not isinstance(attributes, EventAttributes):
        raise SoundEventError(f"attributes must be EventAttributes, got {attributes!r}")
    n = _num_samples(attributes.duration, sample_rate)
    wav = np.asarray(cls.synth(attributes, rng, sample_rate), dtype=np.float64)
    assert wav.shape == (n,), (name, wav.shape, n)
    wav = _fade(wav, sample_rate)
    peak = float(np.max(np.abs(wav)))
    if peak > 0:
        wav = wav * (PEAK_LEVEL[attributes.loudness] / peak)
    return wav.astype(np.float32)
