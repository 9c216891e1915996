"""Chapter 03's experiment steps: features, VQ-VAE training, units, evaluation, inverter, export.

The pages of ``book/03_zerospeech`` call these one line at a time:

- :func:`language_dir` finds the ZeroSpeech 2019 language folder (the embedded corpus of the
  preset, or a real release given by ``corpus_dir``);
- :func:`load_features` computes MFCC-39 or log-Mel-80 for every wav of a split (cached on disk);
- :func:`train_vqvae` trains a :class:`~audiorepro.models.vqvae.VQVAE` on the unit-discovery and
  voice speech with :class:`~audiorepro.training.Trainer` (Adam, the paper's optimizer), cached
  by configuration and seed, so that the pages share models and a re-run gives the same numbers;
- :func:`encode_files` turns test files into units, :func:`evaluate_units` measures the ABX
  error (:mod:`audiorepro.metrics.abx`) and the bitrate (:mod:`audiorepro.metrics.bitrate`);
- :func:`train_inverter` trains the codebook inverter on one target voice, :func:`resynthesize`
  turns any utterance into that voice through its units and Griffin-Lim;
- :func:`export_submission` writes a ZeroSpeech 2019 submission folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from torch.utils.data import Dataset

from audiorepro.config import field, to_dict
from audiorepro.data.recipes.zerospeech import (
    read_bitrate_filelist,
    read_synthesis_list,
    speaker_of,
)
from audiorepro.features import (
    griffin_lim,
    linear_spectrogram,
    load_audio,
    log_mel,
    mfcc_features,
    save_audio,
)
from audiorepro.metrics.abx import abx
from audiorepro.metrics.bitrate import bitrate
from audiorepro.models.inverter import CodebookInverter, InverterConfig, inverter_loss
from audiorepro.models.vqvae import VQVAE, VQVAEConfig
from audiorepro.paths import data_dir, results_dir
from audiorepro.repro import seed_everything
from audiorepro.storage import load_model_weights, save_model_weights
from audiorepro.training import TrainConfig, Trainer

__all__ = [
    "AblationRow",
    "FEATURES",
    "SegmentDataset",
    "TrainedInverter",
    "TrainedVQVAE",
    "ZeroSpeechConfig",
    "ablation_rows",
    "code_segments",
    "collate_segments",
    "config_dict",
    "encode_files",
    "evaluate_units",
    "export_submission",
    "findings",
    "language_dir",
    "load_features",
    "paper_rows",
    "resynthesize",
    "row_seeds",
    "run_row",
    "single_thread",
    "summarize",
    "synthesis_targets",
    "synthesis_voices",
    "train_inverter",
    "train_vqvae",
    "training_data",
    "vqvae_config",
]

FEATURES = {"mfcc": 39, "logmel": 80}
SAMPLE_RATE = 16_000
HOP_S = 0.01
# Bump when a change to the code changes what a cached model would be.
CACHE_VERSION = 2


@dataclass(frozen=True)
class ZeroSpeechConfig:
    """Parameters of the chapter's pages (``book/03_zerospeech/presets/*.yaml``)."""

    seed: int = field(0, help="seed of single runs")
    main_seeds: tuple[int, ...] = field((0, 1, 2), help="seeds of the main rows (mean ± std)")
    corpus_dir: str | None = field(
        None,
        help="a real ZeroSpeech 2019 folder with english/ and surprise/ (relative paths are "
        "under the data folder); None: the embedded corpus",
    )
    corpus_preset: str = field("embedded", help="embedded corpus to use: smoke | embedded")
    feature: str = field("mfcc", help="input features of the main model: mfcc | logmel")
    d_model: int = field(64, help="encoder width")
    n_heads: int = field(4, help="attention heads")
    ffn_dim: int = field(128, help="Transformer feed-forward width")
    code_dim: int = field(32, help="D_e, codebook vector dimension")
    codebook_size: int = field(128, help="K of the main model")
    stride: int = field(4, help="encoder downsampling: 4 or 2")
    ema_decay: float = field(0.99, help="codebook EMA decay")
    dead_code_threshold: float = field(0.03, help="dead-code restart threshold (0: off)")
    speaker_dim: int = field(16, help="speaker embedding dimension")
    decoder_channels: int = field(64, help="decoder channels")
    segment_frames: int = field(128, help="training segment length in feature frames")
    batch_size: int = field(16, help="segments per batch")
    lr: float = field(1e-3, help="Adam learning rate (paper: 1e-4)")
    num_epochs: int = field(1, help="passes over the training segments")
    max_steps: int | None = field(None, help="cap on optimizer steps (None: num_epochs)")
    max_train_files: int | None = field(None, help="use only this many training files")
    codebook_sizes: tuple[int, ...] = field((64, 128, 256, 512), help="K of Table 2")
    conv_codebook_size: int = field(256, help="K of the convolutional baseline (Table 2)")
    smoothings: tuple[float, ...] = field((1e-2, 5e-3, 1e-3), help="λ of Table 3")
    jitters: tuple[float, ...] = field((0.05, 0.075), help="p of Table 3")
    combos: tuple[tuple[float, float], ...] = field(
        ((5e-3, 0.05), (1e-3, 0.05)), help="(λ, p) pairs of Table 3"
    )
    surprise: bool = field(True, help="also train and evaluate on the surprise language")
    target_voice: str = field("V001", help="voice the inverter speaks with")
    inv_d_model: int = field(64, help="inverter width")
    inv_segment_codes: int = field(32, help="inverter training segment length in code frames")
    inv_num_epochs: int = field(4, help="inverter passes over the target voice's segments")
    inv_max_steps: int | None = field(None, help="cap on inverter optimizer steps")
    inv_lr: float = field(1e-3, help="inverter Adam learning rate (paper: 1e-4)")
    griffin_lim_iters: int = field(32, help="Griffin-Lim iterations")
    n_examples: int = field(2, help="utterances resynthesised on the inverter page")

    def __post_init__(self) -> None:
        if self.feature not in FEATURES:
            raise ValueError(f"feature must be one of {tuple(FEATURES)}, got {self.feature!r}")


