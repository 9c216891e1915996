"""What the ``audiorepro awe`` commands run on a user's recordings: a segments table's words
and pronunciations as the chapter's segments, a model trained on them into a run folder through
the chapter's own training step, their embeddings, and the AP of embeddings or of MFCC + DTW."""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.config import from_dict, refuse_unused, to_dict
from audiorepro.data.awe import WordSegments
from audiorepro.data.embedded.lexicon import SWITCHBOARD_SYMBOLS
from audiorepro.data.recordings import (
    InputWarning,
    RecordingsError,
    Segment,
    cmudict_lexicon,
    one_word_speakers,
    read_lexicon,
    read_segments,
)
from audiorepro.data.speech_segments import few_seconds_note
from audiorepro.experiments.awe.config import MIN_FRAMES, Config, load_config
from audiorepro.experiments.awe.data import model_config
from audiorepro.experiments.awe.development import (
    beside_dtw,
    development_split,
    refuse_shared_rows,
)
from audiorepro.experiments.awe.embeddings_file import (  # noqa: F401 - awe ap's reading
    EMBEDDED,
    audio_identity,
    embedded_norm,
    embedded_rows,
    embeddings_ap,
    embeddings_of,
    samples_of,
    trained_rows,
)
from audiorepro.experiments.awe.evaluate import dtw_pair_distances, pairs_ap
from audiorepro.experiments.awe.frames import (
    audio_seconds,
    feature_norm_of,
    first_short,
    long_enough,
    segment_features,
    speed_copies,
    with_speed_copies,
)
from audiorepro.experiments.awe.train import (
    EPOCHS_FROM,
    AWERun,
    epoch_budget,
    fit,
    kept_epoch,
    learning_rate_path,
    numbered_from_one,
    rates_in_words,
    refit,
    set_threads,
    table_staging,
    within,
)
from audiorepro.experiments.awe.views import embed_with_copies
from audiorepro.metrics.average_precision import same_different_chance
from audiorepro.metrics.checks import ScoreError, check_speakers, naming
from audiorepro.models.awe import AWEModelConfig, MultiViewAWE
from audiorepro.storage import (
    known_file_sha256,
    load_model_weights,
    output_folder,
    read_run_info,
    save_model_weights,
    write_json,
)
from audiorepro.training.members import earlier_member, listed_members
from audiorepro.training.selection import WEIGHT_FILES

RUN_FILE = "run.json"
"""The file of an ``awe train`` run folder that describes the run (:func:`load_run` reads it)."""


def lexicon_ids(
    rows: Sequence[Segment], lexicon: str = "cmudict"
) -> tuple[dict[str, tuple[str, ...]], dict[str, int]]:
    """Pronunciations of the words of ``rows`` and the phone ids: ``({word: phones},
    {phone: id >= 1})``.

    ``lexicon``: ``"cmudict"`` (the bundled CMU dictionary, stress removed, a number in digits
    said as its English words: :func:`~audiorepro.data.recordings.spoken_number`; ids of the
    chapter's 45-symbol Switchboard-like set), ``"characters"`` (the written view is the word's spelling,
    lower-cased, one symbol per character, as in the first multi-view embeddings, which the
    paper cites: any word of any language, no dictionary) or the path of a
    ``WORD PH1 PH2 ...`` file (ids of its phones, sorted; a file named ``characters`` is given
    as ``./characters``). Words are matched case-insensitively; a word the lexicon lacks is an
    error naming the first table line that has it.
    """
    words = sorted({r.word.lower() for r in rows})
    if lexicon == "cmudict":
        found = cmudict_lexicon(words)
        phone_ids = {p: i + 1 for i, p in enumerate(SWITCHBOARD_SYMBOLS)}
    elif lexicon == "characters":
        found = {w: tuple(w) for w in words}
        phone_ids = {c: i + 1 for i, c in enumerate(sorted({c for w in words for c in w}))}
    else:
        entries = read_lexicon(lexicon)
        found = {w: entries[w] for w in words if w in entries}
        phone_ids = {p: i + 1 for i, p in enumerate(sorted({p for w in found for p in found[w]}))}
    for r in rows:
        if r.word.lower() not in found:
            raise RecordingsError(
                r.source,
                r.line,
                f"word: {r.word!r} is not in the lexicon {lexicon!r} (add it to a lexicon file, "
                "or spell every word: --lexicon characters)",
            )
    return found, phone_ids


