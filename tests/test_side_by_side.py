"""Chapters 01-02 train runs side by side (one process per core, one torch thread each): a run
trained there equals the run a page would have trained in its own process, bit for bit."""

from __future__ import annotations

import pytest
import torch

from audiorepro import parallel
from audiorepro.config import replace
from audiorepro.experiments.retrieval import data as retrieval_data
from audiorepro.experiments.retrieval import plan, runs, stages
from audiorepro.experiments.retrieval.config import load_config
from audiorepro.parallel import graph_order
from audiorepro.repro import torch_threads

ONE_THREAD = {"train.torch_threads": 1, "stage0.torch_threads": 1}


def side_by_side_workers(cfg):
    """Chapter 01's runs at once: :func:`audiorepro.parallel.side_by_side_workers` of its
    training section."""
    return parallel.side_by_side_workers(cfg.train.torch_threads, cfg.train.device)


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
    monkeypatch.setattr(parallel, "usable_cores", lambda: 4)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    cfg = load_config("embedded")
    assert cfg.train.torch_threads == 1 and cfg.stage0.torch_threads == 1
    assert side_by_side_workers(cfg) == 4
    assert side_by_side_workers(replace(cfg, **{"train.torch_threads": 2})) == 2
    # threads not set (smoke, paper): one run at a time, on torch's threads, in the page
    assert side_by_side_workers(load_config("smoke")) == 1
    assert side_by_side_workers(load_config("paper")) == 1
    assert side_by_side_workers(replace(cfg, **{"train.device": "cuda"})) == 1
    monkeypatch.setenv("WORLD_SIZE", "2")  # accelerate launch: all processes train one run
    assert side_by_side_workers(cfg) == 1


def test_a_model_keeps_the_captions_it_embeds_to_itself(tmp_path, monkeypatch):
    """A frozen text encoder starts from a copy of the chapter's cache: what one run embeds
    (paraphrases, in its own batches) never reaches another run or the shared cache."""
    cfg = load_config("smoke", {"max_train_items": 16, "max_eval_items": 10})
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    data = retrieval_data.load_data(cfg)
    a, b = (runs.build_model(cfg, seed, data) for seed in (0, 1))
    shared = retrieval_data._text_cache(cfg.model, 0)
    caption = data.finetune[0].caption
    assert caption in shared and caption in a.text_encoder._cache  # load_data embedded it
    a.text_encoder(["a caption no corpus holds"])
    assert "a caption no corpus holds" in a.text_encoder._cache
    assert "a caption no corpus holds" not in b.text_encoder._cache
    assert "a caption no corpus holds" not in shared


@pytest.mark.processes
def test_runs_trained_side_by_side_equal_runs_trained_in_the_page(tmp_path, monkeypatch):
    cfg = load_config(
        "smoke", {**ONE_THREAD, "seeds": [0, 1], "max_train_items": 16, "max_eval_items": 10}
    )
    monkeypatch.setattr(parallel, "usable_cores", lambda: 2)  # two workers on any machine

    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "side"))
    data = retrieval_data.load_data(cfg)
    plan.train_ahead(cfg, data, "chapter")  # what page 02 runs: the whole chapter
    for name in ("passt", "cnn14"):
        assert stages.stage0_ready(replace(cfg, **{"model.audio_encoder": name}), data)
    assert all(stages.pretrain_entry(cfg, s, data).complete for s in cfg.seeds)
    assert all(
        stages.finetune_entry(cfg, s, data, augment=a).complete
        for s in cfg.seeds
        for a in (False, True)
    )
    for kind, settings in stages.ablation_settings(cfg).items():
        for setting in settings:
            for seed in cfg.seeds:
                assert stages.ablation_entry(cfg, data, kind, setting, seed).complete
    for stage in plan.AHEAD:  # nothing is left for the pages' own calls
        assert plan.chapter_tasks(cfg, data, stage) == {}
    side = {s: stages.finetune(cfg, s, data, augment=True, progress="none") for s in cfg.seeds}

    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "page"))  # an empty run store
    monkeypatch.setattr(parallel, "usable_cores", lambda: 1)
    data = retrieval_data.load_data(cfg)
    for seed in cfg.seeds:
        page = stages.finetune(cfg, seed, data, augment=True, progress="none")  # here
        assert page.run_key == side[seed].run_key
        for key, value in page.state_dict().items():
            assert torch.equal(value, side[seed].state_dict()[key]), (seed, key)


