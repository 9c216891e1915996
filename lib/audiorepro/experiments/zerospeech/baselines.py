"""The baselines beside a units score (``audiorepro abx score``): the k-means units of the run
and the input frames the model reads, scored on the same item file with the same mode, distance
and frame rule as the submission, so that a reader sees at once whether the units learned
anything a one-second baseline does not already give.

Where the baselines come from is what ``units encode`` recorded in the folder it wrote
(:data:`~audiorepro.outputs.OUTPUT_RECORD`: the run folder, the audio folder, ``--speaker-of``
and ``--what``). Their rows are computed in memory (:func:`~audiorepro.experiments.zerospeech.
recordings.unit_rows`), exactly as ``units encode --what kmeans|frames`` would write them and
the scorer read them back, and scored by the same :func:`~audiorepro.metrics.abx.abx`.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from audiorepro.data.audio_identity import samples_sha256
from audiorepro.data.recipes.zerospeech import read_item_file
from audiorepro.data.recordings import find_wavs
from audiorepro.experiments.zerospeech.recordings import (
    ENCODE,
    load_units,
    output_frame_shift,
    unit_rows,
)
from audiorepro.experiments.zerospeech.units_bitrate import recorded_frame_shift
from audiorepro.metrics.abx import AbxResult, abx
from audiorepro.metrics.checks import ScoreError, ScoreWarning
from audiorepro.metrics.paired import MIN_WORDS, abx_difference
from audiorepro.outputs import OUTPUT_RECORD, changed_outputs, read_output_record, stale_inputs

CHANCE = 50.0
"""The ABX error of features that tell nothing apart (every triplet a tie)."""

BASELINES = ("kmeans", "frames")
"""The two baselines of a units folder, in the order they are printed."""

SUBJECTS = {
    "vectors": "the units",
    "codes": "the units",
    "kmeans": "the k-means units",
    "frames": "the input frames",
}
OBJECTS = {"kmeans": "the k-means baseline", "frames": "the input frames"}


@dataclass(frozen=True)
class Encoding:
    """What ``units encode`` recorded of a folder it wrote: where its baselines come from."""

    run: Path
    audio: Path
    speaker_of: str | None
    """``--speaker-of`` as given (a map file by its resolved path); ``None``: the run's rule."""
    what: str
    """``--what``: ``vectors``, ``codes``, ``frames`` or ``kmeans``."""


def encoding_of(submission: str | os.PathLike[str]) -> tuple[Encoding | None, str]:
    """``(encoding, "")`` of a folder ``units encode`` wrote, or ``(None, why)``: why no
    baseline can be scored beside it (no record, an older record, inputs changed since)."""
    folder = Path(submission)
    record = read_output_record(folder)
    if record is None:
        return None, (
            f"{folder} has no {OUTPUT_RECORD} of `audiorepro {ENCODE}` (made by hand or by "
            "another tool), so the run and audio its units came from are unknown"
        )
    if record["command"] != ENCODE:
        return None, f"{folder} holds the output of `{record['command']}`, not of `{ENCODE}`"
    given = record.get("given") or {}
    settings = record.get("request", {}).get("settings", {})
    if "RUN" not in given or "--audio" not in given:
        return None, (
            f"{folder / OUTPUT_RECORD} was written before `{ENCODE}` recorded its run and "
            "audio folders: encode it again (--force) to score the baselines beside it"
        )
    stale = stale_inputs(record)
    recorded = set(record["request"].get("inputs", {}))
    audio = Path(given["--audio"])
    if audio.is_dir():
        stale += sorted(str(p.resolve()) for p in find_wavs(audio).values()
                        if str(p.resolve()) not in recorded)  # fmt: skip
    run = Path(given["RUN"]).resolve()
    of_run = [p for p in stale if Path(p).is_relative_to(run)]
    if of_run:  # trained again (or changed) since: the units are the old model's
        return None, (
            f"the run {run} changed since `{ENCODE}` wrote {folder} ({len(of_run)} of its "
            f"files, first: {of_run[0]}): the units there are an earlier model's; encode the "
            "folder again (--force)"
        )
    if stale:
        return None, (
            f"{len(stale)} of the audio files `{ENCODE}` read changed, appeared or are gone "
            f"since it wrote {folder} (first: {stale[0]}): the baselines would not be of the "
            "same audio; encode the folder again (--force)"
        )
    if changed := changed_outputs(folder, record):
        return None, (
            f"{len(changed)} of the units files `{ENCODE}` wrote into {folder} changed or are "
            f"gone since (first: {changed[0]}): they may be another run's or another kind's, "
            "so the run's baselines would be set beside units they are not of; encode the "
            "folder again (--force)"
        )
    speaker_of = given.get("--speaker-of", settings.get("--speaker-of"))
    return Encoding(Path(given["RUN"]), audio, speaker_of, settings.get("--what", "vectors")), ""


