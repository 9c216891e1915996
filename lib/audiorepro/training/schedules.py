"""Learning-rate schedules with linear warmup, as ``torch.optim.lr_scheduler.LambdaLR`` factories.

Every schedule multiplies the optimizer's base ``lr`` by a factor ``f(s)`` of the number ``s`` of
optimizer steps already taken (``s = 0`` for the first step), in two phases:

* warmup, ``s < warmup_steps``: ``f(s) = (s + 1) / warmup_steps``, rising linearly so that the
  first step already moves (no wasted step at ``lr = 0``) and step ``warmup_steps - 1`` uses the
  full ``lr`` (Goyal et al. 2017, "Accurate, large minibatch SGD", section 2.2);
* decay, ``s >= warmup_steps``, with progress ``p = (s - warmup_steps) / (total_steps -
  warmup_steps)`` in ``[0, 1)``:

  - ``constant``: ``f = 1``;
  - ``linear``: ``f = 1 - p``;
  - ``cosine``: ``f = (1 + cos(pi p)) / 2`` (SGDR without restarts, Loshchilov & Hutter 2017,
    eq. 5 with ``eta_min = 0``).

Steps past ``total_steps`` keep the final factor (0 for linear and cosine), so a run that goes on
longer than planned does not climb back up.

The factors are small callable objects rather than closures: ``LambdaLR.state_dict()`` then
stores their parameters (``warmup_steps``, ``total_steps``) as plain numbers, which the
checkpoint writes as JSON and restores exactly on resume.
"""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

SCHEDULES = ("constant", "cosine", "linear")


def _check_steps(warmup_steps: int, total_steps: int | None) -> None:
    """Raise ``ValueError`` naming the argument when a step count is out of range."""
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ValueError(f"warmup_steps must be an int >= 0, got {warmup_steps!r}")
    if total_steps is None:
        return
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps must be an int >= 1, got {total_steps!r}")
    if warmup_steps > total_steps:
        raise ValueError(
            f"warmup_steps ({warmup_steps}) must not exceed total_steps ({total_steps})"
        )


class WarmupFactor:
    """The learning-rate factor ``f(s)`` of one schedule (see the module docstring).

    Args:
        kind: ``"constant"``, ``"cosine"`` or ``"linear"``.
        warmup_steps: optimizer steps of linear warmup (0 = none).
        total_steps: optimizer steps the schedule spans (warmup included); unused by
            ``"constant"``.
    """

    def __init__(self, kind: str, warmup_steps: int = 0, total_steps: int | None = None) -> None:
        if kind not in SCHEDULES:
            raise ValueError(f"unknown schedule {kind!r}; valid schedules: {', '.join(SCHEDULES)}")
        if kind != "constant" and total_steps is None:
            raise ValueError(f"the {kind!r} schedule needs total_steps")
        _check_steps(warmup_steps, total_steps)
        self.kind = kind
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps

    def __call__(self, step: int) -> float:
        """The factor for the optimizer step that follows ``step`` completed steps."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.kind == "constant":
            return 1.0
        assert self.total_steps is not None
        decay_steps = self.total_steps - self.warmup_steps
        if decay_steps <= 0:
            return 0.0
        progress = min(1.0, (step - self.warmup_steps) / decay_steps)
        if self.kind == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    def __repr__(self) -> str:
        return (
            f"WarmupFactor(kind={self.kind!r}, warmup_steps={self.warmup_steps}, "
            f"total_steps={self.total_steps})"
        )


def constant_schedule(optimizer: Optimizer, warmup_steps: int = 0) -> LambdaLR:
    """Linear warmup over ``warmup_steps``, then the base ``lr`` for ever."""
    return LambdaLR(optimizer, WarmupFactor("constant", warmup_steps))


def cosine_schedule(optimizer: Optimizer, warmup_steps: int, total_steps: int) -> LambdaLR:
    """Linear warmup, then half a cosine from the base ``lr`` to 0 at ``total_steps``."""
    return LambdaLR(optimizer, WarmupFactor("cosine", warmup_steps, total_steps))


def linear_schedule(optimizer: Optimizer, warmup_steps: int, total_steps: int) -> LambdaLR:
    """Linear warmup, then a straight line from the base ``lr`` to 0 at ``total_steps``."""
    return LambdaLR(optimizer, WarmupFactor("linear", warmup_steps, total_steps))


def make_scheduler(
    optimizer: Optimizer, name: str, *, warmup_steps: int, total_steps: int
) -> LambdaLR:
    """The ``LambdaLR`` for a schedule named in a config (``TrainConfig.schedule``).

    Args:
        optimizer: the optimizer whose parameter groups' ``lr`` is the base rate.
        name: one of ``SCHEDULES``.
        warmup_steps: optimizer steps of linear warmup.
        total_steps: optimizer steps the whole schedule spans.
    """
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; valid schedules: {', '.join(SCHEDULES)}")
    _check_steps(warmup_steps, total_steps)
    if name == "constant":
        return constant_schedule(optimizer, warmup_steps)
    if name == "cosine":
        return cosine_schedule(optimizer, warmup_steps, total_steps)
    return linear_schedule(optimizer, warmup_steps, total_steps)