def vqvae_config(cfg: ZeroSpeechConfig, **overrides: Any) -> VQVAEConfig:
    """The :class:`VQVAEConfig` of the chapter's main model, with fields overridden.

    ``feature`` may be overridden too (it sets ``input_dim``).
    """
    feature = overrides.pop("feature", cfg.feature)
    values = dict(
        input_dim=FEATURES[feature],
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        ffn_dim=cfg.ffn_dim,
        code_dim=cfg.code_dim,
        codebook_size=cfg.codebook_size,
        stride=cfg.stride,
        ema_decay=cfg.ema_decay,
        dead_code_threshold=cfg.dead_code_threshold,
        speaker_dim=cfg.speaker_dim,
        decoder_channels=cfg.decoder_channels,
    )
    values.update(overrides)
    return VQVAEConfig(**values)


# ---------------------------------------------------------------------------------- data


def language_dir(cfg: ZeroSpeechConfig, language: str = "english") -> Path:
    """The language folder (``english`` or ``surprise``), generating the embedded corpus if needed."""
    if cfg.corpus_dir is not None:
        root = Path(cfg.corpus_dir).expanduser()
        path = (root if root.is_absolute() else data_dir() / root) / language
    else:
        from audiorepro.data.embedded.generate import ensure_corpora

        root = ensure_corpora(cfg.corpus_preset, 0, only=("zerospeech",), verbose=False)
        path = Path(root["zerospeech"]) / language
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no ZeroSpeech 2019 {language} folder")
    return path