SPEEDS = (0.8, 0.9, 1.1, 1.2)
"""The speed perturbation :func:`train_on_segments` trains with by default: a copy of every
training row at each of these speeds beside the row itself. On the book's real Italian number
words (79 training words of two speakers, ``book/04_awe/04_real_speech``, preset
``embedded``, seeds 0-2) it raised the development cross-view AP, which picks the epoch, from
0.112 to 0.161, and the AP of the 40 unseen test words from 0.026 to 0.079 (MFCC + DTW: 0.089)."""

SPEED_RANGE = (0.5, 2.0)
"""The speeds :func:`train_on_segments` (``awe train --speeds``) accepts, both ends included: a
copy at half or twice the speed is still a word a speaker could say; far outside, a copy is a
few frames long (speed 1e9: no samples at all) or thousands (speed 0.001: a 0.5 s word becomes
8 minutes), which is no augmentation of the words."""


WARPS = (0.9, 1.1)
"""The vocal tract length perturbation :func:`train_on_segments` trains with by default: a copy
of every training row with its spectrum's frequency axis warped by each of these factors
(:func:`~audiorepro.features.speech.vtlp_frequencies`), beside the speed copies. On five
synthetic training speakers (``awe train --set seed=S`` with and without ``--warps 1``, seeds
0-2, one machine) it raised the AP within each of eight unseen speakers from 0.926 ± 0.016 to
0.945 ± 0.024 and pooled over them from 0.697 ± 0.040 to 0.742 ± 0.048, higher on every seed
but by about one seed spread; two more speed copies instead give most of that
(``book/reference/recordings.md``, "Vocal tract length", with the commands)."""

WARP_RANGE = (0.8, 1.25)
"""The warps ``awe train --warps`` accepts, both ends included: formants moved by up to about a
fifth either way, around the 0.9-1.1 that Jaitly and Hinton drew their warps from; far outside,
a copy is no longer a voice the table could hold."""


def check_speeds(
    speeds: Sequence[float], option: str = "--speeds", bounds: tuple[float, float] = SPEED_RANGE
) -> list[float]:
    """The sorted speeds of ``speeds`` other than 1 (the rows themselves), each a number within
    :data:`SPEED_RANGE`; else a ``ValueError`` naming ``--speeds``, the speed and the range.
    ``option="--warps"``, ``bounds=WARP_RANGE``: the same of vocal-tract warps."""
    low, high = bounds
    what = "speeds of the speed-perturbed" if option == "--speeds" else "warps of the VTLP"
    for value in speeds:
        try:
            speed, shown = float(value), f"{float(value):g}"
        except (TypeError, ValueError):
            speed, shown = float("nan"), repr(value)
        if not low <= speed <= high:
            raise ValueError(
                f"{option}: {shown} is outside {low:g} to {high:g} (the {what} copies; 1: none)"
            )
    return sorted({float(v) for v in speeds} - {1.0})


def segments_data(
    rows: Sequence[Segment],
    pronunciations: Mapping[str, Sequence[str]],
    phone_ids: Mapping[str, int],
    *,
    split: str,
    feature_dim: int = 39,
    min_frames: int = MIN_FRAMES,
    norm: str = "file",
) -> WordSegments:
    """The rows of a segments table as the chapter's :class:`~audiorepro.data.awe.WordSegments`
    (features by :func:`segment_features`; rows shorter than ``min_frames`` are dropped and
    counted: :func:`long_enough`, as ``awe embed`` and ``awe dtw`` drop them)."""
    feats = segment_features(rows, feature_dim, norm=norm)
    keep, _ = long_enough(rows, feats, min_frames)
    if not keep:
        raise ValueError(f"{split}: every segment is shorter than {min_frames} frames")
    words = [rows[i].word for i in keep]
    word_phones = {
        w: np.asarray([phone_ids[p] for p in pronunciations[w.lower()]], dtype=np.int64)
        for w in sorted(set(words))
    }
    return WordSegments(
        split=split,
        keys=[f"{rows[i].where}" for i in keep],
        words=words,
        speakers=[rows[i].speaker for i in keep],
        feats=[feats[i] for i in keep],
        phones=[word_phones[w] for w in words],
        word_phones=word_phones,
        num_phones=max(phone_ids.values()),
        dropped={"short": len(rows) - len(keep), "out_of_vocabulary": 0},
        first_short=first_short(rows, feats, min_frames),
    )


