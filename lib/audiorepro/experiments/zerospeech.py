"""Chapter 03, ZeroSpeech 2019 with the Transformer VQ-VAE (Tjandra, Sakti & Nakamura 2020).

The pages of ``book/03_zerospeech`` call these one line at a time:

- :func:`load_config` reads a preset into :class:`Config` (corpus, model, training and inverter
  sections, plus the chapter's sweeps);
- :func:`language_dir` finds the ZeroSpeech 2019 language folder of the corpus, and
  :func:`load_features` its MFCC-39, log-Mel-80 or linear features
  (:mod:`audiorepro.data.speech_segments`, cached by the files' contents);
- :func:`load_data` gathers the unit-discovery and voice training speech, :func:`train_vqvae`
  trains a :class:`~audiorepro.models.vqvae.VQVAE` on it with
  :class:`~audiorepro.training.Trainer` (Adam, the paper's optimizer);
- :func:`encode_files` turns test files into units, :func:`evaluate` measures the ABX error
  (:mod:`audiorepro.metrics.abx`) and the bitrate (:mod:`audiorepro.metrics.bitrate`);
- :func:`ablation_rows` and :func:`run_row` train and score each row of Tables 1-3, and
  :func:`run_rows` every row with every seed, side by side in worker processes;
  :func:`summarize` and :func:`findings` read the ledger back into the page's tables, the
  latter setting our numbers beside :data:`PAPER`'s;
- :func:`train_inverter` trains the codebook inverter on one target voice, :func:`resynthesize`
  turns any utterance into that voice through its units and Griffin-Lim;
- :func:`export_submission` writes a ZeroSpeech 2019 submission folder and
  :func:`score_submission` scores it from its files.
- any folder of recordings (``audiorepro units ...`` / ``audiorepro abx ...``):
  :func:`fit_vqvae` trains on feature arrays (the chapter's :func:`train_vqvae` goes through
  it), :func:`train_units` on a folder of wavs into a run folder (with the k-means baseline of
  its K), :func:`encode_units` writes one ZeroSpeech 2019 ``.txt`` per wav (the units, or the
  input frames and the k-means units to score beside them), :func:`abx_items` writes word
  items from a segments table.

Every trained model and feature file is one run of ``RunStore("03_zerospeech")``, keyed by what
defines it: the VQ-VAE by its model and training sections, seed and the training features'
content key; the inverter by its sections, seed, target voice and the VQ-VAE's weights.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import yaml

from audiorepro import reporting
from audiorepro.config import (
    ConfigError,
    CorpusSpec,
    field,
    from_dict,
    load_preset,
    max_steps_alone,
    refuse_unused,
    replace,
    to_dict,
)
from audiorepro.data.recipes.zerospeech import (
    AbxItem,
    read_bitrate_filelist,
    read_item_file,
    read_synthesis_list,
    speaker_of,
    write_item_file,
)
from audiorepro.data.recordings import (
    RecordingsError,
    Segment,
    file_id,
    find_wavs,
    ids_under,
    read_segments,
    speaker_rule,
    speakers_of,
)
from audiorepro.data.speech_segments import (
    FEATURE_NORMS,
    FEATURES,
    HOP_S,
    SAMPLE_RATE,
    PairDataset,
    SegmentDataset,
    average_frames,
    collate_pairs,
    collate_segments,
    feature_of,
    features_key,
    load_wav_features,
    normalize_features,
)
from audiorepro.data.speech_segments import load_features as _features
from audiorepro.features import (
    audio_info,
    griffin_lim,
    linear_spectrogram,
    load_audio,
    save_audio,
    spectral_convergence,
)
from audiorepro.losses.inverter import inverter_loss
from audiorepro.metrics.abx import abx, abx_error, abx_modes, relative_time_item_file
from audiorepro.metrics.bitrate import bitrate, bitrate_from_submission, bitrate_of_files
from audiorepro.models.inverter import CodebookInverter, InverterConfig
from audiorepro.models.kmeans import KMeans, kmeans
from audiorepro.models.vqvae import INPUT_SCALES, VQVAE, VQVAEConfig, input_statistics
from audiorepro.parallel import default_workers, map_processes
from audiorepro.paths import data_dir, repo_root, results_dir
from audiorepro.repro import seed_everything, single_thread
from audiorepro.storage import (
    RunStore,
    atomic_write,
    config_hash,
    load_model_weights,
    read_json,
    read_run_info,
    save_model_weights,
    write_json,
)
from audiorepro.training import TrainConfig, Trainer, TrainResult
from audiorepro.training.optimizers import adam_factory

__all__ = [
    "CONVERGENCE_TERMS",
    "CHAPTER",
    "FEATURES",
    "FEATURE_NORMS",
    "PAPER",
    "AblationRow",
    "Config",
    "PaperResult",
    "RowResult",
    "SpeechData",
    "TrainSection",
    "TrainedInverter",
    "TrainedVQVAE",
    "UnitsRun",
    "abx",
    "abx_error",
    "abx_items",
    "ablation_rows",
    "current",
    "code_runs",
    "code_segments",
    "convergence",
    "convergence_curves",
    "encode_files",
    "encode_units",
    "evaluate",
    "export_submission",
    "findings",
    "fit_vqvae",
    "frames_abx",
    "griffin_lim",
    "input_geometry",
    "code_rate_kmeans",
    "fit_code_rate_kmeans",
    "kmeans_baseline",
    "kmeans_units",
    "language_dir",
    "linear_spectrogram",
    "load_audio",
    "load_config",
    "load_data",
    "load_features",
    "load_units",
    "load_voice",
    "model_inputs",
    "output_frame_shift",
    "resynthesize_folder",
    "submission_bitrate",
    "read_bitrate_filelist",
    "read_item_file",
    "relative_time_abx",
    "resynthesize",
    "run_rows",
    "run_row",
    "score_submission",
    "score_units",
    "spectral_convergence",
    "store",
    "submission_dir",
    "summarize",
    "synthesis_targets",
    "synthesis_voices",
    "train_inverter",
    "train_units",
    "train_voice",
    "train_ahead",
    "train_vqvae",
    "unit_runs",
]

CHAPTER = "03_zerospeech"
PRESETS = repo_root() / "book" / CHAPTER / "presets"
# Bump when a change to the code changes what a stored model would be.
RUNS_VERSION = 4  # 3: padding frames zeroed before the encoder convolutions; 4: in the decoder too
INVERTER_VERSION = 1  # inverter runs only; 1: padding zeroed before the inverter's convolutions
CHECKPOINT_STEPS = 100
"""Most optimizer steps between two checkpoints of an unfinished VQ-VAE run (at least one per
epoch), kept in the run store's staging folder so that a rerun after a kill continues there."""


@dataclass(frozen=True)
class TrainSection:
    """How one model of the chapter is trained: Adam, segments, batch size, loop length."""

    lr: float = field(1e-3, help="Adam learning rate (paper: 1e-4)")
    batch_size: int = field(16, help="segments per batch")
    num_epochs: int = field(1, help="passes over the training segments")
    max_steps: int | None = field(None, help="cap on optimizer steps (None: num_epochs)")
    segment_frames: int = field(
        128, help="training segment length in input frames (feature frames; codes: inverter)"
    )

    def loop(self, seed: int) -> TrainConfig:
        """The :class:`~audiorepro.training.TrainConfig` of one seed (no weight decay)."""
        return TrainConfig(
            num_epochs=self.num_epochs,
            max_steps=self.max_steps,
            batch_size=self.batch_size,
            lr=self.lr,
            weight_decay=0.0,
            seed=seed,
            device="cpu" if not torch.cuda.is_available() else "auto",
            log_every=25,
        )


@dataclass(frozen=True)
class Config:
    """Parameters of the chapter's pages (``book/03_zerospeech/presets/*.yaml``)."""

    corpus: CorpusSpec = field(
        default_factory=CorpusSpec,
        help="the ZeroSpeech 2019 corpus: smoke | embedded (generated) | paper (a real folder "
        "with english/ and surprise/, relative paths under the data folder)",
    )
    model: VQVAEConfig = field(
        default_factory=VQVAEConfig,
        help="the main VQ-VAE (input_dim 39: MFCC, 80: log-Mel); the tables' rows vary it",
    )
    train: TrainSection = field(default_factory=TrainSection, help="VQ-VAE training")
    inverter: InverterConfig = field(
        default_factory=InverterConfig,
        help="the codebook inverter (code_dim, n_bins and repeat come from the VQ-VAE and "
        "the spectrogram)",
    )
    inverter_train: TrainSection = field(
        default_factory=lambda: TrainSection(batch_size=8, num_epochs=4, segment_frames=32),
        help="inverter training (segment_frames: code frames)",
    )
    seed: int = field(0, help="seed of single runs")
    main_seeds: tuple[int, ...] = field(
        (0, 1, 2),
        help="seeds of every row of Tables 1-3 (mean ± std: each row enters a finding)",
    )
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
    griffin_lim_iters: int = field(32, help="Griffin-Lim iterations")
    n_examples: int = field(2, help="utterances resynthesised on the inverter page")

    def __post_init__(self) -> None:
        feature_of(self.model.input_dim)  # raises unless 39 (MFCC) or 80 (log-Mel)


def load_config(preset: str, overrides: Mapping[str, Any] | None = None, **more: Any) -> Config:
    """The chapter's :class:`Config` of ``preset`` (``PRESETS/<preset>.yaml``) with single-field
    overrides, given as a mapping or as keywords; dotted names set nested fields
    (``{"train.max_steps": 10}``), and ``None`` values are ignored. A section's ``max_steps``
    set without its ``num_epochs`` is the run's length: the preset's epochs no longer stop it
    first (:func:`audiorepro.config.max_steps_alone`; the learning rate is constant)."""
    values = max_steps_alone({**dict(overrides or {}), **more}, ("train", "inverter_train"))
    return load_preset(Config, PRESETS, preset, **values)


def store() -> RunStore:
    """The chapter's run store (models and feature files)."""
    return RunStore(CHAPTER)


# ---------------------------------------------------------------------------------- data


