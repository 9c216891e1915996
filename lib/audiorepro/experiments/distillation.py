"""Chapter 02: ensemble knowledge distillation for audio retrieval (paper (b)).

The two-stage procedure of paper (b) §3 on top of chapter 01
(:mod:`audiorepro.experiments.retrieval`):

1. **Stage 1** (:func:`stage1_teacher`): M dual encoders, PaSST, ATST-Frame and MobileNetV3, each
   with the text encoder, pretrained with L_sup on ClothoV2, AudioCaps and WavCaps through
   chapter 01's :func:`~audiorepro.experiments.retrieval.run_training`. The PaSST teacher *is*
   chapter 01's pretrained model (the same run in chapter 01's run store) at ``passt_stage1:
   chapter01`` (smoke, embedded), so the book trains it once; at ``auto`` (paper) chapter 02
   trains a PaSST teacher of its own with the stage-1 recipe (20 epochs, §4.5) whenever
   chapter 01's pretraining differs from it (chapter 01 pretrains 16 epochs).
2. **Correspondences** (:func:`teacher_embeddings`, :func:`teacher_ensemble`): every stage-1
   model embeds each training audio and caption of the fine-tuning set once; the stores are
   joined into a :class:`~audiorepro.distillation.TeacherEnsemble` whose rows give any block of
   Ĉ = (1/M) Σ_m C^m by one matrix product.
3. **Stage 2** (:func:`train_distilled`, :func:`distill`): each stage-1 model is fine-tuned on the
   Clotho-layout corpus alone with L = L_sup + λ·L_dist
   (:class:`~audiorepro.models.dual_encoder.DistillationStudent`), the targets of each (global)
   batch looked up from the ensemble (:func:`~audiorepro.distillation.batch_targets`).
4. **Ensembles** (:func:`ensemble_similarity`): the stage-1 or the distilled models' similarity
   matrices, averaged.

One departure from the paper, for CPU budgets: stage 2 trains on the *start* of each clip,
``finetune_max_audio_s`` seconds (the same crop every epoch), and the teachers embed exactly
that crop (:func:`stage2_config`), so every target is computed on the audio the student sees.
The paper feeds whole clips of up to 30 s on GPUs, which the ``paper`` preset keeps
(``finetune_max_audio_s: null``); whole clips would cost about 3 times as much on CPU.
Budgets are equal where runs are compared: ``finetune_steps`` optimizer steps for every model
and λ, ``stage1_steps`` for ATST and MobileNet.

Everything runs through the project's :class:`~audiorepro.training.Trainer`, so stage 2 resumes
bit for bit on CPU and runs unchanged under ``accelerate launch``; trained models and teacher
stores live in the :class:`~audiorepro.storage.RunStore` of chapter ``02_distillation``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from audiorepro import reporting
from audiorepro.config import ConfigError, field, load_preset, replace, to_dict
from audiorepro.data.retrieval import (
    CaptionDataset,
    CaptionItem,
    caption_sharing,
    collate_captions,
    generic_flags,
)
from audiorepro.distillation import (
    DEFAULT_TAU,
    TeacherEmbeddings,
    TeacherEmbeddingsError,
    TeacherEnsemble,
    batch_targets,
    caption_top1,
    captions_for_clip,
    compute_teacher_embeddings,
    ensemble_scores,
    soft_targets,
    target_departure,
    top_matches,
)
from audiorepro.experiments import retrieval
from audiorepro.experiments.retrieval import RetrievalData, load_audio, load_data
from audiorepro.metrics.retrieval import chance_metrics, retrieval_metrics
from audiorepro.models.dual_encoder import DistillationStudent, DualEncoder
from audiorepro.models.text import MAX_TOKENS
from audiorepro.parallel import Task
from audiorepro.paths import repo_root
from audiorepro.reporting import PaperRow
from audiorepro.repro import torch_threads
from audiorepro.storage import Run, RunStore
from audiorepro.training.loop import Trainer

__all__ = [
    "AHEAD",
    "CHAPTER",
    "MUST_BEAT_CHANCE",
    "PAPER",
    "PRESETS",
    "TEACHER_MODELS",
    "Config",
    "DistillationStudent",
    "caption_preprocessing",
    "captions_for_clip",
    "captions_of_several_clips",
    "chance_levels",
    "chapter_tasks",
    "claims",
    "current",
    "distill",
    "encoder_sizes",
    "ensemble_similarity",
    "evaluate",
    "evaluate_and_record",
    "evaluate_models",
    "evaluate_sweep",
    "evaluate_teachers",
    "finetune_items",
    "findings",
    "gains",
    "lambda_sweep",
    "load_audio",
    "load_data",
    "loss_ceiling",
    "mechanisms",
    "soft_targets",
    "stage0_table",
    "stage1_steps",
    "stage1_teacher",
    "stage2_config",
    "store",
    "table",
    "table2",
    "target_summary",
    "train_ahead",
    "teacher_config",
    "teacher_embeddings",
    "teacher_ensemble",
    "teacher_store_spec",
    "teacher_stores",
    "top_matches",
    "train_distilled",
    "training_top1",
]

CHAPTER = "02_distillation"
PRESETS = repo_root() / "book" / CHAPTER / "presets"
"""The chapter's YAML presets: smoke, embedded, paper."""
TEACHER_MODELS = ("passt", "atst", "mobilenet")
PASST_STAGE1 = ("chapter01", "own", "auto")
"""The audio encoders of paper (b) §4.2, each paired with the text encoder."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Chapter 02: chapter 01's setting (``retrieval``: corpus, PaSST dual encoder, training),
    which teachers, how long each stage trains, and the distillation loss."""

    retrieval: retrieval.Config = field(
        retrieval.Config(),
        help="Chapter 01's configuration: the corpus, the text encoder, PaSST, the optimiser.",
    )
    teachers: tuple[str, ...] = field(
        TEACHER_MODELS, help="Stage-1 models, M of them: passt | atst | mobilenet (§4.2)."
    )
    atst_variant: str = field("base", help="ATST-Frame configuration: base | small | tiny.")
    mobilenet_variant: str = field("mn40_as_ext", help="EfficientAT MobileNetV3 (§4.2.3).")
    mobilenet_batch_size: int | None = field(
        32, help="MobileNet's batch size (§4.5: 32; None: chapter 01's)."
    )
    passt_stage1: str = field(
        "chapter01",
        help="The PaSST teacher: chapter01 (chapter 01's pretrained run, whatever its recipe; "
        "smoke, embedded) | own (chapter 02 trains one with the stage-1 recipe below) | auto "
        "(own when chapter 01's pretraining differs from the stage-1 recipe, else chapter "
        "01's run; paper, where chapter 01 pretrains 16 epochs and §4.5 20).",
    )
    stage1_epochs: int | None = field(
        20,
        help="Stage-1 epochs of ATST and MobileNet, and of PaSST when it is chapter 02's own "
        "(§4.5: 20 for every teacher; None: chapter 01's).",
    )
    stage1_steps: int | None = field(
        None,
        help="Stage-1 optimizer steps of ATST and MobileNet, cosine spanning them (None: "
        "stage1_epochs).",
    )
    mobilenet_stage1_steps: int | None = field(
        None,
        help="MobileNet's stage-1 optimizer steps when they differ from stage1_steps (None: "
        "stage1_steps). Its steps take half the crops of the others' (batch 32).",
    )
    stage1_max_train_items: int | None = field(
        None, help="Stage-1 captions per corpus for ATST and MobileNet (None: chapter 01's)."
    )
    stage1_max_audio_s: float | None = field(
        None,
        help="Stage-1 random training crop of ATST and MobileNet in s (None: chapter 01's "
        "train_crop_s); evaluation still sees max_audio_s.",
    )
    finetune_epochs: int = field(20, help="Stage-2 epochs on the Clotho development split.")
    finetune_steps: int | None = field(
        None,
        help="Stage-2 optimizer steps of every model and λ, cosine spanning them (None: "
        "finetune_epochs): λ = 0 and λ = 1 get exactly equal budgets.",
    )
    finetune_lr: float = field(2e-5, help="Stage-2 peak learning rate (§4.5: as pretraining).")
    finetune_max_items: int | None = field(
        None, help="Stage-2 captions (None: all of chapter 01's fine-tuning split)."
    )
    finetune_max_audio_s: float | None = field(
        None,
        help="Stage-2 training crop in s, the start of each clip, which the teachers embed too "
        "(None: chapter 01's max_audio_s, whole clips at paper scale).",
    )
    lam: float = field(1.0, help="λ of L = L_sup + λ·L_dist (§4.5: 1).")
    dist_only: bool = field(False, help="Train on L_dist alone (the salsa README's command).")
    target_tau: float = field(DEFAULT_TAU, help="Temperature of the targets p̂_a, p̂_c (§4.5).")
    lambdas: tuple[float, ...] = field((0.0, 0.5, 1.0, 2.0), help="λ values of the λ sweep.")
    sweep_models: tuple[str, ...] = field(("passt",), help="Models the λ sweep fine-tunes.")
    seeds: tuple[int, ...] = field((0, 1, 2), help="Seeds of every reported configuration.")
    analysis_block_size: int = field(
        4096, help="Captions per block of the full-matrix analysis (bounds its memory)."
    )
    analysis_clips: int = field(4, help="Clips shown in the correspondence heatmap.")

    def __post_init__(self) -> None:
        unknown = [t for t in self.teachers if t not in TEACHER_MODELS]
        if unknown or not self.teachers:
            raise ConfigError(
                f"Config.teachers: expected some of {' | '.join(TEACHER_MODELS)}, "
                f"got {list(self.teachers)}"
            )
        if self.passt_stage1 not in PASST_STAGE1:
            raise ConfigError(
                f"Config.passt_stage1: expected {' | '.join(PASST_STAGE1)}, "
                f"got {self.passt_stage1!r}"
            )
        for name in self.sweep_models:
            if name not in self.teachers:
                raise ConfigError(
                    f"Config.sweep_models: {name!r} is not one of the teachers "
                    f"{list(self.teachers)}"
                )
        if self.lam < 0 or any(v < 0 for v in self.lambdas):
            raise ConfigError(f"Config: λ must be >= 0, got {self.lam}, {self.lambdas}")
        if not self.target_tau > 0:
            raise ConfigError(f"Config.target_tau: expected > 0, got {self.target_tau}")