SEGMENTS_FIELDS = (
    "model", "train", "seed", "select", "margin", "loss_k", "distance", "min_frames",
    "eval_batch_size", "table_steps", "table_models",
)  # fmt: skip
"""The configuration fields that shape a :func:`train_on_segments` run; ``--set`` of any other
(the chapter's sweeps, seed lists and baseline size, the corpus) is refused, never ignored."""


def train_on_segments(
    segments: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    lexicon: str = "cmudict",
    dev: str | os.PathLike[str] | None = None,
    dev_fraction: float = 0.1,
    preset: str = "embedded",
    overrides: Mapping[str, Any] | None = None,
    progress: str = "none",
    speeds: Sequence[float] = SPEEDS,
    norm: str | None = None,
    again: bool = True,
    warps: Sequence[float] = WARPS,
) -> AWERun:
    """Train the chapter's multi-view model on the words of a segments table, into ``out``.

    The development rows (the plateau schedule's cross-view AP) are the table ``dev`` (none of
    its rows a row of ``segments``: :func:`refuse_shared_rows`), or else about
    ``dev_fraction`` of the rows held out of training: whole speakers when the table has three
    or more (:func:`development_split`). ``preset`` and ``overrides`` as
    :func:`~audiorepro.experiments.awe.config.load_config`; an override of a field outside
    :data:`SEGMENTS_FIELDS` is a ``ConfigError``. Writes ``out/model.safetensors`` (the best
    dev epoch's weights), ``out/final.safetensors`` (the last epoch's) and ``out/run.json``;
    ``select`` picks the weights :func:`load_run` (``awe embed``) uses. The training rows are
    augmented with a copy at each of ``speeds`` (:func:`with_speed_copies`; ``()`` or
    ``(1,)``: none; each within :data:`SPEED_RANGE`, else a ``ValueError``) and at each
    vocal-tract warp of ``warps`` (idem, :data:`WARP_RANGE`), the development rows never. ``norm``: the features' normalisation (:data:`FEATURE_NORMS`; ``None``: chosen
    by :func:`feature_norm_of` from the training rows), recorded in ``run.json`` for ``awe
    embed``. The history returned and written numbers epochs from 1, as the kept epoch
    (:func:`~audiorepro.experiments.awe.train.numbered_from_one`).

    ``again`` (``awe train``'s default; ``--no-refit``: not): when the development rows were
    held out of ``segments`` (no ``dev``), the kept weights are trained again on all its rows,
    development rows included, from the same initial weights and for the epochs and learning
    rates that made them (:func:`~audiorepro.experiments.awe.train.learning_rate_path`,
    :func:`~audiorepro.experiments.awe.train.refit`): the epoch is chosen on speakers the
    model does not know, and the model then learns from every speaker given. The weights file
    ``select`` names holds them; the other keeps the development run's (``run.json``:
    ``refit``). On five synthetic speakers, four of them trained on instead of five lost
    0.059 AP on eight unseen ones (``book/reference/recordings.md``).
    """
    config = load_config(preset, overrides)  # unknown keys first: "did you mean ..."
    refuse_unused(overrides, SEGMENTS_FIELDS, "awe train", "--segments")
    speeds = check_speeds(speeds)  # before the tables' audio is read
    warps = check_speeds(warps, "--warps", WARP_RANGE)
    rows = read_segments(segments)
    suspicious = one_word_speakers((r.word, r.speaker) for r in rows)
    if suspicious:
        warnings.warn(f"{segments}: {suspicious}", InputWarning, stacklevel=2)
    if dev is not None:
        train_rows, dev_rows = rows, read_segments(dev)
        dev_note = f"development rows: the {len(dev_rows)} rows of {dev}"
    else:
        train_rows, dev_rows, dev_note = development_split(rows, dev_fraction, config.seed)
    if len({r.word for r in dev_rows}) == len(dev_rows):
        raise RecordingsError(
            dev if dev is not None else segments,
            None,
            "the development rows need a word spoken at least twice (same-different AP)",
        )
    if len({r.word for r in dev_rows}) == 1:
        raise RecordingsError(
            dev if dev is not None else segments,
            None,
            f"the {len(dev_rows)} development rows are all of one word ({dev_rows[0].word!r}): "
            "their AP is 1 whatever the model, so they cannot pick an epoch; give rows of at "
            "least two words",
        )
    if dev is not None:
        refuse_shared_rows(train_rows, dev_rows)
    pronunciations, phone_ids = lexicon_ids(train_rows + dev_rows, lexicon)
    norm, normalisation = feature_norm_of(train_rows, norm)
    data = {
        split: segments_data(
            split_rows,
            pronunciations,
            phone_ids,
            split=split,
            feature_dim=config.model.feature_dim,
            min_frames=config.min_frames,
            norm=norm,
        )
        for split, split_rows in (("train", train_rows), ("dev", dev_rows))
    }
    left_out = {split: int(d.dropped["short"]) for split, d in data.items()}
    first = next((d.first_short for d in data.values() if d.first_short), "")
    rows_kept = len(data["train"].words)
    if speeds or warps:
        data["train"] = with_speed_copies(
            data["train"], train_rows, speeds, config.model.feature_dim, norm, warps
        )
        copies = len(data["train"].words) - rows_kept
        short = rows_kept * (len(speeds) + len(warps)) - copies
        at = [
            *([f"speeds {', '.join(f'{v:g}' for v in speeds)}"] if speeds else []),
            *([f"vocal-tract warps {', '.join(f'{v:g}' for v in warps)}"] if warps else []),
        ]
        augmentation = (
            f"training rows: {rows_kept} and {copies} copies at {' and '.join(at)} (speed and "
            "vocal tract length perturbation; --speeds 1, --warps 1: none)"
            + (f"; {short} copies dropped as shorter than the shortest row" if short else "")
        )
    else:
        augmentation = f"training rows: {rows_kept}, no speed or vocal tract length perturbation"
    config, budget = epoch_budget(config, overrides, len(data["train"].words))
    set_threads(config)
    with table_staging(config, data) as staging:  # Ctrl-C, then the same command goes on
        model, result, schedule, final = fit(
            config, data, progress, within(staging, "development")
        )
        best_dev = float(schedule.best) if schedule.best is not None else float("nan")
        resolved = model_config(config, data)
        out = Path(out)
        final_model = MultiViewAWE(resolved)
        final_model.load_state_dict(final)
        kept = kept_epoch(result, schedule.history, config.select)
        again, kept_model = (
            again and dev is None,
            final_model if config.select == "final" else model,
        )
        again_note, again_record = "", None
        if again:
            path = learning_rate_path(result, schedule.history, kept, config.train.lr_factor)
            everything = train_rows + dev_rows
            data_all = segments_data(
                everything,
                pronunciations,
                phone_ids,
                split="train",
                feature_dim=config.model.feature_dim,
                min_frames=config.min_frames,
                norm=norm,
            )
            if speeds or warps:
                data_all = with_speed_copies(
                    data_all, everything, speeds, config.model.feature_dim, norm, warps
                )
            refitted = refit(
                config,
                {"train": data_all, "dev": data["dev"]},
                path,
                progress,
                within(staging, "refit"),
            )
            weights = WEIGHT_FILES[config.select]
            again_note = (
                f"refit: the kept weights trained again with the {len(dev_rows)} development rows "
                f"({len(data_all.words)} rows with their copies), from the same initial weights, "
                f"for the {rates_in_words(path)} that made them; --no-refit: the development run's"
            )
            again_record = {"epochs": len(path), "rates": path, "rows": len(data_all.words)}
            again_record["weights"] = weights
        # after the refit: numba's DTW threads before it would change the refit's float rounding
        by_where = {r.where: r for r in dev_rows}
        dev_copies = speed_copies(  # awe embed averages over them: so does this line
            [by_where[k] for k in data["dev"].keys], speeds, config.model.feature_dim, norm,
            config.min_frames,
        )  # fmt: skip
        versus, versus_record = beside_dtw(
            kept_model, data["dev"], config.seed, config.eval_batch_size, again, dev_copies
        )
        result = numbered_from_one(result)
        if again_record is not None:  # the refit model takes the place of the selected weights
            if config.select == "final":
                final_model = refitted
            else:
                model = refitted
        with output_folder(out, stale=earlier_member(RUN_FILE)) as folder:  # whole or not at all
            save_model_weights(model, folder / WEIGHT_FILES["best"])
            save_model_weights(final_model, folder / WEIGHT_FILES["final"])
            write_json(
                folder / RUN_FILE,
                {
                    "kind": "awe",
                    "preset": preset,
                    "config": to_dict(config),
                    "model": to_dict(resolved),
                    "lexicon": str(lexicon),
                    "phones_to_ids": phone_ids,
                    "pronunciations": {w: list(p) for w, p in pronunciations.items()},
                    "best_dev": best_dev,
                    "kept_epoch": kept,
                    "left_out_short": left_out,
                    "first_short": first,
                    "development": dev_note,
                    "speeds": speeds,
                    "warps": warps,
                    "augmentation": augmentation,
                    "feature_norm": norm,
                    "normalisation": normalisation,
                    "budget": budget,
                    "refit": again_record,
                    "development_vs_dtw": versus_record,
                    "development_vs_dtw_note": versus,
                    "refit_note": again_note,
                    "history": result.to_dict(),
                    EPOCHS_FROM: 1,
                    "schedule": [list(h) for h in schedule.history],
                },
            )
    if config.select == "final":
        model = final_model
    return AWERun(
        model=model.eval(),
        history=result,
        schedule_events=list(schedule.history),
        best_dev=best_dev,
        seed=config.seed,
        model_config=resolved,
        path=out,
        selected=config.select,
        kept_epoch=kept,
        left_out=left_out,
        first_short=first,
        development=dev_note,
        augmentation=augmentation,
        normalisation=normalisation,
        refit=again_note,
        budget=budget,
        beside_dtw=versus,
    )


