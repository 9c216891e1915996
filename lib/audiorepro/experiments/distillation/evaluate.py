"""Scoring chapter 02's models on chapter 01's evaluation split: each model on its own front
end, ensembles of similarity matrices (Table 2, SID 1), chance levels and the floor a compared
run must beat, and the ledger records of stage 1 and stage 2."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from audiorepro import reporting
from audiorepro.config import to_dict
from audiorepro.distillation import ensemble_scores
from audiorepro.experiments.distillation.config import CHAPTER, Config, teacher_config
from audiorepro.experiments.distillation.data import finetune_items
from audiorepro.experiments.distillation.teachers import stage1_teacher, training_top1
from audiorepro.experiments.retrieval.config import Config as RetrievalConfig
from audiorepro.experiments.retrieval.data import RetrievalData
from audiorepro.experiments.retrieval.evaluate import evaluate as evaluate_dual_encoder
from audiorepro.experiments.retrieval.evaluate import similarity_matrix, throughput
from audiorepro.metrics.retrieval import chance_metrics, retrieval_metrics
from audiorepro.models.dual_encoder import DualEncoder


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
        similarity_matrix(m, data.eval_set, data.features_for(c.model), c)
        for m, c in zip(models, cfgs, strict=True)
    ]
    return torch.from_numpy(ensemble_scores(scores)).float()


def chance_levels(data: RetrievalData, config: Config | None = None) -> dict[str, float]:
    """Chance levels (fractions) of the chapter's numbers: mAP@10 and R@k of a random ranking of
    the evaluation split's clips (:func:`~audiorepro.metrics.retrieval.chance_metrics`) and, with
    ``config``, ``train_top1``: one over the stage-2 training clips."""
    out = chance_metrics(len(data.eval_set.keys))
    if config is not None:
        out["train_top1"] = 1.0 / len({i.key for i in finetune_items(config, data)})
    return out


def chance_floor(chance: Mapping[str, float]) -> float:
    """The mAP@10 (%) every compared run must beat to count as having learned:
    :data:`audiorepro.reporting.CHANCE_FACTOR` times the chance mAP@10 of ``chance``
    (:func:`chance_levels`, a fraction)."""
    return reporting.CHANCE_FACTOR * 100 * chance["mAP@10"]


def evaluate(model: DualEncoder, config: Config, name: str, data: RetrievalData) -> dict:
    """Text-to-audio metrics of ``model`` (teacher ``name``'s architecture) on the evaluation
    split, on its own front end."""
    tcfg = teacher_config(config, name)
    return evaluate_dual_encoder(model, data.eval_set, data.features_for(tcfg.model), tcfg)


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
    (:func:`~audiorepro.experiments.retrieval.evaluate.throughput`) and ``extra`` to the ledger,
    tagged ``{"model": name} | tags``."""
    metrics = evaluate(model, config, name, data)
    reporting.record_result(
        CHAPTER,
        page,
        metrics | throughput(model) | dict(extra or {}),
        preset=preset,
        seed=seed,
        config=to_dict(config),  # the teacher's own config is teacher_config(config, name)
        tags={"model": name} | dict(tags),
    )
    return metrics


def run_tags(name: str, stage: str, lam: float | None = None) -> dict[str, Any]:
    """The ledger tags of model ``name`` (a teacher or ``ensemble``) at ``stage`` (``stage1`` or
    ``distilled``), with ``lam`` when given."""
    return {"model": name, "stage": stage} | ({} if lam is None else {"lam": lam})


def record_ensemble(
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
        tags=run_tags("ensemble", stage, config.lam if stage == "distilled" else None),
    )


def record_stage1(
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
    record_ensemble(
        list(models.values()), config, data, page=page, preset=preset, seed=seed,
        stage="stage1", extra={"train_top1": top1["ensemble"]},
    )  # fmt: skip
    return models
