"""The training loop: exact resumption, accumulation semantics, evaluation, stopping, output."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset, IterableDataset

from audiorepro.config import ConfigError, from_dict
from audiorepro.training import checkpoint as ckpt
from audiorepro.training.checkpoint import latest_checkpoint, list_checkpoints
from audiorepro.training.loop import (
    Callback,
    EarlyStopping,
    EpochBatchSampler,
    NonFiniteError,
    TrainConfig,
    Trainer,
    _Progress,
    epoch_seed,
    resolve_device,
    resolve_mixed_precision,
)
from audiorepro.training.schedules import WarmupFactor, make_scheduler


class Blobs(Dataset):
    """A fixed synthetic classification set: ``(feats (6,), label)`` pairs."""

    def __init__(self, n: int = 42) -> None:
        g = torch.Generator().manual_seed(123)
        self.feats = torch.randn(n, 6, generator=g)
        self.labels = (self.feats[:, 0] + 0.5 * self.feats[:, 1] > 0).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        return self.feats[index], self.labels[index]


def make_mlp(seed: int = 0, dropout: float = 0.3) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 2))


def ce_loss(model, batch):
    feats, labels = batch
    return F.cross_entropy(model(feats), labels)


# 42 examples, micro-batches of 4 -> 11 per epoch -> groups of 2: 6 steps per epoch (the last
# group has a single micro-batch), 18 steps in 3 epochs.
BASE = TrainConfig(
    num_epochs=3,
    batch_size=4,
    grad_accum_steps=2,
    max_grad_norm=0.5,
    lr=0.05,
    weight_decay=0.01,
    schedule="cosine",
    warmup_steps=3,
    seed=7,
    device="auto",
    log_every=1000,
)


def held_out_eval(model):
    """Loss on a fixed set; draws from the global RNG on purpose, so ordering matters."""
    torch.rand(3)
    data = Blobs(12)
    return {"val_loss": float(F.cross_entropy(model(data.feats), data.labels))}


def assert_same_state(a: nn.Module, b: nn.Module) -> None:
    for (name_a, ta), (name_b, tb) in zip(
        a.state_dict().items(), b.state_dict().items(), strict=True
    ):
        assert name_a == name_b
        assert torch.equal(ta, tb), name_a


def uninterrupted(config: TrainConfig, tmp_path, **kwargs):
    model = make_mlp()
    trainer = Trainer(model, ce_loss, Blobs(), config, out_dir=tmp_path, progress="none", **kwargs)
    return model, trainer, trainer.fit()


# --------------------------------------------------------------------------------------------
# The key property: interrupted + resumed == uninterrupted, bit for bit
# --------------------------------------------------------------------------------------------


def test_resume_after_interrupt_mid_accumulation_is_bitwise_identical(tmp_path):
    config = dataclasses.replace(BASE, checkpoint_every=4, eval_every=4)
    ref_model, ref_trainer, ref = uninterrupted(
        config, tmp_path / "ref", eval_fn=held_out_eval, callbacks=[EarlyStopping("val_loss")]
    )
    assert ref.final_step == 18 and not ref.stopped_early

    calls = {"n": 0}

    def interrupted_loss(model, batch):
        calls["n"] += 1
        if calls["n"] == 17:  # 2nd micro-batch of step 9: gradients half accumulated
            raise KeyboardInterrupt
        return ce_loss(model, batch)

    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        Trainer(
            make_mlp(),
            interrupted_loss,
            Blobs(),
            config,
            out_dir=run,
            eval_fn=held_out_eval,
            callbacks=[EarlyStopping("val_loss")],
            progress="none",
        ).fit()
    assert latest_checkpoint(run / "checkpoints").name == "step_00000008"

    # A fresh process would build everything anew, from a different initialisation even.
    model = make_mlp(seed=99)
    stopper = EarlyStopping("val_loss")
    trainer = Trainer(
        model,
        ce_loss,
        Blobs(),
        config,
        out_dir=run,
        eval_fn=held_out_eval,
        callbacks=[stopper],
        progress="none",
    )
    result = trainer.fit(resume=True)
    assert result.resumed_from.endswith("step_00000008")
    assert_same_state(ref_model, model)
    assert result.losses == ref.losses and result.lrs == ref.lrs
    assert result.eval_steps == ref.eval_steps == [4, 8, 12, 16, 18]
    assert result.eval_metrics == ref.eval_metrics
    assert stopper.state_dict() == ref_trainer.callbacks[0].state_dict()
    ref_opt, opt = ref_trainer.optimizer.state_dict(), trainer.optimizer.state_dict()
    for index, state in ref_opt["state"].items():
        for key, value in state.items():
            assert torch.equal(value, opt["state"][index][key]), (index, key)


def test_resume_after_max_steps_cap_is_bitwise_identical(tmp_path):
    ref_model, _, ref = uninterrupted(BASE, tmp_path / "ref")
    run = tmp_path / "run"
    first = Trainer(
        make_mlp(),
        ce_loss,
        Blobs(),
        dataclasses.replace(BASE, max_steps=5),
        out_dir=run,
        progress="none",
    ).fit()
    assert first.final_step == 5 and not first.stopped_early
    assert first.lrs == ref.lrs[:5]  # the schedule spans num_epochs, not max_steps
    model = make_mlp(seed=3)
    result = Trainer(model, ce_loss, Blobs(), BASE, out_dir=run, progress="none").fit(resume=True)
    assert_same_state(ref_model, model)
    assert result.steps == list(range(1, 19)) and result.losses == ref.losses


def test_resuming_hashes_each_checkpoint_file_once(tmp_path, monkeypatch):
    """The newest checkpoint is verified (every file hashed) before it is chosen; loading it
    then checks sizes only, so a paper-size checkpoint is read once, not twice."""
    run = tmp_path / "run"
    Trainer(
        make_mlp(), ce_loss, Blobs(), dataclasses.replace(BASE, max_steps=5), out_dir=run,
        progress="none",
    ).fit()  # fmt: skip
    newest = latest_checkpoint(run / "checkpoints")
    listed = json.loads((newest / ckpt.MANIFEST).read_text())["sha256"]
    hashed = []
    real = ckpt.file_sha256
    monkeypatch.setattr(ckpt, "file_sha256", lambda path: hashed.append(path) or real(path))
    Trainer(make_mlp(), ce_loss, Blobs(), BASE, out_dir=run, progress="none").fit(resume=True)
    resumed = [p for p in hashed if p.parent == newest]
    assert sorted(p.name for p in resumed) == sorted(listed)  # each file of it once
    # loading without hashes still refuses a truncated file
    model = make_mlp()
    name = next(iter(listed))
    (newest / name).write_bytes((newest / name).read_bytes()[:-1])
    with pytest.raises(ckpt.CheckpointError, match="truncated"):
        ckpt.load_checkpoint(newest, model=model, verify_hashes=False)


def test_failed_checkpoint_write_resumes_from_the_previous_one(tmp_path, monkeypatch):
    config = dataclasses.replace(BASE, checkpoint_every=2, keep_checkpoints=3)
    ref_model, _, _ = uninterrupted(config, tmp_path / "ref")
    real_save_tree = ckpt.save_tree

    def crash_at_step_6(directory, name, tree):
        files = real_save_tree(directory, name, tree)
        if directory.name.startswith(".tmp-step_00000006") and name == "optimizer":
            raise OSError("disk full")
        return files

    run = tmp_path / "run"
    monkeypatch.setattr(ckpt, "save_tree", crash_at_step_6)
    with pytest.raises(OSError, match="disk full"):
        Trainer(make_mlp(), ce_loss, Blobs(), config, out_dir=run, progress="none").fit()
    monkeypatch.undo()
    root = run / "checkpoints"
    assert [p.name for p in list_checkpoints(root)] == ["step_00000002", "step_00000004"]
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp")]

    model = make_mlp(seed=5)
    result = Trainer(model, ce_loss, Blobs(), config, out_dir=run, progress="none").fit(
        resume=True
    )
    assert result.resumed_from.endswith("step_00000004")
    assert_same_state(ref_model, model)
    assert [p.name for p in list_checkpoints(root)] == [
        "step_00000014",
        "step_00000016",
        "step_00000018",
    ]


def test_fresh_fit_clears_old_checkpoints_and_resume_without_any_starts_over(tmp_path, capsys):
    config = dataclasses.replace(BASE, checkpoint_every=2)
    uninterrupted(config, tmp_path)
    assert list_checkpoints(tmp_path / "checkpoints")
    capped = dataclasses.replace(BASE, max_steps=1)
    Trainer(make_mlp(), ce_loss, Blobs(), capped, out_dir=tmp_path, progress="none").fit()
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == ["step_00000001"]

    fresh = tmp_path / "fresh"
    result = Trainer(make_mlp(), ce_loss, Blobs(), capped, out_dir=fresh, progress="lines").fit(
        resume=True
    )
    assert result.final_step == 1 and result.resumed_from is None
    out = capsys.readouterr().out
    # a fresh start says nothing about checkpoints: only resuming is news
    assert "checkpoint" not in out and "resumed" not in out and "done: 1 step" in out
    with pytest.raises(ValueError, match="out_dir"):
        Trainer(make_mlp(), ce_loss, Blobs(), capped, progress="none").fit(resume=True)


def _flip_last_bytes(path) -> None:
    data = bytearray(path.read_bytes())
    data[-8:] = bytes(255 - b for b in data[-8:])  # same size: only the SHA-256 tells
    path.write_bytes(bytes(data))


def test_a_corrupt_newest_checkpoint_resumes_from_the_previous_valid_one(tmp_path):
    config = dataclasses.replace(BASE, checkpoint_every=4, keep_checkpoints=3)
    ref_model, _, ref = uninterrupted(config, tmp_path / "ref")
    run = tmp_path / "run"
    capped = dataclasses.replace(config, max_steps=12)
    Trainer(make_mlp(), ce_loss, Blobs(), capped, out_dir=run, progress="none").fit()
    root = run / "checkpoints"
    assert [p.name for p in list_checkpoints(root)] == [
        "step_00000004", "step_00000008", "step_00000012",
    ]  # fmt: skip
    _flip_last_bytes(root / "step_00000012" / "model.safetensors")
    _flip_last_bytes(root / "step_00000008" / "optimizer.safetensors")
    model = make_mlp(seed=2)
    trainer = Trainer(model, ce_loss, Blobs(), config, out_dir=run, progress="none")
    with pytest.warns(UserWarning) as caught:
        result = trainer.fit(resume=True)
    messages = [str(w.message) for w in caught]
    assert any("step_00000012" in m and "resuming from step_00000004" in m for m in messages)
    assert any("step_00000008" in m and "SHA-256" in m for m in messages)
    assert result.resumed_from.endswith("step_00000004") and result.resumed_step == 4
    assert result.steps == list(range(1, 19)) and result.losses == ref.losses
    assert_same_state(ref_model, model)
    # The damaged ones were moved aside, so pruning kept the new ones.
    assert (root / "corrupt-step_00000012").is_dir() and (root / "corrupt-step_00000008").is_dir()
    assert [p.name for p in list_checkpoints(root)] == [
        "step_00000012", "step_00000016", "step_00000018",
    ]  # fmt: skip
    # With nothing valid left it starts over (from the weights it is given), to the same end.
    for path in list_checkpoints(root):
        _flip_last_bytes(path / "model.safetensors")
    model = make_mlp()
    with pytest.warns(UserWarning, match="resuming from step 0"):
        result = Trainer(model, ce_loss, Blobs(), config, out_dir=run, progress="none").fit(
            resume=True
        )
    assert result.resumed_from is None and result.steps == list(range(1, 19))
    assert_same_state(ref_model, model)
    ckpt.clear_checkpoints(root)
    assert not list(root.iterdir())  # corrupt ones included


def test_a_finished_run_keeps_no_optimizer_state_and_resumes_as_finished(tmp_path):
    """The last checkpoint of a run that ended its schedule has the weights but no optimizer
    or scheduler state (nothing will step from it); a capped run's keeps them, to go on."""
    config = dataclasses.replace(BASE, checkpoint_every=6)
    ref_model, _, ref = uninterrupted(config, tmp_path / "ref")
    root = tmp_path / "ref" / "checkpoints"
    components = {
        p.name: json.loads((p / ckpt.MANIFEST).read_text())["components"]
        for p in list_checkpoints(root)
    }
    assert (
        "optimizer" in components["step_00000012"] and "scheduler" in components["step_00000012"]
    )
    assert "optimizer" not in components["step_00000018"]
    assert "scheduler" not in components["step_00000018"]
    assert not (root / "step_00000018" / "optimizer.safetensors").exists()
    model = make_mlp(seed=3)
    again = Trainer(model, ce_loss, Blobs(), config, out_dir=tmp_path / "ref", progress="none")
    result = again.fit(resume=True)
    assert result.resumed_step == 18 and result.losses == ref.losses
    assert_same_state(ref_model, model)  # the finished weights, no step taken
    # A run capped before its schedule's end keeps them, and a larger cap continues it.
    capped = dataclasses.replace(config, max_steps=9)
    Trainer(make_mlp(), ce_loss, Blobs(), capped, out_dir=tmp_path / "cap", progress="none").fit()
    last = list_checkpoints(tmp_path / "cap" / "checkpoints")[-1]
    assert last.name == "step_00000009"
    assert "optimizer" in json.loads((last / ckpt.MANIFEST).read_text())["components"]
    # Raising the epochs of a finished run cannot go on without its optimizer: a clear error.
    longer = dataclasses.replace(config, num_epochs=4)
    trainer = Trainer(make_mlp(), ce_loss, Blobs(), longer, out_dir=tmp_path / "ref",
                      progress="none")  # fmt: skip
    with pytest.warns(UserWarning, match="num_epochs"):
        with pytest.raises(ckpt.CheckpointError, match="step_00000018.*no optimizer state"):
            trainer.fit(resume=True)


