"""A model-agnostic training loop on ``accelerate``, resumable bit for bit from its checkpoints.

A chapter plugs in three things and the loop does the rest (device, mixed precision, gradient
accumulation, clipping, LR schedule, evaluation, early stopping, checkpoints, progress)::

    def loss_fn(model, batch):            # -> scalar loss tensor, or {"loss": ..., "vq": ...}
        feats, lengths = batch
        return model(feats, lengths).loss

    def eval_fn(model):                   # -> {"abx": 0.21, ...}, called in eval mode, no grad
        return {"abx": abx_error(...)}

    trainer = Trainer(model, loss_fn, train_dataset, config, eval_fn=eval_fn, out_dir=run_dir)
    result = trainer.fit(resume=True)     # continues from run_dir/checkpoints if there are any

**Steps.** A *step* is one optimizer update: ``grad_accum_steps`` micro-batches of
``batch_size`` examples each. ``max_steps``, ``checkpoint_every``, ``eval_every``, ``log_every``,
``warmup_steps`` and the history all count steps.

**Gradient accumulation** follows loss-mean semantics: when ``loss_fn`` returns the mean over its
micro-batch, the update equals the update on the concatenated large batch (up to float rounding).
``accelerator.backward`` divides each micro-batch loss by ``grad_accum_steps``; the last group of
an epoch may hold fewer micro-batches, and its losses are scaled by ``grad_accum_steps / size``
so that it too averages, rather than under-weighting the epoch's tail.

**Data order.** The trainer owns shuffling: ``EpochBatchSampler`` draws one permutation per epoch
from a ``torch.Generator`` seeded from ``(config.seed, epoch)``, so the order is a pure function of
the seed and the epoch, and on resume the sampler skips the batches the checkpoint had already
consumed. The DataLoader gets its own generator too (reseeded per epoch), so building iterators
never draws from torch's global generator, which dropout uses. Exact resumption needs datasets
whose ``__getitem__`` is a function of the index (derive augmentation randomness from the index
and epoch, not from global generators): ``accelerate`` fetches one batch ahead, and with
``num_workers > 0`` worker generators restart at each epoch and on resume.

**Resumption** restores model, optimizer, scheduler, fp16 grad scaler, callback state, the
position (step, epoch, batch in epoch), the history and every random generator (Python, NumPy,
torch CPU, CUDA, the data-order generator), so an interrupted and resumed run ends with
parameters ``torch.equal`` to an uninterrupted run on CPU. The LR schedule spans
``num_epochs`` (or ``schedule_steps``), not ``max_steps``: a run capped at ``max_steps`` is the
exact prefix of the longer run, which is what smoke presets and resumption rely on.

A checkpoint that fails its integrity check (a file missing, truncated or differing from the
SHA-256 its manifest recorded) is moved aside as ``corrupt-step_XXXXXXXX`` with a warning naming
it, and the run resumes from the newest earlier checkpoint that passes (from step 0 if none
does). ``checkpoint_frozen=False`` keeps frozen parameters (``requires_grad`` False, e.g. a
pretrained text encoder used as it is) out of every checkpoint; a resumed run then relies on its
model having been built with the same frozen values.

**Progress output.** On a terminal or in an interactive notebook a tqdm bar redraws in place.
A saved notebook would keep every redraw, so in a page executed headlessly (``audiorepro.pages``
sets ``$AUDIOREPRO_HEADLESS``) a run prints one closing line: steps, epochs, time, step rate and
the loss from first to last. In a log (stdout not a terminal) a plain line with loss and lr is
printed every ``log_every`` steps. ``progress=`` forces ``"bar"``, ``"lines"``, ``"summary"`` or
``"none"``.

**Several processes** (``accelerate launch``): the loop is unchanged. Model, optimizer and
DataLoader go through ``accelerator.prepare`` (the sampler's batches are dealt round-robin to
processes, so ``batch_size`` is per process), losses are averaged over processes for the
history, only the main process writes checkpoints (between ``wait_for_everyone`` barriers) and
every process's random state is gathered into them. The LR scheduler is stepped by the loop
itself, once per optimizer update, not through ``accelerator.prepare`` (which would step it once
per process). ``loss_fn`` receives the prepared model (DDP-wrapped under several processes: call
it, so gradients synchronise); ``eval_fn`` and checkpoints get the unwrapped model.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import DistributedDataParallelKwargs, gather_object
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler
from tqdm.auto import tqdm as tqdm_auto

from audiorepro.config import ConfigError, field, to_dict
from audiorepro.repro import environment_snapshot, seed_everything
from audiorepro.training.checkpoint import (
    MANIFEST,
    CheckpointError,
    capture_rng_state,
    checkpoint_name,
    clear_checkpoints,
    list_checkpoints,
    load_checkpoint,
    mark_corrupt,
    restore_rng_state,
    save_checkpoint,
    verify_checkpoint,
)
from audiorepro.training.schedules import SCHEDULES, make_scheduler

MIXED_PRECISIONS = ("auto", "no", "fp32", "bf16", "fp16")
OPTIMIZER_IMPLS = ("auto", "for-loop", "foreach", "fused")
NONFINITE_ACTIONS = ("stop", "skip")


class NonFiniteError(FloatingPointError):
    """A loss term or gradient became NaN or infinite; the message names the step and items."""


DEVICES = ("auto", "cpu", "cuda", "mps")
PROGRESS_MODES = ("auto", "bar", "lines", "summary", "none")
HEADLESS_ENV = "AUDIOREPRO_HEADLESS"  # set by audiorepro.pages while it executes a page
# Seconds between progress-bar lines when stdout is not a terminal (papermill, CI logs).
# Fields that may change between an interrupted run and its resumption without a warning.
_RESUME_SAFE_FIELDS = frozenset(
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


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


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


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return backend is not None and backend.is_available()


def resolve_device(device: str) -> str:
    """``"auto"`` becomes ``"cuda"``, else ``"mps"``, else ``"cpu"``; explicit names are checked.

    Raises:
        ConfigError: an unknown name, or a device this machine does not have.
    """
    if device not in DEVICES:
        raise ConfigError(f"device: expected {' | '.join(DEVICES)}, got {device!r}")
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if _mps_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device='cuda' but torch.cuda.is_available() is False on this machine")
    if device == "mps" and not _mps_available():
        raise ConfigError("device='mps' but torch.backends.mps.is_available() is False")
    return device


def resolve_mixed_precision(mixed_precision: str, device: str) -> str:
    """The precision accelerate should use on a resolved ``device`` (``"cpu"|"cuda"|"mps"``).

    ``"auto"`` is bf16 on CUDA devices that support it, fp16 on older CUDA devices, and ``"no"``
    on CPU and MPS (where autocast brings little and bf16 kernels are slow or missing);
    ``"fp32"`` is another name of ``"no"``. fp16 comes with accelerate's GradScaler.

    Raises:
        ConfigError: an unknown name, or fp16 on the CPU (it needs a GPU grad scaler).
    """
    if mixed_precision not in MIXED_PRECISIONS:
        raise ConfigError(
            f"mixed_precision: expected {' | '.join(MIXED_PRECISIONS)}, got {mixed_precision!r}"
        )
    if mixed_precision == "fp32":
        return "no"
    if mixed_precision == "auto":
        if device == "cuda":
            return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        return "no"
    if mixed_precision == "fp16" and device == "cpu":
        raise ConfigError("mixed_precision='fp16' needs a GPU; use 'bf16' or 'no' on the CPU")
    return mixed_precision


def _distributed() -> bool:
    """Whether this process is one of several (``accelerate launch`` / ``torchrun``)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def _reset_accelerate_state() -> None:
    """Forget accelerate's process-wide singletons so the next Accelerator can differ."""
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