@dataclass(frozen=True)
class ScoreRow:
    """One row of the side-by-side table: a kind of features and its ABX error."""

    what: str
    """``vectors``, ``codes``, ``kmeans`` or ``frames``."""
    name: str
    error: float | None
    """The ABX error in percent; ``None`` when the kind cannot be scored (``why``)."""
    frame_shift: float | None
    submission: bool = False
    why: str = ""
    by_pair: pd.DataFrame | None = field(default=None, compare=False, repr=False)
    """The score of each ordered word pair (:attr:`~audiorepro.metrics.abx.AbxResult.
    by_phone_pair`), for the paired comparison of :func:`verdict`; ``None``: not kept."""


def read_back(rows: np.ndarray) -> np.ndarray:
    """The frames the scorer reads from the file ``units encode`` writes of ``rows``: the
    float32 values (:func:`~audiorepro.experiments.zerospeech.submission.vector_lines` writes
    the shortest repr of each, read back exactly) as float64."""
    return np.asarray(rows, dtype=np.float32).astype(np.float64)


def row_name(what: str, run: object | None = None) -> str:
    """How a kind of features is named in the table (with its K or feature, when known)."""
    models = 1 + len(getattr(run, "members", ()))
    of = f", {models} models side by side" if models > 1 else ""
    if what == "kmeans":
        k = getattr(getattr(run, "config", None), "model", None)
        return f"k-means units (K = {k.codebook_size}{of})" if k is not None else "k-means units"
    if what == "frames":
        feature = getattr(run, "feature", None)
        return f"input frames ({feature}, 10 ms)" if feature else "input frames (10 ms)"
    return f"units ({'one-hot codes' if what == 'codes' else 'codebook vectors'}{of})"


def side_by_side(
    encoding: Encoding,
    result: AbxResult,
    item_file: str | os.PathLike[str],
    *,
    distance: str = "angular",
    mode: str = "across",
    frame_shift: float | None = None,
) -> list[ScoreRow]:
    """The submission's row (its ABX ``result``, scored from its files) and those of its
    baselines (:data:`BASELINES`, less the kind the folder itself holds), each scored by
    :func:`~audiorepro.metrics.abx.abx` on ``item_file`` with ``distance`` and ``mode``.

    Items in seconds (``frame_shift`` given, the submission's own) read each baseline at its
    own frame shift (10 ms for the frames, the code rate for the k-means units). A baseline
    that cannot be scored (a run without k-means units; ``kl`` on frames, ``levenshtein`` on
    real values) is a row without an error, saying why."""
    run = load_units(encoding.run)
    name = row_name(encoding.what, run)
    rows = [
        ScoreRow(encoding.what, name, result.error, frame_shift, True, "", result.by_phone_pair)
    ]
    for what in BASELINES:
        if what == encoding.what:
            continue  # the folder is this baseline: scored once, as the submission
        shift = None if frame_shift is None else output_frame_shift(run, what)
        score, why = None, ""
        scored: AbxResult | None = None
        try:
            if what == "kmeans":
                run.kmeans_baseline()  # a run without one says why (trained before, too short)
        except (FileNotFoundError, ValueError) as err:
            why = str(err)
        if not why:
            rows_of = unit_rows(run, encoding.audio, what, encoding.speaker_of)
            features = {name: read_back(x) for name, x in rows_of.items()}
            with warnings.catch_warnings():
                # the submission's items and triplets: its warnings were said once already
                warnings.simplefilter("ignore", ScoreWarning)
                try:
                    scored = abx(  # written here at their own frame shift
                        features, item_file, distance, mode, shift, shift_known=True
                    )
                    score = scored.error
                except ScoreError as err:
                    why = str(err)
        by_pair = scored.by_phone_pair if scored is not None else None
        rows.append(ScoreRow(what, row_name(what, run), score, shift, why=why, by_pair=by_pair))
    return rows