def load_run(run: str | os.PathLike[str]) -> tuple[MultiViewAWE, Config]:
    """The model (eval mode, CPU) and configuration that :func:`train_on_segments` wrote."""
    run = Path(run)
    info_path = run / RUN_FILE
    info = read_run_info(run, RUN_FILE, "awe", "an AWE run", "awe train")
    config = from_dict(Config, info["config"], source=str(info_path))
    model = MultiViewAWE(from_dict(AWEModelConfig, info["model"], source=str(info_path)))
    load_model_weights(model, run / WEIGHT_FILES[config.select])
    return model.eval(), config


def run_members(run: str | os.PathLike[str]) -> list[Path]:
    """The folders of every model of an ``awe train`` run, the run first (itself alone for a
    run of one model; :mod:`~audiorepro.experiments.awe.ensemble`)."""
    info = read_run_info(Path(run), RUN_FILE, "awe", "an AWE run", "awe train")
    return listed_members(Path(run), info, RUN_FILE, "awe train")


def run_speeds(run: str | os.PathLike[str]) -> list[float]:
    """The speeds an ``awe train`` run made its training copies at (``[]`` for a run from
    before they were recorded), which ``awe embed`` averages each row over
    (:func:`embed_table`). On chapter 04's corpus at FSDD's size (three default runs, eight
    unseen speakers; Reference, "Each row averaged over its speed copies") the average raised
    the AP within each speaker from 0.945 ± 0.024 to 0.965 ± 0.011 and pooled from 0.742 ±
    0.048 to 0.802 ± 0.039, higher on every seed."""
    info = read_run_info(Path(run), RUN_FILE, "awe", "an AWE run", "awe train")
    return [float(s) for s in info.get("speeds", [])]


