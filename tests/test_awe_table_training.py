"""How ``awe train`` trains a segments table: its epoch budget, and its refit (the
learning-rate path that made a development run's kept weights, epochs lost to a reset left
out, and a training that follows it on more rows)."""

from __future__ import annotations

import pytest
import torch
from test_awe_data_training import _Scripted

from audiorepro.experiments.awe.train import RatePath, learning_rate_path
from audiorepro.training import TrainConfig, Trainer
from audiorepro.training.callbacks import Callback
from audiorepro.training.plateau import ReduceLROnPlateauWithReset
from audiorepro.training.result import TrainResult


def _history(epochs: int, per_epoch: int) -> TrainResult:
    steps = list(range(1, epochs * per_epoch + 1))
    return TrainResult(steps=steps, epochs=[(s - 1) // per_epoch for s in steps])


def test_the_path_of_a_run_without_a_decay_is_its_epochs_at_the_rate():
    result = _history(5, 3)
    events = [(3, "best"), (6, "best"), (12, "best")]  # epochs 1, 2, 4
    assert learning_rate_path(result, events, 4, 0.1) == [1.0] * 4
    assert learning_rate_path(result, events, 2, 0.1) == [1.0] * 2


def test_epochs_after_the_best_leave_the_path_at_each_decay():
    """Best at epochs 1-3; epochs 4-7 flat, the 7th decays to a tenth and goes back to epoch
    3's weights; best at 9 (two epochs at a tenth after epoch 3); flat 10-13, the 13th decays
    again, back to 9's; best at 14."""
    result = _history(14, 2)
    e = 2  # steps an epoch: epoch k ends at step 2k
    events = [(1 * e, "best"), (2 * e, "best"), (3 * e, "best"), (7 * e, "decay")]
    events += [(9 * e, "best"), (13 * e, "decay"), (14 * e, "best")]
    assert learning_rate_path(result, events, 3, 0.1) == [1.0, 1.0, 1.0]
    assert learning_rate_path(result, events, 9, 0.1) == pytest.approx([1, 1, 1, 0.1, 0.1])
    assert learning_rate_path(result, events, 14, 0.1) == pytest.approx([1, 1, 1, 0.1, 0.1, 0.01])
    # the weights at the end of epoch 6 (select final, had it stopped there): three flat
    # epochs after the best, still on the path
    assert learning_rate_path(result, events, 6, 0.1) == [1.0] * 6


def _trainer(callbacks, epochs, eval_fn=None, rows=8, out_dir=None, every=0):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x = torch.randn(rows, 3)
    data = [(x[i], x[i].sum()) for i in range(rows)]

    def loss_fn(model, batch):
        inputs, target = batch
        return ((model(inputs).squeeze(1) - target) ** 2).mean()

    config = TrainConfig(
        num_epochs=epochs, batch_size=4, lr=1e-2, weight_decay=0.0, seed=0, checkpoint_every=every
    )
    return Trainer(
        model,
        loss_fn,
        data,
        config,
        eval_fn=eval_fn,
        optimizer_factory=lambda m, c: torch.optim.Adam(m.parameters(), lr=c.lr),
        out_dir=out_dir,
        callbacks=callbacks,
        progress="none",
    )


def test_a_refit_trains_each_epoch_at_the_rate_of_the_path_the_plateau_schedule_took():
    """A plateau run (patience 2: best at evaluations 1 and 2, a decay at 4, best at 6) keeps
    epoch 6's weights, made by epochs 1-2 at the rate and two at a tenth; a training of 12 rows
    instead of 8 (three steps an epoch, not two) on that path takes those rates, epoch by
    epoch, and stops after four epochs."""
    schedule = ReduceLROnPlateauWithReset("crossview_ap", patience=2, factor=0.1, min_lr=0)
    values = [0.5, 0.6, 0.55, 0.55, 0.58, 0.7, 0.6, 0.6]
    run = _trainer([schedule], 8, _Scripted(values))
    result = run.fit()
    assert [ev for _, ev in schedule.history] == ["best", "best", "decay", "best", "decay"]
    path = learning_rate_path(result, schedule.history, 6, 0.1)
    assert path == pytest.approx([1, 1, 0.1, 0.1])
    again = _trainer([RatePath(path)], len(path), rows=12).fit()
    assert again.epochs == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert again.lrs == pytest.approx([1e-2] * 6 + [1e-3] * 6)


def test_the_path_is_said_in_words_with_each_rate_and_its_epochs():
    from audiorepro.experiments.awe.train import rates_in_words as _rates

    assert _rates([1.0]) == "1 epoch at the learning rate"
    assert _rates([1.0] * 7) == "7 epochs at the learning rate"
    assert _rates([1, 1, 1, 0.1, 0.1]) == "3 epochs at the learning rate and 2 at 0.1 of it"
    assert _rates([1, 0.1, 0.01, 0.01]) == (
        "1 epoch at the learning rate, 1 at 0.1 of it and 2 at 0.01 of it"
    )


def test_the_epoch_budget_asks_for_the_steps_of_the_preset_within_its_epochs_and_the_papers():
    from audiorepro.experiments.awe.config import load_config
    from audiorepro.experiments.awe.train import MAX_TABLE_EPOCHS, epoch_budget

    config = load_config("embedded", {"table_steps": 1000})  # 7 epochs, batches of 32
    assert (config.train.num_epochs, config.train.batch_size, MAX_TABLE_EPOCHS) == (7, 32, 100)
    budget = {rows: epoch_budget(config, {"table_steps": 1000}, rows) for rows in (32, 3200, 3201)}
    assert budget[3200][0].train.num_epochs == 10  # 100 steps an epoch
    assert budget[3201][0].train.num_epochs == 10  # 101 steps an epoch: 10 epochs, 1,010 steps
    assert budget[32][0].train.num_epochs == 100  # one step an epoch: the paper's cap
    assert budget[3200][1] == (
        "epochs: at most 10, for about 1,000 steps of 32 rows (100 an epoch; at most 100), "
        "the plateau schedule ending sooner when the development AP stops rising "
        "(--set train.num_epochs=N)"
    )
    big, _ = epoch_budget(config, {}, 320_000)  # 10,000 steps an epoch: the preset's 7
    assert big.train.num_epochs == 7
    for given in ({"train.num_epochs": 3}, {"train.max_steps": 5}):
        loaded = load_config("embedded", given)  # max_steps alone: epochs enough for them
        kept, note = epoch_budget(loaded, given, 3200)
        assert kept == loaded
        assert note.endswith(f"({next(iter(given))} as set)")
    smoke, note = epoch_budget(load_config("smoke"), {}, 3200)  # no table_steps
    assert smoke.train.num_epochs == 1 and note == (
        "epochs: at most 1 (the preset's train.num_epochs)"
    )


def test_table_steps_must_be_a_positive_whole_number():
    from audiorepro.config import ConfigError
    from audiorepro.experiments.awe.config import load_config

    for bad in (0, -5):
        with pytest.raises(ConfigError, match="table_steps: expected an int >= 1"):
            load_config("embedded", {"table_steps": bad})
    for bad in (2.5, True):
        with pytest.raises(ConfigError, match="table_steps"):
            load_config("embedded", {"table_steps": bad})


class _CtrlC(Callback):
    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, trainer, step, logs):  # noqa: ANN001
        if step == self.at:
            raise KeyboardInterrupt


def test_a_refit_resumed_after_an_interrupt_keeps_the_rates_of_its_path(tmp_path):
    """The path's first rate is kept with the checkpoint: a refit interrupted after a decay
    continues at the path's rates (not at a tenth of the decayed one), and ends where an
    uninterrupted refit ends."""
    path = [1.0, 1.0, 0.1, 0.1, 0.01]
    whole = _trainer([RatePath(path)], len(path), rows=12)
    done = whole.fit()
    with pytest.raises(KeyboardInterrupt):  # in epoch 4 (steps 10-12), after epoch 3's decay
        _trainer([RatePath(path), _CtrlC(11)], len(path), rows=12, out_dir=tmp_path, every=3).fit()
    again = _trainer([RatePath(path)], len(path), rows=12, out_dir=tmp_path, every=3)
    resumed = again.fit(resume=True)
    assert resumed.steps == done.steps and resumed.lrs == pytest.approx(done.lrs)
    assert done.lrs[9:] == pytest.approx([1e-3] * 3 + [1e-4] * 3)
    for a, b in zip(whole.model.parameters(), again.model.parameters(), strict=True):
        assert torch.equal(a, b)