def load_config(preset: str, overrides: Mapping[str, Any] | None = None, **more: Any) -> Config:
    """The chapter's :class:`Config` of ``preset`` (``PRESETS/<preset>.yaml``) with single-field
    overrides, given as a mapping or as keywords; dotted names set nested fields
    (``{"train.max_steps": 10}``), and ``None`` values are ignored."""
    return load_preset(Config, PRESETS, preset, **{**dict(overrides or {}), **more})


def store() -> RunStore:
    """Chapter 02's run store: the ATST and MobileNet teachers, the students, the teacher
    embedding stores (the PaSST teachers stay in chapter 01's)."""
    return RunStore(CHAPTER)


def teacher_config(config: Config, name: str) -> retrieval.Config:
    """Chapter 01's configuration with teacher ``name``'s audio encoder: PaSST as chapter 01,
    ATST-Frame or MobileNet in its place (the same text encoder, space, loss and optimiser)."""
    rcfg = config.retrieval
    if name == "passt":
        return rcfg
    if name == "atst":
        return replace(
            rcfg, **{"model.audio_encoder": "atst", "model.atst_variant": config.atst_variant}
        )
    if name == "mobilenet":
        return replace(
            rcfg,
            **{
                "model.audio_encoder": "mobilenet",
                "model.mobilenet_variant": config.mobilenet_variant,
                "train.batch_size": config.mobilenet_batch_size or rcfg.train.batch_size,
            },
        )
    raise ValueError(f"unknown teacher {name!r}; known: {', '.join(TEACHER_MODELS)}")


def stage2_config(config: Config, name: str) -> retrieval.Config:
    """Chapter 01's configuration of stage 2 of teacher ``name``: :func:`teacher_config` with the
    training crop ``finetune_max_audio_s`` (``train_crop_s``; None: ``max_audio_s``), which stage
    2 takes from the *start* of each clip and the teachers embed, and no ``audio_pretrained``
    (the weights come from stage 1). Evaluation still cuts at ``max_audio_s``."""
    return replace(
        teacher_config(config, name),
        train_crop_s=config.finetune_max_audio_s,
        **{"model.audio_pretrained": None},
    )


def own_passt_teacher(config: Config) -> bool:
    """Whether the PaSST teacher is chapter 02's own stage-1 run rather than chapter 01's
    pretrained model (``passt_stage1``; ``auto``: when the stage-1 recipe, its epochs, steps,
    captions per corpus or crop, differs from chapter 01's pretraining)."""
    if config.passt_stage1 != "auto":
        return config.passt_stage1 == "own"
    rcfg = config.retrieval
    return (
        (config.stage1_epochs or rcfg.train.num_epochs) != rcfg.train.num_epochs
        or config.stage1_steps is not None
        or (config.stage1_max_train_items or rcfg.max_train_items) != rcfg.max_train_items
        or (config.stage1_max_audio_s or rcfg.train_crop_s) != rcfg.train_crop_s
    )


def _stage1_run(config: Config, name: str, data: RetrievalData) -> dict[str, Any]:
    """What trains stage-1 model ``name`` (PaSST: chapter 02's own): its config, captions and
    budget."""
    tcfg = teacher_config(config, name)
    return dict(
        config=replace(tcfg, train_crop_s=config.stage1_max_audio_s or tcfg.train_crop_s),
        items=data.training_items(
            tcfg.pretrain_corpora, config.stage1_max_train_items or tcfg.max_train_items
        ),
        num_epochs=config.stage1_epochs or tcfg.train.num_epochs,
        max_steps=stage1_steps(config, name),
        lr=tcfg.train.lr,
    )


def stage1_steps(config: Config, name: str) -> int | None:
    """The stage-1 optimizer steps of model ``name`` (``None``: ``stage1_epochs``):
    ``mobilenet_stage1_steps`` for MobileNet when set, else ``stage1_steps``."""
    if name == "mobilenet" and config.mobilenet_stage1_steps is not None:
        return config.mobilenet_stage1_steps
    return config.stage1_steps


def stage1_entry(config: Config, name: str, seed: int, data: RetrievalData) -> Run:
    """The run-store entry of stage-1 model ``name`` (its key identifies the run; with
    ``retrieval.select``, :func:`~audiorepro.experiments.retrieval.weights_key`, the weights)."""
    if name == "passt" and not own_passt_teacher(config):
        return retrieval.pretrain_entry(config.retrieval, seed, data)
    run = _stage1_run(config, name, data)
    run_cfg = retrieval.resolve_pretrained(run.pop("config"), data)
    return retrieval.run_entry(
        f"stage1-{name}", run_cfg, seed, validation=data.validation, run_store=store(), **run
    )