def make_accelerator(
    device: str, mixed_precision: str, grad_accum_steps: int, find_unused_parameters: bool = False
) -> Accelerator:
    """An ``Accelerator`` on a resolved device, with the given precision and accumulation.

    accelerate keeps its device and precision in process-wide singletons and refuses (or, for
    cpu -> cuda, silently ignores) a second Accelerator that asks for other ones. A notebook
    that trains two models with different settings is normal, so in a single process the
    singletons are reset (an earlier Trainer with other settings must not be used after that);
    under ``accelerate launch`` a reset would break the process group, so a conflict there is a
    ``ConfigError``.
    """
    kwargs = {
        "cpu": device == "cpu",
        "mixed_precision": mixed_precision,
        "gradient_accumulation_steps": grad_accum_steps,
    }
    if find_unused_parameters:
        kwargs["kwargs_handlers"] = [DistributedDataParallelKwargs(find_unused_parameters=True)]
    conflict = (
        f"accelerate is already set up for another device/precision in this process and cannot "
        f"switch to device={device!r}, mixed_precision={mixed_precision!r} under several "
        "processes; use the same settings for every Trainer of a launched script"
    )
    try:
        accelerator = Accelerator(**kwargs)
    except ValueError as err:
        if "already been initialized" not in str(err):
            raise
        if _distributed():
            raise ConfigError(conflict) from err
        _reset_accelerate_state()
        accelerator = Accelerator(**kwargs)
    if accelerator.device.type != device:
        if _distributed():
            raise ConfigError(conflict)
        _reset_accelerate_state()
        accelerator = Accelerator(**kwargs)
        if accelerator.device.type != device:
            raise ConfigError(
                f"accelerate placed the model on {accelerator.device}, expected {device}"
            )
    return accelerator


# --------------------------------------------------------------------------------------------
# Data order
# --------------------------------------------------------------------------------------------


def epoch_seed(seed: int, epoch: int, stream: int = 0) -> int:
    """A 63-bit seed for ``(seed, epoch, stream)``, well mixed by NumPy's ``SeedSequence``.

    Distinct triples give unrelated seeds (unlike ``seed * 1000 + epoch``, which collides once
    epochs reach 1000).
    """
    state = np.random.SeedSequence([seed, epoch, stream]).generate_state(1, dtype=np.uint64)[0]
    return int(state) >> 1


