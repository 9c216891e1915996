"""An ``awe embed`` ``.npz`` read back: its arrays checked (:func:`embeddings_ap`), and the
segments-table rows it embedded found again for the MFCC + DTW baseline (:func:`embedded_rows`),
only while the table and every audio file it read are as they were."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.data.audio_identity import samples_sha256
from audiorepro.data.recordings import (
    RecordingsError,
    SameTokens,
    Segment,
    read_segments,
    word_label,
)
from audiorepro.metrics.average_precision import same_different_ap
from audiorepro.metrics.checks import ScoreError, check_no_repeats, check_speakers, naming, weak
from audiorepro.storage import known_file_sha256, load_npz

EMBEDDED = ("segments", "segments_sha256", "rows")
"""The arrays of an ``awe embed`` .npz that say what it embedded: the segments table (resolved
path), its SHA-256 then, and the table line of each embedding's row, in order."""

AUDIO = ("audio_files", "audio_sha256")
"""The arrays of an ``awe embed`` .npz that say which audio it read: each file of its rows
(resolved path, once) and its SHA-256 then. A file changed since (re-normalised, denoised,
exported again at the same length) would give the baseline frames other than the
embeddings'."""


def audio_identity(rows: list[Segment]) -> dict[str, np.ndarray]:
    """The :data:`AUDIO` arrays of ``rows``: every audio file once, in the rows' order."""
    files = list(dict.fromkeys(str(r.path.resolve()) for r in rows))
    return {
        "audio_files": np.asarray(files),
        "audio_sha256": np.asarray([known_file_sha256(f) for f in files]),
    }


def changed_audio(archive: dict[str, Any]) -> str:
    """Why the audio an ``.npz`` embedded is no longer what it was (:data:`AUDIO`): how many of
    its files are gone or changed, and the first; ``""`` when none is, or it does not say."""
    if any(name not in archive for name in AUDIO):
        return ""
    files = np.asarray(archive["audio_files"]).reshape(-1).tolist()
    then = np.asarray(archive["audio_sha256"]).reshape(-1).tolist()
    changed = [
        f
        for f, sha in zip(files, then, strict=False)
        if not os.path.isfile(f) or known_file_sha256(f) != sha
    ]
    if not changed:
        return ""
    return (
        f"{len(changed)} of the {len(files)} audio files `awe embed` read changed since or are "
        f"gone (first: {changed[0]}): the baseline would read other audio than the embeddings "
        "did; embed them again"
    )


def _text(label: Any, path: Path, row: int) -> str:
    """A label of an ``.npz`` as the text of a word: bytes (``.astype('S')``) decoded as
    UTF-8, a number (words that are digits, saved as integers) written in digits."""
    if isinstance(label, bytes):
        try:
            return label.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{path}: labels: row {row + 1} is bytes that are not UTF-8 ({label!r}): "
                "save the words as strings: np.savez(..., labels=np.asarray(words, dtype=str))"
            ) from err
    return str(label)


def _embeddings(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``(arrays, labels)`` of an embeddings ``.npz``: labels as words are compared
    (:data:`~audiorepro.data.recordings.WORD_RULE`), those saved as bytes or integers too
    (:func:`_text`), so they match the words of the table they came from; a missing file or
    array, or a table row embedded twice (:func:`~audiorepro.metrics.checks.check_no_repeats`
    of ``rows``), is an error naming the file."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: a folder; give the .npz file `awe embed` wrote")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such embeddings file")
    # a .npy, a truncated or a corrupt archive: an ArrayFileError naming the file
    archive = load_npz(path, expected="the .npz of `awe embed` (embeddings, labels)")
    for name in ("embeddings", "labels"):
        if name not in archive:
            raise KeyError(f"{path}: no array {name!r} (has {', '.join(archive)})")
    if "rows" in archive:
        table = f" (lines of {archive['segments']})" if "segments" in archive else ""
        with naming(path):
            check_no_repeats(np.asarray(archive["rows"]).reshape(-1), f"rows{table}", "line")
    labels = archive["labels"]
    # words as training and tables compare them (WORD_RULE)
    if labels.dtype.kind == "U" or (labels.dtype.kind in "Siu" and labels.ndim == 1):
        labels = np.asarray([word_label(_text(w, path, i)) for i, w in enumerate(labels)])
        empty = np.flatnonzero(labels.reshape(-1) == "")
        if len(empty):  # a segments table refuses an empty word: so does its .npz
            raise ValueError(
                f"{path}: labels: row {int(empty[0]) + 1} is empty ({len(empty)} of the "
                f"{labels.size} rows): every row needs its word; empty labels would be scored "
                "as one word"
            )
    return dict(archive), labels


def embeddings_of(path: str | os.PathLike[str]) -> np.ndarray:
    """The ``embeddings`` array of an ``awe embed`` .npz, as float64, one row per label (the
    checks of :func:`embeddings_ap`, which reads it first, named the file)."""
    archive, _ = _embeddings(path)
    return np.asarray(archive["embeddings"], dtype=np.float64)


def embedded_norm(path: str | os.PathLike[str]) -> str:
    """The features' normalisation of the run that wrote an ``awe embed`` .npz (``file`` for
    one from before it was recorded): the MFCC + DTW baseline reads the same frames."""
    archive, _ = _embeddings(path)
    return str(archive["feature_norm"]) if "feature_norm" in archive else "file"


