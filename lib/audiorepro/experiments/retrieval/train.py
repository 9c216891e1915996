"""How a dual encoder trains (paper (a) §2.6): the NT-Xent loss through the project's Trainer
(:func:`train_dual_encoder`), the step arithmetic of a budget, and the callback that keeps what
a frozen text encoder embedded during a run in its checkpoints."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from audiorepro.data.retrieval import CaptionDataset, CaptionItem, collate_captions
from audiorepro.experiments.retrieval.config import Config
from audiorepro.models.dual_encoder import DualEncoder
from audiorepro.repro import torch_threads
from audiorepro.training.callbacks import EpochSetter
from audiorepro.training.loop import Callback, TrainConfig, Trainer


class _TextCacheSaver(Callback):
    """Keeps what a run's frozen text encoder embedded during the run (its own cache,
    :func:`build_model`) in the run's checkpoints, and restores it on resume, so that a run
    resumed in a new process finds every caption embedded before its checkpoint as it was
    computed then (not again, in other batches, with other rounding)."""

    def __init__(self, model: DualEncoder) -> None:
        text = model.text_encoder
        frozen = getattr(text, "trainable_layers", None) == 0
        self.cache: dict[str, torch.Tensor] = text._cache if frozen else {}
        self.base = set(self.cache)

    def state_dict(self) -> dict[str, Any]:
        added = [c for c in self.cache if c not in self.base]
        if not added:
            return {"captions": []}
        return {"captions": added, "embeddings": torch.stack([self.cache[c] for c in added])}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        captions = list(state.get("captions", []))
        if captions:
            self.cache.update(zip(captions, state["embeddings"], strict=True))


def text_cache_saver(model: DualEncoder) -> Callback:
    """The Trainer callback of a resumable run of ``model``, whose frozen text encoder has its
    own caption cache: the captions it embeds go into every checkpoint and come back on resume
    (see :func:`train_dual_encoder`)."""
    return _TextCacheSaver(model)


CHECKPOINT_STEPS = 200
"""Most optimizer steps between two checkpoints of a resumable run (:func:`checkpoint_every`)."""


def steps_per_epoch(train_cfg: TrainConfig, num_items: int) -> int:
    """Optimizer steps of one epoch over ``num_items`` training items: batches of
    ``batch_size`` on each of ``$WORLD_SIZE`` processes, ``grad_accum_steps`` per step."""
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    batches = max(1, -(-num_items // (train_cfg.batch_size * processes)))
    return -(-batches // train_cfg.grad_accum_steps)


def checkpoint_every(train_cfg: TrainConfig, num_items: int) -> int:
    """Steps between the checkpoints of a resumable run over ``num_items`` training items: once
    per epoch, and at least every :data:`CHECKPOINT_STEPS` steps when epochs are longer."""
    return min(steps_per_epoch(train_cfg, num_items), CHECKPOINT_STEPS)


def retrieval_loss(model: torch.nn.Module, batch: Mapping[str, Any]) -> torch.Tensor:
    """``loss_fn`` for the Trainer: the dual encoder's NT-Xent on one collated batch."""
    return model(batch["feats"], batch["lengths"], batch["captions"], batch["audio_ids"])


def step_budget(train_cfg: TrainConfig, num_items: int, max_steps: int | None) -> TrainConfig:
    """``train_cfg`` for a run of exactly ``max_steps`` optimizer steps over ``num_items``
    training items: as many epochs as needed, the cosine spanning the ``max_steps`` and the
    warm-up at most a tenth of them (unchanged when ``max_steps`` is None). Runs compared with
    one budget (an ablation's settings, stage 2 at λ = 0 and λ = 1) take equal steps whatever
    their corpus sizes."""
    if max_steps is None:
        return train_cfg
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    per_epoch = max(1, -(-num_items // (train_cfg.batch_size * processes)))
    return dataclasses.replace(
        train_cfg,
        num_epochs=-(-max_steps // per_epoch),
        max_steps=max_steps,
        schedule_steps=max_steps,
        warmup_steps=min(train_cfg.warmup_steps, max_steps // 10),
    )


def train_dual_encoder(
    model: DualEncoder,
    items: Sequence[CaptionItem],
    features: Mapping[str, torch.Tensor],
    config: Config,
    *,
    seed: int,
    num_epochs: int,
    lr: float,
    paraphrase_prob: float = 0.0,
    max_steps: int | None = None,
    crop: str = "random",
    out_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    selection: Any = None,
    callbacks: Sequence[Any] = (),
    progress: str = "auto",
) -> Any:
    """Train ``model`` in place on caption items; returns the Trainer's ``TrainResult``.

    Adam with PyTorch defaults (weight decay 0), one warm-up epoch then cosine decay (§2.6),
    crops of ``config.train_frames`` (random, or the start of each clip with ``crop="start"``),
    padding to the batch maximum, caption swaps with ``paraphrase_prob``. With ``max_steps``
    the run takes exactly that many steps (:func:`step_budget`).

    With ``out_dir`` the run writes checkpoints there (:func:`checkpoint_every`), without the
    frozen text-encoder weights, and ``resume=True`` continues from the newest one: ``model`` must
    then be built as the interrupted run's was (:func:`build_model`, same configuration and seed),
    which gives the same frozen weights. With ``selection`` (a
    :class:`~audiorepro.experiments.retrieval.runs.Selection` of ``model``) the run is evaluated on
    the validation split at the end of every epoch and at its last step, and the best weights are
    kept. ``callbacks`` are further Trainer callbacks."""
    dataset = CaptionDataset(
        items, features, max_frames=config.train_frames, crop=crop,
        paraphrase_prob=paraphrase_prob, seed=seed,
        freqm=config.train.freqm, timem=config.train.timem,
    )  # fmt: skip
    train_cfg = config.train.trainer_config(len(dataset), seed=seed, num_epochs=num_epochs, lr=lr)
    train_cfg = step_budget(train_cfg, len(dataset), max_steps)
    if out_dir is not None:
        every = checkpoint_every(train_cfg, len(dataset))
        train_cfg = dataclasses.replace(train_cfg, checkpoint_every=every)
    eval_fn, keep = (
        (None, []) if selection is None else selection.trainer_hooks(train_cfg, len(dataset))
    )
    trainer = Trainer(
        model,
        retrieval_loss,
        dataset,
        train_cfg,
        collate_fn=functools.partial(collate_captions, pad_value=model.pad_value),
        eval_fn=eval_fn,
        out_dir=out_dir,
        callbacks=[EpochSetter(dataset), text_cache_saver(model), *keep, *callbacks],
        checkpoint_frozen=False,
        progress=progress,
    )
    with torch_threads(config.train.torch_threads):
        return trainer.fit(resume=resume)
