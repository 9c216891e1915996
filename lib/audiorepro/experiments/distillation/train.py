"""Stage 2 (paper (b) §3): a stage-1 model fine-tuned with L = L_sup + λ·L_dist, the targets of
each batch looked up in the teachers' ensemble (:func:`train_distilled`), as runs of the run
store keyed by the weights of the student and of every teacher it learns from
(:func:`distill`)."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from audiorepro.data.retrieval import CaptionDataset, CaptionItem, collate_captions
from audiorepro.distillation import (
    DEFAULT_TAU,
    TeacherEmbeddingsError,
    TeacherEnsemble,
    batch_targets,
)
from audiorepro.experiments.distillation.config import Config, stage2_config, store
from audiorepro.experiments.distillation.data import finetune_items
from audiorepro.experiments.distillation.teachers import (
    caption_preprocessing,
    stage1_entry,
    stage1_teacher,
    teacher_ensemble,
)
from audiorepro.experiments.retrieval.config import Config as RetrievalConfig
from audiorepro.experiments.retrieval.data import RetrievalData
from audiorepro.experiments.retrieval.runs import Selection, run_entry, trained_model, weights_key
from audiorepro.experiments.retrieval.train import checkpoint_every, step_budget, text_cache_saver
from audiorepro.models.dual_encoder import DistillationStudent, DualEncoder
from audiorepro.repro import torch_threads
from audiorepro.storage import Run
from audiorepro.training.callbacks import EpochSetter
from audiorepro.training.loop import Trainer


def uses_teachers(lam: float, dist_only: bool) -> bool:
    """Whether a stage-2 run's loss reads the teachers' ensemble: L_dist counts (λ > 0) or is
    the whole loss (``dist_only``). At λ = 0 the run is plain fine-tuning of the student."""
    return bool(dist_only) or lam > 0


def train_distilled(
    model: DualEncoder,
    items: Sequence[CaptionItem],
    features: Mapping[str, torch.Tensor],
    config: RetrievalConfig,
    ensemble: TeacherEnsemble | None,
    *,
    seed: int,
    num_epochs: int,
    lr: float,
    max_steps: int | None = None,
    lam: float = 1.0,
    dist_only: bool = False,
    target_tau: float = DEFAULT_TAU,
    out_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    selection: Selection | None = None,
    callbacks: Sequence[Any] = (),
    progress: str = "auto",
    **train_changes: Any,
) -> Any:
    """Stage 2 (paper (b) §3): fine-tune ``model`` in place on ``items`` with L_sup + λ·L_dist.

    Each batch's targets are looked up in ``ensemble`` by audio id and caption text for the global
    batch (all processes). Every clip enters as its start, ``config.train_frames`` frames, the crop
    the teachers embedded (:func:`teacher_embeddings`; the paper uses whole clips); no caption
    swaps (the targets are keyed by the captions the teachers embedded). With ``max_steps`` the run
    takes exactly that many optimizer steps, the cosine spanning them
    (:func:`~audiorepro.experiments.retrieval.train.step_budget`), else ``num_epochs``;
    ``train_changes`` set other Trainer fields (``checkpoint_every``, ...). Returns the Trainer's
    ``TrainResult``; with ``out_dir`` the run writes checkpoints there (every
    :func:`~audiorepro.experiments.retrieval.train.checkpoint_every` steps unless
    ``checkpoint_every`` is given; the frozen text encoder left out) and ``resume=True`` continues
    from the last (``model`` built as the interrupted run's was, which gives the same frozen
    weights). With ``selection`` (a :class:`~audiorepro.experiments.retrieval.runs.Selection` of
    ``model``) the run is evaluated on the validation split at the end of every epoch and at its
    last step, and the best weights are kept, as in chapter 01. ``callbacks`` are further Trainer
    callbacks. ``ensemble`` is ``None`` only for plain fine-tuning (λ = 0 without
    ``dist_only``, :func:`uses_teachers`): L_sup alone, no L_dist logged.

    Raises:
        TeacherEmbeddingsError: before any training, when the teachers lack training items, have
            another projection size, embedded captions with other preprocessing or audio at
            another crop.
        ValueError: no ``ensemble`` where L_dist needs one.
    """
    if ensemble is None:
        if uses_teachers(lam, dist_only):
            raise ValueError(
                f"train_distilled: lam={lam}, dist_only={dist_only} needs the teachers' ensemble; "
                "only plain fine-tuning (lam = 0) trains without one"
            )
    else:
        ensemble.check(
            audio_ids=[i.key for i in items],
            captions=[i.caption for i in items],
            caption_preprocessing=caption_preprocessing(model),
            dim=model.audio_projection.out_features,
        )
        for meta in ensemble.metadata:
            if meta.get("crop_frames", config.train_frames) != config.train_frames:
                raise TeacherEmbeddingsError(
                    f"teacher {meta.get('teacher', '?')!r} ({meta.get('source', 'in memory')}) "
                    f"embedded the first {meta['crop_frames']} frames of each clip, but this "
                    f"stage-2 run trains on the first {config.train_frames}"
                )
    student = DistillationStudent(model, lam=lam, dist_only=dist_only)
    dataset = CaptionDataset(
        items, features, max_frames=config.train_frames, crop="start", seed=seed,
        freqm=config.train.freqm, timem=config.train.timem,
    )  # fmt: skip

    def loss_fn(module: nn.Module, batch: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        p_audio = p_caption = None
        if ensemble is not None:
            targets = batch_targets(
                ensemble,
                batch["keys"],
                batch["captions"],
                tau=target_tau,
                device=batch["feats"].device,
            )
            p_audio, p_caption = targets.p_audio, targets.p_caption
        return module(
            batch["feats"], batch["lengths"], batch["captions"], batch["audio_ids"], p_audio,
            p_caption,
        )  # fmt: skip

    train_cfg = config.train.trainer_config(len(dataset), seed=seed, num_epochs=num_epochs, lr=lr)
    train_cfg = step_budget(train_cfg, len(dataset), max_steps)
    if out_dir is not None and "checkpoint_every" not in train_changes:
        train_changes["checkpoint_every"] = checkpoint_every(train_cfg, len(dataset))
    train_cfg = dataclasses.replace(train_cfg, **train_changes)
    eval_fn, keep = (
        (None, []) if selection is None else selection.trainer_hooks(train_cfg, len(dataset))
    )
    trainer = Trainer(
        student,
        loss_fn,
        dataset,
        train_cfg,
        collate_fn=functools.partial(collate_captions, pad_value=model.pad_value),
        eval_fn=eval_fn,
        out_dir=out_dir,
        callbacks=[
            EpochSetter(dataset),
            text_cache_saver(model),
            *keep,
            *callbacks,
        ],
        checkpoint_frozen=False,
        progress=progress,
    )
    with torch_threads(config.train.torch_threads):
        return trainer.fit(resume=resume)


def distill(
    config: Config,
    name: str,
    seed: int,
    data: RetrievalData,
    *,
    lam: float | None = None,
    dist_only: bool | None = None,
    progress: str = "lines",
    callbacks: Sequence[Any] = (),
) -> DualEncoder:
    """Stage 2 of teacher ``name`` and ``seed``: its stage-1 model fine-tuned on the Clotho
    development split with targets from the ensemble of that seed's M stage-1 models (trained or
    reloaded first), ``finetune_steps`` steps (or ``finetune_epochs``) on the start crops of
    :func:`stage2_config`. ``lam`` = 0 gives plain fine-tuning with L_sup (the λ-sweep baseline,
    the same budget), which reads no teacher. The student is selected on the validation split as in stage 1
    (``retrieval.select``: the best mAP@10 or the final weights, both saved). Trained once per
    configuration (keyed by the stage-1 weights of the student and, at λ > 0, of
    every teacher), then reloaded; a run killed before it
    finished continues from its last checkpoint when called again
    (:func:`~audiorepro.experiments.retrieval.runs.trained_model`). ``callbacks`` are further
    Trainer callbacks of the stage-2 run."""
    lam = config.lam if lam is None else lam
    dist_only = config.dist_only if dist_only is None else dist_only
    run_cfg = stage2_config(config, name)
    items = finetune_items(config, data)
    base = stage1_teacher(config, name, seed, data, progress=progress)
    features = data.features_for(run_cfg.model)
    run = distill_entry(config, name, seed, data, lam=lam, dist_only=dist_only)

    def train(model: DualEncoder, staging: Path, selection: Selection) -> Any:
        ensemble = (
            teacher_ensemble(config, seed, data, items, progress=progress)
            if uses_teachers(lam, dist_only)
            else None  # plain fine-tuning: no teacher is trained or read
        )
        return train_distilled(
            model,
            items,
            features,
            run_cfg,
            ensemble,
            seed=seed,
            num_epochs=config.finetune_epochs,
            max_steps=config.finetune_steps,
            lr=config.finetune_lr,
            lam=lam,
            dist_only=dist_only,
            target_tau=config.target_tau,
            out_dir=staging,
            resume=True,
            selection=selection,
            callbacks=callbacks,
            progress=progress,
        )

    return trained_model(run, run_cfg, seed, train, data=data, init=base, run_store=store())


def distill_entry(
    config: Config, name: str, seed: int, data: RetrievalData, *, lam: float | None = None,
    dist_only: bool | None = None,
) -> Run:  # fmt: skip
    """The run-store entry of :func:`distill`. Its key covers the stage-1 weights of the
    student and, where L_dist reads them (:func:`uses_teachers`), of every teacher; their
    stage 0 must exist, or it is trained now. Plain fine-tuning (λ = 0) depends on the student
    alone, so it can run before the other teachers exist."""
    run_cfg = stage2_config(config, name)
    select = run_cfg.select
    lam = config.lam if lam is None else lam
    dist_only = config.dist_only if dist_only is None else dist_only
    teachers = (
        {
            "teachers": [
                weights_key(stage1_entry(config, t, seed, data).key, select)
                for t in config.teachers
            ]
        }
        if uses_teachers(lam, dist_only)
        else {}
    )
    return run_entry(
        f"distill-{name}",
        run_cfg,
        seed,
        items=finetune_items(config, data),
        validation=data.validation,
        num_epochs=config.finetune_epochs,
        max_steps=config.finetune_steps,
        lr=config.finetune_lr,
        init=weights_key(stage1_entry(config, name, seed, data).key, select),
        run_store=store(),
        **teachers,
        lam=lam,
        dist_only=dist_only,
        target_tau=config.target_tau,
        crop="start",
    )