def language_dir(config: Config, language: str = "english") -> Path:
    """The language folder (``english`` or ``surprise``), generating the corpus if needed."""
    spec = config.corpus
    if spec.kind == "paper":
        root = spec.resolve(data_dir())
    else:
        from audiorepro.data.embedded.generate import ensure_corpora

        out = None if spec.root is None else spec.resolve(data_dir())
        if out is not None:
            own = [name for name in ("english", "surprise") if (out / name).is_dir()]
            if own:
                raise ConfigError(
                    f"corpus.root = {spec.root!r} holds a ZeroSpeech 2019 folder ({own[0]}/), "
                    f"but corpus.kind is {spec.kind!r}: the generated corpus would go to "
                    f"{out / 'zerospeech'} and yours would be ignored. Set corpus.kind=paper "
                    "to read it, or give a root for the generated corpus"
                )
        paths = ensure_corpora(spec.kind, spec.seed, out=out, only=("zerospeech",), verbose=False)
        root = Path(paths["zerospeech"])
    path = root / language
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no ZeroSpeech 2019 {language} folder")
    return path


def load_features(lang_dir: Path, split: str, feature: str) -> dict[str, np.ndarray]:
    """``{file id: (T, F) float32}`` for every wav of ``<lang_dir>/<split>`` (10 ms frames).

    ``split`` is a folder (``train/unit``, ``train/voice``, ``test``); ``feature`` is ``mfcc``
    (MFCC + Δ + ΔΔ, 39), ``logmel`` (80) or ``linear`` (the inverter's magnitudes, 257). Kept
    in the chapter's run store under the content of the wavs.
    """
    return _features(Path(lang_dir) / split, feature, store())


@dataclass
class SpeechData:
    """Training speech: per-file features, their speakers, and what defines them (``key``)."""

    feats: list[np.ndarray]
    speakers: list[str]
    key: dict[str, Any]


def load_data(config: Config, language: str = "english", feature: str = "mfcc") -> SpeechData:
    """Features and speakers of the unit-discovery and voice training files (paper §5.1)."""
    lang_dir = language_dir(config, language)
    feats, speakers, key = [], [], {"max_train_files": config.max_train_files}
    for split in ("train/unit", "train/voice"):
        key[split] = features_key(lang_dir / split, feature)
        for name, x in sorted(load_features(lang_dir, split, feature).items()):
            feats.append(x)
            speakers.append(speaker_of(name))
    if config.max_train_files is not None:
        feats, speakers = feats[: config.max_train_files], speakers[: config.max_train_files]
    return SpeechData(feats, speakers, key)


def _weights_digest(model: torch.nn.Module) -> str:
    digest = hashlib.sha1()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------- VQ-VAE


@dataclass
class TrainedVQVAE:
    """A trained model with its training history and speaker list."""

    model: VQVAE
    history: dict[str, Any]
    speakers: list[str]
    seed: int
    from_cache: bool


def _vqvae_step(model: VQVAE, batch: Any) -> dict[str, torch.Tensor]:
    feats, lengths, speakers = batch
    out = model(feats, lengths, speakers)
    valid = out.codes[torch.arange(out.codes.shape[1])[None, :] < out.code_lengths[:, None]]
    z = out.z.detach().float()
    return {
        "loss": out.loss,
        "reconstruction": out.reconstruction.detach(),
        "commitment": out.commitment.detach(),
        "smoothing": out.smoothing.detach(),
        # distinct codes in the batch, and the RMS of the encoder outputs (scale of z)
        "batch_codes": torch.tensor(float(valid.unique().numel())),
        "z_rms": z.pow(2).mean().sqrt(),
    }


def train_vqvae(
    config: Config,
    model_cfg: VQVAEConfig,
    seed: int,
    language: str = "english",
    progress: str = "none",
    callbacks: Sequence[Any] = (),
) -> TrainedVQVAE:
    """Train (or load from the run store) a VQ-VAE on a language's training speech.

    Adam (β = 0.9, 0.999, no weight decay) per ``config.train`` over :class:`SegmentDataset`
    segments; one ``seed`` sets the initial weights, the data order and the jitter draws. The
    input feature follows ``model_cfg.input_dim`` (39: MFCC, 80: log-Mel).

    The run checkpoints once per epoch, and at least every :data:`CHECKPOINT_STEPS` steps, into
    the store's staging folder of its configuration (:meth:`RunStore.staging`); called again
    after a kill, it continues from the last checkpoint and ends with the weights of an
    uninterrupted run. ``callbacks`` are further Trainer callbacks (progress hooks, tests).
    """
    data = load_data(config, language, feature_of(model_cfg.input_dim))
    speakers = sorted(set(data.speakers))
    train_cfg = config.train.loop(seed)
    key = {
        "model": to_dict(model_cfg),
        "train": to_dict(train_cfg),
        "segment_frames": config.train.segment_frames,
        "data": data.key,
        "version": RUNS_VERSION,
    }
    trained: dict[str, Any] = {}
    runs = store()

    def build(tmp: Path) -> dict[str, Any]:
        trained["model"], history = fit_vqvae(
            config.train, model_cfg, data.feats, data.speakers, seed, progress=progress,
            out_dir=runs.staging(runs.run("vqvae", key)), callbacks=callbacks,
        )  # fmt: skip
        save_model_weights(trained["model"], tmp / "model.safetensors")
        write_json(tmp / "history.json", history)
        return {"speakers": speakers}

    def load(run) -> TrainedVQVAE:
        if "model" in trained:
            net = trained["model"]
        else:
            seed_everything(seed)  # the global generators as after training, for what follows
            net = VQVAE(model_cfg, n_speakers=len(speakers))
            load_model_weights(net, run.file("model.safetensors"))
            net.eval()
        history = read_json(run.file("history.json"))
        return TrainedVQVAE(net, history, speakers, seed, "model" not in trained)

    return runs.cached("vqvae", key, build, load)