def embeddings_ap(path: str | os.PathLike[str]) -> float:
    """Same-different AP (cosine) of an ``.npz`` with ``embeddings`` (N, D) and ``labels`` (N,)
    arrays, as :func:`embed_table` writes; a missing file or array, a repeated row, or arrays
    the AP cannot score (a row of NaN or of zeros, shapes that disagree) are errors naming
    it."""
    archive, labels = _embeddings(path)
    with naming(path):  # errors and warnings of the score name the file
        speakers = np.asarray(archive["speakers"]) if "speakers" in archive else None
        rows = len(np.asarray(archive["embeddings"]))
        if speakers is not None and speakers.shape != (rows,):
            raise ValueError(
                f"{path}: speakers: shape {speakers.shape} for {rows} embeddings (one "
                "speaker a row)"
            )
        check_speakers(archive["speakers"] if "speakers" in archive else None, "speakers")
        seen = trained_here(archive, rows)
        if seen:
            weak(
                f"{seen} of the {len(labels)} rows are rows the run trained on (or chose its "
                "epoch on): the AP tells how well it fits tokens it has heard, not how it "
                "embeds new recordings"
            )
        try:
            return float(same_different_ap(archive["embeddings"], labels))
        except ScoreError:
            raise  # named by naming()
        except ValueError as err:  # the arrays' checks name the array, not the file
            raise ValueError(f"{path}: {err}") from None


def embedded_rows(path: str | os.PathLike[str]) -> tuple[list[Segment] | None, str]:
    """``(rows, "")``: the segments-table rows an ``awe embed`` .npz embedded, one per
    embedding in its order; or ``(None, why)`` when they cannot be known (an .npz made by
    hand, a table that is gone or changed since, rows that no longer match the labels)."""
    archive, labels = _embeddings(path)
    missing = [name for name in EMBEDDED if name not in archive]
    if missing:
        return None, (
            f"{path} does not say which segments it embeds (no {', '.join(missing)}: not "
            "written by `audiorepro awe embed`, or by one from before it recorded them)"
        )
    table = Path(str(archive["segments"]))
    if not table.is_file():
        return None, f"{table}, the segments table `awe embed` read, is gone"
    if known_file_sha256(table) != str(archive["segments_sha256"]):
        return None, f"{table} changed since `awe embed` read it: embed it again"
    if changed := changed_audio(archive):
        return None, changed
    try:
        by_line = {r.line: r for r in read_segments(table)}
    except RecordingsError as err:  # its audio moved or changed length
        return None, f"the segments `awe embed` read cannot be read again: {err}"
    lines = archive["rows"].tolist()
    rows = [by_line.get(line) for line in lines]
    if None in rows or len(rows) != len(labels) or [r.word for r in rows] != labels.tolist():
        return None, f"{path}: its rows and labels do not match the lines of {table}"
    return rows, ""


def trained_here(archive: dict[str, Any], rows: int) -> int:
    """How many of the ``rows`` rows of an ``.npz`` the run trained on: its ``trained`` array
    (a flag a row) counted on the rows it holds now, so a file cut down by hand counts its own;
    an ``.npz`` from before it had one gives its count of the rows it was written with, never
    more than it holds."""
    if "trained" in archive:
        flags = np.asarray(archive["trained"]).reshape(-1)
        if flags.shape == (rows,):
            return int(flags.astype(bool).sum())
    return min(int(archive["trained_rows"]), rows) if "trained_rows" in archive else 0


def trained_rows(
    run: str | os.PathLike[str],
) -> tuple[list[str], set[tuple[Any, Any, Any]], SameTokens]:
    """``(tables, rows)``: the segments tables ``awe train`` read for ``run`` (its
    ``--segments`` and ``--dev``, from the run's record) and their rows as ``(resolved file,
    start, end)`` and as ``(the file's SHA-256, start, end)`` (a copy of a training file in
    another folder is the same recording), as ``("samples", SHA-256 of the decoded samples,
    start, end)`` (so is its FLAC export), and the rows as :class:`SameTokens` (a token cut
    again with other boundaries); nothing for a run without a record or tables that are
    gone."""
    from audiorepro.outputs import read_output_record

    record = read_output_record(Path(run)) or {}
    given = record.get("given") or {}
    tables, rows, every = [], set(), []
    for option in ("--segments", "--dev"):
        table = given.get(option)
        if not table or not Path(table).is_file():
            continue
        try:
            found = read_segments(table, check_audio=False)
        except RecordingsError:  # changed into something else: no longer what it trained on
            continue
        tables.append(str(table))
        every += [r for r in found if r.path.is_file()]
        rows |= {(r.path.resolve(), r.start, r.end) for r in found}
        rows |= {(known_file_sha256(r.path), r.start, r.end) for r in found if r.path.is_file()}
        rows |= {("samples", s, r.start, r.end) for r in found if (s := samples_of(r.path))}
    return tables, rows, SameTokens(every)


def samples_of(path: Path) -> str | None:
    """The SHA-256 of a file's decoded samples (a FLAC or re-saved copy of a training file is
    the same recording), ``None`` for a file that is not there or does not decode."""
    return samples_sha256(path) if path.is_file() else None
