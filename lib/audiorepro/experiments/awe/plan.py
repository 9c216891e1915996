"""What the chapter runs: the paper's sweeps over the phoneme encoder as variants of one config,
every setting once per seed, trained ahead of the pages side by side, scored and recorded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audiorepro import reporting
from audiorepro.config import replace, to_dict
from audiorepro.data.awe import WordSegments
from audiorepro.experiments.awe.config import CHAPTER, Config
from audiorepro.experiments.awe.train import run_config, run_fields, train
from audiorepro.experiments.awe.views import evaluate
from audiorepro.parallel import Job, Task, default_workers, map_processes, train_graph
from audiorepro.storage import RunStore, config_hash
from audiorepro.training.loop import resolve_device

SWEEP_METRICS = ("acoustic_ap", "crossview_ap", "dev_crossview_ap")
"""The metrics a sweep row records (:func:`record_sweep`) and its table summarises."""


def _per_seed(config: Config, settings: Sequence[Mapping[str, Any]]) -> list[Config]:
    """Each setting (dotted field changes) of a sweep applied to ``config`` with
    ``sweep_epochs`` epochs, once per seed of ``config.seeds``, setting by setting."""
    return [
        replace(config, **{**setting, "train.num_epochs": config.sweep_epochs, "seed": s})
        for setting in settings
        for s in config.seeds
    ]


def table1_configs(config: Config) -> list[Config]:
    """Table 1's runs: phoneme encoders of ``sweep_layers`` depths, Avg and Rep pooling,
    ``table1_heads`` heads, ``sweep_epochs`` epochs, each once per seed of ``seeds``."""
    return _per_seed(
        config,
        [
            {
                "model.phone_layers": n,
                "model.phone_pooling": p,
                "model.phone_heads": config.table1_heads,
            }
            for n in config.sweep_layers
            for p in ("avg", "rep")
        ],
    )


def table2_configs(config: Config) -> list[Config]:
    """Table 2's runs: ``sweep_heads`` heads at the chosen depth, Avg pooling, ``sweep_epochs``
    epochs, each once per seed of ``seeds``."""
    return _per_seed(
        config,
        [{"model.phone_pooling": "avg", "model.phone_heads": h} for h in config.sweep_heads],
    )


def seed_configs(config: Config) -> list[Config]:
    """The chosen model once per seed of ``config.seeds``."""
    return [replace(config, seed=s) for s in config.seeds]


def squared_config(config: Config) -> Config:
    """The training page's run with the paper's distance ``1 - cos²``, ``sweep_epochs`` epochs,
    against the preset's model (its ``distance`` is ``1 - cos`` in the CPU presets)."""
    return replace(config, distance="cos2", **{"train.num_epochs": config.sweep_epochs})


def chapter_configs(config: Config) -> list[Config]:
    """Every run the chapter's pages train: Tables 1 and 2 and the chosen model once per seed
    of ``seeds``, and :func:`squared_config` (duplicates included; :func:`train_ahead` trains
    each distinct run once)."""
    return [
        *table1_configs(config),
        *table2_configs(config),
        *seed_configs(config),
        squared_config(config),
    ]


def _train_only(config: Config, *, data: Mapping[str, WordSegments], store: RunStore) -> float:
    """Train (or load) one run, in a worker or here; its training seconds."""
    return float(train(config, data, store=store).history.wall_time_s)


def _distinct(
    configs: Sequence[Config], data: Mapping[str, WordSegments]
) -> tuple[list[str], dict[str, Config]]:
    """Each config's run key (:func:`run_config` and ``select``) and one config per key."""
    keys = [config_hash({**run_fields(c, data), "select": c.select}) for c in configs]
    unique: dict[str, Config] = {}
    for key, config in zip(keys, configs, strict=True):
        unique.setdefault(key, config)
    return keys, unique


def _cost(config: Config) -> int:
    """A rough relative cost of a run (epochs x layers), to start the longest first."""
    return config.train.num_epochs * (config.model.acoustic_layers + config.model.phone_layers)


def train_ahead(
    config: Config,
    data: Mapping[str, WordSegments],
    *,
    workers: int | None = None,
    store: RunStore | None = None,
) -> int:
    """Train every run of :func:`chapter_configs` the run store lacks, side by side (one
    process per core on the CPU, the longest first: :func:`audiorepro.parallel.train_graph`),
    so that the pages that follow only load them. Every run seeds itself, so each equals the
    run trained alone. Returns how many runs were trained."""
    store = store if store is not None else RunStore(CHAPTER)
    if workers is None:
        workers = default_workers(str(resolve_device(config.train.device)))
    _, unique = _distinct(chapter_configs(config), data)
    tasks = {
        key: Task(Job(_train_only, c, {"store": store}), cost=_cost(c))
        for key, c in unique.items()
        if not store.run("model", run_config(c, data)).complete
    }
    train_graph(tasks, workers=workers, data=data)
    return len(tasks)


