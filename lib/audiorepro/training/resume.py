"""Where a :class:`~audiorepro.training.Trainer` run starts: afresh (clearing an earlier run's
checkpoints) or from the newest checkpoint that passes its integrity check, with the trainer's own
state (position, history, callbacks, random generators) that its checkpoints hold."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import gather_object

from audiorepro.config import to_dict
from audiorepro.repro import environment_snapshot
from audiorepro.training.checkpoint import (
    MANIFEST,
    CheckpointError,
    capture_rng_state,
    clear_checkpoints,
    list_checkpoints,
    load_checkpoint,
    mark_corrupt,
    verify_checkpoint,
)
from audiorepro.training.config import RESUME_SAFE_FIELDS
from audiorepro.training.result import RunState, TrainResult

# The Trainer is handed in, never imported (the loop imports this module); it stands for
# audiorepro.training.loop.Trainer.
_Trainer = Any


def trainer_components(
    trainer: _Trainer,
    step: int,
    epoch: int,
    batch_in_epoch: int,
    history: TrainResult,
    *,
    generators: dict[str, torch.Generator],
    environment: dict[str, Any] | None,
) -> dict[str, Any]:
    """The checkpoint components beside model, optimizer and scheduler: the trainer's position,
    config, history and environment, every process's random states (``generators`` included),
    the callbacks' states and the fp16 grad scaler's."""
    rng = capture_rng_state(generators)
    ranks = gather_object([rng]) if trainer.accelerator.num_processes > 1 else [rng]
    components: dict[str, Any] = {
        "trainer": {
            "step": step,
            "epoch": epoch,
            "batch_in_epoch": batch_in_epoch,
            "num_processes": trainer.accelerator.num_processes,
            "stopped_early": history.stopped_early,
            "config": to_dict(trainer.config),
            "history": history.to_dict(),
            "environment": environment or environment_snapshot(),
        },
        "rng": {"ranks": ranks},
        "callbacks": [
            {"class": type(cb).__name__, "state": cb.state_dict()}
            for cb in trainer.callbacks
            if hasattr(cb, "state_dict")
        ],
    }
    if trainer.accelerator.scaler is not None:
        components["grad_scaler"] = trainer.accelerator.scaler.state_dict()
    return components


def start_run(
    trainer: _Trainer, resume: bool
) -> tuple[RunState, dict[str, Any] | None, list[str]]:
    """Resume from the newest checkpoint, or clear old ones for a fresh start.

    Returns:
        ``(run, this process's saved random state or None, messages for the progress output)``.
    """
    root = trainer.checkpoint_dir
    acc = trainer.accelerator
    run = RunState(history=TrainResult())
    rng_state = None
    messages: list[str] = []
    path, finished = None, False
    if resume:
        if root is None:
            raise ValueError("fit(resume=True) needs an out_dir to find checkpoints in")
        path = newest_valid_checkpoint(root, acc)
        if path is not None:  # a fresh start says nothing: resuming is the news
            state, rng_state = load_trainer_checkpoint(trainer, path)
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
    max_steps = trainer.config.max_steps
    run.done = (
        run.history.stopped_early
        or (max_steps is not None and run.step >= max_steps)
        or run.epoch >= trainer.config.num_epochs
    )
    if finished and not run.done:
        raise CheckpointError(
            f"{path}: the last checkpoint of a finished run (step {run.step}) keeps no "
            "optimizer state, so it cannot train further under this configuration "
            "(num_epochs or max_steps raised); start afresh with fit(resume=False)"
        )
    return run, rng_state, messages


def newest_valid_checkpoint(root: Path, accelerator: Accelerator) -> Path | None:
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
    accelerator.wait_for_everyone()
    for path, err in bad:
        if accelerator.is_main_process:
            moved = mark_corrupt(path)
            warnings.warn(
                f"checkpoint {path} is damaged and was moved to {moved.name}; resuming "
                f"from {found.name if found is not None else 'step 0'} instead ({err})",
                stacklevel=4,
            )
    accelerator.wait_for_everyone()
    return found


def load_trainer_checkpoint(
    trainer: _Trainer, path: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load a checkpoint into ``trainer``; return ``(trainer state, this process's RNG state)``.
    The checkpoint of a finished run has no optimizer state (``Trainer.save``): the trainer
    state then says ``finished``."""
    manifest = json.loads((path / MANIFEST).read_text())
    finished = "optimizer" not in manifest.get("components", [])
    loaded = load_checkpoint(
        path,
        model=trainer.unwrapped_model,
        optimizer=None if finished else trainer.optimizer,
        scheduler=None if finished else trainer.scheduler,
        verify_hashes=False,  # newest_valid_checkpoint has just hashed every file
    )
    for name in ("trainer", "rng"):
        if name not in loaded.components:
            raise CheckpointError(f"{path}: not a Trainer checkpoint (no {name} state)")
    state = loaded.components["trainer"] | {"finished": finished}
    saved_config = state.get("config", {})
    changed = sorted(
        k
        for k, v in to_dict(trainer.config).items()
        if k not in RESUME_SAFE_FIELDS and k in saved_config and saved_config[k] != v
    )
    if changed:
        warnings.warn(
            f"resuming {path} with changed config field(s) {', '.join(changed)}: the run "
            "will not match an uninterrupted one",
            stacklevel=3,
        )
    if state.get("num_processes") != trainer.accelerator.num_processes:
        warnings.warn(
            f"{path} was written by {state.get('num_processes')} process(es), resuming with "
            f"{trainer.accelerator.num_processes}: the data order changes from here on",
            stacklevel=3,
        )
    if trainer.accelerator.scaler is not None and "grad_scaler" in loaded.components:
        trainer.accelerator.scaler.load_state_dict(loaded.components["grad_scaler"])
    saved_callbacks = loaded.components.get("callbacks", [])
    stateful = [cb for cb in trainer.callbacks if hasattr(cb, "load_state_dict")]
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
    index = trainer.accelerator.process_index
    if index >= len(ranks):
        index = 0
    return state, ranks[index]


__all__ = ["load_trainer_checkpoint", "newest_valid_checkpoint", "start_run", "trainer_components"]
