"""Where and how precisely training runs: device resolution, mixed precision, and the
``accelerate`` ``Accelerator`` (with its process-wide state) that the trainer is built on."""

from __future__ import annotations

import os

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import DistributedDataParallelKwargs

from audiorepro.config import ConfigError
from audiorepro.training.config import DEVICES, MIXED_PRECISIONS


def mps_available() -> bool:
    """Whether this machine has Apple's MPS backend (torch built with it, and a device)."""
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
        return "mps" if mps_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device='cuda' but torch.cuda.is_available() is False on this machine")
    if device == "mps" and not mps_available():
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


__all__ = [
    "make_accelerator",
    "mps_available",
    "resolve_device",
    "resolve_mixed_precision",
]