class EpochBatchSampler(Sampler[list[int]]):
    """Batches of a seeded per-epoch permutation of a map-style dataset, resumable mid-epoch.

    Epoch ``e`` shuffles ``range(num_samples)`` with a ``torch.Generator`` seeded with
    ``epoch_seed(seed, e)`` and cuts it into batches of ``batch_size`` (the last one shorter
    unless ``drop_last``). With ``num_replicas > 1`` processes the batch list is padded, by
    repeating its first batches, to a multiple of ``num_replicas``, so that accelerate can deal
    batches round-robin without wrapping around on its own (which would not survive a resume).

    The sampler deliberately has no ``batch_size`` attribute: accelerate then treats its batches
    as given and does not re-split them.

    Args:
        num_samples: ``len(dataset)``.
        batch_size: examples per batch.
        seed: base seed (``TrainConfig.seed``).
        shuffle: ``False`` keeps the dataset order (evaluation-style passes).
        drop_last: drop the last, shorter batch.
        num_replicas: number of processes that share the batches.
    """

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        *,
        seed: int,
        shuffle: bool = True,
        drop_last: bool = False,
        num_replicas: int = 1,
    ) -> None:
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if drop_last and num_samples < batch_size:
            raise ValueError(
                f"drop_last with {num_samples} samples < batch_size {batch_size} leaves no batch"
            )
        self.num_samples = num_samples
        self.samples_per_batch = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.num_replicas = num_replicas
        self.order_generator = torch.Generator()
        self.epoch = 0
        self.skip_batches = 0

    @property
    def num_batches(self) -> int:
        """Batches in a full epoch, padding for ``num_replicas`` included."""
        if self.drop_last:
            n = self.num_samples // self.samples_per_batch
        else:
            n = math.ceil(self.num_samples / self.samples_per_batch)
        return math.ceil(n / self.num_replicas) * self.num_replicas

    def start_epoch(self, epoch: int, skip_batches: int = 0) -> None:
        """Select the permutation of ``epoch`` and skip its first ``skip_batches`` batches."""
        if not 0 <= skip_batches <= self.num_batches:
            raise ValueError(
                f"skip_batches must be in [0, {self.num_batches}], got {skip_batches}"
            )
        self.epoch = epoch
        self.skip_batches = skip_batches

    def permutation(self, epoch: int) -> torch.Tensor:
        """The order of the examples in ``epoch``: ``(num_samples,)`` int64."""
        if not self.shuffle:
            return torch.arange(self.num_samples)
        self.order_generator.manual_seed(epoch_seed(self.seed, epoch))
        return torch.randperm(self.num_samples, generator=self.order_generator)

    def batches(self, epoch: int) -> list[list[int]]:
        """Every batch of ``epoch`` (before skipping), padded for ``num_replicas``."""
        order = self.permutation(epoch).tolist()
        size = self.samples_per_batch
        batches = [order[i : i + size] for i in range(0, len(order), size)]
        if self.drop_last and len(batches[-1]) < size:
            batches.pop()
        padding = self.num_batches - len(batches)
        return batches + [batches[i % len(batches)] for i in range(padding)]

    def __iter__(self):
        yield from self.batches(self.epoch)[self.skip_batches :]

    def __len__(self) -> int:
        return self.num_batches - self.skip_batches


# --------------------------------------------------------------------------------------------
# Callbacks
# --------------------------------------------------------------------------------------------


class Callback:
    """The callback protocol, as a base class whose methods do nothing; override what you need.

    The trainer calls these methods on each callback where they exist, so any object with some
    of them works (duck typing); subclassing only documents the intent.

    ``on_step_end`` and ``on_eval_end`` may return ``"stop"`` (or set ``trainer.should_stop``)
    to end training after the current step; the final checkpoint is still written. Callbacks
    with state (``EarlyStopping``'s best value) implement ``state_dict``/``load_state_dict`` so
    that the state travels with checkpoints; it must be JSON-friendly.
    """

    def on_fit_start(self, trainer: Trainer) -> None:
        """Called once when ``fit`` starts (after resuming, before the first step)."""

    def on_step_end(self, trainer: Trainer, step: int, logs: dict[str, float]) -> str | None:
        """Called after optimizer step ``step`` with that step's ``loss``, ``lr`` and extras."""
        return None

    def on_eval_end(self, trainer: Trainer, step: int, metrics: dict[str, float]) -> str | None:
        """Called after ``eval_fn`` ran at step ``step``."""
        return None

    def on_fit_end(self, trainer: Trainer, result: TrainResult) -> None:
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

    def on_eval_end(self, trainer: Trainer, step: int, metrics: dict[str, float]) -> str | None:
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


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Progress output
# --------------------------------------------------------------------------------------------


def _stdout_is_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _interactive_notebook() -> bool:
    """True inside a Jupyter kernel (where tqdm.auto draws a widget)."""
    if "IPython" not in sys.modules:
        return False
    shell = sys.modules["IPython"].get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _auto_progress() -> str:
    """``bar`` on a terminal or in an interactive notebook, ``summary`` in a page executed
    headlessly (papermill via :mod:`audiorepro.pages`), ``lines`` in logs."""
    if os.environ.get(HEADLESS_ENV):
        return "summary"
    if _stdout_is_tty() or _interactive_notebook():
        return "bar"
    return "lines"


