"""What the ``audiorepro units`` and ``audiorepro abx items`` commands run on a folder of anyone's
recordings: train units and their k-means baseline, encode, train a voice, resynthesise, measure
the bitrate, and write ABX items from a segments table."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.config import from_dict, merge, refuse_unused, replace, to_dict
from audiorepro.data.name_fields import default_speaker_rule
from audiorepro.data.recipes.zerospeech import AbxItem, write_item_file
from audiorepro.data.recordings import (
    InputWarning,
    RecordingsError,
    Segment,
    file_id,
    find_wavs,
    ids_under,
    read_segments,
    scan_folder,
    speaker_rule,
    speakers_of,
)
from audiorepro.data.speech_segments import (
    HOP_S,
    SPEAKER_NORM_SECONDS,
    feature_of,
    few_seconds_note,
    load_wav_features,
    normalize_features,
    short_speakers,
)
from audiorepro.experiments.zerospeech.config import Config, load_config, store
from audiorepro.experiments.zerospeech.data import (
    MIN_TRAIN_FRAMES,
    model_inputs,
    refuse_short_files,
    training_files,
)
from audiorepro.experiments.zerospeech.evaluate import (
    code_rate_kmeans,
    encode_files,
    fit_code_rate_kmeans,
)
from audiorepro.experiments.zerospeech.pairs import Pairing, find_pairs, pairs_default
from audiorepro.experiments.zerospeech.submission import int_lines, vector_lines
from audiorepro.experiments.zerospeech.train import fit_vqvae, resumable
from audiorepro.features import audio_info
from audiorepro.models.kmeans import KMeans
from audiorepro.models.vqvae import VQVAE
from audiorepro.repro import single_thread
from audiorepro.storage import (
    atomic_write,
    load_model_weights,
    output_folder,
    read_run_info,
    save_model_weights,
    write_json,
)
from audiorepro.training.members import earlier_member, listed_members

RUN_FILE = "run.json"


TIMES = ("auto", "relative", "seconds")


@dataclass
class UnitsRun:
    """A VQ-VAE trained on a folder of recordings (``audiorepro units train``) and its folder."""

    model: VQVAE
    config: Config
    speakers: list[str]
    feature: str
    history: dict[str, Any]
    path: Path
    kmeans: dict[str, Any] | None = None
    """What ``run.json`` records of the k-means baseline (``None``: a run from before it)."""
    preset: str = "embedded"
    """The preset the run was trained from (its other sections: the inverter's defaults)."""
    speaker_of: str = "prefix"
    """How the run told the speakers of its files (``--speaker-of``): the rule that
    :func:`encode_units` applies to a folder when the model normalises per speaker."""
    note: str = ""
    """The files trained on and every file of the folder left out, with why
    (:meth:`~audiorepro.data.recordings.FolderScan.note`): what ``units train`` prints."""
    normalisation: str = ""
    """Which feature normalisation the run chose and why (:func:`feature_norm_default`): what
    ``units train`` prints."""
    pairing: str = ""
    """Whether the run trained on pairs of files of different speakers, how many, and why
    (:func:`~audiorepro.experiments.zerospeech.pairs.pairs_default`): two lines ``units train``
    prints."""
    members: tuple[Path, ...] = ()
    """The folders of the run's other models (``units train --models N``,
    :mod:`~audiorepro.experiments.zerospeech.ensemble`): :func:`unit_rows` sets their units
    beside this model's."""
    ensemble: str = ""
    """The line ``units train`` prints of a run of several models (empty for one)."""

    @property
    def budget(self) -> str:
        """Which limit of the preset's training section ended the run, and what that means for
        the files given: what ``units train`` prints under its step count."""
        train = self.config.train
        steps = self.history["step"][-1] if self.history.get("step") else 0
        if train.max_steps is not None and steps >= train.max_steps:
            if train.num_epochs >= train.max_steps:
                return (
                    f"{steps} steps: train.max_steps, the step budget of `units "
                    "train` whatever the amount of audio (--set train.num_epochs=N stops after "
                    "N epochs if sooner)"
                )
            return (
                f"{steps} steps: train.max_steps = {train.max_steps} ended training before "
                f"train.num_epochs = {train.num_epochs} epochs over these files"
            )
        return (
            f"{steps} steps: train.num_epochs = {train.num_epochs} epochs over these files "
            f"(about {steps // max(train.num_epochs, 1)} batches of {train.batch_size} "
            f"segments each) ended training before train.max_steps = {train.max_steps}"
        )

    @property
    def frame_shift(self) -> float:
        """Seconds between two code frames (stride × 10 ms)."""
        return self.model.cfg.stride * HOP_S

    def kmeans_baseline(self) -> KMeans:
        """The k-means baseline :func:`train_units` fitted: an error saying why a run has none."""
        info = self.kmeans
        if info is None:
            raise FileNotFoundError(
                f"{self.path}: the run has no k-means baseline (trained before `units train` "
                "fitted one); train it again"
            )
        if "skipped" in info:
            raise ValueError(f"{self.path}: no k-means baseline: {info['skipped']}")
        path = self.path / info["file"]
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the run's k-means baseline is missing")
        with np.load(path, allow_pickle=False) as archive:
            return KMeans(archive["centroids"], info["inertia"], info.get("iterations", 0))


UNITS_FIELDS = ("model", "train", "seed")
"""The configuration fields that shape a :func:`train_units` run; ``--set`` of any other (the
chapter's sweeps and seed lists, the corpus) is refused, never ignored."""


@dataclass(frozen=True)
class UnitsData:
    """What ``units train`` reads of a folder before training (:func:`prepare_units`), the same
    for every model of a run of several (:mod:`~audiorepro.experiments.zerospeech.ensemble`)."""

    audio: str
    preset: str
    config: Config
    """The run's configuration (its normalisation and pairs chosen); ``seed``: the first
    model's."""
    files: list[np.ndarray]
    voices: list[str]
    pairs: tuple[tuple[int, int], ...]
    info: dict[str, Any]
    """What ``run.json`` records of the folder: speakers, feature, rule, notes."""


def prepare_units(
    audio: str | os.PathLike[str],
    *,
    speaker_of: str | None = None,
    preset: str = "embedded",
    overrides: Mapping[str, Any] | None = None,
    progress: str = "none",
) -> UnitsData:
    """:func:`train_units`' reading of ``audio`` (arguments as there): the files to train on,
    their speakers and features, the normalisation and pairs chosen for them."""
    config = load_config(preset, overrides)  # unknown keys first: "did you mean ..."
    refuse_unused(overrides, UNITS_FIELDS, "units train", "--audio")
    config = step_budget(config, overrides)
    scan = scan_folder(audio)
    wavs, left_out = training_files(scan.files)
    if not wavs:
        raise RecordingsError(audio, None, f"no file to train on: {scan.note(left_out, used=0)}")
    feature = feature_of(config.model.input_dim)
    feats = load_wav_features(wavs, feature, store())
    told = ""
    if speaker_of is None:  # prefix, or field:2 of names word_speaker_take
        speaker_of, told = default_speaker_rule(wavs, frames=feats)
    speakers = speakers_of(wavs, speaker_of, audio)
    rule = speaker_rule(speaker_of)
    names = [n for n in sorted(feats) if len(feats[n]) >= MIN_TRAIN_FRAMES]
    left_out += [
        (
            wavs[n],
            f"too short: {len(feats[n])} frame{'' if len(feats[n]) == 1 else 's'} of 10 ms, "
            f"training needs {MIN_TRAIN_FRAMES}",
        )
        for n in sorted(feats)
        if len(feats[n]) < MIN_TRAIN_FRAMES
    ]
    note = scan.note(sorted(left_out), used=len(names))
    if not names:
        raise RecordingsError(audio, None, f"no file to train on: {note}")
    speakers = {n: speakers[n] for n in names}
    config, normalisation = feature_norm_default(
        config, overrides, speakers, {n: len(feats[n]) for n in names}, speaker_of
    )
    normalisation = "\n".join(line for line in (told, normalisation) if line)
    paired, pairing = pairs_default(config, overrides, len(set(speakers.values())))
    files, voices = [feats[n] for n in names], [speakers[n] for n in names]
    found = Pairing((), 0, "train.pairs is none")
    if paired.train.pairs == "nearest":
        if progress != "none":  # the search is quadratic in the files: say it runs
            print(f"finding pairs among {len(files)} files by DTW ...", flush=True)
        found = find_pairs(normalize_features(files, config.model.feature_norm, voices), voices)
    lines = [pairing] if found.pairs or paired is config else []  # none found: one line
    config, pairing = (paired if found.pairs else config), "\n".join([*lines, found.line()])
    info = {
        "speakers": sorted(set(speakers.values())),
        "feature": feature,
        "audio": str(Path(audio).resolve()),
        "speaker_of": rule,
        "normalisation": normalisation,
        "pairing": pairing,
        "files": len(names),
        "note": note,
    }
    return UnitsData(str(audio), preset, config, files, voices, tuple(found.pairs), info)


def fit_units(
    data: UnitsData, out: str | os.PathLike[str], seed: int | None = None, progress: str = "none"
) -> UnitsRun:
    """Train one model of ``data`` (seed ``seed``, ``None``: the configuration's) and its
    k-means baseline into ``out``, written whole (:func:`train_units`)."""
    config = data.config if seed is None else replace(data.config, seed=seed)
    files, voices = data.files, data.voices
    with resumable(config, files, voices, data.pairs) as checkpoints:  # removed once written
        model, history = fit_vqvae(config.train, config.model, files, voices, config.seed,
                                   progress, checkpoints, pairs=data.pairs)  # fmt: skip
        with output_folder(out, stale=earlier_member(RUN_FILE)) as folder:  # whole or not at all
            save_model_weights(model, folder / "model.safetensors")
            baseline = _fit_units_baseline(folder, files, voices, config)
            info = {"kind": "units", "preset": data.preset, "config": to_dict(config)}
            info |= data.info | {"history": history, "kmeans": baseline}
            write_json(folder / RUN_FILE, info)
    return UnitsRun(
        model, config, data.info["speakers"], data.info["feature"], history, Path(out),
        baseline, data.preset, data.info["speaker_of"], data.info["note"],
        data.info["normalisation"], data.info["pairing"],
    )  # fmt: skip


def train_units(
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    speaker_of: str | None = None,
    preset: str = "embedded",
    overrides: Mapping[str, Any] | None = None,
    progress: str = "none",
) -> UnitsRun:
    """Train the chapter's VQ-VAE on every wav under ``audio`` (any sample rate) into ``out``.

    ``speaker_of``: ``prefix``, ``parent`` or a ``MAP.tsv`` (:func:`audiorepro.data.recordings.
    speakers_of`; ``None``: ``prefix``, or ``field:2`` of names ``word_speaker_take``,
    :mod:`~audiorepro.data.name_fields`); ``preset`` and ``overrides``
    (``{"train.max_steps": 200}``) as :func:`load_config`; an override of a field outside :data:`UNITS_FIELDS` is a
    ``ConfigError``. Writes ``out/model.safetensors``, ``out/run.json`` (configuration,
    speakers, feature, history, the k-means baseline) and ``out/kmeans.npz``.
    """
    data = prepare_units(
        audio, speaker_of=speaker_of, preset=preset, overrides=overrides, progress=progress
    )
    return fit_units(data, out, progress=progress)


def feature_norm_default(
    config: Config,
    overrides: Mapping[str, Any] | None,
    speakers: Mapping[str, str],
    frames: Mapping[str, int],
    speaker_of: str,
) -> tuple[Config, str]:
    """``(config, why)``: ``config`` with the feature normalisation ``units train`` uses, and
    one line saying which and why: per speaker when the files (``speakers``, ``frames`` of
    10 ms, per file) come from two or more speakers with :data:`SPEAKER_NORM_SECONDS` of audio
    each, unless the user set ``model.feature_norm``; else the preset's.

    Measured on real speech, word ABX across speakers, preset ``embedded``, seeds 0-2: on the
    Italian prompts the book ships (``book/03_zerospeech/05_real_speech``) the frames went from
    3.60 to 2.00 %, their k-means units from 7.77 ± 0.43 to 3.32 ± 0.42 %, the units from
    6.41 ± 0.50 to 7.64 ± 0.45 %; on six speakers' recorded digits (issue 39) every row
    improved (units 22.8 -> 15.2 %, k-means 17.0 -> 12.6 %, frames 16.8 -> 10.4 %). Without
    it, units are scored against baselines far weaker than the same frames normalised."""
    given = merge({}, {k: v for k, v in (overrides or {}).items() if v is not None})
    model = given.get("model")
    if isinstance(model, Mapping) and "feature_norm" in model:
        return config, (
            f"feature normalisation: {config.model.feature_norm} (--set model.feature_norm)"
        )
    seconds: dict[str, float] = {}
    for name, speaker in speakers.items():
        seconds[speaker] = seconds.get(speaker, 0.0) + frames[name] * HOP_S
    preset = config.model.feature_norm
    told = f"--speaker-of {speaker_of}"
    if len(seconds) < 2:
        return config, (
            f"feature normalisation: {preset}, the preset's: the files are one speaker's "
            f"({told}), so there are no speakers to normalise apart"
        )
    short = short_speakers(seconds)
    if short:
        return config, (
            f"feature normalisation: {preset}, the preset's: {len(short)} of {len(seconds)} "
            f"speakers ({told}) have less than {SPEAKER_NORM_SECONDS:g} s of audio to "
            f"normalise by (first: {short[0]}, {seconds[short[0]]:.2f} s)"
        )
    if preset == "speaker":
        return config, f"feature normalisation: speaker, the preset's ({len(seconds)} speakers)"
    return replace(config, **{"model.feature_norm": "speaker"}), (
        f"feature normalisation: speaker, for recordings of {len(seconds)} speakers ({told}, "
        f"at least {min(seconds.values()):.0f} s each): every MFCC dimension to zero mean and "
        f"unit variance per speaker, for the model and its baselines "
        f"(--set model.feature_norm={preset} for the preset's)"
    )


def step_budget(config: Config, overrides: Mapping[str, Any] | None) -> Config:
    """``config`` trained for its ``train.max_steps`` whatever the amount of audio: the
    preset's ``train.num_epochs`` is lifted to ``max_steps`` unless the user set it. On the
    book's Italian prompts (``book/03_zerospeech/05_real_speech``, ``embedded``, seeds 0-2,
    no normalisation) the preset's 8 epochs ended at 416 steps and the units scored
    13.05 ± 5.64 % ABX (k-means 7.77 ± 0.43 %); at 1,200 steps, 6.41 ± 0.50 %."""
    given = merge({}, {k: v for k, v in (overrides or {}).items() if v is not None})
    train = given.get("train")
    if config.train.max_steps is None or (isinstance(train, Mapping) and "num_epochs" in train):
        return config
    return replace(config, **{"train.num_epochs": config.train.max_steps})


KMEANS_FILE = "kmeans.npz"


UNIT_OUTPUTS = ("vectors", "codes", "frames", "kmeans")
"""What :func:`encode_units` writes: the units (codebook vectors or one-hot codes) or one of
their two baselines, the input frames themselves (10 ms) and the k-means units of the run."""


def _fit_units_baseline(
    out: Path, feats: Sequence[np.ndarray], speakers: Sequence[str], config: Config
) -> dict[str, Any]:
    """Fit the run's k-means baseline (:func:`kmeans_units`' recipe: the training frames,
    normalised as the model's input, averaged to the code rate, K = the codebook size, the
    run's seed) and write its centroids to ``out/kmeans.npz`` atomically. Returns what
    ``run.json`` records of it; too few code frames for K centroids is recorded, not raised."""
    cfg = config.model
    inputs = normalize_features(feats, cfg.feature_norm, speakers)
    code_frames = sum(-(-len(x) // cfg.stride) for x in inputs)
    info: dict[str, Any] = {"k": cfg.codebook_size, "code_frames": code_frames}
    if code_frames < cfg.codebook_size:
        return info | {
            "skipped": f"the audio gives {code_frames} code frames, fewer than K = "
            f"{cfg.codebook_size} centroids"
        }
    with single_thread():
        fitted = fit_code_rate_kmeans(inputs, cfg.codebook_size, cfg.stride, config.seed)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.savez(handle, centroids=fitted.centroids)

    atomic_write(out / KMEANS_FILE, write)
    return info | {
        "file": KMEANS_FILE,
        "seed": config.seed,
        "inertia": fitted.inertia,
        "iterations": fitted.iterations,
    }


def load_units(run: str | os.PathLike[str]) -> UnitsRun:
    """The :class:`UnitsRun` that :func:`train_units` wrote to the folder ``run``."""
    run = Path(run)
    info_path = run / RUN_FILE
    info = read_run_info(run, RUN_FILE, "units", "a units run", "units train")
    config = from_dict(Config, info["config"], source=str(info_path))
    model = VQVAE(config.model, n_speakers=len(info["speakers"]))
    load_model_weights(model, run / "model.safetensors")
    members = listed_members(run, info, RUN_FILE, "units train")[1:]
    return UnitsRun(
        model.eval(),
        config,
        list(info["speakers"]),
        info["feature"],
        info["history"],
        run,
        info.get("kmeans"),
        info.get("preset", "embedded"),
        info.get("speaker_of", "prefix"),
        note=info.get("note", f"{info.get('files', '?')} files"),
        pairing=info.get("pairing", "training pairs: none"),
        normalisation=info.get(
            "normalisation", f"feature normalisation: {config.model.feature_norm}"
        ),
        members=tuple(members),
        ensemble=info.get("ensemble_note", ""),
    )


def encode_units(
    run: UnitsRun | str | os.PathLike[str],
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
    what: str = "vectors",
    speaker_of: str | None = None,
) -> dict[str, np.ndarray]:
    """Write one ZeroSpeech 2019 ``<out>/<file id>.txt`` per audio file under ``audio``.

    ``what`` (:data:`UNIT_OUTPUTS`): the units, one line per code frame (``run.frame_shift``
    apart), as codebook vectors (``"vectors"``) or code one-hots (``"codes"``; never one
    integer per line, which the 2019 loader drops); or a baseline to score beside them: the
    input frames as the model reads them (``"frames"``: the run's MFCC or log-Mel, normalised
    per its ``feature_norm``, one line every 10 ms) or the k-means units that ``units train``
    fitted on the same frames averaged to the code rate (``"kmeans"``: the nearest centroid,
    one line per code frame). Whole-file items (relative times) score every kind as it is;
    items in seconds need each kind's frame shift (:func:`output_frame_shift`).

    File ids are those of :func:`audiorepro.data.recordings.find_wavs`: the file names, or,
    when names repeat across subfolders, the paths under ``audio`` (``spk1/001.txt``: the
    subfolders are mirrored under ``out``; write the items with ``abx_items(..., audio=)``).

    A model that normalises per speaker (``model.feature_norm: speaker``) pools each speaker's
    files of ``audio``, told apart by ``speaker_of`` (``prefix``, ``parent`` or a ``MAP.tsv``,
    as :func:`train_units`), by default the rule the run was trained with.

    Returns ``{file id: the rows written (T', D)}`` (:func:`unit_rows`). A file ``units train``
    leaves out is an error naming it: silent or with channels that cancel
    (:func:`~audiorepro.features.load_audio`), or too short (:func:`refuse_short_files`).
    """
    rows = unit_rows(run, audio, what, speaker_of, warn_few_seconds=True)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in sorted(rows):
        text = int_lines(rows[name]) if what == "codes" else vector_lines(rows[name])
        target = out / f"{name}.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return rows


def unit_rows(
    run: UnitsRun | str | os.PathLike[str],
    audio: str | os.PathLike[str],
    what: str = "vectors",
    speaker_of: str | None = None,
    warn_few_seconds: bool = False,
) -> dict[str, np.ndarray]:
    """``{file id: (T', D)}``: what :func:`encode_units` writes of each audio file under
    ``audio`` (arguments as there), in memory: the rows ``abx score`` scores beside a
    submission as its baselines, without writing a file. ``warn_few_seconds``: an
    :class:`~audiorepro.data.recordings.InputWarning` when a run that normalises per speaker
    has speakers of less than 10 s among these files (:func:`few_seconds_note`)."""
    if what not in UNIT_OUTPUTS:
        raise ValueError(f"what must be one of {', '.join(UNIT_OUTPUTS)}, got {what!r}")
    run = run if isinstance(run, UnitsRun) else load_units(run)
    if what == "kmeans":  # its error before the audio is read
        run.kmeans_baseline()
    wavs = find_wavs(audio)
    feats = load_wav_features(wavs, run.feature, store())  # silent files: AudioError
    refuse_short_files(wavs, feats)
    cfg = run.model.cfg
    speakers = None
    if cfg.feature_norm == "speaker":
        speakers = speakers_of(wavs, speaker_of or run.speaker_of, audio)
        seconds: dict[str, float] = {}
        for name, x in feats.items():
            seconds[speakers[name]] = seconds.get(speakers[name], 0.0) + len(x) * HOP_S
        if warn_few_seconds and (note := few_seconds_note(seconds, f"under {audio}")):
            warnings.warn(note, InputWarning, stacklevel=3)
    rows = _rows_of(run, feats, what, speakers)
    if what == "frames" or not run.members:
        return rows
    parts = [rows, *(_rows_of(load_units(m), feats, what, speakers) for m in run.members)]
    return {name: models_joined([part[name] for part in parts], what) for name in rows}


def _rows_of(
    run: UnitsRun, feats: Mapping[str, np.ndarray], what: str, speakers: Mapping[str, str] | None
) -> dict[str, np.ndarray]:
    """:func:`unit_rows` of one model of ``run`` (its members left aside)."""
    cfg = run.model.cfg
    rows: dict[str, np.ndarray] = {}
    if what in ("vectors", "codes"):
        codes, vectors = encode_files(run.model, feats, speakers=speakers)
        for name in codes:
            hot = np.eye(cfg.codebook_size, dtype=np.int64)[codes[name]]
            rows[name] = vectors[name] if what == "vectors" else hot
    else:  # the baselines read the frames as the model does
        baseline = run.kmeans_baseline() if what == "kmeans" else None
        inputs = model_inputs(feats, cfg.feature_norm, speakers)
        for name, x in inputs.items():
            rows[name] = x if baseline is None else code_rate_kmeans(baseline, x, cfg.stride)[1]
    return rows


def models_joined(parts: Sequence[np.ndarray], what: str) -> np.ndarray:
    """One file's rows of several models (each ``(T', D)``), side by side: one-hot codes as
    they are (a line of M ones: the joint code), vectors each at unit length and divided by
    √M, so that the cosine of two lines is the mean of the models' cosines. Measured on two
    real pairs of voices (Reference, "Several models side by side", three seeds): word ABX
    across speakers of the units 7.40 -> 5.07 % (Spanish), 15.09 -> 12.17 % (French) on
    average, of their k-means units 5.83 -> 4.71 % and 15.00 -> 14.39 %."""
    if len({len(p) for p in parts}) > 1:
        raise ValueError(f"the models give {sorted({len(p) for p in parts})} lines: not one run")
    if what == "codes":
        return np.concatenate(parts, axis=1)
    units = [p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12) for p in parts]
    return np.concatenate(units, axis=1) / np.sqrt(len(parts))


ENCODE = "units encode"
"""The command whose folders carry the record of their run and audio."""


def output_frame_shift(run: UnitsRun, what: str) -> float:
    """Seconds between two lines of ``encode_units(run, ..., what=what)``: 10 ms for the input
    frames, the code rate (``run.frame_shift``) for the units and their k-means baseline."""
    if what not in UNIT_OUTPUTS:
        raise ValueError(f"what must be one of {', '.join(UNIT_OUTPUTS)}, got {what!r}")
    return HOP_S if what == "frames" else run.frame_shift


def abx_items(
    segments: str | os.PathLike[str],
    out: str | os.PathLike[str],
    times: str = "auto",
    audio: str | os.PathLike[str] | None = None,
) -> tuple[Path, str]:
    """Write an ABX item file of whole-segment word items from a segments table.

    Each row of ``segments`` (:func:`audiorepro.data.recordings.read_segments`) is one item:
    ``#file`` the audio file's id, ``#phone`` the word, no context (``-`` ``-``), its speaker.
    The id is the one :func:`encode_units` gives the file when it encodes ``audio`` (the
    folder's :func:`~audiorepro.data.recordings.find_wavs` ids, which are paths under it when
    file names repeat across subfolders); without ``audio``, the file's name (whitespace as
    ``_``), and two files of one name in the table are an error.
    ``times``: ``relative`` (whole files only, ``0 1``: the 2019 frame rule, score without a
    frame shift), ``seconds`` (score with the features' frame shift) or ``auto`` (relative when
    every row is a whole file). Returns ``(path, times used)``.
    """
    if times not in TIMES:
        raise ValueError(f"times must be one of {TIMES}, got {times!r}")
    rows = read_segments(segments)
    ids = _item_file_ids(rows, audio)
    partial = [r for r in rows if r.start is not None]
    if times == "auto":
        times = "seconds" if partial else "relative"
    if times == "relative" and partial:
        raise RecordingsError(
            partial[0].source,
            partial[0].line,
            "start/end: relative times hold whole files only (the 2019 frame rule); write "
            "seconds (--times seconds) and score with --frame-shift",
        )
    items = []
    for r in rows:
        if times == "relative":
            onset, offset = 0.0, 1.0
        elif r.start is None:
            n, rate, _ = audio_info(r.path)
            onset, offset = 0.0, n / rate
        else:
            onset, offset = r.start, r.end
        items.append(AbxItem(ids[r.path], onset, offset, r.word, "-", "-", r.speaker))
    return write_item_file(out, items), times


def _item_file_ids(
    rows: Sequence[Segment], audio: str | os.PathLike[str] | None
) -> dict[Path, str]:
    """``{segment path: #file}`` for :func:`abx_items` (its docstring)."""
    if audio is not None:
        under = ids_under(audio)
        ids = {}
        for r in rows:
            name = under.get(r.path.resolve())
            if name is None:
                raise RecordingsError(
                    r.source,
                    r.line,
                    f"path: {r.path} is not an audio file under --audio {audio} (the folder "
                    "units encode read)",
                )
            ids[r.path] = name
        return ids
    ids, first = {}, {}
    for r in rows:
        name = file_id(r.path.stem)
        other = first.setdefault(name, r)
        if other.path.resolve() != r.path.resolve():
            raise RecordingsError(
                r.source,
                r.line,
                f"path: {r.path} and {other.path} (line {other.line}) have one file name "
                f"{name!r}: give --audio DIR, the folder units encode read, so that items "
                "name files by their path under it as the encoded files are named",
            )
        ids[r.path] = name
    return ids