@contextlib.contextmanager
def single_thread():
    """Run torch on one intra-op thread inside the block (restored afterwards).

    The chapter's models are small: on a shared 2-core machine a second intra-op thread costs
    far more in synchronisation than it saves (measured: 20× slower steps under load).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _cache_dir(*parts: str) -> Path:
    path = results_dir() / "cache" / "03_zerospeech" / Path(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _key(obj: Any) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _feature_fn(feature: str):
    if feature == "mfcc":
        return lambda wav: mfcc_features(wav, SAMPLE_RATE, dim=39)
    if feature == "logmel":
        return lambda wav: log_mel(wav, SAMPLE_RATE, n_mels=80)
    if feature == "linear":
        return lambda wav: linear_spectrogram(wav, SAMPLE_RATE)
    raise ValueError(f"feature must be mfcc, logmel or linear, got {feature!r}")


def load_features(lang_dir: Path, split: str, feature: str) -> dict[str, np.ndarray]:
    """``{file id: (T, F) float32}`` for every wav of ``<lang_dir>/<split>`` (10 ms frames).

    ``split`` is a folder (``train/unit``, ``train/voice``, ``test``); ``feature`` is ``mfcc``
    (MFCC + Δ + ΔΔ, 39), ``logmel`` (80) or ``linear`` (the inverter's magnitudes, 257).
    Cached in the results folder by folder, file list, sizes and feature.
    """
    folder = Path(lang_dir) / split
    wavs = sorted(folder.glob("*.wav"))
    if not wavs:
        raise FileNotFoundError(f"{folder}: no .wav files")
    ident = [str(folder.resolve()), feature, CACHE_VERSION]
    ident += [(p.name, p.stat().st_size) for p in wavs]
    path = _cache_dir("features") / f"{_key(ident)}.npz"
    if path.is_file():
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    fn = _feature_fn(feature)
    out = {p.stem: fn(load_audio(p, sr=SAMPLE_RATE)[0]).astype(np.float32) for p in wavs}
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.npz")
    np.savez(tmp, **out)
    os.replace(tmp, path)
    return out


class SegmentDataset(Dataset):
    """Utterances cut into consecutive segments of ``segment_frames`` (the last one shorter).

    Items are ``(feats (T, F) float32, speaker index)``; deterministic, so training resumes
    exactly. Segments shorter than ``min_frames`` are dropped.
    """

    def __init__(
        self,
        utterances: Sequence[np.ndarray],
        speakers: Sequence[int],
        segment_frames: int,
        min_frames: int = 8,
    ) -> None:
        self.items: list[tuple[np.ndarray, int]] = []
        for feats, spk in zip(utterances, speakers, strict=True):
            for start in range(0, len(feats), segment_frames):
                seg = feats[start : start + segment_frames]
                if len(seg) >= min_frames:
                    self.items.append((seg, int(spk)))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.items[index]


def collate_segments(
    batch: Sequence[tuple[np.ndarray, int]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad to the longest: feats (B, T, F), lengths (B,), speakers (B,)."""
    lengths = torch.tensor([len(x) for x, _ in batch])
    feats = torch.zeros(len(batch), int(lengths.max()), batch[0][0].shape[1])
    for i, (x, _) in enumerate(batch):
        feats[i, : len(x)] = torch.from_numpy(np.asarray(x))
    return feats, lengths, torch.tensor([s for _, s in batch])


def training_data(
    cfg: ZeroSpeechConfig, lang_dir: Path, feature: str
) -> tuple[list[np.ndarray], list[str]]:
    """Features and speakers of the unit-discovery and voice training files (paper §5.1)."""
    feats, speakers = [], []
    for split in ("train/unit", "train/voice"):
        for name, x in sorted(load_features(lang_dir, split, feature).items()):
            feats.append(x)
            speakers.append(speaker_of(name))
    if cfg.max_train_files is not None:
        feats, speakers = feats[: cfg.max_train_files], speakers[: cfg.max_train_files]
    return feats, speakers


# ---------------------------------------------------------------------------------- VQ-VAE


@dataclass
class TrainedVQVAE:
    """A trained model with its training history and speaker list."""

    model: VQVAE
    history: dict[str, Any]
    speakers: list[str]
    seed: int
    from_cache: bool


def _vqvae_loss(model: VQVAE, batch: Any) -> dict[str, torch.Tensor]:
    feats, lengths, speakers = batch
    out = model(feats, lengths, speakers)
    return {
        "loss": out.loss,
        "reconstruction": out.reconstruction.detach(),
        "commitment": out.commitment.detach(),
    }


def train_vqvae(
    cfg: ZeroSpeechConfig,
    model_cfg: VQVAEConfig,
    seed: int,
    language: str = "english",
    feature: str | None = None,
    progress: str = "none",
) -> TrainedVQVAE:
    """Train (or load from the cache) a VQ-VAE on a language's training speech.

    Adam (β = 0.9, 0.999, no weight decay) at ``cfg.lr`` for ``cfg.num_epochs`` over
    :class:`SegmentDataset` segments, capped at ``cfg.max_steps``; one ``seed`` sets the
    initial weights, the data order and the jitter draws.
    """
    feature = feature or ("mfcc" if model_cfg.input_dim == 39 else "logmel")
    lang_dir = language_dir(cfg, language)
    feats, speaker_names = training_data(cfg, lang_dir, feature)
    speakers = sorted(set(speaker_names))
    train_cfg = TrainConfig(
        num_epochs=cfg.num_epochs,
        max_steps=cfg.max_steps,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        weight_decay=0.0,
        seed=seed,
        device="cpu" if not torch.cuda.is_available() else "auto",
        log_every=25,
    )
    ident = {
        "model": to_dict(model_cfg),
        "train": to_dict(train_cfg),
        "segment_frames": cfg.segment_frames,
        "data": [str(lang_dir.resolve()), feature, len(feats), speakers],
        "version": CACHE_VERSION,
    }
    run_dir = _cache_dir("vqvae", _key(ident))
    seed_everything(seed)
    model = VQVAE(model_cfg, n_speakers=len(speakers))
    weights, history_path = run_dir / "model.safetensors", run_dir / "history.json"
    if weights.is_file() and history_path.is_file():
        load_model_weights(model, weights)
        model.eval()
        return TrainedVQVAE(model, json.loads(history_path.read_text()), speakers, seed, True)
    stacked = np.concatenate(feats)
    model.set_normalization(torch.from_numpy(stacked.mean(0)), torch.from_numpy(stacked.std(0)))
    index = {s: i for i, s in enumerate(speakers)}
    dataset = SegmentDataset(feats, [index[s] for s in speaker_names], cfg.segment_frames)
    trainer = Trainer(
        model,
        _vqvae_loss,
        dataset,
        train_cfg,
        collate_fn=collate_segments,
        optimizer_factory=lambda m, c: torch.optim.Adam(m.parameters(), lr=c.lr),
        progress=progress,
    )
    with single_thread():
        result = trainer.fit()
    history = {
        "step": result.steps,
        "loss": result.losses,
        **{k: v for k, v in result.step_metrics.items()},
        "wall_time_s": result.wall_time_s,
    }
    model = trainer.unwrapped_model.cpu().eval()
    save_model_weights(model, weights)
    history_path.write_text(json.dumps(history))
    return TrainedVQVAE(model, history, speakers, seed, False)


@torch.no_grad()
def encode_files(
    model: VQVAE, feats: Mapping[str, np.ndarray], batch_size: int = 64
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Units of every file: ``({id: codes (T',) int64}, {id: codebook vectors (T', D_e)})``."""
    model.eval()
    names = sorted(feats, key=lambda n: len(feats[n]))
    codes, vectors = {}, {}
    with single_thread():
        _encode_batches(model, feats, names, batch_size, codes, vectors)
    return codes, vectors


def _encode_batches(model, feats, names, batch_size, codes, vectors) -> None:
    for start in range(0, len(names), batch_size):
        chunk = names[start : start + batch_size]
        x, lengths, _ = collate_segments([(feats[n], 0) for n in chunk])
        c, e, code_lengths = model.encode(x, lengths)
        for i, name in enumerate(chunk):
            n = int(code_lengths[i])
            codes[name] = c[i, :n].numpy().astype(np.int64)
            vectors[name] = e[i, :n].numpy().astype(np.float32)


def code_segments(codes: np.ndarray, frame_shift: float) -> list[tuple[str, float, float]]:
    """Runs of one code as ``(code, start_s, end_s)`` intervals (for a spectrogram tier)."""
    segments, start = [], 0
    for t in range(1, len(codes) + 1):
        if t == len(codes) or codes[t] != codes[start]:
            segments.append((str(codes[start]), start * frame_shift, t * frame_shift))
            start = t
    return segments


def evaluate_units(
    model: VQVAE,
    lang_dir: Path,
    test_feats: Mapping[str, np.ndarray],
    item_file: str = "abx/byCtxt_acSpkr.item",
    within: bool = False,
) -> dict[str, float]:
    """ABX across (%) on the codebook vectors and bitrate (b/s) of a model's test units.

    ABX: the whole-file items of ``item_file``, frames selected with libri-light's rule at the
    code frame shift (``stride`` × 10 ms). Bitrate: the files of ``bitrate_filelist.txt`` and
    their wav durations. Also the codebook usage over the test set (codes used, perplexity).
    """
    codes, vectors = encode_files(model, test_feats)
    shift = model.cfg.stride * HOP_S
    result = abx(vectors, Path(lang_dir) / item_file, "angular", "across", frame_shift=shift)
    entries = read_bitrate_filelist(Path(lang_dir) / "bitrate_filelist.txt")
    names = [n[: -len(".txt")] for n, _ in entries]
    rate = bitrate([codes[n] for n in names], sum(d for _, d in entries))
    pooled = np.concatenate(list(codes.values()))
    p = np.bincount(pooled, minlength=model.cfg.codebook_size) / len(pooled)
    p = p[p > 0]
    metrics = {
        "abx_across": result.error,
        "bitrate": rate,
        "codes_used": float(len(p)),
        "perplexity": float(2 ** -(p * np.log2(p)).sum()),
        "n_triplets": float(result.n_triplets),
    }
    if within:
        metrics["abx_within"] = abx(
            vectors, Path(lang_dir) / item_file, "angular", "within", frame_shift=shift
        ).error
    return metrics


# ---------------------------------------------------------------------------------- inverter


@dataclass
class TrainedInverter:
    """A trained codebook inverter for one target voice."""

    model: CodebookInverter
    history: dict[str, Any]
    voice: str
    from_cache: bool


class _InverterDataset(Dataset):
    def __init__(self, items: list[tuple[np.ndarray, np.ndarray]]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.items[index]


def _collate_inverter(batch):
    code_lengths = torch.tensor([len(v) for v, _ in batch])
    lengths = torch.tensor([len(m) for _, m in batch])
    vectors = torch.zeros(len(batch), int(code_lengths.max()), batch[0][0].shape[1])
    mags = torch.zeros(len(batch), int(lengths.max()), batch[0][1].shape[1])
    for i, (v, m) in enumerate(batch):
        vectors[i, : len(v)] = torch.from_numpy(v)
        mags[i, : len(m)] = torch.from_numpy(m)
    return vectors, code_lengths, mags, lengths


def _inverter_loss(model: CodebookInverter, batch: Any) -> torch.Tensor:
    vectors, code_lengths, mags, lengths = batch
    return inverter_loss(model(vectors, code_lengths), mags, lengths, model.mag_scale)


def train_inverter(
    cfg: ZeroSpeechConfig,
    vqvae: TrainedVQVAE,
    seed: int,
    language: str = "english",
    progress: str = "none",
    holdout: Sequence[str] = (),
) -> TrainedInverter:
    """Train (or load from the cache) the inverter on the target voice's training files.

    The frozen VQ-VAE encodes each voice file; the inverter learns to map its codebook vectors
    to the file's linear magnitude spectrogram (same 10 ms frames as the VQ-VAE input).
    Files named in ``holdout`` are left out (to measure the inverter on unseen speech).
    """
    lang_dir = language_dir(cfg, language)
    feature = "mfcc" if vqvae.model.cfg.input_dim == 39 else "logmel"
    inputs = load_features(lang_dir, "train/voice", feature)
    mags = load_features(lang_dir, "train/voice", "linear")
    names = sorted(
        n for n in inputs if speaker_of(n) == cfg.target_voice and n not in set(holdout)
    )
    if not names:
        raise ValueError(f"no training file of voice {cfg.target_voice} in {lang_dir}")
    _, vectors = encode_files(vqvae.model, {n: inputs[n] for n in names})
    r = vqvae.model.cfg.stride
    items = []
    for n in names:
        seg = cfg.inv_segment_codes
        for start in range(0, len(vectors[n]), seg):
            v = vectors[n][start : start + seg]
            m = mags[n][start * r : (start + len(v)) * r]
            if len(m) >= r:
                items.append((v, m))
    inv_cfg = InverterConfig(
        code_dim=vqvae.model.cfg.code_dim,
        n_bins=next(iter(mags.values())).shape[1],
        repeat=r,
        d_model=cfg.inv_d_model,
        ffn_dim=2 * cfg.inv_d_model,
    )
    train_cfg = TrainConfig(
        num_epochs=cfg.inv_num_epochs,
        max_steps=cfg.inv_max_steps,
        batch_size=8,
        lr=cfg.inv_lr,
        weight_decay=0.0,
        seed=seed,
        device="cpu" if not torch.cuda.is_available() else "auto",
        log_every=25,
    )
    ident = {
        "inverter": to_dict(inv_cfg),
        "train": to_dict(train_cfg),
        "segment": cfg.inv_segment_codes,
        "vqvae": _key(
            {k: v.tolist() for k, v in vqvae.model.state_dict().items() if v.numel() < 5000}
        ),
        "voice": cfg.target_voice,
        "files": names,
        "version": CACHE_VERSION,
    }
    run_dir = _cache_dir("inverter", _key(ident))
    seed_everything(seed)
    model = CodebookInverter(inv_cfg)
    weights, history_path = run_dir / "model.safetensors", run_dir / "history.json"
    if weights.is_file() and history_path.is_file():
        load_model_weights(model, weights)
        model.eval()
        history = json.loads(history_path.read_text())
        return TrainedInverter(model, history, cfg.target_voice, True)
    model.mag_scale.fill_(float(np.concatenate([m for _, m in items]).mean()))
    trainer = Trainer(
        model,
        _inverter_loss,
        _InverterDataset(items),
        train_cfg,
        collate_fn=_collate_inverter,
        optimizer_factory=lambda m, c: torch.optim.Adam(m.parameters(), lr=c.lr),
        progress=progress,
    )
    with single_thread():
        result = trainer.fit()
    model = trainer.unwrapped_model.cpu().eval()
    history = {"step": result.steps, "loss": result.losses, "wall_time_s": result.wall_time_s}
    save_model_weights(model, weights)
    history_path.write_text(json.dumps(history))
    return TrainedInverter(model, history, cfg.target_voice, False)


@torch.no_grad()
def resynthesize(
    vqvae: VQVAE,
    inverter: CodebookInverter,
    feats: np.ndarray,
    n_samples: int | None,
    griffin_lim_iters: int = 32,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Utterance features (T, F) → units → magnitudes → waveform in the inverter's voice.

    Returns ``(wav (n_samples,), predicted magnitudes (S, n_bins), codes (T',))``;
    ``n_samples=None`` gives ``160 · (S − 1)`` samples.
    """
    vqvae.eval()
    inverter.eval()
    x = torch.from_numpy(np.asarray(feats, dtype=np.float32))[None]
    codes, e, code_lengths = vqvae.encode(x, torch.tensor([len(feats)]))
    mag = inverter(e, code_lengths)[0, : len(feats)].numpy()  # (S, n_bins)
    wav = griffin_lim(mag, n_iter=griffin_lim_iters, sr=SAMPLE_RATE, length=n_samples, seed=seed)
    return wav, mag, codes[0, : int(code_lengths[0])].numpy()


# ---------------------------------------------------------------------------------- export


def _one_hot_lines(codes: np.ndarray, k: int) -> str:
    rows = np.zeros((len(codes), k), dtype=np.int64)
    rows[np.arange(len(codes)), codes] = 1
    return "".join(" ".join(map(str, row)) + "\n" for row in rows)


def _vector_lines(vectors: np.ndarray) -> str:
    # the shortest repr of each float32 value widened to float64: read back as float64 (as the
    # official loader does) it is exactly the vector the model produced
    rows = np.float32(vectors).astype(np.float64)
    return "".join(" ".join(repr(v) for v in row.tolist()) + "\n" for row in rows)


def export_submission(
    out_dir: str | os.PathLike[str],
    language: str,
    codes: Mapping[str, np.ndarray],
    *,
    vectors: Mapping[str, np.ndarray] | None = None,
    codebook_size: int | None = None,
    wavs: Mapping[str, np.ndarray] | None = None,
    author: str = "audiorepro",
    affiliation: str = "audiorepro",
    description: str = "Transformer VQ-VAE (Tjandra et al. 2020) reimplemented in audiorepro",
    hyperparameters: Mapping[str, Any] | None = None,
) -> Path:
    """Write a ZeroSpeech 2019 submission (reference §2.2) and return ``out_dir``.

    ``<out_dir>/metadata.yaml``, ``<out_dir>/2019/metadata.yaml`` and
    ``<out_dir>/2019/<language>/test/<file>.txt``: one line per code frame, the codebook vector
    (``vectors``) or, without vectors, a one-hot vector of ``codebook_size`` (never a single
    integer column, which the official ABX loader drops). ``wavs`` maps a file name such as
    ``V001_0012`` (target voice, then the test file's utterance id) to a 16 kHz waveform, written
    next to the embeddings.
    """
    if vectors is None and codebook_size is None:
        raise ValueError("give the codebook vectors or the codebook size (for one-hot lines)")
    out = Path(out_dir)
    test = out / "2019" / language / "test"
    test.mkdir(parents=True, exist_ok=True)
    for name, c in codes.items():
        text = (
            _vector_lines(vectors[name])
            if vectors is not None
            else _one_hot_lines(c, codebook_size)
        )
        (test / f"{name}.txt").write_text(text)
    for name, wav in (wavs or {}).items():
        save_audio(test / f"{name}.wav", wav, SAMPLE_RATE)
    (out / "metadata.yaml").write_text(
        yaml.safe_dump({"author": author, "affiliation": affiliation, "open source": True})
    )
    (out / "2019" / "metadata.yaml").write_text(
        yaml.safe_dump(
            {
                "abx distance": "dtw_cosine",
                "system description": description,
                "hyperparameters": dict(hyperparameters or {}),
                "using parallel train": False,
                "using external data": False,
            },
            sort_keys=False,
        )
    )
    code = out / "2019" / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "README.txt").write_text(
        "The code is the audiorepro library: lib/audiorepro/models/vqvae.py, "
        "lib/audiorepro/models/inverter.py, lib/audiorepro/zerospeech.py.\n"
    )
    return out


def synthesis_voices(lang_dir: Path) -> list[str]:
    """The target voices named in ``<lang_dir>/synthesis.txt``, sorted."""
    return sorted({v for _, v in read_synthesis_list(Path(lang_dir) / "synthesis.txt")})


def synthesis_targets(lang_dir: Path, voice: str) -> list[tuple[str, str]]:
    """``[(test file id, output wav name)]`` of the synthesis list entries for ``voice``.

    The output name is the voice followed by the test file's utterance id (``V001_0012``).
    """
    out = []
    for path, target in read_synthesis_list(Path(lang_dir) / "synthesis.txt"):
        if target == voice:
            name = path.split("/", 1)[1]
            out.append((name, f"{target}_{name.split('_', 1)[1]}"))
    return out


def config_dict(cfg: Any) -> dict[str, Any]:
    """A dataclass configuration as plain values (for the ledger)."""
    return to_dict(cfg) if dataclasses.is_dataclass(cfg) else dict(cfg)


# ---------------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class AblationRow:
    """One row of the paper's Tables 1-3: what to train, and the paper's numbers for it."""

    key: str
    label: str
    table: str
    feature: str
    overrides: tuple[tuple[str, Any], ...]
    paper_abx: float | None
    paper_bitrate: float | None
    main: bool = False


# Tables 1-3 of the paper (English, ABX across %, bitrate b/s); stride 4× throughout.
_PAPER = {
    ("logmel", 128): (33.79, 171.05),
    ("mfcc", 64): (22.72, 141.82),
    ("mfcc", 128): (21.91, 170.42),
    ("mfcc", 256): (21.94, 194.69),
    ("mfcc", 512): (21.6, 217.47),
    ("conv", 256): (24.17, 184.32),
    ("smooth", 1e-2): (21.88, 169.02),
    ("smooth", 5e-3): (21.67, 169.2),
    ("smooth", 1e-3): (21.75, 169.56),
    ("jitter", 0.05): (21.57, 166.19),
    ("jitter", 0.075): (21.70, 164.08),
    ("combo", (5e-3, 0.05)): (20.71, 171.99),
    ("combo", (1e-3, 0.05)): (20.14, 167.02),
}


def ablation_rows(cfg: ZeroSpeechConfig) -> list[AblationRow]:
    """The rows of Tables 1-3 that the preset asks for; main rows run with every main seed."""
    k0 = cfg.codebook_size
    rows = [
        AblationRow(
            "base",
            f"TrfVQVAE MFCC K={k0}",
            "1, 2, 3",
            "mfcc",
            (),
            *_PAPER.get(("mfcc", k0), (None, None)),
            main=True,
        ),
        AblationRow(
            "logmel",
            f"TrfVQVAE log-Mel K={k0}",
            "1",
            "logmel",
            (),
            *_PAPER.get(("logmel", k0), (None, None)),
            main=True,
        ),
        AblationRow(
            "conv",
            f"Conv VQVAE K={cfg.conv_codebook_size}",
            "2",
            "mfcc",
            (("encoder", "conv"), ("codebook_size", cfg.conv_codebook_size)),
            *_PAPER.get(("conv", cfg.conv_codebook_size), (None, None)),
            main=True,
        ),
    ]
    for k in cfg.codebook_sizes:
        if k != k0:
            rows.append(
                AblationRow(
                    f"K{k}",
                    f"TrfVQVAE K={k}",
                    "2",
                    "mfcc",
                    (("codebook_size", k),),
                    *_PAPER.get(("mfcc", k), (None, None)),
                )
            )
    for lam in cfg.smoothings:
        rows.append(
            AblationRow(
                f"smooth{lam:g}",
                f"+ temp smooth λ={lam:g}",
                "3",
                "mfcc",
                (("smoothing", lam),),
                *_PAPER.get(("smooth", lam), (None, None)),
            )
        )
    for p in cfg.jitters:
        rows.append(
            AblationRow(
                f"jitter{p:g}",
                f"+ temp jitter p={p:g}",
                "3",
                "mfcc",
                (("jitter", p),),
                *_PAPER.get(("jitter", p), (None, None)),
            )
        )
    for i, (lam, p) in enumerate(cfg.combos):
        rows.append(
            AblationRow(
                f"combo{lam:g}_{p:g}",
                f"+ smooth λ={lam:g} + jitter p={p:g}",
                "3",
                "mfcc",
                (("smoothing", lam), ("jitter", p)),
                *_PAPER.get(("combo", (lam, p)), (None, None)),
                main=i == 0,  # the paper's submitted system; the others run one seed
            )
        )
    return rows


def row_seeds(cfg: ZeroSpeechConfig, row: AblationRow) -> tuple[int, ...]:
    """Every main seed for a main row, the single ``cfg.seed`` otherwise."""
    return cfg.main_seeds if row.main else (cfg.seed,)


def run_row(
    cfg: ZeroSpeechConfig,
    row: AblationRow,
    seed: int,
    language: str = "english",
) -> tuple[TrainedVQVAE, dict[str, float]]:
    """Train (or load) the row's model for one seed and evaluate its units on ``language``."""
    model_cfg = vqvae_config(cfg, feature=row.feature, **dict(row.overrides))
    trained = train_vqvae(cfg, model_cfg, seed, language=language, feature=row.feature)
    lang_dir = language_dir(cfg, language)
    metrics = evaluate_units(trained.model, lang_dir, load_features(lang_dir, "test", row.feature))
    metrics["train_wall_time_s"] = float(trained.history.get("wall_time_s", 0.0))
    return trained, metrics


def _verdict(holds: bool) -> str:
    return "reproduces" if holds else "does not reproduce"


def findings(means: Mapping[str, Mapping[str, float]]) -> dict[str, str]:
    """Plain sentences on whether each finding of the paper holds in ``means``.

    ``means[row key]`` holds our mean ``abx_across`` and ``bitrate`` over the row's seeds, and
    ``abx_seed``/``bitrate_seed``/``K`` for the single-seed comparisons: a single-seed row
    (codebook size, smoothing, jitter) is compared with the main row *at the same seed*, so
    that seed-to-seed spread does not pass for an effect. Keys of the result are row keys.
    """
    out: dict[str, str] = {}
    abx = {k: v["abx_across"] for k, v in means.items()}
    same = {k: v.get("abx_seed", v["abx_across"]) for k, v in means.items()}
    rate = {k: v.get("bitrate_seed", v["bitrate"]) for k, v in means.items()}
    if "base" in abx and "logmel" in abx:
        holds = abx["base"] < abx["logmel"]
        out["logmel"] = (
            f"Paper: MFCC beats log-Mel by 11.9 points; here MFCC {abx['base']:.1f} vs log-Mel "
            f"{abx['logmel']:.1f}: {_verdict(holds)}."
        )
    if "conv" in abx and "base" in abx:
        holds = abx["base"] < abx["conv"]
        out["conv"] = (
            f"Paper: the Transformer beats the conv VQ-VAE by 2.2 points; here Transformer "
            f"{abx['base']:.1f} vs conv {abx['conv']:.1f}: {_verdict(holds)}."
        )
    ks = sorted((means[k].get("K", 0), k) for k in rate if k.startswith("K") or k == "base")
    if len(ks) > 1:
        rates = [rate[k] for _, k in ks]
        holds = all(a < b for a, b in zip(rates, rates[1:], strict=False))
        text = ", ".join(f"K={kk}: {rate[k]:.0f}" for kk, k in ks)
        for _, k in ks:
            if k != "base":
                out[k] = f"Paper: bitrate rises with K; here ({text} b/s) {_verdict(holds)}."
    if "base" in abx:
        for k in abx:
            if k.startswith("combo") and means[k].get("seeds", 1) > 1:
                gain = abx["base"] - abx[k]
                spread = max(means["base"].get("abx_std", 0.0), means[k].get("abx_std", 0.0))
                if gain <= 0:
                    verdict = "does not reproduce"
                elif gain > spread:
                    verdict = "reproduces"
                else:
                    verdict = f"same direction, within the seed-to-seed spread (±{spread:.1f})"
                out[k] = (
                    "Paper: smoothing + jitter lowers ABX by 1.2-1.8 points; here by "
                    f"{gain:+.1f} (means over seeds): {verdict}."
                )
            elif k.startswith(("smooth", "jitter", "combo")):
                gain = same["base"] - same[k]
                paper = "1.2-1.8" if k.startswith("combo") else "0.0-0.3"
                out[k] = (
                    f"Paper: gains of {paper} points; here {gain:+.1f} vs the main row at the "
                    "same seed (one seed)."
                )
    return out


def summarize(rows: Sequence[AblationRow], results: Any, cfg: ZeroSpeechConfig) -> Any:
    """One line per row: means and standard deviations over seeds, usage, cap, paper values.

    ``results`` is a DataFrame with ``row``, ``seed`` and the metrics of :func:`evaluate_units`.
    Indexed by row key; ``abx_seed``/``bitrate_seed`` are the values at ``cfg.seed``;
    ``bitrate_cap`` is the most a K-code stream at 25 Hz can carry.
    """
    import pandas as pd

    out = []
    for row in rows:
        part = results[results["row"] == row.key]
        if part.empty:
            continue
        k = dict(row.overrides).get("codebook_size", cfg.codebook_size)
        frame_rate = 1.0 / (dict(row.overrides).get("stride", cfg.stride) * HOP_S)
        std = part.std(ddof=1, numeric_only=True) if len(part) > 1 else part.iloc[0] * 0
        at_seed = part[part["seed"] == cfg.seed]
        first = (at_seed if len(at_seed) else part).iloc[0]
        out.append(
            {
                "row": row.key,
                "label": row.label,
                "table": row.table,
                "K": k,
                "seeds": len(part),
                "abx": part["abx_across"].mean(),
                "abx_std": float(std["abx_across"]),
                "bitrate": part["bitrate"].mean(),
                "bitrate_std": float(std["bitrate"]),
                "abx_seed": float(first["abx_across"]),
                "bitrate_seed": float(first["bitrate"]),
                "codes_used": part["codes_used"].mean(),
                "perplexity": part["perplexity"].mean(),
                "bitrate_cap": frame_rate * math.log2(k),
                "paper_abx": row.paper_abx,
                "paper_bitrate": row.paper_bitrate,
            }
        )
    return pd.DataFrame(out).set_index("row")


def paper_rows(rows: Sequence[AblationRow], summary: Any, cfg: ZeroSpeechConfig) -> list:
    """The :class:`~audiorepro.reporting.PaperRow` list of the evaluation page, with findings."""
    from audiorepro.reporting import PaperRow

    means = {
        key: {
            "abx_across": r["abx"],
            "bitrate": r["bitrate"],
            "abx_seed": r["abx_seed"],
            "bitrate_seed": r["bitrate_seed"],
            "abx_std": r["abx_std"],
            "seeds": r["seeds"],
            "K": r["K"],
        }
        for key, r in summary.iterrows()
    }
    found = findings(means)
    out = []
    for row in rows:
        if row.key not in summary.index:
            continue
        tags = {"row": row.key, "language": "english"}
        out.append(
            PaperRow(
                f"{row.label}: ABX %",
                "abx_across",
                row.paper_abx,
                "03_zerospeech",
                tags,
                digits=2,
                finding=found.get(row.key, ""),
            )
        )
        out.append(
            PaperRow(
                f"{row.label}: bitrate",
                "bitrate",
                row.paper_bitrate,
                "03_zerospeech",
                tags,
                digits=1,
            )
        )
    if cfg.surprise:
        tags = {"row": "base", "language": "surprise"}
        # leaderboard 2019_task/12: the 4× system on the surprise language
        out.append(
            PaperRow(
                "Indonesian, main model: ABX %",
                "abx_across",
                14.17,
                "03_zerospeech",
                tags,
                digits=2,
                finding="Leaderboard value of the 4× system.",
            )
        )
        out.append(
            PaperRow(
                "Indonesian, main model: bitrate",
                "bitrate",
                170.92,
                "03_zerospeech",
                tags,
                digits=1,
            )
        )
    return out
