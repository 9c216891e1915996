"""Training: a model-agnostic loop on accelerate, atomic resumable checkpoints, LR schedules.

``Trainer(model, loss_fn, train_dataset, TrainConfig(...), eval_fn=..., out_dir=...).fit()``
trains any ``nn.Module``; ``fit(resume=True)`` continues bit for bit from the newest checkpoint
in ``out_dir/checkpoints``. See ``audiorepro.training.loop`` for the loop's contract (its
config, device, sampler, callbacks, progress, result and resume modules hold the rest) and
``audiorepro.training.checkpoint`` for the on-disk format (safetensors + JSON, no pickle).
"""

from audiorepro.training.callbacks import Callback, EarlyStopping
from audiorepro.training.checkpoint import (
    CheckpointError,
    LoadedCheckpoint,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_model_weights,
    save_checkpoint,
    save_model_weights,
)
from audiorepro.training.config import TrainConfig
from audiorepro.training.device import resolve_device, resolve_mixed_precision
from audiorepro.training.loop import NonFiniteError, Trainer
from audiorepro.training.result import TrainResult
from audiorepro.training.sampler import EpochBatchSampler
from audiorepro.training.schedules import make_scheduler

__all__ = [
    "Callback",
    "CheckpointError",
    "EarlyStopping",
    "EpochBatchSampler",
    "LoadedCheckpoint",
    "NonFiniteError",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "load_model_weights",
    "make_scheduler",
    "resolve_device",
    "resolve_mixed_precision",
    "save_checkpoint",
    "save_model_weights",
]
