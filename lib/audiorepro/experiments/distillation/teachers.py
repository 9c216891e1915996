"""Stage 1 and its teachers (paper (b) §3, §4.2): the M dual encoders pretrained with L_sup,
their stage 0, their embeddings of the stage-2 training set in the run store, and the ensemble
of those stores that gives the distillation targets."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from audiorepro.config import replace
from audiorepro.data.retrieval import CaptionItem, caption_sharing, generic_flags
from audiorepro.distillation import (
    TeacherEmbeddings,
    TeacherEnsemble,
    caption_top1,
    compute_teacher_embeddings,
    target_departure,
)
from audiorepro.experiments.distillation.config import (
    CHAPTER,
    Config,
    own_passt_teacher,
    stage1_steps,
    stage2_config,
    store,
    teacher_config,
)
from audiorepro.experiments.distillation.data import finetune_items
from audiorepro.experiments.retrieval.config import Config as RetrievalConfig
from audiorepro.experiments.retrieval.data import RetrievalData
from audiorepro.experiments.retrieval.evaluate import embed_captions, embed_recordings
from audiorepro.experiments.retrieval.runs import (
    items_digest,
    resolve_pretrained,
    run_entry,
    run_training,
    weights_key,
)
from audiorepro.experiments.retrieval.stages import pretrain, pretrain_entry
from audiorepro.experiments.retrieval.stages import stage0_table as retrieval_stage0_table
from audiorepro.models.dual_encoder import DualEncoder
from audiorepro.models.text import MAX_TOKENS
from audiorepro.repro import torch_threads
from audiorepro.storage import Run


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


def stage1_entry(config: Config, name: str, seed: int, data: RetrievalData) -> Run:
    """The run-store entry of stage-1 model ``name`` (its key identifies the run; with
    ``retrieval.select``, :func:`~audiorepro.experiments.retrieval.runs.weights_key`, the
    weights)."""
    if name == "passt" and not own_passt_teacher(config):
        return pretrain_entry(config.retrieval, seed, data)
    run = _stage1_run(config, name, data)
    run_cfg = resolve_pretrained(run.pop("config"), data)
    return run_entry(
        f"stage1-{name}", run_cfg, seed, validation=data.validation, run_store=store(), **run
    )


def stage1_teacher(
    config: Config, name: str, seed: int, data: RetrievalData, **kwargs: Any
) -> DualEncoder:
    """Stage 1 (paper (b) §3, §4.5): teacher ``name`` pretrained with L_sup on the three corpora.

    PaSST is chapter 01's pretrained model
    (:func:`~audiorepro.experiments.retrieval.stages.pretrain`, the same run) unless
    :func:`own_passt_teacher`. ATST and MobileNet (and an own PaSST) follow the same recipe from
    their stage-0 (or AudioSet) weights with ``stage1_steps`` steps (or ``stage1_epochs``), at most
    ``stage1_max_train_items`` captions per corpus and random crops of ``stage1_max_audio_s``
    (evaluation still sees chapter 01's ``max_audio_s``). Trained once, then reloaded, with the
    weights ``retrieval.select`` picks: the best mAP@10 on the validation split (at the end of
    every epoch and the last step), as the papers select, or the final ones."""
    if name == "passt" and not own_passt_teacher(config):
        return pretrain(config.retrieval, seed, data, **kwargs)
    run = _stage1_run(config, name, data)
    return run_training(
        f"stage1-{name}", run.pop("config"), seed, data, run_store=store(), **run, **kwargs
    )


def stage0_table(config: Config, data: RetrievalData, *, page: str, preset: str) -> pd.DataFrame:
    """Stage 0 of the teachers other than PaSST (whose stage 0 is chapter 01's): the tagging run
    of each one's own variant (:func:`teacher_config`), its held-out tagging mAP beside chance,
    recorded in this chapter's ledger
    (:func:`~audiorepro.experiments.retrieval.stages.stage0_table`)."""
    names = [n for n in config.teachers if n != "passt"]
    return retrieval_stage0_table(
        config.retrieval, data, names, page=page, preset=preset, chapter=CHAPTER,
        configs={n: teacher_config(config, n) for n in names},
    )  # fmt: skip


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
    config: RetrievalConfig,
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
            lambda ids: embed_recordings(model, ids, features, frames, config.eval_batch_size),
            lambda texts: embed_captions(model, texts),
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
    name: str, stage1_key: str, items: Sequence[CaptionItem], config: RetrievalConfig
) -> dict[str, Any]:
    """The run-store identity of teacher ``name``'s embeddings: the stage-1 run, the training
    items, and the crop they were embedded at (the start of each clip, ``config.train_frames``),
    so stores of another stage-2 crop never mix."""
    return {
        "teacher": name,
        "stage1": stage1_key,
        "items": items_digest(items),
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
    :func:`~audiorepro.experiments.retrieval.runs.weights_key`). A teacher is loaded only to fill
    a missing store: a store's key names its weights without them."""
    paths = {}
    for name in config.teachers:
        run_cfg = stage2_config(config, name)
        key = weights_key(stage1_entry(config, name, seed, data).key, run_cfg.select)
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


def store_entry(
    config: Config, name: str, seed: int, data: RetrievalData, items: Sequence[CaptionItem]
) -> Run:
    """The run-store entry of teacher ``name``'s embeddings of ``items`` (:func:`teacher_stores`)."""
    cfg = stage2_config(config, name)
    key = weights_key(stage1_entry(config, name, seed, data).key, cfg.select)
    return store().run("teachers", teacher_store_spec(name, key, items, cfg))


def teacher_ensemble(
    config: Config,
    seed: int,
    data: RetrievalData,
    items: Sequence[CaptionItem],
    **kwargs: Any,
) -> TeacherEnsemble:
    """The stores of :func:`teacher_stores` joined into one lookup of Ĉ."""
    return TeacherEnsemble.load(list(teacher_stores(config, seed, data, items, **kwargs).values()))


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
