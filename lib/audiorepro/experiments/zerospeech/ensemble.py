"""Several models of one folder (``units train --models N``, the preset's ``units_models``),
from seeds ``seed``, ``seed + 1``, ..., whose units ``units encode`` sets side by side, and
whose k-means baselines ``abx score`` sets side by side the same way: the first model's folder
holds the others in ``member-2/`` ..., and an interrupted command goes on with the models it
had not finished."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.config import to_dict
from audiorepro.experiments.zerospeech.config import store
from audiorepro.experiments.zerospeech.recordings import (
    RUN_FILE,
    UnitsData,
    UnitsRun,
    fit_units,
    load_units,
    prepare_units,
)
from audiorepro.storage import output_folder, write_json
from audiorepro.training.members import MEMBER, earlier_member, member_seeds, train_members


def _identity(data: UnitsData, models: int) -> dict[str, Any]:
    """What defines a run's models: the frames trained on, their speakers and pairs, and every
    setting (the staging folder of :func:`train_units_ensemble` is named by it)."""
    digest = hashlib.sha256()
    for x, speaker in zip(data.files, data.voices, strict=True):
        digest.update(f"{speaker}\t{x.shape}\n".encode())
        digest.update(np.ascontiguousarray(x, dtype=np.float32).tobytes())
    return {
        "config": to_dict(data.config),
        "frames": digest.hexdigest(),
        "pairs": [list(p) for p in data.pairs],
        "info": {k: v for k, v in data.info.items() if k != "audio"},
        "models": models,
    }


def _member(shared: tuple[UnitsData, str], k: int) -> str:
    """Train the ``k``-th model (from 2) into ``home/member-k``, seed ``seed + k - 1``; its
    warnings were the first model's, said once already."""
    data, home = shared
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_units(data, Path(home) / MEMBER.format(k), seed=data.config.seed + k - 1)
    return MEMBER.format(k)


def train_units_ensemble(
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
    models: int | None = None,
    *,
    speaker_of: str | None = None,
    preset: str = "embedded",
    overrides: Mapping[str, Any] | None = None,
    progress: str = "none",
    workers: int | None = None,
) -> UnitsRun:
    """``models`` models of the folder ``audio`` into ``out`` (``None``: the preset's
    ``units_models``; the other arguments as :func:`~audiorepro.experiments.zerospeech.
    recordings.train_units`, the seed the first model's). The folder is read, and its pairs
    found, once; the first model trains here, the others in up to ``workers`` processes
    (``None``: one a usable core), then ``out`` is written whole
    (:func:`~audiorepro.training.members.train_members`)."""
    data = prepare_units(
        audio, speaker_of=speaker_of, preset=preset, overrides=overrides, progress=progress
    )
    models = data.config.units_models if models is None else models
    seeds = member_seeds(data.config.seed, models)
    if models == 1:
        return fit_units(data, out, progress=progress)
    train_members(
        store(),
        "units-ensemble",
        _identity(data, models),
        lambda folder: fit_units(data, folder, progress=progress),
        _member,
        data,
        out,
        seeds=seeds,
        run_file=RUN_FILE,
        note=(
            f"models: {models}, from seeds {', '.join(str(s) for s in seeds)} (units encode sets "
            "their units side by side, abx score their k-means units too); the lines above are "
            "the first model's (--models 1: one)"
        ),
        workers=workers,
    )
    return load_units(out)


def assemble_runs(runs: list[Path], out: str | os.PathLike[str]) -> UnitsRun:
    """The run of several models that ``units train --models N`` writes, made of ``runs``
    (single runs of one folder and settings, each of its own seed, as ``units train --set
    seed=S`` writes them) into ``out``, written whole: what the book's pages score when they
    have trained their seeds one by one."""
    infos = [json.loads((Path(r) / RUN_FILE).read_text(encoding="utf-8")) for r in runs]
    seeds = [int(info["config"]["seed"]) for info in infos]
    alike = [
        (info.get("audio"), {**info["config"], "seed": None}, info.get("members"))
        for info in infos
    ]
    if len(set(seeds)) < len(seeds) or any(a != alike[0] for a in alike) or alike[0][2]:
        raise ValueError(
            f"{', '.join(map(str, runs))}: expected single runs of one folder and settings with "
            f"seeds of their own, got seeds {seeds}"
        )
    names = [MEMBER.format(k) for k in range(2, len(runs) + 1)]
    with output_folder(out, stale=earlier_member(RUN_FILE)) as folder:
        for item in Path(runs[0]).iterdir():
            if item.is_file() and item.name != "command.json":
                shutil.copy2(item, folder / item.name)
        for name, run in zip(names, runs[1:], strict=True):
            shutil.copytree(run, folder / name, ignore=shutil.ignore_patterns("command.json"))
        note = (
            f"models: {len(runs)}, from seeds {', '.join(map(str, seeds))} (units encode sets "
            "their units side by side, abx score their k-means units too)"
        )
        write_json(
            folder / RUN_FILE,
            infos[0] | {"members": names, "member_seeds": seeds, "ensemble_note": note},
        )
    return load_units(out)
