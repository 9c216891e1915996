"""Learning-rate schedules with linear warmup, as ``torch.optim.lr_scheduler.LambdaLR`` factories.

Every schedule multiplies the optimizer's base ``lr`` by a factor ``f(s)`` of the number ``s`` of
optimizer steps already taken (``s = 0`` for the first step), in two phases:

* warmup, ``s < warmup_steps``: ``f(s) = (s + 1) / warmup_steps``, rising linearly so that the
  first step already moves (no wasted step at ``lr = 0``) and step ``warmup_steps - 1`` uses the
  full ``lr`` (Goyal et al. 2017, "Accurate, large minibatch SGD", section 2.2);
* decay, ``s >= warmup_steps``, with progress ``p = (s - warmup_steps) / (total_steps -
  warmup_steps)`` in ``[0, 1)``:

  - ``constant``: ``f = 1``;
  - ``linear``: ``f = m + (1 - m) (1 - p)``;
  - ``cosine``: ``f = m + (1 - m) (1 + cos(pi p)) / 2`` (SGDR without restarts, Loshchilov &
    Hutter 2017, eq. 5 with ``eta_min = m · lr``),

  where the floor ``m = min_lr / lr`` (0 by default) is where the decay ends: salsa's cosine
  ends at ``min_lr = 1e-7`` (``shared/reference/retrieval.md`` §4).

Steps past ``total_steps`` keep the final factor (``m``, 0 by default, for linear and cosine), so
a run that goes on longer than planned does not climb back up.

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


def _check_floor(floor: float) -> None:
    """Raise ``ValueError`` unless the decay floor is a number in [0, 1]."""
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor (min_lr / lr) must be a number in [0, 1], got {floor!r}")


class WarmupFactor:
    """The learning-rate factor ``f(s)`` of one schedule (see the module docstring).

    Args:
        kind: ``"constant"``, ``"cosine"`` or ``"linear"``.
        warmup_steps: optimizer steps of linear warmup (0 = none).
        total_steps: optimizer steps the schedule spans (warmup included); unused by
            ``"constant"``.
        floor: the factor the decay ends at, ``min_lr / lr`` in [0, 1] (0: decay to 0).
    """

    def __init__(
        self,
        kind: str,
        warmup_steps: int = 0,
        total_steps: int | None = None,
        floor: float = 0.0,
    ) -> None:
        if kind not in SCHEDULES:
            raise ValueError(f"unknown schedule {kind!r}; valid schedules: {', '.join(SCHEDULES)}")
        if kind != "constant" and total_steps is None:
            raise ValueError(f"the {kind!r} schedule needs total_steps")
        _check_steps(warmup_steps, total_steps)
        _check_floor(floor)
        self.kind = kind
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.floor = float(floor)

    def __call__(self, step: int) -> float:
        """The factor for the optimizer step that follows ``step`` completed steps."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.kind == "constant":
            return 1.0
        assert self.total_steps is not None
        decay_steps = self.total_steps - self.warmup_steps
        if decay_steps <= 0:
            return self.floor
        progress = min(1.0, (step - self.warmup_steps) / decay_steps)
        if self.kind == "linear":
            decay = 1.0 - progress
        else:
            decay = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.floor + (1.0 - self.floor) * decay

    def __repr__(self) -> str:
        return (
            f"WarmupFactor(kind={self.kind!r}, warmup_steps={self.warmup_steps}, "
            f"total_steps={self.total_steps}, floor={self.floor})"
        )


def constant_schedule(optimizer: Optimizer, warmup_steps: int = 0) -> LambdaLR:
    """Linear warmup over ``warmup_steps``, then the base ``lr`` for ever."""
    return LambdaLR(optimizer, WarmupFactor("constant", warmup_steps))


def cosine_schedule(
    optimizer: Optimizer, warmup_steps: int, total_steps: int, floor: float = 0.0
) -> LambdaLR:
    """Linear warmup, then half a cosine from the base ``lr`` to ``floor · lr`` at
    ``total_steps``."""
    return LambdaLR(optimizer, WarmupFactor("cosine", warmup_steps, total_steps, floor))


def linear_schedule(
    optimizer: Optimizer, warmup_steps: int, total_steps: int, floor: float = 0.0
) -> LambdaLR:
    """Linear warmup, then a straight line from the base ``lr`` to ``floor · lr`` at
    ``total_steps``."""
    return LambdaLR(optimizer, WarmupFactor("linear", warmup_steps, total_steps, floor))


def make_scheduler(
    optimizer: Optimizer,
    name: str,
    *,
    warmup_steps: int,
    total_steps: int,
    min_lr: float = 0.0,
) -> LambdaLR:
    """The ``LambdaLR`` for a schedule named in a config (``TrainConfig.schedule``).

    Args:
        optimizer: the optimizer whose parameter groups' ``lr`` is the base rate.
        name: one of ``SCHEDULES``.
        warmup_steps: optimizer steps of linear warmup.
        total_steps: optimizer steps the whole schedule spans.
        min_lr: the learning rate the cosine or linear decay ends at (``TrainConfig.min_lr``;
            at most the first parameter group's base ``lr``, every group decays to the same
            fraction of its own).
    """
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; valid schedules: {', '.join(SCHEDULES)}")
    _check_steps(warmup_steps, total_steps)
    base = float(optimizer.param_groups[0].get("initial_lr", optimizer.param_groups[0]["lr"]))
    if min_lr < 0 or min_lr > base:
        raise ValueError(f"min_lr must be in [0, lr={base}], got {min_lr!r}")
    floor = min_lr / base if base > 0 else 0.0
    if name == "constant":
        return constant_schedule(optimizer, warmup_steps)
    if name == "cosine":
        return cosine_schedule(optimizer, warmup_steps, total_steps, floor)
    return linear_schedule(optimizer, warmup_steps, total_steps, floor)