def run_feature_norm(run: str | os.PathLike[str]) -> str:
    """The features' normalisation an ``awe train`` run trained with (``file`` for a run from
    before it was recorded)."""
    info = read_run_info(Path(run), RUN_FILE, "awe", "an AWE run", "awe train")
    return str(info.get("feature_norm", "file"))


def embed_table(
    run: str | os.PathLike[str],
    segments: str | os.PathLike[str],
    speeds: Sequence[float] | None = None,
) -> dict[str, np.ndarray]:
    """Acoustic embeddings of the rows of a segments table (no lexicon needed):
    ``{"embeddings": (N, D) float32, "labels": (N,) words, "speakers": (N,)}``, and what was
    embedded (:data:`EMBEDDED`): the table's resolved path and SHA-256 and each row's line in
    it, so that ``awe ap`` scores the MFCC + DTW baseline on the same tokens. Rows shorter than
    the run's ``min_frames`` are left out, as ``awe train`` leaves them out: ``left_out`` says
    how many and names the first (:func:`long_enough`; ``""``: none); none left, a
    ``ValueError``.

    Each row's embedding is the mean of the unit-length embeddings of the row and of its copy
    at each of ``speeds`` (:func:`~audiorepro.experiments.awe.views.embed_with_copies`; a copy
    shorter than ``min_frames`` left out of its row's mean), ``None``: the speeds the run
    trained its copies at (:func:`run_speeds`), ``()``: the row alone; the ``.npz`` records them
    (``speeds``, one text: ``"0.8,0.9,1.1,1.2"``, ``""``: none). The model learned to give a word one embedding at every speed; averaging
    over them takes out what it did not learn (measured: :func:`run_speeds`). A run of several
    models (:mod:`~audiorepro.experiments.awe.ensemble`) gives each row their unit-length
    embeddings side by side, divided by the square root of their number: its cosine with
    another row is the mean of the models' cosines."""
    model, config = load_run(run)
    norm = run_feature_norm(run)
    rows = read_segments(segments)
    if norm == "speaker":
        files = {(r.speaker, r.path.resolve()) for r in rows}
        seconds = Counter()
        for speaker, path in files:
            seconds[speaker] += audio_seconds(path)
        if note := few_seconds_note(seconds, f"in the files of {segments}"):
            warnings.warn(note, InputWarning, stacklevel=2)
    speeds = run_speeds(run) if speeds is None else check_speeds(speeds)
    feats = segment_features(rows, config.model.feature_dim, norm=norm)
    kept, left_out = long_enough(rows, feats, config.min_frames)
    if not kept:
        raise ValueError(f"{segments}: {left_out}: no row to embed")
    every = speed_copies(rows, speeds, config.model.feature_dim, norm, config.min_frames)
    copies = [[copy[i] for i in kept] for copy in every]
    rows, feats = [rows[i] for i in kept], [feats[i] for i in kept]
    view = WordSegments(
        split="embed",
        keys=[r.where for r in rows],
        words=[r.word for r in rows],
        speakers=[r.speaker for r in rows],
        feats=feats,
        phones=[],
        word_phones={},
        num_phones=0,
        dropped={},
    )
    tables, heard, tokens = trained_rows(run)
    trained = np.asarray(
        [
            (r.path.resolve(), r.start, r.end) in heard
            or (known_file_sha256(r.path), r.start, r.end) in heard
            or ("samples", samples_of(r.path), r.start, r.end) in heard
            or tokens.find(r) is not None  # the same token, other boundaries
            for r in rows
        ]
    )
    seen = int(trained.sum())
    if seen:
        warnings.warn(
            f"{segments}: {seen} of the {len(rows)} rows are rows of {' and '.join(tables)}, "
            "or of copies of their files, which the run trained on (or chose its epoch on): "
            "their AP tells how well it "
            "fits tokens it has heard, not how it embeds new recordings; embed rows it did "
            "not train on",
            InputWarning,
            stacklevel=2,
        )
    set_threads(config)
    folders = run_members(run)  # several models: their unit embeddings side by side
    parts = [embed_with_copies(model, view, copies, config.eval_batch_size)]
    for folder in folders[1:]:
        member, _ = load_run(folder)
        parts.append(embed_with_copies(member, view, copies, config.eval_batch_size))
    if len(parts) > 1:
        unit = [p / np.linalg.norm(p, axis=1, keepdims=True) for p in parts]
        emb = (np.concatenate(unit, axis=1) / np.sqrt(len(parts))).astype(np.float32)
    else:
        emb = parts[0]
    return {
        "trained_rows": np.asarray(seen, dtype=np.int64),
        "trained": trained.astype(bool).reshape(len(rows)),
        "embeddings": emb,
        "labels": np.asarray([r.word for r in rows]),
        "speakers": np.asarray([r.speaker for r in rows]),
        "segments": np.asarray(str(Path(segments).resolve())),
        "segments_sha256": np.asarray(known_file_sha256(segments)),
        "rows": np.asarray([r.line for r in rows], dtype=np.int64),
        "feature_norm": np.asarray(norm),
        "speeds": np.asarray(",".join(f"{v:g}" for v in speeds)),  # one value: not a row
        "left_out": np.asarray(left_out),
        **audio_identity(rows),
    }