@dataclass(frozen=True)
class Scored:
    """What ``abx score`` prints of a folder: its error, the baselines beside it, why none."""

    error: float
    """The folder's ABX error in percent."""
    rows: list[ScoreRow]
    """The folder's row and its baselines' (:func:`side_by_side`); ``[]`` without baselines."""
    encoding: Encoding | None
    why: str
    """Why no baseline was scored (``""`` when they were, or were not asked for)."""

    def row(self, what: str) -> ScoreRow:
        """The row of ``what`` (``vectors``, ``codes``, ``kmeans``, ``frames``)."""
        return next(r for r in self.rows if r.what == what)


def score_folder(
    submission: str | os.PathLike[str],
    item_file: str | os.PathLike[str],
    *,
    distance: str = "angular",
    mode: str = "across",
    frame_shift: float | None = None,
    baselines: bool = True,
) -> Scored:
    """``abx score``: the ABX error of the folder ``submission`` on ``item_file`` and, for a
    folder ``units encode`` wrote (unless ``baselines`` is false), its baselines on the same
    items (:func:`side_by_side`). A ``frame_shift`` other than the one ``units encode``
    recorded writing the folder is refused (:func:`recorded_frame_shift`); equal to it, the
    items are scored wherever in their files they lie."""
    own = None if frame_shift is None else recorded_frame_shift(submission)  # relative: none
    if frame_shift is not None and own is not None and not math.isclose(own, frame_shift):
        raise ValueError(
            f"{submission}: `{ENCODE}` wrote a line every {own:g} s ({OUTPUT_RECORD}), but "
            f"--frame-shift is {frame_shift:g} s: the item times would be read at another "
            f"frame rate than the lines'; give --frame-shift {own:g}"
        )
    result = abx(
        submission, item_file, distance=distance, mode=mode, frame_shift=frame_shift,
        shift_known=own is not None,
    )  # fmt: skip
    warn_of_trained_files(submission, item_file)
    encoding, why = (None, "") if not baselines else encoding_of(submission)
    if encoding is None:
        return Scored(result.error, [], None, why)
    rows = side_by_side(
        encoding, result, item_file, distance=distance, mode=mode, frame_shift=frame_shift
    )
    return Scored(result.error, rows, encoding, "")


def warn_of_trained_files(
    submission: str | os.PathLike[str], item_file: str | os.PathLike[str]
) -> int:
    """A :class:`~audiorepro.metrics.checks.ScoreWarning` when the files an item file cuts its
    items from are recordings the run of a ``units encode`` folder trained on (the same bytes,
    by the SHA-256 both commands recorded, or the same decoded samples: a FLAC export of a
    training file), as ``awe ap`` warns of rows the run trained on:
    ``units train`` found its pairs across speakers among those very files. Returns how many
    (0 for a folder without the records)."""
    record = read_output_record(Path(submission))
    if record is None or record.get("command") != ENCODE:
        return 0
    run = (record.get("given") or {}).get("RUN")
    audio = (record.get("given") or {}).get("--audio")
    trained = read_output_record(Path(run)) if run else None
    if trained is None or not audio or not Path(audio).is_dir():
        return 0
    trained_inputs = trained.get("request", {}).get("inputs", {})
    heard = set(trained_inputs.values())
    encoded = record.get("request", {}).get("inputs", {})
    wavs = find_wavs(audio)
    scored = {it.file for it in read_item_file(Path(item_file))}
    paths = [str(wavs[f].resolve()) for f in sorted(scored) if f in wavs]
    unseen = [p for p in paths if encoded.get(p) not in heard]
    if unseen:  # the same samples in other bytes (a FLAC export, a re-saved WAV): heard too
        sounds = {samples_sha256(p) for p in trained_inputs if Path(p).is_file()} - {None}
        same = {p for p in unseen if samples_sha256(p) in sounds}
    else:
        same = set()
    seen = len(paths) - len(unseen) + len(same)
    if seen:
        warnings.warn(
            f"{submission}: {seen} of the {len(paths)} files the items are cut from are "
            f"recordings the run {run} trained on (the same bytes or the same samples): the "
            "ABX tells how well its units fit audio they have heard (`units train` found its "
            "pairs across speakers among them), not how they encode new recordings; score "
            "recordings it did not train on",
            ScoreWarning,
            stacklevel=3,
        )
    return seen