@pytest.mark.processes
def test_chapter_02_trains_its_runs_ahead_and_the_pages_only_reload_them(tmp_path, monkeypatch):
    from audiorepro.experiments.distillation import config as dist_config
    from audiorepro.experiments.distillation import data as dist_data
    from audiorepro.experiments.distillation import plan as dist_plan
    from audiorepro.experiments.distillation import teachers
    from audiorepro.experiments.distillation import train as dist_train

    config = dist_config.load_config(
        "smoke",
        {f"retrieval.{k}": v for k, v in ONE_THREAD.items()} | {"seeds": [0, 1], "lambdas": [0.0]},
    )
    monkeypatch.setattr(parallel, "usable_cores", lambda: 2)
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    data = retrieval_data.load_data(config.retrieval)
    names, seeds = config.teachers, config.seeds
    dist_plan.train_ahead(config, data, "chapter")  # what page 01 runs
    assert all(teachers.stage1_entry(config, n, s, data).complete for n in names for s in seeds)
    items = dist_data.finetune_items(config, data)
    for n in names:
        for s in seeds:
            assert teachers.store_entry(config, n, s, data, items).complete
            assert dist_train.distill_entry(config, n, s, data).complete
    assert all(
        dist_train.distill_entry(config, n, s, data, lam=0.0).complete
        for n in config.sweep_models
        for s in seeds
    )
    for stage in dist_plan.AHEAD:
        assert dist_plan.chapter_tasks(config, data, stage) == {}
    loaded = []
    real = teachers.stage1_teacher
    monkeypatch.setattr(
        teachers, "stage1_teacher", lambda *a, **k: loaded.append(a[1]) or real(*a, **k)
    )
    for s in seeds:
        paths = teachers.teacher_stores(config, s, data, items)
        assert paths == {
            n: teachers.store_entry(config, n, s, data, items).path / "store" for n in names
        }
    assert loaded == []  # the stores exist: no teacher is loaded to find them

    def trained(*args, **kwargs):
        raise AssertionError("a page trained a run that train_ahead should have trained")

    monkeypatch.setattr(runs, "train_dual_encoder", trained)
    monkeypatch.setattr(dist_train, "train_distilled", trained)
    dist_plan.evaluate_models(config, data, preset="smoke", page="p")
    dist_plan.evaluate_sweep(config, data, preset="smoke", page="p")


@pytest.mark.processes
def test_chapter_02_fine_tunes_without_teachers_as_soon_as_its_own_stage_1_exists(
    tmp_path, monkeypatch
):
    """On an empty run store (no training): a student at λ = 0 waits for its own stage-1 run
    only, and its key reads no other teacher; a student at λ > 0 waits for the stores."""
    from audiorepro.experiments.distillation import config as dist_config
    from audiorepro.experiments.distillation import plan as dist_plan
    from audiorepro.experiments.distillation import train as dist_train

    config = dist_config.load_config(
        "smoke",
        {f"retrieval.{k}": v for k, v in ONE_THREAD.items()}
        | {"seeds": [0, 1], "lambdas": [0.0, 1.0]},
    )
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    data = retrieval_data.load_data(config.retrieval)
    tasks = dist_plan.chapter_tasks(config, data, "chapter")
    students = {k: t.after for k, t in tasks.items() if k[0] == "distill"}
    plain = {k: after for k, after in students.items() if k[2] == 0.0}
    assert {k[1] for k in plain} == set(config.sweep_models) and len(plain) == 2 * len(
        config.sweep_models
    )
    for (_, name, _, seed), after in plain.items():
        own = ("stage1", name, seed)
        assert after == ((own,) if own in tasks else ()), (name, seed, after)
    for (_, name, lam, seed), after in students.items():
        if lam > 0:
            assert after == (("stores", seed),), (name, lam, seed)
    read = []

    class Stage1:  # a stage-1 entry of teacher n, known without training it
        def __init__(self, n):
            read.append(n)
            self.key = f"stage1-{n}"

    monkeypatch.setattr(dist_train, "stage1_entry", lambda c, n, *a, **k: Stage1(n))
    name = config.sweep_models[0]
    plain = dist_train.distill_entry(config, name, 0, data, lam=0.0)
    assert read == [name]  # the student's own stage-1 run, no other teacher
    read.clear()
    distilled = dist_train.distill_entry(config, name, 0, data, lam=1.0)
    assert sorted(read) == sorted([name, *config.teachers]) and plain.key != distilled.key


@pytest.mark.processes
def test_each_stage_trains_what_its_page_needs_and_what_that_starts_from(tmp_path, monkeypatch):
    """On an empty run store: the graph of each stage, its order and its costs (no training)."""
    cfg = load_config("smoke", {**ONE_THREAD, "seeds": [0, 1]})
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    data = retrieval_data.load_data(cfg)

    def s0(name):
        return (
            "stage0",
            stages.stage0_key(replace(cfg, **{"model.audio_encoder": name})),
        )

    passt, cnn14 = s0("passt"), s0("cnn14")
    graphs = {stage: plan.chapter_tasks(cfg, data, stage) for stage in plan.AHEAD}
    pre = {("pretrain", s): (passt,) for s in (0, 1)}
    fine = {("finetune", s, a): (("pretrain", s),) for s in (0, 1) for a in (False, True)}
    assert {k: t.after for k, t in graphs["pretrain"].items()} == {passt: (), cnn14: ()} | pre
    assert {k: t.after for k, t in graphs["finetune"].items()} == {passt: ()} | pre | fine
    ablations = {k: t.after for k, t in graphs["ablations"].items() if k[0] == "ablation"}
    assert ablations[("ablation", "audio_encoder", "cnn14", 1)] == (cnn14, ("pretrain", 1))
    # the random text encoder is one draw (text_seed): its captions are embedded once, first
    captions = ("captions", cfg.model.text_model, 0)
    for seed in (0, 1):
        after = (passt, captions, ("pretrain", seed))
        assert ablations[("ablation", "text_encoder", "random", seed)] == after
    assert graphs["ablations"][captions].after == ()
    assert len(ablations) == 2 * sum(map(len, stages.ablation_settings(cfg).values()))
    assert graphs["chapter"].keys() == (
        graphs["pretrain"].keys() | fine.keys() | ablations.keys() | {captions}
    )
    # CNN14's stage 0 and its ablations are the costliest path: it starts first
    assert graph_order(graphs["chapter"])[0] == cnn14
    with pytest.raises(ValueError, match="unknown stage 'everything'"):
        plan.train_ahead(cfg, data, "everything")


