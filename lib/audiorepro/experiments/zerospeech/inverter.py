"""The codebook inverter (paper §4): trained on one target voice from a frozen VQ-VAE's units,
it turns any utterance into that voice through its units and Griffin-Lim."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audiorepro.config import replace, to_dict
from audiorepro.data.recipes.zerospeech import read_synthesis_list, speaker_of
from audiorepro.data.speech_segments import (
    SAMPLE_RATE,
    PairDataset,
    collate_pairs,
    feature_of,
    features_key,
    normalize_features,
)
from audiorepro.experiments.zerospeech.config import INVERTER_VERSION, RUNS_VERSION, Config, store
from audiorepro.experiments.zerospeech.data import language_dir, load_features
from audiorepro.experiments.zerospeech.evaluate import (
    WINDOW_CONTEXT,
    WINDOW_FRAMES,
    encode_files,
    encode_windows,
    window_spans,
)
from audiorepro.experiments.zerospeech.train import TrainedVQVAE, fit_one_thread, weights_digest
from audiorepro.features import griffin_lim
from audiorepro.losses.inverter import inverter_loss
from audiorepro.models.inverter import CodebookInverter, InverterConfig
from audiorepro.models.vqvae import VQVAE
from audiorepro.repro import seed_everything
from audiorepro.storage import load_model_weights, read_json, save_model_weights, write_json
from audiorepro.training import TrainConfig


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
        "vqvae": weights_digest(vqvae.model),
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
        trained["model"], history = fit_inverter(
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
    vqvae: VQVAE,
    inputs: Mapping[str, np.ndarray],
    mags: Mapping[str, np.ndarray],
    segment: int,
    speakers: Mapping[str, str] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The inverter's training pairs: each file's codebook vectors (``vqvae``, frozen) cut into
    pieces of ``segment`` code frames, each beside the linear magnitudes of the same stretch
    (``stride`` frames per code); a last piece shorter than one code's frames is dropped.
    ``speakers``: each file's speaker, for a model that normalises per speaker
    (:func:`~audiorepro.experiments.zerospeech.evaluate.encode_files`)."""
    _, vectors = encode_files(vqvae, dict(inputs), speakers=speakers)
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


def fit_inverter(
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
    trainer, result = fit_one_thread(
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
    normalised: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Utterance features (T, F) → units → magnitudes → waveform in the inverter's voice.

    Returns ``(wav (n_samples,), predicted magnitudes (S, n_bins), codes (T',))``;
    ``n_samples=None`` gives ``160 · (S − 1)`` samples. ``normalised``: ``feats`` are already
    normalised as the VQ-VAE reads them (per speaker, over the speaker's files:
    :func:`~audiorepro.experiments.zerospeech.evaluate.model_inputs`).
    """
    vqvae.eval()
    inverter.eval()
    if vqvae.cfg.feature_norm == "speaker" and not normalised:
        raise ValueError(
            "resynthesize: the VQ-VAE normalises per speaker (model.feature_norm=speaker); "
            "normalise the speaker's files together (model_inputs) and pass normalised=True"
        )
    if not normalised:
        (feats,) = normalize_features([feats], vqvae.cfg.feature_norm)
    codes, vectors = encode_windows(vqvae, np.asarray(feats, dtype=np.float32))
    mag = invert_windows(inverter, vectors)[: len(feats)]  # (S, n_bins)
    wav = griffin_lim(mag, n_iter=griffin_lim_iters, sr=SAMPLE_RATE, length=n_samples, seed=seed)
    return wav, mag, codes


@torch.no_grad()
def invert_windows(inverter: CodebookInverter, vectors: np.ndarray) -> np.ndarray:
    """Magnitudes (T'·r, n_bins) of one file's codebook vectors (T', D_e): whole when its
    spectrogram frames fit :data:`~audiorepro.experiments.zerospeech.evaluate.WINDOW_FRAMES`,
    else window by window as the encoder's (its Transformer layers attend over every frame
    at once), the magnitudes of each window's kept part joined."""
    r = inverter.cfg.repeat
    parts = []
    for start, end, keep, stop in window_spans(
        len(vectors), WINDOW_FRAMES // r, WINDOW_CONTEXT // r
    ):
        e = torch.from_numpy(np.asarray(vectors[start:end], dtype=np.float32))[None]
        mag = inverter(e, torch.tensor([end - start]))[0]
        parts.append(mag[(keep - start) * r : (stop - start) * r].numpy())
    return np.concatenate(parts)


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
