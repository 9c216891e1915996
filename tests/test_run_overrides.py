"""Overrides that are honoured or refused, never ignored: ``max_steps`` set alone is the run's
length in chapters 03 and 04, and a ZeroSpeech ``corpus.root`` holding a real corpus under a
generated kind is refused instead of being passed over for a generated one."""

from __future__ import annotations

import numpy as np
import pytest

from audiorepro.config import ConfigError, CorpusSpec, max_steps_alone
from audiorepro.experiments import awe
from audiorepro.experiments.zerospeech import config as zs_config
from audiorepro.experiments.zerospeech.data import language_dir
from audiorepro.experiments.zerospeech.train import fit_vqvae


def test_max_steps_alone_lifts_num_epochs_dotted_or_nested_and_leaves_the_input():
    overrides = {"train": {"max_steps": 7}, "seed": None}
    assert max_steps_alone(overrides) == {"train": {"max_steps": 7, "num_epochs": 7}}
    assert overrides == {"train": {"max_steps": 7}, "seed": None}
    assert max_steps_alone({"train.max_steps": 7, "train.num_epochs": 2}) == {
        "train": {"max_steps": 7, "num_epochs": 2}
    }
    assert max_steps_alone({"train.max_steps": None}) == {}
    assert max_steps_alone({"x.max_steps": 3}, ("train",)) == {"x": {"max_steps": 3}}


def test_chapter_03_max_steps_alone_outlasts_the_presets_epochs():
    preset = zs_config.load_config("embedded")
    assert preset.train.num_epochs < 5000 and preset.train.max_steps < 5000
    longer = zs_config.load_config("embedded", {"train.max_steps": 5000})
    assert (longer.train.num_epochs, longer.train.max_steps) == (5000, 5000)
    inverter = zs_config.load_config("embedded", {"inverter_train.max_steps": 900})
    assert inverter.inverter_train.num_epochs == 900
    both = zs_config.load_config("embedded", {"train.max_steps": 5000, "train.num_epochs": 3})
    assert both.train.num_epochs == 3  # both given: both honoured as written


def test_chapter_03_max_steps_alone_runs_that_many_steps():
    """On 2 utterances of 40 frames (1 batch per epoch), the smoke preset's 1 epoch would stop
    after 1 step; max_steps = 3 set alone runs 3."""
    cfg = zs_config.load_config("smoke", {"train.max_steps": 3, "train.segment_frames": 40})
    rng = np.random.default_rng(0)
    feats = [rng.normal(size=(40, 39)).astype(np.float32) for _ in range(2)]
    _, history = fit_vqvae(cfg.train, cfg.model, feats, ["a", "b"], seed=0)
    assert history["step"][-1] == 3


def test_chapter_04_max_steps_alone():
    cfg = awe.load_config("smoke", {"train.max_steps": 4})
    assert (cfg.train.num_epochs, cfg.train.max_steps) == (4, 4)
    assert cfg.train.trainer_config(0).max_steps == 4


def test_zerospeech_root_with_a_real_corpus_is_refused_under_a_generated_kind(
    tmp_path, monkeypatch
):
    import audiorepro.data.embedded.generate as generate

    calls = []
    monkeypatch.setattr(generate, "ensure_corpora", lambda *a, **k: calls.append(k) or {})
    (tmp_path / "mine" / "english").mkdir(parents=True)
    cfg = zs_config.Config(corpus=CorpusSpec("smoke", root=str(tmp_path / "mine")))
    with pytest.raises(ConfigError, match=r"holds a ZeroSpeech 2019 folder \(english/\).*kind"):
        language_dir(cfg)
    assert calls == []
    # An empty root is where the generated corpus goes: honoured.
    (tmp_path / "gen").mkdir()
    monkeypatch.setattr(
        generate,
        "ensure_corpora",
        lambda *a, **k: calls.append(k["out"]) or {"zerospeech": tmp_path / "gen" / "zs"},
    )
    (tmp_path / "gen" / "zs" / "english").mkdir(parents=True)
    cfg = zs_config.Config(corpus=CorpusSpec("smoke", root=str(tmp_path / "gen")))
    assert language_dir(cfg) == tmp_path / "gen" / "zs" / "english"
    assert calls == [tmp_path / "gen"]
    # kind=paper reads the real folder itself.
    paper = zs_config.Config(corpus=CorpusSpec("paper", root=str(tmp_path / "mine")))
    assert language_dir(paper) == tmp_path / "mine" / "english"


@pytest.mark.parametrize(
    ("pair", "said"),
    [
        ("model.n_heads=0", "n_heads must be an int >= 1, got 0"),
        ("model.d_model=0", "d_model must be an int >= 1, got 0"),
        ("model.dropout=1.5", "dropout must be in [0, 1), got 1.5"),
        ("model.code_dim=0", "code_dim must be an int >= 1, got 0"),
        ("train.segment_frames=7", "train.segment_frames must be >= 8 (the shortest segment"),
        ("model.commitment=-1", "commitment must be >= 0 (a weight or a share; a negative"),
        ("model.smoothing=-0.5", "smoothing must be >= 0"),
        ("model.jitter=0.7", "jitter p must be in [0, 0.5), got 0.7"),
    ],
)
def test_a_set_value_out_of_its_range_is_named_before_any_audio_is_read(
    pair, said, tmp_path, capsys, monkeypatch
):
    """Each ``--set`` of a model or training value out of its range is refused naming the
    ``--set`` given and the range, before any work (a ZeroDivisionError to report, torch's
    wording without the field, or a run trained with a negative weight, before)."""
    import soundfile as sf

    from audiorepro.cli import main

    def opened(*args, **kwargs):
        raise AssertionError("audio was read")

    monkeypatch.setattr(sf, "SoundFile", opened)
    monkeypatch.setattr(sf, "read", opened)
    (tmp_path / "audio").mkdir()
    (tmp_path / "audio" / "a_0.wav").write_bytes(b"RIFF")
    argv = ["units", "train", "--audio", str(tmp_path / "audio"), "--preset", "smoke",
            "--set", pair, "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"audiorepro: error: --set {pair}: {said}"), err
    assert "give a value in that range" in err and not (tmp_path / "run").exists()