def stage1_teacher(
    config: Config, name: str, seed: int, data: RetrievalData, **kwargs: Any
) -> DualEncoder:
    """Stage 1 (paper (b) §3, §4.5): teacher ``name`` pretrained with L_sup on the three corpora.

    PaSST is chapter 01's pretrained model (:func:`~audiorepro.experiments.retrieval.pretrain`,
    the same run) unless :func:`own_passt_teacher`. ATST and MobileNet (and an own PaSST) follow
    the same recipe from their stage-0 (or AudioSet) weights with ``stage1_steps`` steps (or
    ``stage1_epochs``), at most ``stage1_max_train_items`` captions per corpus and random crops
    of ``stage1_max_audio_s`` (evaluation still sees chapter 01's ``max_audio_s``). Trained
    once, then reloaded, with the weights ``retrieval.select`` picks: the best mAP@10 on the
    validation split (at the end of every epoch and the last step), as the papers select, or the
    final ones.
    """
    if name == "passt" and not own_passt_teacher(config):
        return retrieval.pretrain(config.retrieval, seed, data, **kwargs)
    run = _stage1_run(config, name, data)
    return retrieval.run_training(
        f"stage1-{name}", run.pop("config"), seed, data, run_store=store(), **run, **kwargs
    )


def caption_preprocessing(model: DualEncoder) -> str:
    """What the text side does to a caption before embedding it, as recorded with teacher
    embeddings: a student with other preprocessing would be distilled from other text."""
    text = model.text_encoder
    return (
        f"lowercase, strip punctuation; tokenizer {Path(text.name_or_path).name}; "
        f"max_length {getattr(text, 'max_length', MAX_TOKENS)}"
    )


def teacher_embeddings(
    model: DualEncoder,
    items: Sequence[CaptionItem],
    features: Mapping[str, torch.Tensor],
    config: retrieval.Config,
    *,
    name: str,
    path: str | os.PathLike[str] | None = None,
) -> TeacherEmbeddings:
    """One stage-1 model's embeddings of every training audio and every distinct caption, keyed
    by audio id (:attr:`CaptionItem.key`) and caption text; saved atomically to ``path`` when
    given and read back from there if it already exists.

    Each audio is the start of its recording, ``config.train_frames`` frames: exactly the crop
    that stage 2 trains on (:func:`train_distilled` with ``config``, from :func:`stage2_config`),
    so the targets describe the audio the student hears. The crop is recorded in the metadata
    (``crop_frames``) and checked by :func:`train_distilled`."""
    if path is not None and Path(str(path) + ".json").is_file():
        return TeacherEmbeddings.load(path)
    keys = list(dict.fromkeys(i.key for i in items))
    captions = list(dict.fromkeys(i.caption for i in items))
    frames = config.train_frames
    with torch_threads(config.train.torch_threads):  # the targets of stage 2: its threads
        store = compute_teacher_embeddings(
            lambda ids: retrieval.embed_recordings(
                model, ids, features, frames, config.eval_batch_size
            ),
            lambda texts: retrieval.embed_captions(model, texts),
            keys,
            captions,
            batch_size=max(len(keys), len(captions), 1),
            metadata={
                "teacher": name,
                "caption_preprocessing": caption_preprocessing(model),
                "audio_encoder": config.model.audio_encoder,
                "crop": "start",
                "crop_frames": frames,
            },
        )
    if path is not None:
        store.save(path)
    return store


def teacher_store_spec(
    name: str, stage1_key: str, items: Sequence[CaptionItem], config: retrieval.Config
) -> dict[str, Any]:
    """The run-store identity of teacher ``name``'s embeddings: the stage-1 run, the training
    items, and the crop they were embedded at (the start of each clip, ``config.train_frames``),
    so stores of another stage-2 crop never mix."""
    return {
        "teacher": name,
        "stage1": stage1_key,
        "items": retrieval.items_digest(items),
        "crop": "start",
        "crop_frames": config.train_frames,
        "eval_batch_size": config.eval_batch_size,
    }


def teacher_stores(
    config: Config,
    seed: int,
    data: RetrievalData,
    items: Sequence[CaptionItem],
    **kwargs: Any,
) -> dict[str, Path]:
    """``{name: store path}`` of the M stage-1 models of ``seed`` (trained or reloaded), each
    having embedded ``items`` once at the stage-2 crop with its selected weights (kept in
    :func:`store` under ``teachers``, keyed by :func:`teacher_store_spec` with the weights'
    :func:`~audiorepro.experiments.retrieval.weights_key`). A teacher is loaded only to fill
    a missing store: a store's key names its weights without them."""
    paths = {}
    for name in config.teachers:
        run_cfg = stage2_config(config, name)
        key = retrieval.weights_key(stage1_entry(config, name, seed, data).key, run_cfg.select)
        spec = teacher_store_spec(name, key, items, run_cfg)

        def build(
            folder: Path, cfg: Any = run_cfg, name: str = name, key: str = key
        ) -> dict[str, Any]:
            model = stage1_teacher(config, name, seed, data, **kwargs)
            if model.weights_key != key:  # the store would be filed under other weights
                raise RuntimeError(
                    f"teacher {name!r}: its weights are {model.weights_key}, its store's key "
                    f"names {key}"
                )
            features = data.features_for(cfg.model)
            teacher_embeddings(model, items, features, cfg, name=name, path=folder / "store")
            return {}

        run = store().cached("teachers", spec, build, lambda run: run)
        paths[name] = run.path / "store"
    return paths


def teacher_ensemble(
    config: Config,
    seed: int,
    data: RetrievalData,
    items: Sequence[CaptionItem],
    **kwargs: Any,
) -> TeacherEnsemble:
    """The stores of :func:`teacher_stores` joined into one lookup of Ĉ."""
    return TeacherEnsemble.load(list(teacher_stores(config, seed, data, items, **kwargs).values()))


def train_distilled(
    model: DualEncoder,
    items: Sequence[CaptionItem],
    features: Mapping[str, torch.Tensor],
    config: retrieval.Config,
    ensemble: TeacherEnsemble,
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
    selection: retrieval.Selection | None = None,
    callbacks: Sequence[Any] = (),
    progress: str = "auto",
    **train_changes: Any,
) -> Any:
    """Stage 2 (paper (b) §3): fine-tune ``model`` in place on ``items`` with L_sup + λ·L_dist.

    Each batch's targets are looked up in ``ensemble`` by audio id and caption text for the
    global batch (all processes). Every clip enters as its start, ``config.train_frames`` frames,
    the crop the teachers embedded (:func:`teacher_embeddings`; the paper uses whole clips);
    no caption swaps (the targets are keyed by the captions the teachers embedded). With
    ``max_steps`` the run takes exactly that many optimizer steps, the cosine spanning them
    (:func:`~audiorepro.experiments.retrieval.step_budget`), else ``num_epochs``;
    ``train_changes`` set other Trainer fields (``checkpoint_every``, ...). Returns the Trainer's
    ``TrainResult``; with ``out_dir`` the run writes checkpoints there (every
    :func:`~audiorepro.experiments.retrieval.checkpoint_every` steps unless ``checkpoint_every``
    is given; the frozen text encoder left out) and ``resume=True`` continues from the last
    (``model`` built as the interrupted run's was, which gives the same frozen weights). With
    ``selection`` (a :class:`~audiorepro.experiments.retrieval.Selection` of ``model``) the run
    is evaluated on the validation split at the end of every epoch and at its last step, and the
    best weights are kept, as in chapter 01. ``callbacks`` are further Trainer callbacks.

    Raises:
        TeacherEmbeddingsError: before any training, when the teachers lack training items, have
            another projection size, embedded captions with other preprocessing or audio at
            another crop.
    """
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
                f"embedded the first {meta['crop_frames']} frames of each clip, but this stage-2 "
                f"run trains on the first {config.train_frames}"
            )
    student = DistillationStudent(model, lam=lam, dist_only=dist_only)
    dataset = CaptionDataset(
        items, features, max_frames=config.train_frames, crop="start", seed=seed,
        freqm=config.train.freqm, timem=config.train.timem,
    )  # fmt: skip

    def loss_fn(module: nn.Module, batch: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        targets = batch_targets(
            ensemble,
            batch["keys"],
            batch["captions"],
            tau=target_tau,
            device=batch["feats"].device,
        )
        return module(
            batch["feats"],
            batch["lengths"],
            batch["captions"],
            batch["audio_ids"],
            targets.p_audio,
            targets.p_caption,
        )

    train_cfg = config.train.trainer_config(len(dataset), seed=seed, num_epochs=num_epochs, lr=lr)
    train_cfg = retrieval.step_budget(train_cfg, len(dataset), max_steps)
    if out_dir is not None and "checkpoint_every" not in train_changes:
        train_changes["checkpoint_every"] = retrieval.checkpoint_every(train_cfg, len(dataset))
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
            retrieval.epoch_setter(dataset),
            retrieval.text_cache_saver(model),
            *keep,
            *callbacks,
        ],
        checkpoint_frozen=False,
        progress=progress,
    )
    with torch_threads(config.train.torch_threads):
        return trainer.fit(resume=resume)


