"""Model selection on the validation split: keep the best weights beside the final ones.

The papers select their models on held-out data: the retrieval systems keep the checkpoint of the
best validation mAP@10 (salsa's ``ModelCheckpoint`` on ``val/mAP@10``), the AWE paper the epoch
of the best dev AP. :class:`KeepBest` is the :class:`~audiorepro.training.Trainer` callback that
does this: after each evaluation that improves ``metric``, it keeps a CPU copy of the model's
weights (in memory, or on disk under ``directory`` so that a resumed run still has them). The
model the trainer leaves behind is the *final* one; a run saves both, and the experiments pick
one with a ``select: best | final`` field (:func:`check_select`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from audiorepro.config import ConfigError
from audiorepro.training.callbacks import Callback
from audiorepro.training.checkpoint import load_tree, save_tree
from audiorepro.training.loop import Trainer

__all__ = ["SELECTIONS", "WEIGHT_FILES", "KeepBest", "check_select"]

SELECTIONS = ("best", "final")
"""Which weights a run evaluates: the best validation score's, or the last step's."""

WEIGHT_FILES = {"best": "model.safetensors", "final": "final.safetensors"}
"""The file of a run folder that holds each selection's weights (every chapter that selects)."""


def check_select(value: str, where: str = "select") -> str:
    """``value`` when it is one of :data:`SELECTIONS`, else a ``ConfigError`` naming ``where``."""
    if value not in SELECTIONS:
        raise ConfigError(f"{where}: expected {' | '.join(SELECTIONS)}, got {value!r}")
    return value


class KeepBest(Callback):
    """Keep the weights of the evaluation with the best ``metric``.

    An evaluation improves when its value is strictly better than the best so far (the first
    finite one always does); NaN never improves.

    Args:
        metric: key of the dict ``eval_fn`` returns (``"mAP@10"``, ``"crossview_ap"``, ...).
        mode: ``"max"`` (AP, mAP) or ``"min"`` (losses, error rates).
        directory: keep the best weights on disk here (``best_model.json`` +
            ``best_model.safetensors``); ``None`` keeps them in memory.
        state: which weights to keep, a function of the trainer's unwrapped model (default:
            its whole state dict); e.g. only the trained part of a model whose frozen part is
            rebuilt identically, which keeps a large frozen encoder off the disk. Load such a
            partial state with :meth:`best_state` rather than :meth:`restore_best`.

    Attributes:
        best, best_step: the best value and the optimizer step it was reached at (``None``
            before the first evaluation); they travel with the trainer's checkpoints.
    """

    def __init__(
        self,
        metric: str,
        mode: str = "max",
        directory: str | Path | None = None,
        state: Callable[[torch.nn.Module], Mapping[str, torch.Tensor]] | None = None,
    ):
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self.metric, self.mode = metric, mode
        self.state = state if state is not None else (lambda model: model.state_dict())
        self.directory = Path(directory) if directory is not None else None
        self.best: float | None = None
        self.best_step: int | None = None
        self._state: dict[str, torch.Tensor] | None = None

    def improved(self, value: float) -> bool:
        """Whether ``value`` beats the best so far."""
        if math.isnan(value):
            return False
        if self.best is None:
            return True
        return value > self.best if self.mode == "max" else value < self.best

    def on_eval_end(self, trainer: Trainer, step: int, metrics: dict[str, float]) -> None:
        """Keep the model's weights when ``metrics[metric]`` is a new best."""
        if self.metric not in metrics:
            raise KeyError(
                f"KeepBest: eval_fn returned no {self.metric!r}; it returned {sorted(metrics)}"
            )
        value = float(metrics[self.metric])
        if not self.improved(value):
            return
        self.best, self.best_step = value, step
        state = {
            k: v.detach().to("cpu", copy=True)
            for k, v in self.state(trainer.unwrapped_model).items()
        }
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            save_tree(self.directory, "best_model", state)
        else:
            self._state = state

    def best_state(self) -> dict[str, torch.Tensor]:
        """The kept weights (a state dict on the CPU).

        Raises:
            RuntimeError: no evaluation has improved yet (none ran, or all were NaN).
        """
        if self._state is not None:
            return self._state
        if self.directory is not None and (self.directory / "best_model.json").is_file():
            return load_tree(self.directory, "best_model")
        raise RuntimeError(
            f"KeepBest: no best weights kept for {self.metric!r} (no evaluation improved)"
        )

    def restore_best(self, model: torch.nn.Module) -> None:
        """Load the best weights into ``model``."""
        model.load_state_dict(self.best_state())

    def state_dict(self) -> dict[str, Any]:
        """The best value and its step (the weights live in memory or under ``directory``)."""
        return {"best": self.best, "best_step": self.best_step}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.best, self.best_step = state["best"], state["best_step"]
