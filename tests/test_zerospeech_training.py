"""Chapter 03 VQ-VAE training through the run store: a killed run resumes bit for bit."""

import shutil

import pytest
import torch

from audiorepro.config import replace
from audiorepro.experiments.zerospeech import diagnostics, plan, train
from audiorepro.experiments.zerospeech.config import CHAPTER, load_config, store, tables_config
from audiorepro.experiments.zerospeech.diagnostics import convergence, convergence_curves
from audiorepro.experiments.zerospeech.inverter import train_inverter
from audiorepro.experiments.zerospeech.plan import train_ahead
from audiorepro.experiments.zerospeech.tables import ablation_rows
from audiorepro.experiments.zerospeech.train import train_vqvae
from audiorepro.training.checkpoint import list_checkpoints
from conftest import KillAt, Killed


def test_a_killed_vqvae_run_resumes_from_its_last_checkpoint_bit_for_bit(tmp_path, monkeypatch):
    # 4 steps an epoch, 2 epochs: a checkpoint at the end of each epoch.
    cfg = replace(load_config("smoke"), **{"train.max_steps": None, "train.num_epochs": 2})
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "whole"))
    whole = train_vqvae(cfg, cfg.model, 0)
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    with pytest.raises(Killed):
        train_vqvae(cfg, cfg.model, 0, callbacks=[KillAt(6)])
    root = tmp_path / "runs" / CHAPTER / "vqvae"
    (staging,) = [p for p in root.iterdir() if p.name.startswith(".staging-")]
    assert store().runs("vqvae") == []
    assert [p.name for p in list_checkpoints(staging / "checkpoints")] == ["step_00000004"]
    # Another configuration (seed) has its own staging folder and starts from step 0.
    other = KillAt()
    train_vqvae(cfg, cfg.model, 1, callbacks=[other])
    assert other.steps == [1, 2, 3, 4, 5, 6, 7, 8] and staging.is_dir()
    # The same configuration continues from the step-4 checkpoint.
    again = KillAt()
    resumed = train_vqvae(cfg, cfg.model, 0, callbacks=[again])
    assert again.steps == [5, 6, 7, 8]
    assert resumed.history["loss"] == whole.history["loss"]
    for (name, x), y in zip(
        whole.model.state_dict().items(), resumed.model.state_dict().values(), strict=True
    ):
        assert torch.equal(x, y), name
    assert not staging.exists()  # published: the checkpoints are gone


def test_a_killed_inverter_run_resumes_from_its_last_checkpoint_bit_for_bit(tmp_path, monkeypatch):
    cfg = load_config("smoke")
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    vqvae = train_vqvae(cfg, cfg.model, 0)
    # batches of 2: several steps an epoch, a checkpoint at the end of each epoch
    cfg = replace(
        cfg,
        **{"inverter_train.batch_size": 2, "inverter_train.max_steps": None,
           "inverter_train.num_epochs": 2},
    )  # fmt: skip
    whole = train_inverter(cfg, vqvae, 0)
    assert not whole.from_cache
    shutil.rmtree(tmp_path / "runs" / CHAPTER / "inverter")
    with pytest.raises(Killed):
        train_inverter(cfg, vqvae, 0, callbacks=[KillAt(len(whole.history["step"]) - 1)])
    root = tmp_path / "runs" / CHAPTER / "inverter"
    (staging,) = [p for p in root.iterdir() if p.name.startswith(".staging-")]
    saved = list_checkpoints(staging / "checkpoints")
    assert len(saved) == 1  # the end of the first epoch
    done = int(saved[0].name.split("_")[-1])
    again = KillAt()
    resumed = train_inverter(cfg, vqvae, 0, callbacks=[again])
    total = len(whole.history["step"])
    assert again.steps == list(range(done + 1, total + 1))
    assert resumed.history["loss"] == whole.history["loss"]
    for (name, x), y in zip(
        whole.model.state_dict().items(), resumed.model.state_dict().values(), strict=True
    ):
        assert torch.equal(x, y), name
    assert not staging.exists()


