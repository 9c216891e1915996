"""Chapter 01 data path on the smoke corpora, presets, training through the Trainer, run cache."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
import torch

from audiorepro.config import ConfigError, load_preset, replace
from audiorepro.data.retrieval import (
    RetrievalDataError,
    caption_items,
    load_caption_items,
    manifest_counts,
)
from audiorepro.data.sources import load_sources
from audiorepro.experiments.retrieval.config import PRESETS, Config
from audiorepro.experiments.retrieval.data import load_data
from audiorepro.experiments.retrieval.evaluate import evaluate
from audiorepro.experiments.retrieval.findings import mechanism_checks
from audiorepro.experiments.retrieval.runs import (
    build_model,
    load_trained_state,
    run_entry,
    run_training,
    trained_state,
)
from audiorepro.experiments.retrieval.stages import ablation_config
from audiorepro.models.dual_encoder import DualEncoderConfig
from conftest import REPO, KillAt, Killed


@pytest.fixture(scope="module")
def smoke():
    cfg = load_preset(Config, PRESETS, "smoke", max_train_items=16, max_eval_items=10)
    return cfg, load_data(cfg)


def test_presets_load_and_paper_preset_has_the_papers_values():
    paper = load_preset(Config, PRESETS, "paper")
    train = paper.train
    assert (train.batch_size, train.lr, train.num_epochs, train.warmup_epochs) == (64, 2e-5, 16, 1)
    # the cosine ends at salsa's min_lr; smoke and embedded decay to 0 as before
    assert train.min_lr == 1e-7
    loop = train.trainer_config(640, seed=0, num_epochs=16, lr=train.lr)
    assert (loop.schedule, loop.min_lr) == ("cosine", 1e-7)
    # a learning rate below the floor (fine-tuning) decays no lower than itself
    assert train.trainer_config(640, seed=0, num_epochs=1, lr=1e-8).min_lr == 1e-8
    for preset in ("smoke", "embedded"):
        assert load_preset(Config, PRESETS, preset).train.min_lr == 0.0
    assert (paper.finetune_lr, paper.finetune_epochs, paper.paraphrase_prob) == (8e-6, 5, 0.3)
    model = paper.model
    assert (model.embed_dim, model.tau, model.learnable_tau, paper.max_audio_s) == (
        1024, 0.05, False, 30.0,
    )  # fmt: skip
    assert model.passt_variant == "n" and model.snippet_s == 10 and model.trainable_layers is None
    assert (paper.corpus.kind, paper.corpus.root) == ("paper", "real")
    assert len(paper.corpus_combinations) == 7
    for preset in ("smoke", "embedded"):
        assert load_preset(Config, PRESETS, preset).corpus.kind == preset
    with pytest.raises(ConfigError, match="unknown key 'batchsize'"):
        load_preset(Config, PRESETS, "smoke", batchsize=3)
    with pytest.raises(ConfigError, match="audio_encoder"):
        DualEncoderConfig(audio_encoder="vit")
    with pytest.raises(dataclasses.FrozenInstanceError):
        paper.lr = 1.0


def test_sources_yaml_of_the_three_corpora():
    clotho = load_sources(REPO / "data_manifests/clotho/sources.yaml")
    counts = {k: (v.recordings, v.supervisions) for k, v in clotho.expected_counts.items()}
    assert counts == {
        "development": (3839, 19195),
        "validation": (1045, 5225),
        "evaluation": (1045, 5225),
    }
    assert all(f.md5 and len(f.md5) == 32 for f in clotho.files) and len(clotho.files) == 9
    audiocaps = load_sources(REPO / "data_manifests/audiocaps/sources.yaml")
    assert sum(c.recordings for c in audiocaps.expected_counts.values()) == 51308
    wavcaps = load_sources(REPO / "data_manifests/wavcaps/sources.yaml")
    assert wavcaps.expected_counts["train"].recordings == 403050


def test_smoke_corpora_through_the_recipes(smoke):
    cfg, data = smoke
    assert {k: len(v) for k, v in data.pretrain.items()} == {
        "clotho": 16, "audiocaps": 16, "wavcaps": 10,
    }  # fmt: skip
    assert len(data.evaluation) == 10
    assert all(len(i.paraphrases) > 0 for i in data.finetune)
    # WavCaps lost the clips that copy Clotho evaluation clips
    assert manifest_counts(data.root)["wavcaps"]["train"]["excluded"] == 2
    eval_keys = {i.recording_id for i in caption_items(data.root, "clotho", ["evaluation"])}
    assert eval_keys and not eval_keys & {i.recording_id for i in data.pretrain["wavcaps"]}
    assert set(data.features) >= {i.key for i in data.evaluation}
    assert data.eval_set.targets[:6] == (0, 0, 0, 0, 0, 1)


def test_manifest_pointing_at_missing_file(smoke, tmp_path):
    _, data = smoke
    manifests = data.root.parent / f"{data.root.name}_manifests" / "clotho"
    copy = tmp_path / "audio"
    shutil.copytree(data.root / "clotho", copy)
    victim = next((copy / "clotho_audio_evaluation").iterdir())
    victim.unlink()
    with pytest.raises(RetrievalDataError, match=r"points at a missing file .*" + victim.name):
        load_caption_items(manifests, "clotho", "evaluation", copy)
    with pytest.raises(RetrievalDataError, match="no manifests for split 'test'"):
        load_caption_items(manifests, "clotho", "test", copy)


def test_training_is_seeded_and_saved_runs_reload(smoke):
    cfg, data = smoke
    items = data.training_items(["clotho"], 16)
    kwargs = dict(items=items, num_epochs=1, lr=1e-3, progress="none")
    a = run_training("t", cfg, 5, data, **kwargs)
    b = run_training("t2", cfg, 5, data, **kwargs)  # trained again, same seed
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name
    assert a.train_history["steps"] == [1]
    fresh = build_model(cfg, 5, data)  # audio_pretrained: stage0 needs the data
    assert not torch.equal(fresh.audio_projection.weight, a.audio_projection.weight)
    reloaded = run_training("t", cfg, 5, data, **kwargs)  # from the saved file
    torch.testing.assert_close(reloaded.audio_projection.weight, a.audio_projection.weight)
    assert reloaded.run_key == a.run_key and reloaded.train_history == a.train_history
    # a run that starts from other weights is another run, whatever the names
    tuned = run_training("t", cfg, 5, data, init=a, **kwargs)
    assert tuned.run_key != a.run_key
    entry = dict(items=items, validation=data.validation, num_epochs=1, lr=1e-3)
    assert (
        run_entry("f", cfg, 5, init="x", **entry).key
        != run_entry("f", cfg, 5, init="y", **entry).key
    )
    metrics = evaluate(a, data.eval_set, data.features, cfg)
    assert set(metrics) == {"mAP@10", "R@1", "R@5", "R@10"}
    state = trained_state(a)
    assert not any(k.startswith("text_encoder.model.") for k in state)  # frozen: not saved
    del state["audio_projection.weight"]
    with pytest.raises(RuntimeError, match="missing \\['audio_projection.weight'\\]"):
        load_trained_state(fresh, state)


def test_ablation_configs():
    cfg = Config()
    assert ablation_config(cfg, "audio_encoder", "cnn14").model.audio_encoder == "cnn14"
    assert ablation_config(cfg, "text_encoder", "random").model.text_pretrained is False
    assert ablation_config(cfg, "corpora", "wavcaps+clotho").pretrain_corpora == (
        "clotho", "wavcaps",
    )  # fmt: skip
    assert ablation_config(cfg, "snippet_s", "5.0").model.snippet_frames == 500
    assert ablation_config(cfg, "snippet_s", "5.0").model.passt_variant == "n"


def test_the_audio_encoder_ablation_has_its_own_equal_budget():
    from audiorepro.experiments.retrieval.stages import ablation_steps

    cfg = Config(ablation_steps=200, audio_encoder_steps=80)
    assert ablation_steps(cfg, "audio_encoder") == 80  # PaSST and CNN14 alike
    assert {ablation_steps(cfg, k) for k in ("text_encoder", "corpora", "snippet_s")} == {200}
    assert ablation_steps(Config(ablation_steps=200), "audio_encoder") == 200
    assert ablation_steps(Config(ablation_steps=None), "corpora") is None  # ablation_epochs


class _Corpora:
    """What :func:`ablation_budget` reads of the data: captions per corpus."""

    sizes = {"clotho": 100, "audiocaps": 150, "wavcaps": 50}

    def training_items(self, corpora, max_items=None):
        return [None] * sum(min(self.sizes[c], max_items or 10**9) for c in corpora)


def test_the_ablation_budget_by_hand():
    from audiorepro.experiments.retrieval.stages import ablation_budget

    data = _Corpora()  # 300 captions, batches of 10: 30 steps an epoch, 60 in two
    cfg = replace(
        Config(ablation_epochs=None, ablation_steps=None, audio_encoder_steps=8),
        **{"train.batch_size": 10, "train.num_epochs": 2},
    )
    assert ablation_budget(cfg, "text_encoder", 300, data) == (2, None)  # the pretraining's
    assert ablation_budget(cfg, "snippet_s", 295, data) == (2, None)  # 30 steps an epoch too
    assert ablation_budget(cfg, "corpora", 100, data) == (2, 60)  # clotho: the main's 60 steps
    assert ablation_budget(cfg, "corpora", 400, data) == (2, 60)
    assert ablation_budget(cfg, "audio_encoder", 300, data) == (2, 8)
    assert ablation_budget(replace(cfg, ablation_epochs=3), "corpora", 100, data) == (3, None)
    assert ablation_budget(replace(cfg, ablation_steps=50), "corpora", 100, data) == (2, 50)
    capped = replace(cfg, ablation_max_train_items=20)  # 60 captions: 6 steps an epoch
    assert ablation_budget(capped, "corpora", 20, data) == (2, 12)


def test_with_the_pretraining_budget_the_reference_ablation_is_the_pretraining_run(smoke):
    from audiorepro.experiments.retrieval.stages import pretrain_entry, run_ablation

    cfg, data = smoke
    cfg = replace(
        cfg, ablation_epochs=None, ablation_steps=None, ablation_max_train_items=None,
        ablation_max_audio_s=None, **{"train.batch_size": 8},
    )  # fmt: skip
    seed = 23  # a run no other test trains
    assert not pretrain_entry(cfg, seed, data).complete
    reference = run_ablation(cfg, data, "text_encoder", "pretrained", seed)
    assert pretrain_entry(cfg, seed, data).complete  # the ablation trained the main run
    main_steps = reference["train_steps"]
    clotho = run_ablation(cfg, data, "corpora", "clotho", seed)
    assert len(data.training_items(["clotho"])) != len(data.training_items(cfg.pretrain_corpora))
    assert clotho["train_steps"] == main_steps  # fewer captions, the same steps


def test_a_corpora_setting_in_another_order_is_the_main_configuration():
    """The ablation trains the main system's corpora once: the order of a setting's names
    follows ``pretrain_corpora``, so its runs are the reference runs of the other ablations."""
    cfg = Config(pretrain_corpora=("clotho", "audiocaps", "wavcaps"))
    assert ablation_config(cfg, "corpora", "audiocaps+wavcaps+clotho") == cfg
    assert ablation_config(cfg, "corpora", "wavcaps+clotho").pretrain_corpora == (
        "clotho", "wavcaps",
    )  # fmt: skip
    assert ablation_config(cfg, "corpora", "clotho").pretrain_corpora == ("clotho",)


def test_snippet_ablation_runs_on_passt_s20_at_paper():
    from audiorepro.models.audio_encoders import released_checkpoint
    from audiorepro.models.passt import PASST_CONFIGS

    paper = load_preset(Config, PRESETS, "paper")
    assert paper.snippet_variant == "s20" and paper.model.passt_variant == "n"
    for seconds in paper.snippet_lengths_s:
        model = ablation_config(paper, "snippet_s", str(seconds)).model
        assert (model.passt_variant, model.snippet_s) == ("s20", seconds)
        # every snippet fits the variant's 20 s time encoding (PaSST-N's holds 10 s)
        assert model.snippet_frames <= PASST_CONFIGS["s20"]["img_size"][1]
        assert "20sec" in released_checkpoint(model).file_name
    # the other ablations keep PaSST-N; smoke and embedded keep their variant everywhere
    assert ablation_config(paper, "corpora", "clotho").model.passt_variant == "n"
    for preset in ("smoke", "embedded"):
        cfg = load_preset(Config, PRESETS, preset)
        assert cfg.snippet_variant is None
        model = ablation_config(cfg, "snippet_s", "1.0").model
        assert model.passt_variant == cfg.model.passt_variant
    cnn = dataclasses.replace(paper, model=dataclasses.replace(paper.model, audio_encoder="cnn14"))
    assert ablation_config(cnn, "snippet_s", "5.0").model.passt_variant == "n"
    with pytest.raises(ConfigError, match="snippet_variant"):
        load_preset(Config, PRESETS, "smoke", snippet_variant="s40")
    with pytest.raises(ValueError, match="unknown ablation"):
        ablation_config(cfg, "depth", "3")


def test_mechanism_checks_measure_each_ablation_cause(smoke):
    cfg, data = smoke
    checks = mechanism_checks(cfg, data)
    spread = checks[checks.finding == "a pretrained text encoder beats a random one"]
    mean = {
        "pretrained" if "pretrained" in c else "random": float(m.split()[0])
        for c, m in zip(spread.check, spread.measured, strict=True)
    }
    # a random transformer's first-token state hardly depends on the caption
    assert mean["random"] > 0.95 > mean["pretrained"]
    # standardised (smoke's text_norm: batch), the random one's captions spread out
    assert cfg.model.text_norm == "batch"
    after = [float(m.split("; ")[1].split()[0]) for m in spread.measured]
    assert len(after) == 2 and all(v < 0.5 for v in after)
    params = checks[checks.finding == "PaSST beats CNN14"].measured
    assert len(params) == 2 and all(int(p.replace(",", "")) > 0 for p in params)
    assert set(checks.finding) >= {
        "adding corpora to ClothoV2 helps",
        "longer snippets beat shorter ones",
    }


def test_a_killed_run_resumes_from_its_last_checkpoint_bit_for_bit(smoke, tmp_path):
    from audiorepro.config import replace
    from audiorepro.experiments.retrieval.config import CHAPTER
    from audiorepro.experiments.retrieval.runs import resolve_pretrained
    from audiorepro.storage import RunStore, load_tensors
    from audiorepro.training.checkpoint import list_checkpoints

    cfg, data = smoke
    cfg = replace(cfg, **{"train.batch_size": 4})  # 16 captions: 4 steps an epoch
    items = data.training_items(["clotho"], 16)
    kwargs = dict(items=items, num_epochs=2, lr=1e-3, progress="none")
    whole = run_training("t", cfg, 5, data, run_store=RunStore(CHAPTER, tmp_path / "w"), **kwargs)
    store = RunStore(CHAPTER, tmp_path / "runs")
    with pytest.raises(Killed):
        run_training("t", cfg, 5, data, run_store=store, callbacks=[KillAt(6)], **kwargs)
    entry = run_entry("t", resolve_pretrained(cfg, data), 5, run_store=store, items=items,
                      validation=data.validation, num_epochs=2, lr=1e-3)  # fmt: skip
    staging = store.staging(entry)
    assert store.runs("t") == []
    saved = list_checkpoints(staging / "checkpoints")
    assert [p.name for p in saved] == ["step_00000004"]  # once per epoch
    weights, _ = load_tensors(saved[0] / "model.safetensors")
    assert "audio_projection.weight" in weights
    assert not any(k.startswith("text_encoder.model.") for k in weights)  # frozen: rebuilt
    # Another configuration has its own staging folder and starts from step 0.
    other = KillAt()
    run_training("t", cfg, 5, data, run_store=store, callbacks=[other], **(kwargs | {"lr": 2e-3}))
    assert other.steps == list(range(1, 9)) and saved[0].is_dir()
    # The same configuration continues from the step-4 checkpoint.
    again = KillAt()
    resumed = run_training("t", cfg, 5, data, run_store=store, callbacks=[again], **kwargs)
    assert again.steps == [5, 6, 7, 8]
    history = resumed.train_history
    assert history["resumed_step"] == 4 and history["losses"] == whole.train_history["losses"]
    assert resumed.run_key == whole.run_key
    for (name, x), y in zip(
        whole.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.equal(x, y), name
    assert not staging.exists()  # published: the checkpoints are gone


def test_the_text_cache_is_saved_as_one_tensor_and_read_back(tmp_path, monkeypatch):
    """Caption embeddings written by one page come back, caption for caption, in the next one;
    a file of another layout is refused with its path."""
    from audiorepro.experiments.retrieval import data as retrieval_data
    from audiorepro.models.dual_encoder import DualEncoderConfig

    monkeypatch.setenv("AUDIOREPRO_DATA", str(tmp_path))
    monkeypatch.setattr(retrieval_data, "_TEXT_CACHES", {})
    monkeypatch.setattr(retrieval_data, "_TEXT_CACHE_SIZES", {})
    model = DualEncoderConfig()
    cache = retrieval_data._text_cache(model, 0)
    assert cache == {}
    rows = {f"caption {i}": torch.randn(8) for i in range(5)}
    cache.update(rows)
    retrieval_data.save_text_caches()
    path = retrieval_data._text_cache_path(model, 0)
    assert path.is_relative_to(tmp_path)
    saved = torch.load(path)
    assert saved["captions"] == list(rows) and saved["embeddings"].shape == (5, 8)
    back = retrieval_data._read_text_cache(path)
    assert list(back) == list(rows)
    assert all(torch.equal(back[k], v) for k, v in rows.items())
    torch.save({k: v for k, v in rows.items()}, path)
    with pytest.raises(ValueError, match="not a caption-embedding cache"):
        retrieval_data._read_text_cache(path)
