"""How to train: :class:`TrainConfig` (loop length, optimizer, schedule, precision, device,
checkpoints, logging), its allowed values, and the step arithmetic the loop derives from it."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from audiorepro.config import ConfigError, field
from audiorepro.training.schedules import SCHEDULES

MIXED_PRECISIONS = ("auto", "no", "fp32", "bf16", "fp16")
OPTIMIZER_IMPLS = ("auto", "for-loop", "foreach", "fused")
NONFINITE_ACTIONS = ("stop", "skip")
DEVICES = ("auto", "cpu", "cuda", "mps")
# Fields that may change between an interrupted run and its resumption without a warning.
RESUME_SAFE_FIELDS = frozenset(
    {
        "max_steps",
        "checkpoint_every",
        "keep_checkpoints",
        "eval_every",
        "log_every",
        "num_workers",
        "device",
        "mixed_precision",
        "find_unused_parameters",
    }
)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How to train: loop length, optimizer, schedule, precision, device, checkpoints, logging."""

    num_epochs: int = field(1, help="Passes over the training set.")
    max_steps: int | None = field(
        None,
        help="Stop after this many optimizer steps (None: run num_epochs). A cap only: the LR "
        "schedule still spans num_epochs, so a capped run is the prefix of the full run.",
    )
    batch_size: int = field(32, help="Examples per micro-batch (per process).")
    lr: float = field(1e-3, help="Peak learning rate of the default AdamW and the schedule.")
    weight_decay: float = field(0.01, help="Decoupled weight decay of the default AdamW.")
    grad_accum_steps: int = field(1, help="Micro-batches accumulated per optimizer step.")
    max_grad_norm: float | None = field(
        None, help="Clip the global gradient L2 norm to this value (None: no clipping)."
    )
    mixed_precision: str = field(
        "auto",
        help="auto | no (= fp32) | fp32 | bf16 | fp16: autocast of the forward pass. auto: bf16 "
        "on CUDA when supported, else fp16 on CUDA; no on CPU and MPS. fp16 scales the loss "
        "with a GradScaler (CUDA only). Codebook search and EMA, softmax normalisers and "
        "distances stay float32 under autocast (audiorepro.losses.precision).",
    )
    device: str = field("auto", help="auto (CUDA, then MPS, then CPU) | cpu | cuda | mps.")
    seed: int = field(0, help="Seeds initial RNG state, data order and DataLoader workers.")
    checkpoint_every: int = field(
        0, help="Write a checkpoint every this many optimizer steps (0: only at the end)."
    )
    keep_checkpoints: int = field(2, help="Keep the newest this many checkpoints.")
    eval_every: int = field(
        0, help="Call eval_fn every this many optimizer steps (0: at the end of every epoch)."
    )
    log_every: int = field(50, help="Record a progress line every this many optimizer steps.")
    warmup_steps: int = field(0, help="Optimizer steps of linear LR warmup.")
    schedule: str = field("constant", help="LR schedule after warmup: constant | cosine | linear.")
    min_lr: float = field(
        0.0,
        help="The learning rate the cosine or linear decay ends at, its floor (salsa and "
        "paper (a)/(b): 1e-7; 0: decay to 0). At most lr.",
    )
    schedule_steps: int | None = field(
        None,
        help="Optimizer steps the LR schedule spans (None: num_epochs x steps per epoch).",
    )
    num_workers: int = field(0, help="DataLoader worker processes (0: load in the main process).")
    find_unused_parameters: bool = field(
        False,
        help="Under several processes, let DDP skip parameters the loss does not reach (an "
        "encoder's unused classifier head or mask token); a little slower.",
    )
    optimizer_impl: str = field(
        "auto",
        help="How Adam/AdamW updates the parameters (torch.optim): auto (PyTorch's default: "
        "foreach on CUDA, a for-loop over tensors on the CPU) | for-loop | foreach | fused (one "
        "multithreaded kernel; 5x faster than the for-loop for a 100M-parameter model on 2 CPU "
        "cores, the paper presets'). The same update, in another floating-point order: results "
        "differ in the last bits.",
    )
    on_nonfinite: str = field(
        "stop",
        help="A NaN/inf loss term or gradient: stop (raise NonFiniteError naming the step, the "
        "batch's items and the loss terms) | skip (drop that optimizer step, count it in "
        "TrainResult.skipped_steps; for long paper-scale runs).",
    )

    def __post_init__(self) -> None:
        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v: Any) -> bool:
            return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)

        def fail(name: str, expected: str) -> None:
            raise ConfigError(
                f"TrainConfig.{name}: expected {expected}, got {getattr(self, name)!r}"
            )

        for name, low in (
            ("num_epochs", 1),
            ("batch_size", 1),
            ("grad_accum_steps", 1),
            ("seed", 0),
            ("checkpoint_every", 0),
            ("keep_checkpoints", 1),
            ("eval_every", 0),
            ("log_every", 1),
            ("warmup_steps", 0),
            ("num_workers", 0),
        ):
            value = getattr(self, name)
            if not is_int(value) or value < low:
                fail(name, f"an int >= {low}")
        for name in ("max_steps", "schedule_steps"):
            value = getattr(self, name)
            if value is not None and (not is_int(value) or value < 1):
                fail(name, "None or an int >= 1")
        if not is_num(self.lr) or self.lr <= 0:
            fail("lr", "a number > 0")
        if not is_num(self.min_lr) or not 0 <= self.min_lr <= self.lr:
            fail("min_lr", f"a number in [0, lr={self.lr}]")
        if not is_num(self.weight_decay) or self.weight_decay < 0:
            fail("weight_decay", "a number >= 0")
        if self.max_grad_norm is not None and (
            not is_num(self.max_grad_norm) or self.max_grad_norm <= 0
        ):
            fail("max_grad_norm", "None or a number > 0")
        if self.mixed_precision not in MIXED_PRECISIONS:
            fail("mixed_precision", " | ".join(MIXED_PRECISIONS))
        if self.device not in DEVICES:
            fail("device", " | ".join(DEVICES))
        if self.schedule not in SCHEDULES:
            fail("schedule", " | ".join(SCHEDULES))
        if self.on_nonfinite not in NONFINITE_ACTIONS:
            fail("on_nonfinite", " | ".join(NONFINITE_ACTIONS))
        if self.optimizer_impl not in OPTIMIZER_IMPLS:
            fail("optimizer_impl", " | ".join(OPTIMIZER_IMPLS))


