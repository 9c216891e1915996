"""The dual-encoder run lifecycle that chapters 01 and 02 share: a model built from its
configuration (:func:`build_model`), a run's identity in the run store (:func:`run_entry`), its
training, model selection on the validation split (:class:`Selection`) and publishing of the
best and final weights (:func:`trained_model`, :func:`run_training`)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from audiorepro.config import replace, to_dict
from audiorepro.data.retrieval import CaptionItem, EvaluationSet
from audiorepro.experiments.retrieval.config import Config, store
from audiorepro.experiments.retrieval.data import TEXT_CACHE_VERSION, RetrievalData, _text_cache
from audiorepro.experiments.retrieval.evaluate import evaluate
from audiorepro.experiments.retrieval.stage0 import pretrained_key, resolve_stage0
from audiorepro.experiments.retrieval.train import steps_per_epoch, train_dual_encoder
from audiorepro.models.dual_encoder import DualEncoder, build_dual_encoder
from audiorepro.storage import (
    ALIASES_KEY,
    Run,
    RunStore,
    frozen_parameter_names,
    load_tensors,
    read_json,
    save_tensors,
    write_json,
)
from audiorepro.training.loop import TrainConfig, TrainResult
from audiorepro.training.selection import WEIGHT_FILES, KeepBest


def build_model(config: Config, seed: int, data: RetrievalData | None = None) -> DualEncoder:
    """A fresh dual encoder of ``config.model`` (same seed, same weights), its audio encoder
    loaded from ``audio_pretrained`` (``stage0`` needs ``data``: the tagging run is trained
    on it if missing). A frozen text encoder starts from a copy of the chapter's
    caption-embedding cache (what :func:`load_data` embedded) and keeps what it embeds later
    (paraphrases, a random encoder's captions) to itself, and into its checkpoints, so that
    the shared cache on disk is only ever what :func:`load_data` wrote."""
    if data is not None:
        config = resolve_pretrained(config, data)
    return build_dual_encoder(
        config.model, seed, text_cache=lambda: dict(_text_cache(config.model, seed))
    )


def resolve_pretrained(config: Config, data: RetrievalData) -> Config:
    """``config`` with ``model.audio_pretrained: stage0`` replaced by the path of the stage-0
    tagging checkpoint of its audio encoder (:mod:`~audiorepro.experiments.retrieval.stage0`,
    trained in the chapter's run store when missing); other values are kept."""
    model = resolve_stage0(
        config.model, data.root, config.stage0, run_store=store(),
        corpus=to_dict(config.corpus), features=data.features_for(config.model),
    )  # fmt: skip
    return config if model is config.model else replace(config, model=model)


SELECTION_METRIC = "mAP@10"
"""What every run selects its model by on the validation split (papers (a) and (b): salsa's
``ModelCheckpoint`` on ``val/mAP@10``)."""


def evaluation_points(train_cfg: TrainConfig, num_items: int) -> int:
    """How many evaluations a run of ``train_cfg`` over ``num_items`` items has when it
    evaluates once per epoch: the end of every epoch it completes and its last step, hence one
    for a run of one epoch or less."""
    per_epoch = steps_per_epoch(train_cfg, num_items)
    total = train_cfg.num_epochs * per_epoch
    if train_cfg.max_steps is not None:
        total = min(total, train_cfg.max_steps)
    return -(-total // per_epoch)


class Selection:
    """Model selection of one run on the validation split, as papers (a) and (b) do it.

    :meth:`trainer_hooks` gives the Trainer an ``eval_fn``, the text-to-audio metrics of
    ``model`` on ``validation`` at the end of every epoch and at the last step, and a
    :class:`~audiorepro.training.selection.KeepBest` on mAP@10 that keeps the best trained
    weights (:func:`trained_state`, without the frozen text encoder) under ``directory``, so
    that a resumed run still has them. A run with a single evaluation point (one epoch or less)
    is not evaluated at all: its best weights are its final ones by definition, and on 2 CPU
    cores an evaluation is not free.

    Args:
        model: the dual encoder being trained (the Trainer's model, or the one a distillation
            student wraps).
        validation: the validation split as queries and items.
        features: log-mel of its recordings on ``model``'s front end.
        config: the chapter's configuration (evaluation cut and batch).
        directory: where the best weights are kept (``None``: in memory).
    """

    def __init__(
        self,
        model: DualEncoder,
        validation: EvaluationSet,
        features: Mapping[str, torch.Tensor],
        config: Config,
        directory: Path | None = None,
    ) -> None:
        self.model, self.validation = model, validation
        self.features, self.config = features, config
        self.keep = KeepBest(
            SELECTION_METRIC, "max", directory, state=lambda _: trained_state(model)
        )
        self.evaluates = False

    def eval_fn(self, module: torch.nn.Module) -> dict[str, float]:
        """The Trainer's ``eval_fn``: :func:`evaluate` of the dual encoder on the validation
        split (``module``, the Trainer's model, is it or wraps it)."""
        return evaluate(self.model, self.validation, self.features, self.config)

    def trainer_hooks(self, train_cfg: TrainConfig, num_items: int) -> tuple[Any, list[Any]]:
        """``(eval_fn, callbacks)`` for a Trainer of ``train_cfg`` over ``num_items`` items,
        ``(None, [])`` when the run has a single evaluation point; :attr:`evaluates` records
        which."""
        self.evaluates = evaluation_points(train_cfg, num_items) > 1
        return (self.eval_fn, [self.keep]) if self.evaluates else (None, [])

    def best_state(self, final: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
        """The kept best weights, or ``final`` when none were kept (the run was not evaluated,
        or no evaluation gave a finite mAP@10)."""
        return self.keep.best_state() if self.keep.best_step is not None else final

    def summary(self, result: TrainResult) -> dict[str, Any]:
        """What the run's history records of the selection: the validation curve (``steps``,
        mAP@10 ``values``), whether the run was evaluated, and ``best_step`` and
        ``best_mAP@10`` (the final step and ``None`` when no best was kept: then the best
        weights are the final ones)."""
        kept = self.keep.best_step is not None
        return {
            "validation": {
                "metric": SELECTION_METRIC,
                "evaluated": self.evaluates,
                "steps": list(result.eval_steps),
                "values": [m[SELECTION_METRIC] for m in result.eval_metrics],
            },
            "best_step": self.keep.best_step if kept else result.final_step,
            f"best_{SELECTION_METRIC}": self.keep.best if kept else None,
        }


def items_digest(items: Sequence[CaptionItem]) -> str:
    """Identity of a list of training captions (their audio keys and texts, in order)."""
    return hashlib.sha256("\n".join(i.key + i.caption for i in items).encode()).hexdigest()


def run_entry(
    kind: str,
    config: Config,
    seed: int,
    *,
    items: Sequence[CaptionItem],
    validation: Sequence[CaptionItem],
    num_epochs: int,
    lr: float,
    paraphrase_prob: float = 0.0,
    max_steps: int | None = None,
    init: str | None = None,
    run_store: RunStore | None = None,
    **extra: Any,
) -> Run:
    """The run-store entry of one training run (complete or not yet). Its hash covers what
    defines the result: the corpus, model and schedule, the crop, the seed, the training
    captions, the validation captions and embedding batch that select the best weights
    (:class:`Selection`), the epochs (or steps) and learning rate, the caption swaps, the
    weights it starts from (``init``, the :func:`weights_key` of an earlier run's model; a
    pretrained audio checkpoint by its content hash) and ``extra``. ``config.select`` is not
    part of it: a run saves both the best and the final weights."""
    spec = {
        "corpus": to_dict(config.corpus),
        "model": pretrained_key(config.model),
        "train": to_dict(config.train),
        "max_audio_s": config.max_audio_s,
        "train_frames": config.train_frames,
        "seed": seed,
        "items": items_digest(items),
        "validation": {"items": items_digest(validation), "batch": config.eval_batch_size},
        "text_cache": TEXT_CACHE_VERSION if config.model.trainable_layers == 0 else None,
        "num_epochs": num_epochs,
        "lr": lr,
        "paraphrase_prob": paraphrase_prob,
        "init": init,
        **extra,
    }
    if max_steps is not None:
        spec["max_steps"] = max_steps
    return (run_store or store()).run(kind, spec)


def trained_state(model: DualEncoder) -> dict[str, torch.Tensor]:
    """The state dict without the frozen weights (a frozen text encoder, a fixed temperature:
    rebuilt identically from the configuration, the seed and the starting weights), which keeps
    a saved run small; the tensors of the trainer's checkpoints (``checkpoint_frozen=False``)."""
    frozen = set(frozen_parameter_names(model))
    return {k: v.cpu() for k, v in model.state_dict().items() if k not in frozen}


def load_trained_state(model: DualEncoder, state: Mapping[str, torch.Tensor]) -> None:
    """Load :func:`trained_state` output; anything missing other than frozen weights is an error."""
    result = model.load_state_dict(state, strict=False)
    frozen = set(model.state_dict()) - set(trained_state(model))
    missing = [k for k in result.missing_keys if k not in frozen]
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"saved run does not fit the model: missing {missing}, unexpected "
            f"{list(result.unexpected_keys)}"
        )


def weights_key(run_key: str, select: str) -> str:
    """The identity of the ``select``-ed weights (best or final) of the run ``run_key``: what a
    run that starts from them, or distils from them, records. The two selections of one run are
    one run but two starting points."""
    return f"{run_key}/{select}"


def trained_model(
    run: Run,
    config: Config,
    seed: int,
    train: Any,
    *,
    data: RetrievalData,
    init: DualEncoder | None = None,
    run_store: RunStore | None = None,
) -> DualEncoder:
    """The model of ``run`` (see :func:`run_entry`) with its ``config.select``-ed weights:
    loaded if the run is complete, else built from ``config.model`` and ``seed`` (or ``init``'s
    weights), trained by ``train(model, staging, selection) -> TrainResult`` and published.

    ``staging`` is the run's :meth:`RunStore.staging` folder, where ``train`` keeps its
    checkpoints and from which it resumes: a run killed before it was published continues
    there when called again with the same configuration (the folder is removed on publishing).
    ``selection`` is the run's :class:`Selection` on ``data``'s validation split (its best
    weights kept in ``staging`` too), for ``train`` to hand to the Trainer. A run saves the best
    weights as ``model.safetensors``, the final ones as ``final.safetensors``, and its history
    with the validation curve and best step as ``history.json``.

    The model carries ``train_history`` (that history, a dict, with ``selected``: which weights
    it holds), ``run_key`` (the run's key, whichever weights are selected) and ``weights_key``
    (:func:`weights_key`, the identity of these weights). With ``init``, the audio encoder's
    ``audio_pretrained`` is not loaded (``init``'s weights replace it anyway)."""
    if init is not None:
        config = replace(config, **{"model.audio_pretrained": None})
    model = build_model(config, seed)
    if init is not None:
        model.load_state_dict(init.state_dict())
    built: dict[str, Any] = {}  # what this call's build wrote, if it ran
    if not run.complete:
        run_store = run_store or store()

        def build(folder: Path) -> dict[str, Any]:
            staging = run_store.staging(run)
            validation = EvaluationSet.from_items(data.validation)
            features = data.features_for(config.model)
            selection = Selection(model, validation, features, config, staging / "best")
            result = train(model, staging, selection)
            history = result.to_dict() if result is not None else {}
            if result is not None:
                history |= selection.summary(result)
            if result is not None and result.wall_time_s:
                steps = result.final_step - result.resumed_step  # those of this call
                history["steps_per_s"] = steps / result.wall_time_s
                history["clips_per_s"] = steps * config.train.batch_size / result.wall_time_s
            final = trained_state(model)
            write_final_weights(final, folder / WEIGHT_FILES["final"], result)
            kept = selection.keep.best_step
            best_is_final = kept is None or (result is not None and kept == result.final_step)
            if best_is_final:  # one file on disk (a paper-size run's weights are GBs)
                os.link(folder / WEIGHT_FILES["final"], folder / WEIGHT_FILES["best"])
            else:
                save_tensors(selection.best_state(final), folder / WEIGHT_FILES["best"])
            write_json(folder / "history.json", history)
            built["history"] = _file_identity(folder / "history.json")
            built["holds_selected"] = config.select == "final" or best_is_final
            return {}

        run_store.publish(run, build)
    # The model already holds the selected weights if this call trained the run and its files
    # are the ones published (another process may have published the same run first).
    published_here = built and built["history"] == _file_identity(run.file("history.json"))
    if not (published_here and built["holds_selected"]):
        tensors, _ = load_tensors(run.file(WEIGHT_FILES[config.select]))
        load_trained_state(model, tensors)
    model.train_history = read_json(run.file("history.json")) | {"selected": config.select}
    model.run_key = run.key
    model.weights_key = weights_key(run.key, config.select)
    return model


def _file_identity(path: Path) -> tuple[int, int]:
    """(device, inode): the same file after a rename, another file after a rewrite."""
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def write_final_weights(
    final: Mapping[str, torch.Tensor], path: Path, result: TrainResult | None
) -> None:
    """Write a run's final weights to ``path``: a hard link to the model file of the trainer's
    last checkpoint when that checkpoint is the finished run's (it ends at the run's final step
    and holds exactly the tensors of ``final``: :func:`trained_state` and
    ``checkpoint_frozen=False`` both leave out the frozen weights), else a new file. A
    paper-size run's weights are GBs: the link saves writing and syncing them twice."""
    source = _finished_model_file(final, result)
    if source is not None:
        try:
            os.link(source, path)
            return
        except OSError:  # another file system, or no hard links: write the file
            pass
    save_tensors(final, path)


def _finished_model_file(
    final: Mapping[str, torch.Tensor], result: TrainResult | None
) -> Path | None:
    """The last checkpoint's model file if it holds the tensors of ``final`` (see
    :func:`write_final_weights`), else ``None``."""
    from safetensors import safe_open

    from audiorepro.training.checkpoint import MODEL_FILE, checkpoint_name

    if result is None or not result.checkpoint:
        return None
    folder = Path(result.checkpoint)
    if folder.name != checkpoint_name(result.final_step) or not (folder / MODEL_FILE).is_file():
        return None
    with safe_open(str(folder / MODEL_FILE), framework="pt", device="cpu") as handle:
        metadata = handle.metadata() or {}
        if json.loads(metadata.get(ALIASES_KEY, "{}")) or set(handle.keys()) != set(final):
            return None
        if any(handle.get_slice(k).get_shape() != list(final[k].shape) for k in final):
            return None
    return folder / MODEL_FILE


def run_training(
    kind: str,
    config: Config,
    seed: int,
    data: RetrievalData,
    *,
    items: Sequence[CaptionItem],
    num_epochs: int,
    lr: float,
    paraphrase_prob: float = 0.0,
    max_steps: int | None = None,
    init: DualEncoder | None = None,
    progress: str = "lines",
    run_store: RunStore | None = None,
    callbacks: Sequence[Any] = (),
) -> DualEncoder:
    """Train (or reload) one run of ``kind`` in ``run_store`` (default :func:`store`), starting
    from ``init``'s weights when given (its ``run_key`` is part of the run's identity), else
    from ``config.model.audio_pretrained`` (``stage0`` is trained first if needed,
    :func:`resolve_pretrained`). The model is selected on ``data``'s validation split
    (:class:`Selection`; ``config.select`` picks the best or the final weights, both saved). A
    run killed before it finished continues from its last checkpoint (:func:`trained_model`) and
    ends with the weights of an uninterrupted run. ``callbacks`` are further Trainer callbacks
    (progress hooks, tests)."""
    if init is None:
        config = resolve_pretrained(config, data)
    else:
        config = replace(config, **{"model.audio_pretrained": None})  # init's weights win
    run = run_entry(
        kind,
        config,
        seed,
        items=items,
        validation=data.validation,
        num_epochs=num_epochs,
        lr=lr,
        paraphrase_prob=paraphrase_prob,
        max_steps=max_steps,
        init=None if init is None else init.weights_key,
        run_store=run_store,
    )

    def train(model: DualEncoder, staging: Path, selection: Selection) -> Any:
        return train_dual_encoder(
            model,
            items,
            data.features_for(config.model),
            config,
            seed=seed,
            num_epochs=num_epochs,
            lr=lr,
            paraphrase_prob=paraphrase_prob,
            max_steps=max_steps,
            out_dir=staging,
            resume=True,
            selection=selection,
            callbacks=callbacks,
            progress=progress,
        )

    return trained_model(run, config, seed, train, data=data, init=init, run_store=run_store)
