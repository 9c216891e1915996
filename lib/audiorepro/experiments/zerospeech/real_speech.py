"""Chapter 03 on real speech: the path of the ``audiorepro units`` and ``abx`` commands (train
units, encode, score beside the k-means and frame baselines), run on the Italian prompts the
book ships (:mod:`audiorepro.data.recipes.asterisk`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import soundfile as sf

from audiorepro.data.recipes.asterisk import italian_folder
from audiorepro.experiments.zerospeech.baselines import (
    CHANCE,
    Encoding,
    ScoreRow,
    score_table,
    side_by_side,
    verdict,
)
from audiorepro.experiments.zerospeech.ensemble import assemble_runs
from audiorepro.experiments.zerospeech.recordings import abx_items, encode_units, train_units
from audiorepro.metrics.abx import abx
from audiorepro.parallel import map_processes
from audiorepro.paths import data_dir

ABX_CHANCE = CHANCE
"""The ABX error (%) of features that tell nothing apart."""

SPEAKER_OF = "parent"
"""How the commands tell the speakers apart: each speaker's files are in a folder of their own."""


def italian_files() -> pd.DataFrame:
    """The shipped recordings: files and minutes per part (``prompts``, ``numbers``) and
    speaker."""
    folder = italian_folder()
    return pd.DataFrame(
        [
            {
                "part": part,
                "speaker": speakers.name,
                "files": len(list(speakers.glob("*.flac"))),
                "minutes": sum(sf.info(p).duration for p in speakers.glob("*.flac")) / 60,
            }
            for part in ("prompts", "numbers")
            for speakers in sorted((folder / part).iterdir())
        ]
    )


@dataclass(frozen=True)
class RealSpeechRun:
    """One seed of :func:`units_on_real_speech`: what the commands would print, and the rows."""

    seed: int
    rows: list[ScoreRow]
    lines: list[str]
    """What ``units train`` and ``abx score`` print of the run (its files, its step budget,
    the table, the verdict)."""
    folder: Path | None = None
    """The run folder ``units train`` wrote."""

    def error(self, what: str) -> float:
        """The ABX error (%) of ``what``: ``vectors`` (the units), ``kmeans`` or ``frames``."""
        return next(r.error for r in self.rows if r.what == what)


def real_speech_folder(preset: str) -> Path:
    """Where :func:`units_on_real_speech` writes: ``<data>/real_speech/03_zerospeech/<preset>``."""
    return data_dir() / "real_speech" / "03_zerospeech" / preset


def units_on_real_speech(
    preset: str,
    seed: int,
    out: str | Path | None = None,
    sets: Mapping[str, Any] | None = None,
) -> RealSpeechRun:
    """``units train`` on the shipped prompts (the preset's model and training, ``seed``), then
    ``abx items`` from the number words' table, ``units encode`` of the number words and
    ``abx score`` across speakers beside the baselines, as a user would run them::

        audiorepro abx items --segments numbers.tsv --audio numbers --out numbers.item
        audiorepro units train --audio prompts --speaker-of parent --out RUN
        audiorepro units encode RUN --audio numbers --speaker-of parent --out UNITS
        audiorepro abx score numbers.item UNITS --mode across

    ``sets`` are further ``--set`` overrides of ``units train`` (``{"train.max_steps": 1200}``).
    Everything is written under ``out`` (default ``<data>/real_speech/03_zerospeech/<preset>``),
    replacing the files of an earlier call."""
    folder = italian_folder()
    out = Path(out) if out is not None else real_speech_folder(preset)
    item = out / f"numbers-seed{seed}.item"  # one a seed: seeds may run side by side
    abx_items(folder / "numbers.tsv", item, audio=folder / "numbers")
    run_dir, units = out / f"units-seed{seed}", out / f"numbers-seed{seed}"
    run = train_units(
        folder / "prompts", run_dir, speaker_of=SPEAKER_OF, preset=preset,
        overrides={**(sets or {}), "seed": seed},
    )  # fmt: skip
    encode_units(run, folder / "numbers", units, "vectors", SPEAKER_OF)
    result = abx(units, item, distance="angular", mode="across")
    encoding = Encoding(run_dir, folder / "numbers", SPEAKER_OF, "vectors")
    rows = side_by_side(encoding, result, item, distance="angular", mode="across")
    table = score_table(rows, "across", "angular")
    lines = [run.note, run.normalisation, run.pairing, run.budget, *table, verdict(rows)]
    return RealSpeechRun(seed, rows, lines, run_dir)


def models_side_by_side(preset: str, runs: Sequence[RealSpeechRun]) -> RealSpeechRun:
    """The seeds of :func:`units_on_real_speech_seeds` as one run of several models, as
    ``units train --models N`` writes it (:func:`~audiorepro.experiments.zerospeech.ensemble.
    assemble_runs`), then ``units encode`` and ``abx score``: the units of the models side by
    side beside their k-means units side by side, and the frames (``seed``: the first's)."""
    folder = italian_folder()
    out = real_speech_folder(preset)
    seeds = "-".join(str(r.seed) for r in runs)
    run_dir, units = out / f"units-models-{seeds}", out / f"numbers-models-{seeds}"
    run = assemble_runs([r.folder for r in runs if r.folder is not None], run_dir)
    item = out / f"numbers-seed{runs[0].seed}.item"
    encode_units(run, folder / "numbers", units, "vectors", SPEAKER_OF)
    result = abx(units, item, distance="angular", mode="across")
    encoding = Encoding(run_dir, folder / "numbers", SPEAKER_OF, "vectors")
    rows = side_by_side(encoding, result, item, distance="angular", mode="across")
    table = score_table(rows, "across", "angular")
    return RealSpeechRun(runs[0].seed, rows, [run.ensemble, *table, verdict(rows)], run_dir)


def _one_seed(shared: tuple[str, Mapping[str, Any] | None], seed: int) -> RealSpeechRun:
    preset, sets = shared
    return units_on_real_speech(preset, seed, sets=sets)


def units_on_real_speech_seeds(
    preset: str,
    seeds: Sequence[int],
    workers: int | None = None,
    sets: Mapping[str, Any] | None = None,
) -> dict[int, RealSpeechRun]:
    """:func:`units_on_real_speech` of every seed (with the same ``sets``), ``{seed: run}``,
    up to ``workers`` at once (None: every seed at once; on two cores three seeds side by side
    end sooner than two and then one). Each run trains on one thread, so the numbers are those
    of one run after another."""
    workers = len(seeds) if workers is None else workers
    runs = map_processes(_one_seed, list(seeds), shared=(preset, sets), workers=workers)
    return dict(zip(seeds, runs, strict=True))
