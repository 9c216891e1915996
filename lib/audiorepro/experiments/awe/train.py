"""Training one multi-view model: Adam, batches of segments, the eq. (4) loss, dev cross-view
AP after every epoch and the plateau schedule, on :class:`audiorepro.training.Trainer`; every
trained model is kept in the chapter's run store, keyed by what defines it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from audiorepro.config import replace, to_dict
from audiorepro.data.awe import MultiViewDataset, WordSegments, collate_multiview
from audiorepro.experiments.awe.config import CHAPTER, Config
from audiorepro.experiments.awe.data import data_digest, model_config
from audiorepro.experiments.awe.views import evaluate
from audiorepro.losses.multiview import MultiViewContrastiveLoss
from audiorepro.models.awe import AWEModelConfig, MultiViewAWE
from audiorepro.repro import seed_everything
from audiorepro.storage import (
    Run,
    RunStore,
    load_model_weights,
    read_json,
    save_model_weights,
    write_json,
)
from audiorepro.training.callbacks import Callback
from audiorepro.training.loop import Trainer, TrainResult, resolve_device
from audiorepro.training.optimizers import adam_factory
from audiorepro.training.selection import WEIGHT_FILES


@dataclasses.dataclass
class AWERun:
    """A trained model (the ``select``-ed state loaded) and how it got there.

    Attributes:
        model: the model with the best dev cross-view AP (``select: best``) or the final one,
            in eval mode.
        history: the training history (losses per step, dev metrics per epoch); of runs of
            :func:`~audiorepro.experiments.awe.recordings.train_on_segments`, with epochs
            numbered from 1 (:func:`numbered_from_one`).
        schedule_events: ``(step, event)`` of the plateau schedule ("best", "decay", "stop").
        best_dev: the best dev cross-view AP.
        seed: the run's seed.
        model_config: the encoders' configuration.
        path: the run's folder in the run store.
        selected: which weights ``model`` holds, ``"best"`` or ``"final"``.
        kept_epoch: the epoch (1-based) of those weights (:func:`kept_epoch`; runs of
            :func:`~audiorepro.experiments.awe.recordings.train_on_segments`).
        left_out: rows of each split left out as shorter than ``min_frames`` (runs of
            :func:`~audiorepro.experiments.awe.recordings.train_on_segments`).
        first_short: where the first of them was and its length, ``"SEG.tsv:82, 1 frame"``
            (``""``: none, or a run recorded before it was kept).
        development: how the development rows were chosen, one line (runs of
            :func:`~audiorepro.experiments.awe.recordings.train_on_segments`).
        augmentation: the training rows and their speed-perturbed copies, one line (idem).
        normalisation: how the features were normalised and why, one line (idem).
        refit: how the weights kept were trained again with the development rows, one line
            (idem; ``""``: they were not).
        budget: the most epochs the run could train and why, one line (idem).
        beside_dtw: the kept weights' same-different AP beside MFCC + DTW on the development
            rows, one line (idem, :func:`~audiorepro.experiments.awe.development.beside_dtw`).
    """

    model: MultiViewAWE
    history: TrainResult
    schedule_events: list[tuple[int, str]]
    best_dev: float
    seed: int
    model_config: AWEModelConfig
    path: Path
    selected: str = "best"
    kept_epoch: int | None = None
    left_out: dict[str, int] = dataclasses.field(default_factory=dict)
    first_short: str = ""
    development: str = ""
    augmentation: str = ""
    normalisation: str = ""
    refit: str = ""
    budget: str = ""
    beside_dtw: str = ""


def epochs_trained(result: TrainResult) -> int:
    """The epochs a run trained, counting the last one when ``max_steps`` cut it short, of the
    training loop's history (epochs numbered from 0, ``final_epoch`` the whole epochs done, where
    a resumed run would continue)."""
    last = int(result.epochs[-1]) + 1 if result.epochs else 0
    return max(last, int(result.final_epoch))


def numbered_from_one(result: TrainResult) -> TrainResult:
    """The history as ``awe train`` reports it (``run.json``, :class:`AWERun`): epochs numbered
    from 1 (``epochs``, the ``epoch`` of ``skipped_steps``), as the kept epoch is, and
    ``final_epoch`` the epochs trained (:func:`epochs_trained`: 2 when ``max_steps`` stopped
    training in the second epoch)."""
    return dataclasses.replace(
        result,
        epochs=[int(e) + 1 for e in result.epochs],
        final_epoch=epochs_trained(result),
        skipped_steps=[
            {**s, "epoch": int(s["epoch"]) + 1} if "epoch" in s else dict(s)
            for s in result.skipped_steps
        ],
    )


def kept_epoch(result: TrainResult, events: Sequence[tuple[int, str]], select: str) -> int:
    """The epoch (1-based) whose weights a run keeps: the last one the plateau schedule called
    ``best`` (``select: best``), or the last one trained (``final``, :func:`epochs_trained`), of
    the training loop's history (epochs numbered from 0)."""
    best = [step for step, event in events if event == "best"]
    if select == "final" or not best:
        return epochs_trained(result)
    return int(result.epochs[result.steps.index(best[-1])]) + 1