class FrozenStem(nn.Module):
    """A frozen random 'pretrained' stem (rebuilt from its seed) under a trainable head."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.stem = nn.Linear(6, 32)
        self.stem.requires_grad_(False)
        torch.manual_seed(seed + 1000)
        self.head = nn.Sequential(nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 2))

    def forward(self, x):
        return self.head(self.stem(x))


def test_checkpoints_without_frozen_weights_resume_bitwise(tmp_path):
    config = dataclasses.replace(BASE, checkpoint_every=4)
    ref = FrozenStem()
    Trainer(ref, ce_loss, Blobs(), config, out_dir=tmp_path / "ref", progress="none").fit()
    run = tmp_path / "run"
    capped = dataclasses.replace(config, max_steps=8)
    common = dict(out_dir=run, progress="none", checkpoint_frozen=False)
    Trainer(FrozenStem(), ce_loss, Blobs(), capped, **common).fit()
    path = latest_checkpoint(run / "checkpoints")
    manifest = json.loads((path / "checkpoint.json").read_text())
    assert manifest["omitted"] == ["stem.weight", "stem.bias"]
    full = latest_checkpoint(tmp_path / "ref" / "checkpoints") / "model.safetensors"
    assert (path / "model.safetensors").stat().st_size < full.stat().st_size / 2
    # The resumed model is built afresh from the same seed: its frozen stem is the same.
    model = FrozenStem()
    result = Trainer(model, ce_loss, Blobs(), config, **common).fit(resume=True)
    assert result.resumed_step == 8
    assert_same_state(ref, model)
    # A model whose stem trains cannot take its weights from a checkpoint that omitted them.
    thawed = FrozenStem()
    thawed.stem.requires_grad_(True)
    with pytest.raises(ckpt.CheckpointError, match=r"left out 2 weight\(s\) as frozen"):
        ckpt.load_checkpoint(latest_checkpoint(run / "checkpoints"), model=thawed)


# --------------------------------------------------------------------------------------------
# Accumulation, evaluation, stopping
# --------------------------------------------------------------------------------------------


def test_grad_accumulation_equals_large_batch_steps_including_short_last_group():
    def sgd(model, config):
        return torch.optim.SGD(model.parameters(), lr=config.lr)

    data = Blobs(10)  # micro-batches of 2: groups of 2, 2, 1 -> large batches of 4, 4, 2
    base = TrainConfig(num_epochs=2, lr=0.3, seed=3, log_every=1000, weight_decay=0.0)
    small = dataclasses.replace(base, batch_size=2, grad_accum_steps=2)
    large = dataclasses.replace(base, batch_size=4, grad_accum_steps=1)
    models = {}
    for name, config in (("small", small), ("large", large)):
        models[name] = make_mlp(dropout=0.0)
        result = Trainer(
            models[name], ce_loss, data, config, optimizer_factory=sgd, progress="none"
        ).fit()
        assert result.final_step == 6

    # Brute-force reference: plain SGD on the large batches of the trainer's data order.
    reference = make_mlp(dropout=0.0)
    for epoch in range(2):
        order = torch.randperm(10, generator=torch.Generator().manual_seed(epoch_seed(3, epoch)))
        for start in range(0, 10, 4):
            index = order[start : start + 4]
            reference.zero_grad()
            ce_loss(reference, (data.feats[index], data.labels[index])).backward()
            with torch.no_grad():
                for p in reference.parameters():
                    p -= 0.3 * p.grad
    for name in ("small", "large"):
        for a, b in zip(models[name].parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("eval_every", "max_steps", "expected"),
    [(5, None, [5, 10, 15, 20, 22]), (0, None, [11, 22]), (0, 7, [7]), (11, None, [11, 22])],
)
def test_eval_fn_runs_at_the_right_steps_in_eval_mode(eval_every, max_steps, expected):
    config = TrainConfig(
        num_epochs=2, batch_size=4, eval_every=eval_every, max_steps=max_steps, log_every=1000
    )
    seen = []

    def eval_fn(model):
        assert not model.training and not torch.is_grad_enabled()
        seen.append(model)
        return {"val": torch.tensor(len(seen) * 1.0)}

    model = make_mlp()
    result = Trainer(model, ce_loss, Blobs(), config, eval_fn=eval_fn, progress="none").fit()
    assert result.eval_steps == expected
    assert result.eval_metric("val") == [float(i) for i in range(1, len(expected) + 1)]
    assert model.training  # back in train mode afterwards


def test_early_stopping_stops_and_a_stopped_run_stays_stopped(tmp_path):
    config = TrainConfig(num_epochs=5, batch_size=4, eval_every=1, log_every=1000)
    values = iter([3.0, 2.0, 2.5, 2.1, 1.0, 0.5])

    def worsening_eval(model):
        return {"val_loss": next(values)}

    stopper = EarlyStopping("val_loss", mode="min", patience=2)
    result = Trainer(
        make_mlp(),
        ce_loss,
        Blobs(),
        config,
        eval_fn=worsening_eval,
        callbacks=[stopper],
        out_dir=tmp_path,
        progress="none",
    ).fit()
    assert result.stopped_early and result.final_step == 4
    assert result.eval_steps == [1, 2, 3, 4]
    assert (stopper.best, stopper.best_step, stopper.bad_evals) == (2.0, 2, 2)
    assert latest_checkpoint(tmp_path / "checkpoints").name == "step_00000004"

    again = Trainer(make_mlp(), ce_loss, Blobs(), config, out_dir=tmp_path, progress="none")
    resumed = again.fit(resume=True)
    assert resumed.stopped_early and resumed.final_step == 4 and resumed.steps == [1, 2, 3, 4]


def test_early_stopping_rules():
    stopper = EarlyStopping("acc", mode="max", patience=2, min_delta=0.1)
    assert stopper.on_eval_end(None, 1, {"acc": 0.5}) is None
    assert stopper.on_eval_end(None, 2, {"acc": 0.55}) is None  # within min_delta: no gain
    assert stopper.on_eval_end(None, 3, {"acc": 0.7}) is None  # gain resets the count
    assert stopper.best == 0.7 and stopper.bad_evals == 0
    assert stopper.on_eval_end(None, 4, {"acc": 0.1}) is None
    assert stopper.on_eval_end(None, 5, {"acc": 0.79}) == "stop"
    with pytest.raises(KeyError, match="'loss'.*'acc'"):
        EarlyStopping("loss").on_eval_end(None, 1, {"acc": 1.0})
    with pytest.raises(ValueError, match="mode"):
        EarlyStopping("acc", mode="up")


def test_callbacks_stop_by_return_value_or_flag():
    class StopAt(Callback):
        def __init__(self, step, use_flag):
            self.step, self.use_flag, self.events = step, use_flag, []

        def on_fit_start(self, trainer):
            self.events.append("start")

        def on_step_end(self, trainer, step, logs):
            assert set(logs) >= {"loss", "lr"}
            if step == self.step:
                if self.use_flag:
                    trainer.should_stop = True
                    return None
                return "stop"
            return None

        def on_fit_end(self, trainer, result):
            self.events.append(("end", result.final_step))

    config = TrainConfig(num_epochs=3, batch_size=4, log_every=1000)
    for use_flag in (False, True):
        callback = StopAt(5, use_flag)
        result = Trainer(
            make_mlp(), ce_loss, Blobs(), config, callbacks=[callback], progress="none"
        ).fit()
        assert result.final_step == 5 and result.stopped_early
        assert callback.events == ["start", ("end", 5)]


# --------------------------------------------------------------------------------------------
# Losses, history, output
# --------------------------------------------------------------------------------------------


def test_dict_losses_record_extras_and_history_is_json():
    def loss_with_extras(model, batch):
        loss = ce_loss(model, batch)
        return {"loss": loss, "scaled": 2 * loss, "const": 1.5}

    config = dataclasses.replace(BASE, num_epochs=1)
    result = Trainer(make_mlp(), loss_with_extras, Blobs(), config, progress="none").fit()
    assert len(result.steps) == 6
    assert result.step_metrics["const"] == [1.5] * 6
    for loss, scaled in zip(result.losses, result.step_metrics["scaled"], strict=True):
        assert scaled == pytest.approx(2 * loss, rel=1e-6)
    assert len(result.step_metrics["grad_norm"]) == 6  # clipping is on in BASE
    assert result.lrs[:3] == pytest.approx([0.05 / 3, 0.1 / 3, 0.05])  # warmup
    payload = json.loads(json.dumps(result.to_dict()))
    assert payload["final_step"] == 6 and payload["epochs"] == [0] * 6


@pytest.mark.parametrize(
    ("loss_fn", "error", "match"),
    [
        (lambda m, b: 1.0, TypeError, "scalar tensor"),
        (lambda m, b: m(b[0]).sum(1), ValueError, "scalar loss"),
        (lambda m, b: ce_loss(m, b).detach(), ValueError, "require grad"),
        (lambda m, b: {"total": ce_loss(m, b)}, KeyError, "without 'loss'"),
    ],
)
def test_bad_losses_are_clear_errors(loss_fn, error, match):
    config = TrainConfig(batch_size=4, log_every=1000)
    with pytest.raises(error, match=match):
        Trainer(make_mlp(), loss_fn, Blobs(), config, progress="none").fit()


def test_progress_lines_for_notebooks_and_ci_have_no_carriage_returns(capsys):
    config = TrainConfig(num_epochs=1, batch_size=4, log_every=5)
    Trainer(make_mlp(), ce_loss, Blobs(), config, progress="lines").fit()
    out = capsys.readouterr().out
    assert "\r" not in out
    lines = out.splitlines()
    assert any(line.startswith("step  5/11 | epoch 1 | loss ") for line in lines)
    assert any(line.startswith("step 11/11") for line in lines)
    assert lines[-1].startswith("done: 11 step(s), 1 epoch(s)")
    # Under pytest stdout is captured, as in a CI log: "auto" picks plain lines.
    assert _Progress("auto", total=3, initial=0, enabled=True).mode == "lines"


def test_a_headlessly_executed_page_gets_one_line_per_run(capsys, monkeypatch):
    monkeypatch.setenv("AUDIOREPRO_HEADLESS", "1")
    assert _Progress("auto", total=3, initial=0, enabled=True).mode == "summary"
    config = TrainConfig(num_epochs=3, batch_size=4, log_every=1)
    evals = {"eval_fn": lambda model: {"acc": 0.5}}
    result = Trainer(make_mlp(), ce_loss, Blobs(), config, progress="lines", **evals).fit()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("done: 33 step(s), 3 epoch(s) in ")
    assert lines[0].endswith(f"loss {result.losses[0]:.4g} -> {result.losses[-1]:.4g}")


# --------------------------------------------------------------------------------------------
# Configuration, devices, precision
# --------------------------------------------------------------------------------------------


def test_config_validation_names_the_field():
    with pytest.raises(ConfigError, match="schedule.*cosine"):
        TrainConfig(schedule="exponential")
    with pytest.raises(ConfigError, match="lr"):
        TrainConfig(lr=0)
    with pytest.raises(ConfigError, match="max_steps"):
        TrainConfig(max_steps=0)
    with pytest.raises(ConfigError, match="grad_accum_steps"):
        TrainConfig(grad_accum_steps=True)
    with pytest.raises(ConfigError, match="num_epoch"):
        from_dict(TrainConfig, {"num_epoch": 3})
    assert from_dict(TrainConfig, {"lr": "3e-4", "max_grad_norm": 1}).max_grad_norm == 1.0
    with pytest.raises(ConfigError, match="warmup_steps"):
        Trainer(make_mlp(), ce_loss, Blobs(), TrainConfig(batch_size=4, warmup_steps=100))


@pytest.mark.parametrize(
    ("impl", "flag", "value"),
    [("for-loop", "foreach", False), ("foreach", "foreach", True), ("fused", "fused", True)],
)
def test_optimizer_impl_picks_the_torch_implementation_and_trains_the_same(impl, flag, value):
    config = dataclasses.replace(BASE, grad_accum_steps=1, max_grad_norm=None, optimizer_impl=impl)
    model, reference = make_mlp(), make_mlp()
    trainer = Trainer(model, ce_loss, Blobs(), config, progress="none")
    assert trainer.optimizer.param_groups[0][flag] is value
    trainer.fit()
    Trainer(
        reference, ce_loss, Blobs(), dataclasses.replace(config, optimizer_impl="for-loop"),
        progress="none",
    ).fit()  # fmt: skip
    for a, b in zip(model.parameters(), reference.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-5)  # the same update, other float order
    with pytest.raises(ConfigError, match="optimizer_impl.*fused"):
        TrainConfig(optimizer_impl="fast")


def test_device_and_precision_resolution_on_this_machine():
    assert resolve_device("auto") == "cpu"
    assert resolve_device("cpu") == "cpu"
    assert resolve_mixed_precision("auto", "cpu") == "no"
    assert resolve_mixed_precision("bf16", "cpu") == "bf16"
    with pytest.raises(ConfigError, match="fp16"):
        resolve_mixed_precision("fp16", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="cuda"):
            resolve_device("cuda")
    trainer = Trainer(make_mlp(), ce_loss, Blobs(), TrainConfig(), progress="none")
    assert trainer.accelerator.device.type == "cpu"
    assert trainer.accelerator.mixed_precision == "no"


def test_trainers_with_different_precisions_in_one_process():
    config = TrainConfig(num_epochs=1, batch_size=8, mixed_precision="bf16", log_every=1000)
    trainer = Trainer(make_mlp(), ce_loss, Blobs(), config, progress="none")
    assert trainer.accelerator.mixed_precision == "bf16"
    assert math.isfinite(trainer.fit().losses[-1])
    plain = Trainer(make_mlp(), ce_loss, Blobs(), TrainConfig(num_epochs=1), progress="none")
    assert plain.accelerator.mixed_precision == "no"
    assert plain.fit().final_step == 2


def test_iterable_datasets_are_refused():
    class Stream(IterableDataset):
        def __iter__(self):
            yield from ()

    with pytest.raises(TypeError, match="map-style"):
        Trainer(make_mlp(), ce_loss, Stream(), TrainConfig(), progress="none")


# --------------------------------------------------------------------------------------------
# Data order and schedules
# --------------------------------------------------------------------------------------------


def test_sampler_permutes_per_epoch_and_skips_on_resume():
    sampler = EpochBatchSampler(10, 3, seed=4)
    assert sampler.num_batches == 4
    epochs = []
    for epoch in range(3):
        sampler.start_epoch(epoch)
        batches = list(sampler)
        assert [len(b) for b in batches] == [3, 3, 3, 1]
        assert sorted(i for b in batches for i in b) == list(range(10))
        epochs.append(batches)
    assert epochs[0] != epochs[1] != epochs[2]
    again = EpochBatchSampler(10, 3, seed=4)
    again.start_epoch(1, skip_batches=2)
    assert list(again) == epochs[1][2:] and len(again) == 2
    assert list(EpochBatchSampler(10, 3, seed=5).batches(0)) != epochs[0]
    with pytest.raises(ValueError, match="skip_batches"):
        again.start_epoch(0, skip_batches=5)


def test_sampler_pads_for_several_processes_and_seeds_do_not_collide():
    sampler = EpochBatchSampler(10, 3, seed=0, num_replicas=3)
    batches = sampler.batches(0)
    assert sampler.num_batches == 6 and len(batches) == 6
    assert batches[4:] == batches[:2]  # padding repeats the first batches
    assert epoch_seed(0, 1000) != epoch_seed(1, 0)
    assert epoch_seed(0, 1, stream=0) != epoch_seed(0, 1, stream=1)


def test_schedule_factors_match_hand_computed_values():
    cosine = WarmupFactor("cosine", warmup_steps=2, total_steps=6)
    expected = [0.5, 1.0, 1.0, (1 + math.cos(math.pi / 4)) / 2, 0.5]
    expected += [(1 + math.cos(3 * math.pi / 4)) / 2, 0.0, 0.0]
    assert [cosine(s) for s in range(8)] == pytest.approx(expected)
    linear = WarmupFactor("linear", warmup_steps=2, total_steps=6)
    assert [linear(s) for s in range(8)] == pytest.approx([0.5, 1, 1, 0.75, 0.5, 0.25, 0, 0])
    constant = WarmupFactor("constant", warmup_steps=4)
    assert [constant(s) for s in range(6)] == pytest.approx([0.25, 0.5, 0.75, 1, 1, 1])
    assert WarmupFactor("cosine", 0, 4)(0) == 1.0  # no warmup: the first step is at full lr

    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=2.0)
    scheduler = make_scheduler(optimizer, "linear", warmup_steps=2, total_steps=6)
    lrs = []
    for _ in range(6):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx([1.0, 2.0, 2.0, 1.5, 1.0, 0.5])
    with pytest.raises(ValueError, match="unknown schedule"):
        make_scheduler(optimizer, "step", warmup_steps=0, total_steps=3)
    with pytest.raises(ValueError, match="must not exceed"):
        make_scheduler(optimizer, "cosine", warmup_steps=4, total_steps=3)


def test_cosine_and_linear_decay_end_at_the_min_lr_floor(tmp_path):
    floored = WarmupFactor("cosine", warmup_steps=2, total_steps=6, floor=0.1)
    plain = WarmupFactor("cosine", warmup_steps=2, total_steps=6)
    assert [floored(s) for s in range(8)] == pytest.approx(
        [0.5, 1.0] + [0.1 + 0.9 * plain(s) for s in range(2, 8)]
    )
    assert floored(6) == floored(100) == pytest.approx(0.1)
    assert WarmupFactor("linear", 0, 4, floor=0.5)(2) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="floor"):
        WarmupFactor("cosine", 0, 4, floor=1.5)
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=2.0)
    with pytest.raises(ValueError, match="min_lr"):
        make_scheduler(optimizer, "cosine", warmup_steps=0, total_steps=3, min_lr=3.0)
    with pytest.raises(ConfigError, match="min_lr"):
        TrainConfig(lr=1e-3, min_lr=1e-2)

    # through the Trainer: every step above the floor, the schedule's last value is min_lr
    config = dataclasses.replace(BASE, min_lr=1e-7, grad_accum_steps=1, max_grad_norm=None)
    model = make_mlp()
    trainer = Trainer(model, ce_loss, Blobs(), config, progress="none")
    result = trainer.fit()
    assert result.final_step == trainer.total_steps == 33
    assert min(result.lrs) > 1e-7
    assert trainer.scheduler.get_last_lr()[0] == pytest.approx(1e-7, rel=1e-9)
    # and it is saved with the schedule, so a resumed run keeps it
    assert trainer.scheduler.state_dict()["lr_lambdas"][0]["floor"] == pytest.approx(1e-7 / 0.05)


# --------------------------------------------------------------------------------------------
# Non-finite losses and gradients never pass silently
# --------------------------------------------------------------------------------------------


class PoisonAt(Dataset):
    """Blobs whose item ``bad`` carries a NaN (loss) or a huge value (gradient overflow)."""

    def __init__(self, bad: int, value: float) -> None:
        self.base, self.bad, self.value = Blobs(), bad, value

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int):
        feats, label = self.base[index]
        if index == self.bad:
            feats = torch.full_like(feats, self.value)
        return feats, label


def test_a_nan_loss_stops_training_naming_step_items_and_terms():
    def loss_with_terms(model, batch):
        loss = ce_loss(model, batch)
        return {"loss": loss, "aux": 1.0}

    config = dataclasses.replace(BASE, num_epochs=1, max_grad_norm=None, grad_accum_steps=1)
    with pytest.raises(NonFiniteError) as info:
        Trainer(make_mlp(), loss_with_terms, PoisonAt(5, math.nan), config, progress="none").fit()
    batches = EpochBatchSampler(42, 4, seed=config.seed).batches(0)
    where = next(i for i, b in enumerate(batches) if 5 in b)
    message = str(info.value)
    said = f"non-finite loss at step {where + 1} (epoch 1, micro-batch {where + 1} of it, "
    assert said + "each counted from 1; " in message  # as the user counts: the first epoch is 1
    assert f"dataset items {batches[where]}" in message
    assert "loss=nan" in message and "aux=1" in message


def test_a_non_finite_loss_names_its_epoch_and_micro_batch_counted_from_one():
    """The 14th micro-batch in groups of 2, 11 an epoch (BASE): the 3rd of the 2nd epoch, in
    step 8 (6 steps an epoch); the loop's history keeps counting epochs from 0."""
    calls = {"n": 0}

    def nan_at_14(model, batch):
        calls["n"] += 1
        loss = ce_loss(model, batch)
        return loss * math.nan if calls["n"] == 14 else loss

    config = dataclasses.replace(BASE, num_epochs=2, max_grad_norm=None)
    with pytest.raises(NonFiniteError) as info:
        Trainer(make_mlp(), nan_at_14, Blobs(), config, progress="none").fit()
    items = EpochBatchSampler(42, 4, seed=config.seed).batches(1)[2]
    said = "non-finite loss at step 8 (epoch 2, micro-batch 3 of it, each counted from 1; "
    assert said + f"dataset items {items}): loss=nan" in str(info.value)
    skip = dataclasses.replace(config, on_nonfinite="skip")
    calls["n"] = 0
    result = Trainer(make_mlp(), nan_at_14, Blobs(), skip, progress="none").fit()
    assert [(s["step"], s["epoch"]) for s in result.skipped_steps] == [(8, 1)]
    assert said in result.skipped_steps[0]["why"]


