"""Chapter 02: ensemble knowledge distillation for audio retrieval (paper (b)).

The two-stage procedure of paper (b) §3 on top of chapter 01
(:mod:`audiorepro.experiments.retrieval`):

1. **Stage 1** (:func:`stage1_teacher`): M dual encoders, PaSST, ATST-Frame and MobileNetV3, each
   with the text encoder, pretrained with L_sup on ClothoV2, AudioCaps and WavCaps through
   chapter 01's :func:`~audiorepro.experiments.retrieval.run_training`. The PaSST teacher *is*
   chapter 01's pretrained model (the same run in chapter 01's run store) when the
   configurations agree, so the book trains it once.
2. **Correspondences** (:func:`teacher_embeddings`, :func:`teacher_ensemble`): every stage-1
   model embeds each training audio and caption of the fine-tuning set once; the stores are
   joined into a :class:`~audiorepro.distillation.TeacherEnsemble` whose rows give any block of
   Ĉ = (1/M) Σ_m C^m by one matrix product.
3. **Stage 2** (:func:`train_distilled`, :func:`distill`): each stage-1 model is fine-tuned on the
   Clotho-layout corpus alone with L = L_sup + λ·L_dist
   (:class:`~audiorepro.models.dual_encoder.DistillationStudent`), the targets of each (global)
   batch looked up from the ensemble (:func:`~audiorepro.distillation.batch_targets`).
4. **Ensembles** (:func:`ensemble_similarity`): the distilled models' similarity matrices,
   averaged.

Everything runs through the project's :class:`~audiorepro.training.Trainer`, so stage 2 resumes
bit for bit on CPU and runs unchanged under ``accelerate launch``; trained models and teacher
stores live in the :class:`~audiorepro.storage.RunStore` of chapter ``02_distillation``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from audiorepro import reporting
from audiorepro.config import ConfigError, field, load_preset, replace, to_dict
from audiorepro.data.retrieval import CaptionDataset, CaptionItem, collate_captions
from audiorepro.distillation import (
    DEFAULT_TAU,
    TeacherEmbeddings,
    TeacherEnsemble,
    batch_targets,
    captions_for_clip,
    compute_teacher_embeddings,
    ensemble_scores,
    soft_targets,
    top_matches,
)
from audiorepro.experiments import retrieval
from audiorepro.experiments.retrieval import RetrievalData, load_audio, load_data
from audiorepro.metrics.retrieval import retrieval_metrics
from audiorepro.models.dual_encoder import DistillationStudent, DualEncoder
from audiorepro.models.text import MAX_TOKENS
from audiorepro.paths import repo_root
from audiorepro.reporting import PaperRow
from audiorepro.storage import Run, RunStore
from audiorepro.training.loop import Trainer

__all__ = [
    "CHAPTER",
    "PAPER",
    "PRESETS",
    "TEACHER_MODELS",
    "Config",
    "DistillationStudent",
    "caption_preprocessing",
    "captions_for_clip",
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
    "soft_targets",
    "stage1_teacher",
    "store",
    "table",
    "table2",
    "teacher_config",
    "teacher_embeddings",
    "teacher_ensemble",
    "top_matches",
    "train_distilled",
]

CHAPTER = "02_distillation"
PRESETS = repo_root() / "book" / CHAPTER / "presets"
"""The chapter's YAML presets: smoke, embedded, paper."""
TEACHER_MODELS = ("passt", "atst", "mobilenet")
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
    stage1_epochs: int | None = field(
        20, help="Stage-1 epochs of ATST and MobileNet (§4.5: 20; None: chapter 01's)."
    )
    stage1_max_train_items: int | None = field(
        None, help="Stage-1 captions per corpus for ATST and MobileNet (None: chapter 01's)."
    )
    stage1_max_audio_s: float | None = field(
        None, help="Stage-1 training crop of ATST and MobileNet in s (None: chapter 01's)."
    )
    finetune_epochs: int = field(20, help="Stage-2 epochs on the Clotho development split.")
    finetune_lr: float = field(2e-5, help="Stage-2 peak learning rate (§4.5: as pretraining).")
    finetune_max_items: int | None = field(
        None, help="Stage-2 captions (None: all of chapter 01's fine-tuning split)."
    )
    finetune_max_audio_s: float | None = field(
        None, help="Stage-2 training crop in s (None: chapter 01's max_audio_s)."
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


def _stage1_run(config: Config, name: str, data: RetrievalData) -> dict[str, Any]:
    """What trains stage-1 model ``name`` other than PaSST: its config, captions and epochs."""
    tcfg = teacher_config(config, name)
    max_audio_s = config.stage1_max_audio_s or tcfg.max_audio_s
    return dict(
        config=replace(tcfg, max_audio_s=max_audio_s),
        items=data.training_items(
            tcfg.pretrain_corpora, config.stage1_max_train_items or tcfg.max_train_items
        ),
        num_epochs=config.stage1_epochs or tcfg.train.num_epochs,
        lr=tcfg.train.lr,
    )


def stage1_entry(config: Config, name: str, seed: int, data: RetrievalData) -> Run:
    """The run-store entry of stage-1 model ``name`` (its key identifies the weights)."""
    if name == "passt":
        return retrieval.pretrain_entry(config.retrieval, seed, data)
    run = _stage1_run(config, name, data)
    return retrieval.run_entry(f"stage1-{name}", run.pop("config"), seed, run_store=store(), **run)


def stage1_teacher(
    config: Config, name: str, seed: int, data: RetrievalData, **kwargs: Any
) -> DualEncoder:
    """Stage 1 (paper (b) §3, §4.5): teacher ``name`` pretrained with L_sup on the three corpora.

    PaSST is chapter 01's pretrained model (:func:`~audiorepro.experiments.retrieval.pretrain`,
    the same run). ATST and MobileNet follow the same recipe with ``stage1_epochs``, at most
    ``stage1_max_train_items`` captions per corpus and crops of ``stage1_max_audio_s``
    (evaluation still sees chapter 01's ``max_audio_s``). Trained once, then reloaded.
    """
    if name == "passt":
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
    """One stage-1 model's embeddings of every training audio (the start of each recording, at
    most ``config.max_frames``, as at evaluation) and every distinct caption, keyed by audio id
    (:attr:`CaptionItem.key`) and caption text; saved atomically to ``path`` when given and read
    back from there if it already exists."""
    if path is not None and Path(str(path) + ".json").is_file():
        return TeacherEmbeddings.load(path)
    keys = list(dict.fromkeys(i.key for i in items))
    captions = list(dict.fromkeys(i.caption for i in items))
    store = compute_teacher_embeddings(
        lambda ids: retrieval.embed_recordings(
            model, ids, features, config.max_frames, config.eval_batch_size
        ),
        lambda texts: retrieval.embed_captions(model, texts),
        keys,
        captions,
        batch_size=max(len(keys), len(captions), 1),
        metadata={
            "teacher": name,
            "caption_preprocessing": caption_preprocessing(model),
            "audio_encoder": config.model.audio_encoder,
        },
    )
    if path is not None:
        store.save(path)
    return store


def teacher_ensemble(
    config: Config,
    seed: int,
    data: RetrievalData,
    items: Sequence[CaptionItem],
    **kwargs: Any,
) -> TeacherEnsemble:
    """The M stage-1 models of ``seed`` (trained or reloaded), each embedding ``items`` once
    (kept in :func:`store` under ``teachers``, keyed by the stage-1 run and the items), joined
    into one lookup of Ĉ."""
    paths = []
    for name in config.teachers:
        tcfg = teacher_config(config, name)
        model = stage1_teacher(config, name, seed, data, **kwargs)
        spec = {
            "teacher": name,
            "stage1": stage1_entry(config, name, seed, data).key,
            "items": retrieval.items_digest(items),
            "max_frames": tcfg.max_frames,
            "eval_batch_size": tcfg.eval_batch_size,
        }

        def build(folder: Path, model: DualEncoder = model, tcfg: Any = tcfg, name: str = name):
            features = data.features_for(tcfg.model)
            teacher_embeddings(model, items, features, tcfg, name=name, path=folder / "store")
            return {}

        run = store().cached("teachers", spec, build, lambda run: run)
        paths.append(run.path / "store")
    return TeacherEnsemble.load(paths)


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
    lam: float = 1.0,
    dist_only: bool = False,
    target_tau: float = DEFAULT_TAU,
    out_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    progress: str = "auto",
    **train_changes: Any,
) -> Any:
    """Stage 2 (paper (b) §3): fine-tune ``model`` in place on ``items`` with L_sup + λ·L_dist.

    Each batch's targets are looked up in ``ensemble`` by audio id and caption text for the
    global batch (all processes); crops of ``config.max_frames``, no caption swaps (the targets are
    keyed by the captions the teachers embedded). Returns the Trainer's ``TrainResult``; with
    ``out_dir`` the run writes checkpoints there and ``resume=True`` continues from the last.

    Raises:
        TeacherEmbeddingsError: before any training, when the teachers lack training items, have
            another projection size or embedded captions with other preprocessing.
    """
    ensemble.check(
        audio_ids=[i.key for i in items],
        captions=[i.caption for i in items],
        caption_preprocessing=caption_preprocessing(model),
        dim=model.audio_projection.out_features,
    )
    student = DistillationStudent(model, lam=lam, dist_only=dist_only)
    dataset = CaptionDataset(items, features, max_frames=config.max_frames, seed=seed)

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

    trainer = Trainer(
        student,
        loss_fn,
        dataset,
        config.train.trainer_config(
            len(dataset), seed=seed, num_epochs=num_epochs, lr=lr, **train_changes
        ),
        collate_fn=functools.partial(collate_captions, pad_value=model.pad_value),
        out_dir=out_dir,
        callbacks=[retrieval.epoch_setter(dataset)],
        progress=progress,
    )
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
) -> DualEncoder:
    """Stage 2 of teacher ``name`` and ``seed``: its stage-1 model fine-tuned on the Clotho
    development split with targets from the ensemble of that seed's M stage-1 models (trained or
    reloaded first). ``lam`` = 0 gives plain fine-tuning with L_sup (the λ-sweep baseline).
    Trained once per configuration (keyed by the stage-1 runs' keys), then reloaded."""
    lam = config.lam if lam is None else lam
    dist_only = config.dist_only if dist_only is None else dist_only
    tcfg = teacher_config(config, name)
    run_cfg = replace(tcfg, max_audio_s=config.finetune_max_audio_s or tcfg.max_audio_s)
    items = finetune_items(config, data)
    base = stage1_teacher(config, name, seed, data, progress=progress)
    features = data.features_for(tcfg.model)
    run = retrieval.run_entry(
        f"distill-{name}",
        run_cfg,
        seed,
        items=items,
        num_epochs=config.finetune_epochs,
        lr=config.finetune_lr,
        init=base.run_key,
        run_store=store(),
        teachers=[stage1_entry(config, t, seed, data).key for t in config.teachers],
        lam=lam,
        dist_only=dist_only,
        target_tau=config.target_tau,
    )

    def train(model: DualEncoder) -> Any:
        ensemble = teacher_ensemble(config, seed, data, items, progress=progress)
        return train_distilled(
            model,
            items,
            features,
            run_cfg,
            ensemble,
            seed=seed,
            num_epochs=config.finetune_epochs,
            lr=config.finetune_lr,
            lam=lam,
            dist_only=dist_only,
            target_tau=config.target_tau,
            progress=progress,
        )

    return retrieval.trained_model(run, run_cfg, seed, train, init=base, run_store=store())


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
) -> dict[str, float]:
    """:func:`evaluate` ``model`` and append the metrics to the ledger, tagged
    ``{"model": name} | tags``."""
    metrics = evaluate(model, config, name, data)
    reporting.record_result(
        CHAPTER,
        page,
        metrics,
        preset=preset,
        seed=seed,
        config={
            "distillation": to_dict(config),
            "retrieval": to_dict(teacher_config(config, name)),
        },
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
) -> None:
    cfgs = [teacher_config(config, name) for name in config.teachers]
    scores = ensemble_similarity(models, cfgs, data)
    reporting.record_result(
        CHAPTER,
        page,
        retrieval_metrics(scores, data.eval_set.targets),
        preset=preset,
        seed=seed,
        config=to_dict(config),
        tags={"model": "ensemble", "stage": "distilled", "lam": config.lam},
    )


