"""Optimizer factories for :class:`audiorepro.training.Trainer` (``optimizer_factory=``)."""

from __future__ import annotations

import torch

from audiorepro.training.loop import TrainConfig, optimizer_impl_kwargs


def adam_factory(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """Adam with betas (0.9, 0.999) and eps 1e-8, no weight decay (the AWE paper, §3.2),
    implemented as ``config.optimizer_impl`` says."""
    return torch.optim.Adam(
        model.parameters(), lr=config.lr, betas=(0.9, 0.999), eps=1e-8,
        **optimizer_impl_kwargs(config),
    )  # fmt: skip


__all__ = ["adam_factory"]