def test_a_nan_gradient_stops_training_even_with_a_finite_loss():
    # sqrt(0) = 0 is finite, its derivative is inf, and inf * 0 gives NaN gradients.
    def finite_loss_nan_grad(model, batch):
        return ce_loss(model, batch) + torch.sqrt(model[0].weight.sum() * 0)

    config = dataclasses.replace(BASE, num_epochs=1, max_grad_norm=None, grad_accum_steps=1)
    model = make_mlp()
    said = r"non-finite gradient norm \(nan\) at step 1 \(epoch 1, micro-batch 1 of it, each "
    with pytest.raises(NonFiniteError, match=said + r"counted from 1\), dataset items"):
        Trainer(model, finite_loss_nan_grad, Blobs(), config, progress="none").fit()
    assert all(torch.isfinite(p).all() for p in model.parameters())
    # with clipping on, the clipped norm is what is checked
    clipped = dataclasses.replace(config, max_grad_norm=1.0)
    with pytest.raises(NonFiniteError, match="the loss was finite"):
        Trainer(make_mlp(), finite_loss_nan_grad, Blobs(), clipped, progress="none").fit()


def test_skip_mode_drops_the_bad_step_counts_it_and_keeps_weights_finite():
    config = dataclasses.replace(BASE, num_epochs=1, grad_accum_steps=1, on_nonfinite="skip")
    model = make_mlp()
    result = Trainer(model, ce_loss, PoisonAt(5, math.nan), config, progress="none").fit()
    assert len(result.skipped_steps) == 1 and "non-finite loss" in result.skipped_steps[0]["why"]
    bad_step = result.skipped_steps[0]["step"]
    assert math.isnan(result.losses[bad_step - 1])
    assert sum(math.isnan(v) for v in result.losses) == 1 and result.final_step == 11
    assert all(torch.isfinite(p).all() for p in model.parameters())
    with pytest.raises(ConfigError, match="on_nonfinite: expected stop | skip"):
        TrainConfig(on_nonfinite="ignore")


