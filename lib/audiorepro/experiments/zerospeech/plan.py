"""What the pages run: every VQ-VAE of the chapter trained ahead, side by side
(:func:`train_ahead`), and every row of Tables 1-3 trained and scored with each seed
(:func:`run_row`, :func:`run_rows`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from audiorepro.config import to_dict
from audiorepro.data.speech_segments import feature_of
from audiorepro.experiments.zerospeech.config import Config
from audiorepro.experiments.zerospeech.data import language_dir, load_features
from audiorepro.experiments.zerospeech.evaluate import evaluate, kmeans_baseline
from audiorepro.experiments.zerospeech.tables import AblationRow, RowResult, ablation_rows
from audiorepro.experiments.zerospeech.train import TrainedVQVAE, train_vqvae
from audiorepro.models.vqvae import VQVAEConfig
from audiorepro.parallel import Job, Task, default_workers, map_processes, train_graph
from audiorepro.storage import config_hash


def run_row(
    config: Config,
    row: AblationRow,
    seed: int,
    language: str = "english",
    *,
    code_stats: dict[str, float] | None = None,
) -> tuple[TrainedVQVAE, dict[str, float]]:
    """Train (or load) the row's model for one seed and evaluate its units on ``language``,
    with the k-means baseline of the same K, input and code rate (``kmeans_abx_across``,
    ``kmeans_bitrate``; :func:`kmeans_baseline`, same seed). A ``code_stats`` dict receives
    :func:`code_runs` of the test units just scored (what :func:`unit_runs` reports)."""
    trained = train_vqvae(config, row.model, seed, language=language)
    lang_dir = language_dir(config, language)
    test = load_features(lang_dir, "test", feature_of(row.model.input_dim))
    metrics = evaluate(trained.model, lang_dir, test, code_stats=code_stats)
    metrics["train_wall_time_s"] = float(trained.history.get("wall_time_s", 0.0))
    baseline = kmeans_baseline(config, row.model, seed, language)
    metrics["kmeans_abx_across"] = baseline["abx_across"]
    metrics["kmeans_bitrate"] = baseline["bitrate"]
    return trained, metrics


def _baseline_of(row: AblationRow, seed: int) -> tuple[Any, ...]:
    """What a row's k-means baseline depends on besides the configuration (rows that share it
    share one fit, :func:`kmeans_baseline`)."""
    m = row.model
    return (m.input_dim, m.feature_norm, m.codebook_size, m.stride, seed)


def _run_jobs(config: Config, task: tuple[Any, ...]) -> list[RowResult]:
    """:func:`run_row` of each (row, seed) of one group, in one process."""
    jobs, language = task
    out = []
    for row, seed in jobs:
        start = time.perf_counter()
        stats: dict[str, float] = {}
        _, metrics = run_row(config, row, seed, language, code_stats=stats)
        out.append(RowResult(row.key, seed, metrics, time.perf_counter() - start, stats))
    return out


def run_rows(
    config: Config,
    rows: Sequence[AblationRow],
    language: str = "english",
    workers: int | None = None,
) -> dict[tuple[str, int], RowResult]:
    """:func:`run_row` of every row with every seed of ``config.main_seeds``:
    ``{(row key, seed): RowResult}``.

    With ``workers`` > 1 up to that many processes train at once
    (:func:`audiorepro.parallel.map_processes`; None: one per usable core on the CPU, one on a
    GPU). The (row, seed) pairs that share a k-means baseline go to one process, so it is
    fitted once; every run seeds itself, so the results are those of one run after another.
    """
    if workers is None:
        workers = default_workers("cuda" if torch.cuda.is_available() else "cpu")
    groups: dict[tuple[Any, ...], list[tuple[AblationRow, int]]] = {}
    for seed in config.main_seeds:
        for row in rows:
            groups.setdefault(_baseline_of(row, seed), []).append((row, seed))
    tasks = [(jobs, language) for jobs in sorted(groups.values(), key=len, reverse=True)]
    done = map_processes(_run_jobs, tasks, shared=config, workers=workers)
    return {(r.key, r.seed): r for results in done for r in results}


def _train_job(config: Config, *, model_cfg: VQVAEConfig, seed: int, language: str) -> bool:
    """Train (or load) one VQ-VAE, here or in a worker; whether it was trained."""
    return not train_vqvae(config, model_cfg, seed, language=language).from_cache


def train_ahead(
    config: Config,
    rows: Sequence[AblationRow] | None = None,
    language: str = "english",
    workers: int | None = None,
) -> int:
    """Train the VQ-VAE of every row (default :func:`ablation_rows`, whose first is the main
    model) with every seed of ``config.main_seeds``, side by side, one process per core on
    the CPU (one on a GPU), rows of the same model once, so that the pages that follow only
    load them (:func:`train_vqvae`, :func:`run_rows`). With the default rows on English and
    ``config.surprise``, the surprise language's main model (``config.seed``, what the
    evaluation page scores) trains in the same pool (:func:`audiorepro.parallel.train_graph`).
    Each run seeds itself and trains as it would alone. Returns how many runs were trained
    (the others were in the run store)."""
    if workers is None:
        workers = default_workers("cuda" if torch.cuda.is_available() else "cpu")
    chapter = rows is None
    rows = ablation_rows(config) if rows is None else rows
    runs = [(row.model, seed, language) for seed in config.main_seeds for row in rows]
    if chapter and language == "english" and config.surprise:
        runs.append((rows[0].model, config.seed, "surprise"))
    distinct: dict[str, tuple[VQVAEConfig, int, str]] = {}
    for model, seed, lang in runs:
        distinct.setdefault(config_hash([to_dict(model), seed, lang]), (model, seed, lang))
    # Longest first (tasks of equal cost start in their order): English before the smaller
    # surprise corpus, conv encoders (the fastest) after the others.
    tasks: dict[str, Task[Job]] = {}
    for key in sorted(
        distinct, key=lambda k: (distinct[k][2] != "english", distinct[k][0].encoder == "conv")
    ):
        model, seed, lang = distinct[key]
        kwargs = {"model_cfg": model, "seed": seed, "language": lang}
        tasks[key] = Task(Job(_train_job, config, kwargs))
    return sum(train_graph(tasks, workers=workers).values())