def finetune_items(config: Config, data: RetrievalData) -> list[CaptionItem]:
    """Stage 2's training captions: the Clotho development split (at most
    ``finetune_max_items``)."""
    return list(data.finetune[: config.finetune_max_items])


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
    the same budget). The student is selected on the validation split as in stage 1
    (``retrieval.select``: the best mAP@10 or the final weights, both saved). Trained once per
    configuration (keyed by the stage-1 models' weights), then reloaded; a run killed before it
    finished continues from its last checkpoint when called again
    (:func:`~audiorepro.experiments.retrieval.trained_model`). ``callbacks`` are further
    Trainer callbacks of the stage-2 run."""
    lam = config.lam if lam is None else lam
    dist_only = config.dist_only if dist_only is None else dist_only
    run_cfg = stage2_config(config, name)
    items = finetune_items(config, data)
    base = stage1_teacher(config, name, seed, data, progress=progress)
    features = data.features_for(run_cfg.model)
    run = distill_entry(config, name, seed, data, lam=lam, dist_only=dist_only)

    def train(model: DualEncoder, staging: Path, selection: retrieval.Selection) -> Any:
        ensemble = teacher_ensemble(config, seed, data, items, progress=progress)
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

    return retrieval.trained_model(
        run, run_cfg, seed, train, data=data, init=base, run_store=store()
    )


def distill_entry(
    config: Config, name: str, seed: int, data: RetrievalData, *, lam: float | None = None,
    dist_only: bool | None = None,
) -> Run:  # fmt: skip
    """The run-store entry of :func:`distill` (its key covers the stage-1 weights of the
    student and of every teacher; their stage 0 must exist, or it is trained now)."""
    run_cfg = stage2_config(config, name)
    select = run_cfg.select
    return retrieval.run_entry(
        f"distill-{name}",
        run_cfg,
        seed,
        items=finetune_items(config, data),
        validation=data.validation,
        num_epochs=config.finetune_epochs,
        max_steps=config.finetune_steps,
        lr=config.finetune_lr,
        init=retrieval.weights_key(stage1_entry(config, name, seed, data).key, select),
        run_store=store(),
        teachers=[
            retrieval.weights_key(stage1_entry(config, t, seed, data).key, select)
            for t in config.teachers
        ],
        lam=config.lam if lam is None else lam,
        dist_only=config.dist_only if dist_only is None else dist_only,
        target_tau=config.target_tau,
        crop="start",
    )


#: What :func:`train_ahead` trains for each stage (a job's kind: ``stage0``, ``stage1``,
#: ``stores``, ``distill`` (the students at λ = ``lam``), ``sweep`` (the λ sweep's)); the runs a
#: kind starts from come with it.
AHEAD: dict[str, tuple[str, ...]] = {
    "stage1": ("stage0", "stage1"),
    "distill": ("stage1", "stores", "distill"),
    "sweep": ("stage1", "stores", "sweep"),
    "chapter": ("stage0", "stage1", "stores", "distill", "sweep"),
}


def train_ahead(config: Config, data: RetrievalData, stage: str) -> None:
    """Train the missing runs of ``stage`` side by side (:func:`chapter_tasks`,
    :func:`~audiorepro.experiments.retrieval.train_graph`) before the pages' loops reload them:
    ``stage1`` (stage 0 of every teacher, then the stage-1 run of every teacher and seed),
    ``distill`` (each seed's teacher stores, then every student at λ = ``lam``), ``sweep``
    (every run of the λ sweep) or ``chapter`` (all of them; what page 01 runs under
    ``embedded``). Does nothing where
    :func:`~audiorepro.experiments.retrieval.side_by_side_workers` is 1."""
    if stage not in AHEAD:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(AHEAD)}")
    rcfg = config.retrieval
    workers = retrieval.side_by_side_workers(rcfg)
    if workers <= 1:
        return
    for name in config.teachers:  # each front end's features once, here, not in every worker
        data.features_for(teacher_config(config, name).model)
    retrieval.train_graph(rcfg, data, chapter_tasks(config, data, stage), workers=workers)


#: Rough seconds of one job under ``embedded`` on one thread (from the book's ledgers), only
#: to start the costliest remaining path first.
JOB_SECONDS = {
    "stage0": 60.0, "stage1": 45.0, "stage1/mobilenet": 60.0, "stores": 15.0, "distill": 20.0,
}  # fmt: skip


def chapter_tasks(
    config: Config, data: RetrievalData, stage: str = "chapter"
) -> dict[Any, Task[retrieval.Job]]:
    """The missing runs of ``stage`` (:data:`AHEAD`) of chapter 02 as one graph for
    :func:`~audiorepro.experiments.retrieval.train_graph`: each teacher's stage 0 (keyed by its
    run key), its stage-1 run of every seed after it, each seed's teacher stores after that
    seed's stage-1 runs, and every student of stage 2 (λ = ``lam``, the λ sweep; a run in both
    trains once) after its seed's stores. Runs already in the store are left out; whatever
    waits on a missing run stays in, since its key is only known once that run exists."""
    if stage not in AHEAD:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(AHEAD)}")
    kinds = AHEAD[stage]
    tasks: dict[Any, Task[retrieval.Job]] = {}
    names = list(config.teachers)
    items = finetune_items(config, data)
    first: dict[str, tuple[Any, ...]] = {}
    for name in names:
        cfg = teacher_config(config, name)
        key = retrieval.stage0_key(cfg)
        first[name] = ()
        if key is not None and not retrieval.stage0_ready(cfg, data):
            job = retrieval.Job(retrieval.stage0_checkpoint, cfg)
            tasks.setdefault(("stage0", key), Task(job, cost=JOB_SECONDS["stage0"]))
            first[name] = (("stage0", key),)
    students: set[tuple[str, float]] = set()
    if "distill" in kinds:
        students |= {(n, config.lam) for n in names}
    if "sweep" in kinds:
        students |= {(n, lam) for n in config.sweep_models for lam in config.lambdas}
    for seed in config.seeds:
        stage1: tuple[Any, ...] = ()
        for name in names:
            if first[name] or not stage1_entry(config, name, seed, data).complete:
                job = retrieval.Job(stage1_teacher, config, {"name": name, "seed": seed})
                cost = JOB_SECONDS.get(f"stage1/{name}", JOB_SECONDS["stage1"])
                tasks[("stage1", name, seed)] = Task(job, first[name], cost)
                stage1 += (("stage1", name, seed),)
        if "stores" not in kinds:
            continue
        stores: tuple[Any, ...] = ()
        if stage1 or not all(_store_entry(config, n, seed, data, items).complete for n in names):
            job = retrieval.Job(teacher_stores, config, {"seed": seed, "items": items})
            tasks[("stores", seed)] = Task(job, stage1, JOB_SECONDS["stores"])
            stores = (("stores", seed),)
        for name, lam in sorted(students, key=lambda s: (s[0] != "mobilenet", s)):
            if not stores and distill_entry(config, name, seed, data, lam=lam).complete:
                continue
            job = retrieval.Job(distill, config, {"name": name, "seed": seed, "lam": lam})
            tasks[("distill", name, lam, seed)] = Task(job, stores, JOB_SECONDS["distill"])
    return tasks


def _store_entry(
    config: Config, name: str, seed: int, data: RetrievalData, items: Sequence[CaptionItem]
) -> Run:
    """The run-store entry of teacher ``name``'s embeddings of ``items`` (:func:`teacher_stores`)."""
    cfg = stage2_config(config, name)
    key = retrieval.weights_key(stage1_entry(config, name, seed, data).key, cfg.select)
    return store().run("teachers", teacher_store_spec(name, key, items, cfg))