def evaluate_teachers(
    config: Config, data: RetrievalData, *, preset: str, page: str
) -> dict[tuple[str, int], DualEncoder]:
    """Every stage-1 model of every seed (trained or reloaded), scored and recorded with tags
    ``{"model": name, "stage": "stage1"}``; returns ``{(name, seed): model}``."""
    out = {}
    for seed in config.seeds:
        for name in config.teachers:
            model = stage1_teacher(config, name, seed, data)
            evaluate_and_record(
                model,
                config,
                name,
                data,
                page=page,
                preset=preset,
                seed=seed,
                tags={"stage": "stage1"},
            )
            out[name, seed] = model
    return out


def evaluate_models(
    config: Config, data: RetrievalData, *, preset: str, page: str, stage1: bool = True
) -> dict[tuple[str, int], DualEncoder]:
    """The Table 2 analogue, seed by seed: each stage-1 model (when ``stage1``) and its distilled
    student (λ = ``lam``) scored and recorded, then the ensemble of the students (tags
    ``{"model": "ensemble", ...}``). Returns the students, ``{(name, seed): model}``."""
    students = {}
    for seed in config.seeds:
        for name in config.teachers:
            if stage1:
                evaluate_and_record(
                    stage1_teacher(config, name, seed, data),
                    config,
                    name,
                    data,
                    page=page,
                    preset=preset,
                    seed=seed,
                    tags={"stage": "stage1"},
                )
            students[name, seed] = distill(config, name, seed, data)
            evaluate_and_record(
                students[name, seed],
                config,
                name,
                data,
                page=page,
                preset=preset,
                seed=seed,
                tags={"stage": "distilled", "lam": config.lam},
            )
        models = [students[name, seed] for name in config.teachers]
        _record_ensemble(models, config, data, page=page, preset=preset, seed=seed)
    return students