def _percent_pair(a: float, b: float) -> str:
    """``"22.8 % vs 17.0 %"`` with the fewest decimals (1 to 3) that tell the two apart."""
    digits = next((d for d in (1, 2) if f"{a:.{d}f}" != f"{b:.{d}f}"), 3)
    return f"{a:.{digits}f} % vs {b:.{digits}f} %"


def verdict(rows: Sequence[ScoreRow]) -> str:
    """One plain sentence: whether the submission's ABX error is below that of each baseline
    that was scored (a lower error is better; equal is not beating it). Rows that keep their
    word pairs' scores (``by_pair``) are compared pair by pair
    (:func:`~audiorepro.metrics.paired.abx_difference`): one beats the other only when the
    difference holds over draws of the words, else the two cannot be told apart; with fewer
    than :data:`~audiorepro.metrics.paired.MIN_WORDS` words, by the numbers alone, and the
    sentence says so."""
    main = next(r for r in rows if r.submission)
    scored = [r for r in rows if not r.submission and r.error is not None]
    subject = SUBJECTS[main.what]
    if main.error is None or not scored:
        return f"no baseline could be scored beside {subject} (see above)"
    beaten, not_beaten, level = [], [], []
    few = None
    for r in scored:
        paired = (
            abx_difference(main.by_pair, r.by_pair)
            if main.by_pair is not None and r.by_pair is not None
            else None
        )
        if main.by_pair is not None and r.by_pair is not None and paired is None:
            few = len(set(main.by_pair["phone_1"]) | set(main.by_pair["phone_2"]))
        if paired is not None and not paired.clear:
            level.append((r, paired))
        elif main.error < r.error:
            beaten.append(r)
        else:
            not_beaten.append(r)

    def part(r: ScoreRow) -> str:
        return f"{OBJECTS[r.what]} ({_percent_pair(main.error, r.error)})"

    clauses = []
    if beaten and not_beaten:
        clauses.append(
            f"{subject} beat {' and '.join(part(r) for r in beaten)} but not "
            f"{' nor '.join(part(r) for r in not_beaten)}"
        )
    elif beaten:
        clauses.append(f"{subject} beat " + " and ".join(part(r) for r in beaten))
    elif not_beaten:
        clauses.append(f"{subject} do not beat " + " nor ".join(part(r) for r in not_beaten))
    for r, paired in level:
        clauses.append(
            f"{subject} and {OBJECTS[r.what]} cannot be told apart on these items "
            f"({_percent_pair(main.error, r.error)}; {paired.interval('points')})"
        )
    if few is not None:
        clauses.append(
            f"{few} words are too few (fewer than {MIN_WORDS}) to test whether that holds for "
            "other words"
        )
    return "; ".join(clauses)


def score_table(rows: Sequence[ScoreRow], mode: str, distance: str) -> list[str]:
    """The lines of the side-by-side table: what, ABX error %, then chance (50 %); a row that
    could not be scored says why below the table."""
    names = [f"{r.name}{' (this folder)' if r.submission else ''}" for r in rows]
    width = max(len(n) for n in [*names, "what", "chance"])
    seconds = any(r.frame_shift is not None for r in rows)
    head = f"{'what':<{width}}  {'ABX error %':>11}" + ("  frame shift" if seconds else "")
    lines = [f"ABX error, {mode} speakers, {distance} distance:", head]
    for name, r in zip(names, rows, strict=True):
        value = f"{r.error:11.3f}" if r.error is not None else f"{'not scored':>11}"
        shift = f"  {r.frame_shift:g} s" if seconds and r.frame_shift is not None else ""
        lines.append(f"{name:<{width}}  {value}{shift}")
    lines.append(f"{'chance':<{width}}  {CHANCE:11.3f}")
    lines += [f"{r.name}: not scored: {r.why}" for r in rows if r.error is None and r.why]
    return lines
