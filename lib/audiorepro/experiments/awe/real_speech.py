"""Chapter 04 on real speech: the path of the ``audiorepro awe`` commands (train on a segments
table, embed, AP beside MFCC + DTW on the same pairs), run on the Italian number words the book
ships (:mod:`audiorepro.data.recipes.asterisk`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.data.recipes.asterisk import italian_folder
from audiorepro.data.recordings import SEGMENT_COLUMNS, read_segments
from audiorepro.experiments.awe.evaluate import ap_table, embeddings_vs_dtw
from audiorepro.experiments.awe.recordings import (
    embed_table,
    embedded_norm,
    embedded_rows,
    embeddings_ap,
    embeddings_of,
    rows_dtw_ap,
    train_on_segments,
)
from audiorepro.parallel import map_processes, usable_cores
from audiorepro.paths import data_dir
from audiorepro.storage import atomic_write

SPLITS = ("train", "dev", "test")
LEXICON = "characters"
"""The words are the packages' file names (``3``, ``mon-0``, ``h-1``), spelled character by
character for the written view: no pronunciation dictionary holds them."""


def split_of(index: int) -> str:
    """The split of the ``index``-th number word (sorted by name): every third word is a test
    word, every sixth from the second a development word, the rest are trained on. Both
    speakers' tokens of a word are in its split, so every test word is unseen."""
    return "test" if index % 3 == 0 else "dev" if index % 6 == 1 else "train"


def number_word_tables(out: str | Path) -> dict[str, Path]:
    """Write ``out/{train,dev,test}.tsv``: the shipped number words (``numbers.tsv``) split by
    word with :func:`split_of`, the paths resolved. Returns ``{split: table}``."""
    folder = italian_folder()
    rows = read_segments(folder / "numbers.tsv")
    words = sorted({r.word for r in rows})
    split = {w: split_of(i) for i, w in enumerate(words)}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tables = {}
    for name in SPLITS:
        lines = ["\t".join(SEGMENT_COLUMNS)] + [
            f"{r.path.resolve()}\t{r.word}\t{r.speaker}\t\t" for r in rows if split[r.word] == name
        ]
        text = "\n".join(lines) + "\n"
        tables[name] = out / f"{name}.tsv"
        atomic_write(tables[name], lambda tmp, text=text: tmp.write_text(text))
    return tables


@dataclass(frozen=True)
class RealSpeechAWE:
    """One seed of :func:`awe_on_real_speech`: the embeddings' AP, the baseline's, the lines."""

    seed: int
    ap: float
    baseline: dict[str, Any]
    """MFCC + DTW on the same pairs: ``{"ap", "num_pairs", "chance"}``."""
    lines: list[str]
    """What ``awe train`` says of its training and development rows and kept epoch, then what
    ``awe ap`` prints."""


def real_speech_folder(preset: str) -> Path:
    """Where :func:`awe_on_real_speech` writes: ``<data>/real_speech/04_awe/<preset>``."""
    return data_dir() / "real_speech" / "04_awe" / preset


def awe_on_real_speech(
    preset: str, seed: int, out: str | Path | None = None, norm: str | None = None
) -> RealSpeechAWE:
    """``awe train`` on the training words (:func:`number_word_tables`; the development words
    choose the epoch), ``awe embed`` of the unseen test words and ``awe ap`` beside MFCC + DTW on
    the same pairs, as a user would run them::

        audiorepro awe train --segments train.tsv --dev dev.tsv --lexicon characters \
            --models 1 --out RUN
        audiorepro awe embed RUN --segments test.tsv --out test.npz
        audiorepro awe ap test.npz

    Everything is written under ``out`` (default ``<data>/real_speech/04_awe/<preset>``),
    replacing the files of an earlier call. ``norm``: ``awe train --norm`` (``None``: its
    default)."""
    out = Path(out) if out is not None else real_speech_folder(preset)
    tables = number_word_tables(out / f"tables-seed{seed}")  # one a seed: side by side
    run = train_on_segments(
        tables["train"], out / f"awe-seed{seed}", lexicon=LEXICON, dev=tables["dev"],
        preset=preset, overrides={"seed": seed}, norm=norm,
    )  # fmt: skip
    arrays = embed_table(run.path, tables["test"])
    embedded = out / f"test-seed{seed}.npz"

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.savez(handle, **arrays)

    atomic_write(embedded, write)
    ap = embeddings_ap(embedded)
    rows, why = embedded_rows(embedded)
    if rows is None:  # the table was written above and is read back unchanged
        raise RuntimeError(why)
    labels = [r.word for r in rows]
    baseline = rows_dtw_ap(rows, labels, norm=embedded_norm(embedded))
    versus = embeddings_vs_dtw(embeddings_of(embedded), labels, ap, baseline)
    del baseline["distances"]  # the lines hold what they say; the record stays small
    lines = [
        run.augmentation,
        run.development,
        run.normalisation,
        run.budget,
        f"kept the weights of epoch {run.kept_epoch} (select: {run.selected}); "
        f"best dev cross-view AP {run.best_dev:.4f}",
        *ap_table(ap, baseline, versus),
    ]
    return RealSpeechAWE(seed, ap, baseline, lines)


def _one_seed(preset: str, seed: int) -> RealSpeechAWE:
    return awe_on_real_speech(preset, seed)


def awe_on_real_speech_seeds(
    preset: str, seeds: Sequence[int], workers: int | None = None
) -> dict[int, RealSpeechAWE]:
    """:func:`awe_on_real_speech` of every seed, ``{seed: run}``, up to ``workers`` at once
    (None: one per usable core); each run's threads are its configuration's, so the numbers
    are those of one run after another."""
    workers = usable_cores() if workers is None else workers
    runs = map_processes(_one_seed, list(seeds), shared=preset, workers=workers)
    return dict(zip(seeds, runs, strict=True))