def _fit_one_thread(
    model: torch.nn.Module,
    step: Callable[..., dict[str, torch.Tensor]],
    dataset: Any,
    loop: TrainConfig,
    collate_fn: Callable[..., Any],
    out_dir: str | os.PathLike[str] | None,
    callbacks: Sequence[Any],
    progress: str,
) -> tuple[Trainer, TrainResult]:
    """Adam over ``dataset`` with the project's Trainer, on one thread (runs go side by side,
    one per core). With ``out_dir`` the run checkpoints there once per epoch, and at least
    every :data:`CHECKPOINT_STEPS` steps, and continues from the newest checkpoint found."""
    if out_dir is not None:
        per_epoch = -(-len(dataset) // loop.batch_size)
        loop = replace(loop, checkpoint_every=min(per_epoch, CHECKPOINT_STEPS))
    trainer = Trainer(
        model,
        step,
        dataset,
        loop,
        collate_fn=collate_fn,
        optimizer_factory=adam_factory,
        out_dir=out_dir,
        callbacks=callbacks,
        progress=progress,
    )
    with single_thread():
        result = trainer.fit(resume=out_dir is not None)
    return trainer, result


def fit_vqvae(
    train: TrainSection,
    model_cfg: VQVAEConfig,
    feats: Sequence[np.ndarray],
    speakers: Sequence[str],
    seed: int,
    progress: str = "none",
    out_dir: str | os.PathLike[str] | None = None,
    callbacks: Sequence[Any] = (),
) -> tuple[VQVAE, dict[str, Any]]:
    """Train a new VQ-VAE on utterances ``feats`` (each (T, F)) spoken by ``speakers``.

    Arrays in, model out: the chapter's :func:`train_vqvae` and ``audiorepro units train`` both
    train through it. The utterances are first normalised per ``model_cfg.feature_norm``
    (:func:`model_inputs`), then the model's own normalisation is their mean and standard
    deviation;
    the decoder learns one embedding per distinct speaker (sorted). Returns the model (CPU,
    eval mode) and its history (``step``, ``loss``, the loss terms, ``wall_time_s``).

    With ``out_dir`` the run checkpoints there once per epoch, and at least every
    :data:`CHECKPOINT_STEPS` steps, and continues from the newest checkpoint it finds there
    (a run killed midway ends with the weights of an uninterrupted one). ``callbacks`` are
    further Trainer callbacks (progress hooks, tests).
    """
    if not feats:
        raise ValueError("fit_vqvae: no training utterance")
    names = sorted(set(speakers))
    seed_everything(seed)
    model = VQVAE(model_cfg, n_speakers=len(names))
    feats = normalize_features(feats, model_cfg.feature_norm, speakers)
    stacked = np.concatenate(feats)
    model.set_normalization(*input_statistics(stacked, model_cfg.input_scale))
    index = {s: i for i, s in enumerate(names)}
    dataset = SegmentDataset(feats, [index[s] for s in speakers], train.segment_frames)
    if len(dataset) == 0:
        raise ValueError(
            "fit_vqvae: every utterance is shorter than the shortest training segment (8 frames)"
        )
    trainer, result = _fit_one_thread(
        model, _vqvae_step, dataset, train.loop(seed), collate_segments, out_dir,
        callbacks, progress,
    )  # fmt: skip
    history = {
        "step": result.steps,
        "loss": result.losses,
        **dict(result.step_metrics.items()),
        "wall_time_s": result.wall_time_s,
    }
    return trainer.unwrapped_model.cpu().eval(), history


def model_inputs(
    feats: Mapping[str, np.ndarray],
    feature_norm: str,
    speakers: Mapping[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """``{file: (T, F)}`` normalised per ``feature_norm`` (none | utterance | speaker,
    :func:`~audiorepro.data.speech_segments.normalize_features`); the speaker of a file is
    ``speakers[file]``, or its ZeroSpeech name prefix (``S025_0001`` → ``S025``)."""
    names = list(feats)
    spk = None
    if feature_norm == "speaker":
        spk = [speakers[n] if speakers is not None else speaker_of(n) for n in names]
    out = normalize_features([feats[n] for n in names], feature_norm, spk)
    return dict(zip(names, out, strict=True))


ATTENTION_BUDGET = 2**28
"""Attention scores (batch × heads × frames², float32: 1 GiB) that one batch of
:func:`encode_files` may hold: the Transformer encoder attends over whole files, so 64 files of
up to 73 s (the longest Asterisk prompt) would need 27 GB at once."""


def length_batches(
    lengths: Sequence[int], batch_size: int, heads: int, budget: int = ATTENTION_BUDGET
) -> list[list[int]]:
    """Indices of ``lengths`` (frames) in order of length, cut into batches of at most
    ``batch_size`` whose attention scores (``len(batch) × heads × longest²``) stay within
    ``budget``; a file over the budget alone is a batch of one."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches:
            last = batches[-1]
            if len(last) < batch_size and (len(last) + 1) * heads * lengths[i] ** 2 <= budget:
                last.append(i)
                continue
        batches.append([i])
    return batches


@torch.no_grad()
def encode_files(
    model: VQVAE,
    feats: Mapping[str, np.ndarray],
    batch_size: int = 64,
    speakers: Mapping[str, str] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Units of every file: ``({id: codes (T',) int64}, {id: codebook vectors (T', D_e)})``.

    The features are first normalised as the model was trained (``model.cfg.feature_norm``,
    :func:`model_inputs`; per speaker: over the files given here, by ``speakers`` or the name
    prefix). Files go in batches of similar length, at most ``batch_size`` and
    :data:`ATTENTION_BUDGET` (:func:`length_batches`)."""
    model.eval()
    feats = model_inputs(feats, model.cfg.feature_norm, speakers)
    names = list(feats)  # length_batches orders them by length
    codes, vectors = {}, {}
    heads = model.cfg.n_heads if model.cfg.encoder == "transformer" else 1
    batches = length_batches([len(feats[n]) for n in names], batch_size, heads, ATTENTION_BUDGET)
    with single_thread():
        for batch in batches:
            chunk = [names[i] for i in batch]
            x, lengths, _ = collate_segments([(feats[n], 0) for n in chunk])
            c, e, code_lengths = model.encode(x, lengths)
            for i, name in enumerate(chunk):
                n = int(code_lengths[i])
                codes[name] = c[i, :n].numpy().astype(np.int64)
                vectors[name] = e[i, :n].numpy().astype(np.float32)
    return codes, vectors


def code_runs(codes: Mapping[str, np.ndarray]) -> dict[str, float]:
    """How often the units change, over files ``{id: codes (T',)}``: ``runs`` (maximal runs of
    one repeated code, counted within each file), ``frames`` (code frames), ``mean_run``
    (frames per run), ``single_share`` (the share of runs one frame long) and ``empty_files``
    (files without a code frame, counted, not scored). Temporal
    smoothing and jitter are meant to lengthen the runs (paper §3.3-3.4)."""
    runs = frames = single = empty = 0
    for name, seq in codes.items():
        seq = np.asarray(seq)
        if seq.ndim != 1:
            raise ValueError(f"{name}: codes must be one sequence (T',), got shape {seq.shape}")
        if len(seq) == 0:
            empty += 1
            continue
        bounds = np.flatnonzero(seq[1:] != seq[:-1]) + 1  # where a new run starts
        lengths = np.diff(np.concatenate(([0], bounds, [len(seq)])))
        runs += len(lengths)
        frames += len(seq)
        single += int((lengths == 1).sum())
    if runs == 0:
        raise ValueError("no code frames: every sequence is empty")
    return {
        "runs": float(runs),
        "frames": float(frames),
        "mean_run": frames / runs,
        "single_share": single / runs,
        "empty_files": float(empty),
    }


def unit_runs(
    config: Config,
    rows: Sequence[AblationRow],
    language: str = "english",
    results: Mapping[tuple[str, int], RowResult] | None = None,
) -> pd.DataFrame:
    """:func:`code_runs` of the test units of each row's model for every seed of
    ``config.main_seeds`` (trained if missing, else read from the run store), as mean ± std
    over seeds: ``run_ms`` (the mean run of one code in milliseconds), ``single_share`` (runs
    one code frame long), with ``seeds``. Indexed by row key. ``results`` (of
    :func:`run_rows` on ``language``) gives the statistics its runs computed when they scored
    the same units; the (row, seed) pairs it lacks are encoded here."""
    lang_dir = language_dir(config, language)
    out = []
    for row in rows:
        per_seed = []
        for seed in config.main_seeds:
            done = (results or {}).get((row.key, seed))
            if done is not None and done.code_stats:
                stats = dict(done.code_stats)
            else:
                test = load_features(lang_dir, "test", feature_of(row.model.input_dim))
                trained = train_vqvae(config, row.model, seed, language=language)
                codes, _ = encode_files(trained.model, test)
                stats = code_runs(codes)
            if stats["empty_files"]:
                print(
                    f"{row.key}, seed {seed}: {int(stats['empty_files'])} test files have no "
                    "code frame and are not counted"
                )
            ms = stats["mean_run"] * row.model.stride * HOP_S * 1000
            per_seed.append((ms, stats["single_share"]))
        (ms, ms_std), (single, single_std) = (
            reporting.mean_std([v[i] for v in per_seed]) for i in (0, 1)
        )
        out.append({
            "row": row.key, "label": row.label, "seeds": len(per_seed),
            "run_ms": round(ms, 1), "run_ms_std": round(ms_std, 1),
            "single_share": round(single, 3), "single_share_std": round(single_std, 3),
        })  # fmt: skip
    return pd.DataFrame(out).set_index("row")


#: The loss terms and health signs :func:`convergence` reads from a run's history.
CONVERGENCE_TERMS = ("reconstruction", "commitment", "batch_codes")


def convergence(
    config: Config, rows: Sequence[AblationRow], language: str = "english", tenths: int = 10
) -> pd.DataFrame:
    """Whether each row's runs have flattened out by their last step: for every term of
    :data:`CONVERGENCE_TERMS`, its mean over the last ``1/tenths`` of the steps (``<term>``)
    and its change from the tenth before in percent (``<term>_change``; a run shorter than
    ``tenths`` steps compares its last step with the one before), mean over the seeds of
    ``config.main_seeds`` (the runs trained if missing, else read from the run store), with
    ``steps``. A row whose reconstruction still falls by several percent per tenth of its
    steps is still learning. Indexed by row key."""
    out = []
    for row in rows:
        per_seed: dict[str, list[float]] = {}
        steps = 0
        for seed in config.main_seeds:
            history = train_vqvae(config, row.model, seed, language=language).history
            steps = int(history["step"][-1])
            for term in CONVERGENCE_TERMS:
                values = np.asarray(history[term], dtype=float)
                width = max(1, len(values) // tenths)  # a short run: its last steps
                last = values[-width:].mean()
                before = values[-2 * width : -width].mean() if len(values) > width else np.nan
                per_seed.setdefault(term, []).append(last)
                per_seed.setdefault(f"{term}_change", []).append(100 * (last / before - 1))
        out.append(
            {"row": row.key, "label": row.label, "steps": steps}
            | {
                k: round(float(np.mean(v)), 3 if "change" not in k else 1)
                for k, v in per_seed.items()
            }
        )
    return pd.DataFrame(out).set_index("row")


def convergence_curves(
    config: Config, rows: Sequence[AblationRow], seed: int, smooth: int = 50
) -> dict[str, dict[str, np.ndarray]]:
    """``{term: {row key: curve}}`` of every term of :data:`CONVERGENCE_TERMS`: each row's run of
    ``seed`` (trained if missing), step by step, each step the mean of the last ``smooth``
    steps up to it (fewer at the start), for :func:`audiorepro.plotting.loss_curves`."""
    curves: dict[str, dict[str, np.ndarray]] = {t: {} for t in CONVERGENCE_TERMS}
    for row in rows:
        history = train_vqvae(config, row.model, seed).history
        for term in CONVERGENCE_TERMS:
            total = np.cumsum(np.asarray(history[term], dtype=float))
            window = np.minimum(np.arange(1, len(total) + 1), smooth)
            earlier = np.concatenate([np.zeros(smooth), total])[: len(total)]
            curves[term][row.key] = (total - earlier) / window
    return curves


def code_segments(codes: np.ndarray, frame_shift: float) -> list[tuple[str, float, float]]:
    """Runs of one code as ``(code, start_s, end_s)`` intervals (for a spectrogram tier)."""
    segments, start = [], 0
    for t in range(1, len(codes) + 1):
        if t == len(codes) or codes[t] != codes[start]:
            segments.append((str(codes[start]), start * frame_shift, t * frame_shift))
            start = t
    return segments


def evaluate(
    model: VQVAE,
    lang_dir: Path,
    test_feats: Mapping[str, np.ndarray],
    item_file: str = "abx/byCtxt_acSpkr.item",
    within: bool = False,
    code_stats: dict[str, float] | None = None,
) -> dict[str, float]:
    """ABX across (%) on the codebook vectors and bitrate (b/s) of a model's test units.

    ABX: the whole-file items of ``item_file``, frames selected with libri-light's rule at the
    code frame shift (``stride`` × 10 ms). Bitrate: the files of ``bitrate_filelist.txt`` and
    their wav durations. Also the codebook usage over the test set (codes used, perplexity).
    A ``code_stats`` dict receives :func:`code_runs` of the same units.
    """
    codes, vectors = encode_files(model, test_feats)
    if code_stats is not None:
        code_stats.update(code_runs(codes))
    shift = model.cfg.stride * HOP_S
    return score_units(codes, vectors, lang_dir, shift, item_file, within)


def score_units(
    codes: Mapping[str, np.ndarray],
    vectors: Mapping[str, np.ndarray],
    lang_dir: Path,
    frame_shift: float,
    item_file: str = "abx/byCtxt_acSpkr.item",
    within: bool = False,
) -> dict[str, float]:
    """ABX across (%) of the unit ``vectors`` ``{file: (T', D)}`` (angular, frames
    ``frame_shift`` s apart), bitrate (b/s) of the ``codes`` ``{file: (T',)}`` over the files of
    ``bitrate_filelist.txt``, and the codes used and perplexity over all files: the metrics of
    :func:`evaluate`, for any units (the VQ-VAE's, k-means')."""
    modes = ["across", "within"] if within else ["across"]
    # one parse of the item file, each DTW distance once for both modes
    scored = abx_modes(vectors, Path(lang_dir) / item_file, "angular", modes, frame_shift)
    result = scored["across"]
    entries = read_bitrate_filelist(Path(lang_dir) / "bitrate_filelist.txt")
    names = [n[: -len(".txt")] for n, _ in entries]
    rate = bitrate([codes[n] for n in names], sum(d for _, d in entries))
    pooled = np.concatenate(list(codes.values()))
    p = np.bincount(pooled) / len(pooled)
    p = p[p > 0]
    metrics = {
        "abx_across": result.error,
        "bitrate": rate,
        "codes_used": float(len(p)),
        "perplexity": float(2 ** -(p * np.log2(p)).sum()),
        "n_triplets": float(result.n_triplets),
    }
    if within:
        metrics["abx_within"] = scored["within"].error
    return metrics


def kmeans_units(
    train_feats: Sequence[np.ndarray],
    test_feats: Mapping[str, np.ndarray],
    k: int,
    stride: int,
    seed: int,
    iterations: int = 30,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], KMeans]:
    """The k-means baseline of a VQ-VAE with ``K = k`` at ``stride``: the frames of every
    utterance averaged to the code rate (:func:`~audiorepro.data.speech_segments.
    average_frames`), ``k`` centroids fitted on the training ones (seeded,
    :func:`~audiorepro.models.kmeans.kmeans`), each test frame replaced by its nearest.

    ``train_feats`` [(T, F)], ``test_feats`` {file: (T, F)}, already normalised as the VQ-VAE's
    input. Returns ``({file: codes (T',)}, {file: centroids (T', F)}, the fitted KMeans)``.
    """
    fitted = fit_code_rate_kmeans(train_feats, k, stride, seed, iterations)
    codes, vectors = {}, {}
    for name, x in test_feats.items():
        codes[name], vectors[name] = code_rate_kmeans(fitted, x, stride)
    return codes, vectors, fitted


def fit_code_rate_kmeans(
    train_feats: Sequence[np.ndarray], k: int, stride: int, seed: int, iterations: int = 30
) -> KMeans:
    """``k`` centroids (seeded) of the utterances ``train_feats`` [(T, F)] averaged to the code
    rate of a VQ-VAE that downsamples by ``stride``: the k-means baseline's fit."""
    pooled = np.concatenate([average_frames(x, stride) for x in train_feats])
    return kmeans(pooled, k, seed=seed, iterations=iterations)


def code_rate_kmeans(
    fitted: KMeans, feats: np.ndarray, stride: int
) -> tuple[np.ndarray, np.ndarray]:
    """One utterance (T, F) as k-means units: its frames averaged to the code rate, each
    replaced by its nearest centroid. Returns ``(codes (T',), centroids (T', F))``."""
    codes = fitted.assign(average_frames(feats, stride))
    return codes, fitted.centroids[codes]


def kmeans_baseline(
    config: Config, model_cfg: VQVAEConfig, seed: int, language: str = "english"
) -> dict[str, float]:
    """:func:`score_units` of the k-means units with the VQ-VAE ``model_cfg``'s K, stride, input
    feature and normalisation, fitted on the training speech of ``language`` (seeded): the
    baseline each VQ-VAE row is set beside."""
    key = (
        config,
        model_cfg.input_dim,
        model_cfg.feature_norm,
        model_cfg.codebook_size,
        model_cfg.stride,
        seed,
        language,
    )
    if key not in _KMEANS_SCORES:  # rows sharing K, input and stride share one baseline
        _KMEANS_SCORES[key] = _kmeans_baseline(config, model_cfg, seed, language)
    return dict(_KMEANS_SCORES[key])


_KMEANS_SCORES: dict[tuple[Any, ...], dict[str, float]] = {}


def _kmeans_baseline(
    config: Config, model_cfg: VQVAEConfig, seed: int, language: str
) -> dict[str, float]:
    feature = feature_of(model_cfg.input_dim)
    data = load_data(config, language, feature)
    lang_dir = language_dir(config, language)
    train = normalize_features(data.feats, model_cfg.feature_norm, data.speakers)
    test = model_inputs(load_features(lang_dir, "test", feature), model_cfg.feature_norm)
    with single_thread():
        codes, vectors, _ = kmeans_units(
            train, test, model_cfg.codebook_size, model_cfg.stride, seed
        )
    return score_units(codes, vectors, lang_dir, model_cfg.stride * HOP_S)


def frames_abx(
    config: Config,
    feature: str = "mfcc",
    feature_norm: str = "none",
    language: str = "english",
    input_scale: str | None = None,
) -> float:
    """ABX across (%) of the test set's input frames themselves (10 ms, angular), normalised
    per ``feature_norm``: the scale for the units made from them. With ``input_scale``
    (``global`` | ``dimension``) the frames are standardised as a VQ-VAE with that
    ``model.input_scale`` standardises its input (training mean and scale,
    :func:`~audiorepro.models.vqvae.input_statistics`): the geometry its reconstruction loss
    weighs."""
    lang_dir = language_dir(config, language)
    test = model_inputs(load_features(lang_dir, "test", feature), feature_norm)
    if input_scale is not None:
        train = _training_frames(config, feature, feature_norm, language)
        test = _standardised(test, train, input_scale)
    return _frames_error(test, lang_dir)


def _training_frames(config: Config, feature: str, feature_norm: str, language: str) -> np.ndarray:
    """Every training frame of ``language``, normalised per ``feature_norm``: (N, F)."""
    data = load_data(config, language, feature)
    return np.concatenate(normalize_features(data.feats, feature_norm, data.speakers))


def _standardised(
    test: Mapping[str, np.ndarray], train: np.ndarray, input_scale: str
) -> dict[str, np.ndarray]:
    mean, std = (t.numpy() for t in input_statistics(train, input_scale))
    return {name: (x - mean) / std for name, x in test.items()}


def _frames_error(test: Mapping[str, np.ndarray], lang_dir: Path) -> float:
    item = lang_dir / "abx/byCtxt_acSpkr.item"
    return abx(dict(test), item, "angular", "across", frame_shift=HOP_S).error


def input_geometry(config: Config, language: str = "english") -> pd.DataFrame:
    """ABX across (%) of each feature's test frames as given (``raw``) and as a VQ-VAE's
    input standardisation leaves them (``global``: centred, one scale; ``dimension``: each
    dimension to unit variance; :func:`frames_abx`), with ``config.model.feature_norm``: what
    the reconstruction loss of each ``model.input_scale`` asks the units to keep. Each
    feature's test and training frames are read once for the three columns."""
    norm = config.model.feature_norm
    lang_dir = language_dir(config, language)
    rows = []
    for feature in FEATURES:
        test = model_inputs(load_features(lang_dir, "test", feature), norm)
        train = _training_frames(config, feature, norm, language)
        row = {"feature": feature, "raw": _frames_error(test, lang_dir)}
        for scale in INPUT_SCALES:
            row[scale] = _frames_error(_standardised(test, train, scale), lang_dir)
        rows.append(row)
    return pd.DataFrame(rows).set_index("feature").round(2)


# ---------------------------------------------------------------------------------- inverter


@dataclass
class TrainedInverter:
    """A trained codebook inverter for one target voice."""

    model: CodebookInverter
    history: dict[str, Any]
    voice: str
    from_cache: bool


def _inverter_step(model: CodebookInverter, batch: Any) -> torch.Tensor:
    vectors, code_lengths, mags, lengths = batch
    return inverter_loss(model(vectors, code_lengths), mags, lengths, model.mag_scale)


def train_inverter(
    config: Config,
    vqvae: TrainedVQVAE,
    seed: int,
    language: str = "english",
    progress: str = "none",
    holdout: Sequence[str] = (),
    callbacks: Sequence[Any] = (),
) -> TrainedInverter:
    """Train (or load from the run store) the inverter on the target voice's training files.

    The frozen VQ-VAE encodes each voice file; the inverter learns to map its codebook vectors
    to the file's linear magnitude spectrogram (same 10 ms frames as the VQ-VAE input).
    Files named in ``holdout`` are left out (to measure the inverter on unseen speech). Like
    :func:`train_vqvae`, the run checkpoints into its staging folder and, called again after
    a kill, continues from the last checkpoint; ``callbacks`` are further Trainer callbacks.
    """
    lang_dir = language_dir(config, language)
    feature = feature_of(vqvae.model.cfg.input_dim)
    inputs = load_features(lang_dir, "train/voice", feature)
    mags = load_features(lang_dir, "train/voice", "linear")
    names = sorted(
        n for n in inputs if speaker_of(n) == config.target_voice and n not in set(holdout)
    )
    if not names:
        raise ValueError(f"no training file of voice {config.target_voice} in {lang_dir}")
    seg = config.inverter_train.segment_frames
    items = inverter_pairs(vqvae.model, {n: inputs[n] for n in names}, mags, seg)
    inv_cfg = inverter_config(config.inverter, vqvae.model, mags)
    train_cfg = config.inverter_train.loop(seed)
    key = {
        "inverter": to_dict(inv_cfg),
        "train": to_dict(train_cfg),
        "segment_codes": seg,
        "vqvae": _weights_digest(vqvae.model),
        "voice": config.target_voice,
        "files": names,
        "data": [
            features_key(lang_dir / "train/voice", feature),
            features_key(lang_dir / "train/voice", "linear"),
        ],
        "version": RUNS_VERSION,
        "inverter_version": INVERTER_VERSION,
    }
    seed_everything(seed)
    model = CodebookInverter(inv_cfg)
    trained: dict[str, Any] = {}
    runs = store()

    def build(tmp: Path) -> None:
        staging = runs.staging(runs.run("inverter", key))
        trained["model"], history = _train_inverter(
            model, items, train_cfg, staging, callbacks, progress
        )
        save_model_weights(trained["model"], tmp / "model.safetensors")
        write_json(tmp / "history.json", history)

    def load(run) -> TrainedInverter:
        if "model" in trained:
            net = trained["model"]
        else:
            load_model_weights(model, run.file("model.safetensors"))
            net = model.eval()
        history = read_json(run.file("history.json"))
        return TrainedInverter(net, history, config.target_voice, "model" not in trained)

    return runs.cached("inverter", key, build, load)


def inverter_pairs(
    vqvae: VQVAE, inputs: Mapping[str, np.ndarray], mags: Mapping[str, np.ndarray], segment: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The inverter's training pairs: each file's codebook vectors (``vqvae``, frozen) cut into
    pieces of ``segment`` code frames, each beside the linear magnitudes of the same stretch
    (``stride`` frames per code); a last piece shorter than one code's frames is dropped."""
    _, vectors = encode_files(vqvae, dict(inputs))
    r = vqvae.cfg.stride
    items = []
    for n in inputs:
        for start in range(0, len(vectors[n]), segment):
            v = vectors[n][start : start + segment]
            m = mags[n][start * r : (start + len(v)) * r]
            if len(m) >= r:
                items.append((v, m))
    return items


def inverter_config(
    base: InverterConfig, vqvae: VQVAE, mags: Mapping[str, np.ndarray]
) -> InverterConfig:
    """``base`` sized for the units of ``vqvae`` and the magnitudes ``mags`` it learns."""
    return replace(
        base,
        code_dim=vqvae.cfg.code_dim,
        n_bins=next(iter(mags.values())).shape[1],
        repeat=vqvae.cfg.stride,
    )


def _train_inverter(
    model: CodebookInverter,
    items: Sequence[tuple[np.ndarray, np.ndarray]],
    train_cfg: TrainConfig,
    staging: Path | None,
    callbacks: Sequence[Any] = (),
    progress: str = "none",
) -> tuple[CodebookInverter, dict[str, Any]]:
    """Train ``model`` on ``items`` (its magnitude scale first set to their mean); with
    ``staging``, checkpoint there and continue from the newest checkpoint found."""
    model.mag_scale.fill_(float(np.concatenate([m for _, m in items]).mean()))
    trainer, result = _fit_one_thread(
        model, _inverter_step, PairDataset(items), train_cfg, collate_pairs, staging,
        callbacks, progress,
    )  # fmt: skip
    history = {"step": result.steps, "loss": result.losses, "wall_time_s": result.wall_time_s}
    return trainer.unwrapped_model.cpu().eval(), history


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
    if vqvae.cfg.feature_norm == "speaker":
        raise ValueError(
            "resynthesize: the VQ-VAE normalises per speaker (model.feature_norm=speaker); "
            "encode the speaker's files with encode_files, which pools their statistics"
        )
    (feats,) = normalize_features([feats], vqvae.cfg.feature_norm)
    x = torch.from_numpy(np.asarray(feats, dtype=np.float32))[None]
    codes, e, code_lengths = vqvae.encode(x, torch.tensor([len(feats)]))
    mag = inverter(e, code_lengths)[0, : len(feats)].numpy()  # (S, n_bins)
    wav = griffin_lim(mag, n_iter=griffin_lim_iters, sr=SAMPLE_RATE, length=n_samples, seed=seed)
    return wav, mag, codes[0, : int(code_lengths[0])].numpy()


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


# ---------------------------------------------------------------------------------- export


def _one_hot_lines(codes: np.ndarray, k: int) -> str:
    return _int_lines(np.eye(k, dtype=np.int64)[codes])


def _int_lines(rows: np.ndarray) -> str:
    return "".join(" ".join(map(str, row)) + "\n" for row in rows.tolist())


def _vector_lines(vectors: np.ndarray) -> str:
    # the shortest repr of each float32 value widened to float64: read back as float64 (as the
    # official loader does) it is exactly the vector the model produced
    rows = np.float32(vectors).astype(np.float64)
    return "".join(" ".join(repr(v) for v in row.tolist()) + "\n" for row in rows)


def submission_dir() -> Path:
    """Where the pages write the chapter's ZeroSpeech 2019 submission."""
    return results_dir() / CHAPTER / "submission"


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
        "lib/audiorepro/models/inverter.py, lib/audiorepro/experiments/zerospeech.py.\n"
    )
    return out


def score_submission(
    test_dir: Path, lang_dir: Path, frame_shift: float = 0.04
) -> dict[str, float]:
    """ABX across (%) and bitrate (b/s) of a submission's ``2019/<language>/test`` folder,
    read from its files as the challenge's scorer would."""
    return {
        "abx_across": abx_error(
            test_dir, Path(lang_dir) / "abx/byCtxt_acSpkr.item", frame_shift=frame_shift
        ),
        "bitrate": bitrate_from_submission(test_dir, Path(lang_dir) / "bitrate_filelist.txt"),
    }


def relative_time_abx(test_dir: Path, lang_dir: Path) -> float:
    """ABX across (%) of a submission folder with the 2019 scorer's frame rule: the item file
    rewritten in relative time (every whole-file item from 0 to 1)."""
    relative = relative_time_item_file(
        Path(lang_dir) / "abx/byCtxt_acSpkr.item", results_dir() / CHAPTER / "relative_time.item"
    )
    return abx_error(test_dir, relative)


# ---------------------------------------------------------------------------------- any speech

RUN_FILE = "run.json"
TIMES = ("auto", "relative", "seconds")


@dataclass
class UnitsRun:
    """A VQ-VAE trained on a folder of recordings (``audiorepro units train``) and its folder."""

    model: VQVAE
    config: Config
    speakers: list[str]
    feature: str
    history: dict[str, Any]
    path: Path
    kmeans: dict[str, Any] | None = None
    """What ``run.json`` records of the k-means baseline (``None``: a run from before it)."""
    preset: str = "embedded"
    """The preset the run was trained from (its other sections: the inverter's defaults)."""
    speaker_of: str = "prefix"
    """How the run told the speakers of its files (``--speaker-of``): the rule that
    :func:`encode_units` applies to a folder when the model normalises per speaker."""

    @property
    def frame_shift(self) -> float:
        """Seconds between two code frames (stride × 10 ms)."""
        return self.model.cfg.stride * HOP_S

    def kmeans_baseline(self) -> KMeans:
        """The k-means baseline :func:`train_units` fitted: an error saying why a run has none."""
        info = self.kmeans
        if info is None:
            raise FileNotFoundError(
                f"{self.path}: the run has no k-means baseline (trained before `units train` "
                "fitted one); train it again"
            )
        if "skipped" in info:
            raise ValueError(f"{self.path}: no k-means baseline: {info['skipped']}")
        path = self.path / info["file"]
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the run's k-means baseline is missing")
        with np.load(path, allow_pickle=False) as archive:
            return KMeans(archive["centroids"], info["inertia"], info.get("iterations", 0))


UNITS_FIELDS = ("model", "train", "seed")
"""The configuration fields that shape a :func:`train_units` run; ``--set`` of any other (the
chapter's sweeps and seed lists, the corpus) is refused, never ignored."""


def train_units(
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    speaker_of: str = "prefix",
    preset: str = "embedded",
    overrides: Mapping[str, Any] | None = None,
    progress: str = "none",
) -> UnitsRun:
    """Train the chapter's VQ-VAE on every wav under ``audio`` (any sample rate) into ``out``.

    ``speaker_of``: ``prefix``, ``parent`` or a ``MAP.tsv`` (:func:`audiorepro.data.recordings.
    speakers_of`); ``preset`` and ``overrides`` (``{"train.max_steps": 200}``) as
    :func:`load_config`; an override of a field outside :data:`UNITS_FIELDS` is a
    ``ConfigError``. Writes ``out/model.safetensors``, ``out/run.json`` (configuration,
    speakers, feature, history, the k-means baseline) and ``out/kmeans.npz``.
    """
    config = load_config(preset, overrides)  # unknown keys first: "did you mean ..."
    refuse_unused(overrides, UNITS_FIELDS, "units train", "--audio")
    wavs = find_wavs(audio)
    speakers = speakers_of(wavs, speaker_of, audio)
    rule = speaker_rule(speaker_of)
    feature = feature_of(config.model.input_dim)
    feats = load_wav_features(wavs, feature, store())
    names = sorted(feats)
    model, history = fit_vqvae(
        config.train,
        config.model,
        [feats[n] for n in names],
        [speakers[n] for n in names],
        config.seed,
        progress=progress,
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_model_weights(model, out / "model.safetensors")
    baseline = _fit_units_baseline(
        out, [feats[n] for n in names], [speakers[n] for n in names], config
    )
    spk = sorted(set(speakers.values()))
    write_json(
        out / RUN_FILE,
        {
            "kind": "units",
            "preset": preset,
            "config": to_dict(config),
            "speakers": spk,
            "feature": feature,
            "audio": str(Path(audio).resolve()),
            "speaker_of": rule,
            "files": len(names),
            "history": history,
            "kmeans": baseline,
        },
    )
    return UnitsRun(model, config, spk, feature, history, out, baseline, preset, rule)


KMEANS_FILE = "kmeans.npz"
UNIT_OUTPUTS = ("vectors", "codes", "frames", "kmeans")
"""What :func:`encode_units` writes: the units (codebook vectors or one-hot codes) or one of
their two baselines, the input frames themselves (10 ms) and the k-means units of the run."""


def _fit_units_baseline(
    out: Path, feats: Sequence[np.ndarray], speakers: Sequence[str], config: Config
) -> dict[str, Any]:
    """Fit the run's k-means baseline (:func:`kmeans_units`' recipe: the training frames,
    normalised as the model's input, averaged to the code rate, K = the codebook size, the
    run's seed) and write its centroids to ``out/kmeans.npz`` atomically. Returns what
    ``run.json`` records of it; too few code frames for K centroids is recorded, not raised."""
    cfg = config.model
    inputs = normalize_features(feats, cfg.feature_norm, speakers)
    code_frames = sum(-(-len(x) // cfg.stride) for x in inputs)
    info: dict[str, Any] = {"k": cfg.codebook_size, "code_frames": code_frames}
    if code_frames < cfg.codebook_size:
        return info | {
            "skipped": f"the audio gives {code_frames} code frames, fewer than K = "
            f"{cfg.codebook_size} centroids"
        }
    with single_thread():
        fitted = fit_code_rate_kmeans(inputs, cfg.codebook_size, cfg.stride, config.seed)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.savez(handle, centroids=fitted.centroids)

    atomic_write(out / KMEANS_FILE, write)
    return info | {
        "file": KMEANS_FILE,
        "seed": config.seed,
        "inertia": fitted.inertia,
        "iterations": fitted.iterations,
    }


def load_units(run: str | os.PathLike[str]) -> UnitsRun:
    """The :class:`UnitsRun` that :func:`train_units` wrote to the folder ``run``."""
    run = Path(run)
    info_path = run / RUN_FILE
    info = read_run_info(run, RUN_FILE, "units", "a units run", "units train")
    config = from_dict(Config, info["config"], source=str(info_path))
    model = VQVAE(config.model, n_speakers=len(info["speakers"]))
    load_model_weights(model, run / "model.safetensors")
    return UnitsRun(
        model.eval(),
        config,
        list(info["speakers"]),
        info["feature"],
        info["history"],
        run,
        info.get("kmeans"),
        info.get("preset", "embedded"),
        info.get("speaker_of", "prefix"),
    )


def encode_units(
    run: UnitsRun | str | os.PathLike[str],
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
    what: str = "vectors",
    speaker_of: str | None = None,
) -> dict[str, np.ndarray]:
    """Write one ZeroSpeech 2019 ``<out>/<file id>.txt`` per audio file under ``audio``.

    ``what`` (:data:`UNIT_OUTPUTS`): the units, one line per code frame (``run.frame_shift``
    apart), as codebook vectors (``"vectors"``) or code one-hots (``"codes"``; never one
    integer per line, which the 2019 loader drops); or a baseline to score beside them: the
    input frames as the model reads them (``"frames"``: the run's MFCC or log-Mel, normalised
    per its ``feature_norm``, one line every 10 ms) or the k-means units that ``units train``
    fitted on the same frames averaged to the code rate (``"kmeans"``: the nearest centroid,
    one line per code frame). Whole-file items (relative times) score every kind as it is;
    items in seconds need each kind's frame shift (:func:`output_frame_shift`).

    File ids are those of :func:`audiorepro.data.recordings.find_wavs`: the file names, or,
    when names repeat across subfolders, the paths under ``audio`` (``spk1/001.txt``: the
    subfolders are mirrored under ``out``; write the items with ``abx_items(..., audio=)``).

    A model that normalises per speaker (``model.feature_norm: speaker``) pools each speaker's
    files of ``audio``, told apart by ``speaker_of`` (``prefix``, ``parent`` or a ``MAP.tsv``,
    as :func:`train_units`), by default the rule the run was trained with.

    Returns ``{file id: the rows written (T', D)}``.
    """
    if what not in UNIT_OUTPUTS:
        raise ValueError(f"what must be one of {', '.join(UNIT_OUTPUTS)}, got {what!r}")
    run = run if isinstance(run, UnitsRun) else load_units(run)
    baseline = run.kmeans_baseline() if what == "kmeans" else None
    wavs = find_wavs(audio)
    feats = load_wav_features(wavs, run.feature, store())
    cfg = run.model.cfg
    speakers = None
    if cfg.feature_norm == "speaker":
        speakers = speakers_of(wavs, speaker_of or run.speaker_of, audio)
    rows: dict[str, np.ndarray] = {}
    if what in ("vectors", "codes"):
        codes, vectors = encode_files(run.model, feats, speakers=speakers)
        for name in codes:
            hot = np.eye(cfg.codebook_size, dtype=np.int64)[codes[name]]
            rows[name] = vectors[name] if what == "vectors" else hot
    else:  # the baselines read the frames as the model does
        inputs = model_inputs(feats, cfg.feature_norm, speakers)
        for name, x in inputs.items():
            rows[name] = x if baseline is None else code_rate_kmeans(baseline, x, cfg.stride)[1]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in sorted(rows):
        text = _int_lines(rows[name]) if what == "codes" else _vector_lines(rows[name])
        target = out / f"{name}.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return rows


VOICE_FILE = "voice.json"
VOICE_FIELDS = ("inverter", "inverter_train", "seed", "griffin_lim_iters")
"""The configuration fields that shape a :func:`train_voice` run; ``--set`` of others is
refused."""


@dataclass
class VoiceRun:
    """A codebook inverter trained for a units run on one voice (``audiorepro units voice``)."""

    units: UnitsRun
    inverter: CodebookInverter
    griffin_lim_iters: int
    history: dict[str, Any]
    path: Path
    pieces: int | None = None
    """Training pairs of ``segment_frames`` code frames the files gave (:func:`inverter_pairs`)."""


def train_voice(
    run: UnitsRun | str | os.PathLike[str],
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    overrides: Mapping[str, Any] | None = None,
    progress: str = "none",
) -> VoiceRun:
    """Train the chapter's codebook inverter (page ``04_inverter``) for the units of ``run`` on
    every audio file under ``audio``, the recordings of the voice that :func:`resynthesize_folder`
    will then speak with: the frozen VQ-VAE encodes each file, and the inverter learns to map
    its codebook vectors to the file's linear magnitudes (10 ms frames).

    ``overrides`` (``{"inverter_train.max_steps": 600}``) change the fields of
    :data:`VOICE_FIELDS` of the units run's preset; others are a ``ConfigError``. Writes
    ``out/inverter.safetensors`` and ``out/voice.json`` (the units run's folder, the
    inverter's configuration, the files, the history)."""
    units = run if isinstance(run, UnitsRun) else load_units(run)
    config = load_config(units.preset, overrides)
    refuse_unused(overrides, VOICE_FIELDS, "units voice", "--audio")
    vqvae = units.model
    if vqvae.cfg.feature_norm == "speaker":
        raise ValueError(
            f"{units.path}: the units normalise per speaker (model.feature_norm=speaker); "
            "resynthesis reads one file at a time: train the units with another feature_norm"
        )
    wavs = find_wavs(audio)
    inputs = load_wav_features(wavs, units.feature, store())
    mags = load_wav_features(wavs, "linear", store())
    items = inverter_pairs(vqvae, inputs, mags, config.inverter_train.segment_frames)
    if not items:
        raise ValueError(f"{audio}: every file is shorter than one code frame")
    inv_cfg = inverter_config(config.inverter, vqvae, mags)
    seed_everything(config.seed)
    inverter, history = _train_inverter(
        CodebookInverter(inv_cfg), items, config.inverter_train.loop(config.seed), None,
        progress=progress,
    )  # fmt: skip
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_model_weights(inverter, out / "inverter.safetensors")
    write_json(
        out / VOICE_FILE,
        {
            "kind": "voice",
            "units": str(units.path.resolve()),
            "inverter": to_dict(inv_cfg),
            "inverter_train": to_dict(config.inverter_train),
            "seed": config.seed,
            "griffin_lim_iters": config.griffin_lim_iters,
            "audio": str(Path(audio).resolve()),
            "files": len(wavs),
            "pieces": len(items),
            "history": history,
        },
    )
    return VoiceRun(units, inverter, config.griffin_lim_iters, history, out, len(items))


def load_voice(path: str | os.PathLike[str]) -> VoiceRun:
    """The :class:`VoiceRun` that :func:`train_voice` wrote to the folder ``path``, with the
    units run it names."""
    path = Path(path)
    info_path = path / VOICE_FILE
    info = read_run_info(path, VOICE_FILE, "voice", "a voice run", "units voice")
    units = load_units(info["units"])
    inverter = CodebookInverter(from_dict(InverterConfig, info["inverter"], source=str(info_path)))
    load_model_weights(inverter, path / "inverter.safetensors")
    return VoiceRun(
        units,
        inverter.eval(),
        info["griffin_lim_iters"],
        info["history"],
        path,
        info.get("pieces"),
    )


def resynthesize_folder(
    voice: VoiceRun | str | os.PathLike[str],
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
) -> dict[str, float]:
    """Speak every audio file under ``audio`` again through its units, in ``voice``'s voice:
    units (:func:`resynthesize`) → the inverter's magnitudes → Griffin-Lim, one 16 kHz
    ``<out>/<file id>.wav`` each, as long as its source (to the 10 ms frame). Returns ``{file id: spectral
    convergence of the inverter's magnitudes to the file's own}`` (0 is exact; voice
    conversion into another speaker is far from 0 by design)."""
    voice = voice if isinstance(voice, VoiceRun) else load_voice(voice)
    wavs = find_wavs(audio)
    inputs = load_wav_features(wavs, voice.units.feature, store())
    mags = load_wav_features(wavs, "linear", store())
    out = Path(out)
    convergence = {}
    for name in sorted(wavs):
        wav, mag, _ = resynthesize(
            voice.units.model, voice.inverter, inputs[name], None, voice.griffin_lim_iters
        )
        save_audio(out / f"{name}.wav", wav, SAMPLE_RATE)
        convergence[name] = spectral_convergence(mags[name], mag[: len(mags[name])])
    return convergence


def submission_bitrate(
    submission: str | os.PathLike[str],
    *,
    audio: str | os.PathLike[str] | None = None,
    filelist: str | os.PathLike[str] | None = None,
) -> float:
    """Bitrate (bits/s) of a units folder as ZeroSpeech 2019 scores it, ``N · H / D``: the
    durations D from the audio files themselves (``audio``, the folder ``units encode`` read:
    one ``<file id>.txt`` per file) or from an official bitrate file list (``filelist``:
    ``<name>.txt <seconds>`` lines). Give exactly one. With a file list, files without a
    ``.txt`` in ``submission`` count for neither N nor D, as in the official evaluation; with
    ``audio``, every file must have its ``.txt`` (a missing one is an error naming it and the
    count: the folder was encoded from other audio)."""
    if (audio is None) == (filelist is None):
        raise ValueError("give the durations: audio=DIR or filelist=FILE (exactly one)")
    if filelist is not None:
        return bitrate_from_submission(submission, filelist)
    entries = []
    for name, path in find_wavs(audio).items():
        num_samples, sr, _ = audio_info(path)
        entries.append((f"{name}.txt", num_samples / sr))
    missing = [name for name, _ in entries if not (Path(submission) / name).is_file()]
    if missing and Path(submission).is_dir():
        raise FileNotFoundError(
            f"{submission}: no {missing[0]} (and {len(missing) - 1} more of the "
            f"{len(entries)} audio files of {audio}): encode this folder with `units encode`"
        )
    return bitrate_of_files(submission, entries, f"of {audio} (as <file id>.txt)")


def output_frame_shift(run: UnitsRun, what: str) -> float:
    """Seconds between two lines of ``encode_units(run, ..., what=what)``: 10 ms for the input
    frames, the code rate (``run.frame_shift``) for the units and their k-means baseline."""
    if what not in UNIT_OUTPUTS:
        raise ValueError(f"what must be one of {', '.join(UNIT_OUTPUTS)}, got {what!r}")
    return HOP_S if what == "frames" else run.frame_shift


def abx_items(
    segments: str | os.PathLike[str],
    out: str | os.PathLike[str],
    times: str = "auto",
    audio: str | os.PathLike[str] | None = None,
) -> tuple[Path, str]:
    """Write an ABX item file of whole-segment word items from a segments table.

    Each row of ``segments`` (:func:`audiorepro.data.recordings.read_segments`) is one item:
    ``#file`` the audio file's id, ``#phone`` the word, no context (``-`` ``-``), its speaker.
    The id is the one :func:`encode_units` gives the file when it encodes ``audio`` (the
    folder's :func:`~audiorepro.data.recordings.find_wavs` ids, which are paths under it when
    file names repeat across subfolders); without ``audio``, the file's name (whitespace as
    ``_``), and two files of one name in the table are an error.
    ``times``: ``relative`` (whole files only, ``0 1``: the 2019 frame rule, score without a
    frame shift), ``seconds`` (score with the features' frame shift) or ``auto`` (relative when
    every row is a whole file). Returns ``(path, times used)``.
    """
    if times not in TIMES:
        raise ValueError(f"times must be one of {TIMES}, got {times!r}")
    rows = read_segments(segments)
    ids = _item_file_ids(rows, audio)
    partial = [r for r in rows if r.start is not None]
    if times == "auto":
        times = "seconds" if partial else "relative"
    if times == "relative" and partial:
        raise RecordingsError(
            partial[0].source,
            partial[0].line,
            "start/end: relative times hold whole files only (the 2019 frame rule); write "
            "seconds (--times seconds) and score with --frame-shift",
        )
    items = []
    for r in rows:
        if times == "relative":
            onset, offset = 0.0, 1.0
        elif r.start is None:
            n, rate, _ = audio_info(r.path)
            onset, offset = 0.0, n / rate
        else:
            onset, offset = r.start, r.end
        items.append(AbxItem(ids[r.path], onset, offset, r.word, "-", "-", r.speaker))
    return write_item_file(out, items), times


def _item_file_ids(
    rows: Sequence[Segment], audio: str | os.PathLike[str] | None
) -> dict[Path, str]:
    """``{segment path: #file}`` for :func:`abx_items` (its docstring)."""
    if audio is not None:
        under = ids_under(audio)
        ids = {}
        for r in rows:
            name = under.get(r.path.resolve())
            if name is None:
                raise RecordingsError(
                    r.source,
                    r.line,
                    f"path: {r.path} is not an audio file under --audio {audio} (the folder "
                    "units encode read)",
                )
            ids[r.path] = name
        return ids
    ids, first = {}, {}
    for r in rows:
        name = file_id(r.path.stem)
        other = first.setdefault(name, r)
        if other.path.resolve() != r.path.resolve():
            raise RecordingsError(
                r.source,
                r.line,
                f"path: {r.path} and {other.path} (line {other.line}) have one file name "
                f"{name!r}: give --audio DIR, the folder units encode read, so that items "
                "name files by their path under it as the encoded files are named",
            )
        ids[r.path] = name
    return ids


# ---------------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class PaperResult:
    """One of the paper's rows: ABX across (%) and bitrate (b/s) on the test set, and where."""

    abx_across: float
    bitrate: float
    source: str


# The paper's English Tables 1-3 (stride 4× throughout) and the leaderboard's surprise language.
PAPER: dict[tuple[str, Any], PaperResult] = {
    ("logmel", 128): PaperResult(33.79, 171.05, "Table 1"),
    ("mfcc", 128): PaperResult(21.91, 170.42, "Tables 1-3"),
    ("mfcc", 64): PaperResult(22.72, 141.82, "Table 2"),
    ("mfcc", 256): PaperResult(21.94, 194.69, "Table 2"),
    ("mfcc", 512): PaperResult(21.6, 217.47, "Table 2"),
    ("conv", 256): PaperResult(24.17, 184.32, "Table 2"),
    ("smooth", 1e-2): PaperResult(21.88, 169.02, "Table 3"),
    ("smooth", 5e-3): PaperResult(21.67, 169.2, "Table 3"),
    ("smooth", 1e-3): PaperResult(21.75, 169.56, "Table 3"),
    ("jitter", 0.05): PaperResult(21.57, 166.19, "Table 3"),
    ("jitter", 0.075): PaperResult(21.70, 164.08, "Table 3"),
    ("combo", (5e-3, 0.05)): PaperResult(20.71, 171.99, "Table 3"),
    ("combo", (1e-3, 0.05)): PaperResult(20.14, 167.02, "Table 3"),
    ("surprise", 128): PaperResult(14.17, 170.92, "leaderboard 2019_task/12"),
}


@dataclass(frozen=True)
class AblationRow:
    """One row of the paper's Tables 1-3: the model to train, and the paper's numbers for it."""

    key: str
    label: str
    table: str
    model: VQVAEConfig
    paper: PaperResult | None


def ablation_rows(config: Config) -> list[AblationRow]:
    """The rows of Tables 1-3 that the preset asks for; each runs with every seed of
    ``config.main_seeds``, since each enters a finding (:func:`findings`).

    Each row's model is ``config.model`` with the row's changes (``audiorepro.config.replace``).
    """
    base, k0 = config.model, config.model.codebook_size

    def row(key, label, table, paper_key, **changes) -> AblationRow:
        model = replace(base, **changes) if changes else base
        return AblationRow(key, label, table, model, PAPER.get(paper_key))

    rows = [
        row("base", f"TrfVQVAE MFCC K={k0}", "1, 2, 3", ("mfcc", k0)),
        row(
            "logmel",
            f"TrfVQVAE log-Mel K={k0}",
            "1",
            ("logmel", k0),
            input_dim=FEATURES["logmel"],
        ),
        row(
            "conv",
            f"Conv VQVAE K={config.conv_codebook_size}",
            "2",
            ("conv", config.conv_codebook_size),
            encoder="conv",
            codebook_size=config.conv_codebook_size,
        ),
    ]
    for k in config.codebook_sizes:
        if k != k0:
            rows.append(row(f"K{k}", f"TrfVQVAE K={k}", "2", ("mfcc", k), codebook_size=k))
    for lam in config.smoothings:
        rows.append(
            row(f"smooth{lam:g}", f"+ temp smooth λ={lam:g}", "3", ("smooth", lam), smoothing=lam)
        )
    for p in config.jitters:
        rows.append(row(f"jitter{p:g}", f"+ temp jitter p={p:g}", "3", ("jitter", p), jitter=p))
    for lam, p in config.combos:
        rows.append(
            row(
                f"combo{lam:g}_{p:g}",
                f"+ smooth λ={lam:g} + jitter p={p:g}",
                "3",
                ("combo", (lam, p)),
                smoothing=lam,
                jitter=p,
            )
        )
    return rows


def run_row(
    config: Config,
    row: AblationRow,
    seed: int,
    language: str = "english",
    *,
    code_stats: dict[str, float] | None = None,
) -> tuple[TrainedVQVAE, dict[str, float]]:
    """Train (or load) the row's model for one seed and evaluate its units on ``language``,
    with the k-means baseline of the same K, input and code rate (``kmeans_abx_across``,
    ``kmeans_bitrate``; :func:`kmeans_baseline`, same seed). A ``code_stats`` dict receives
    :func:`code_runs` of the test units just scored (what :func:`unit_runs` reports)."""
    trained = train_vqvae(config, row.model, seed, language=language)
    lang_dir = language_dir(config, language)
    test = load_features(lang_dir, "test", feature_of(row.model.input_dim))
    metrics = evaluate(trained.model, lang_dir, test, code_stats=code_stats)
    metrics["train_wall_time_s"] = float(trained.history.get("wall_time_s", 0.0))
    baseline = kmeans_baseline(config, row.model, seed, language)
    metrics["kmeans_abx_across"] = baseline["abx_across"]
    metrics["kmeans_bitrate"] = baseline["bitrate"]
    return trained, metrics


@dataclass(frozen=True)
class RowResult:
    """One (row, seed) of Tables 1-3: its metrics (:func:`run_row`), the seconds its
    training (when not loaded from the run store), evaluation and baseline took, and
    :func:`code_runs` of its test units (``code_stats``, for :func:`unit_runs`)."""

    key: str
    seed: int
    metrics: dict[str, float]
    seconds: float
    code_stats: dict[str, float] = dataclass_field(default_factory=dict)


def _baseline_of(row: AblationRow, seed: int) -> tuple[Any, ...]:
    """What a row's k-means baseline depends on besides the configuration (rows that share it
    share one fit, :func:`kmeans_baseline`)."""
    m = row.model
    return (m.input_dim, m.feature_norm, m.codebook_size, m.stride, seed)


def _run_jobs(config: Config, task: tuple[Any, ...]) -> list[RowResult]:
    """:func:`run_row` of each (row, seed) of one group, in one process."""
    jobs, language = task
    out = []
    for row, seed in jobs:
        start = time.perf_counter()
        stats: dict[str, float] = {}
        _, metrics = run_row(config, row, seed, language, code_stats=stats)
        out.append(RowResult(row.key, seed, metrics, time.perf_counter() - start, stats))
    return out


def run_rows(
    config: Config,
    rows: Sequence[AblationRow],
    language: str = "english",
    workers: int | None = None,
) -> dict[tuple[str, int], RowResult]:
    """:func:`run_row` of every row with every seed of ``config.main_seeds``:
    ``{(row key, seed): RowResult}``.

    With ``workers`` > 1 up to that many processes train at once
    (:func:`audiorepro.parallel.map_processes`; None: one per usable core on the CPU, one on a
    GPU). The (row, seed) pairs that share a k-means baseline go to one process, so it is
    fitted once; every run seeds itself, so the results are those of one run after another.
    """
    if workers is None:
        workers = default_workers("cuda" if torch.cuda.is_available() else "cpu")
    groups: dict[tuple[Any, ...], list[tuple[AblationRow, int]]] = {}
    for seed in config.main_seeds:
        for row in rows:
            groups.setdefault(_baseline_of(row, seed), []).append((row, seed))
    tasks = [(jobs, language) for jobs in sorted(groups.values(), key=len, reverse=True)]
    done = map_processes(_run_jobs, tasks, shared=config, workers=workers)
    return {(r.key, r.seed): r for results in done for r in results}


def _train_job(config: Config, task: tuple[Any, ...]) -> bool:
    """Train (or load) one VQ-VAE in a worker; whether it was trained."""
    model_cfg, seed, language = task
    return not train_vqvae(config, model_cfg, seed, language=language).from_cache


def train_ahead(
    config: Config,
    rows: Sequence[AblationRow] | None = None,
    language: str = "english",
    workers: int | None = None,
) -> int:
    """Train the VQ-VAE of every row (default :func:`ablation_rows`, whose first is the main
    model) with every seed of ``config.main_seeds``, side by side, one process per core on
    the CPU (one on a GPU), rows of the same model once, so that the pages that follow only
    load them (:func:`train_vqvae`, :func:`run_rows`). With the default rows on English and
    ``config.surprise``, the surprise language's main model (``config.seed``, what the
    evaluation page scores) trains in the same pool. Each run seeds itself and trains as it
    would alone. Returns how many runs were trained (the others were in the run store)."""
    if workers is None:
        workers = default_workers("cuda" if torch.cuda.is_available() else "cpu")
    chapter = rows is None
    rows = ablation_rows(config) if rows is None else rows
    runs = [(row.model, seed, language) for seed in config.main_seeds for row in rows]
    if chapter and language == "english" and config.surprise:
        runs.append((rows[0].model, config.seed, "surprise"))
    jobs: dict[str, tuple[Any, ...]] = {}
    for model, seed, lang in runs:
        jobs.setdefault(config_hash([to_dict(model), seed, lang]), (model, seed, lang))
    # Longest first: English before the smaller surprise corpus, conv encoders (the fastest)
    # after the others.
    tasks = sorted(jobs.values(), key=lambda job: (job[2] != "english", job[0].encoder == "conv"))
    return sum(map_processes(_train_job, tasks, shared=config, workers=workers))


def current(records: Sequence[Mapping[str, Any]], config: Config) -> list[Mapping[str, Any]]:
    """The ledger ``records`` of ``config`` (its ``config_hash``; the evaluation page records
    the chapter's configuration with every row) and of its seeds (``main_seeds`` and ``seed``)
    only: what the tables and findings read (:func:`audiorepro.reporting.current_records`)."""
    return reporting.current_records(records, config, (*config.main_seeds, config.seed))


def _tags(key: str, language: str = "english") -> dict[str, str]:
    return {"row": key, "language": language}


def summarize(records: Sequence[Mapping[str, Any]], config: Config, preset: str) -> pd.DataFrame:
    """One line per row of :func:`ablation_rows` that ``records`` (ledger records of the
    evaluation page) hold: means and standard deviations over seeds, codebook usage, the most a
    K-code stream at the code rate can carry (``bitrate_cap``), the k-means baseline with the
    same K (``kmeans_abx``, ``kmeans_bitrate``, ``beats_kmeans``), the ABX of the input frames
    (records tagged ``mfcc_frames`` / ``logmel_frames``, metric ``frames_abx``) and the units'
    ABX over it (``abx_over_frames``), and the paper's values. Only
    the records of ``config`` count (:func:`current`)."""
    records = current(records, config)
    frames = {}
    for feature, dim in FEATURES.items():
        got = reporting.values(
            records,
            chapter=CHAPTER,
            preset=preset,
            metric="frames_abx",
            tags={"row": f"{feature}_frames", "language": "english"},
        )
        if got:
            frames[dim] = float(np.mean(got))
    out = []
    for row in ablation_rows(config):

        def vals(metric: str, key: str = row.key) -> list[float]:
            return reporting.values(
                records, chapter=CHAPTER, preset=preset, metric=metric, tags=_tags(key)
            )

        abx_vals, rates = vals("abx_across"), vals("bitrate")
        if not abx_vals:
            continue
        km_abx, km_rate = vals("kmeans_abx_across"), vals("kmeans_bitrate")
        (abx_mean, abx_std), (rate_mean, rate_std) = (
            reporting.mean_std(abx_vals),
            reporting.mean_std(rates),
        )
        k = row.model.codebook_size
        out.append(
            {
                "row": row.key,
                "label": row.label,
                "table": row.table,
                "K": k,
                "seeds": len(abx_vals),
                "abx": abx_mean,
                "abx_std": abx_std,
                "bitrate": rate_mean,
                "bitrate_std": rate_std,
                "codes_used": float(np.mean(vals("codes_used"))),
                "perplexity": float(np.mean(vals("perplexity"))),
                "kmeans_abx": float(np.mean(km_abx)) if km_abx else math.nan,
                "kmeans_abx_std": reporting.mean_std(km_abx)[1] if km_abx else math.nan,
                "kmeans_bitrate": float(np.mean(km_rate)) if km_rate else math.nan,
                "frames_abx": frames.get(row.model.input_dim, math.nan),
                "abx_over_frames": abx_mean / frames.get(row.model.input_dim, math.nan),
                "beats_kmeans": _beats(abx_vals, km_abx),
                "bitrate_cap": math.log2(k) / (row.model.stride * HOP_S),
                "paper_abx": row.paper.abx_across if row.paper else None,
                "paper_bitrate": row.paper.bitrate if row.paper else None,
            }
        )
    return pd.DataFrame(out).set_index("row")


def _beats(units: Sequence[float], kmeans_abx: Sequence[float]) -> str:
    """Whether the units' ABX is below the k-means baseline's: by more than both spreads
    (``yes``), above it by as much (``no``), or within them (``unclear``)."""
    if not units or not kmeans_abx:
        return ""
    if len(units) < 2 or len(kmeans_abx) < 2:
        return "unclear (one seed)"
    (m, s), (mk, sk) = reporting.mean_std(units), reporting.mean_std(kmeans_abx)
    margin = s + sk
    return "yes" if m + margin < mk else "no" if m - margin > mk else "unclear"


def _row_finding(
    records: Sequence[Mapping[str, Any]], preset: str, row: AblationRow, base: AblationRow
) -> str:
    """The verdict on the paper's claim about ``row`` (against the main row), or ""."""

    def vals(key: str, metric: str) -> list[float]:
        tags = _tags(key)
        return reporting.values(records, chapter=CHAPTER, preset=preset, metric=metric, tags=tags)

    if row.key == "logmel":
        claim, better, worse = "MFCC beats log-Mel by 11.9 ABX points (Table 1)", "base", "logmel"
    elif row.key == "conv":
        claim, better, worse = (
            "the Transformer beats the conv VQ-VAE by 2.2 (Table 2)",
            "base",
            "conv",
        )
    elif row.key.startswith("K"):
        k, k0 = row.model.codebook_size, base.model.codebook_size
        better, worse = (row.key, "base") if k > k0 else ("base", row.key)
        claim = f"bitrate rises with K: K={max(k, k0)} above K={min(k, k0)} (Table 2)"
        return reporting.finding(
            claim, vals(better, "bitrate"), vals(worse, "bitrate"), metric="bitrate", digits=1
        ).sentence
    elif row.key.startswith(("smooth", "jitter", "combo")):
        gain = "1.2-1.8" if row.key.startswith("combo") else "0.0-0.3"
        claim, better, worse = (
            f"{row.label} lowers ABX by {gain} points (Table 3)",
            row.key,
            "base",
        )
    else:
        return ""
    return reporting.finding(
        claim,
        vals(better, "abx_across"),
        vals(worse, "abx_across"),
        metric="ABX %",
        higher_is_better=False,
    ).sentence


def findings(records: Sequence[Mapping[str, Any]], config: Config, preset: str) -> pd.DataFrame:
    """The paper-vs-ours table of the evaluation page: for every row of Tables 1-3 (and the
    surprise language), ABX and bitrate beside the paper's, with the verdict on the paper's
    claim about that row computed by :func:`audiorepro.reporting.finding` from ``records``
    (those of ``config`` only, :func:`current`)."""
    records = current(records, config)
    rows = ablation_rows(config)
    table = []
    for row in rows:
        source = row.paper.source if row.paper else ""
        found = _row_finding(records, preset, row, rows[0])
        for metric, unit, digits in (("abx_across", "ABX %", 2), ("bitrate", "bitrate", 1)):
            table.append(
                reporting.PaperRow(
                    f"{row.label}: {unit}",
                    metric,
                    getattr(row.paper, metric) if row.paper else None,
                    CHAPTER,
                    _tags(row.key),
                    digits=digits,
                    finding=found if (metric == "bitrate") == row.key.startswith("K") else "",
                    source=source,
                )
            )
    if config.surprise:
        paper = PAPER["surprise", 128]
        for metric, unit, digits in (("abx_across", "ABX %", 2), ("bitrate", "bitrate", 1)):
            table.append(
                reporting.PaperRow(
                    f"Indonesian, main model: {unit}",
                    metric,
                    getattr(paper, metric),
                    CHAPTER,
                    _tags("base", "surprise"),
                    digits=digits,
                    finding="Leaderboard value of the 4× system." if digits == 2 else "",
                    source=paper.source,
                )
            )
    return reporting.paper_vs_ours(table, preset=preset, records=records)
