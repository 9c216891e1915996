"""What chapter 02 runs: the graph of its missing runs (:func:`chapter_tasks`), trained side by
side ahead of the pages (:func:`train_ahead`), and the page drivers that reload, score and record
the teachers, the students and the λ sweep."""

from __future__ import annotations

from typing import Any

from audiorepro.experiments.distillation.config import Config, teacher_config
from audiorepro.experiments.distillation.data import finetune_items
from audiorepro.experiments.distillation.evaluate import (
    evaluate_and_record,
    record_ensemble,
    record_stage1,
)
from audiorepro.experiments.distillation.teachers import (
    stage1_entry,
    stage1_teacher,
    store_entry,
    teacher_stores,
)
from audiorepro.experiments.distillation.train import distill, distill_entry, uses_teachers
from audiorepro.experiments.retrieval.data import RetrievalData, load_data
from audiorepro.experiments.retrieval.stages import stage0_checkpoint, stage0_key, stage0_ready
from audiorepro.models.dual_encoder import DualEncoder
from audiorepro.parallel import Job, Task, side_by_side_workers, train_graph

#: What :func:`train_ahead` trains for each stage (a job's kind: ``stage0``, ``stage1``,
#: ``stores``, ``distill`` (the students at λ = ``lam``), ``sweep`` (the λ sweep's)); the runs a
#: kind starts from come with it.
AHEAD: dict[str, tuple[str, ...]] = {
    "stage1": ("stage0", "stage1"),
    "distill": ("stage1", "stores", "distill"),
    "sweep": ("stage1", "stores", "sweep"),
    "chapter": ("stage0", "stage1", "stores", "distill", "sweep"),
}


def train_ahead(config: Config, data: RetrievalData, stage: str) -> None:
    """Train the missing runs of ``stage`` side by side (:func:`chapter_tasks`,
    :func:`~audiorepro.parallel.train_graph`) before the pages' loops reload them:
    ``stage1`` (stage 0 of every teacher, then the stage-1 run of every teacher and seed),
    ``distill`` (each seed's teacher stores, then every student at λ = ``lam``), ``sweep``
    (every run of the λ sweep) or ``chapter`` (all of them; what page 01 runs under
    ``embedded``). Does nothing where
    :func:`~audiorepro.parallel.side_by_side_workers` is 1."""
    if stage not in AHEAD:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(AHEAD)}")
    rcfg = config.retrieval
    workers = side_by_side_workers(rcfg.train.torch_threads, rcfg.train.device)
    if workers <= 1:
        return
    for name in config.teachers:  # each front end's features once, here, not in every worker
        data.features_for(teacher_config(config, name).model)
    tasks = chapter_tasks(config, data, stage)
    train_graph(tasks, workers=workers, data=data, load=load_data, source=rcfg)


#: Rough seconds of one job under ``embedded`` on one thread (from the book's ledgers), only
#: to start the costliest remaining path first.
JOB_SECONDS = {
    "stage0": 60.0, "stage1": 45.0, "stage1/mobilenet": 60.0, "stores": 15.0, "distill": 20.0,
}  # fmt: skip


