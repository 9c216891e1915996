"""Training the Transformer VQ-VAE: arrays in, model out (:func:`fit_vqvae`), one run of the run
store per model, seed and corpus (:func:`train_vqvae`), on one thread with the chapter's
checkpoint cadence (:func:`fit_one_thread`, which the inverter trains through too)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audiorepro.config import replace, to_dict
from audiorepro.data.speech_segments import (
    SegmentDataset,
    collate_segments,
    feature_of,
    normalize_features,
)
from audiorepro.experiments.zerospeech.config import RUNS_VERSION, Config, TrainSection, store
from audiorepro.experiments.zerospeech.data import load_data
from audiorepro.experiments.zerospeech.pairs import PairedSegments, collate_paired
from audiorepro.models.vqvae import VQVAE, VQVAEConfig, input_statistics
from audiorepro.repro import seed_everything, single_thread
from audiorepro.storage import load_model_weights, read_json, save_model_weights, write_json
from audiorepro.training import TrainConfig, Trainer, TrainResult
from audiorepro.training.optimizers import adam_factory

CHECKPOINT_STEPS = 100
"""Most optimizer steps between two checkpoints of an unfinished VQ-VAE run (at least one per
epoch), kept in the run store's staging folder so that a rerun after a kill continues there."""


def weights_digest(model: torch.nn.Module) -> str:
    """SHA-1 of a model's weights (names and bytes, in name order): what a run trained on a
    frozen model (the inverter on a VQ-VAE's units) is keyed by."""
    digest = hashlib.sha1()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


@dataclass
class TrainedVQVAE:
    """A trained model with its training history and speaker list."""

    model: VQVAE
    history: dict[str, Any]
    speakers: list[str]
    seed: int
    from_cache: bool


def _vqvae_step(model: VQVAE, batch: Any) -> dict[str, torch.Tensor]:
    feats, lengths, speakers, *target = batch  # a fourth part: the targets of paired files
    out = model(feats, lengths, speakers, *target)
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
    if config.train.pairs != "none":
        raise ValueError(
            f"train.pairs = {config.train.pairs!r}: the chapter's runs train as the paper does "
            "(none); pairs are for `units train` on recordings of several speakers"
        )
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


def fit_one_thread(
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
    pairs: Sequence[tuple[int, int]] = (),
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

    With ``pairs`` (indices ``(i, j)`` of utterances of different speakers that say the same
    thing, :func:`~audiorepro.experiments.zerospeech.pairs.find_pairs`), the model also trains
    on the pairs, both ways: each utterance's units reconstruct its partner's frames, aligned
    to it by DTW, with the partner's speaker embedding, beside every utterance reconstructing
    itself (:class:`PairedSegments`).
    """
    if not feats:
        raise ValueError("fit_vqvae: no training utterance")
    names = sorted(set(speakers))
    seed_everything(seed)
    model = VQVAE(model_cfg, n_speakers=len(names))
    feats = normalize_features(feats, model_cfg.feature_norm, speakers)
    stacked = np.concatenate(feats)
    model.set_normalization(*input_statistics(stacked, model_cfg.input_scale))
    index = [{s: i for i, s in enumerate(names)}[s] for s in speakers]
    if pairs:
        dataset: Any = PairedSegments(feats, index, pairs, train.segment_frames)
        collate: Callable[..., Any] = collate_paired
    else:
        dataset, collate = SegmentDataset(feats, index, train.segment_frames), collate_segments
    if len(dataset) == 0:
        raise ValueError(
            "fit_vqvae: every utterance is shorter than the shortest training segment (8 frames)"
        )
    trainer, result = fit_one_thread(
        model, _vqvae_step, dataset, train.loop(seed), collate, out_dir, callbacks, progress
    )
    history = {
        "step": result.steps,
        "loss": result.losses,
        **dict(result.step_metrics.items()),
        "wall_time_s": result.wall_time_s,
    }
    return trainer.unwrapped_model.cpu().eval(), history


@contextmanager
def resumable(
    config: Config,
    feats: Sequence[np.ndarray],
    speakers: Sequence[str],
    pairs: Sequence[tuple[int, int]] = (),
) -> Iterator[Path | None]:
    """The folder where ``units train`` checkpoints (:func:`fit_vqvae`'s ``out_dir``): in the
    run store (kind ``units-train``), named by the configuration, the utterances' frames, their
    speakers and the pairs, so that the same command after an interruption (Ctrl-C, a killed
    job) continues from its newest checkpoint, and any other starts afresh. Removed when the
    block ends without an error, kept when it raises; ``None`` while another process trains
    the same run (:meth:`~audiorepro.storage.RunStore.resumable`)."""
    digest = hashlib.sha256()
    for x, speaker in zip(feats, speakers, strict=True):
        digest.update(f"{speaker}\t{x.shape}\n".encode())
        digest.update(np.ascontiguousarray(x, dtype=np.float32).tobytes())
    runs = store()
    key = {"config": to_dict(config), "frames": digest.hexdigest(), "pairs": [*map(list, pairs)]}
    with runs.resumable(runs.run("units-train", key)) as path:
        yield path