def ensemble_similarity(
    models: Sequence[DualEncoder],
    cfgs: Sequence[retrieval.Config],
    data: RetrievalData,
) -> torch.Tensor:
    """Paper (b) Table 2, SID 1: the mean of the models' (captions × recordings) cosine
    similarity matrices on the evaluation split, each model on its own front end."""
    if len(models) != len(cfgs):
        raise ValueError(f"{len(models)} models for {len(cfgs)} configurations")
    scores = [
        retrieval.similarity_matrix(m, data.eval_set, data.features_for(c.model), c)
        for m, c in zip(models, cfgs, strict=True)
    ]
    return torch.from_numpy(ensemble_scores(scores)).float()


# ------------------------------------------------------------------------------ analysis


def training_top1(
    config: Config, seed: int, data: RetrievalData, **kwargs: Any
) -> dict[str, float]:
    """Training-caption top-1 (:func:`~audiorepro.distillation.caption_top1`) of each stage-1
    model of ``seed`` and of their ensemble (Ĉ, the targets' source), on the stage-2 training
    captions and clips, read from the teacher stores: ``{name: share, "ensemble": share}``.
    Whether the ensemble fits the training captions better than a member is whether its
    targets can teach that member anything."""
    items = finetune_items(config, data)
    paths = teacher_stores(config, seed, data, items, **kwargs)
    ids, captions = [i.key for i in items], [i.caption for i in items]
    block = config.analysis_block_size
    out = {
        name: caption_top1(TeacherEnsemble.load([path]), ids, captions, block)
        for name, path in paths.items()
    }
    out["ensemble"] = caption_top1(
        TeacherEnsemble.load(list(paths.values())), ids, captions, block
    )
    return out


def chance_levels(data: RetrievalData, config: Config | None = None) -> dict[str, float]:
    """Chance levels (fractions) of the chapter's numbers: mAP@10 and R@k of a random ranking of
    the evaluation split's clips (:func:`~audiorepro.metrics.retrieval.chance_metrics`) and, with
    ``config``, ``train_top1``: one over the stage-2 training clips."""
    out = chance_metrics(len(data.eval_set.keys))
    if config is not None:
        out["train_top1"] = 1.0 / len({i.key for i in finetune_items(config, data)})
    return out


def captions_of_several_clips(config: Config, data: RetrievalData) -> pd.DataFrame:
    """How many development captions describe more than one clip, measured
    (:func:`~audiorepro.data.retrieval.caption_sharing`): on the whole Clotho development split
    and on the stage-2 training captions, the share (%) written word for word for several clips,
    the share generic (embedded corpora only: the generator's flag, NaN on the real corpus), and
    either."""
    rows = []
    for label, items in (
        ("Clotho development split", data.finetune),
        ("stage-2 training captions", finetune_items(config, data)),
    ):
        flags = generic_flags(data.root, "development", items)
        shares = caption_sharing(items, flags)
        rows.append(
            {
                "captions": label,
                "items": int(shares["captions"]),
                "clips": int(shares["clips"]),
                "word for word on several clips (%)": 100 * shares["shared"],
                "distinct shared texts": int(shares["shared_texts"]),
                "generic (%)": 100 * shares["generic"],
                "either (%)": 100 * shares["shared_or_generic"],
            }
        )
    return pd.DataFrame(rows).set_index("captions").round(2)


def target_summary(
    config: Config, seed: int, data: RetrievalData, ensemble: TeacherEnsemble
) -> dict[str, float]:
    """What the stage-2 targets of ``seed`` carry beyond the one-hot targets, for the ledger:
    :func:`~audiorepro.distillation.target_departure` in batches of the stage-2 batch size
    (PaSST's), and the shares of training captions shared word for word and generic (the latter
    only on the embedded corpora, which label them)."""
    items = finetune_items(config, data)
    departure = target_departure(
        ensemble,
        [i.key for i in items],
        [i.caption for i in items],
        batch_size=config.retrieval.train.batch_size,
        tau=config.target_tau,
        seed=seed,
    )
    sharing = caption_sharing(items, generic_flags(data.root, "development", items))
    out = departure | {"shared_captions": sharing["shared"]}
    if not math.isnan(sharing["generic"]):
        out["generic_captions"] = sharing["generic"]
    return out


# ------------------------------------------------------------------------------ evaluation


def encoder_sizes(config: Config) -> pd.DataFrame:
    """The three audio encoders in the paper's configuration and in ours, in millions of
    parameters."""
    from audiorepro.models.atst import atst
    from audiorepro.models.mobilenet import mobilenet
    from audiorepro.models.passt import passt

    def millions(module: nn.Module) -> float:
        return round(sum(p.numel() for p in module.parameters()) / 1e6, 2)

    ours = config.retrieval.model.passt_variant
    return pd.DataFrame(
        [
            {
                "encoder": "PaSST",
                "paper": "n (chapter 01 paper preset)",
                "paper M params": millions(passt("n")),
                "ours": ours,
                "ours M params": millions(passt(ours)),
            },
            {
                "encoder": "ATST-Frame",
                "paper": "base",
                "paper M params": millions(atst("base")),
                "ours": config.atst_variant,
                "ours M params": millions(atst(config.atst_variant)),
            },
            {
                "encoder": "MobileNetV3",
                "paper": "mn40_as_ext",
                "paper M params": millions(mobilenet("mn40_as_ext")),
                "ours": config.mobilenet_variant,
                "ours M params": millions(mobilenet(config.mobilenet_variant)),
            },
        ]
    )


def evaluate(model: DualEncoder, config: Config, name: str, data: RetrievalData) -> dict:
    """Text-to-audio metrics of ``model`` (teacher ``name``'s architecture) on the evaluation
    split, on its own front end."""
    tcfg = teacher_config(config, name)
    return retrieval.evaluate(model, data.eval_set, data.features_for(tcfg.model), tcfg)