def _sweep_row(data: Mapping[str, WordSegments], task: tuple[Any, ...]) -> dict[str, Any]:
    """Train (or load) one sweep run and score it: a row of :func:`sweep` (one process)."""
    config, split, store = task
    run = train(config, data, store=store)
    row: dict[str, Any] = {
        "phone_layers": config.model.phone_layers,
        "phone_pooling": config.model.phone_pooling,
        "phone_heads": config.model.phone_heads,
        "seed": config.seed,
    }
    row.update(evaluate(run.model, data[split], config.eval_batch_size))
    row.update(
        dev_crossview_ap=run.best_dev,
        dev_curve=run.history.eval_metric("crossview_ap"),
        epochs=run.history.final_epoch,
        seconds=round(run.history.wall_time_s, 1),
    )
    return row


def sweep(
    configs: Sequence[Config],
    data: Mapping[str, WordSegments],
    *,
    split: str = "test",
    store: RunStore | None = None,
    workers: int = 1,
) -> list[dict[str, Any]]:
    """Train (or load) one model per config and score it on ``split``.

    Configs that define the same run (:func:`run_config`, and the same ``select``) are trained
    and scored once. With ``workers`` > 1, up to that many runs train at once, one process
    each (:func:`audiorepro.parallel.map_processes`), the longest first; every run seeds itself,
    so the rows are those of one run after the other.

    Returns one row per config: ``phone_layers``, ``phone_pooling``, ``phone_heads``, ``seed``,
    ``acoustic_ap`` and ``crossview_ap`` on ``split``, ``dev_crossview_ap`` (best),
    ``dev_curve`` (the dev cross-view AP after each epoch), ``epochs`` and ``seconds`` (of the
    training).
    """
    keys, unique = _distinct(configs, data)
    order = sorted(unique, key=lambda k: -_cost(unique[k]))
    tasks = [(unique[k], split, store) for k in order]
    scored = map_processes(_sweep_row, tasks, shared=data, workers=workers)
    rows = dict(zip(order, scored, strict=True))
    return [dict(rows[k]) for k in keys]


def sweeps(
    config: Config,
    data: Mapping[str, WordSegments],
    *,
    workers: int | None = None,
    split: str = "test",
    store: RunStore | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Tables 1 and 2 and the chosen model, every seed, in one :func:`sweep`:
    ``{"1": rows, "2": rows, "chosen": rows}``.

    One pool trains them all, so a run two of them share (Table 2's ``table1_heads`` heads is
    Table 1's middle row; Table 2's 16 heads is the chosen model when ``sweep_epochs`` equals
    ``train.num_epochs``) is trained once. ``workers`` None: one per usable core on the CPU,
    one on a GPU (:func:`audiorepro.parallel.default_workers`).
    """
    if workers is None:
        workers = default_workers(str(resolve_device(config.train.device)))
    groups = {
        "1": table1_configs(config),
        "2": table2_configs(config),
        "chosen": seed_configs(config),
    }
    flat = [c for configs in groups.values() for c in configs]
    rows = sweep(flat, data, split=split, store=store, workers=workers)
    out, start = {}, 0
    for name, configs in groups.items():
        out[name] = rows[start : start + len(configs)]
        start += len(configs)
    return out


def sweep_tags(row: Mapping[str, Any], table: str) -> dict[str, Any]:
    """The ledger tags of a sweep row: ``{"table": "1", "N", "pooling"}`` or
    ``{"table": "2", "h"}``."""
    if table == "1":
        return {"table": "1", "N": row["phone_layers"], "pooling": row["phone_pooling"]}
    return {"table": "2", "h": row["phone_heads"]}


def record_sweep(
    rows: Sequence[Mapping[str, Any]], table: str, *, page: str, preset: str, config: Config
) -> None:
    """One ledger record per sweep row, with the row's seed and training time, tagged by
    :func:`sweep_tags`; ``config`` is the chapter's configuration."""
    for row in rows:
        reporting.record_result(
            CHAPTER,
            page,
            {k: row[k] for k in SWEEP_METRICS},
            preset=preset,
            seed=row["seed"],
            config=to_dict(config),
            wall_time_s=row["seconds"],
            tags=sweep_tags(row, table),
        )
