"""A folder shaped like the Free Spoken Digit Dataset, each speaker through a recording chain
of their own: to run the command's path at that shape. A study, not a bench.

    python bench/study_digits_folder.py OUT [--speakers 6] [--takes 50] [--seed 7] [--clean] [--varied]

Writes ``OUT/<digit>_<speaker>_<take>.wav`` (8 kHz, 16 bit): eSpeak voices of the embedded
corpora say the ten digits, each take at its own rate and pitch; each speaker's takes then go
through one microphone (three random peaking filters of ±8 dB) and one channel condition of
the embedded corpora (``audiorepro.data.embedded.channels``: clean, telephone band, pink
noise at 18 dB SNR, reverberation of RT60 0.5 s, telephone, noise, in turn), and a faint noise floor
(``--clean``: neither). ``--varied`` makes takes differ as a person's do, not only in rate and
pitch: each take ends in its own punctuation (the intonation of a statement, a question, a
list), with its own pitch range, three stretches of it slowed or sped apart (a phase
vocoder, 0.75-1.33x each), its own small peaking filter (±4 dB), level (±6 dB), noise (15-40
dB SNR) and silence before and after (20-200 ms). Synthetic speech: what it measures is how
the command copes with speakers recorded through different chains, not how it does on real
voices.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import librosa
import numpy as np
import soundfile as sf
from scipy import signal
from study_units_channels import peaking

from audiorepro.data.embedded.channels import apply_condition
from audiorepro.data.embedded.espeak import english_voices, synthesize_raw

DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
CHAINS = ("clean", "telephone", "noise", "reverb", "telephone", "noise")
RATE = 22050  # eSpeak's


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--speakers", type=int, default=6)
    parser.add_argument("--takes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--clean", action="store_true")
    parser.add_argument("--varied", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for v, voice in enumerate(english_voices(args.speakers, seed=3)):
        condition = "clean" if args.clean else CHAINS[v % len(CHAINS)]
        mic = [
            peaking(rng.uniform(200, 3500), rng.uniform(-8, 8), rng.uniform(0.7, 2), RATE)
            for _ in range(0 if args.clean else 3)
        ]
        for d, word in enumerate(DIGITS):
            for k in range(args.takes):
                rate = int(rng.integers(130, 220))
                pitch = int(np.clip(voice.pitch + rng.integers(-12, 13), 0, 100))
                text = word
                if args.varied:
                    spread = int(rng.integers(20, 91))
                    take = dataclasses.replace(voice, rate=rate, pitch=pitch, pitch_range=spread)
                    text = word + str(rng.choice([".", "?", "!", ",", ""]))
                else:
                    take = dataclasses.replace(voice, rate=rate, pitch=pitch)
                x = synthesize_raw(text, take).samples.astype(np.float64) / 32768.0
                if args.varied:
                    x = varied_take(x, rng)
                for b, a in mic:
                    x = signal.lfilter(b, a, x)
                x = apply_condition(x.astype(np.float32), RATE, condition, rng, rt60_s=0.5, snr=18)
                if not args.clean:
                    noise = rng.standard_normal(len(x)).astype(np.float32)
                    x = x + noise * 10 ** (-rng.uniform(45, 60) / 20) * np.abs(x).max()
                y = np.clip(signal.resample_poly(x, 160, 441), -1, 1)
                sf.write(args.out / f"{d}_{voice.name}_{k}.wav", y, 8000, subtype="PCM_16")
        print(f"{voice.name}: {condition}", flush=True)


def varied_take(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One take's own timing, filter, level, noise and silences (``--varied``)."""
    cuts = np.sort(rng.integers(len(x) // 5, 4 * len(x) // 5, size=2))
    parts = np.split(x, cuts)
    x = np.concatenate(
        [
            librosa.effects.time_stretch(part, rate=float(np.exp(rng.uniform(-0.29, 0.29))))
            if len(part) > 2048
            else part
            for part in parts
        ]
    )
    b, a = peaking(rng.uniform(200, 3500), rng.uniform(-4, 4), rng.uniform(0.7, 2), RATE)
    x = signal.lfilter(b, a, x) * 10 ** (rng.uniform(-6, 6) / 20)
    pad = [np.zeros(int(rng.uniform(0.02, 0.2) * RATE)) for _ in range(2)]
    x = np.concatenate([pad[0], x, pad[1]])
    rms = np.sqrt(np.mean(x**2)) + 1e-9
    return x + rng.standard_normal(len(x)) * rms * 10 ** (-rng.uniform(15, 40) / 20)


if __name__ == "__main__":
    main()
