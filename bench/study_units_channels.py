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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from audiorepro.experiments.zerospeech.config import Config, load_config, store
from audiorepro.experiments.zerospeech.data import MIN_TRAIN_FRAMES, training_files
from audiorepro.experiments.zerospeech.evaluate import encode_files
from audiorepro.experiments.zerospeech.pairs import (
    PairedSegments,
    Pairing,
    collate_paired,
    find_pairs,
)
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


@dataclass
class TrainingSet:
    """What ``units train`` trains on, from a folder of one subfolder per speaker."""

    config: Config
    feature: str
    wavs: dict[str, Path]
    names: list[str]
    voices: list[str]
    clean: list[np.ndarray]
    """Each file's frames, normalised per speaker."""
    found: Pairing
    order: list[str]
    index: list[int]
    """Each file's speaker, as an index into ``order``."""

    def dataset(self) -> PairedSegments:
        """``units train``'s items: every file's own, and both ways of every pair found."""
        return PairedSegments(
            self.clean, self.index, self.found.pairs, self.config.train.segment_frames
        )


def training_set(folder: Path, seed: int) -> TrainingSet:
    """:class:`TrainingSet` of ``folder``, the configuration ``units train`` uses with
    ``seed`` (per-speaker normalisation, pairs, 2,400 steps)."""
    overrides = {"model.feature_norm": "speaker", "train.pairs": "nearest", "seed": seed}
    steps = {"train.max_steps": 2400, "train.num_epochs": 2400}  # as `units train`
    config = load_config("embedded", {**overrides, **steps})
    feature = feature_of(config.model.input_dim)
    wavs, _ = training_files(scan_folder(folder).files)
    feats = load_wav_features(wavs, feature, store())
    speakers = speakers_of(wavs, "parent", folder)
    names = [n for n in sorted(feats) if len(feats[n]) >= MIN_TRAIN_FRAMES]
    voices = [speakers[n] for n in names]
    clean = normalize_features([feats[n] for n in names], "speaker", voices)
    found = find_pairs(clean, voices)
    print(found.line(), flush=True)
    order = sorted(set(voices))
    index = [order.index(v) for v in voices]
    return TrainingSet(config, feature, wavs, names, voices, clean, found, order, index)


def fit_units(
    data: TrainingSet,
    dataset: Any,
    model: Callable[[], VQVAE] | None = None,
    step: Callable[..., dict[str, Any]] = _vqvae_step,
    collate: Callable[..., Any] = collate_paired,
) -> VQVAE:
    """A VQ-VAE (``model()``, default :class:`VQVAE`, made after the seed is set) trained on
    ``dataset`` as ``units train`` trains (its seed, inputs' statistics and loop), in eval
    mode on the CPU."""
    seed = data.config.seed
    seed_everything(seed)
    net = model() if model is not None else VQVAE(data.config.model, n_speakers=len(data.order))
    net.set_normalization(
        *input_statistics(np.concatenate(data.clean), data.config.model.input_scale)
    )
    loop = data.config.train.loop(seed)
    trainer, _ = fit_one_thread(net, step, dataset, loop, collate, None, (), "none")
    return trainer.unwrapped_model.cpu().eval()


def train_and_score(data: TrainingSet, dataset: PairedSegments, test: Path, items: Path) -> float:
    """Train a VQ-VAE on ``dataset`` as ``units train`` does and print (and return) its units'
    word ABX across speakers on ``items`` of the folder ``test``."""
    model = fit_units(data, dataset)
    test_wavs, _ = training_files(scan_folder(test).files)
    feats = load_wav_features(test_wavs, data.feature, store())
    _, units = encode_files(model, feats, speakers=speakers_of(test_wavs, "parent", test))
    error = abx_error(units, items, mode="across")
    print(f"units (codebook vectors): {error:.2f} %")
    return error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("items", type=Path)
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-codec", action="store_true")
    args = parser.parse_args()
    data = training_set(args.train, args.seed)
    fn = feature_function(data.feature)
    rng = np.random.default_rng(5000 + args.seed)
    copies, targets, copy_voices = [], [], []
    for s in data.order:
        mine = [i for i, v in enumerate(data.voices) if v == s]
        for _ in range(args.copies):
            apply = chain(rng, not args.no_codec)
            sent = []
            for i in mine:
                x = load_audio(data.wavs[data.names[i]], sr=SAMPLE_RATE)[0]
                y = fn(apply(x)).astype(np.float32)[: len(data.clean[i])]
                sent.append(np.pad(y, ((0, len(data.clean[i]) - len(y)), (0, 0)), mode="edge"))
            copies += normalize_features(sent, "speaker", [s] * len(sent))
            targets += [data.clean[i] for i in mine]
            copy_voices += [s] * len(mine)
    print(f"{len(copies)} copies through {args.copies} chains a speaker", flush=True)
    dataset = data.dataset()
    segment = data.config.train.segment_frames
    for x, target, s in zip(copies, targets, copy_voices, strict=True):
        for start in range(0, len(x), segment):
            if len(x[start : start + segment]) >= 8:
                dataset.items.append(
                    (
                        x[start : start + segment],
                        target[start : start + segment],
                        data.order.index(s),
                    )
                )
    train_and_score(data, dataset, args.test, args.items)


if __name__ == "__main__":
    main()