EPOCHS_FROM = "epochs_from"
"""The key of an ``awe train`` ``run.json`` saying that its history and kept epoch number
epochs from 1 (its value, 1). A record without it whose history holds an epoch 0 was written
before they did (every optimizer step is recorded, the first in epoch 0):
:func:`reported_epochs` converts it."""


def reported_epochs(info: Mapping[str, Any]) -> tuple[TrainResult, int]:
    """``(history, kept epoch)`` of an ``awe train`` ``run.json`` as a new run reports them:
    epochs numbered from 1 (:func:`numbered_from_one`, :func:`kept_epoch`). A record of a run
    from before they were (see :data:`EPOCHS_FROM`: epochs from 0, ``final_epoch`` the whole
    epochs done, ``select: final`` keeping that) is converted as a new run's history is, so that
    a reused run prints the numbers it would print trained today; any other is read as it
    is."""
    history = TrainResult.from_dict(info["history"])
    if info.get(EPOCHS_FROM) == 1 or 0 not in history.epochs:
        return history, int(info["kept_epoch"])
    events = [(int(step), str(event)) for step, event in info["schedule"]]
    kept = kept_epoch(history, events, str(info["config"]["select"]))
    return numbered_from_one(history), kept


def run_config(config: Config, data: Mapping[str, WordSegments]) -> dict[str, Any]:
    """What defines a trained model, the key of its run: the resolved encoders, the training
    section, the loss, the seed, the embedding batch (dev AP picks the best epoch) and the data
    identity. The chapter-level fields (sweeps, seeds list, baseline size) are left out, so that
    a sweep setting equal to the chosen model is the chosen model's run."""
    return {**run_fields(config, data), "data": data_digest(data)}


def run_fields(config: Config, data: Mapping[str, WordSegments]) -> dict[str, Any]:
    """:func:`run_config` without the data identity (for runs on one and the same data)."""
    return {
        "model": to_dict(model_config(config, data)),
        "train": to_dict(config.train),
        "loss": {"margin": config.margin, "k": config.loss_k, "distance": config.distance},
        "seed": config.seed,
        "eval_batch_size": config.eval_batch_size,
    }


def set_threads(config: Config) -> None:
    """Use ``config.train.torch_threads`` torch threads in this process, when set."""
    if config.train.torch_threads is not None:
        torch.set_num_threads(config.train.torch_threads)