# --------------------------------------------------------------------------------------------
# Step arithmetic
# --------------------------------------------------------------------------------------------


def steps_per_epoch(config: TrainConfig, local_batches: int) -> int:
    """Optimizer steps in an epoch of ``local_batches`` micro-batches (per process); the last
    accumulation group may be short."""
    return math.ceil(local_batches / config.grad_accum_steps)


def schedule_span(config: TrainConfig, steps_per_epoch: int) -> int:
    """Optimizer steps the LR schedule spans: ``config.schedule_steps``, else ``num_epochs``
    worth (never ``max_steps``, so that a capped run is the prefix of the full one)."""
    return config.schedule_steps or config.num_epochs * steps_per_epoch


def steps_to_run(config: TrainConfig, steps_per_epoch: int) -> int:
    """Optimizer steps ``fit`` runs to: ``num_epochs`` worth, capped by ``max_steps``."""
    steps = config.num_epochs * steps_per_epoch
    return min(steps, config.max_steps) if config.max_steps else steps


def accumulation_group(
    config: TrainConfig, batch_in_epoch: int, local_batches: int
) -> tuple[int, bool]:
    """``(group size, ends the group)`` of micro-batch ``batch_in_epoch``: groups hold
    ``grad_accum_steps`` micro-batches, the epoch's last one what is left."""
    accum = config.grad_accum_steps
    group_start = batch_in_epoch - batch_in_epoch % accum
    group_size = min(accum, local_batches - group_start)
    return group_size, batch_in_epoch + 1 - group_start == group_size


__all__ = [
    "DEVICES",
    "MIXED_PRECISIONS",
    "NONFINITE_ACTIONS",
    "OPTIMIZER_IMPLS",
    "RESUME_SAFE_FIELDS",
    "TrainConfig",
    "accumulation_group",
    "schedule_span",
    "steps_per_epoch",
    "steps_to_run",
]