def evaluate_sweep(config: Config, data: RetrievalData, *, preset: str, page: str) -> None:
    """The λ sweep: every model of ``sweep_models``, λ of ``lambdas`` and seed, distilled (or
    reloaded), scored and recorded with tags ``{"model", "stage": "distilled", "lam"}``."""
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


def _tags(name: str, stage: str, lam: float | None = None) -> dict[str, Any]:
    return {"model": name, "stage": stage} | ({} if lam is None else {"lam": lam})


def _mean(records: Sequence[Mapping[str, Any]], preset: str, tags: Mapping[str, Any]) -> float:
    vals = reporting.values(
        records, chapter=CHAPTER, preset=preset, metric="mAP@10", tags=tags, scale=100
    )
    return reporting.mean_std(vals)[0] if vals else float("nan")


def table(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    *,
    stage1: bool = True,
    distilled: bool = True,
    ensemble_label: str = "ensemble of the distilled models",
) -> pd.DataFrame:
    """Mean ± std over seeds (in %) of the stage-1 models, the distilled ones (λ = ``lam``) and
    their ensemble, read from the ledger."""
    rows = []
    if stage1:
        label = (lambda n: f"{n}, stage 1") if distilled else str
        rows += [(label(n), _tags(n, "stage1")) for n in config.teachers]
    if distilled:
        label = (lambda n: f"{n}, distilled (λ = {config.lam:g})") if stage1 else str
        rows += [(label(n), _tags(n, "distilled", config.lam)) for n in config.teachers]
        rows.append((ensemble_label, _tags("ensemble", "distilled", config.lam)))
    return reporting.seed_table(
        records, rows, chapter=CHAPTER, preset=preset, metrics=retrieval.METRICS, scale=100
    )