@pytest.mark.processes
def test_captions_embedded_by_two_workers_equal_those_embedded_here(tmp_path, monkeypatch):
    """load_data splits the caption batches between one process per core: every vector is bit
    for bit the one the page's own process computes (same batches, same one thread)."""
    from audiorepro.models.text import TextEncoder

    cfg = load_config("smoke", ONE_THREAD)
    monkeypatch.setattr(TextEncoder, "chunk_size", 16)  # several batches from the smoke corpus
    dispatched = []
    spawn = retrieval_data.map_processes
    monkeypatch.setattr(
        retrieval_data,
        "map_processes",
        lambda *a, **k: dispatched.append(k["workers"]) or spawn(*a, **k),
    )
    caches = {}
    for cores in (2, 1):
        monkeypatch.setattr(parallel, "usable_cores", lambda cores=cores: cores)
        monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / f"cores{cores}"))
        retrieval_data.load_data(cfg)
        caches[cores] = dict(retrieval_data._text_cache(cfg.model, 0))
    assert dispatched == [2]  # two workers embedded for the first store, none for the second
    assert len(caches[1]) > 3 * 16 and caches[2].keys() == caches[1].keys()
    for caption, vector in caches[1].items():
        assert torch.equal(caches[2][caption], vector), caption


def test_a_random_text_encoder_drawn_once_embeds_the_captions_once_for_every_seed(
    tmp_path, monkeypatch
):
    """``model.text_seed``: the ablation's frozen random text encoder is one draw for every
    seed, its caption cache filled once (by the chapter's graph, before its runs) with the
    vectors each caption gets alone; a cache written by another process is read again."""
    from audiorepro.models.text import CACHE_TOLERANCE, TextEncoder

    cfg = load_config("smoke", {"max_train_items": 16, "max_eval_items": 10})
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    data = retrieval_data.load_data(cfg)
    rnd = stages.ablation_config(cfg, "text_encoder", "random")
    assert rnd.model.text_seed == 0 and retrieval_data.shares_random_text(rnd)
    before = retrieval_data._text_cache(rnd.model, 0)  # this process reads it empty
    assert before == {} and not retrieval_data.captions_embedded(rnd, data)

    everything = retrieval_data.all_items(data.pretrain, data.validation, data.evaluation)
    assert retrieval_data.embed_captions(rnd, data) == len({i.caption for i in everything})
    assert retrieval_data.captions_embedded(rnd, data)
    assert retrieval_data.embed_captions(rnd, data) == 0  # nothing left to embed
    cache = retrieval_data._text_cache(rnd.model, 0)
    caption = data.evaluation[0].caption
    alone = TextEncoder(cfg.model.text_model, pretrained=False, trainable_layers=0, seed=0)
    torch.testing.assert_close(
        alone.embed_chunks([[caption]])[0][0], cache[caption], rtol=0, atol=CACHE_TOLERANCE
    )

    rnd = replace(rnd, **{"model.audio_pretrained": None})  # no stage 0 to train here
    a, b = (runs.build_model(rnd, seed) for seed in (0, 1))
    text_a, text_b = a.text_encoder.state_dict(), b.text_encoder.state_dict()
    assert all(torch.equal(text_a[k], text_b[k]) for k in text_a)  # one draw
    assert not torch.equal(a.text_projection.weight, b.text_projection.weight)  # two seeds
    assert caption in a.text_encoder._cache and caption in b.text_encoder._cache

    per_seed = replace(rnd, **{"model.text_seed": None})  # one draw per seed, as before
    assert not retrieval_data.shares_random_text(per_seed)
    c, d = (runs.build_model(per_seed, seed) for seed in (0, 1))
    assert not all(
        torch.equal(v, d.text_encoder.state_dict()[k])
        for k, v in c.text_encoder.state_dict().items()
    )
    with pytest.raises(ValueError, match="one random draw for every seed"):
        retrieval_data.embed_captions(per_seed, data)

    # another process saves the cache again (a worker of the graph): this process reads it
    path = retrieval_data._text_cache_path(rnd.model, 0)
    saved = torch.load(path)
    saved["captions"].append("a caption another process embedded")
    saved["embeddings"] = torch.cat([saved["embeddings"], saved["embeddings"][:1]])
    torch.save(saved, path)
    assert "a caption another process embedded" in retrieval_data._text_cache(rnd.model, 0)