def evaluate_and_record(
    model: DualEncoder,
    config: Config,
    name: str,
    data: RetrievalData,
    *,
    page: str,
    preset: str,
    seed: int,
    tags: Mapping[str, Any],
    extra: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """:func:`evaluate` ``model`` and append the metrics, its training throughput
    (:func:`~audiorepro.experiments.retrieval.throughput`) and ``extra`` to the ledger, tagged
    ``{"model": name} | tags``."""
    metrics = evaluate(model, config, name, data)
    reporting.record_result(
        CHAPTER,
        page,
        metrics | retrieval.throughput(model) | dict(extra or {}),
        preset=preset,
        seed=seed,
        config=to_dict(config),  # the teacher's own config is teacher_config(config, name)
        tags={"model": name} | dict(tags),
    )
    return metrics


def _record_ensemble(
    models: Sequence[DualEncoder],
    config: Config,
    data: RetrievalData,
    *,
    page: str,
    preset: str,
    seed: int,
    stage: str,
    extra: Mapping[str, float] | None = None,
) -> None:
    """Score the ensemble of ``models`` (one per teacher, :func:`ensemble_similarity`) and record
    it with ``extra``, tagged ``{"model": "ensemble", "stage": stage}`` (and λ when
    distilled)."""
    cfgs = [teacher_config(config, name) for name in config.teachers]
    scores = ensemble_similarity(models, cfgs, data)
    reporting.record_result(
        CHAPTER,
        page,
        retrieval_metrics(scores, data.eval_set.targets) | dict(extra or {}),
        preset=preset,
        seed=seed,
        config=to_dict(config),
        tags=_tags("ensemble", stage, config.lam if stage == "distilled" else None),
    )


def _record_stage1(
    config: Config, data: RetrievalData, seed: int, *, page: str, preset: str
) -> dict[str, DualEncoder]:
    """The M stage-1 models of ``seed`` and their ensemble, each scored on the evaluation split
    and recorded with its training-caption top-1 (``train_top1``, :func:`training_top1`)."""
    models = {name: stage1_teacher(config, name, seed, data) for name in config.teachers}
    top1 = training_top1(config, seed, data)
    for name, model in models.items():
        evaluate_and_record(
            model, config, name, data, page=page, preset=preset, seed=seed,
            tags={"stage": "stage1"}, extra={"train_top1": top1[name]},
        )  # fmt: skip
    _record_ensemble(
        list(models.values()), config, data, page=page, preset=preset, seed=seed,
        stage="stage1", extra={"train_top1": top1["ensemble"]},
    )  # fmt: skip
    return models


def evaluate_teachers(
    config: Config, data: RetrievalData, *, preset: str, page: str
) -> dict[tuple[str, int], DualEncoder]:
    """Every stage-1 model of every seed (trained or reloaded) and each seed's stage-1 ensemble,
    scored and recorded with tags ``{"model": name or "ensemble", "stage": "stage1"}`` and the
    training-caption top-1; returns ``{(name, seed): model}``. Missing runs train side by side
    first (:func:`train_ahead`)."""
    train_ahead(config, data, "stage1")
    out = {}
    for seed in config.seeds:
        models = _record_stage1(config, data, seed, page=page, preset=preset)
        out |= {(name, seed): model for name, model in models.items()}
    return out


def stage0_table(config: Config, data: RetrievalData, *, page: str, preset: str) -> pd.DataFrame:
    """Stage 0 of the teachers other than PaSST (whose stage 0 is chapter 01's): the tagging run
    of each one's own variant (:func:`teacher_config`), its held-out tagging mAP beside chance,
    recorded in this chapter's ledger
    (:func:`~audiorepro.experiments.retrieval.stage0_table`)."""
    names = [n for n in config.teachers if n != "passt"]
    return retrieval.stage0_table(
        config.retrieval, data, names, page=page, preset=preset, chapter=CHAPTER,
        configs={n: teacher_config(config, n) for n in names},
    )  # fmt: skip


def evaluate_models(
    config: Config, data: RetrievalData, *, preset: str, page: str, stage1: bool = True
) -> dict[tuple[str, int], DualEncoder]:
    """The Table 2 analogue, seed by seed: the stage-1 models and their ensemble (when
    ``stage1``, as :func:`evaluate_teachers`), each distilled student (λ = ``lam``) scored and
    recorded, then the ensemble of the students (tags ``{"model": "ensemble", "stage":
    "distilled", "lam": lam}``). Returns the students, ``{(name, seed): model}``. Missing
    runs train side by side first (:func:`train_ahead`)."""
    train_ahead(config, data, "stage1")
    train_ahead(config, data, "distill")
    students = {}
    for seed in config.seeds:
        if stage1:
            _record_stage1(config, data, seed, page=page, preset=preset)
        for name in config.teachers:
            students[name, seed] = distill(config, name, seed, data)
            evaluate_and_record(
                students[name, seed], config, name, data, page=page, preset=preset, seed=seed,
                tags={"stage": "distilled", "lam": config.lam},
            )  # fmt: skip
        models = [students[name, seed] for name in config.teachers]
        _record_ensemble(
            models, config, data, page=page, preset=preset, seed=seed, stage="distilled"
        )
    return students


def evaluate_sweep(config: Config, data: RetrievalData, *, preset: str, page: str) -> None:
    """The λ sweep: every model of ``sweep_models``, λ of ``lambdas`` and seed, distilled (or
    reloaded) with the same ``finetune_steps``, scored and recorded with tags ``{"model",
    "stage": "distilled", "lam"}``. Missing runs train side by side first (:func:`train_ahead`)."""
    train_ahead(config, data, "sweep")
    for name in config.sweep_models:
        for lam in config.lambdas:
            for seed in config.seeds:
                model = distill(config, name, seed, data, lam=lam)
                evaluate_and_record(
                    model,
                    config,
                    name,
                    data,
                    page=page,
                    preset=preset,
                    seed=seed,
                    tags={"stage": "distilled", "lam": lam},
                )


# ------------------------------------------------------------------------------ findings


def current(records: Sequence[Mapping[str, Any]], config: Config) -> list[Mapping[str, Any]]:
    """The ledger ``records`` of ``config`` (its ``config_hash``) and its seeds only: what every
    table, finding and check of this chapter reads
    (:func:`audiorepro.reporting.current_records`)."""
    return reporting.current_records(records, config, config.seeds)


def _tags(name: str, stage: str, lam: float | None = None) -> dict[str, Any]:
    return {"model": name, "stage": stage} | ({} if lam is None else {"lam": lam})


def _mean(
    records: Sequence[Mapping[str, Any]],
    preset: str,
    tags: Mapping[str, Any],
    metric: str = "mAP@10",
) -> float:
    vals = reporting.values(
        records, chapter=CHAPTER, preset=preset, metric=metric, tags=tags, scale=100
    )
    return reporting.mean_std(vals)[0] if vals else float("nan")


TOP1 = "train_top1"
"""The ledger key of the training-caption top-1 (:func:`training_top1`)."""


def table(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    *,
    stage1: bool = True,
    distilled: bool = True,
    ensemble_label: str = "ensemble of the distilled models",
    chance: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Mean ± std over seeds (in %) of the stage-1 models and their ensemble, the distilled ones
    (λ = ``lam``) and their ensemble, read from the ledger: the evaluation metrics and, for
    stage 1, the training-caption top-1 (so the table shows whether the teachers' ensemble
    beats each model before stage 2). With ``chance`` (:func:`chance_levels`), a last row of
    chance levels.
    Only the records of ``config`` count (:func:`current`)."""
    records = current(records, config)
    rows = []
    if stage1:
        label = (lambda n: f"{n}, stage 1") if distilled else str
        rows += [(label(n), _tags(n, "stage1")) for n in config.teachers]
        rows.append(("ensemble of the stage-1 models", _tags("ensemble", "stage1")))
    if distilled:
        label = (lambda n: f"{n}, distilled (λ = {config.lam:g})") if stage1 else str
        rows += [(label(n), _tags(n, "distilled", config.lam)) for n in config.teachers]
        rows.append((ensemble_label, _tags("ensemble", "distilled", config.lam)))
    metrics = [*retrieval.METRICS, *((TOP1,) if stage1 else ())]
    out = reporting.seed_table(
        records, rows, chapter=CHAPTER, preset=preset, metrics=metrics, scale=100
    )
    if stage1:
        # the top-1 is measured for the teachers only: no number is not "not run" for students
        out.loc[[i for i, (_, t) in enumerate(rows) if t["stage"] == "distilled"], TOP1] = "—"
    if chance is not None:
        row = {"setting": "chance (random ranking)", "seeds": "—"}
        row |= {m: f"{100 * chance[m]:.2f}" if m in chance else "—" for m in metrics}
        out = pd.concat([out, pd.DataFrame([row])], ignore_index=True)
    return out.rename(columns={TOP1: "training top-1"})


table2 = functools.partial(table, stage1=True, distilled=True)
"""The Table 2 analogue: stage 1 and its ensemble, distilled and its ensemble."""


def lambda_sweep(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str
) -> pd.DataFrame:
    """mAP@10 (%) per model and λ, mean and std over seeds, with the stage-1 mean of each
    model (the dotted line of :func:`~audiorepro.plotting.lambda_sweep`).
    Only the records of ``config`` count (:func:`current`)."""
    records = current(records, config)
    rows = []
    for name in config.sweep_models:
        base = _mean(records, preset, _tags(name, "stage1"))
        for lam in config.lambdas:
            vals = reporting.values(
                records,
                chapter=CHAPTER,
                preset=preset,
                metric="mAP@10",
                tags=_tags(name, "distilled", lam),
                scale=100,
            )
            mean, std = reporting.mean_std(vals) if vals else (float("nan"), float("nan"))
            rows.append(
                {
                    "model": name,
                    "λ": lam,
                    "mAP@10 mean": mean,
                    "std": std,
                    "seeds": len(vals),
                    "stage 1": base,
                }
            )
    return pd.DataFrame(rows)


PAPER: dict[str, dict[tuple[str, str], float]] = {
    # Table 2: mAP@10 (%) of each model after stage 1 and after distillation fine-tuning, and
    # of the ensemble of the three distilled models (SID 1).
    "Table 2": {
        ("passt", "stage1"): 35.7,
        ("atst", "stage1"): 32.31,
        ("mobilenet", "stage1"): 34.06,
        ("passt", "distilled"): 39.77,
        ("atst", "distilled"): 38.96,
        ("mobilenet", "distilled"): 37.73,
        ("ensemble", "distilled"): 41.90,
    },
}
"""The paper's numbers (paper (b), mAP@10 in %), by the table that reports them."""

MUST_BEAT_CHANCE = 3.0
"""A compared run must beat this many times chance mAP@10 to count as having learned."""


def claims(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str
) -> list[dict[str, Any]]:
    """The chapter's claims, each ``{"kind", "model", "claim", "tags", "versus"}``: the setting
    the paper says wins (``tags``) and the one it beats (``versus``). Distillation (λ = ``lam``)
    improves each model over its stage-1 model (``kind="distill"``); λ = ``lam`` beats λ = 0
    for each swept model (``"lambda"``); the ensemble of the distilled models beats the best
    single distilled one (``"ensemble"``, best by the ledger's mean mAP@10).
    Only the records of ``config`` count (:func:`current`)."""
    records = current(records, config)
    lam = config.lam
    out = []
    for name in config.teachers:
        distilled = _tags(name, "distilled", lam)
        out.append(
            dict(kind="distill", model=name, claim=f"distillation fine-tuning improves {name}",
                 tags=distilled, versus=_tags(name, "stage1"))
        )  # fmt: skip
        if name in config.sweep_models:
            out.append(
                dict(kind="lambda", model=name,
                     claim=f"λ = {lam:g} beats λ = 0 (plain fine-tuning) for {name}",
                     tags=distilled, versus=_tags(name, "distilled", 0.0))
            )  # fmt: skip
    best = max(config.teachers, key=lambda n: _mean(records, preset, _tags(n, "distilled", lam)))
    out.append(
        dict(kind="ensemble", model=best,
             claim=f"the ensemble beats the best single distilled model ({best})",
             tags=_tags("ensemble", "distilled", lam), versus=_tags(best, "distilled", lam))
    )  # fmt: skip
    return out


def _floor(chance: Mapping[str, float]) -> float:
    return MUST_BEAT_CHANCE * 100 * chance["mAP@10"]


def loss_ceiling(config: Config, name: str) -> float:
    """The late NT-Xent loss (``late_loss``; a distilled run's L_sup part) the runs of teacher
    ``name`` must stay below for a finding on them to count: ln(batch) - ln 2 at the batch
    size that model trains with (:func:`retrieval.loss_ceiling`; MobileNet's is its own)."""
    return retrieval.loss_ceiling(teacher_config(config, name))


def _judge(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str, claim: Mapping[str, Any],
    chance: Mapping[str, float],
) -> reporting.Finding:  # fmt: skip
    """The verdict on one of :func:`claims`: mAP@10 beyond the seed spread, every compared run
    above 3 × chance and its late loss below :func:`loss_ceiling` (an ensemble has no loss and
    is judged by its mAP@10 alone)."""
    get = functools.partial(reporting.values, records, chapter=CHAPTER, preset=preset)
    losses = tuple(get(metric="late_loss", tags=t) for t in (claim["tags"], claim["versus"]))
    return reporting.finding(
        claim["claim"], get(metric="mAP@10", tags=claim["tags"], scale=100),
        get(metric="mAP@10", tags=claim["versus"], scale=100), metric="mAP@10",
        must_beat=_floor(chance), digits=2, losses=losses,
        loss_ceiling=loss_ceiling(config, claim["model"]),
    )  # fmt: skip


def findings(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    chance: Mapping[str, float],
) -> pd.DataFrame:
    """The paper-vs-ours table: each model before and after distillation, both ensembles, beside
    Table 2, with a verdict on each of :func:`claims`: reproduces, contradicts or inconclusive,
    the latter also when a compared run does not beat 3 × chance mAP@10 (``chance`` from
    :func:`chance_levels`) or keeps its late loss at or above :func:`loss_ceiling`.
    Only the records of ``config`` count (:func:`current`)."""
    records = current(records, config)
    paper = PAPER["Table 2"]
    row = functools.partial(
        PaperRow, metric="mAP@10", chapter=CHAPTER, scale=100, digits=2, source="Table 2",
        must_beat=_floor(chance),
    )  # fmt: skip
    by_kind = {(c["tags"]["model"], c["kind"]): c for c in claims(records, config, preset)}

    def judged(name: str) -> dict[str, Any]:
        return {"loss_metric": "late_loss", "loss_ceiling": loss_ceiling(config, name)}

    rows = []
    for name in config.teachers:
        rows.append(
            row(f"{name}, stage 1", paper=paper[name, "stage1"], tags=_tags(name, "stage1"))
        )
        c = by_kind[name, "distill"]
        rows.append(
            row(f"{name}, distilled", paper=paper[name, "distilled"], tags=c["tags"],
                claim=c["claim"], versus=c["versus"], **judged(name))
        )  # fmt: skip
        if (name, "lambda") in by_kind:
            c = by_kind[name, "lambda"]
            rows.append(
                row(f"{name}, distilled (λ = {config.lam:g}) vs λ = 0", paper=None,
                    tags=c["tags"], claim=c["claim"], versus=c["versus"], source="",
                    **judged(name))
            )  # fmt: skip
    rows.append(
        row("ensemble of the stage-1 models", paper=None, tags=_tags("ensemble", "stage1"),
            source="")
    )  # fmt: skip
    c = by_kind["ensemble", "ensemble"]
    rows.append(
        row("ensemble of the distilled models", paper=paper["ensemble", "distilled"],
            tags=c["tags"], claim=c["claim"], versus=c["versus"], **judged(c["model"]))
    )  # fmt: skip
    return reporting.paper_vs_ours(rows, preset=preset, records=records)


def _pct(value: float, digits: int = 2) -> str:
    return "not run" if math.isnan(value) else f"{value:.{digits}f}"


def _check_distill(mean: Any, name: str, chance: Mapping[str, float]) -> tuple[str, str, str]:
    """Distillation can improve ``name`` only if the stage-1 ensemble beats it."""
    ens, own = _tags("ensemble", "stage1"), _tags(name, "stage1")
    e, m = mean(ens), mean(own)
    et, mt = mean(ens, metric=TOP1), mean(own, metric=TOP1)
    measured = (
        f"mAP@10 on the evaluation split: stage-1 ensemble {_pct(e)}, {name} {_pct(m)}; "
        f"training-caption top-1: ensemble {_pct(et, 1)} %, {name} {_pct(mt, 1)} % "
        f"(chance {100 * chance.get(TOP1, math.nan):.1f} %)"
    )
    if math.isnan(e) or math.isnan(et):
        reading = "not measured: run page 01 (stage-1 ensemble and top-1)"
    elif e > m and et > mt:
        reading = (
            f"the targets know more than {name} on both counts, so the mechanism is there; "
            "the student did not take it up at this budget"
        )
    else:
        where = (
            "both counts" if e <= m and et <= mt
            else "the evaluation split" if e <= m else "the training captions"
        )  # fmt: skip
        reading = (
            f"the stage-1 ensemble is not better than {name} on {where}: its targets have "
            "little to teach this student"
        )
    return "the teachers' ensemble beats this model before stage 2", measured, reading


def _check_lambda(
    records: Sequence[Mapping[str, Any]], preset: str, mean: Any
) -> tuple[str, str, str]:
    """λ = 1 can differ from λ = 0 only if the batch targets depart from one-hot (page 02)."""
    check = "the targets carry something beyond the one-hot pairs"
    hits = reporting.select(
        records, chapter=CHAPTER, preset=preset, metric="offpair_audio",
        tags={"analysis": "beliefs"},
    )  # fmt: skip
    if not hits:
        return check, "not measured: run page 02", ""
    keys = ("offpair_audio", "offpair_caption", "offpair_uniform", "batch_size")
    off_a, off_c, flat, size = (float(np.mean([r["metrics"][k] for r in hits])) for k in keys)
    top1 = mean(_tags("ensemble", "stage1"), metric=TOP1)
    measured = (
        f"in a batch of {int(size)}, p̂_a moves {off_a:.3f} and p̂_c {off_c:.3f} of their mass "
        f"off the paired entries (one-hot 0, uniform {flat:.3f}); the ensemble's "
        f"training-caption top-1 is {_pct(top1, 1)} %"
    )
    share = off_a / flat if flat > 0 else math.nan
    if share < 0.1:
        reading = (
            "the targets are nearly one-hot: L_dist repeats L_sup, so λ = 1 acts as a doubled "
            "L_sup rather than as new information"
        )
    elif share > 0.9:
        reading = (
            "the targets are nearly uniform: the teachers cannot tell the batch's clips apart, "
            "so L_dist pulls the student towards flat beliefs"
        )
    else:
        reading = (
            f"the targets move {100 * share:.0f} % of the uniform level off the pairs; whether "
            "that mass lands on clips the captions describe is what the ensemble's top-1 bounds"
        )
    return check, measured, reading


def _check_ensemble(mean: Any, config: Config, tags: Mapping[str, Any]) -> tuple[str, str, str]:
    """An ensemble helps members of comparable quality whose errors cancel."""
    members = {n: mean(_tags(n, "distilled", config.lam)) for n in config.teachers}
    ranked = sorted(members.values(), reverse=True)
    ensemble, average = mean(tags), float(np.mean(ranked))
    measured = "distilled mAP@10: " + ", ".join(f"{n} {_pct(v)}" for n, v in members.items())
    measured += f"; ensemble {_pct(ensemble)}"
    gap = ranked[0] - ranked[1] if len(ranked) > 1 else math.nan
    if ensemble > average:
        reading = (
            f"averaging beats the members' mean ({_pct(average)}) but not the best member, "
            f"which leads the next by {_pct(gap)} points"
        )
    else:
        reading = (
            f"the ensemble does not beat even the members' mean ({_pct(average)}): their "
            "errors do not cancel"
        )
    return "the distilled members are comparably good", measured, reading


def mechanisms(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    chance: Mapping[str, float],
) -> pd.DataFrame:
    """For each of :func:`claims` that does not reproduce, a measured check of the mechanism it
    rests on, from the ledger: for "distillation improves X", whether the stage-1 ensemble beats
    X on the evaluation split and on training-caption top-1 (the targets know more than the
    student); for λ = 1 vs λ = 0, how far the batch targets depart from one-hot (page 02's
    :func:`target_summary`); for the ensemble, whether it beats the members' mean and how far
    the best member leads. Columns: claim, verdict, check, measured, reading.
    Only the records of ``config`` count (:func:`current`)."""
    records = current(records, config)
    mean = functools.partial(_mean, records, preset)
    rows = []
    for c in claims(records, config, preset):
        found = _judge(records, config, preset, c, chance)
        if found.verdict == "reproduces":
            continue
        if c["kind"] == "distill":
            check, measured, reading = _check_distill(mean, c["model"], chance)
        elif c["kind"] == "lambda":
            check, measured, reading = _check_lambda(records, preset, mean)
        else:
            check, measured, reading = _check_ensemble(mean, config, c["tags"])
        verdict = found.verdict + (f" ({found.reason})" if found.reason else "")
        rows.append(
            {"claim": c["claim"], "verdict": verdict, "check": check, "measured": measured,
             "reading": reading}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=["claim", "verdict", "check", "measured", "reading"])


def gains(records: Sequence[Mapping[str, Any]], config: Config, preset: str) -> pd.DataFrame:
    """Distilled − stage 1 mAP@10 per model (percentage points), ours beside the paper's.
    Only the records of ``config`` count (:func:`current`)."""
    records = current(records, config)
    paper = PAPER["Table 2"]
    return pd.DataFrame(
        [
            {
                "model": name,
                "distilled − stage 1 (pp)": _mean(
                    records, preset, _tags(name, "distilled", config.lam)
                )
                - _mean(records, preset, _tags(name, "stage1")),
                "paper (pp)": round(paper[name, "distilled"] - paper[name, "stage1"], 2),
            }
            for name in config.teachers
        ]
    ).round(2)