table2 = functools.partial(table, stage1=True, distilled=True)
"""The Table 2 analogue: stage 1, distilled, ensemble."""


def lambda_sweep(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str
) -> pd.DataFrame:
    """mAP@10 (%) per model and λ, mean and std over seeds, with the stage-1 mean of each
    model (the dotted line of :func:`~audiorepro.plotting.lambda_sweep`)."""
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


def findings(records: Sequence[Mapping[str, Any]], config: Config, preset: str) -> pd.DataFrame:
    """The paper-vs-ours table: each model before and after distillation and the ensemble,
    beside Table 2, with the verdict on each of the paper's claims (distillation improves each
    model; λ = 1 beats λ = 0 for the swept models; the ensemble beats the best single
    student)."""
    paper = PAPER["Table 2"]
    row = functools.partial(
        PaperRow, metric="mAP@10", chapter=CHAPTER, scale=100, digits=2, source="Table 2"
    )
    rows = []
    for name in config.teachers:
        stage1, distilled = _tags(name, "stage1"), _tags(name, "distilled", config.lam)
        rows.append(row(f"{name}, stage 1", paper=paper[name, "stage1"], tags=stage1))
        rows.append(
            row(
                f"{name}, distilled",
                paper=paper[name, "distilled"],
                tags=distilled,
                claim=f"distillation fine-tuning improves {name}",
                versus=stage1,
            )
        )
        if name in config.sweep_models:
            rows.append(
                row(
                    f"{name}, distilled (λ = {config.lam:g}) vs λ = 0",
                    paper=None,
                    tags=distilled,
                    claim="λ = 1 beats λ = 0 (plain fine-tuning)",
                    versus=_tags(name, "distilled", 0.0),
                    source="",
                )
            )
    best = max(
        config.teachers, key=lambda n: _mean(records, preset, _tags(n, "distilled", config.lam))
    )
    rows.append(
        row(
            "ensemble of the distilled models",
            paper=paper["ensemble", "distilled"],
            tags=_tags("ensemble", "distilled", config.lam),
            claim=f"the ensemble beats the best single distilled model ({best})",
            versus=_tags(best, "distilled", config.lam),
        )
    )
    return reporting.paper_vs_ours(rows, preset=preset, records=records)


def gains(records: Sequence[Mapping[str, Any]], config: Config, preset: str) -> pd.DataFrame:
    """Distilled − stage 1 mAP@10 per model (percentage points), ours beside the paper's."""
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
