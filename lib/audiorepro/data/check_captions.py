"""Check an audio-caption corpora folder before preparing it, reporting every problem at once.

The recipes stop at the first problem they meet (they must not write half a manifest). Before
running them on a large download, this check lists *all* problems of a folder holding
``clotho/``, ``audiocaps/`` and/or ``wavcaps/`` in their distributed formats::

    python -m audiorepro.data.check_captions /data/real

One line per problem, ``path[:line]: message``: a captions CSV with other columns than the
format's (expected and found are shown), an empty or duplicate Clotho ``file_name``, an empty
caption, a listed audio file that is missing,
unreadable, or shorter than one PaSST patch (16 frames of 10 ms plus the STFT window). Exit
status 0 without problems, 1 with, 2 when the folder holds none of the three corpora.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import soundfile

from audiorepro.data.recipes.audiocaps import COLUMNS as AUDIOCAPS_COLUMNS
from audiorepro.data.recipes.clotho import CAPTION_COLUMNS, CLOTHO_SPLITS
from audiorepro.data.recipes.wavcaps import WAVCAPS_SOURCES

MIN_SECONDS = (16 * 320 + 1024) / 32000
"""Shortest usable audio: one 16-frame patch of PaSST's log-mel (10 ms hop, 1024-point FFT)."""


def _check_audio(path: Path, where: str, problems: list[str]) -> None:
    if not path.is_file():
        problems.append(f"{where}: audio file listed here is missing: {path}")
        return
    try:
        info = soundfile.info(str(path))
    except (RuntimeError, OSError, soundfile.LibsndfileError) as err:
        problems.append(f"{path}: cannot read the audio file: {err}")
        return
    if info.frames / info.samplerate < MIN_SECONDS:
        problems.append(
            f"{path}: {info.frames / info.samplerate:.3f} s of audio is shorter than one PaSST "
            f"patch ({MIN_SECONDS:.3f} s)"
        )


def _rows(path: Path, expected: Sequence[str], problems: list[str]):
    """(line, row dict) of a CSV; a wrong header is one problem and ends the file."""
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or [h.strip() for h in header] != list(expected):
            found = ",".join(header or [])
            problems.append(
                f"{path}:1: wrong CSV columns: expected {','.join(expected)!r}, got {found!r}"
            )
            return
        line = reader.line_num + 1
        for row in reader:
            if len(row) != len(expected):
                problems.append(f"{path}:{line}: expected {len(expected)} fields, got {len(row)}")
            else:
                yield line, {k: v.strip() for k, v in zip(expected, row, strict=True)}
            line = reader.line_num + 1


def check_clotho(folder: Path) -> list[str]:
    """Every problem of a ClothoV2 folder (all splits present)."""
    problems: list[str] = []
    for split in CLOTHO_SPLITS:
        path = folder / f"clotho_captions_{split}.csv"
        if not path.is_file():
            continue
        audio_dir = next(
            (folder / d for d in (f"clotho_audio_{split}", split) if (folder / d).is_dir()),
            folder / split,
        )
        first_line: dict[str, int] = {}
        for line, row in _rows(path, CAPTION_COLUMNS, problems):
            name = row["file_name"]
            if not name:
                problems.append(f"{path}:{line}: empty file_name")
                continue
            if name in first_line:
                problems.append(
                    f"{path}:{line}: duplicate file_name {name!r} (first on line "
                    f"{first_line[name]})"
                )
                continue
            first_line[name] = line
            for k in range(1, 6):
                if not row[f"caption_{k}"]:
                    problems.append(f"{path}:{line}: caption_{k} of {row['file_name']!r} is empty")
            _check_audio(audio_dir / row["file_name"], f"{path}:{line}", problems)
    return problems


def check_audiocaps(folder: Path) -> list[str]:
    """Every problem of an AudioCaps folder (``dataset/{train,val,test}.csv`` + ``audio/``)."""
    problems: list[str] = []
    for split in ("train", "val", "test"):
        path = folder / "dataset" / f"{split}.csv"
        if not path.is_file():
            continue
        seen: set[str] = set()
        for line, row in _rows(path, AUDIOCAPS_COLUMNS, problems):
            if not row["caption"]:
                problems.append(f"{path}:{line}: caption of {row['audiocap_id']!r} is empty")
            stem = f"Y{row['youtube_id']}"
            if stem in seen:
                continue
            seen.add(stem)
            audio = next(
                (folder / "audio" / f"{stem}{e}" for e in (".wav", ".flac", ".mp3")
                 if (folder / "audio" / f"{stem}{e}").is_file()),
                folder / "audio" / f"{stem}.wav",
            )  # fmt: skip
            _check_audio(audio, f"{path}:{line}", problems)
    return problems


def check_wavcaps(folder: Path) -> list[str]:
    """Every problem of a WavCaps folder (``json_files/<Source>/*.json`` + ``audio/``)."""
    problems: list[str] = []
    for source, names in WAVCAPS_SOURCES.items():
        path = next(
            (folder / "json_files" / source / n for n in names
             if (folder / "json_files" / source / n).is_file()),
            None,
        )  # fmt: skip
        if path is None:
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            problems.append(f"{path}: not valid JSON: {err}")
            continue
        entries = data.get("data", []) if isinstance(data, dict) else data
        for i, entry in enumerate(entries):
            where = f"{path}: data[{i}]"
            if not isinstance(entry, dict) or "id" not in entry:
                problems.append(f"{where}: expected an object with an id")
                continue
            if not str(entry.get("caption", "")).strip():
                problems.append(f"{where}: caption of {entry['id']!r} is empty")
            stem = str(entry["id"]).removesuffix(".wav")
            audio = next(
                (folder / "audio" / source / f"{stem}{e}" for e in (".flac", ".wav", ".mp3")
                 if (folder / "audio" / source / f"{stem}{e}").is_file()),
                folder / "audio" / source / f"{stem}.flac",
            )  # fmt: skip
            _check_audio(audio, where, problems)
    return problems


def check_caption_corpora(corpora_dir: str | os.PathLike[str]) -> list[str]:
    """Every problem of the ``clotho/``, ``audiocaps/``, ``wavcaps/`` folders present."""
    root = Path(corpora_dir)
    problems: list[str] = []
    for name, check in (
        ("clotho", check_clotho),
        ("audiocaps", check_audiocaps),
        ("wavcaps", check_wavcaps),
    ):
        if (root / name).is_dir():
            problems += check(root / name)
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m audiorepro.data.check_captions",
        description="List every problem of ClothoV2/AudioCaps/WavCaps folders before preparing.",
    )
    parser.add_argument("corpora_dir", type=Path, help="folder with clotho/ audiocaps/ wavcaps/")
    args = parser.parse_args(argv)
    if not any((args.corpora_dir / c).is_dir() for c in ("clotho", "audiocaps", "wavcaps")):
        parser.error(f"{args.corpora_dir}: holds none of clotho/, audiocaps/, wavcaps/")
    problems = check_caption_corpora(args.corpora_dir)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in {args.corpora_dir}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
