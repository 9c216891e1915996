"""Chapter 02 experiments: ensemble knowledge distillation for audio retrieval (paper (b)).

The two-stage procedure of paper (b) §3 on top of chapter 01:

1. **Stage 1** (:func:`stage1_teacher`): M dual encoders, PaSST, ATST-Frame and MobileNetV3, each
   with the text encoder, pretrained with L_sup on ClothoV2, AudioCaps and WavCaps through
   chapter 01's :func:`~audiorepro.training.retrieval.run_training`. The PaSST teacher *is*
   chapter 01's pretrained model when the configurations agree, so the book trains it once.
2. **Correspondences** (:func:`teacher_embeddings`, :func:`teacher_ensemble`): every stage-1
   model embeds each training audio and caption of the fine-tuning set once; the stores are
   joined into a :class:`~audiorepro.distillation.TeacherEnsemble` whose rows give any block of
   Ĉ = (1/M) Σ_m C^m by one matrix product.
3. **Stage 2** (:func:`train_distilled`, :func:`distill`): each stage-1 model is fine-tuned on the
   Clotho-layout corpus alone with L = L_sup + λ·L_dist, the targets of each (global) batch
   looked up from the ensemble (:func:`~audiorepro.distillation.batch_targets`).
4. **Ensembles** (:func:`ensemble_similarity`): the distilled models' similarity matrices,
   averaged.

Everything runs through the project's :class:`~audiorepro.training.Trainer`, so stage 2 resumes
bit for bit on CPU and runs unchanged under ``accelerate launch``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from audiorepro.config import ConfigError, field, to_dict
from audiorepro.data.retrieval import CaptionDataset, CaptionItem, collate_captions
from audiorepro.distillation import (
    DEFAULT_TAU,
    TeacherEmbeddings,
    TeacherEnsemble,
    batch_targets,
    compute_teacher_embeddings,
    ensemble_scores,
)
from audiorepro.losses.contrastive import gather_with_grad, nt_xent_logits
from audiorepro.losses.distillation import distillation_objective
from audiorepro.models.dual_encoder import DualEncoder
from audiorepro.models.text import MAX_TOKENS
from audiorepro.paths import data_dir
from audiorepro.training.loop import Trainer
from audiorepro.training.retrieval import (
    RetrievalConfig,
    RetrievalData,
    _EpochSetter,
    embed_captions,
    embed_recordings,
    pretrain,
    retrieval_train_config,
    run_training,
    similarity_matrix,
    trained_model,
)

__all__ = [
    "TEACHER_MODELS",
    "DistillationConfig",
    "DistillationStudent",
    "caption_preprocessing",
    "distill",
    "ensemble_similarity",
    "stage1_teacher",
    "teacher_config",
    "teacher_embeddings",
    "teacher_ensemble",
    "train_distilled",
]

TEACHER_MODELS = ("passt", "atst", "mobilenet")
"""The audio encoders of paper (b) §4.2, each paired with the text encoder."""


@dataclasses.dataclass(frozen=True)
class DistillationConfig:
    """Chapter 02: which teachers, how long each stage trains, and the distillation loss.

    The data, the text encoder, the PaSST configuration and the optimiser come from a chapter 01
    preset (``retrieval_preset``); this config says what chapter 02 changes.
    """

    retrieval_preset: str = field(
        "paper", help="Chapter 01 preset (book/01_retrieval/presets) of data, text and PaSST."
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
                f"DistillationConfig.teachers: expected some of {' | '.join(TEACHER_MODELS)}, "
                f"got {list(self.teachers)}"
            )
        for name in self.sweep_models:
            if name not in self.teachers:
                raise ConfigError(
                    f"DistillationConfig.sweep_models: {name!r} is not one of the teachers "
                    f"{list(self.teachers)}"
                )
        if self.lam < 0 or any(v < 0 for v in self.lambdas):
            raise ConfigError(
                f"DistillationConfig: λ must be >= 0, got {self.lam}, {self.lambdas}"
            )
        if not self.target_tau > 0:
            raise ConfigError(
                f"DistillationConfig.target_tau: expected > 0, got {self.target_tau}"
            )


def teacher_config(dcfg: DistillationConfig, rcfg: RetrievalConfig, name: str) -> RetrievalConfig:
    """The chapter 01 configuration of teacher ``name``: PaSST as chapter 01, ATST-Frame or
    MobileNet in its place (the same text encoder, space, loss and optimiser)."""
    if name == "passt":
        return rcfg
    if name == "atst":
        return dataclasses.replace(rcfg, audio_encoder="atst", atst_variant=dcfg.atst_variant)
    if name == "mobilenet":
        return dataclasses.replace(
            rcfg,
            audio_encoder="mobilenet",
            mobilenet_variant=dcfg.mobilenet_variant,
            batch_size=dcfg.mobilenet_batch_size or rcfg.batch_size,
        )
    raise ValueError(f"unknown teacher {name!r}; known: {', '.join(TEACHER_MODELS)}")


def _items_digest(items: Sequence[CaptionItem]) -> str:
    return hashlib.sha256("\n".join(i.key + i.caption for i in items).encode()).hexdigest()


def stage1_teacher(
    preset: str,
    dcfg: DistillationConfig,
    rcfg: RetrievalConfig,
    name: str,
    seed: int,
    data: RetrievalData,
    **kwargs: Any,
) -> DualEncoder:
    """Stage 1 (paper (b) §3, §4.5): teacher ``name`` pretrained with L_sup on the three corpora.

    PaSST is chapter 01's pretrained model (:func:`~audiorepro.training.retrieval.pretrain`, the
    same cached run). ATST and MobileNet follow the same recipe with ``stage1_epochs``, at most
    ``stage1_max_train_items`` captions per corpus and crops of ``stage1_max_audio_s`` (evaluation
    still sees chapter 01's ``max_audio_s``). Trained once per preset and seed, then reloaded.
    """
    if name == "passt":
        return pretrain(preset, rcfg, seed, data, **kwargs)
    tcfg = teacher_config(dcfg, rcfg, name)
    run_cfg = dataclasses.replace(tcfg, max_audio_s=dcfg.stage1_max_audio_s or tcfg.max_audio_s)
    items = data.training_items(
        tcfg.pretrain_corpora, dcfg.stage1_max_train_items or tcfg.max_train_items
    )
    model = run_training(
        f"stage1-{name}",
        preset,
        run_cfg,
        seed,
        data,
        items=items,
        num_epochs=dcfg.stage1_epochs or tcfg.num_epochs,
        lr=tcfg.lr,
        root=distillation_dir(),
        **kwargs,
    )
    return model


def _teacher_spec(dcfg: DistillationConfig, tcfg: RetrievalConfig, name: str) -> dict[str, Any]:
    """What defines stage-1 model ``name`` (a cache key)."""
    stage1 = [dcfg.stage1_epochs, dcfg.stage1_max_train_items, dcfg.stage1_max_audio_s]
    return {"name": name, "cfg": to_dict(tcfg), "stage1": None if name == "passt" else stage1}


def caption_preprocessing(model: DualEncoder) -> str:
    """What the text side does to a caption before embedding it, as recorded with teacher
    embeddings: a student with other preprocessing would be distilled from other text."""
    text = model.text_encoder
    return (
        f"lowercase, strip punctuation; tokenizer {Path(text.name_or_path).name}; "
        f"max_length {getattr(text, 'max_length', MAX_TOKENS)}"
    )


def distillation_dir() -> Path:
    """Where chapter 02 keeps its trained runs and teacher embeddings:
    ``<data dir>/runs/02_distillation`` (the PaSST teachers stay with chapter 01's runs)."""
    return data_dir() / "runs" / "02_distillation"


def teacher_embeddings(
    model: DualEncoder,
    items: Sequence[CaptionItem],
    features: Mapping[str, torch.Tensor],
    cfg: RetrievalConfig,
    *,
    name: str,
    path: str | os.PathLike[str] | None = None,
) -> TeacherEmbeddings:
    """One stage-1 model's embeddings of every training audio (the start of each recording, at
    most ``cfg.max_frames``, as at evaluation) and every distinct caption, keyed by audio id
    (:attr:`CaptionItem.key`) and caption text; saved atomically to ``path`` when given and read
    back from there if it already exists."""
    if path is not None and Path(str(path) + ".json").is_file():
        return TeacherEmbeddings.load(path)
    keys = list(dict.fromkeys(i.key for i in items))
    captions = list(dict.fromkeys(i.caption for i in items))
    store = compute_teacher_embeddings(
        lambda ids: embed_recordings(model, ids, features, cfg.max_frames, cfg.eval_batch_size),
        lambda texts: embed_captions(model, texts),
        keys,
        captions,
        batch_size=max(len(keys), len(captions), 1),
        metadata={
            "teacher": name,
            "caption_preprocessing": caption_preprocessing(model),
            "audio_encoder": cfg.audio_encoder,
        },
    )
    if path is not None:
        store.save(path)
    return store


def teacher_ensemble(
    preset: str,
    dcfg: DistillationConfig,
    rcfg: RetrievalConfig,
    seed: int,
    data: RetrievalData,
    items: Sequence[CaptionItem],
    **kwargs: Any,
) -> TeacherEnsemble:
    """The M stage-1 models of ``seed`` (trained or reloaded), each embedding ``items`` once
    (stored under :func:`distillation_dir`), joined into one lookup of Ĉ."""
    paths = []
    for name in dcfg.teachers:
        tcfg = teacher_config(dcfg, rcfg, name)
        model = stage1_teacher(preset, dcfg, rcfg, name, seed, data, **kwargs)
        key = json.dumps(
            {"teacher": _teacher_spec(dcfg, tcfg, name), "items": _items_digest(items)},
            sort_keys=True,
            default=str,
        )
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        path = distillation_dir() / preset / "teachers" / f"{name}-seed{seed}-{digest}"
        teacher_embeddings(model, items, data.features_for(tcfg), tcfg, name=name, path=path)
        paths.append(path)
    return TeacherEnsemble.load(paths)


class DistillationStudent(nn.Module):
    """A dual encoder trained on L = L_sup + λ·L_dist (paper (b) §3), as one module so that
    ``accelerate``'s DDP wrapper sees a single forward.

    The batch's audio and caption embeddings are all-gathered with gradient (the global batch
    under several processes, as chapter 01's NT-Xent), the (B_g, B_g) logits S = cos / τ computed
    once, and both losses taken from S: L_sup is chapter 01's NT-Xent
    (:func:`~audiorepro.losses.contrastive.nt_xent_logits`), L_dist the soft cross-entropies with
    the ensemble's targets (:func:`~audiorepro.losses.distillation.distillation_objective`).
    """

    def __init__(self, model: DualEncoder, lam: float = 1.0, dist_only: bool = False) -> None:
        super().__init__()
        self.model = model
        self.lam = lam
        self.dist_only = dist_only

    def forward(
        self,
        feats: torch.Tensor,
        lengths: torch.Tensor,
        captions: Sequence[str],
        audio_ids: torch.Tensor,
        p_audio: torch.Tensor,
        p_caption: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """One batch → ``{"loss", "loss_sup", "loss_dist"}`` over the global batch.

        Args:
            feats: (B, T, F) log-mel padded with the encoder's silence value.
            lengths: (B,) valid frames.
            captions: B caption texts; caption k describes audio k.
            audio_ids: (B,) audio ids, equal ids being positives of each other (L_sup).
            p_audio: p̂_a (B_g, B_g) of the global batch, columns sum to 1.
            p_caption: p̂_c (B_g, B_g), rows sum to 1.
        """
        audio = gather_with_grad(self.model.encode_audio(feats, lengths))  # (B_g, D)
        text = gather_with_grad(self.model.encode_text(captions))  # (B_g, D)
        ids = gather_with_grad(audio_ids)  # (B_g,)
        tau = self.model.loss.tau.abs()
        logits = F.normalize(audio, dim=-1) @ F.normalize(text, dim=-1).T / tau  # (B_g, B_g)
        return distillation_objective(
            logits,
            p_audio,
            p_caption,
            supervised=lambda s: nt_xent_logits(s, ids),
            lam=self.lam,
            dist_only=self.dist_only,
        )


def train_distilled(
    model: DualEncoder,
    items: Sequence[CaptionItem],
    features: Mapping[str, torch.Tensor],
    cfg: RetrievalConfig,
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
    global batch (all processes); crops of ``cfg.max_frames``, no caption swaps (the targets are
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
    dataset = CaptionDataset(items, features, max_frames=cfg.max_frames, seed=seed)

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
        retrieval_train_config(
            cfg, len(dataset), seed=seed, num_epochs=num_epochs, lr=lr, **train_changes
        ),
        collate_fn=functools.partial(collate_captions, pad_value=model.pad_value),
        out_dir=out_dir,
        callbacks=[_EpochSetter(dataset)],
        progress=progress,
    )
    return trainer.fit(resume=resume)


def finetune_items(dcfg: DistillationConfig, data: RetrievalData) -> list[CaptionItem]:
    """Stage 2's training captions: the Clotho development split (at most
    ``finetune_max_items``)."""
    return list(data.finetune[: dcfg.finetune_max_items])


def distill(
    preset: str,
    dcfg: DistillationConfig,
    rcfg: RetrievalConfig,
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
    Trained once per configuration, then reloaded."""
    lam = dcfg.lam if lam is None else lam
    dist_only = dcfg.dist_only if dist_only is None else dist_only
    tcfg = teacher_config(dcfg, rcfg, name)
    run_cfg = dataclasses.replace(tcfg, max_audio_s=dcfg.finetune_max_audio_s or tcfg.max_audio_s)
    items = finetune_items(dcfg, data)
    base = stage1_teacher(preset, dcfg, rcfg, name, seed, data, progress=progress)
    features = data.features_for(tcfg)

    def train(model: DualEncoder) -> Any:
        ensemble = teacher_ensemble(preset, dcfg, rcfg, seed, data, items, progress=progress)
        return train_distilled(
            model,
            items,
            features,
            run_cfg,
            ensemble,
            seed=seed,
            num_epochs=dcfg.finetune_epochs,
            lr=dcfg.finetune_lr,
            lam=lam,
            dist_only=dist_only,
            target_tau=dcfg.target_tau,
            progress=progress,
        )

    return trained_model(
        f"distill-{name}",
        preset,
        run_cfg,
        seed,
        train,
        init=base,
        root=distillation_dir(),
        teachers=[_teacher_spec(dcfg, teacher_config(dcfg, rcfg, t), t) for t in dcfg.teachers],
        items=_items_digest(items),
        num_epochs=dcfg.finetune_epochs,
        lr=dcfg.finetune_lr,
        lam=lam,
        dist_only=dist_only,
        target_tau=dcfg.target_tau,
    )


def ensemble_similarity(
    models: Sequence[DualEncoder],
    cfgs: Sequence[RetrievalConfig],
    data: RetrievalData,
) -> torch.Tensor:
    """Paper (b) Table 2, SID 1: the mean of the models' (captions × recordings) cosine
    similarity matrices on the evaluation split, each model on its own front end."""
    if len(models) != len(cfgs):
        raise ValueError(f"{len(models)} models for {len(cfgs)} configurations")
    scores = [
        similarity_matrix(m, data.eval_set, data.features_for(c), c)
        for m, c in zip(models, cfgs, strict=True)
    ]
    return torch.from_numpy(ensemble_scores(scores)).float()
