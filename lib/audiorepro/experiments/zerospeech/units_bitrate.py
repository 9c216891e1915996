"""The bitrate of a folder ``units encode`` wrote (``audiorepro units bitrate``), checked
against the recordings it encodes: the durations from the audio or an official file list, and
each file's lines against its duration at the frame shift its record gives."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from audiorepro.data.recordings import InputWarning, find_wavs
from audiorepro.experiments.zerospeech.recordings import ENCODE, load_units, output_frame_shift
from audiorepro.features import audio_info
from audiorepro.metrics.bitrate import (
    bitrate_from_submission,
    bitrate_of_files,
    read_bitrate_filelist,
)
from audiorepro.outputs import read_output_record


def recorded_frame_shift(submission: str | os.PathLike[str]) -> float | None:
    """The seconds between the lines of a folder ``units encode`` wrote, from its record (the
    run and ``--what``), or ``None`` when the folder has no such record or its run is gone."""
    record = read_output_record(Path(submission))
    if record is None or record.get("command") != ENCODE:
        return None
    run = (record.get("given") or {}).get("RUN")
    what = record.get("request", {}).get("settings", {}).get("--what", "vectors")
    try:
        return output_frame_shift(load_units(run), what) if run else None
    except (OSError, ValueError, KeyError):  # the run moved or is not one: shift unknown
        return None


def submission_bitrate(
    submission: str | os.PathLike[str],
    *,
    audio: str | os.PathLike[str] | None = None,
    filelist: str | os.PathLike[str] | None = None,
) -> float:
    """Bitrate (bits/s) of a units folder as ZeroSpeech 2019 scores it, ``N · H / D``: the
    durations D from the audio files themselves (``audio``, the folder ``units encode`` read:
    one ``<file id>.txt`` per file) or from an official bitrate file list (``filelist``:
    ``<name>.txt <seconds>`` lines). Give exactly one. With a file list, files without a
    ``.txt`` in ``submission`` count for neither N nor D, as in the official evaluation.

    With ``audio``, every file must have its ``.txt`` (a missing one is an error naming it and
    the count: the folder was encoded from other audio); for a folder ``units encode`` wrote,
    each file's lines must cover its duration at the recorded frame shift (else an error:
    other recordings of the same names); ``.txt`` files of the folder without audio under
    ``audio`` count for nothing, and an :class:`InputWarning` says how many."""
    if (audio is None) == (filelist is None):
        raise ValueError("give the durations: audio=DIR or filelist=FILE (exactly one)")
    if filelist is not None:
        if Path(submission).is_dir():
            listed = read_bitrate_filelist(filelist)
            _check_lines_cover(Path(submission), listed, filelist)
            _warn_of_list_coverage(Path(submission), listed, filelist)
        return bitrate_from_submission(submission, filelist)
    entries = []
    for name, path in find_wavs(audio).items():
        num_samples, sr, _ = audio_info(path)
        entries.append((f"{name}.txt", num_samples / sr))
    folder = Path(submission)
    missing = [name for name, _ in entries if not (folder / name).is_file()]
    if missing and folder.is_dir():
        raise FileNotFoundError(
            f"{submission}: no {missing[0]} (and {len(missing) - 1} more of the "
            f"{len(entries)} audio files of {audio}): encode this folder with `units encode`"
        )
    if folder.is_dir():
        _check_bitrate_audio(folder, audio, entries)
    return bitrate_of_files(submission, entries, f"of {audio} (as <file id>.txt)")


def _check_bitrate_audio(
    folder: Path, audio: str | os.PathLike[str], entries: Sequence[tuple[str, float]]
) -> None:
    """:func:`submission_bitrate`'s checks of ``audio`` against the units folder."""
    given = {name for name, _ in entries}
    extra = sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*.txt")
        if str(p.relative_to(folder)) not in given
    )
    if extra:
        warnings.warn(
            f"{folder}: bitrate of {len(given)} of its {len(given) + len(extra)} units files: "
            f"{len(extra)} have no audio file under {audio} (first: {extra[0]}) and count for "
            "nothing; give the folder `units encode` read",
            InputWarning,
            stacklevel=3,
        )
    _check_lines_cover(folder, entries, audio)


def _warn_of_list_coverage(
    folder: Path, listed: Sequence[tuple[str, float]], filelist: str | os.PathLike[str]
) -> None:
    """An :class:`InputWarning` when a bitrate list and a units folder do not hold the same
    files: list lines without a units file count for neither N nor D (the official rule), and
    units files the list does not name count for nothing; either way the bitrate is of a part,
    as with ``--audio`` (a list of another split, or an old one)."""
    names = {name for name, _ in listed}
    have = {str(p.relative_to(folder)) for p in folder.rglob("*.txt")}
    absent = sorted(names - have)
    unlisted = sorted(have - names)
    if absent or unlisted:
        parts = []
        if absent:
            parts.append(
                f"{len(absent)} of the {len(names)} files of {filelist} have no units file here "
                f"(first: {absent[0]}) and count for neither N nor D, as the official "
                "evaluation skips them"
            )
        if unlisted:
            parts.append(
                f"{len(unlisted)} of the {len(have)} units files are not in the list (first: "
                f"{unlisted[0]}) and count for nothing"
            )
        warnings.warn(
            f"{folder}: bitrate of {len(names & have)} files: "
            + "; ".join(parts)
            + "; give the list of the files this folder encodes",
            InputWarning,
            stacklevel=3,
        )


def _check_lines_cover(
    folder: Path, entries: Sequence[tuple[str, float]], source: str | os.PathLike[str]
) -> None:
    """For a folder ``units encode`` wrote (its frame shift recorded): each listed file's lines
    must cover its duration in ``entries`` (``source``: the audio folder or the bitrate list
    they come from), else a ``ValueError``: other recordings, or durations in other units."""
    shift = recorded_frame_shift(folder)
    if shift is None:
        return
    for name, seconds in entries:
        if not (folder / name).is_file():
            continue
        lines = sum(1 for line in open(folder / name, encoding="utf-8") if line.strip())
        if abs(lines * shift - seconds) > max(2 * shift, 0.05 * seconds):
            hint = (
                " (durations in milliseconds?)" if abs(lines * shift * 1000 - seconds) <
                0.05 * seconds + 2 else " (other recordings of the same names?)"
            )  # fmt: skip
            raise ValueError(
                f"{folder / name}: {lines} lines, a line every {shift:g} s: {lines * shift:.2f} "
                f"s of units for {seconds:g} s of audio in {source}: these are not the "
                f"durations of the recordings `units encode` read{hint}"
            )
