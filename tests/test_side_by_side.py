"""Chapters 01-02 train runs side by side (one process per core, one torch thread each): a run
trained there equals the run a page would have trained in its own process, bit for bit."""

from __future__ import annotations

import pytest
import torch

from audiorepro.experiments import retrieval
from audiorepro.repro import torch_threads

ONE_THREAD = {"train.torch_threads": 1, "stage0.torch_threads": 1}


def test_torch_threads_sets_and_restores_and_none_leaves_torch_alone():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="threads must be None or an int >= 1"):
            with torch_threads(bad):
                pass


def test_workers_one_per_core_only_for_cpu_runs_of_set_threads(monkeypatch):
    monkeypatch.setattr(retrieval, "usable_cores", lambda: 4)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    cfg = retrieval.load_config("embedded")
    assert cfg.train.torch_threads == 1 and cfg.stage0.torch_threads == 1
    assert retrieval.side_by_side_workers(cfg) == 4
    assert retrieval.side_by_side_workers(retrieval.replace(cfg, **{"train.torch_threads": 2})) == 2
    # threads not set (smoke, paper): one run at a time, on torch's threads, in the page
    assert retrieval.side_by_side_workers(retrieval.load_config("smoke")) == 1
    assert retrieval.side_by_side_workers(retrieval.load_config("paper")) == 1
    assert retrieval.side_by_side_workers(retrieval.replace(cfg, **{"train.device": "cuda"})) == 1
    monkeypatch.setenv("WORLD_SIZE", "2")  # accelerate launch: all processes train one run
    assert retrieval.side_by_side_workers(cfg) == 1


def test_runs_trained_side_by_side_equal_runs_trained_in_the_page(tmp_path, monkeypatch):
    cfg = retrieval.load_config(
        "smoke", {**ONE_THREAD, "seeds": [0, 1], "max_train_items": 16, "max_eval_items": 10}
    )
    monkeypatch.setattr(retrieval, "usable_cores", lambda: 2)  # two workers on any machine

    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "side"))
    data = retrieval.load_data(cfg)
    retrieval.train_ahead(cfg, data, "pretrain")  # stage 0 of both encoders, both seeds
    for name in ("passt", "cnn14"):
        assert retrieval.stage0_ready(retrieval.replace(cfg, **{"model.audio_encoder": name}), data)
    assert all(retrieval.pretrain_entry(cfg, s, data).complete for s in cfg.seeds)
    retrieval.train_ahead(cfg, data, "finetune")
    assert all(
        retrieval.finetune_entry(cfg, s, data, augment=a).complete
        for s in cfg.seeds
        for a in (False, True)
    )
    side = {s: retrieval.finetune(cfg, s, data, augment=True, progress="none") for s in cfg.seeds}

    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "page"))  # an empty run store
    monkeypatch.setattr(retrieval, "usable_cores", lambda: 1)
    data = retrieval.load_data(cfg)
    for seed in cfg.seeds:
        page = retrieval.finetune(cfg, seed, data, augment=True, progress="none")  # here
        assert page.run_key == side[seed].run_key
        for key, value in page.state_dict().items():
            assert torch.equal(value, side[seed].state_dict()[key]), (seed, key)