def rows_dtw_ap(
    rows: Sequence[Segment], labels: Sequence[str], feature_dim: int = 39, norm: str = "file"
) -> dict[str, Any]:
    """The MFCC + DTW baseline on exactly ``rows`` in their order, a pair positive when its
    ``labels`` agree: DTW (:func:`~audiorepro.experiments.awe.evaluate.dtw_pair_distances`)
    of the features ``awe embed`` and ``awe dtw`` read (:func:`segment_features`). Returns
    ``{"ap", "num_pairs", "chance", "distances", "norm"}`` (chance: the share of same-word pairs, the AP
    of a random ranking; distances: of every pair ``i < j``, for
    :func:`~audiorepro.experiments.awe.evaluate.ap_table`'s paired comparison)."""
    dist = dtw_pair_distances(segment_features(rows, feature_dim, norm=norm))
    return {
        "ap": pairs_ap(dist, list(labels)),
        "num_pairs": int(dist.size),
        "chance": same_different_chance(list(labels)),
        "distances": dist,
        "norm": norm,
    }


def dtw_table_ap(
    segments: str | os.PathLike[str],
    tokens: int | None = None,
    seed: int = 0,
    feature_dim: int = 39,
    norm: str | None = None,
) -> dict[str, Any]:
    """The MFCC + DTW baseline of
    :func:`~audiorepro.experiments.awe.evaluate.dtw_baseline` on the rows of a segments table (no
    lexicon, no model): the features ``awe train`` and ``awe embed`` read
    (:func:`segment_features`), all pairs of every row, or of a seeded subset of ``tokens``
    rows. ``awe ap`` of the embeddings of the same table is the number to set beside it.
    ``norm``: the features' normalisation (``None``: as ``awe train`` would choose it for the
    table, :func:`feature_norm_of`). Rows shorter than :data:`MIN_FRAMES` are left out first,
    as ``awe train`` and ``awe embed`` leave them out (:func:`long_enough`). Returns ``{"ap",
    "tokens", "num_pairs", "positives", "normalisation", "left_out"}`` (``left_out``: how many
    rows were left out and the first, or ``""``)."""
    table = read_segments(segments)
    kept, left_out = long_enough(table, segment_features(table, feature_dim), MIN_FRAMES)
    rows = [table[i] for i in kept]
    n = len(rows) if tokens is None else min(tokens, len(rows))
    if n < 2:
        raise ValueError(
            f"{segments}: the baseline needs at least 2 segments, got {n}"
            + (f" ({left_out})" if left_out else "")
        )
    chosen = list(rows)
    if n < len(rows):
        picked = np.random.default_rng(seed).choice(len(rows), size=n, replace=False)
        chosen = [rows[k] for k in np.sort(picked)]
    labels = [r.word for r in chosen]
    positives = sum(c * (c - 1) // 2 for c in Counter(labels).values())
    if positives == 0:
        subset = ""
        if n < len(rows):
            whole = sum(c * (c - 1) // 2 for c in Counter(r.word for r in rows).values())
            subset = (
                f" drawn by --tokens {n} (the table's {len(rows)} rows hold {whole} same-word "
                "pairs: give a larger --tokens, or none)"
            )
        raise ValueError(
            f"{segments}: no word occurs twice among the {n} segments{subset}, so there is no "
            "same-word pair to rank"
        )
    if len(set(labels)) == 1:
        raise ScoreError(
            f"{segments}: all {n} segments are of one word ({labels[0]!r}), so every one of the "
            f"{positives} pairs is a same-word pair and AP is 1 whatever the features: give "
            "segments of at least two words"
        )
    with naming(segments):  # the warnings of a weak score name the table
        check_speakers([r.speaker for r in chosen], "speaker")
        norm, normalisation = feature_norm_of(table, norm)  # as awe train: every row's files
        base = rows_dtw_ap(chosen, labels, feature_dim, norm)
    return {
        "ap": base["ap"],
        "tokens": n,
        "num_pairs": base["num_pairs"],
        "positives": positives,
        "normalisation": normalisation,
        "left_out": left_out,
    }
