"""Optimizers for :class:`audiorepro.training.Trainer`: the default AdamW and the factories a
chapter passes as ``optimizer_factory=``, each implemented as ``TrainConfig.optimizer_impl`` says."""

from __future__ import annotations

import torch

from audiorepro.training.config import TrainConfig


def optimizer_impl_kwargs(config: TrainConfig) -> dict[str, bool]:
    """The ``torch.optim`` keyword that selects ``config.optimizer_impl`` (Adam, AdamW)."""
    return {
        "auto": {},
        "for-loop": {"foreach": False},
        "foreach": {"foreach": True},
        "fused": {"fused": True},
    }[config.optimizer_impl]


def default_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW (Loshchilov & Hutter 2019) over the trainable parameters, ``lr``/``weight_decay``,
    implemented as ``optimizer_impl`` says."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters (requires_grad is False)")
    return torch.optim.AdamW(
        params, lr=config.lr, weight_decay=config.weight_decay, **optimizer_impl_kwargs(config)
    )


def adam_factory(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """Adam with betas (0.9, 0.999) and eps 1e-8, no weight decay (the AWE paper, §3.2),
    implemented as ``config.optimizer_impl`` says."""
    return torch.optim.Adam(
        model.parameters(), lr=config.lr, betas=(0.9, 0.999), eps=1e-8,
        **optimizer_impl_kwargs(config),
    )  # fmt: skip


__all__ = ["adam_factory", "default_optimizer", "optimizer_impl_kwargs"]