def chapter_tasks(
    config: Config, data: RetrievalData, stage: str = "chapter"
) -> dict[Any, Task[Job]]:
    """The missing runs of ``stage`` (:data:`AHEAD`) of chapter 02 as one graph for
    :func:`~audiorepro.parallel.train_graph`: each teacher's stage 0 (keyed by its
    run key), its stage-1 run of every seed after it, each seed's teacher stores after that
    seed's stage-1 runs, and every student of stage 2 (λ = ``lam``, the λ sweep; a run in both
    trains once) after its seed's stores, or, fine-tuned without teachers (λ = 0), after its
    own stage-1 run only: those fill the cores while the slowest teacher trains. Runs already in the store are left out; whatever
    waits on a missing run stays in, since its key is only known once that run exists."""
    if stage not in AHEAD:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(AHEAD)}")
    kinds = AHEAD[stage]
    tasks: dict[Any, Task[Job]] = {}
    names = list(config.teachers)
    items = finetune_items(config, data)
    first: dict[str, tuple[Any, ...]] = {}
    for name in names:
        cfg = teacher_config(config, name)
        key = stage0_key(cfg)
        first[name] = ()
        if key is not None and not stage0_ready(cfg, data):
            job = Job(stage0_checkpoint, cfg)
            tasks.setdefault(("stage0", key), Task(job, cost=JOB_SECONDS["stage0"]))
            first[name] = (("stage0", key),)
    students: set[tuple[str, float]] = set()
    if "distill" in kinds:
        students |= {(n, config.lam) for n in names}
    if "sweep" in kinds:
        students |= {(n, lam) for n in config.sweep_models for lam in config.lambdas}
    for seed in config.seeds:
        stage1: tuple[Any, ...] = ()
        for name in names:
            if first[name] or not stage1_entry(config, name, seed, data).complete:
                job = Job(stage1_teacher, config, {"name": name, "seed": seed})
                cost = JOB_SECONDS.get(f"stage1/{name}", JOB_SECONDS["stage1"])
                tasks[("stage1", name, seed)] = Task(job, first[name], cost)
                stage1 += (("stage1", name, seed),)
        if "stores" not in kinds:
            continue
        stores: tuple[Any, ...] = ()
        if stage1 or not all(store_entry(config, n, seed, data, items).complete for n in names):
            job = Job(teacher_stores, config, {"seed": seed, "items": items})
            tasks[("stores", seed)] = Task(job, stage1, JOB_SECONDS["stores"])
            stores = (("stores", seed),)
        for name, lam in sorted(students, key=lambda s: (s[0] != "mobilenet", s)):
            after = stores
            if not uses_teachers(lam, config.dist_only):  # plain fine-tuning: its own run only
                own = ("stage1", name, seed)
                after = (own,) if own in tasks else ()
            if not after and distill_entry(config, name, seed, data, lam=lam).complete:
                continue
            job = Job(distill, config, {"name": name, "seed": seed, "lam": lam})
            tasks[("distill", name, lam, seed)] = Task(job, after, JOB_SECONDS["distill"])
    return tasks


def evaluate_teachers(
    config: Config, data: RetrievalData, *, preset: str, page: str
) -> dict[tuple[str, int], DualEncoder]:
    """Every stage-1 model of every seed (trained or reloaded) and each seed's stage-1 ensemble,
    scored and recorded with tags ``{"model": name or "ensemble", "stage": "stage1"}`` and the
    training-caption top-1; returns ``{(name, seed): model}``. Missing runs train side by side
    first (:func:`train_ahead`)."""
    train_ahead(config, data, "stage1")
    out = {}
    for seed in config.seeds:
        models = record_stage1(config, data, seed, page=page, preset=preset)
        out |= {(name, seed): model for name, model in models.items()}
    return out


def evaluate_models(
    config: Config, data: RetrievalData, *, preset: str, page: str, stage1: bool = True
) -> dict[tuple[str, int], DualEncoder]:
    """The Table 2 analogue, seed by seed: the stage-1 models and their ensemble (when
    ``stage1``, as :func:`evaluate_teachers`), each distilled student (λ = ``lam``) scored and
    recorded, then the ensemble of the students (tags ``{"model": "ensemble", "stage":
    "distilled", "lam": lam}``). Returns the students, ``{(name, seed): model}``. Missing
    runs train side by side first (:func:`train_ahead`)."""
    train_ahead(config, data, "stage1")
    train_ahead(config, data, "distill")
    students = {}
    for seed in config.seeds:
        if stage1:
            record_stage1(config, data, seed, page=page, preset=preset)
        for name in config.teachers:
            students[name, seed] = distill(config, name, seed, data)
            evaluate_and_record(
                students[name, seed], config, name, data, page=page, preset=preset, seed=seed,
                tags={"stage": "distilled", "lam": config.lam},
            )  # fmt: skip
        models = [students[name, seed] for name in config.teachers]
        record_ensemble(
            models, config, data, page=page, preset=preset, seed=seed, stage="distilled"
        )
    return students


def evaluate_sweep(config: Config, data: RetrievalData, *, preset: str, page: str) -> None:
    """The λ sweep: every model of ``sweep_models``, λ of ``lambdas`` and seed, distilled (or
    reloaded) with the same ``finetune_steps``, scored and recorded with tags ``{"model",
    "stage": "distilled", "lam"}``. Missing runs train side by side first (:func:`train_ahead`)."""
    train_ahead(config, data, "sweep")
    for name in config.sweep_models:
        for lam in config.lambdas:
            for seed in config.seeds:
                model = distill(config, name, seed, data, lam=lam)
                evaluate_and_record(
                    model,
                    config,
                    name,
                    data,
                    page=page,
                    preset=preset,
                    seed=seed,
                    tags={"stage": "distilled", "lam": lam},
                )
