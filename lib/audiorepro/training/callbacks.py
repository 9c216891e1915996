"""Callbacks: small objects the :class:`~audiorepro.training.Trainer` calls at fixed points of a
run (fit start, step end, evaluation end, fit end); the protocol and the ones chapters share."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

from audiorepro.training.result import TrainResult

# A callback is handed the Trainer and never imports it (the loop imports this module): this
# stands for audiorepro.training.loop.Trainer.
_Trainer = Any


class Callback:
    """The callback protocol, as a base class whose methods do nothing; override what you need.

    The trainer calls these methods on each callback where they exist, so any object with some
    of them works (duck typing); subclassing only documents the intent.

    ``on_step_end`` and ``on_eval_end`` may return ``"stop"`` (or set ``trainer.should_stop``)
    to end training after the current step; the final checkpoint is still written. Callbacks
    with state (``EarlyStopping``'s best value) implement ``state_dict``/``load_state_dict`` so
    that the state travels with checkpoints; it must be JSON-friendly.
    """

    def on_fit_start(self, trainer: _Trainer) -> None:
        """Called once when ``fit`` starts (after resuming, before the first step)."""

    def on_step_end(self, trainer: _Trainer, step: int, logs: dict[str, float]) -> str | None:
        """Called after optimizer step ``step`` with that step's ``loss``, ``lr`` and extras."""
        return None

    def on_eval_end(self, trainer: _Trainer, step: int, metrics: dict[str, float]) -> str | None:
        """Called after ``eval_fn`` ran at step ``step``."""
        return None

    def on_fit_end(self, trainer: _Trainer, result: TrainResult) -> None:
        """Called once when ``fit`` returns."""

    def state_dict(self) -> dict[str, Any]:
        """State to store in checkpoints (JSON-friendly)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""


class EarlyStopping(Callback):
    """Stop when an evaluation metric has not improved for ``patience`` evaluations.

    An evaluation improves on the best so far when ``value < best - min_delta`` (``mode="min"``)
    or ``value > best + min_delta`` (``mode="max"``); the first evaluation always improves.

    Args:
        metric: key of the dict ``eval_fn`` returns.
        mode: ``"min"`` for losses and error rates, ``"max"`` for accuracies and mAP.
        patience: evaluations without improvement tolerated before stopping (>= 1).
        min_delta: smallest change that counts as improvement (>= 0).
    """

    def __init__(
        self, metric: str, mode: str = "min", patience: int = 3, min_delta: float = 0.0
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be an int >= 1, got {patience!r}")
        if not min_delta >= 0:
            raise ValueError(f"min_delta must be >= 0, got {min_delta!r}")
        self.metric = metric
        self.mode = mode
        self.patience = patience
        self.min_delta = float(min_delta)
        self.best: float | None = None
        self.best_step: int | None = None
        self.bad_evals = 0

    def improved(self, value: float) -> bool:
        """Whether ``value`` beats the best so far by more than ``min_delta``."""
        if self.best is None:
            return not math.isnan(value)
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def on_eval_end(self, trainer: _Trainer, step: int, metrics: dict[str, float]) -> str | None:
        """Track the best value; return ``"stop"`` after ``patience`` evaluations without gain."""
        if self.metric not in metrics:
            raise KeyError(
                f"EarlyStopping: eval_fn returned no {self.metric!r}; it returned "
                f"{sorted(metrics)}"
            )
        value = float(metrics[self.metric])
        if self.improved(value):
            self.best, self.best_step, self.bad_evals = value, step, 0
            return None
        self.bad_evals += 1
        return "stop" if self.bad_evals >= self.patience else None

    def state_dict(self) -> dict[str, Any]:
        """Best value, its step and the count of evaluations without improvement."""
        return {"best": self.best, "best_step": self.best_step, "bad_evals": self.bad_evals}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the state written by ``state_dict``."""
        self.best = state["best"]
        self.best_step = state["best_step"]
        self.bad_evals = int(state["bad_evals"])


class _EpochAware(Protocol):
    def set_epoch(self, epoch: int) -> None: ...


class EpochSetter(Callback):
    """Tells a dataset which epoch it serves (``dataset.set_epoch(trainer.epoch)``), at the
    start of a run (a resumed one too) and after every step, so that per-epoch randomness
    (crops, caption swaps) is a function of the epoch and the item, never of global state."""

    def __init__(self, dataset: _EpochAware) -> None:
        self.dataset = dataset

    def on_fit_start(self, trainer: _Trainer) -> None:
        self.dataset.set_epoch(trainer.epoch)

    def on_step_end(self, trainer: _Trainer, step: int, logs: dict[str, Any]) -> None:
        self.dataset.set_epoch(trainer.epoch)


__all__ = ["Callback", "EarlyStopping", "EpochSetter"]