# --------------------------------------------------------------------------------------------
# Model selection: the best validation weights are kept beside the final ones
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("on_disk", [False, True])
def test_keep_best_holds_the_weights_of_the_best_validation_score(tmp_path, on_disk):
    from audiorepro.training.selection import KeepBest, check_select

    scores = iter([0.2, 0.7, 0.5, float("nan"), 0.6, 0.1])
    seen = {}

    def eval_fn(model):
        seen[len(seen) + 1] = {k: v.clone() for k, v in model.state_dict().items()}
        return {"val_map": next(scores)}

    config = dataclasses.replace(BASE, num_epochs=1, grad_accum_steps=1, eval_every=2)
    keeper = KeepBest("val_map", mode="max", directory=tmp_path / "best" if on_disk else None)
    model = make_mlp()
    trainer = Trainer(
        model, ce_loss, Blobs(24), config, eval_fn=eval_fn, callbacks=[keeper], progress="none"
    )
    result = trainer.fit()
    assert result.eval_steps == [2, 4, 6] and result.eval_metric("val_map") == [0.2, 0.7, 0.5]
    assert (keeper.best, keeper.best_step) == (0.7, 4)
    best = keeper.best_state()
    for key, value in seen[2].items():  # the second evaluation, at step 4
        assert torch.equal(best[key], value), key
    # the trainer's model is the final one, and it differs from the best
    final = {k: v.clone() for k, v in model.state_dict().items()}
    assert torch.equal(final["0.weight"], seen[3]["0.weight"])
    assert not torch.equal(final["0.weight"], best["0.weight"])
    keeper.restore_best(model)
    assert torch.equal(model.state_dict()["0.weight"], best["0.weight"])
    assert keeper.state_dict() == {"best": 0.7, "best_step": 4}
    assert (tmp_path / "best" / "best_model.safetensors").is_file() == on_disk
    # NaN never improves; minimising keeps the lowest
    low = KeepBest("val_loss", mode="min")
    assert low.improved(1.0) and not low.improved(float("nan"))
    with pytest.raises(RuntimeError, match="no best weights"):
        low.best_state()
    assert check_select("final") == "final"
    with pytest.raises(ConfigError, match="select: expected best | final"):
        check_select("last")


