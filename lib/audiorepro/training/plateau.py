"""Reduce the learning rate on a plateau, restarting from the best model and optimizer state.

The schedule of agwe-recipe (``lib/sched/reduce_lr_on_plateau.py``), which the AWE paper uses
(§3.2: "if the held-out performance doesn't improve after 4 epochs, the learning rate is
decayed by a factor of 10 and the model is reset to the previous best"; training stops when the
learning rate falls below 1e-7):

- after each evaluation, a strictly better value of ``metric`` becomes the best, and the model
  and optimizer state at that point are kept (in memory, or on disk under ``directory``);
- after ``patience`` evaluations in a row without a new best, the best model **and optimizer
  state** are loaded back, every learning rate is multiplied by ``factor``, the counter resets,
  and the kept optimizer state takes the new learning rate (as agwe saves it as the new best);
- once every learning rate is below ``min_lr``, training stops.

It plugs into :class:`audiorepro.training.Trainer` as a callback. The trainer's ``LambdaLR``
schedule multiplies each group's ``base_lr`` by a factor, so the decay is applied to
``base_lrs`` too; with the ``constant`` schedule the learning rate is then exactly
``lr * factor ** decays``.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from audiorepro.config import ConfigError, field
from audiorepro.training.callbacks import Callback
from audiorepro.training.checkpoint import load_tree, save_tree
from audiorepro.training.config import OPTIMIZER_IMPLS, TrainConfig
from audiorepro.training.loop import Trainer


class ReduceLROnPlateauWithReset(Callback):
    """Decay the learning rate and reload the best state after ``patience`` flat evaluations.

    Args:
        metric: key of the dict ``eval_fn`` returns (the AWE chapter: ``"crossview_ap"``).
        mode: ``"max"`` (AP) or ``"min"``.
        patience: evaluations without improvement before a decay (paper: 4).
        factor: learning-rate multiplier at a decay (paper: 0.1).
        min_lr: stop once every group's learning rate is below this (paper: 1e-7).
        directory: keep the best state on disk here (``best.json`` + ``best.safetensors``) so
            that it survives a resumed run; ``None`` keeps it in memory.

    Attributes:
        best, best_step, bad_evals, decays: the tracker's state (travels with checkpoints).
        history: ``(step, event)`` pairs, event ``"best"``, ``"decay"`` or ``"stop"``.
    """

    def __init__(
        self,
        metric: str,
        mode: str = "max",
        patience: int = 4,
        factor: float = 0.1,
        min_lr: float = 1e-7,
        directory: str | Path | None = None,
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be an int >= 1, got {patience!r}")
        if not 0.0 < factor < 1.0:
            raise ValueError(f"factor must be in (0, 1), got {factor!r}")
        if not min_lr >= 0.0:
            raise ValueError(f"min_lr must be >= 0, got {min_lr!r}")
        self.metric, self.mode, self.patience = metric, mode, patience
        self.factor, self.min_lr = float(factor), float(min_lr)
        self.directory = Path(directory) if directory is not None else None
        self.best: float | None = None
        self.best_step: int | None = None
        self.bad_evals = 0
        self.decays = 0
        self.history: list[tuple[int, str]] = []
        self._best_state: dict[str, Any] | None = None

    def _improved(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.best is None:
            return True
        return value > self.best if self.mode == "max" else value < self.best

    def _keep(self, trainer: Trainer) -> None:
        state = {
            "model": {
                k: v.detach().to("cpu", copy=True)
                for k, v in trainer.unwrapped_model.state_dict().items()
            },
            "optimizer": copy.deepcopy(trainer.optimizer.state_dict()),
        }
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            save_tree(self.directory, "best", state)
        else:
            self._best_state = state

    def _best(self) -> dict[str, Any]:
        if self._best_state is not None:
            return self._best_state
        if self.directory is None or not (self.directory / "best.json").is_file():
            raise RuntimeError("ReduceLROnPlateauWithReset: no best state has been kept")
        return load_tree(self.directory, "best")

    def on_eval_end(self, trainer: Trainer, step: int, metrics: dict[str, float]) -> str | None:
        """Track the best value; decay and reload after ``patience`` flat evaluations."""
        if self.metric not in metrics:
            raise KeyError(
                f"ReduceLROnPlateauWithReset: eval_fn returned no {self.metric!r}; it returned "
                f"{sorted(metrics)}"
            )
        value = float(metrics[self.metric])
        if self._improved(value):
            self.best, self.best_step, self.bad_evals = value, step, 0
            self._keep(trainer)
            self.history.append((step, "best"))
            return None
        self.bad_evals += 1
        if self.bad_evals < self.patience:
            return None
        best = self._best()
        trainer.unwrapped_model.load_state_dict(best["model"])
        trainer.optimizer.load_state_dict(best["optimizer"])
        scheduler = trainer.scheduler
        scheduler.base_lrs = [lr * self.factor for lr in scheduler.base_lrs]
        for group, base, fn in zip(
            trainer.optimizer.param_groups,
            scheduler.base_lrs,
            scheduler.lr_lambdas,
            strict=True,
        ):
            group["lr"] = base * fn(scheduler.last_epoch)
        scheduler._last_lr = [g["lr"] for g in trainer.optimizer.param_groups]
        self.bad_evals = 0
        self.decays += 1
        self.history.append((step, "decay"))
        self._keep(trainer)  # the kept optimizer state now carries the new learning rate
        if max(g["lr"] for g in trainer.optimizer.param_groups) < self.min_lr:
            self.history.append((step, "stop"))
            return "stop"
        return None

    def state_dict(self) -> dict[str, Any]:
        """The tracker's scalars (the best weights live in memory or under ``directory``)."""
        return {
            "best": self.best,
            "best_step": self.best_step,
            "bad_evals": self.bad_evals,
            "decays": self.decays,
            "history": [list(h) for h in self.history],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""
        self.best = state["best"]
        self.best_step = state["best_step"]
        self.bad_evals = int(state["bad_evals"])
        self.decays = int(state["decays"])
        self.history = [(int(s), str(e)) for s, e in state.get("history", [])]

    def restore_best(self, model: torch.nn.Module) -> None:
        """Load the best weights into ``model`` (after training, before testing)."""
        model.load_state_dict(self._best()["model"])


@dataclasses.dataclass(frozen=True)
class PlateauTrainConfig:
    """A training section for runs stopped by :class:`ReduceLROnPlateauWithReset`.

    One evaluation per epoch drives the schedule; training ends once the learning rate falls
    below ``min_lr`` or after ``num_epochs``. Defaults are the AWE paper's (§3.2).
    """

    batch_size: int = field(256, help="examples per batch (paper: 256)")
    lr: float = field(5e-4, help="learning rate (paper: 5e-4)")
    num_epochs: int = field(100, help="cap on epochs (training stops earlier at min_lr)")
    max_steps: int | None = field(None, help="cap on optimizer steps (None: no cap)")
    patience: int = field(4, help="flat evaluations before lr * lr_factor and reset (paper: 4)")
    lr_factor: float = field(0.1, help="learning-rate decay factor (paper: 0.1)")
    min_lr: float = field(1e-7, help="stop when the learning rate falls below (paper: 1e-7)")
    max_grad_norm: float | None = field(None, help="gradient clipping (None: off; agwe: 10)")
    device: str = field("auto", help="auto | cpu | cuda")
    torch_threads: int | None = field(
        None,
        help="torch CPU threads during training and embedding (None: leave torch's setting); "
        "1 for small models on a shared CPU, where more threads only wait on each other",
    )
    optimizer_impl: str = field(
        "auto",
        help="How Adam updates the parameters: auto | for-loop | foreach | fused (as "
        "TrainConfig.optimizer_impl; fused takes a tenth off a small model's CPU step)",
    )

    def __post_init__(self) -> None:
        if self.optimizer_impl not in OPTIMIZER_IMPLS:
            raise ConfigError(
                f"PlateauTrainConfig.optimizer_impl: expected one of {' | '.join(OPTIMIZER_IMPLS)}, "
                f"got {self.optimizer_impl!r}"
            )
        for name in ("batch_size", "num_epochs", "patience"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"PlateauTrainConfig.{name}: expected an int >= 1, got {value!r}"
                )
        if not 0.0 < self.lr_factor < 1.0:
            raise ConfigError(
                f"PlateauTrainConfig.lr_factor must be in (0, 1), got {self.lr_factor}"
            )

    def trainer_config(self, seed: int) -> TrainConfig:
        """The :class:`TrainConfig` of one run: constant lr (the callback decays it), no weight
        decay, an evaluation after every epoch, no periodic progress lines."""
        return TrainConfig(
            num_epochs=self.num_epochs,
            max_steps=self.max_steps,
            batch_size=self.batch_size,
            lr=self.lr,
            weight_decay=0.0,
            max_grad_norm=self.max_grad_norm,
            device=self.device,
            seed=seed,
            eval_every=0,
            log_every=10_000,
            schedule="constant",
            keep_checkpoints=1,
            optimizer_impl=self.optimizer_impl,
        )

    def callback(
        self, metric: str, mode: str = "max", directory: str | Path | None = None
    ) -> ReduceLROnPlateauWithReset:
        """The schedule of this section, tracking ``metric``."""
        return ReduceLROnPlateauWithReset(
            metric,
            mode=mode,
            patience=self.patience,
            factor=self.lr_factor,
            min_lr=self.min_lr,
            directory=directory,
        )


__all__ = ["PlateauTrainConfig", "ReduceLROnPlateauWithReset"]
