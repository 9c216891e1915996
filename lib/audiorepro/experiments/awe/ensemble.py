"""Several models of one segments table (``awe train --models N``, the preset's
``table_models``), from seeds ``seed``, ``seed + 1``, ..., whose unit embeddings ``awe embed``
sets side by side (a cosine is the mean of the models' cosines): the first model's folder
holds the others in ``member-2/`` ... and lists them in ``run.json``, and the finished ones
wait in the run store until ``--out`` is written whole, so that an interrupted command goes on
with the rest."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from audiorepro.data.recordings import read_segments
from audiorepro.experiments.awe.config import CHAPTER, load_config
from audiorepro.experiments.awe.recordings import RUN_FILE, train_on_segments
from audiorepro.experiments.awe.train import reported_epochs
from audiorepro.storage import RunStore, known_file_sha256, read_run_info
from audiorepro.training.members import MEMBER, member_seeds, train_members


def recorded_run(folder: str | Path) -> SimpleNamespace:
    """What ``awe train`` prints of a run, read from its ``run.json`` (a run it reuses, or the
    run folder it assembled)."""
    info = read_run_info(folder, RUN_FILE, "awe", "an AWE run", "awe train")
    history, kept = reported_epochs(info)  # a run.json of epochs from 0 converted
    return SimpleNamespace(
        history=history,
        path=Path(folder),
        kept_epoch=kept,
        selected=info["config"]["select"],
        best_dev=info["best_dev"],
        development=info.get("development", ""),
        augmentation=info.get("augmentation", ""),
        normalisation=info.get("normalisation", "feature normalisation: per file"),
        left_out=info.get("left_out_short", {}),
        first_short=info.get("first_short", ""),
        refit=info.get("refit_note", ""),
        budget=info.get("budget", ""),
        beside_dtw=info.get("development_vs_dtw_note", ""),
        ensemble=info.get("ensemble_note", ""),
    )


def _identity(segments: str | Path, options: Mapping[str, Any], models: int) -> dict[str, Any]:
    """What defines an ensemble's models: the tables and their audio by content, and every
    setting (the staging folder of :func:`train_ensemble` is named by it)."""
    tables = [Path(segments), *([Path(options["dev"])] if options.get("dev") else [])]
    audio = sorted({r.path.resolve() for t in tables for r in read_segments(t, False)})
    lexicon = options.get("lexicon", "cmudict")
    return {
        "tables": [known_file_sha256(t) for t in tables],
        "audio": [known_file_sha256(p) for p in audio],
        "lexicon": known_file_sha256(lexicon) if Path(str(lexicon)).is_file() else lexicon,
        "options": {k: v for k, v in options.items() if k not in ("dev", "lexicon", "progress")},
        "models": models,
    }


def _member(shared: tuple[tuple[str, dict[str, Any], int], str], k: int) -> str:
    """Train the ``k``-th model (from 2) into ``home/member-k``, seed ``seed + k - 1``; its
    warnings were the first model's, said once already."""
    (segments, options, seed), home = shared
    overrides = {**(options.get("overrides") or {}), "seed": seed + k - 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train_on_segments(
            segments, Path(home) / MEMBER.format(k), **{**options, "overrides": overrides}
        )
    return MEMBER.format(k)


def train_ensemble(
    segments: str | Path,
    out: str | Path,
    models: int | None = None,
    workers: int | None = None,
    **options: Any,
) -> Any:
    """``models`` models of ``segments`` into ``out`` (``None``: the preset's
    ``table_models``); ``options`` are :func:`~audiorepro.experiments.awe.recordings.
    train_on_segments`'s, the seed the first model's. One model: that function's run, as it
    returns it. Several: the first trained here, the others by up to ``workers`` processes
    (``None``: one a usable core), then ``out`` written whole
    (:func:`~audiorepro.training.members.train_members`); returns what ``awe train`` prints
    of it (:func:`recorded_run`), with a line on the models (``ensemble``)."""
    config = load_config(options.get("preset", "embedded"), options.get("overrides"))
    models = config.table_models if models is None else models
    seeds = member_seeds(config.seed, models)
    if models == 1:
        return train_on_segments(segments, out, **options)
    train_members(
        RunStore(CHAPTER),
        "awe-ensemble",
        _identity(segments, options, models),
        lambda folder: train_on_segments(segments, folder, **options),
        _member,
        (str(segments), {**options, "progress": "none"}, config.seed),
        out,
        seeds=seeds,
        run_file=RUN_FILE,
        note=(
            f"models: {models}, from seeds {', '.join(str(s) for s in seeds)} (awe embed "
            "concatenates their embeddings: the mean of their cosines); the lines above are "
            "the first model's (--models 1: one)"
        ),
        workers=workers,
    )
    return recorded_run(out)
