"""What chapter 01 runs: the graph of its missing runs (:func:`chapter_tasks`), trained side by
side ahead of the pages (:func:`train_ahead`), and the page drivers that reload, score and record
every stage and ablation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audiorepro import reporting
from audiorepro.config import replace, to_dict
from audiorepro.experiments.retrieval.config import CHAPTER, STAGES, Config
from audiorepro.experiments.retrieval.data import (
    RetrievalData,
    captions_embedded,
    embed_captions,
    load_data,
    shares_random_text,
)
from audiorepro.experiments.retrieval.evaluate import evaluate, evaluate_and_record
from audiorepro.experiments.retrieval.stages import (
    ablation_config,
    ablation_entry,
    ablation_model,
    ablation_settings,
    finetune,
    finetune_entry,
    pretrain,
    pretrain_entry,
    run_ablation,
    stage0_checkpoint,
    stage0_key,
    stage0_ready,
)
from audiorepro.models.dual_encoder import DualEncoder
from audiorepro.parallel import Job, Task, side_by_side_workers, train_graph

#: What :func:`train_ahead` trains for each stage (a job's kind: ``stage0``, ``pretrain``,
#: ``finetune``, ``ablation``); the runs a kind starts from come with it.
AHEAD: dict[str, tuple[str, ...]] = {
    "pretrain": ("stage0", "pretrain"),
    "finetune": ("pretrain", "finetune"),
    "ablations": ("pretrain", "ablation"),
    "chapter": ("stage0", "pretrain", "finetune", "ablation"),
}


#: Rough seconds of one job under ``embedded`` on one thread (from the book's ledgers), only
#: to start the costliest remaining path first.
JOB_SECONDS = {
    "stage0": 45.0, "stage0/cnn14": 150.0, "pretrain": 40.0, "finetune": 25.0,
    "ablation": 35.0, "ablation/cnn14": 60.0, "ablation/random": 35.0, "captions": 45.0,
}  # fmt: skip


def chapter_tasks(config: Config, data: RetrievalData, stage: str = "chapter") -> dict[Any, Task]:
    """The missing runs of ``stage`` (:data:`AHEAD`) of chapter 01 as one graph for
    :func:`audiorepro.parallel.train_graph`: each stage 0 (keyed by its run key, so that settings
    sharing one train it once; with ``stage0``, that of every audio encoder the chapter compares),
    the pretraining of every seed after its stage 0, both fine-tunings after their seed's
    pretraining, every ablation run after its own stage 0 and its seed's pretraining (an ablation's
    reference setting is that pretraining run, :func:`run_ablation`, so the two must not train side
    by side), and a random text encoder's runs after its caption cache when one draw serves every
    seed (:func:`~audiorepro.experiments.retrieval.data.embed_captions`). Runs already in the
    store are left out; whatever waits on a missing stage 0 stays in,
    since its key is only known once that stage 0 exists."""
    if stage not in AHEAD:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(AHEAD)}")
    kinds = AHEAD[stage]
    tasks: dict[Any, Task[Job]] = {}

    def stage0(cfg: Config) -> tuple[Any, ...]:
        key = stage0_key(cfg)
        if key is None or stage0_ready(cfg, data):
            return ()
        cost = JOB_SECONDS.get(f"stage0/{cfg.model.audio_encoder}", JOB_SECONDS["stage0"])
        tasks.setdefault(("stage0", key), Task(Job(stage0_checkpoint, cfg), cost=cost))
        return (("stage0", key),)

    if "stage0" in kinds:  # page 02 shows the stage 0 of every encoder the chapter compares
        for name in ablation_settings(config)["audio_encoder"]:
            stage0(replace(config, **{"model.audio_encoder": name}))

    def captions(cfg: Config) -> tuple[Any, ...]:
        """A random text encoder drawn once for every seed embeds the captions once, first."""
        if not shares_random_text(cfg) or captions_embedded(cfg, data):
            return ()
        key = ("captions", cfg.model.text_model, cfg.model.text_seed)
        tasks.setdefault(key, Task(Job(embed_captions, cfg), cost=JOB_SECONDS["captions"]))
        return (key,)

    main = stage0(config)
    pretrained: dict[int, tuple[Any, ...]] = {}
    for seed in config.seeds:
        pretrained[seed] = ()
        if main or not pretrain_entry(config, seed, data).complete:
            job = Job(pretrain, config, {"seed": seed})
            tasks[("pretrain", seed)] = Task(job, main, JOB_SECONDS["pretrain"])
            pretrained[seed] = (("pretrain", seed),)
        for a in (False, True) if "finetune" in kinds else ():
            if not pretrained[seed] and finetune_entry(config, seed, data, augment=a).complete:
                continue
            job = Job(finetune, config, {"seed": seed, "augment": a})
            tasks[("finetune", seed, a)] = Task(job, pretrained[seed], JOB_SECONDS["finetune"])
    for kind, settings in ablation_settings(config).items() if "ablation" in kinds else ():
        for setting in settings:
            changed = ablation_config(config, kind, setting)
            first = stage0(changed) + captions(changed)
            cost = JOB_SECONDS.get(f"ablation/{setting}", JOB_SECONDS["ablation"])
            for seed in config.seeds:
                after = first + pretrained[seed]
                if not after and ablation_entry(config, data, kind, setting, seed).complete:
                    continue
                kwargs = {"kind": kind, "setting": setting, "seed": seed}
                job = Job(ablation_model, config, kwargs)  # the page scores it
                tasks[("ablation", kind, setting, seed)] = Task(job, after, cost)
    return tasks


def train_ahead(config: Config, data: RetrievalData, stage: str) -> None:
    """Train the missing runs of ``stage`` side by side (:func:`chapter_tasks`,
    :func:`audiorepro.parallel.train_graph`), so that the pages' loops only reload them:
    ``pretrain`` (stage 0 of every audio encoder the chapter uses, then the pretraining of every
    seed), ``finetune`` (both fine-tunings of every seed), ``ablations`` (every ablation run) or
    ``chapter`` (all of them; what page 02 runs under ``embedded``). Does nothing where
    :func:`audiorepro.parallel.side_by_side_workers` is 1: the pages then train each run in their
    loops."""
    if stage not in AHEAD:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(AHEAD)}")
    workers = side_by_side_workers(config.train.torch_threads, config.train.device)
    if workers > 1:
        tasks = chapter_tasks(config, data, stage)
        train_graph(tasks, workers=workers, data=data, load=load_data, source=config)


def evaluate_stages(
    config: Config,
    data: RetrievalData,
    *,
    preset: str,
    page: str,
    recorded: Sequence[str] = STAGES,
) -> dict[tuple[str, int], tuple[DualEncoder, dict[str, float]]]:
    """For every seed, the models of :data:`STAGES` (trained or reloaded), each scored on the
    evaluation split; the stages in ``recorded`` go to the ledger, tagged ``{"stage": ...}``.
    Returns ``{(stage, seed): (model, metrics)}``. Missing runs train side by side first
    (:func:`train_ahead`)."""
    train_ahead(config, data, "finetune")
    out = {}
    for seed in config.seeds:
        models = {
            "pretrain": pretrain(config, seed, data),
            "finetune": finetune(config, seed, data, augment=False),
            "finetune-aug": finetune(config, seed, data, augment=True),
        }
        for stage, model in models.items():
            if stage in recorded:
                metrics = evaluate_and_record(
                    model, config, data, page=page, preset=preset, seed=seed,
                    tags={"stage": stage},
                )  # fmt: skip
            else:
                metrics = evaluate(model, data.eval_set, data.features, config)
            out[stage, seed] = (model, metrics)
    return out


def run_ablations(config: Config, data: RetrievalData, *, preset: str, page: str) -> None:
    """Every ablation setting of :func:`ablation_settings` for every seed, recorded in the
    ledger with tags ``{"ablation": kind, "setting": setting}``. Missing runs train side by side
    first (:func:`train_ahead`)."""
    train_ahead(config, data, "ablations")
    for kind, settings in ablation_settings(config).items():
        for setting in settings:
            for seed in config.seeds:
                metrics = run_ablation(config, data, kind, setting, seed)
                reporting.record_result(
                    CHAPTER, page, metrics, preset=preset, seed=seed, config=to_dict(config),
                    tags={"ablation": kind, "setting": setting},
                )  # fmt: skip
