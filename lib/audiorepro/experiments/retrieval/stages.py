"""The chapter's stages as runs of the run store: stage 0 of each audio encoder, pretraining
(paper (a) §2.6), fine-tuning with and without caption augmentation (§3.5), and the ablations
(Table 3, Table 4, Figure 1), each with the entry that says whether it is trained."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from audiorepro import reporting
from audiorepro.config import replace, to_dict
from audiorepro.experiments.retrieval.config import CHAPTER, Config, store
from audiorepro.experiments.retrieval.data import RetrievalData, embed_captions, shares_random_text
from audiorepro.experiments.retrieval.evaluate import evaluate, throughput
from audiorepro.experiments.retrieval.runs import (
    resolve_pretrained,
    run_entry,
    run_training,
    weights_key,
)
from audiorepro.experiments.retrieval.stage0 import stage0_entry, stage0_report
from audiorepro.experiments.retrieval.train import steps_per_epoch
from audiorepro.models.audio_encoders import FRAMES_PER_SECOND
from audiorepro.models.dual_encoder import DualEncoder
from audiorepro.models.passt import scaled_time_patchout
from audiorepro.storage import Run


def stage0_checkpoint(config: Config, data: RetrievalData) -> Path | None:
    """The stage-0 checkpoint ``config.model`` starts from (trained if needed), or ``None``
    when it does not use ``audio_pretrained: stage0``."""
    resolved = resolve_pretrained(config, data).model.audio_pretrained
    return Path(resolved) if config.model.audio_pretrained == "stage0" else None


def stage0_ready(config: Config, data: RetrievalData) -> bool:
    """Whether the stage-0 run ``config.model`` starts from exists (or it needs none)."""
    if config.model.audio_pretrained != "stage0":
        return True
    return stage0_entry(
        config.model, config.stage0, run_store=store(), corpus=to_dict(config.corpus)
    ).complete


def stage0_key(config: Config) -> str | None:
    """The run key of the stage-0 run ``config.model`` starts from (complete or not), or
    ``None`` when it starts from something else: the identity of a stage-0 task."""
    if config.model.audio_pretrained != "stage0":
        return None
    return stage0_entry(
        config.model, config.stage0, run_store=store(), corpus=to_dict(config.corpus)
    ).key


def stage0_table(
    config: Config, data: RetrievalData, encoders: Sequence[str], *, page: str, preset: str,
    chapter: str = CHAPTER, configs: Mapping[str, Config] | None = None,
) -> pd.DataFrame:  # fmt: skip
    """Stage 0 of each audio encoder in ``encoders`` (trained if missing): held-out tagging mAP
    beside its chance level, steps and throughput; each row also goes to the ledger, tagged
    ``{"stage": "stage0", "encoder": name}``. An encoder is ``config`` with that
    ``model.audio_encoder``, or ``configs[name]`` when given (another chapter's variant, e.g.
    chapter 02's ATST-Frame and MobileNet configurations)."""
    rows = []
    for name in encoders:
        cfg = (configs or {}).get(name) or replace(config, **{"model.audio_encoder": name})
        path = stage0_checkpoint(cfg, data)
        if path is None:
            continue
        report = stage0_report(path)
        metrics = {
            "tagging_map": report["heldout_map"],
            "chance_map": report["heldout_chance_map"],
            "steps_per_s": report["steps_per_s"],
            "clips_per_s": report["steps_per_s"] * config.stage0.batch_size,
            "final_loss": report["history"]["losses"][-1],
        }
        reporting.record_result(
            chapter, page, metrics, preset=preset, seed=config.stage0.seed,
            config=to_dict(cfg), wall_time_s=report["seconds"],
            tags={"stage": "stage0", "encoder": name},
        )  # fmt: skip
        rows.append({
            "encoder": name,
            "tagging mAP (held out)": round(report["heldout_map"], 3),
            "chance": round(report["heldout_chance_map"], 3),
            "classes": len(report["classes"]),
            "train / held-out clips": f"{report['train_clips']} / {report['heldout_clips']}",
            "steps": report["steps"],
            "seconds": round(report["seconds"], 1),
            "steps/s": round(report["steps_per_s"], 2),
        })  # fmt: skip
    return pd.DataFrame(rows)


def pretrain_entry(config: Config, seed: int, data: RetrievalData) -> Run:
    """The run-store entry of :func:`pretrain` (its key identifies the pretrained weights)."""
    config = resolve_pretrained(config, data)
    return run_entry(
        "pretrain",
        config,
        seed,
        items=data.training_items(config.pretrain_corpora),
        validation=data.validation,
        num_epochs=config.train.num_epochs,
        lr=config.train.lr,
    )


def pretrain(config: Config, seed: int, data: RetrievalData, **kwargs: Any) -> DualEncoder:
    """Stage 1 (paper §2.6): contrastive pretraining on ``config.pretrain_corpora``."""
    return run_training(
        "pretrain",
        config,
        seed,
        data,
        items=data.training_items(config.pretrain_corpora),
        num_epochs=config.train.num_epochs,
        lr=config.train.lr,
        **kwargs,
    )


def finetune(
    config: Config, seed: int, data: RetrievalData, *, augment: bool, **kwargs: Any
) -> DualEncoder:
    """Stage 2 (§3.5): fine-tune the pretrained model on ClothoV2, with or without the caption
    swap (probability ``config.paraphrase_prob``). Pretrains first if no saved model exists."""
    base = pretrain(config, seed, data, **kwargs)
    return run_training(
        "finetune-aug" if augment else "finetune",
        config,
        seed,
        data,
        items=data.finetune,
        num_epochs=config.finetune_epochs,
        lr=config.finetune_lr,
        paraphrase_prob=config.paraphrase_prob if augment else 0.0,
        init=base,
        **kwargs,
    )


def finetune_entry(config: Config, seed: int, data: RetrievalData, *, augment: bool) -> Run:
    """The run-store entry of :func:`finetune` (its pretraining's stage 0 must exist,
    :func:`stage0_ready`, or it is trained now)."""
    base = pretrain_entry(config, seed, data)
    return run_entry(
        "finetune-aug" if augment else "finetune",
        replace(config, **{"model.audio_pretrained": None}),
        seed,
        items=data.finetune,
        validation=data.validation,
        num_epochs=config.finetune_epochs,
        lr=config.finetune_lr,
        paraphrase_prob=config.paraphrase_prob if augment else 0.0,
        init=weights_key(base.key, config.select),
    )


ABLATIONS = ("audio_encoder", "text_encoder", "corpora", "snippet_s")
"""The chapter's ablations: PaSST vs CNN14 (Table 3), pretrained vs random text encoder,
pretraining corpora (Table 4), snippet length (Figure 1)."""


def ablation_config(config: Config, kind: str, setting: str) -> Config:
    """``config`` with one factor changed. ``setting``: ``passt``/``cnn14``/``cnn10``,
    ``pretrained``/``random``, ``+``-joined corpora, or a snippet length in seconds (with a
    PaSST main model and ``snippet_variant`` set, every snippet length runs on that variant,
    PaSST-S20 in the paper; a PaSST whose time patchout is the variant's own drops the same
    share of each snippet's time patches as the variant does of its input,
    :func:`~audiorepro.models.passt.scaled_time_patchout`)."""
    if kind == "audio_encoder":
        return replace(config, **{"model.audio_encoder": setting})
    if kind == "text_encoder":
        if setting not in ("pretrained", "random"):
            raise ValueError(f"text_encoder setting must be pretrained or random, got {setting!r}")
        return replace(config, **{"model.text_pretrained": setting == "pretrained"})
    if kind == "corpora":
        return replace(config, pretrain_corpora=corpora_order(config, setting))
    if kind == "snippet_s":
        changes: dict[str, Any] = {"model.snippet_s": float(setting)}
        if config.model.audio_encoder == "passt":
            if config.snippet_variant is not None:
                changes["model.passt_variant"] = config.snippet_variant
            if config.model.s_patchout_t is None:  # the variant's, scaled to the snippet
                variant = changes.get("model.passt_variant", config.model.passt_variant)
                frames = int(round(float(setting) * FRAMES_PER_SECOND))
                changes["model.s_patchout_t"] = scaled_time_patchout(variant, frames)
        return replace(config, **changes)
    raise ValueError(f"unknown ablation {kind!r}; known: {', '.join(ABLATIONS)}")


def corpora_order(config: Config, setting: str) -> tuple[str, ...]:
    """The corpora of a ``+``-joined ``setting`` in the order of ``config.pretrain_corpora``
    (others after them, as written). The order is a name, not an experiment: the setting of
    the main system's corpora then is the main system's configuration, whose runs the
    reference setting of every other ablation already trained."""
    chosen = setting.split("+")
    base = [c for c in config.pretrain_corpora if c in chosen]
    return tuple(base + [c for c in chosen if c not in base])


def ablation_settings(config: Config) -> dict[str, list[str]]:
    """The settings each ablation compares, as ledger ``setting`` tags."""
    return {
        "audio_encoder": ["passt", "cnn14"],
        "text_encoder": ["pretrained", "random"],
        "corpora": list(config.corpus_combinations),
        "snippet_s": [str(s) for s in config.snippet_lengths_s],
    }


def run_ablation(
    config: Config, data: RetrievalData, kind: str, setting: str, seed: int, **kwargs: Any
) -> dict[str, float]:
    """Train one ablation run (:func:`ablation_budget`, on at most ``ablation_max_train_items``
    captions per corpus, crops of ``ablation_max_audio_s``), from the same ``audio_pretrained``
    weights as the main system, and return its evaluation metrics (clips cut at
    ``max_audio_s`` as in the main runs) with its throughput.

    An ablation run is a pretraining run with one factor changed, so settings that coincide
    train once: the reference setting appears in every ablation, and with the pretraining's
    budget (``ablation_epochs: null``, or the same epochs, crops and captions) it is the main
    system's pretraining run of :func:`pretrain`."""
    eval_cfg = ablation_config(config, kind, setting)
    model = ablation_model(config, data, kind, setting, seed, **kwargs)
    metrics = evaluate(model, data.eval_set, data.features_for(eval_cfg.model), eval_cfg)
    return metrics | throughput(model)


def ablation_model(
    config: Config, data: RetrievalData, kind: str, setting: str, seed: int, **kwargs: Any
) -> DualEncoder:
    """The model of one ablation run (:func:`run_ablation`), trained or reloaded, unscored. A
    random text encoder drawn once for every seed first embeds the chapter's captions once,
    for all of them (:func:`~audiorepro.experiments.retrieval.data.embed_captions`)."""
    run = _ablation_run(config, data, kind, setting)
    if shares_random_text(run["config"]):
        embed_captions(run["config"], data)
    return run_training("pretrain", run.pop("config"), seed, data, **run, **kwargs)


def _ablation_run(config: Config, data: RetrievalData, kind: str, setting: str) -> dict[str, Any]:
    """What trains an ablation run: its config, captions and budget (:func:`run_ablation`)."""
    eval_cfg = ablation_config(config, kind, setting)
    run_cfg = replace(eval_cfg, train_crop_s=config.ablation_max_audio_s or config.train_crop_s)
    items = data.training_items(run_cfg.pretrain_corpora, config.ablation_max_train_items)
    num_epochs, max_steps = ablation_budget(config, kind, len(items), data)
    return dict(
        config=run_cfg, items=items, num_epochs=num_epochs, lr=config.train.lr,
        max_steps=max_steps,
    )  # fmt: skip


def ablation_entry(config: Config, data: RetrievalData, kind: str, setting: str, seed: int) -> Run:
    """The run-store entry of an ablation run (:func:`run_ablation`); its stage 0 must exist
    (:func:`stage0_ready`), or it is trained now."""
    run = _ablation_run(config, data, kind, setting)
    run_cfg = resolve_pretrained(run.pop("config"), data)
    return run_entry("pretrain", run_cfg, seed, validation=data.validation, **run)


def ablation_steps(config: Config, kind: str) -> int | None:
    """The optimizer steps of every run of ablation ``kind`` (``None``: ``ablation_epochs``)."""
    if kind == "audio_encoder" and config.audio_encoder_steps is not None:
        return config.audio_encoder_steps
    return config.ablation_steps


def ablation_budget(
    config: Config, kind: str, num_items: int, data: RetrievalData
) -> tuple[int, int | None]:
    """``(num_epochs, max_steps)`` of an ablation run of ``kind`` over ``num_items`` captions:
    :func:`ablation_steps` when set; else ``ablation_epochs``; else (``ablation_epochs: null``)
    the main pretraining's ``train.num_epochs``, with ``max_steps`` set to the pretraining's
    steps when this setting's corpora give another number of steps per epoch."""
    steps = ablation_steps(config, kind)
    epochs = config.ablation_epochs
    if steps is not None:
        return epochs or config.train.num_epochs, steps
    if epochs is not None:
        return epochs, None
    epochs = config.train.num_epochs
    train_cfg = config.train.trainer_config(
        num_items, seed=0, num_epochs=epochs, lr=config.train.lr
    )
    main = data.training_items(config.pretrain_corpora, config.ablation_max_train_items)
    main_steps = epochs * steps_per_epoch(train_cfg, len(main))
    if epochs * steps_per_epoch(train_cfg, num_items) == main_steps:
        return epochs, None
    return epochs, main_steps