class _Progress:
    """The progress output of one ``fit`` call (main process only).

    ``bar``: a live tqdm bar (terminal, interactive notebook). ``lines``: a plain line every
    ``log_every`` steps and every evaluation (logs). ``summary``: nothing until the run's one
    closing line (a saved notebook, where redraws would pile up). ``none``: silent. In a page
    executed headlessly, ``lines`` is shown as ``summary``.
    """

    def __init__(
        self, mode: str, *, total: int, initial: int, enabled: bool, preamble: Iterable[str] = ()
    ) -> None:
        if mode == "auto":
            mode = _auto_progress()
        elif mode == "lines" and os.environ.get(HEADLESS_ENV):
            mode = "summary"
        self.mode = mode if enabled else "none"
        if self.mode != "none":
            for line in preamble:
                print(line, flush=True)
        self.total = total
        self.bar: Any = None
        self.start = time.perf_counter()
        self.initial = initial
        self.first_loss: float | None = None
        self.last_loss: float | None = None
        if self.mode == "bar":
            self.bar = tqdm_auto(
                total=total, initial=initial, desc="train", unit="step", dynamic_ncols=True
            )

    def print(self, text: str) -> None:
        """A message that does not break the bar (not shown in ``summary`` mode)."""
        if self.mode == "bar":
            self.bar.write(text)
        elif self.mode == "lines":
            print(text, flush=True)

    def step(self, step: int, epoch: int, logs: Mapping[str, float], log_now: bool) -> None:
        """Advance by one step; show ``logs`` every ``log_every`` steps."""
        if "loss" in logs:
            if self.first_loss is None:
                self.first_loss = logs["loss"]
            self.last_loss = logs["loss"]
        if self.mode == "bar":
            self.bar.update(1)
            if log_now:
                self.bar.set_postfix({k: f"{v:.4g}" for k, v in logs.items()}, refresh=False)
            return
        if self.mode != "lines" or not log_now:
            return
        rate = (step - self.initial) / max(time.perf_counter() - self.start, 1e-9)
        values = " | ".join(f"{k} {v:.4g}" for k, v in logs.items())
        width = len(str(self.total))
        print(
            f"step {step:>{width}}/{self.total} | epoch {epoch + 1} | {values} | "
            f"{rate:.2f} step/s",
            flush=True,
        )

    def summary(self, steps: int, epochs: int, seconds: float, stopped_early: bool) -> str:
        """The run's closing line: steps, epochs, time, rate and the loss from first to last."""
        rate = (steps - self.initial) / max(seconds, 1e-9)
        loss = ""
        if self.first_loss is not None and self.last_loss is not None:
            loss = f", loss {self.first_loss:.4g} -> {self.last_loss:.4g}"
        status = " (stopped early)" if stopped_early else ""
        return (
            f"done: {steps} step(s), {epochs} epoch(s) in {seconds:.1f} s "
            f"({rate:.2f} step/s){loss}{status}"
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


# --------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------


def _scalar(value: Any, what: str) -> float:
    """A Python float from a number or a one-element tensor; anything else is a TypeError."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(f"{what} must be a scalar, got a tensor of shape {tuple(value.shape)}")
        return float(value.detach().float().item())
    if isinstance(value, int | float | np.number) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"{what} must be a number or a scalar tensor, got {type(value).__name__}")


def _scalar_tensor(value: Any, what: str, device: torch.device) -> torch.Tensor:
    """A 0-dim float tensor on ``device`` (no host sync for tensors already there)."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(f"{what} must be a scalar, got a tensor of shape {tuple(value.shape)}")
        return value.detach().float().reshape(()).to(device)
    return torch.tensor(_scalar(value, what), device=device)


def _split_loss(output: Any) -> tuple[torch.Tensor, dict[str, Any]]:
    """``(loss, extras)`` from what ``loss_fn`` returned, validated."""
    extras: dict[str, Any] = {}
    if isinstance(output, Mapping):
        if "loss" not in output:
            raise KeyError(f"loss_fn returned a dict without 'loss' (keys: {sorted(output)})")
        extras = {k: v for k, v in output.items() if k != "loss"}
        output = output["loss"]
    if not isinstance(output, torch.Tensor):
        raise TypeError(
            f"loss_fn must return a scalar tensor or a dict with 'loss', got "
            f"{type(output).__name__}"
        )
    if output.numel() != 1:
        raise ValueError(f"loss_fn must return a scalar loss, got shape {tuple(output.shape)}")
    if not output.requires_grad:
        raise ValueError(
            "the loss does not require grad: loss_fn detached it or ran under torch.no_grad()"
        )
    return output.reshape(()), extras


@dataclasses.dataclass
class _Run:
    """The mutable position of one ``fit`` call: step, epoch, micro-batch, partial sums."""

    history: TrainResult
    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    done: bool = False
    loss_sum: torch.Tensor | None = None
    extra_sums: dict[str, Any] = dataclasses.field(default_factory=dict)
    nonfinite: list[str] = dataclasses.field(default_factory=list)


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


class Trainer:
    """Trains any ``nn.Module`` with a ``loss_fn`` on a map-style dataset (see module docs).

    Args:
        model: the model; moved to the device and prepared by accelerate.
        loss_fn: ``loss_fn(model, batch) -> loss`` (scalar tensor) or a dict with ``"loss"`` and
            further scalar values recorded per step. ``batch`` is what ``collate_fn`` returns,
            on the device.
        train_dataset: a map-style ``torch.utils.data.Dataset`` (``__len__``, ``__getitem__``).
        config: the ``TrainConfig``.
        collate_fn: turns a list of examples into a batch (default: torch's default collate).
        eval_fn: ``eval_fn(model) -> {name: float}``, run in eval mode under ``no_grad`` every
            ``eval_every`` steps (0: every epoch) and at the last step; gets the unwrapped model.
            Under several processes it runs on each; combine their results inside it with
            ``accelerate.utils.gather_object`` (or evaluate everything on every process).
        optimizer_factory: ``optimizer_factory(model, config) -> Optimizer`` (default: AdamW
            with ``config.lr`` and ``config.weight_decay``).
        out_dir: run folder; checkpoints go to ``out_dir/checkpoints``. ``None`` writes nothing.
        callbacks: objects with any of ``Callback``'s methods.
        checkpoint_frozen: ``False`` leaves the model's frozen parameters (``requires_grad``
            False) out of checkpoints; resuming keeps the values the model was built with.
        progress: ``"auto"`` (bar on a terminal, plain lines otherwise), ``"bar"``, ``"lines"``
            or ``"none"``.

    Attributes:
        accelerator, model (prepared), optimizer (prepared), scheduler, sampler, train_loader,
        steps_per_epoch, total_steps (the schedule's span), step and epoch (the position while
        ``fit`` runs), should_stop (set it to end training after the current step).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        loss_fn: Callable[[torch.nn.Module, Any], Any],
        train_dataset: Dataset,
        config: TrainConfig,
        *,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        eval_fn: Callable[[torch.nn.Module], Mapping[str, float]] | None = None,
        optimizer_factory: Callable[[torch.nn.Module, TrainConfig], torch.optim.Optimizer]
        | None = None,
        out_dir: str | Path | None = None,
        callbacks: Iterable[Any] = (),
        checkpoint_frozen: bool = True,
        progress: str = "auto",
    ) -> None:
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not callable(loss_fn):
            raise TypeError("loss_fn must be callable: loss_fn(model, batch) -> loss")
        if eval_fn is not None and not callable(eval_fn):
            raise TypeError("eval_fn must be callable: eval_fn(model) -> dict[str, float]")
        if isinstance(train_dataset, IterableDataset) or not (
            hasattr(train_dataset, "__len__") and hasattr(train_dataset, "__getitem__")
        ):
            raise TypeError(
                "train_dataset must be a map-style Dataset (__len__ and __getitem__); the "
                "trainer owns the data order so that runs resume exactly"
            )
        if len(train_dataset) == 0:
            raise ValueError("train_dataset is empty")
        if progress not in PROGRESS_MODES:
            raise ValueError(f"progress must be one of {PROGRESS_MODES}, got {progress!r}")
        self.config = config
        self.loss_fn = loss_fn
        self.eval_fn = eval_fn
        self.callbacks: list[Any] = list(callbacks)
        self.progress = progress
        self.checkpoint_frozen = bool(checkpoint_frozen)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.device_type = resolve_device(config.device)
        self.mixed_precision = resolve_mixed_precision(config.mixed_precision, self.device_type)
        self.accelerator = make_accelerator(
            self.device_type,
            self.mixed_precision,
            config.grad_accum_steps,
            config.find_unused_parameters,
        )
        num_processes = self.accelerator.num_processes

        model.to(self.accelerator.device)
        optimizer = (optimizer_factory or default_optimizer)(model, config)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"optimizer_factory must return a torch.optim.Optimizer, got "
                f"{type(optimizer).__name__}"
            )
        self.sampler = EpochBatchSampler(
            len(train_dataset), config.batch_size, seed=config.seed, num_replicas=num_processes
        )
        # Its own generator keeps iterator creation off torch's global RNG (see module docs).
        self.loader_generator = torch.Generator()
        loader = DataLoader(
            train_dataset,
            batch_sampler=self.sampler,
            collate_fn=collate_fn,
            num_workers=config.num_workers,
            generator=self.loader_generator,
            pin_memory=self.device_type == "cuda",
        )
        self.local_batches_per_epoch = self.sampler.num_batches // num_processes
        self.steps_per_epoch = math.ceil(self.local_batches_per_epoch / config.grad_accum_steps)
        self.total_steps = config.schedule_steps or config.num_epochs * self.steps_per_epoch
        try:
            self.scheduler = make_scheduler(
                optimizer,
                config.schedule,
                warmup_steps=config.warmup_steps,
                total_steps=self.total_steps,
                min_lr=config.min_lr,
            )
        except ValueError as err:
            raise ConfigError(f"TrainConfig: {err}") from err
        self.model, self.optimizer, self.train_loader = self.accelerator.prepare(
            model, optimizer, loader
        )
        self.should_stop = False
        self.step = 0
        self.epoch = 0
        self._environment: dict[str, Any] | None = None

    # ---------------------------------------------------------------- conveniences

    @property
    def unwrapped_model(self) -> torch.nn.Module:
        """The model without DDP/mixed-precision wrappers (for methods and state_dict)."""
        return self.accelerator.unwrap_model(self.model)

    @property
    def checkpoint_dir(self) -> Path | None:
        """``out_dir/checkpoints``, or ``None`` without an ``out_dir``."""
        return self.out_dir / "checkpoints" if self.out_dir is not None else None

    @property
    def planned_steps(self) -> int:
        """Optimizer steps ``fit`` runs to: ``num_epochs`` worth, capped by ``max_steps``."""
        steps = self.config.num_epochs * self.steps_per_epoch
        return min(steps, self.config.max_steps) if self.config.max_steps else steps

    def evaluate(self) -> dict[str, float]:
        """Run ``eval_fn`` on the unwrapped model in eval mode without gradients."""
        if self.eval_fn is None:
            raise RuntimeError("this Trainer has no eval_fn")
        model = self.unwrapped_model
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                metrics = self.eval_fn(model)
        finally:
            model.train(was_training)
        if not isinstance(metrics, Mapping):
            raise TypeError(
                f"eval_fn must return a dict[str, float], got {type(metrics).__name__}"
            )
        return {str(k): _scalar(v, f"eval_fn()[{k!r}]") for k, v in metrics.items()}

    # ---------------------------------------------------------------- checkpoints

    def _trainer_state(
        self, step: int, epoch: int, batch_in_epoch: int, history: TrainResult
    ) -> dict[str, Any]:
        return {
            "step": step,
            "epoch": epoch,
            "batch_in_epoch": batch_in_epoch,
            "num_processes": self.accelerator.num_processes,
            "stopped_early": history.stopped_early,
            "config": to_dict(self.config),
            "history": history.to_dict(),
            "environment": self._environment or environment_snapshot(),
        }

    def _callback_states(self) -> list[dict[str, Any]]:
        return [
            {"class": type(cb).__name__, "state": cb.state_dict()}
            for cb in self.callbacks
            if hasattr(cb, "state_dict")
        ]

    def _rng_generators(self) -> dict[str, torch.Generator]:
        return {"data_order": self.sampler.order_generator, "loader": self.loader_generator}

    def save(
        self,
        step: int,
        epoch: int,
        batch_in_epoch: int,
        history: TrainResult,
        *,
        finished: bool = False,
    ) -> Path:
        """Write the checkpoint of the current state (main process; all processes must call).

        ``finished``: the run has ended its schedule (or stopped early), so nothing will take
        another optimizer step from this checkpoint: it keeps the weights, history and random
        states but not the optimizer and scheduler states (two more copies of the parameters:
        for a paper-size dual encoder 3.5 of its 5.3 GB). Resuming it gives the finished run."""
        if self.checkpoint_dir is None:
            raise RuntimeError("this Trainer has no out_dir to write checkpoints to")
        rng = capture_rng_state(self._rng_generators())
        ranks = gather_object([rng]) if self.accelerator.num_processes > 1 else [rng]
        components: dict[str, Any] = {
            "trainer": self._trainer_state(step, epoch, batch_in_epoch, history),
            "rng": {"ranks": ranks},
            "callbacks": self._callback_states(),
        }
        if self.accelerator.scaler is not None:
            components["grad_scaler"] = self.accelerator.scaler.state_dict()
        path = self.checkpoint_dir / checkpoint_name(step)
        self.accelerator.wait_for_everyone()
        if self.accelerator.is_main_process:
            path = save_checkpoint(
                self.checkpoint_dir,
                step,
                model=self.unwrapped_model,
                optimizer=None if finished else self.optimizer,
                scheduler=None if finished else self.scheduler,
                components=components,
                keep=self.config.keep_checkpoints,
                include_frozen=self.checkpoint_frozen,
            )
        self.accelerator.wait_for_everyone()
        return path

    def _load(self, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        """Load a checkpoint; return ``(trainer state, this process's RNG state)``. The
        checkpoint of a finished run has no optimizer state (:meth:`save`): the trainer state
        then says ``finished``."""
        manifest = json.loads((path / MANIFEST).read_text())
        finished = "optimizer" not in manifest.get("components", [])
        loaded = load_checkpoint(
            path,
            model=self.unwrapped_model,
            optimizer=None if finished else self.optimizer,
            scheduler=None if finished else self.scheduler,
            verify_hashes=False,  # _newest_valid_checkpoint has just hashed every file
        )
        for name in ("trainer", "rng"):
            if name not in loaded.components:
                raise CheckpointError(f"{path}: not a Trainer checkpoint (no {name} state)")
        state = loaded.components["trainer"] | {"finished": finished}
        saved_config = state.get("config", {})
        changed = sorted(
            k
            for k, v in to_dict(self.config).items()
            if k not in _RESUME_SAFE_FIELDS and k in saved_config and saved_config[k] != v
        )
        if changed:
            warnings.warn(
                f"resuming {path} with changed config field(s) {', '.join(changed)}: the run "
                "will not match an uninterrupted one",
                stacklevel=3,
            )
        if state.get("num_processes") != self.accelerator.num_processes:
            warnings.warn(
                f"{path} was written by {state.get('num_processes')} process(es), resuming with "
                f"{self.accelerator.num_processes}: the data order changes from here on",
                stacklevel=3,
            )
        if self.accelerator.scaler is not None and "grad_scaler" in loaded.components:
            self.accelerator.scaler.load_state_dict(loaded.components["grad_scaler"])
        saved_callbacks = loaded.components.get("callbacks", [])
        stateful = [cb for cb in self.callbacks if hasattr(cb, "load_state_dict")]
        for cb, saved in zip(stateful, saved_callbacks, strict=False):
            if saved.get("class") != type(cb).__name__:
                warnings.warn(
                    f"{path}: callback state of {saved.get('class')} not restored into "
                    f"{type(cb).__name__}",
                    stacklevel=3,
                )
                continue
            cb.load_state_dict(saved["state"])
        ranks = loaded.components["rng"]["ranks"]
        index = self.accelerator.process_index
        if index >= len(ranks):
            index = 0
        return state, ranks[index]

    # ---------------------------------------------------------------- the loop

    def _callbacks(self, hook: str, *args: Any) -> None:
        for cb in self.callbacks:
            method = getattr(cb, hook, None)
            if method is not None and method(self, *args) == "stop":
                self.should_stop = True

    def fit(self, resume: bool = False) -> TrainResult:
        """Train until ``num_epochs``/``max_steps`` or a stop request; return the history.

        Args:
            resume: continue from the newest complete checkpoint in ``out_dir/checkpoints``
                (starting afresh, with a message, when there is none). ``False`` starts from
                step 0 and deletes the checkpoints of earlier runs in that folder, so that a
                later resume cannot pick up a stale one.

        Returns:
            The ``TrainResult`` of the whole run so far (history restored from the checkpoint
            when resuming).
        """
        start = time.perf_counter()
        self._environment = environment_snapshot()
        self.should_stop = False
        seed_everything(self.config.seed)
        run, rng_state, messages = self._start(resume)

        # Accumulation restarts at a group boundary, with no gradients left from an interrupt.
        self.accelerator.step = 0
        self.optimizer.zero_grad(set_to_none=True)
        for callback in self.callbacks:
            if hasattr(callback, "on_fit_start"):
                callback.on_fit_start(self)
        progress = _Progress(
            self.progress,
            total=self.planned_steps,
            initial=min(run.step, self.planned_steps),
            enabled=self.accelerator.is_main_process,
            preamble=messages,
        )
        # Restored last, after everything that might draw random numbers has been built.
        if rng_state is not None:
            restore_rng_state(rng_state, self._rng_generators())
        try:
            while not run.done and run.epoch < self.config.num_epochs:
                self._run_epoch(run, progress)
                if not run.done:
                    run.epoch, run.batch_in_epoch = run.epoch + 1, 0
        finally:
            progress.close()

        history = run.history
        history.final_step = run.step
        history.wall_time_s = time.perf_counter() - start
        self.step, self.epoch = run.step, history.final_epoch
        if progress.mode != "none":
            print(
                progress.summary(
                    run.step, history.final_epoch, history.wall_time_s, history.stopped_early
                ),
                flush=True,
            )
        for callback in self.callbacks:
            if hasattr(callback, "on_fit_end"):
                callback.on_fit_end(self, history)
        return history

    def _start(self, resume: bool) -> tuple[_Run, dict[str, Any] | None, list[str]]:
        """Resume from the newest checkpoint, or clear old ones for a fresh start."""
        root = self.checkpoint_dir
        acc = self.accelerator
        run = _Run(history=TrainResult())
        rng_state = None
        messages: list[str] = []
        path, finished = None, False
        if resume:
            if root is None:
                raise ValueError("fit(resume=True) needs an out_dir to find checkpoints in")
            path = self._newest_valid_checkpoint(root)
            if path is not None:  # a fresh start says nothing: resuming is the news
                state, rng_state = self._load(path)
                finished = state["finished"]
                run.step, run.epoch = int(state["step"]), int(state["epoch"])
                run.batch_in_epoch = int(state["batch_in_epoch"])
                run.history = TrainResult.from_dict(state["history"])
                run.history.checkpoint = run.history.resumed_from = str(path)
                run.history.resumed_step = run.step
                messages.append(f"resumed from {path} (step {run.step}, epoch {run.epoch + 1})")
        elif root is not None:
            acc.wait_for_everyone()
            if acc.is_main_process:
                removed = clear_checkpoints(root)
                if removed:
                    messages.append(f"removed {removed} checkpoint(s) of an earlier run in {root}")
            acc.wait_for_everyone()
        max_steps = self.config.max_steps
        run.done = (
            run.history.stopped_early
            or (max_steps is not None and run.step >= max_steps)
            or run.epoch >= self.config.num_epochs
        )
        if finished and not run.done:
            raise CheckpointError(
                f"{path}: the last checkpoint of a finished run (step {run.step}) keeps no "
                "optimizer state, so it cannot train further under this configuration "
                "(num_epochs or max_steps raised); start afresh with fit(resume=False)"
            )
        return run, rng_state, messages

    def _newest_valid_checkpoint(self, root: Path) -> Path | None:
        """The newest checkpoint under ``root`` that passes :func:`verify_checkpoint`; newer
        ones that fail are moved aside (main process) with a warning naming each."""
        found, bad = None, []
        for path in reversed(list_checkpoints(root)):
            try:
                verify_checkpoint(path)
            except CheckpointError as err:
                bad.append((path, err))
                continue
            found = path
            break
        self.accelerator.wait_for_everyone()
        for path, err in bad:
            if self.accelerator.is_main_process:
                moved = mark_corrupt(path)
                warnings.warn(
                    f"checkpoint {path} is damaged and was moved to {moved.name}; resuming "
                    f"from {found.name if found is not None else 'step 0'} instead ({err})",
                    stacklevel=4,
                )
        self.accelerator.wait_for_everyone()
        return found

    def _run_epoch(self, run: _Run, progress: _Progress) -> None:
        """The rest of epoch ``run.epoch``, from micro-batch ``run.batch_in_epoch`` on."""
        acc = self.accelerator
        self.step, self.epoch = run.step, run.epoch
        self.sampler.start_epoch(run.epoch, skip_batches=run.batch_in_epoch * acc.num_processes)
        self.loader_generator.manual_seed(epoch_seed(self.config.seed, run.epoch, stream=1))
        if hasattr(self.train_loader, "set_epoch"):
            self.train_loader.set_epoch(run.epoch)
        data_iter = iter(self.train_loader)
        try:
            for batch in data_iter:
                logs = self._micro_batch(run, batch)
                if logs is not None:
                    self._end_of_step(run, logs, progress)
                    if run.done:
                        break
        finally:
            close = getattr(data_iter, "close", None)
            if close is not None:
                close()
            # accelerate only unregisters a DataLoader that ran to its end.
            end = getattr(self.train_loader, "end", None)
            if end is not None:
                end()

    def _micro_batch(self, run: _Run, batch: Any) -> dict[str, float] | None:
        """Forward and backward one micro-batch; step the optimizer at the end of its group.

        Returns:
            The step's logs (``loss``, ``lr``, extras, ``grad_norm``) after an optimizer step,
            ``None`` in the middle of a group.
        """
        acc, config = self.accelerator, self.config
        accum = config.grad_accum_steps
        group_start = run.batch_in_epoch - run.batch_in_epoch % accum
        group_size = min(accum, self.local_batches_per_epoch - group_start)
        ends_group = run.batch_in_epoch + 1 - group_start == group_size
        grad_norm = None
        with acc.accumulate(self.model):
            loss, extras = _split_loss(self.loss_fn(self.model, batch))
            # A short last group is averaged too (see module docs).
            acc.backward(loss if group_size == accum else loss * (accum / group_size))
            detached = loss.detach().float()
            run.loss_sum = detached if run.loss_sum is None else run.loss_sum + detached
            terms = {"loss": detached}
            for key, value in extras.items():
                value = _scalar_tensor(value, f"loss_fn()[{key!r}]", acc.device)
                run.extra_sums[key] = run.extra_sums.get(key, 0.0) + value
                terms[key] = value
            self._check_finite(run, terms)
            if acc.sync_gradients != ends_group:
                raise RuntimeError(
                    "gradient accumulation went out of step with accelerate at epoch "
                    f"{run.epoch}, batch {run.batch_in_epoch}"
                )
            lr = float(self.optimizer.param_groups[0]["lr"])
            if ends_group:
                if config.max_grad_norm is not None:
                    grad_norm = acc.clip_grad_norm_(self.model.parameters(), config.max_grad_norm)
                self._check_gradients(run, grad_norm)
                if run.nonfinite:
                    # on_nonfinite="skip": no update; the step still counts (its loss is NaN
                    # in the history), so the schedule, evaluation and checkpoints keep time.
                    run.history.skipped_steps.append(
                        {"step": run.step + 1, "epoch": run.epoch, "why": "; ".join(run.nonfinite)}
                    )
                    self.scheduler.step()
                else:
                    self.optimizer.step()
                    # fp16: the grad scaler skips steps with inf/nan gradients; so does the
                    # schedule.
                    if not getattr(self.optimizer, "step_was_skipped", False):
                        self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
        run.batch_in_epoch += 1
        if not ends_group:
            return None
        run.nonfinite = []
        names = sorted(run.extra_sums)
        assert run.loss_sum is not None
        values = torch.stack([run.loss_sum] + [run.extra_sums[k] for k in names]) / group_size
        if acc.num_processes > 1:
            values = acc.reduce(values, reduction="mean")
        numbers = values.tolist()
        run.loss_sum, run.extra_sums = None, {}
        logs = {"loss": numbers[0], "lr": lr}
        logs.update(zip(names, numbers[1:], strict=True))
        if grad_norm is not None:
            logs["grad_norm"] = float(grad_norm)
        return logs

    def _batch_items(self, run: _Run) -> list[int]:
        """Dataset indices of the micro-batch being trained on (this process's share)."""
        acc = self.accelerator
        index = run.batch_in_epoch * acc.num_processes + acc.process_index
        batches = self.sampler.batches(run.epoch)
        return batches[index] if index < len(batches) else []

    def _check_finite(self, run: _Run, terms: Mapping[str, torch.Tensor]) -> None:
        """Stop (or mark the step for skipping) when a loss term is NaN or infinite."""
        values = {k: float(v) for k, v in terms.items()}
        if all(math.isfinite(v) for v in values.values()):
            return
        items = self._batch_items(run)
        shown = ", ".join(f"{k}={v:.6g}" for k, v in values.items())
        where = (
            f"step {run.step + 1} (epoch {run.epoch}, micro-batch {run.batch_in_epoch}, "
            f"dataset items {items[:16]}{' ...' if len(items) > 16 else ''})"
        )
        if self.config.on_nonfinite == "stop":
            raise NonFiniteError(
                f"non-finite loss at {where}: {shown}. Training stopped; the weights of the "
                "last checkpoint are intact (TrainConfig.on_nonfinite='skip' drops such steps)."
            )
        run.nonfinite.append(f"non-finite loss at {where}: {shown}")

    def _check_gradients(self, run: _Run, grad_norm: Any) -> None:
        """Stop (or mark the step for skipping) when a gradient is NaN or infinite.

        fp16 is left to its grad scaler, which skips such steps and lowers its scale.
        """
        if self.mixed_precision == "fp16" or run.nonfinite:
            return
        if grad_norm is None:
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            if not grads:
                return
            grad_norm = torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(g.detach().float()) for g in grads])
            )
        norm = float(grad_norm)
        if math.isfinite(norm):
            return
        where = f"step {run.step + 1} (epoch {run.epoch}, micro-batch {run.batch_in_epoch})"
        if self.config.on_nonfinite == "stop":
            raise NonFiniteError(
                f"non-finite gradient norm ({norm}) at {where}, dataset items "
                f"{self._batch_items(run)[:16]}; the loss was finite. Training stopped "
                "(TrainConfig.on_nonfinite='skip' drops such steps)."
            )
        run.nonfinite.append(f"non-finite gradient norm ({norm}) at {where}")

    def _end_of_step(self, run: _Run, logs: dict[str, float], progress: _Progress) -> None:
        """Record, call back, evaluate and checkpoint after an optimizer step, in that order.

        Evaluation comes before the checkpoint, so that a resumed run starts from random states
        that already include whatever ``eval_fn`` drew.
        """
        config, history = self.config, run.history
        run.step += 1
        self.step = run.step
        self._record_step(history, run.step, run.epoch, logs)
        epoch_done = run.batch_in_epoch == self.local_batches_per_epoch
        self._callbacks("on_step_end", run.step, logs)
        last = (config.max_steps is not None and run.step >= config.max_steps) or (
            epoch_done and run.epoch + 1 >= config.num_epochs
        )
        evaluated = bool(history.eval_steps) and history.eval_steps[-1] == run.step
        if self.eval_fn is not None and (
            (config.eval_every > 0 and run.step % config.eval_every == 0)
            or (config.eval_every == 0 and epoch_done)
            or ((last or self.should_stop) and not evaluated)
        ):
            metrics = self.evaluate()
            history.eval_steps.append(run.step)
            history.eval_metrics.append(metrics)
            progress.print(
                f"eval at step {run.step}: "
                + ", ".join(f"{k}={v:.4g}" for k, v in metrics.items())
            )
            self._callbacks("on_eval_end", run.step, metrics)
        if self.should_stop and not last:
            history.stopped_early = True
        run.done = last or self.should_stop
        # Where the next micro-batch comes from: what a resumed run continues with.
        position = (run.epoch + 1, 0) if epoch_done else (run.epoch, run.batch_in_epoch)
        history.final_step, history.final_epoch = run.step, position[0]
        if self.checkpoint_dir is not None and (
            run.done or (config.checkpoint_every and run.step % config.checkpoint_every == 0)
        ):
            # A run capped by max_steps before its schedule's end may be resumed with a larger
            # cap: only a run that ended its schedule, or stopped early, is finished.
            finished = run.done and (
                history.stopped_early
                or position[0] >= config.num_epochs
                or run.step >= self.total_steps
            )
            history.checkpoint = str(self.save(run.step, *position, history, finished=finished))
        progress.step(
            run.step, run.epoch, logs, log_now=run.step % config.log_every == 0 or run.done
        )

    @staticmethod
    def _record_step(history: TrainResult, step: int, epoch: int, logs: Mapping[str, float]):
        history.steps.append(step)
        history.epochs.append(epoch)
        history.losses.append(logs["loss"])
        history.lrs.append(logs["lr"])
        n = len(history.steps)
        for key, value in logs.items():
            if key in ("loss", "lr"):
                continue
            series = history.step_metrics.setdefault(key, [math.nan] * (n - 1))
            series.append(value)
        for series in history.step_metrics.values():
            if len(series) < n:
                series.append(math.nan)


__all__ = [
    "Callback",
    "EarlyStopping",
    "EpochBatchSampler",
    "MIXED_PRECISIONS",
    "NONFINITE_ACTIONS",
    "NonFiniteError",
    "DEVICES",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "default_optimizer",
    "optimizer_impl_kwargs",
    "epoch_seed",
    "make_accelerator",
    "resolve_device",
    "resolve_mixed_precision",
]
