"""Callbacks the chapters share: small objects the :class:`~audiorepro.training.Trainer` calls at
fixed points of a run (fit start, step end, evaluation end, fit end)."""

from __future__ import annotations

from typing import Any, Protocol

from audiorepro.training.loop import Callback, Trainer

__all__ = ["EpochSetter"]


class _EpochAware(Protocol):
    def set_epoch(self, epoch: int) -> None: ...


class EpochSetter(Callback):
    """Tells a dataset which epoch it serves (``dataset.set_epoch(trainer.epoch)``), at the
    start of a run (a resumed one too) and after every step, so that per-epoch randomness
    (crops, caption swaps) is a function of the epoch and the item, never of global state."""

    def __init__(self, dataset: _EpochAware) -> None:
        self.dataset = dataset

    def on_fit_start(self, trainer: Trainer) -> None:
        self.dataset.set_epoch(trainer.epoch)

    def on_step_end(self, trainer: Trainer, step: int, logs: dict[str, Any]) -> None:
        self.dataset.set_epoch(trainer.epoch)
