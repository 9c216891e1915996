"""Model selection of chapters 01 and 02 on the Clotho validation split: the best mAP@10 of the
epoch ends and the final weights, both saved, one run whichever is selected, resumable."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from audiorepro.config import ConfigError, load_preset, replace
from audiorepro.experiments.distillation import config as dist_config
from audiorepro.experiments.retrieval import runs
from audiorepro.experiments.retrieval.config import CHAPTER, PRESETS, Config
from audiorepro.experiments.retrieval.data import load_data
from audiorepro.experiments.retrieval.runs import (
    evaluation_points,
    resolve_pretrained,
    run_entry,
    run_training,
    trained_state,
)
from audiorepro.storage import RunStore, load_tensors
from conftest import KillAt, Killed


@pytest.fixture(scope="module")
def smoke():
    """The smoke preset at 16 captions per corpus and batches of 4 (4 steps an epoch of the
    Clotho captions), its data with 10 validation and 10 evaluation captions."""
    cfg = load_preset(Config, PRESETS, "smoke", max_train_items=16, max_eval_items=10)
    cfg = replace(cfg, **{"train.batch_size": 4})
    return cfg, load_data(cfg)


class Snapshots:
    """A Trainer callback that keeps the trained weights after every step, by step."""

    def __init__(self) -> None:
        self.states: dict[int, dict[str, torch.Tensor]] = {}

    def on_step_end(self, trainer, step, logs) -> None:
        model = trainer.unwrapped_model
        self.states[step] = {k: v.clone() for k, v in trained_state(model).items()}


class Scripted:
    """Stands in for the validation evaluation: mAP@10 ``values[step]`` at the step the run
    is at (a callback keeps track of it, across resumption), so the best step is known."""

    def __init__(self, values: dict[int, float]) -> None:
        self.values, self.step, self.calls = values, 0, []

    def on_step_end(self, trainer, step, logs) -> None:
        self.step = step

    def __call__(self, model, eval_set, features, config) -> dict[str, float]:
        self.calls.append(self.step)
        return {"mAP@10": self.values[self.step], "R@1": 0.0, "R@5": 0.0, "R@10": 0.0}


def equal_states(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_two_epochs_save_both_weights_and_the_validation_curve(smoke, tmp_path):
    cfg, data = smoke
    items = data.training_items(["clotho"], 16)
    kwargs = dict(items=items, num_epochs=2, lr=1e-3, progress="none")
    store = RunStore(CHAPTER, tmp_path / "runs")
    snapshots = Snapshots()
    best = run_training("t", cfg, 5, data, run_store=store, callbacks=[snapshots], **kwargs)
    (run,) = store.runs("t")
    assert all((run.path / n).is_file() for n in ("model.safetensors", "final.safetensors"))
    history = best.train_history
    curve = history["validation"]
    assert curve["evaluated"] and curve["metric"] == "mAP@10"
    assert curve["steps"] == history["eval_steps"] == [4, 8]  # every epoch end
    assert all(0.0 <= v <= 1.0 for v in curve["values"])
    first_max = curve["steps"][curve["values"].index(max(curve["values"]))]
    assert history["best_step"] == first_max and history["best_mAP@10"] == max(curve["values"])
    assert history["selected"] == "best" and best.weights_key == f"{best.run_key}/best"
    assert equal_states(trained_state(best), snapshots.states[history["best_step"]])
    # select: final is the same run, loaded without training
    again = KillAt()
    final = run_training(
        "t", replace(cfg, select="final"), 5, data, run_store=store, callbacks=[again], **kwargs
    )
    assert again.steps == [] and len(store.runs("t")) == 1
    assert final.run_key == best.run_key and final.weights_key == f"{best.run_key}/final"
    assert final.train_history["selected"] == "final"
    assert equal_states(trained_state(final), snapshots.states[8])


def test_one_epoch_is_not_evaluated_and_best_is_final(smoke, tmp_path, monkeypatch):
    cfg, data = smoke
    scripted = Scripted({})
    monkeypatch.setattr(runs, "evaluate", scripted)
    items = data.training_items(["clotho"], 16)
    store = RunStore(CHAPTER, tmp_path / "runs")
    for run_kwargs in ({"num_epochs": 1}, {"num_epochs": 2, "max_steps": 3}):
        model = run_training(
            "t", cfg, 5, data, items=items, lr=1e-3, progress="none", run_store=store,
            callbacks=[scripted], **run_kwargs,
        )  # fmt: skip
        history = model.train_history
        assert scripted.calls == [] and history["eval_steps"] == []
        assert history["validation"] == {
            "metric": "mAP@10", "evaluated": False, "steps": [], "values": [],
        }  # fmt: skip
        assert history["best_step"] == history["final_step"] and history["best_mAP@10"] is None
        path = next(r.path for r in store.runs("t") if r.key == model.run_key)
        best, _ = load_tensors(path / "model.safetensors")
        final, _ = load_tensors(path / "final.safetensors")
        assert equal_states(best, final)
        assert (path / "model.safetensors").samefile(path / "final.safetensors")  # one file


@pytest.mark.parametrize(
    ("values", "one_file"), [({4: 0.5, 8: 0.3}, False), ({4: 0.3, 8: 0.5}, True)]
)
def test_best_weights_are_a_second_file_only_when_they_are_not_the_final_ones(
    smoke, tmp_path, monkeypatch, values, one_file
):
    cfg, data = smoke
    monkeypatch.setattr(runs, "evaluate", scripted := Scripted(values))
    store = RunStore(CHAPTER, tmp_path / "runs")
    model = run_training(
        "t", cfg, 5, data, items=data.training_items(["clotho"], 16), num_epochs=2, lr=1e-3,
        progress="none", run_store=store, callbacks=[scripted],
    )  # fmt: skip
    assert model.train_history["best_step"] == max(values, key=values.get)
    (run,) = store.runs("t")
    best, final = run.path / "model.safetensors", run.path / "final.safetensors"
    assert best.samefile(final) is one_file
    assert equal_states(load_tensors(best)[0], load_tensors(final)[0]) is one_file


def test_evaluation_points_count_epoch_ends_and_the_last_step(smoke):
    cfg, _ = smoke
    loop = cfg.train.trainer_config(16, seed=0, num_epochs=2, lr=1e-3)  # 4 steps an epoch
    points = {
        (epochs, steps): evaluation_points(
            dataclasses.replace(loop, num_epochs=epochs, max_steps=steps), 16
        )
        for epochs, steps in ((1, None), (2, None), (2, 3), (2, 4), (2, 6), (3, 9), (3, None))
    }
    assert points == {
        (1, None): 1, (2, None): 2, (2, 3): 1, (2, 4): 1, (2, 6): 2, (3, 9): 3, (3, None): 3,
    }  # fmt: skip


def test_a_bad_select_is_refused_and_select_is_not_part_of_the_run(smoke):
    cfg, data = smoke
    with pytest.raises(ConfigError, match="Config.select"):
        load_preset(Config, PRESETS, "smoke", select="last")
    with pytest.raises(ConfigError, match="select"):
        load_preset(dist_config.Config, dist_config.PRESETS, "smoke", **{"retrieval.select": "x"})
    items = data.training_items(["clotho"], 16)
    resolved = resolve_pretrained(cfg, data)
    common = dict(items=items, num_epochs=2, lr=1e-3)
    key = run_entry("t", resolved, 5, validation=data.validation, **common).key
    final = replace(resolved, select="final")
    assert run_entry("t", final, 5, validation=data.validation, **common).key == key
    other = run_entry("t", resolved, 5, validation=data.validation[:5], **common).key
    assert other != key  # the validation captions select the weights: part of the run


def test_a_killed_run_resumes_to_the_same_best_and_final_weights(smoke, tmp_path, monkeypatch):
    cfg, data = smoke
    items = data.training_items(["clotho"], 16)
    kwargs = dict(items=items, num_epochs=2, lr=1e-3, progress="none")
    # the first epoch's end is the best: the best weights must survive the kill
    values = {4: 0.9, 8: 0.1}

    def train(root, select="best", kill=None):
        scripted = Scripted(values)
        monkeypatch.setattr(runs, "evaluate", scripted)
        run_cfg = replace(cfg, select=select)
        callbacks = [scripted, KillAt(kill)]
        store = RunStore(CHAPTER, tmp_path / root)
        model = run_training("t", run_cfg, 5, data, run_store=store, callbacks=callbacks, **kwargs)
        return model, scripted.calls

    whole_best, calls = train("whole")
    assert calls == [4, 8] and whole_best.train_history["best_step"] == 4
    whole_final, _ = train("whole", select="final")
    assert not equal_states(trained_state(whole_best), trained_state(whole_final))
    with pytest.raises(Killed):
        train("runs", kill=6)  # after the evaluation and checkpoint of step 4
    store = RunStore(CHAPTER, tmp_path / "runs")
    entry = run_entry(
        "t", resolve_pretrained(cfg, data), 5, run_store=store, items=items,
        validation=data.validation, num_epochs=2, lr=1e-3,
    )  # fmt: skip
    assert (store.staging(entry) / "best" / "best_model.safetensors").is_file()
    resumed_best, calls = train("runs")
    assert calls == [8]  # step 4's evaluation is not repeated
    history = resumed_best.train_history
    assert history["resumed_step"] == 4 and history["best_step"] == 4
    assert history["validation"]["steps"] == [4, 8]
    resumed_final, _ = train("runs", select="final")
    assert equal_states(trained_state(resumed_best), trained_state(whole_best))
    assert equal_states(trained_state(resumed_final), trained_state(whole_final))


def test_final_weights_are_the_finished_checkpoint_linked_not_written_again(
    smoke, tmp_path, monkeypatch
):
    cfg, data = smoke
    written = []
    monkeypatch.setattr(runs, "save_tensors", lambda tensors, path, **kw: written.append(path))
    store = RunStore(CHAPTER, tmp_path / "runs")
    model = run_training(
        "t", cfg, 5, data, items=data.training_items(["clotho"], 16), num_epochs=1, lr=1e-3,
        progress="none", run_store=store,
    )  # fmt: skip
    assert written == []  # neither final nor best weights were serialised a second time
    (run,) = store.runs("t")
    on_disk, _ = load_tensors(run.path / "final.safetensors")
    assert equal_states(on_disk, trained_state(model))
    assert (run.path / "model.safetensors").samefile(run.path / "final.safetensors")


def test_write_final_weights_writes_a_file_unless_the_checkpoint_holds_those_tensors(tmp_path):
    from audiorepro.training.checkpoint import save_checkpoint
    from audiorepro.training.loop import TrainResult

    model = torch.nn.Linear(3, 2)
    checkpoint = save_checkpoint(tmp_path / "checkpoints", 7, model=model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    finished = TrainResult(final_step=7, checkpoint=str(checkpoint))
    cases = {
        "linked": (state, finished, True),
        "no result": (state, None, False),
        "an older checkpoint": (state, dataclasses.replace(finished, final_step=8), False),
        "other tensors": ({"weight": state["weight"]}, finished, False),
        "other shapes": (state | {"bias": torch.zeros(3)}, finished, False),
    }
    for name, (final, result, linked) in cases.items():
        path = tmp_path / f"{name}.safetensors"
        runs.write_final_weights(final, path, result)
        assert path.samefile(checkpoint / "model.safetensors") is linked, name
        assert equal_states(load_tensors(path)[0], final), name


def test_a_run_another_process_published_first_is_loaded_from_its_files(smoke, tmp_path):
    """Two processes training the same run: the one that publishes second keeps the first's
    files, and its model must hold their weights, not its own."""
    cfg, data = smoke
    items = data.training_items(["clotho"], 16)

    class FirstElsewhere(RunStore):
        def publish(self, run, build):
            def other(folder):  # the same run trained elsewhere, its weights marked by zeros
                build(folder)
                for name in ("final.safetensors", "model.safetensors"):
                    tensors, _ = load_tensors(folder / name)
                    (folder / name).unlink()
                    zeros = {k: torch.zeros_like(v) for k, v in tensors.items()}
                    runs.save_tensors(zeros, folder / name)
                # Its own history file (a new file, as another process's would be).
                runs.write_json(folder / "elsewhere.json", {"elsewhere": True})
                (folder / "elsewhere.json").replace(folder / "history.json")

            super().publish(run, other)
            # Ours finds the run complete (it waited for the other's lock) and builds nothing.
            return super().publish(run, build)

    store = FirstElsewhere(CHAPTER, tmp_path / "runs")
    trained = run_training(
        "t", cfg, 5, data, items=items, num_epochs=1, lr=1e-3, progress="none", run_store=store
    )
    assert trained.train_history["elsewhere"] is True
    assert all(not v.any() for v in trained_state(trained).values())
