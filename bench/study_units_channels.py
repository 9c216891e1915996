"""Would units learn to ignore the recording chain from copies of the training files sent
through random ones? A study, not a bench.

    python bench/study_units_channels.py TRAIN TEST ITEMS [--copies 2] [--seed 0] [--no-codec]

``TRAIN`` and ``TEST`` hold one folder per speaker (``--speaker-of parent``), ``ITEMS`` is the
ABX item file of ``TEST`` (``audiorepro abx items``). The script trains as ``units train``
does (per-speaker normalisation, the pairs it finds beside each file's own reconstruction,
its step budget) and adds, for each speaker, ``--copies`` copies of all their training files,
each copy sent through one random recording chain (a speaker recorded again elsewhere): a
high-pass and a low-pass filter, three peaking filters, a telephone codec (GSM 06.10 or
8-bit mu-law; ``--no-codec``: none) and noise. A copy is normalised over its own chain's files
(as a new speaker is), and the model learns to reconstruct the clean file, in its speaker's
voice, from the copy's units. It prints the units' word ABX across speakers on ``ITEMS``.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import librosa
import numpy as np
import soundfile as sf
from scipy import signal

from audiorepro.data.recordings import scan_folder, speakers_of
from audiorepro.data.speech_segments import (
    SAMPLE_RATE,
    feature_function,
    feature_of,
    load_wav_features,
    normalize_features,
)
from audiorepro.experiments.zerospeech.config import load_config, store
from audiorepro.experiments.zerospeech.data import MIN_TRAIN_FRAMES, training_files
from audiorepro.experiments.zerospeech.evaluate import encode_files
from audiorepro.experiments.zerospeech.pairs import PairedSegments, collate_paired, find_pairs
from audiorepro.experiments.zerospeech.train import _vqvae_step, fit_one_thread
from audiorepro.features import load_audio
from audiorepro.metrics.abx import abx_error
from audiorepro.models.vqvae import VQVAE, input_statistics
from audiorepro.repro import seed_everything


def peaking(f0: float, gain_db: float, q: float, sr: int) -> tuple[np.ndarray, np.ndarray]:
    """RBJ cookbook peaking filter: ``(b, a)``."""
    a_ = 10 ** (gain_db / 40)
    w = 2 * np.pi * f0 / sr
    alpha = np.sin(w) / (2 * q)
    b = np.array([1 + alpha * a_, -2 * np.cos(w), 1 - alpha * a_])
    a = np.array([1 + alpha / a_, -2 * np.cos(w), 1 - alpha / a_])
    return b / a[0], a / a[0]


def chain(rng: np.random.Generator, codec: bool):
    """One random recording chain: a function of 16 kHz audio."""
    high = signal.butter(2, rng.uniform(60, 300), "highpass", fs=SAMPLE_RATE, output="sos")
    low = signal.butter(4, rng.uniform(2600, 3900), "lowpass", fs=SAMPLE_RATE, output="sos")
    peaks = [
        peaking(rng.uniform(150, 3500), rng.uniform(-9, 9), rng.uniform(0.7, 2), SAMPLE_RATE)
        for _ in range(3)
    ]
    kind = rng.choice(["gsm", "mulaw"]) if codec else "none"
    snr = rng.uniform(25, 45)
    seed = int(rng.integers(2**31))

    def apply(x: np.ndarray) -> np.ndarray:
        y = signal.sosfilt(high, x)
        for b, a in peaks:
            y = signal.lfilter(b, a, y)
        y = signal.sosfilt(low, y)
        y = y / max(1e-9, np.abs(y).max()) * 0.7
        if kind == "gsm":
            narrow = librosa.resample(y, orig_sr=SAMPLE_RATE, target_sr=8000)
            buf = io.BytesIO()
            sf.write(buf, narrow, 8000, format="RAW", subtype="GSM610")
            buf.seek(0)
            coded, _ = sf.read(buf, format="RAW", subtype="GSM610", samplerate=8000, channels=1)
            y = librosa.resample(coded, orig_sr=8000, target_sr=SAMPLE_RATE)[: len(x)]
            y = np.pad(y, (0, len(x) - len(y)))
        elif kind == "mulaw":
            y = librosa.mu_expand(librosa.mu_compress(y, mu=255), mu=255)
        noise = np.random.default_rng(seed + len(x)).standard_normal(len(y))
        power = np.mean(y**2) + 1e-12
        return (y + noise * np.sqrt(power / 10 ** (snr / 10))).astype(np.float32)

    return apply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("items", type=Path)
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-codec", action="store_true")
    args = parser.parse_args()
    overrides = {"model.feature_norm": "speaker", "train.pairs": "nearest", "seed": args.seed}
    steps = {"train.max_steps": 2400, "train.num_epochs": 2400}  # as `units train`
    config = load_config("embedded", {**overrides, **steps})
    feature = feature_of(config.model.input_dim)
    wavs, _ = training_files(scan_folder(args.train).files)
    feats = load_wav_features(wavs, feature, store())
    speakers = speakers_of(wavs, "parent", args.train)
    names = [n for n in sorted(feats) if len(feats[n]) >= MIN_TRAIN_FRAMES]
    voices = [speakers[n] for n in names]
    clean = normalize_features([feats[n] for n in names], "speaker", voices)
    found = find_pairs(clean, voices)
    print(found.line(), flush=True)
    fn = feature_function(feature)
    rng = np.random.default_rng(5000 + args.seed)
    copies, targets, copy_voices = [], [], []
    for s in sorted(set(voices)):
        mine = [i for i, v in enumerate(voices) if v == s]
        for _ in range(args.copies):
            apply = chain(rng, not args.no_codec)
            sent = []
            for i in mine:
                x = load_audio(wavs[names[i]], sr=SAMPLE_RATE)[0]
                y = fn(apply(x)).astype(np.float32)[: len(clean[i])]
                sent.append(np.pad(y, ((0, len(clean[i]) - len(y)), (0, 0)), mode="edge"))
            copies += normalize_features(sent, "speaker", [s] * len(sent))
            targets += [clean[i] for i in mine]
            copy_voices += [s] * len(mine)
    print(f"{len(copies)} copies through {args.copies} chains a speaker", flush=True)
    order = sorted(set(voices))
    index = [order.index(v) for v in voices]
    seed_everything(args.seed)
    model = VQVAE(config.model, n_speakers=len(order))
    model.set_normalization(*input_statistics(np.concatenate(clean), config.model.input_scale))
    dataset = PairedSegments(clean, index, found.pairs, config.train.segment_frames)
    segment = config.train.segment_frames
    for x, target, s in zip(copies, targets, copy_voices, strict=True):
        for start in range(0, len(x), segment):
            if len(x[start : start + segment]) >= 8:
                dataset.items.append(
                    (x[start : start + segment], target[start : start + segment], order.index(s))
                )
    trainer, _ = fit_one_thread(
        model, _vqvae_step, dataset, config.train.loop(args.seed), collate_paired, None, (),
        "none",
    )  # fmt: skip
    model = trainer.unwrapped_model.cpu().eval()
    test_wavs, _ = training_files(scan_folder(args.test).files)
    test = load_wav_features(test_wavs, feature, store())
    _, units = encode_files(model, test, speakers=speakers_of(test_wavs, "parent", args.test))
    print(f"units (codebook vectors): {abx_error(units, args.items, mode='across'):.2f} %")


if __name__ == "__main__":
    main()