def test_keep_best_keeps_only_what_its_state_function_gives(tmp_path):
    from audiorepro.training.selection import KeepBest

    config = dataclasses.replace(BASE, num_epochs=1, grad_accum_steps=1, eval_every=2)
    keeper = KeepBest(
        "val_map", directory=tmp_path, state=lambda m: {"w": m.state_dict()["0.weight"]}
    )
    model = make_mlp()
    trainer = Trainer(
        model, ce_loss, Blobs(24), config, eval_fn=lambda m: {"val_map": 1.0},
        callbacks=[keeper], progress="none",
    )  # fmt: skip
    trainer.fit()
    assert keeper.best_step == 2 and set(keeper.best_state()) == {"w"}
    assert not torch.equal(keeper.best_state()["w"], model.state_dict()["0.weight"])


def test_the_loop_hands_on_the_names_its_leaf_modules_now_define():
    from audiorepro.training import callbacks, checkpoint, config, device, loop, progress, sampler

    assert loop.Callback is callbacks.Callback and loop.EarlyStopping is callbacks.EarlyStopping
    assert (
        loop.TrainConfig is config.TrainConfig and loop.OPTIMIZER_IMPLS is config.OPTIMIZER_IMPLS
    )
    assert loop.resolve_device is device.resolve_device
    assert loop.make_accelerator is device.make_accelerator
    assert loop.EpochBatchSampler is sampler.EpochBatchSampler
    assert loop.HEADLESS_ENV == progress.HEADLESS_ENV == "AUDIOREPRO_HEADLESS"
    # One MPS probe, shared by device resolution and the checkpoints' RNG states.
    assert checkpoint.mps_available is device.mps_available
    assert not hasattr(checkpoint, "_mps_available") and not hasattr(loop, "_mps_available")
    # The step arithmetic: 7 micro-batches in groups of 3 -> groups of 3, 3 and a short 1.
    cfg = TrainConfig(num_epochs=2, grad_accum_steps=3, max_steps=5)
    assert config.steps_per_epoch(cfg, 7) == 3 and config.schedule_span(cfg, 3) == 6
    assert config.steps_to_run(cfg, 3) == 5
    groups = [config.accumulation_group(cfg, b, 7) for b in range(7)]
    assert groups == [(3, False), (3, False), (3, True)] * 2 + [(1, True)]


def test_accumulation_out_of_step_names_the_position_counted_from_1(monkeypatch):
    """An internal check: were the trainer's groups to disagree with accelerate's, the error
    says where as the other messages do (the first step is step 1 of epoch 1)."""
    from audiorepro.training import loop

    def never_ends(config, batch_in_epoch, batches):
        return config.grad_accum_steps, False

    monkeypatch.setattr(loop, "accumulation_group", never_ends)
    config = dataclasses.replace(BASE, num_epochs=1, grad_accum_steps=1)
    said = r"out of step with accelerate at step 1 \(epoch 1, micro-batch 1 of it, each counted"
    with pytest.raises(RuntimeError, match=said + r" from 1\)$"):
        Trainer(make_mlp(), ce_loss, Blobs(), config, progress="none").fit()