def learning_rate_path(
    result: TrainResult, events: Sequence[tuple[int, str]], epoch: int, factor: float
) -> list[float]:
    """The learning rate, as a multiple of the first, of each epoch of training that made the
    weights at the end of (1-based) ``epoch``, of the training loop's history (epochs from 0)
    and the plateau schedule's ``events``: an epoch whose evaluation decayed the rate went back
    to the best weights (:class:`~audiorepro.training.plateau.ReduceLROnPlateauWithReset`), so
    the epochs since the best leave the path. ``[1, 1, 1, 0.1]``: three epochs at the rate,
    then one at a tenth."""
    at: dict[int, list[str]] = {}
    for step, event in events:
        at.setdefault(int(result.epochs[result.steps.index(step)]) + 1, []).append(event)
    path: list[float] = []
    best: list[float] = []
    rate = 1.0
    for e in range(1, epoch + 1):
        path.append(rate)
        for event in at.get(e, []):
            if event == "best":
                best = list(path)
            elif event == "decay":
                path, rate = list(best), rate * factor
    return path


class RatePath(Callback):
    """Sets each epoch's learning rate to ``path[epoch]`` times the first
    (:func:`learning_rate_path`), as the plateau schedule sets a decayed rate."""

    def __init__(self, path: Sequence[float]) -> None:
        self.path = list(path)
        self.base: list[float] = []
        self.per_epoch = 1

    def on_fit_start(self, trainer: Trainer) -> None:
        if not self.base:  # resumed: the first rates came with the checkpoint (state_dict)
            self.base = list(trainer.scheduler.base_lrs)
        self.per_epoch = trainer.steps_per_epoch

    def state_dict(self) -> dict[str, Any]:
        return {"base": list(self.base)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.base = [float(b) for b in state["base"]]

    def on_step_end(self, trainer: Trainer, step: int, logs: dict[str, float]) -> str | None:
        epoch = step // self.per_epoch  # the next epoch, from 0
        if step % self.per_epoch or epoch >= len(self.path):
            return None
        scheduler = trainer.scheduler
        scheduler.base_lrs = [b * self.path[epoch] for b in self.base]
        for group, rate in zip(trainer.optimizer.param_groups, scheduler.base_lrs, strict=True):
            group["lr"] = rate
        scheduler._last_lr = [g["lr"] for g in trainer.optimizer.param_groups]
        return None


MAX_TABLE_EPOCHS = 100
"""The most epochs ``awe train`` gives a table (the paper's cap on the chosen model, §3.2)."""


def epoch_budget(
    config: Config, overrides: Mapping[str, Any] | None, rows: int
) -> tuple[Config, str]:
    """``(config, note)``: the epochs ``awe train`` trains ``rows`` training rows (speed copies
    included) for. The preset's ``table_steps`` asks for about that many optimizer steps, in
    whole epochs, at least ``train.num_epochs`` (the chapter's budget for its own corpus) and
    at most :data:`MAX_TABLE_EPOCHS`; the plateau schedule ends training sooner once the
    development AP stops rising. ``train.num_epochs`` or ``train.max_steps`` set by the user,
    or no ``table_steps``, keep ``train.num_epochs``."""
    per_epoch = -(-rows // config.train.batch_size)
    given = {k for k in (overrides or {}) if k in ("train.num_epochs", "train.max_steps")}
    if given or config.table_steps is None:
        why = ", ".join(sorted(given)) + " as set" if given else "the preset's train.num_epochs"
        return config, f"epochs: at most {config.train.num_epochs} ({why})"
    epochs = max(
        config.train.num_epochs, min(MAX_TABLE_EPOCHS, -(-config.table_steps // per_epoch))
    )
    note = (
        f"epochs: at most {epochs}, for about {config.table_steps:,} steps of "
        f"{config.train.batch_size} rows ({per_epoch} an epoch; at most {MAX_TABLE_EPOCHS}), "
        "the plateau schedule ending sooner when the development AP stops rising "
        "(--set train.num_epochs=N)"
    )
    return replace(config, **{"train.num_epochs": epochs}), note


def rates_in_words(path: Sequence[float]) -> str:
    """``"7 epochs at the learning rate"``, ``"5 epochs at the learning rate and 2 at 0.1 of
    it"``: a learning-rate path (:func:`~audiorepro.experiments.awe.train.learning_rate_path`)
    in words."""
    runs: list[list[float]] = []
    for rate in path:
        if runs and runs[-1][0] == rate:
            runs[-1][1] += 1
        else:
            runs.append([rate, 1])
    words = [
        f"{n:g}{(' epoch' if n == 1 else ' epochs') if i == 0 else ''} at "
        + ("the learning rate" if rate == 1 else f"{rate:g} of it")
        for i, (rate, n) in enumerate(runs)
    ]
    return ", ".join(words[:-1]) + (" and " if len(words) > 1 else "") + words[-1]


def _model_and_loss(
    config: Config, data: Mapping[str, WordSegments]
) -> tuple[MultiViewAWE, Callable[..., dict[str, Any]]]:
    """The seed's initial model and the eq. (4) loss of a batch (its three terms beside)."""
    seed_everything(config.seed)
    model = MultiViewAWE(model_config(config, data))
    loss = MultiViewContrastiveLoss(config.margin, config.loss_k, config.distance)

    def loss_fn(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        emb_x, emb_c = model(
            batch["feats"], batch["lengths"], batch["phones"], batch["phone_lengths"]
        )
        terms = loss.terms(emb_x, emb_c, batch["inverse"])
        out: dict[str, Any] = {"loss": (terms["obj0"] + terms["obj1"] + terms["obj2"]).mean()}
        out.update({k: v.detach().mean() for k, v in terms.items()})
        return out

    return model, loss_fn


def refit(
    config: Config,
    data: Mapping[str, WordSegments],
    path: Sequence[float],
    progress: str,
    staging: Path | None = None,
    callbacks: Sequence[Any] = (),
) -> MultiViewAWE:
    """A model trained from the seed's initial weights on ``data["train"]`` for ``len(path)``
    epochs at the rates of ``path`` (:func:`learning_rate_path`), without evaluation: the
    training that made a development run's kept weights, again on more rows. With
    ``staging``, checkpoint there after every epoch and continue from the newest checkpoint
    found there."""
    if not path or path[0] != 1.0:
        raise ValueError(f"a learning-rate path starts at 1, got {list(path)[:3]}")
    model, loss_fn = _model_and_loss(config, data)
    dataset = MultiViewDataset(data["train"])
    train_cfg = dataclasses.replace(
        config.train.trainer_config(config.seed), num_epochs=len(path), max_steps=None
    )
    if staging is not None:
        per_epoch = -(-len(dataset) // train_cfg.batch_size)
        train_cfg = dataclasses.replace(train_cfg, checkpoint_every=per_epoch)
    trainer = Trainer(
        model,
        loss_fn,
        dataset,
        train_cfg,
        collate_fn=collate_multiview,
        optimizer_factory=adam_factory,
        out_dir=staging,
        callbacks=[RatePath(path), *callbacks],
        progress=progress,
    )
    trainer.fit(resume=staging is not None)
    return trainer.unwrapped_model


@contextmanager
def table_staging(config: Config, data: Mapping[str, WordSegments]) -> Iterator[Path | None]:
    """The folder where ``awe train`` checkpoints both its trainings (``development/``,
    ``refit/``): in the chapter's run store (kind ``awe-train``), named by the configuration
    and the rows' frames (:func:`run_config`), so that the same command after an interruption
    (Ctrl-C, a killed job) continues from the newest checkpoint, and any other starts afresh.
    Removed when the block ends without an error (``--out`` written), kept when it raises;
    ``None`` while another process trains the same run
    (:meth:`~audiorepro.storage.RunStore.resumable`)."""
    store = RunStore(CHAPTER)
    with store.resumable(store.run("awe-train", run_config(config, data))) as staging:
        yield staging


def within(staging: Path | None, name: str) -> Path | None:
    """``staging / name``, or ``None`` without a staging folder."""
    return None if staging is None else staging / name


def fit(
    config: Config,
    data: Mapping[str, WordSegments],
    progress: str,
    staging: Path | None = None,
    callbacks: Sequence[Any] = (),
) -> tuple[MultiViewAWE, TrainResult, Any, dict[str, torch.Tensor]]:
    """Train; return the model with its best dev state loaded, the history, the plateau
    schedule and the final weights (a CPU state dict). With ``staging``, checkpoint there
    after every epoch's evaluation (the best weights too) and continue from the newest
    checkpoint found there."""
    model, loss_fn = _model_and_loss(config, data)
    dev = data["dev"]

    def eval_fn(model: torch.nn.Module) -> dict[str, float]:
        return evaluate(model, dev, config.eval_batch_size)  # type: ignore[arg-type]

    best_dir = staging / "best" if staging is not None else None
    schedule = config.train.callback("crossview_ap", mode="max", directory=best_dir)
    dataset = MultiViewDataset(data["train"])
    train_cfg = config.train.trainer_config(config.seed)
    if staging is not None:  # once per epoch, right after the evaluation the schedule acts on
        per_epoch = -(-len(dataset) // train_cfg.batch_size)
        train_cfg = dataclasses.replace(train_cfg, checkpoint_every=per_epoch)
    trainer = Trainer(
        model,
        loss_fn,
        dataset,
        train_cfg,
        collate_fn=collate_multiview,
        eval_fn=eval_fn,
        optimizer_factory=adam_factory,
        out_dir=staging,
        callbacks=[schedule, *callbacks],
        progress=progress,
    )
    result = trainer.fit(resume=staging is not None)
    model = trainer.unwrapped_model
    final = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    schedule.restore_best(model)
    return model, result, schedule, final  # type: ignore[return-value]


def train(
    config: Config,
    data: Mapping[str, WordSegments],
    *,
    store: RunStore | None = None,
    progress: str = "none",
    callbacks: Sequence[Any] = (),
) -> AWERun:
    """Train one multi-view model (seed ``config.seed``, at most ``config.train.num_epochs``
    epochs) and return it with the ``config.select``-ed state loaded (the best dev cross-view
    AP's, or the final one), or load it from the run store if it was trained before. The run
    keeps both states.

    Args:
        config: the experiment configuration; variants (sweeps, seeds) via
            :func:`audiorepro.config.replace`.
        data: :func:`~audiorepro.experiments.awe.data.load_data` output.
        store: where runs are kept (default ``RunStore("04_awe")``).
        progress: the Trainer's progress mode.
        callbacks: further Trainer callbacks (progress hooks, tests).

    A run killed before it finished continues from its last epoch's checkpoint, kept in the
    store's staging folder of this configuration (:meth:`RunStore.staging`), when ``train`` is
    called again with the same configuration; the result equals an uninterrupted run's.
    """
    store = store if store is not None else RunStore(CHAPTER)
    set_threads(config)
    resolved = model_config(config, data)
    key = run_config(config, data)

    def build(folder: Path) -> dict[str, Any]:
        staging = store.staging(store.run("model", key))
        model, result, schedule, final = fit(config, data, progress, staging, callbacks)
        best_dev = float(schedule.best) if schedule.best is not None else float("nan")
        save_model_weights(model, folder / WEIGHT_FILES["best"])
        final_model = MultiViewAWE(resolved)
        final_model.load_state_dict(final)
        save_model_weights(final_model, folder / WEIGHT_FILES["final"])
        write_json(
            folder / "history.json",
            {
                "history": result.to_dict(),
                "schedule": [list(h) for h in schedule.history],
                "best_dev": best_dev,
            },
        )
        return {"best_dev": best_dev, "epochs": result.final_epoch}

    def load(run: Run) -> AWERun:
        model = MultiViewAWE(resolved)
        name = WEIGHT_FILES[config.select]
        load_model_weights(model, run.file(name))
        model.to(resolve_device(config.train.device)).eval()
        saved = read_json(run.file("history.json"))
        return AWERun(
            model=model,
            history=TrainResult.from_dict(saved["history"]),
            schedule_events=[(int(s), str(e)) for s, e in saved["schedule"]],
            best_dev=float(saved["best_dev"]),
            seed=config.seed,
            model_config=resolved,
            path=run.path,
            selected=config.select,
        )

    return store.cached("model", key, build, load)
