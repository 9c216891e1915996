"""What a run records: :class:`TrainResult`, the history ``Trainer.fit`` returns and checkpoints
carry, and :class:`RunState`, the position and partial sums of one ``fit`` call."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import torch


@dataclasses.dataclass
class TrainResult:
    """What ``Trainer.fit`` did, in lists that notebooks plot directly.

    Attributes:
        steps: optimizer step number (1-based) of each history entry.
        epochs: epoch (0-based) each step belongs to.
        losses: mean training loss of each step (over its micro-batches and processes).
        lrs: learning rate each step used.
        step_metrics: further per-step values (extra keys of ``loss_fn``'s dict, ``grad_norm``
            before clipping when clipping is on), each aligned with ``steps``.
        eval_steps: steps at which ``eval_fn`` ran.
        eval_metrics: what ``eval_fn`` returned at each of ``eval_steps``.
        final_step: optimizer steps taken in total.
        final_epoch: epochs completed when training ended.
        wall_time_s: seconds this ``fit`` call took (resumed runs: this segment only).
        stopped_early: a callback ended training before ``max_steps``/``num_epochs``.
        resumed_from: the checkpoint directory this call resumed from, if any.
        resumed_step: optimizer steps already taken when this call started (0 unless resumed);
            ``final_step - resumed_step`` steps took ``wall_time_s``.
        checkpoint: the newest checkpoint directory written or loaded, if any.
        skipped_steps: optimizer steps dropped for a non-finite loss or gradient
            (``on_nonfinite="skip"``), each with the reason.
    """

    steps: list[int] = dataclasses.field(default_factory=list)
    epochs: list[int] = dataclasses.field(default_factory=list)
    losses: list[float] = dataclasses.field(default_factory=list)
    lrs: list[float] = dataclasses.field(default_factory=list)
    step_metrics: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    eval_steps: list[int] = dataclasses.field(default_factory=list)
    eval_metrics: list[dict[str, float]] = dataclasses.field(default_factory=list)
    final_step: int = 0
    final_epoch: int = 0
    wall_time_s: float = 0.0
    stopped_early: bool = False
    resumed_from: str | None = None
    resumed_step: int = 0
    checkpoint: str | None = None
    skipped_steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def eval_metric(self, name: str) -> list[float]:
        """One evaluation metric over ``eval_steps`` (NaN where an evaluation lacked it)."""
        return [float(m.get(name, math.nan)) for m in self.eval_metrics]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly values (for the results ledger and ``json.dump``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainResult:
        """Rebuild from ``to_dict`` output (a checkpoint's history)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


@dataclasses.dataclass
class RunState:
    """The mutable position of one ``fit`` call: step, epoch, micro-batch, partial sums."""

    history: TrainResult
    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    done: bool = False
    loss_sum: torch.Tensor | None = None
    extra_sums: dict[str, Any] = dataclasses.field(default_factory=dict)
    nonfinite: list[str] = dataclasses.field(default_factory=list)


__all__ = ["RunState", "TrainResult"]
