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

import math
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from audiorepro.config import ConfigError
from audiorepro.repro import environment_snapshot, seed_everything
from audiorepro.training.checkpoint import checkpoint_name, restore_rng_state, save_checkpoint
from audiorepro.training.config import (
    TrainConfig,
    accumulation_group,
    schedule_span,
    steps_per_epoch,
    steps_to_run,
)
from audiorepro.training.device import make_accelerator, resolve_device, resolve_mixed_precision
from audiorepro.training.optimizers import default_optimizer
from audiorepro.training.progress import PROGRESS_MODES, _Progress
from audiorepro.training.result import RunState, TrainResult
from audiorepro.training.resume import start_run, trainer_components
from audiorepro.training.sampler import EpochBatchSampler, epoch_seed
from audiorepro.training.schedules import make_scheduler

# isort: split
# Defined here before the loop's concerns moved to modules of their own, and re-exported so that
# `from audiorepro.training.loop import X` keeps working.
from audiorepro.training.callbacks import Callback, EarlyStopping
from audiorepro.training.config import (
    DEVICES,
    MIXED_PRECISIONS,
    NONFINITE_ACTIONS,
    OPTIMIZER_IMPLS,
)
from audiorepro.training.optimizers import optimizer_impl_kwargs
from audiorepro.training.progress import HEADLESS_ENV


class NonFiniteError(FloatingPointError):
    """A loss term or gradient became NaN or infinite; the message names the step and items."""


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
        self.steps_per_epoch = steps_per_epoch(config, self.local_batches_per_epoch)
        self.total_steps = schedule_span(config, self.steps_per_epoch)
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
        return steps_to_run(self.config, self.steps_per_epoch)

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
        components = trainer_components(
            self,
            step,
            epoch,
            batch_in_epoch,
            history,
            generators=self._rng_generators(),
            environment=self._environment,
        )
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
        run, rng_state, messages = start_run(self, resume)

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

    def _run_epoch(self, run: RunState, progress: _Progress) -> None:
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

    def _micro_batch(self, run: RunState, batch: Any) -> dict[str, float] | None:
        """Forward and backward one micro-batch; step the optimizer at the end of its group.

        Returns:
            The step's logs (``loss``, ``lr``, extras, ``grad_norm``) after an optimizer step,
            ``None`` in the middle of a group.
        """
        acc, config = self.accelerator, self.config
        accum = config.grad_accum_steps
        group_size, ends_group = accumulation_group(
            config, run.batch_in_epoch, self.local_batches_per_epoch
        )
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
                    "gradient accumulation went out of step with accelerate at "
                    f"{self._position(run)})"
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

    def _batch_items(self, run: RunState) -> list[int]:
        """Dataset indices of the micro-batch being trained on (this process's share)."""
        acc = self.accelerator
        index = run.batch_in_epoch * acc.num_processes + acc.process_index
        batches = self.sampler.batches(run.epoch)
        return batches[index] if index < len(batches) else []

    @staticmethod
    def _position(run: RunState) -> str:
        """``"step 7 (epoch 2, micro-batch 1 of it, each counted from 1"`` of the step being
        taken, as the user counts (the step as ``TrainResult.steps`` numbers it; the epoch and
        micro-batch one more than ``run.epoch`` and ``run.batch_in_epoch``, which count from
        0); the caller closes the parenthesis."""
        return (
            f"step {run.step + 1} (epoch {run.epoch + 1}, micro-batch {run.batch_in_epoch + 1} "
            "of it, each counted from 1"
        )

    def _check_finite(self, run: RunState, terms: Mapping[str, torch.Tensor]) -> None:
        """Stop (or mark the step for skipping) when a loss term is NaN or infinite."""
        values = {k: float(v) for k, v in terms.items()}
        if all(math.isfinite(v) for v in values.values()):
            return
        items = self._batch_items(run)
        shown = ", ".join(f"{k}={v:.6g}" for k, v in values.items())
        where = (
            f"{self._position(run)}; dataset items {items[:16]}"
            f"{' ...' if len(items) > 16 else ''})"
        )
        if self.config.on_nonfinite == "stop":
            raise NonFiniteError(
                f"non-finite loss at {where}: {shown}. Training stopped; the weights of the "
                "last checkpoint are intact (TrainConfig.on_nonfinite='skip' drops such steps)."
            )
        run.nonfinite.append(f"non-finite loss at {where}: {shown}")

    def _check_gradients(self, run: RunState, grad_norm: Any) -> None:
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
        where = f"{self._position(run)})"
        if self.config.on_nonfinite == "stop":
            raise NonFiniteError(
                f"non-finite gradient norm ({norm}) at {where}, dataset items "
                f"{self._batch_items(run)[:16]}; the loss was finite. Training stopped "
                "(TrainConfig.on_nonfinite='skip' drops such steps)."
            )
        run.nonfinite.append(f"non-finite gradient norm ({norm}) at {where}")

    def _end_of_step(self, run: RunState, logs: dict[str, float], progress: _Progress) -> None:
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
    "HEADLESS_ENV",
    "EpochBatchSampler",
    "MIXED_PRECISIONS",
    "NONFINITE_ACTIONS",
    "OPTIMIZER_IMPLS",
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