def test_convergence_compares_the_last_tenth_with_the_one_before(monkeypatch):
    """Hand-computed on made-up histories of 20 steps (tenths of 2 steps)."""
    from types import SimpleNamespace

    histories = {
        0: {"step": list(range(1, 21)), "reconstruction": [9.0] * 16 + [5.0, 3.0, 2.0, 2.0],
            "commitment": [1.0] * 20, "batch_codes": [50.0] * 18 + [40.0, 60.0]},
        1: {"step": list(range(1, 21)), "reconstruction": [9.0] * 16 + [4.0, 4.0, 3.0, 3.0],
            "commitment": [1.0] * 18 + [2.0, 2.0], "batch_codes": [50.0] * 20},
    }  # fmt: skip
    monkeypatch.setattr(
        diagnostics,
        "train_vqvae",
        lambda cfg, model, seed, **_: SimpleNamespace(history=histories[seed]),
    )
    cfg = replace(load_config("smoke"), main_seeds=[0, 1])
    (row,) = [r for r in ablation_rows(cfg) if r.key == "base"]
    table = convergence(cfg, [row])
    got = table.loc["base"]
    assert got["steps"] == 20
    # reconstruction: seed 0 last 2.0 after 4.0 (-50 %), seed 1 3.0 after 4.0 (-25 %)
    assert got["reconstruction"] == 2.5 and got["reconstruction_change"] == -37.5
    assert got["commitment"] == 1.5 and got["commitment_change"] == 50.0  # 0 % and +100 %
    assert got["batch_codes"] == 50.0 and got["batch_codes_change"] == 0.0
    curves = convergence_curves(cfg, [row], 0, smooth=4)
    # each step the mean of the last four steps (fewer at the start)
    assert curves["reconstruction"]["base"][:2].tolist() == [9.0, 9.0]
    assert curves["reconstruction"]["base"][-1] == (5.0 + 3.0 + 2.0 + 2.0) / 4
    assert curves["batch_codes"]["base"][-2] == (50.0 * 3 + 40.0) / 4
    # fewer steps than tenths: the last step against the one before
    short = convergence(cfg, [row], tenths=40).loc["base"]
    assert short["reconstruction"] == 2.5 and short["reconstruction_change"] == 0.0
    assert short["batch_codes"] == 55.0 and short["batch_codes_change"] == 25.0  # +50 %, 0 %


@pytest.mark.processes
def test_train_ahead_trains_each_run_once_and_the_pages_then_only_load_them(tmp_path, monkeypatch):
    import dataclasses

    cfg = replace(load_config("smoke"), main_seeds=(0, 1))
    base, other = ablation_rows(cfg)[:2]
    assert base.model != other.model
    rows = [base, other, dataclasses.replace(base, key="same model")]
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "ahead"))
    assert train_ahead(cfg, rows, workers=2) == 2 * 2  # two models, two seeds
    assert len(store().runs("vqvae")) == 4
    assert train_ahead(cfg, rows, workers=2) == 0

    def no_training(*args, **kwargs):
        raise AssertionError("a page trained a run train_ahead should have trained")

    monkeypatch.setattr(train, "fit_vqvae", no_training)
    ahead = {(r.key, s): train_vqvae(cfg, r.model, s) for r in rows for s in cfg.main_seeds}
    monkeypatch.undo()
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "alone"))
    assert all(run.from_cache for run in ahead.values())
    for row in (base, other):  # "same model" is base's run
        for seed in cfg.main_seeds:
            run, alone = ahead[row.key, seed], train_vqvae(cfg, row.model, seed)
            assert not alone.from_cache
            for (name, x), y in zip(
                run.model.state_dict().items(), alone.model.state_dict().values(), strict=True
            ):
                assert torch.equal(x, y), (row.key, seed, name)


def test_train_ahead_also_trains_the_surprise_languages_main_model(tmp_path, monkeypatch):
    cfg = replace(load_config("smoke"), main_seeds=(0,), seed=1, surprise=True)
    base = ablation_rows(cfg)[0]
    monkeypatch.setattr(plan, "ablation_rows", lambda config: [base])
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    # English with seed 0, the surprise language with config.seed; given rows: English only
    assert train_ahead(cfg, [base], workers=1) == 1
    assert train_ahead(cfg, workers=1) == 1
    assert train_ahead(cfg, workers=1) == 0
    assert len(store().runs("vqvae")) == 2
    assert train_vqvae(cfg, base.model, cfg.seed, language="surprise").from_cache
    assert train_ahead(replace(cfg, surprise=False), workers=1) == 0


def test_the_pages_train_the_presets_table_steps_and_the_command_keeps_its_own():
    """The book's rows train ``table_steps`` (its time budget); ``units train`` and the
    real-speech page keep ``train.max_steps``; a page's ``max_steps`` parameter wins over
    both; a preset without ``table_steps`` reads the same for pages and command."""
    command = load_config("embedded")
    pages = tables_config("embedded")
    assert command.table_steps == 500 and command.train.max_steps == 1200
    assert pages.train.max_steps == 500
    assert replace(pages, train=command.train) == command  # nothing else differs
    assert tables_config("embedded", max_steps=30, seed=4).train.max_steps == 30
    assert tables_config("embedded", seed=4).seed == 4
    for preset in ("smoke", "paper"):
        assert load_config(preset).table_steps is None
        assert tables_config(preset) == load_config(preset)
